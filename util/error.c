/*
 * error.c: the error messages and the ring_error filler used across libring
 * and the daemons.
 */
#include "ringx.h"

#include <stdio.h>

const char *ring__strerror(int code) {
  switch (code) {
  case RING_OK:
    return "success";
#define RING_ERRNO_CASE(name, num, msg)                                                            \
  case RING_##name:                                                                                \
    return msg;
    RING_ERRNO_MAP(RING_ERRNO_CASE)
#undef RING_ERRNO_CASE
  default:
    return "unknown error";
  }
}

int ring__err(ring_error *err, int code, const char *fmt, ...) {
  if (err == NULL)
    return code;
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  if (n <= 0) /* an empty detail still tells the class of failure */
    snprintf(err->message, sizeof err->message, "%s", ring__strerror(code));
  return code;
}
