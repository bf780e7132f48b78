/*
 * sbuf.c: the growing string used by the encoders and the verifiers, and
 * what the JSON encoders append to it.
 */
#include "ringx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ring__sb_reserve(ring__sbuf *b, size_t more) {
  if (b->oom || b->len + more + 1 <= b->cap)
    return;
  if (more > SIZE_MAX / 4 - b->len) { /* doubling below would wrap */
    b->oom = true;
    return;
  }
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more + 1)
    cap *= 2;
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    b->oom = true;
    return;
  }
  b->p = p;
  b->cap = cap;
}

void ring__sb_puts(ring__sbuf *b, const char *s) {
  size_t n = strlen(s);
  ring__sb_reserve(b, n);
  if (!b->oom) {
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
  }
}

void ring__sb_printf(ring__sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  ring__sb_reserve(b, (size_t)n);
  if (b->oom)
    return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void ring__sb_json_string(ring__sbuf *b, const char *s) {
  static const char hex[] = "0123456789abcdef";
  char esc[8];
  ring__sb_puts(b, "\"");
  for (const char *run = s;; s++) {
    unsigned char c = (unsigned char)*s;
    if (c != 0 && c != '"' && c != '\\' && c >= 0x20)
      continue;
    if (s > run) { /* the plain bytes before c */
      ring__sb_reserve(b, (size_t)(s - run));
      if (!b->oom) {
        memcpy(b->p + b->len, run, (size_t)(s - run));
        b->len += (size_t)(s - run);
        b->p[b->len] = '\0';
      }
    }
    if (c == 0)
      break;
    if (c == '"' || c == '\\')
      snprintf(esc, sizeof esc, "\\%c", c);
    else
      snprintf(esc, sizeof esc, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
    ring__sb_puts(b, esc);
    run = s + 1;
  }
  ring__sb_puts(b, "\"");
}

int ring__sb_finish(ring__sbuf *b, char **json, size_t *len) {
  if (b->oom || b->p == NULL) {
    free(b->p);
    return RING_ENOMEM;
  }
  *json = b->p;
  if (len)
    *len = b->len;
  return RING_OK;
}
