/*
 * fuzz_watch_stream.c: libFuzzer target for the watch stream: the splitter
 * (libring/json_stream.c) and the message parser the watch runs
 * (ring__watch_parse).
 *
 * Input: two bytes of split point, one byte choosing the size cap, then the
 * stream. The stream is fed whole, split at the chosen point, and (when
 * short) one byte at a time: all three must yield the same messages and
 * the same outcome. Every message is parsed: a failure names its code and
 * a message; a success has non-negative revisions and events with
 * revisions >= 1 in order, keys NUL-terminated.
 */
#include "../../libring/etcd_watch_int.h"
#include "../../libring/json_stream.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MSGS_MAX 256

/* What one way of feeding saw. */
typedef struct trace {
  int rc;                  /* the last feed's result */
  uint32_t n;              /* messages */
  uint64_t hash[MSGS_MAX]; /* FNV-1a of each message */
  size_t len[MSGS_MAX];
  int parsed[MSGS_MAX]; /* ring__watch_parse's result */
} trace;

static uint64_t fnv(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
  return h;
}

static void check_resp(const ring__watch_resp *r) {
  if (r->revision < 0 || r->compact_revision < 0 || (r->n_events && r->events == NULL))
    abort();
  if (memchr(r->reason, '\0', sizeof r->reason) == NULL)
    abort();
  for (uint32_t i = 0; i < r->n_events; i++) {
    const ring_event *e = &r->events[i];
    if (e->kv.mod_revision < 1 || (i && e->kv.mod_revision < e[-1].kv.mod_revision))
      abort();
    if (e->type != RING_EVENT_PUT && e->type != RING_EVENT_DELETE)
      abort();
    if (e->kv.key == NULL || e->kv.key[e->kv.key_len] != '\0')
      abort();
    if (e->kv.value && e->kv.value[e->kv.value_len] != '\0')
      abort();
  }
}

static int on_message(void *ud, const char *msg, size_t len) {
  trace *t = ud;
  if (len < 2 || msg[0] != '{' || (msg[len - 1] != '}' && msg[len - 1] != ']'))
    abort(); /* the splitter hands over whole objects only */
  ring__watch_resp r;
  ring_error err = {0};
  int rc = ring__watch_parse(msg, len, &r, &err);
  if (rc != RING_OK) {
    if (err.code != rc || err.message[0] == '\0' || r.events != NULL || r.n_events != 0)
      abort(); /* every failure is named, and leaves nothing behind */
  } else {
    check_resp(&r);
    ring__watch_resp_free(&r);
  }
  if (t->n < MSGS_MAX) {
    t->hash[t->n] = fnv(msg, len);
    t->len[t->n] = len;
    t->parsed[t->n] = rc;
  }
  t->n++;
  return 0;
}

/* Feeds the stream in pieces: cuts[] are the offsets where a chunk ends. */
static void run(const char *p, size_t n, const size_t *cuts, size_t n_cuts, size_t cap, trace *t) {
  ring__jstream js;
  ring__jstream_init(&js, cap, 0);
  memset(t, 0, sizeof *t);
  size_t off = 0;
  for (size_t i = 0; i <= n_cuts && t->rc == 0; i++) {
    size_t end = i < n_cuts ? cuts[i] : n;
    t->rc = ring__jstream_feed(&js, p + off, end - off, on_message, t);
    off = end;
  }
  if (t->rc == 0 && off != n)
    abort();
  if (js.len > js.max || js.cap > js.max)
    abort(); /* the cap holds */
  ring__jstream_free(&js);
}

static void same(const trace *a, const trace *b) {
  if (a->rc != b->rc || a->n != b->n)
    abort();
  for (uint32_t i = 0; i < a->n && i < MSGS_MAX; i++)
    if (a->hash[i] != b->hash[i] || a->len[i] != b->len[i] || a->parsed[i] != b->parsed[i])
      abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3)
    return 0;
  size_t cut = (size_t)(data[0] | data[1] << 8);
  size_t cap = data[2] ? (size_t)data[2] * 8 : RING_WATCH_MESSAGE_MAX;
  const char *p = (const char *)data + 3;
  size_t n = size - 3;
  if (cut > n)
    cut = n ? cut % (n + 1) : 0;
  static trace whole, split, bytes; /* large: kept off the stack */
  run(p, n, NULL, 0, cap, &whole);
  run(p, n, &cut, 1, cap, &split);
  same(&whole, &split);
  if (n <= 2048) {
    size_t *cuts = malloc((n ? n : 1) * sizeof *cuts);
    if (cuts == NULL)
      return 0;
    for (size_t i = 0; i < n; i++)
      cuts[i] = i + 1;
    run(p, n, cuts, n ? n - 1 : 0, cap, &bytes);
    free(cuts);
    same(&whole, &bytes);
  }
  return 0;
}
