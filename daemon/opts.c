/*
 * opts.c: rd_opts_parse and rd_opts_free: the command line, --config,
 * --help, --version, --man, and undoing a parse that failed.
 *
 * Sections: the command line; --help; keeping the defaults; the entry
 * points.
 *
 * Order: the config file first, then the flags, so a flag wins over the
 * file whatever the order on the command line. A value never starts with
 * "--" so that a forgotten value ("--cluster --auto-apply") is reported
 * instead of swallowing the next flag.
 */
#include "daemon_int.h"

#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- the command line */

static bool is_flag(const char *arg) { return strncmp(arg, "--", 2) == 0 && arg[2] != '\0'; }

/* The value of the flag at argv[*i] (name = the text after "--"): after '='
 * or the next argument, which *i then moves past. A bool may stand alone.
 * NULL if a needed value is missing. */
static const char *flag_value(int argc, char **argv, int *i, const rd_opt *o) {
  const char *eq = strchr(argv[*i], '=');
  if (eq != NULL)
    return eq + 1;
  if (*i + 1 < argc && !is_flag(argv[*i + 1]))
    return argv[++*i];
  return o != NULL && o->type == RD_OPT_BOOL ? "true" : NULL;
}

static size_t name_len(const char *name) { return strcspn(name, "="); }

static bool is_config(const char *name) {
  return name_len(name) == 6 && strncmp(name, "config", 6) == 0;
}

/* The last --config FILE in argv, or NULL. Returns 0 or -1 with err set. */
static int find_config(int argc, char **argv, const char **path, char *err, size_t errcap) {
  *path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!is_flag(argv[i]) || !is_config(argv[i] + 2))
      continue;
    if ((*path = flag_value(argc, argv, &i, NULL)) == NULL || **path == '\0') {
      snprintf(err, errcap, "--config needs a file name");
      return -1;
    }
  }
  return 0;
}

/* Applies one flag at argv[*i]. Returns 0 or -1 with err set. */
static int apply_flag(int argc, char **argv, int *i, const rd_opt *opts, char *err, size_t errcap) {
  const char *arg = argv[*i];
  if (!is_flag(arg)) {
    snprintf(err, errcap, "unexpected argument '%s' (options are --name VALUE)", arg);
    return -1;
  }
  const char *name = arg + 2;
  if (is_config(name))
    return flag_value(argc, argv, i, NULL), 0; /* read before the flags */
  const rd_opt *o = rd__opt_find(opts, name, name_len(name));
  if (o == NULL) {
    snprintf(err, errcap, "unknown flag --%.*s", (int)name_len(name), name);
    return -1;
  }
  char where[128];
  snprintf(where, sizeof where, "--%s", o->name);
  const char *value = flag_value(argc, argv, i, o);
  if (value == NULL) {
    snprintf(err, errcap, "%s needs a value", where);
    return -1;
  }
  return rd__opt_set(o, value, where, err, errcap);
}

static int apply_flags(int argc, char **argv, const rd_opt *opts, char *err, size_t errcap) {
  for (int i = 1; i < argc; i++)
    if (apply_flag(argc, argv, &i, opts, err, errcap) != 0)
      return -1;
  return 0;
}

/* ------------------------------------------------------------------ --help */

static bool wants(int argc, char **argv, const char *flag, const char *alias) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], flag) == 0 || (alias != NULL && strcmp(argv[i], alias) == 0))
      return true;
  return false;
}

const char *rd__opt_placeholder(rd_opt_type t) {
  switch (t) {
  case RD_OPT_BOOL:
    return "";
  case RD_OPT_UINT:
    return " N";
  case RD_OPT_DOUBLE:
    return " X";
  case RD_OPT_MS:
    return " DURATION";
  case RD_OPT_STRING:
    break;
  }
  return " VALUE";
}

/* argv0's last path component: what usage, --version and the page name. */
static const char *prog_name(const char *argv0) {
  const char *slash = argv0 != NULL ? strrchr(argv0, '/') : NULL;
  return slash != NULL ? slash + 1 : argv0 != NULL ? argv0 : "daemon";
}

static void print_usage(const char *prog, const char *summary, const rd_opt *opts) {
  printf("usage: %s [--config FILE] [--name VALUE]...\n%s\n\noptions:\n", prog,
         summary != NULL ? summary : "");
  printf("  %-28s %s\n", "--config FILE", "read `name = value` lines from FILE; flags win");
  for (const rd_opt *o = opts; o->name != NULL; o++) {
    char flag[128], def[128];
    snprintf(flag, sizeof flag, "--%s%s", o->name, rd__opt_placeholder(o->type));
    rd__opt_format_value(o, def, sizeof def);
    printf("  %-28s %s", flag, o->help != NULL ? o->help : "");
    if (def[0] != '\0')
      printf(" (default: %s)", def);
    printf("\n");
  }
  printf("  %-28s %s\n", "--help", "print this help");
  printf("  %-28s %s\n", "--version", "print the version");
}

/* --help, --version or --man: prints what was asked and returns true. */
static bool answered(int argc, char **argv, const char *summary, const rd_opt *opts) {
  const char *prog = prog_name(argc > 0 ? argv[0] : NULL);
  if (wants(argc, argv, "--help", "-h"))
    print_usage(prog, summary, opts);
  else if (wants(argc, argv, "--version", NULL))
    rd_version_print(prog);
  else if (wants(argc, argv, "--man", NULL))
    rd__opts_man(stdout, prog, summary != NULL ? summary : "", opts);
  else
    return false;
  return true;
}

/* ------------------------------------------------------- keeping the defaults */

/* What every target held before parsing, so a failed parse leaves the
 * targets as it found them (and owns no strings). */
typedef union saved {
  char *s;
  bool b;
  uint64_t u;
  double d;
} saved;

static size_t count(const rd_opt *opts) {
  size_t n = 0;
  while (opts[n].name != NULL)
    n++;
  return n;
}

static void save_one(const rd_opt *o, saved *v) {
  if (o->type == RD_OPT_STRING)
    v->s = *(char **)o->target;
  else if (o->type == RD_OPT_BOOL)
    v->b = *(bool *)o->target;
  else if (o->type == RD_OPT_DOUBLE)
    v->d = *(double *)o->target;
  else
    v->u = *(uint64_t *)o->target;
}

static void restore_one(const rd_opt *o, const saved *v) {
  if (o->type == RD_OPT_STRING) {
    rd__opt_release((char **)o->target);
    *(char **)o->target = v->s;
  } else if (o->type == RD_OPT_BOOL) {
    *(bool *)o->target = v->b;
  } else if (o->type == RD_OPT_DOUBLE) {
    *(double *)o->target = v->d;
  } else {
    *(uint64_t *)o->target = v->u;
  }
}

/* ------------------------------------------------------------ entry points */

/* The file, then the flags. Returns 0 or -1 with err set. */
static int apply_all(int argc, char **argv, const rd_opt *opts, char *err, size_t errcap) {
  const char *config;
  if (find_config(argc, argv, &config, err, errcap) != 0)
    return -1;
  if (config != NULL && rd__opts_read_file(config, opts, err, errcap) != 0)
    return -1;
  return apply_flags(argc, argv, opts, err, errcap);
}

int rd_opts_parse(int argc, char **argv, const char *summary, const rd_opt *opts, char *errbuf,
                  size_t errcap) {
  char scratch[1];
  if (errbuf == NULL || errcap == 0)
    errbuf = scratch, errcap = sizeof scratch; /* callers that only want the status */
  errbuf[0] = '\0';
  if (answered(argc, argv, summary, opts))
    return RD_OPTS_HELP;
  size_t n = count(opts);
  saved *defaults = calloc(n + 1, sizeof *defaults);
  if (defaults == NULL) {
    snprintf(errbuf, errcap, "out of memory");
    return RD_OPTS_ERROR;
  }
  for (size_t i = 0; i < n; i++)
    save_one(&opts[i], &defaults[i]);
  int rc = apply_all(argc, argv, opts, errbuf, errcap);
  for (size_t i = 0; rc != 0 && i < n; i++)
    restore_one(&opts[i], &defaults[i]);
  free(defaults);
  return rc == 0 ? RD_OPTS_OK : RD_OPTS_ERROR;
}

void rd_opts_free(const rd_opt *opts) {
  for (const rd_opt *o = opts; o != NULL && o->name != NULL; o++)
    if (o->type == RD_OPT_STRING)
      rd__opt_release((char **)o->target);
}
