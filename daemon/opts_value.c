/*
 * opts_value.c: one option's value: text to bool, number or duration, the
 * range check, and storing it where the option points.
 *
 * Sections: finding an option; parsing text; ranges; strings the parser
 * owns; rd__opt_set; formatting values.
 *
 * Strings are copied because a config file's lines are gone once it is
 * read; the parser remembers its copies (a short list keyed by target) so
 * rd_opts_free frees exactly those and never a caller's default.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, strcasecmp */
#include "daemon_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* -------------------------------------------------------- finding an option */

const rd_opt *rd__opt_find(const rd_opt *opts, const char *name, size_t len) {
  for (const rd_opt *o = opts; o->name != NULL; o++)
    if (strlen(o->name) == len && memcmp(o->name, name, len) == 0)
      return o;
  return NULL;
}

/* ------------------------------------------------------------ parsing text */

static int parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(s, yes[i]) == 0)
      return *out = true, 0;
    if (strcasecmp(s, no[i]) == 0)
      return *out = false, 0;
  }
  return -1;
}

/* Decimal digits only: strtoull would accept signs, spaces and "0x". On
 * success *end points past the digits. */
static int parse_digits(const char *s, uint64_t *out, const char **end) {
  uint64_t v = 0;
  const char *p = s;
  for (; *p >= '0' && *p <= '9'; p++) {
    uint64_t d = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  if (p == s)
    return -1;
  *out = v;
  *end = p;
  return 0;
}

static int parse_uint(const char *s, uint64_t *out) {
  const char *end;
  return parse_digits(s, out, &end) == 0 && *end == '\0' ? 0 : -1;
}

static int parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

/* "500ms", "5s", "2m", "1h" or bare milliseconds. */
static int parse_ms(const char *s, uint64_t *out) {
  static const struct {
    const char *suffix;
    uint64_t ms;
  } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  uint64_t n;
  const char *end;
  if (parse_digits(s, &n, &end) != 0)
    return -1;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(end, units[i].suffix) != 0)
      continue;
    if (n > UINT64_MAX / units[i].ms)
      return -1;
    *out = n * units[i].ms;
    return 0;
  }
  return -1;
}

/* ------------------------------------------------------------------ ranges */

/* min == max == 0 means unbounded: a table entry that leaves both out
 * cannot have meant "only zero". */
static bool bounded(const rd_opt *o) { return o->min != 0 || o->max != 0; }

static void format_bound(const rd_opt *o, double v, char *buf, size_t cap) {
  if (o->type == RD_OPT_MS)
    rd__format_ms((uint64_t)v, buf, cap);
  else if (o->type == RD_OPT_UINT)
    snprintf(buf, cap, "%.0f", v);
  else
    snprintf(buf, cap, "%g", v);
}

static int check_range(const rd_opt *o, double v, const char *text, const char *where, char *err,
                       size_t errcap) {
  if (!bounded(o) || (v >= o->min && v <= o->max))
    return 0;
  char lo[32], hi[32];
  format_bound(o, o->min, lo, sizeof lo);
  format_bound(o, o->max, hi, sizeof hi);
  snprintf(err, errcap, "%s: %s is out of range [%s, %s]", where, text, lo, hi);
  return -1;
}

/* ---------------------------------------------------- strings the parser owns */

typedef struct owned {
  char **target;      /* the option's target */
  char *str;          /* the copy the parser stored there */
  struct owned *next; /* next entry; the list is short (one per string option) */
} owned;

/* Not locked: options are parsed once, from main, before threads start. */
static owned *owned_list;

static owned **owned_find(char **target) {
  owned **e = &owned_list;
  while (*e != NULL && (*e)->target != target)
    e = &(*e)->next;
  return e;
}

static int own_set(char **target, const char *value) {
  char *copy = strdup(value);
  if (copy == NULL)
    return -1;
  owned **e = owned_find(target);
  if (*e == NULL) {
    if ((*e = calloc(1, sizeof **e)) == NULL)
      return free(copy), -1;
    (*e)->target = target;
  }
  free((*e)->str); /* a flag replacing a value from the file */
  (*e)->str = copy;
  *target = copy;
  return 0;
}

void rd__opt_release(char **target) {
  owned **e = owned_find(target);
  if (*e == NULL)
    return;
  owned *dead = *e;
  if (*target == dead->str)
    *target = NULL;
  *e = dead->next;
  free(dead->str);
  free(dead);
}

/* ------------------------------------------------------------ rd__opt_set */

static int set_number(const rd_opt *o, const char *value, const char *where, char *err,
                      size_t errcap) {
  uint64_t u = 0;
  double d = 0;
  int rc = o->type == RD_OPT_UINT ? parse_uint(value, &u)
           : o->type == RD_OPT_MS ? parse_ms(value, &u)
                                  : parse_double(value, &d);
  if (rc != 0) {
    const char *what = o->type == RD_OPT_UINT ? "is not a whole number"
                       : o->type == RD_OPT_MS
                           ? "is not a duration (use 500ms, 5s, 2m, 1h or bare milliseconds)"
                           : "is not a number";
    snprintf(err, errcap, "%s: '%s' %s", where, value, what);
    return -1;
  }
  double v = o->type == RD_OPT_DOUBLE ? d : (double)u;
  if (check_range(o, v, value, where, err, errcap) != 0)
    return -1;
  if (o->type == RD_OPT_DOUBLE)
    *(double *)o->target = d;
  else
    *(uint64_t *)o->target = u;
  return 0;
}

int rd__opt_set(const rd_opt *o, const char *value, const char *where, char *err, size_t errcap) {
  switch (o->type) {
  case RD_OPT_STRING:
    if (own_set((char **)o->target, value) == 0)
      return 0;
    snprintf(err, errcap, "%s: out of memory", where);
    return -1;
  case RD_OPT_BOOL:
    if (parse_bool(value, (bool *)o->target) == 0)
      return 0;
    snprintf(err, errcap, "%s: '%s' is not a bool (use true/false, yes/no, on/off or 1/0)", where,
             value);
    return -1;
  case RD_OPT_UINT:
  case RD_OPT_DOUBLE:
  case RD_OPT_MS:
    return set_number(o, value, where, err, errcap);
  }
  snprintf(err, errcap, "%s: option has an unknown type", where);
  return -1;
}

/* ------------------------------------------------------------ formatting values */

void rd__format_ms(uint64_t ms, char *buf, size_t cap) {
  if (ms != 0 && ms % 3600000 == 0)
    snprintf(buf, cap, "%" PRIu64 "h", ms / 3600000);
  else if (ms != 0 && ms % 60000 == 0)
    snprintf(buf, cap, "%" PRIu64 "m", ms / 60000);
  else if (ms != 0 && ms % 1000 == 0)
    snprintf(buf, cap, "%" PRIu64 "s", ms / 1000);
  else
    snprintf(buf, cap, "%" PRIu64 "ms", ms);
}

void rd__opt_format_value(const rd_opt *o, char *buf, size_t cap) {
  switch (o->type) {
  case RD_OPT_STRING: {
    const char *s = *(char *const *)o->target;
    snprintf(buf, cap, "%s", s != NULL ? s : "");
    return;
  }
  case RD_OPT_BOOL:
    snprintf(buf, cap, "%s", *(const bool *)o->target ? "true" : "false");
    return;
  case RD_OPT_UINT:
    snprintf(buf, cap, "%" PRIu64, *(const uint64_t *)o->target);
    return;
  case RD_OPT_DOUBLE:
    snprintf(buf, cap, "%g", *(const double *)o->target);
    return;
  case RD_OPT_MS:
    rd__format_ms(*(const uint64_t *)o->target, buf, cap);
    return;
  }
  snprintf(buf, cap, "?");
}
