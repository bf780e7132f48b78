/*
 * ringctl.h: what ringctl's commands share. Internal to the ringctl binary.
 *
 * Sections: exit codes; global options; the option reader; commands.
 *
 * A command is a function `int cmd(ringctl_args *a)` that reads its own
 * options with ringctl_next_opt (which also takes the global options
 * wherever they appear) and returns an exit code. Adding a command is one
 * entry in the table in ringctl.c plus its cmd_<name>.c.
 */
#ifndef RINGCTL_H
#define RINGCTL_H

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------ exit codes */

/* DESIGN.md, operator surface: scripts rely on these numbers. */
enum {
  RINGCTL_EXIT_OK = 0,       /* success */
  RINGCTL_EXIT_FAILURE = 1,  /* runtime failure */
  RINGCTL_EXIT_USAGE = 2,    /* usage error: bad command, option or value */
  RINGCTL_EXIT_CONFLICT = 3  /* conflict: stale plan, lost race */
};

/* -------------------------------------------------------- global options */

/* Options every command accepts, before or after the command name. Only
 * parsed and stored for now: the etcd commands will read them. Strings
 * point into argv. */
typedef struct ringctl_globals {
  const char *endpoints; /* --endpoints URLS, comma-separated; NULL if not given */
  const char *cluster;   /* --cluster NAME; NULL if not given */
  bool json;             /* --json: machine-readable output where a command prints data */
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
  int next;                /* index of the next argument to read */
  const char *prog;        /* "ringctl" or "ringctl simulate": prefixes messages */
  ringctl_globals *globals; /* where global options are stored */
  bool no_more_opts;       /* "--" seen: everything after is positional */
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
int ringctl_parse_uint(const ringctl_args *a, const char *name, const char *value,
                       uint64_t min, uint64_t max, uint64_t *out);

/* ------------------------------------------------------------- commands */

int ringctl_cmd_simulate(ringctl_args *a);

#endif /* RINGCTL_H */
