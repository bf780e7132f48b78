/*
 * logfmt.c: the one rule for writing a logfmt value (docs/STYLE.md, logs), used
 * by the watcher's default log line and by the daemons' logger
 * (daemon/log.c).
 *
 * A value is quoted when it is empty or holds a space, '"', '=' or a
 * control byte. Inside quotes '"' and '\' are escaped with a backslash,
 * newline, return and tab are \n \r \t, other control bytes (DEL too) are
 * \u00XX; every other byte, UTF-8 included, passes as it is. A value cut
 * to fit is never cut inside an escape or a UTF-8 sequence, and its quote
 * is closed, so the line still parses.
 */
#include "ringx.h"

#include <string.h>

static bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool ring__logfmt_needs_quotes(const char *v) {
  if (*v == '\0')
    return true; /* so `k=""` is not read as a bare key */
  for (const unsigned char *p = (const unsigned char *)v; *p != '\0'; p++)
    if (*p == ' ' || *p == '"' || *p == '=' || is_control(*p))
      return true;
  return false;
}

size_t ring__logfmt_escape(unsigned char c, char out[8]) {
  static const char hex[] = "0123456789abcdef";
  const char *named = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                                  : NULL;
  if (named != NULL)
    return memcpy(out, named, 2), 2;
  if (!is_control(c))
    return out[0] = (char)c, 1;
  memcpy(out, "\\u00", 4);
  out[4] = hex[c >> 4];
  out[5] = hex[c & 15];
  return 6;
}

/* Appends v's bytes (escaped when quoted) at out[*len] while they fit
 * below room; false when it had to cut. */
static bool put_bytes(const char *v, bool quoted, char *out, size_t *len, size_t room) {
  size_t seq = *len; /* where the current UTF-8 sequence began */
  for (const unsigned char *p = (const unsigned char *)v; *p != '\0'; p++) {
    char e[8];
    size_t n = quoted ? ring__logfmt_escape(*p, e) : (e[0] = (char)*p, 1);
    bool continuation = (*p & 0xC0) == 0x80;
    if (!continuation)
      seq = *len;
    if (*len + n > room) {
      *len = continuation ? seq : *len;
      return false;
    }
    memcpy(out + *len, e, n);
    *len += n;
  }
  return true;
}

size_t ring__logfmt_put(const char *v, bool quoted, char *out, size_t cap, bool *cut) {
  v = v != NULL ? v : "";
  *cut = true;
  if (cap < (quoted ? 3u : 1u)) { /* not even the quotes and the NUL */
    if (cap > 0)
      out[0] = '\0';
    return 0;
  }
  size_t len = 0;
  if (quoted)
    out[len++] = '"';
  *cut = !put_bytes(v, quoted, out, &len, cap - (quoted ? 2 : 1));
  if (quoted)
    out[len++] = '"';
  out[len] = '\0';
  return len;
}

size_t ring__logfmt_value(const char *v, char *out, size_t cap, bool *cut) {
  return ring__logfmt_put(v, ring__logfmt_needs_quotes(v != NULL ? v : ""), out, cap, cut);
}
