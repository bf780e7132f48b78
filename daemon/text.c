/*
 * text.c: the Prometheus text exposition helpers, written over rd_text
 * (libring's ring__sbuf: an allocation failure marks it oom, later appends
 * are ignored, and the server answers 500).
 */
#include "daemon.h"

#include "ring.h" /* RING_ID_MAX, RING_VERSION_STRING */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- metrics */

/* s with each byte of `special` backslash-escaped (a newline as \n): the
 * exposition format escapes backslash and newline in HELP text, and
 * backslash, double quote and newline in a label value. */
static void put_escaped(rd_text *t, const char *s, const char *special) {
  for (const char *p = s; *p != '\0';) {
    size_t run = strcspn(p, special);
    ring__sb_printf(t, "%.*s", (int)run, p);
    p += run;
    if (*p != '\0') {
      char c = *p++;
      ring__sb_printf(t, "\\%c", c == '\n' ? 'n' : c);
    }
  }
}

void rd_metric_head(rd_text *t, const char *name, const char *type, const char *help) {
  ring__sb_printf(t, "# HELP %s ", name);
  put_escaped(t, help != NULL ? help : "", "\\\n");
  ring__sb_printf(t, "\n# TYPE %s %s\n", name, type);
}

/* The shortest decimal that reads back as v; Prometheus spells the
 * non-finite values NaN, +Inf and -Inf. */
static void format_value(double v, char *buf, size_t cap) {
  if (isnan(v))
    snprintf(buf, cap, "NaN");
  else if (isinf(v))
    snprintf(buf, cap, "%s", v > 0 ? "+Inf" : "-Inf");
  else if (snprintf(buf, cap, "%.15g", v), strtod(buf, NULL) != v)
    snprintf(buf, cap, "%.17g", v);
}

void rd_metric_sample(rd_text *t, const char *name, const char *labels, double value) {
  char v[40];
  format_value(value, v, sizeof v);
  if (labels != NULL && labels[0] != '\0')
    ring__sb_printf(t, "%s{%s} %s\n", name, labels, v);
  else
    ring__sb_printf(t, "%s %s\n", name, v);
}

void rd_metric(rd_text *t, const char *name, const char *type, const char *help, double value) {
  rd_metric_head(t, name, type, help);
  rd_metric_sample(t, name, NULL, value);
}

void rd_metric_labeled(rd_text *t, const char *name, const char *label, const char *label_value,
                       double value) {
  char v[40];
  format_value(value, v, sizeof v);
  ring__sb_printf(t, "%s{%s=\"", name, label);
  put_escaped(t, label_value != NULL ? label_value : "", "\\\"\n");
  ring__sb_printf(t, "\"} %s\n", v);
}

static double desc_value(const rd_metric_desc *d, const void *base) {
  const char *at = (const char *)base + d->offset;
  double v = d->kind == RD_METRIC_GET      ? d->get(base)
             : d->kind == RD_METRIC_ATOMIC ? (double)atomic_load((const _Atomic uint64_t *)at)
                                           : (double)*(const uint64_t *)at;
  return d->divisor != 0 ? v / d->divisor : v;
}

void rd_metric_table(rd_text *t, const rd_metric_desc *d, size_t n, const void *const *bases) {
  for (size_t i = 0; i < n; i++) {
    if (d[i].kind == RD_METRIC_FAMILY)
      d[i].put(t, bases[d[i].room]);
    else
      rd_metric(t, d[i].name, d[i].type, d[i].help, desc_value(&d[i], bases[d[i].room]));
  }
}

/* ------------------------------------------------- who the series belong to */

/* Set once at start (rd_daemon_start), before the server's threads. */
static char ident_component[32];
static char ident_cluster[RING_ID_MAX + 1];

#ifndef RD_BUILD_COMMIT
#define RD_BUILD_COMMIT "unknown"
#endif

void rd_metrics_identify(const char *component, const char *cluster) {
  snprintf(ident_component, sizeof ident_component, "%s", component ? component : "");
  snprintf(ident_cluster, sizeof ident_cluster, "%s", cluster ? cluster : "");
}

/* One sample line with `cluster="..."` first among its labels. */
static void put_labelled(rd_text *out, const char *line, size_t len) {
  size_t name = 0;
  while (name < len && line[name] != '{' && line[name] != ' ')
    name++;
  if (name == len) { /* not a sample: copied as it is */
    ring__sb_printf(out, "%.*s\n", (int)len, line);
    return;
  }
  ring__sb_printf(out, "%.*s{cluster=\"%s\"", (int)name, line, ident_cluster);
  if (line[name] != '{')
    ring__sb_puts(out, "}");
  else if (line[++name] != '}')
    ring__sb_puts(out, ","); /* before the sample's own labels */
  ring__sb_printf(out, "%.*s\n", (int)(len - name), line + name);
}

void rd_metrics_finish(const rd_text *in, rd_text *out) {
  out->oom |= in->oom;              /* an incomplete text stays one: the server answers 500 */
  if (ident_component[0] == '\0') { /* not a daemon (a test's server): as written */
    ring__sb_printf(out, "%s", in->p != NULL ? in->p : "");
    return;
  }
  char name[64];
  snprintf(name, sizeof name, "ring_%s_build_info", ident_component);
  rd_text head = {0};
  rd_metric_head(&head, name, "gauge", "1, labelled with the version and the commit built");
  ring__sb_printf(&head, "%s{version=\"%s\",commit=\"%s\"} 1\n", name, RING_VERSION_STRING,
                  RD_BUILD_COMMIT);
  const rd_text *parts[2] = {&head, in};
  for (size_t i = 0; i < 2; i++) {
    const char *p = parts[i]->p, *end = p ? p + parts[i]->len : NULL;
    while (p != NULL && p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
      if (len == 0 || p[0] == '#')
        ring__sb_printf(out, "%.*s\n", (int)len, p);
      else
        put_labelled(out, p, len);
      p += len + 1;
    }
  }
  out->oom |= head.oom;
  free(head.p);
}
