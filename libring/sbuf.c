/*
 * sbuf.c: the growing string used by the encoders and the verifiers.
 */
#include "ring_int.h"

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

int ring__key(char *key, size_t cap, const char *cluster, const char *dir, const char *name) {
  if (key == NULL || cluster == NULL || dir == NULL || name == NULL)
    return RING_EINVAL;
  int n = snprintf(key, cap, "/ringkeeper/%s/%s%s", cluster, dir, name);
  return n < 0 || (size_t)n >= cap ? RING_EINVAL : n;
}

/* Parses a decimal version, 1 .. RING_VERSION_MAX, nothing else. */
bool ring__parse_version(const uint8_t *p, size_t len, uint64_t *out) {
  uint64_t v = 0;
  if (p == NULL || len == 0 || len > 16)
    return false;
  for (size_t i = 0; i < len; i++) {
    if (p[i] < '0' || p[i] > '9')
      return false;
    v = v * 10 + (uint64_t)(p[i] - '0');
  }
  if (v < 1 || v > RING_VERSION_MAX)
    return false;
  *out = v;
  return true;
}
