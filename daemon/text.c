/*
 * text.c: the Prometheus text exposition helpers, written over rd_text
 * (libring's ring__sbuf: an allocation failure marks it oom, later appends
 * are ignored, and the server answers 500).
 */
#include "daemon.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- metrics */

/* HELP text escapes backslash and newline (the exposition format's rule). */
static void put_help(rd_text *t, const char *help) {
  for (const char *p = help; *p != '\0';) {
    size_t run = strcspn(p, "\\\n");
    ring__sb_printf(t, "%.*s", (int)run, p);
    p += run;
    if (*p != '\0')
      ring__sb_printf(t, "%s", *p++ == '\\' ? "\\\\" : "\\n");
  }
}

void rd_metric_head(rd_text *t, const char *name, const char *type, const char *help) {
  ring__sb_printf(t, "# HELP %s ", name);
  put_help(t, help != NULL ? help : "");
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
