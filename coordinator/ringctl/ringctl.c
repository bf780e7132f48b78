/*
 * ringctl.c: the operator CLI's entry point. Reads the global options up to
 * the command name, dispatches through the command table, and turns a
 * failed write of the output into exit code 1.
 *
 * Sections: the command table; help; main.
 *
 * Usage: ringctl [GLOBAL OPTIONS] COMMAND [OPTIONS]
 */
#include "ringctl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------ the command table */

typedef struct command {
  const char *name;            /* what the operator types */
  int (*run)(ringctl_args *a); /* reads a's options, returns an exit code */
  const char *summary;         /* one line for `ringctl --help` */
} command;

/* One line per command, in the order `ringctl --help` lists them. */
static const command commands[] = {
    {"init", ringctl_cmd_init, "create the cluster: tokens, replicas, failure domain, limits"},
    {"status", ringctl_cmd_status, "version, leader, nodes and their shares, current plan"},
    {"members", ringctl_cmd_members, "every node in full: state, liveness, acks, labels"},
    {"plan", ringctl_cmd_plan, "show the proposed plan, save it (-o), or plan a what-if"},
    {"apply", ringctl_cmd_apply, "approve the proposed plan (or ID, or a saved FILE)"},
    {"pause", ringctl_cmd_pause, "pause the active plan after its moves in flight"},
    {"resume", ringctl_cmd_resume, "resume a paused plan"},
    {"cancel", ringctl_cmd_cancel, "cancel the active plan: unfinished moves are dropped"},
    {"accept-loss", ringctl_cmd_accept_loss,
     "let stuck moves complete empty: their data is written off (--yes)"},
    {"recover", ringctl_cmd_recover,
     "after an etcd restore: rebuild the table from what hosts hold (--yes)"},
    {"drain", ringctl_cmd_drain, "move every replica off a node"},
    {"undrain", ringctl_cmd_undrain, "let a drained node take its share again"},
    {"weight", ringctl_cmd_weight, "change a node's weight (capacity)"},
    {"label", ringctl_cmd_label, "set or remove a node's labels (its failure domains)"},
    {"remove", ringctl_cmd_remove, "forget a drained or down node that owns nothing"},
    {"replace", ringctl_cmd_replace, "a new node takes an old one's token-replicas one for one"},
    {"throttle", ringctl_cmd_throttle, "show or change the migration limits"},
    {"auto-apply", ringctl_cmd_auto_apply,
     "show or change which plans run without apply: none, repair or all"},
    {"balance", ringctl_cmd_balance, "show or change what plans balance: tokens or bytes held"},
    {"lookup", ringctl_cmd_lookup, "which nodes own a key"},
    {"history", ringctl_cmd_history, "finished plans, then the journal of operators' changes"},
    {"diff", ringctl_cmd_diff, "what changed between two table versions, per node and move"},
    {"verify", ringctl_cmd_verify, "check every placement invariant on the live table"},
    {"render", ringctl_cmd_render, "draw the ring as an SVG picture"},
    {"simulate", ringctl_cmd_simulate,
     "compare placement schemes: keys moved on a join or leave, balance"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

/* Runs a command with its name in the message prefix ("ringctl simulate:"). */
static int run_command(const command *c, ringctl_args *a) {
  char prog[64];
  const char *outer = a->prog;
  snprintf(prog, sizeof prog, "ringctl %s", c->name);
  a->prog = prog;
  int rc = c->run(a);
  a->prog = outer; /* prog dies with this frame */
  return rc;
}

/* ------------------------------------------------------------------ help */

static void print_usage(FILE *f) {
  fputs("Usage: ringctl [GLOBAL OPTIONS] COMMAND [OPTIONS]\n"
        "       ringctl help COMMAND\n"
        "\n"
        "Commands:\n",
        f);
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fputs("\n"
        "Global options (before or after the command):\n"
        "  --endpoints URLS      etcd endpoints, comma-separated (default\n"
        "                        http://127.0.0.1:2379)\n"
        "  --cluster NAME        cluster name: keys live under /ringkeeper/NAME/\n"
        "  --json                machine-readable output, where a command prints data\n"
        "  --user NAME           etcd user (with --password-file)\n"
        "  --password-file FILE  the etcd user's password, on its first line\n"
        "  --cacert FILE         CA bundle that verifies etcd's TLS certificates\n"
        "  --cert FILE           TLS client certificate (with --key)\n"
        "  --key FILE            TLS client key\n"
        "  --timeout DUR         per etcd request, e.g. 2s (default 5s)\n"
        "  --as NAME             who the journal names for a change (default login@host)\n"
        "  -h, --help            this help; `ringctl COMMAND --help` for a command's\n"
        "\n"
        "Exit codes: 0 success, 1 runtime failure, 2 usage error, 3 conflict.\n",
        f);
}

/* Runs `cmd --help` for `ringctl help [COMMAND]`. */
static int help_command(ringctl_args *a) {
  const char *name = NULL;
  int r = ringctl_next_opt(a, NULL, &name);
  if (r == RINGCTL_ARG_ERROR)
    return RINGCTL_EXIT_USAGE;
  if (r != RINGCTL_ARG_POSITIONAL) {
    print_usage(stdout);
    return RINGCTL_EXIT_OK;
  }
  const command *c = find_command(name);
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

static int dispatch(ringctl_args *a) {
  const char *name = NULL;
  switch (ringctl_next_opt(a, NULL, &name)) {
  case RINGCTL_ARG_HELP:
    print_usage(stdout);
    return RINGCTL_EXIT_OK;
  case RINGCTL_ARG_END:
    print_usage(stderr);
    return RINGCTL_EXIT_USAGE;
  case RINGCTL_ARG_POSITIONAL:
    break;
  default:
    return RINGCTL_EXIT_USAGE; /* the reader printed why */
  }
  if (strcmp(name, "help") == 0)
    return help_command(a);
  const command *c = find_command(name);
  if (c == NULL)
    return ringctl_usage_error(a, "unknown command \"%s\"", name);
  return run_command(c, a);
}

int main(int argc, char **argv) {
  ringctl_globals globals = {.json = false};
  ringctl_args a = {argc, argv, 1, "ringctl", &globals, false};
  return finish(dispatch(&a));
}
