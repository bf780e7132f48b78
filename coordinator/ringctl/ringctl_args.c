/*
 * ringctl_args.c: the option reader every ringctl command uses.
 *
 * Sections: global options; matching one argument; ringctl_next_opt;
 * reading a command's arguments; usage errors, numbers and durations.
 *
 * Long options ("--name VALUE", "--name=VALUE"), -h, and the one-letter
 * names a command lists (plan's "-o FILE"): a handful of
 * commands with a handful of options each do not need getopt's short-option
 * clusters, and a hand-written reader lets global options appear anywhere
 * without getopt's global state or GNU argument permutation.
 */
#include "ringctl.h"

#include "ring.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- global options */

enum {
  GLOBAL_ENDPOINTS,
  GLOBAL_CLUSTER,
  GLOBAL_JSON,
  GLOBAL_USER,
  GLOBAL_PASSWORD_FILE,
  GLOBAL_CACERT,
  GLOBAL_CERT,
  GLOBAL_KEY,
  GLOBAL_TIMEOUT,
  GLOBAL_AS,
  GLOBAL_CONFIG
};

const ringctl_opt ringctl_global_opts[] = {
    {"endpoints", GLOBAL_ENDPOINTS, true},
    {"cluster", GLOBAL_CLUSTER, true},
    {"json", GLOBAL_JSON, false},
    {"user", GLOBAL_USER, true},
    {"password-file", GLOBAL_PASSWORD_FILE, true},
    {"etcd-ca-file", GLOBAL_CACERT, true}, /* the daemons' names (daemon/etcd_open.c) */
    {"etcd-cert-file", GLOBAL_CERT, true},
    {"etcd-key-file", GLOBAL_KEY, true},
    {"timeout", GLOBAL_TIMEOUT, true},
    {"as", GLOBAL_AS, true},
    {"config", GLOBAL_CONFIG, true},
    {"cacert", GLOBAL_CACERT, true}, /* old spellings, still taken */
    {"cert", GLOBAL_CERT, true},
    {"key", GLOBAL_KEY, true},
    {NULL, 0, false},
};

/* Beside the table it describes: --help and the manual page print it. */
const char ringctl_global_help[] =
    "  --endpoints URLS      etcd endpoints, comma-separated; host:port is http://\n"
    "                        (default http://127.0.0.1:2379)\n"
    "  --cluster NAME        cluster name: keys live under /ringkeeper/NAME/\n"
    "  --json                machine-readable output: what a command shows, or what\n"
    "                        a command that changes something did, as one JSON object\n"
    "  --user NAME           etcd user (with --password-file)\n"
    "  --password-file FILE  the etcd user's password, on its first line\n"
    "  --etcd-ca-file FILE   CA bundle that verifies etcd's TLS certificates\n"
    "  --etcd-cert-file FILE TLS client certificate (with --etcd-key-file)\n"
    "  --etcd-key-file FILE  TLS client key (--cacert, --cert, --key: old names)\n"
    "  --timeout DUR         bounds the whole command, e.g. 2s; an unreachable etcd\n"
    "                        is retried until then, then exit 4 (default 10s; none\n"
    "                        for apply --wait and wait)\n"
    "  --as NAME             who the journal names for a change (default login@host)\n"
    "  --config FILE         the settings file to read (default: /etc/ringkeeper/\n"
    "                        ringctl.conf, then ~/.config/ringkeeper/ringctl.conf)\n"
    "  -h, --help            this help; `ringctl COMMAND --help` for a command's\n"
    "Each option but --json and --config may come from the environment as\n"
    "RINGCTL_<NAME> (RINGCTL_ENDPOINTS, RINGCTL_ETCD_CA_FILE, ...; RINGCTL_CONFIG\n"
    "names the file) or from the file as `name = value` lines (# comments); flags\n"
    "win over the environment, which wins over the user's file, then the system's.\n";

/* Where each global option's value goes, by id (--json has none). */
static const char **global_slot(ringctl_globals *g, int id) {
  switch (id) {
  case GLOBAL_ENDPOINTS:
    return &g->endpoints;
  case GLOBAL_CLUSTER:
    return &g->cluster;
  case GLOBAL_USER:
    return &g->user;
  case GLOBAL_PASSWORD_FILE:
    return &g->password_file;
  case GLOBAL_CACERT:
    return &g->cacert;
  case GLOBAL_CERT:
    return &g->cert;
  case GLOBAL_KEY:
    return &g->key;
  case GLOBAL_TIMEOUT:
    return &g->timeout;
  case GLOBAL_AS:
    return &g->as;
  case GLOBAL_CONFIG:
    return &g->config;
  default:
    return NULL;
  }
}

const char **ringctl_global_slot(ringctl_globals *g, const char *name) {
  for (const ringctl_opt *o = ringctl_global_opts; o->name != NULL; o++)
    if (strcmp(o->name, name) == 0)
      return global_slot(g, o->id);
  return NULL;
}

static void store_global(ringctl_globals *g, int id, const char *value) {
  const char **slot = global_slot(g, id);
  if (slot != NULL)
    *slot = value;
  else if (id == GLOBAL_JSON)
    g->json = true;
}

/* ------------------------------------------------ matching one argument */

/* The entry of `opts` named by arg ("--name" or "--name=value", the dashes
 * already stripped, name_len the part before any '='), or NULL. */
static const ringctl_opt *find_opt(const ringctl_opt *opts, const char *name, size_t name_len) {
  for (const ringctl_opt *o = opts; o != NULL && o->name != NULL; o++)
    if (strlen(o->name) == name_len && strncmp(o->name, name, name_len) == 0)
      return o;
  return NULL;
}

/* Takes the value of option o: the text after '=' (inline, may be NULL),
 * else the next argument. Returns 0, or RINGCTL_ARG_ERROR after printing
 * why (a missing value, or a value given to a flag). */
static int take_value(ringctl_args *a, const ringctl_opt *o, const char *inline_value,
                      const char **value) {
  if (!o->has_value) {
    if (inline_value != NULL) {
      ringctl_usage_error(a, "--%s takes no value", o->name);
      return RINGCTL_ARG_ERROR;
    }
    *value = NULL;
    return 0;
  }
  if (inline_value != NULL) {
    *value = inline_value;
    return 0;
  }
  if (a->next >= a->argc) {
    ringctl_usage_error(a, "--%s needs a value", o->name);
    return RINGCTL_ARG_ERROR;
  }
  *value = a->argv[a->next++];
  return 0;
}

/* ------------------------------------------------------ ringctl_next_opt */

/* Looks the long option `arg` (after "--") up in the command's table, then
 * in the global one, whose options it stores (setting *is_global). Returns
 * the option's id, or RINGCTL_ARG_ERROR after printing why. */
static int read_long(ringctl_args *a, const ringctl_opt *opts, const char *arg, const char **value,
                     bool *is_global) {
  const char *eq = strchr(arg, '=');
  const size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
  const char *inline_value = eq ? eq + 1 : NULL;
  const ringctl_opt *o = find_opt(opts, arg, len);
  *is_global = o == NULL;
  if (o == NULL && (o = find_opt(ringctl_global_opts, arg, len)) == NULL) {
    ringctl_usage_error(a, "unknown option --%.*s", (int)len, arg);
    return RINGCTL_ARG_ERROR;
  }
  if (take_value(a, o, inline_value, value) != 0)
    return RINGCTL_ARG_ERROR;
  if (*is_global)
    store_global(a->globals, o->id, *value);
  return o->id;
}

int ringctl_next_opt(ringctl_args *a, const ringctl_opt *opts, const char **value) {
  for (;;) {
    if (a->next >= a->argc)
      return RINGCTL_ARG_END;
    const char *arg = a->argv[a->next++];
    if (a->no_more_opts || arg[0] != '-' || arg[1] == '\0' || isdigit((unsigned char)arg[1]) ||
        arg[1] == '.') {
      /* "-" alone is positional: it conventionally means stdin; "-1" is a
       * number for the command to judge ("weight must be positive"), no option */
      *value = arg;
      return RINGCTL_ARG_POSITIONAL;
    }
    if (strcmp(arg, "--") == 0) {
      a->no_more_opts = true;
      continue;
    }
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
      return RINGCTL_ARG_HELP;
    if (arg[1] != '-' && arg[2] == '\0' && find_opt(opts, arg + 1, 1) != NULL) {
      const ringctl_opt *o = find_opt(opts, arg + 1, 1); /* a one-letter option: -o FILE */
      return take_value(a, o, NULL, value) == 0 ? o->id : RINGCTL_ARG_ERROR;
    }
    if (arg[1] != '-') {
      ringctl_usage_error(a, "unknown option %s (options are long: --name)", arg);
      return RINGCTL_ARG_ERROR;
    }
    bool is_global;
    int id = read_long(a, opts, arg + 2, value, &is_global);
    if (id == RINGCTL_ARG_ERROR || !is_global)
      return id;
  }
}

/* ------------------------------------- reading a command's arguments */

int ringctl_parse(ringctl_args *a, const ringctl_opt *opts, const char *help_text,
                  ringctl_apply_fn apply, void *ud, bool *help) {
  const char *value = NULL;
  for (;;) {
    int id = ringctl_next_opt(a, opts, &value);
    if (id == RINGCTL_ARG_END)
      return RINGCTL_EXIT_OK;
    if (id == RINGCTL_ARG_HELP) {
      fputs(help_text, stdout);
      *help = true;
      return RINGCTL_EXIT_OK;
    }
    if (id == RINGCTL_ARG_ERROR)
      return RINGCTL_EXIT_USAGE;
    int rc = apply(a, id, value, ud);
    if (rc != RINGCTL_EXIT_OK)
      return rc;
  }
}

/* ------------------------------------- usage errors, numbers, durations */

int ringctl_usage_error(const ringctl_args *a, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", a->prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '%s --help'.\n", a->prog);
  return RINGCTL_EXIT_USAGE;
}

/* ringctl_parse_uint for an option ("--" before name) or an argument. */
static int parse_uint(const ringctl_args *a, const char *dashes, const char *name,
                      const char *value, uint64_t min, uint64_t max, uint64_t *out) {
  /* strtoull alone accepts " 8", "+8", "-8" (wrapped) and "8x": check the
   * digits first so every one of those is a usage error. */
  bool digits = value[0] != '\0';
  for (const char *p = value; *p != '\0'; p++)
    digits = digits && *p >= '0' && *p <= '9';
  if (!digits && dashes[0] == '\0')
    return ringctl_usage_error(a, "\"%s\" is not a %s (a whole number)", value, name);
  if (!digits)
    return ringctl_usage_error(a, "%s%s: \"%s\" is not a whole number", dashes, name, value);
  errno = 0;
  unsigned long long v = strtoull(value, NULL, 10);
  if (errno == ERANGE || v < min || v > max)
    return ringctl_usage_error(a, "%s%s must be in [%llu, %llu], got %s", dashes, name,
                               (unsigned long long)min, (unsigned long long)max, value);
  *out = (uint64_t)v;
  return RINGCTL_EXIT_OK;
}

int ringctl_parse_uint(const ringctl_args *a, const char *name, const char *value, uint64_t min,
                       uint64_t max, uint64_t *out) {
  return parse_uint(a, "--", name, value, min, max, out);
}

int ringctl_parse_uint_arg(const ringctl_args *a, const char *what, const char *value, uint64_t min,
                           uint64_t max, uint64_t *out) {
  return parse_uint(a, "", what, value, min, max, out);
}

/* Milliseconds in one unit of a duration suffix, 0 if it is none. */
static uint64_t unit_ms(const char *unit) {
  static const struct {
    const char *name;
    uint64_t ms;
  } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (strcmp(unit, units[i].name) == 0)
      return units[i].ms;
  return 0;
}

int ringctl_parse_duration(const ringctl_args *a, const char *name, const char *value,
                           uint64_t min_ms, uint64_t max_ms, uint64_t *out) {
  const char *p = value;
  uint64_t n = 0;
  while (*p >= '0' && *p <= '9' && n < RING_VERSION_MAX)
    n = n * 10 + (uint64_t)(*p++ - '0');
  uint64_t unit = unit_ms(p);
  if (p == value || unit == 0)
    return ringctl_usage_error(a, "--%s: \"%s\" is not a duration (e.g. 500ms, 30s, 5m, 1h)", name,
                               value);
  if (n > max_ms / unit || n * unit < min_ms || n * unit > max_ms)
    return ringctl_usage_error(a, "--%s must be between %llums and %llums, got %s", name,
                               (unsigned long long)min_ms, (unsigned long long)max_ms, value);
  *out = n * unit;
  return RINGCTL_EXIT_OK;
}

int ringctl_parse_weight(const ringctl_args *a, const char *what, const char *value, double *out) {
  char *end = NULL;
  errno = 0;
  double w = strtod(value, &end);
  if (end == value || *end != '\0' || errno != 0 || !isfinite(w) || w <= 0 || w > 1e6)
    return ringctl_usage_error(a, "%s must be a positive number up to 1000000, got \"%s\"", what,
                               value);
  *out = w;
  return RINGCTL_EXIT_OK;
}
