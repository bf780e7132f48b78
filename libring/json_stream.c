/*
 * json_stream.c: the splitter for streamed JSON objects (json_stream.h).
 *
 * Sections: the scanner (one pass over the bytes, resumable at any byte),
 * the buffer, and feed (whole messages inside a chunk go to the callback
 * in place; only a message cut by a chunk boundary is copied).
 */
#include "json_stream.h"

#include "ring.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- scanner */

/* Scans p[0..n) as the continuation of the current message. On return
 * *used bytes belong to it and *done says the message ended with the last
 * of them. Returns RING_EPROTO past max_depth and RING_ETOOBIG when the
 * message would outgrow max. */
static int scan(ring__jstream *s, const char *p, size_t n, size_t *used, bool *done) {
  size_t room = s->max - s->len;
  size_t lim = n < room ? n : room;
  *done = false;
  for (size_t i = 0; i < lim; i++) {
    char ch = p[i];
    if (s->in_str) {
      if (s->esc)
        s->esc = false;
      else if (ch == '\\')
        s->esc = true;
      else if (ch == '"')
        s->in_str = false;
      continue;
    }
    switch (ch) {
    case '"':
      s->in_str = true;
      break;
    case '{':
    case '[':
      if (++s->depth > s->max_depth)
        return RING_EPROTO;
      break;
    case '}':
    case ']': /* depth >= 1 here: a message starts with '{' and stops at 0 */
      if (--s->depth == 0) {
        *used = i + 1;
        *done = true;
        return RING_OK;
      }
      break;
    default:
      break;
    }
  }
  *used = lim;
  return lim < n ? RING_ETOOBIG : RING_OK;
}

/* -------------------------------------------------------------- buffer */

static int append(ring__jstream *s, const char *p, size_t n) {
  size_t need = s->len + n; /* <= max: scan saw to that */
  if (need > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 4096;
    if (cap < need)
      cap = need;
    if (cap > s->max)
      cap = s->max;
    char *b = realloc(s->buf, cap);
    if (b == NULL)
      return RING_ENOMEM;
    s->buf = b;
    s->cap = cap;
  }
  memcpy(s->buf + s->len, p, n);
  s->len = need;
  return RING_OK;
}

/* Drops a large buffer once it is empty, so one big message does not pin
 * its memory for the life of the stream. */
static void shrink(ring__jstream *s) {
  if (s->len == 0 && s->cap > RING_JSTREAM_KEEP) {
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
  }
}

void ring__jstream_init(ring__jstream *s, size_t max, unsigned max_depth) {
  memset(s, 0, sizeof *s);
  s->max = max ? max : RING_JSTREAM_MAX;
  s->max_depth = max_depth ? max_depth : RING_JSTREAM_DEPTH_MAX;
}

void ring__jstream_reset(ring__jstream *s) {
  s->len = 0;
  s->depth = 0;
  s->in_str = s->esc = false;
  s->err = 0;
  shrink(s);
}

void ring__jstream_free(ring__jstream *s) {
  free(s->buf);
  s->buf = NULL;
  s->cap = s->len = 0;
}

bool ring__jstream_partial(const ring__jstream *s) { return s->depth > 0; }

/* ---------------------------------------------------------------- feed */

static int fail(ring__jstream *s, int code) {
  s->err = code;
  s->len = 0;
  shrink(s);
  return code;
}

static bool blank(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }

int ring__jstream_feed(ring__jstream *s, const char *data, size_t n, ring__jstream_cb cb,
                       void *ud) {
  if (s->err)
    return s->err;
  size_t i = 0;
  while (i < n) {
    if (s->depth == 0) { /* between messages */
      if (blank(data[i])) {
        i++;
        continue;
      }
      if (data[i] != '{')
        return fail(s, RING_EPROTO);
    }
    size_t used;
    bool done;
    int rc = scan(s, data + i, n - i, &used, &done);
    if (rc != RING_OK)
      return fail(s, rc);
    if (done && s->len == 0) { /* whole inside this chunk: no copy */
      rc = cb(ud, data + i, used);
    } else {
      if (append(s, data + i, used) != RING_OK)
        return fail(s, RING_ENOMEM);
      if (done) {
        rc = cb(ud, s->buf, s->len);
        s->len = 0;
        shrink(s);
      }
    }
    i += used;
    if (rc != 0)
      return rc;
  }
  return RING_OK;
}
