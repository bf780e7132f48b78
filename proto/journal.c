/*
 * journal.c: the journal's records (journal.h, proto/etcd.md `journal/`).
 *
 * `by` and `detail` are free text from operators and daemons, shown in a
 * terminal: they are held to printable ASCII so that no entry can carry a
 * control sequence to the reader's screen.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "journal.h"

#include "proto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define EVENT_FORMAT "ringkeeper.event.v1"

static bool printable(const char *s, size_t min, size_t max) {
  size_t n = 0;
  for (; s[n] != '\0'; n++)
    if (n == max || s[n] < 0x20 || s[n] > 0x7e)
      return false;
  return n >= min;
}

/* The two free-text fields: decoded into dst (cap bytes with the NUL). */
static int text_field(const cJSON *root, const char *name, char *dst, size_t cap, size_t min,
                      ring_error *err) {
  int rc = ring__json_string_copy(root, "", name, dst, cap, err);
  if (rc == RING_OK && !printable(dst, min, cap - 1))
    rc = ring__err(err, RING_EFIELD, "%s: must be %zu to %zu bytes of printable ASCII", name, min,
                   cap - 1);
  return rc;
}

static int id_field(const cJSON *root, const char *name, char *dst, size_t cap, bool empty_ok,
                    ring_error *err) {
  int rc = ring__json_string_copy(root, "", name, dst, cap, err);
  if (rc == RING_OK && !(empty_ok && *dst == '\0') && !ring_id_valid(dst))
    rc = ring__err(err, RING_EFIELD, "%s: \"%.64s\" must match [a-z0-9._-]{1,63}%s", name, dst,
                   empty_ok ? " or be \"\"" : "");
  return rc;
}

int rk_event_decode(const char *json, size_t len, rk_event *out, ring_error *err) {
  static const char *const keys[] = {"format", "at_ms", "by", "what", "node", "detail"};
  if (json != NULL && len > RK_EVENT_VALUE_MAX)
    return ring__err(err, RING_ETOOBIG, "%zu bytes over the %u cap", len, RK_EVENT_VALUE_MAX);
  cJSON *root = NULL;
  rk_event e = {0};
  int rc =
      ring__record_parse(json, len, EVENT_FORMAT, keys, sizeof keys / sizeof *keys, &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "at_ms", 0, RING_VERSION_MAX, RING_EFIELD, &e.at_ms, err);
  if (rc == RING_OK)
    rc = text_field(root, "by", e.by, sizeof e.by, 1, err);
  if (rc == RING_OK)
    rc = id_field(root, "what", e.what, sizeof e.what, false, err);
  if (rc == RING_OK)
    rc = id_field(root, "node", e.node, sizeof e.node, true, err);
  if (rc == RING_OK)
    rc = text_field(root, "detail", e.detail, sizeof e.detail, 0, err);
  cJSON_Delete(root);
  if (rc == RING_OK && out != NULL)
    *out = e;
  return rc;
}

int rk_event_encode(const rk_event *e, char **json, size_t *len) {
  if (e == NULL || json == NULL || memchr(e->by, '\0', sizeof e->by) == NULL ||
      memchr(e->what, '\0', sizeof e->what) == NULL ||
      memchr(e->node, '\0', sizeof e->node) == NULL ||
      memchr(e->detail, '\0', sizeof e->detail) == NULL)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b, "{\"format\":\"" EVENT_FORMAT "\",\"at_ms\":%" PRIu64 ",\"by\":", e->at_ms);
  ring__sb_json_string(&b, e->by);
  ring__sb_printf(&b, ",\"what\":\"%s\",\"node\":\"%s\",\"detail\":", e->what, e->node);
  ring__sb_json_string(&b, e->detail);
  ring__sb_puts(&b, "}");
  char *text = NULL;
  size_t n = 0;
  int rc = ring__sb_finish(&b, &text, &n);
  if (rc == RING_OK && rk_event_decode(text, n, NULL, NULL) != RING_OK) {
    free(text);
    rc = RING_EINVAL; /* the decoder's rules are the only ones */
  }
  if (rc == RING_OK) {
    *json = text;
    if (len)
      *len = n;
  }
  return rc;
}

/* Copies src into dst (cap bytes with the NUL), cut to fit, with every
 * byte outside printable ASCII replaced by '?'. */
static void copy_printable(char *dst, size_t cap, const char *src) {
  size_t n = 0;
  for (; src != NULL && src[n] != '\0' && n + 1 < cap; n++)
    dst[n] = src[n] >= 0x20 && src[n] <= 0x7e ? src[n] : '?';
  dst[n] = '\0';
}

int rk_event_make(rk_event *e, uint64_t at_ms, const char *by, const char *what, const char *node,
                  const char *detail) {
  if (e == NULL || what == NULL || !ring_id_valid(what) ||
      (node != NULL && *node != '\0' && !ring_id_valid(node)))
    return RING_EINVAL;
  *e = (rk_event){.at_ms = at_ms};
  copy_printable(e->by, sizeof e->by, by != NULL && *by != '\0' ? by : "?");
  snprintf(e->what, sizeof e->what, "%s", what);
  snprintf(e->node, sizeof e->node, "%s", node != NULL ? node : "");
  copy_printable(e->detail, sizeof e->detail, detail);
  return RING_OK;
}

int rk_journal_key(char key[RK_KEY_MAX], const char *cluster, uint64_t at_ms, uint64_t nonce) {
  char name[RK_JOURNAL_NAME_LEN + 1];
  snprintf(name, sizeof name, "%013" PRIu64 "-%016" PRIx64, at_ms % 10000000000000u, nonce);
  return rk_key2(key, cluster, "journal/", name);
}

int rk_journal_entry(const char *cluster, uint64_t at_ms, const char *by, const char *what,
                     const char *node, const char *detail, char key[RK_KEY_MAX], char **value,
                     size_t *len) {
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
    struct timespec ts; /* unique enough for a name: entries are ordered by revision */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    nonce = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30);
  }
  rk_event e;
  int klen = rk_journal_key(key, cluster, at_ms, nonce);
  if (klen < 0 || rk_event_make(&e, at_ms, by, what, node, detail) != RING_OK)
    return RING_EINVAL;
  int rc = rk_event_encode(&e, value, len);
  return rc == RING_OK ? klen : rc;
}
