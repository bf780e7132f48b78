/*
 * ringctl.h: what ringctl's commands share. Internal to the ringctl binary.
 *
 * Sections: exit codes; global options; the option reader; commands.
 *
 * A command is a function `int cmd(ringctl_args *a)` that reads its own
 * options with ringctl_next_opt (which also takes the global options
 * wherever they appear) and returns an exit code. Adding a command is its
 * cmd_<name>.c, which defines its ringctl_command entry (name, summary,
 * option table, help), and one line in ringctl_commands.c's list.
 */
#ifndef RINGCTL_H
#define RINGCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------ exit codes */

/* docs/DESIGN.md, "The operator's surface": scripts rely on these numbers. */
enum {
  RINGCTL_EXIT_OK = 0,       /* success */
  RINGCTL_EXIT_FAILURE = 1,  /* runtime failure */
  RINGCTL_EXIT_USAGE = 2,    /* usage error: bad command, option or value */
  RINGCTL_EXIT_CONFLICT = 3, /* conflict: stale plan, lost race */
  RINGCTL_EXIT_UNKNOWN = 4   /* could not tell: etcd unreachable until --timeout */
};

/* -------------------------------------------------------- global options */

/* Options every command accepts, before or after the command name. Strings
 * point into argv; the etcd commands read them when they connect
 * (ringctl_etcd.c). */
typedef struct ringctl_globals {
  const char *endpoints;     /* --endpoints URLS, comma-separated; NULL if not given */
  const char *cluster;       /* --cluster NAME; NULL if not given */
  bool json;                 /* --json: machine-readable output where a command prints data */
  const char *user;          /* --user NAME: etcd authentication */
  const char *password_file; /* --password-file FILE: the user's password, first line */
  const char *cacert;        /* --etcd-ca-file FILE: CA bundle that verifies etcd members */
  const char *cert;          /* --etcd-cert-file FILE: TLS client certificate */
  const char *key;           /* --etcd-key-file FILE: TLS client key */
  const char *timeout;       /* --timeout DUR: the whole command; parsed on connect */
  bool until_done;           /* set by a command that waits: no --timeout, no deadline */
  const char *as;            /* --as NAME: who the journal says made a change */
  const char *config;        /* --config FILE: the one settings file (ringctl_config.c) */
} ringctl_globals;

/* ----------------------------------------------------- the option reader */

/* One long option a command accepts. Tables end with {NULL, 0, false}. */
typedef struct ringctl_opt {
  const char *name; /* without the leading "--" */
  int id;           /* returned by ringctl_next_opt; >= 0 */
  bool has_value;   /* takes "--name VALUE" or "--name=VALUE" */
} ringctl_opt;

/* The arguments left to read, and where messages say they come from. */
typedef struct ringctl_args {
  int argc;
  char **argv;
  int next;                 /* index of the next argument to read */
  const char *prog;         /* "ringctl" or "ringctl simulate": prefixes messages */
  ringctl_globals *globals; /* where global options are stored */
  bool no_more_opts;        /* "--" seen: everything after is positional */
} ringctl_args;

/* What ringctl_next_opt returns besides an option id. */
enum {
  RINGCTL_ARG_END = -1,        /* no arguments left */
  RINGCTL_ARG_POSITIONAL = -2, /* *value is a positional argument */
  RINGCTL_ARG_HELP = -3,       /* -h or --help */
  RINGCTL_ARG_ERROR = -4       /* a usage error, already printed to stderr */
};

/* Reads the next argument. Returns an option's id (writing its value to
 * *value, NULL for options without one), or one of RINGCTL_ARG_*. Global
 * options are stored in a->globals and skipped, never returned. On
 * RINGCTL_ARG_ERROR the message is printed (unknown option, missing or
 * unexpected value); the caller returns RINGCTL_EXIT_USAGE. */
int ringctl_next_opt(ringctl_args *a, const ringctl_opt *opts, const char **value);

/* Prints "PROG: MESSAGE" and a pointer to --help on stderr; returns
 * RINGCTL_EXIT_USAGE so a caller can `return ringctl_usage_error(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int ringctl_usage_error(const ringctl_args *a, const char *fmt, ...);

/* Parses the value of option `name` as a decimal integer in [min, max]:
 * digits only, no sign, no spaces. Returns RINGCTL_EXIT_OK and writes *out,
 * or prints a usage error naming the option and returns RINGCTL_EXIT_USAGE
 * (*out untouched). */
int ringctl_parse_uint(const ringctl_args *a, const char *name, const char *value, uint64_t min,
                       uint64_t max, uint64_t *out);

/* The same for a positional argument: "\"abc\" is not a version (a whole
 * number)", "version must be in [1, N], got 0" (what: "version"). */
int ringctl_parse_uint_arg(const ringctl_args *a, const char *what, const char *value, uint64_t min,
                           uint64_t max, uint64_t *out);

/* Parses a duration "<digits><unit>", unit ms, s, m or h, into
 * milliseconds in [min_ms, max_ms]. Same contract as ringctl_parse_uint. */
int ringctl_parse_duration(const ringctl_args *a, const char *name, const char *value,
                           uint64_t min_ms, uint64_t max_ms, uint64_t *out);

/* Parses a node weight: a finite number in (0, 1e6]. `what` names it in
 * the message ("weight", "--what-if: weight"). Same contract as
 * ringctl_parse_uint. */
int ringctl_parse_weight(const ringctl_args *a, const char *what, const char *value, double *out);

/* Applies one option (id >= 0) or positional (id RINGCTL_ARG_POSITIONAL) to
 * a command's settings in ud; returns an exit code (OK to go on). */
typedef int (*ringctl_apply_fn)(const ringctl_args *a, int id, const char *value, void *ud);

/* Reads every argument left through apply. On -h/--help prints `help` to
 * stdout, sets *help and stops. Returns RINGCTL_EXIT_OK, or the usage exit
 * code after a message (an unknown option, or what apply refused). */
int ringctl_parse(ringctl_args *a, const ringctl_opt *opts, const char *help_text,
                  ringctl_apply_fn apply, void *ud, bool *help);

/* ------------------------------------------------------------- commands */

/* One command as the parser, --help, `ringctl completion` and the manual
 * page read it, so none of them can say other than the parser does. Each
 * cmd_<name>.c defines its entry (ringctl_command_<name>); the list in
 * ringctl_commands.c orders them. */
typedef struct ringctl_command {
  const char *name;            /* what the operator types */
  int (*run)(ringctl_args *a); /* reads a's options, returns an exit code */
  const char *summary;         /* one line for `ringctl --help` */
  const ringctl_opt *opts;     /* the options run reads, {NULL}-ended; NULL: none */
  const char *help;            /* what `ringctl NAME --help` prints */
} ringctl_command;

/* Every command, in the order `ringctl --help` lists them; *n gets how
 * many. Static data: nothing to free. */
const ringctl_command *const *ringctl_commands(size_t *n);

/* The command named name, or NULL. */
const ringctl_command *ringctl_command_find(const char *name);

/* The global options (ringctl_args.c) and their help text, as --help, the
 * completion and the manual page show them. */
extern const ringctl_opt ringctl_global_opts[];
extern const char ringctl_global_help[];

/* Where the global option named `name` (a spelling in ringctl_global_opts)
 * is stored in g; NULL for --json and unknown names. */
const char **ringctl_global_slot(ringctl_globals *g, const char *name);

/* Fills the global options a flag left unset from the environment
 * (RINGCTL_<NAME>), then from the settings file (--config FILE or
 * RINGCTL_CONFIG; else ~/.config/ringkeeper/ringctl.conf over
 * /etc/ringkeeper/ringctl.conf) (ringctl_config.c). A bad file is a usage
 * error naming file:line. Values live as long as the process. */
int ringctl_config_load(const ringctl_args *a);

/* `ringctl --help`: usage, the commands and the global options (ringctl.c). */
void ringctl_print_usage(FILE *f);

/* The manual page ringctl(1) in roff on f (ringctl_man.c): every command's
 * summary and help text, the global options, the exit codes. */
void ringctl_man_print(FILE *f);

int ringctl_cmd_simulate(ringctl_args *a);
int ringctl_cmd_balance(ringctl_args *a);
int ringctl_cmd_init(ringctl_args *a);
int ringctl_cmd_status(ringctl_args *a);
int ringctl_cmd_members(ringctl_args *a);
int ringctl_cmd_plan(ringctl_args *a);
int ringctl_cmd_apply(ringctl_args *a);
int ringctl_cmd_wait(ringctl_args *a);
int ringctl_cmd_pause(ringctl_args *a);
int ringctl_cmd_resume(ringctl_args *a);
int ringctl_cmd_cancel(ringctl_args *a);
int ringctl_cmd_accept_loss(ringctl_args *a);
int ringctl_cmd_recover(ringctl_args *a);
int ringctl_cmd_drain(ringctl_args *a);
int ringctl_cmd_undrain(ringctl_args *a);
int ringctl_cmd_weight(ringctl_args *a);
int ringctl_cmd_trust(ringctl_args *a);
int ringctl_cmd_throttle(ringctl_args *a);
int ringctl_cmd_auto_apply(ringctl_args *a);
int ringctl_cmd_label(ringctl_args *a);
int ringctl_cmd_remove(ringctl_args *a);
int ringctl_cmd_diff(ringctl_args *a);
int ringctl_cmd_replace(ringctl_args *a);
int ringctl_cmd_lookup(ringctl_args *a);
int ringctl_cmd_history(ringctl_args *a);
int ringctl_cmd_verify(ringctl_args *a);
int ringctl_cmd_render(ringctl_args *a);

/* Each command's entry, defined beside its code. */
extern const ringctl_command ringctl_command_init, ringctl_command_status, ringctl_command_members,
    ringctl_command_plan, ringctl_command_apply, ringctl_command_wait, ringctl_command_pause,
    ringctl_command_resume, ringctl_command_cancel, ringctl_command_accept_loss,
    ringctl_command_recover, ringctl_command_drain, ringctl_command_undrain, ringctl_command_weight,
    ringctl_command_trust, ringctl_command_label, ringctl_command_remove, ringctl_command_replace,
    ringctl_command_throttle, ringctl_command_auto_apply, ringctl_command_balance,
    ringctl_command_lookup, ringctl_command_history, ringctl_command_diff, ringctl_command_verify,
    ringctl_command_render, ringctl_command_simulate, ringctl_command_completion,
    ringctl_command_auth;

#endif /* RINGCTL_H */
