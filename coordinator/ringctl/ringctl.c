/*
 * ringctl.c: the operator CLI's entry point. Reads the global options up to
 * the command name, dispatches through the command table, and turns a
 * failed write of the output into exit code 1.
 *
 * Sections: commands; help; main. The commands are listed in
 * ringctl_commands.c.
 *
 * Usage: ringctl [GLOBAL OPTIONS] COMMAND [OPTIONS]
 */
#include "ringctl.h"

#include "daemon.h" /* rd_version_print */

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ commands */

/* Runs a command with its name in the message prefix ("ringctl simulate:"). */
static int run_command(const ringctl_command *c, ringctl_args *a) {
  char prog[64];
  const char *outer = a->prog;
  snprintf(prog, sizeof prog, "ringctl %s", c->name);
  a->prog = prog;
  int rc = c->run(a);
  a->prog = outer; /* prog dies with this frame */
  return rc;
}

/* ------------------------------------------------------------------ help */

void ringctl_print_usage(FILE *f) {
  size_t n;
  const ringctl_command *const *cmds = ringctl_commands(&n);
  fputs("Usage: ringctl [GLOBAL OPTIONS] COMMAND [OPTIONS]\n"
        "       ringctl help COMMAND\n"
        "       ringctl --version\n"
        "\n"
        "Commands:\n",
        f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "  %-12s %s\n", cmds[i]->name, cmds[i]->summary);
  fputs("\nGlobal options (before or after the command):\n", f);
  fputs(ringctl_global_help, f);
  fputs("\nExit codes: 0 success, 1 runtime failure (a run that failed), 2 usage error,\n"
        "3 conflict, 4 could not tell (etcd unreachable until --timeout).\n",
        f);
}

/* Runs `cmd --help` for `ringctl help [COMMAND]`. */
static int help_command(ringctl_args *a) {
  const char *name = NULL;
  int r = ringctl_next_opt(a, NULL, &name);
  if (r == RINGCTL_ARG_ERROR)
    return RINGCTL_EXIT_USAGE;
  if (r != RINGCTL_ARG_POSITIONAL) {
    ringctl_print_usage(stdout);
    return RINGCTL_EXIT_OK;
  }
  const ringctl_command *c = ringctl_command_find(name);
  if (c == NULL)
    return ringctl_usage_error(a, "unknown command \"%s\"", name);
  char help[] = "--help";
  char *argv[] = {help, NULL};
  ringctl_args sub = {1, argv, 0, a->prog, a->globals, false};
  return run_command(c, &sub);
}

/* ------------------------------------------------------------------ main */

/* Output that could not be written is a failure, whatever the command
 * returned: a script reading a truncated table must not see success. */
static int finish(int rc) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "ringctl: writing output: %s\n", strerror(errno));
    return RINGCTL_EXIT_FAILURE;
  }
  return rc;
}

/* What only the first word may be: --version, and --man, which prints the
 * manual page (CMake runs it at build time; not in --help). */
enum { TOP_VERSION, TOP_MAN };
static const ringctl_opt top_opts[] = {
    {"version", TOP_VERSION, false}, {"man", TOP_MAN, false}, {NULL, 0, false}};

static int dispatch(ringctl_args *a) {
  const char *name = NULL;
  switch (ringctl_next_opt(a, a->next == 1 ? top_opts : NULL, &name)) {
  case RINGCTL_ARG_HELP:
    ringctl_print_usage(stdout);
    return RINGCTL_EXIT_OK;
  case RINGCTL_ARG_END:
    ringctl_print_usage(stderr);
    return RINGCTL_EXIT_USAGE;
  case TOP_VERSION:
    rd_version_print("ringctl");
    return RINGCTL_EXIT_OK;
  case TOP_MAN:
    ringctl_man_print(stdout);
    return RINGCTL_EXIT_OK;
  case RINGCTL_ARG_POSITIONAL:
    break;
  default:
    return RINGCTL_EXIT_USAGE; /* the reader printed why */
  }
  if (strcmp(name, "help") == 0)
    return help_command(a);
  const ringctl_command *c = ringctl_command_find(name);
  if (c == NULL)
    return ringctl_usage_error(a, "unknown command \"%s\"", name);
  return run_command(c, a);
}

int main(int argc, char **argv) {
  ringctl_globals globals = {.json = false};
  ringctl_args a = {argc, argv, 1, "ringctl", &globals, false};
  return finish(dispatch(&a));
}
