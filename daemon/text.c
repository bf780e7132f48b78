/*
 * text.c: rd_text, the growing buffer HTTP handlers fill, and the
 * Prometheus text exposition helpers written over it.
 *
 * Sections: the buffer; metrics.
 *
 * An allocation failure does not stop the handler: the buffer remembers it
 * (rd_text.failed), ignores what follows, and the server answers 500. That
 * keeps every handler free of error paths.
 */
#include "daemon.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the buffer */

/* Makes room for need more bytes plus a NUL. Returns false (and marks the
 * buffer failed) when it cannot. */
static bool reserve(rd_text *t, size_t need) {
  if (t->cap - t->len > need)
    return true;
  size_t cap = t->cap > 0 ? t->cap : 256;
  while (cap - t->len <= need) {
    if (cap > SIZE_MAX / 2)
      return t->failed = true, false;
    cap *= 2;
  }
  char *data = realloc(t->data, cap);
  if (data == NULL)
    return t->failed = true, false;
  t->data = data;
  t->cap = cap;
  return true;
}

void rd_text_printf(rd_text *t, const char *fmt, ...) {
  if (t->failed)
    return;
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  size_t room = t->cap - t->len;
  int n = vsnprintf(room > 0 ? t->data + t->len : NULL, room, fmt, ap);
  if (n < 0)
    t->failed = true;
  else if ((size_t)n >= room && reserve(t, (size_t)n))
    vsnprintf(t->data + t->len, t->cap - t->len, fmt, again);
  if (n >= 0 && !t->failed)
    t->len += (size_t)n;
  va_end(again);
  va_end(ap);
}

/* ----------------------------------------------------------------- metrics */

/* HELP text escapes backslash and newline (the exposition format's rule). */
static void put_help(rd_text *t, const char *help) {
  for (const char *p = help; *p != '\0';) {
    size_t run = strcspn(p, "\\\n");
    rd_text_printf(t, "%.*s", (int)run, p);
    p += run;
    if (*p != '\0')
      rd_text_printf(t, "%s", *p++ == '\\' ? "\\\\" : "\\n");
  }
}

void rd_metric_head(rd_text *t, const char *name, const char *type, const char *help) {
  rd_text_printf(t, "# HELP %s ", name);
  put_help(t, help != NULL ? help : "");
  rd_text_printf(t, "\n# TYPE %s %s\n", name, type);
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
    rd_text_printf(t, "%s{%s} %s\n", name, labels, v);
  else
    rd_text_printf(t, "%s %s\n", name, v);
}
