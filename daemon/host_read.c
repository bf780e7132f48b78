/*
 * host_read.c: host-written records read bounded and checked (host_read.h).
 *
 * Sections:
 *   1. the bounded read: the keys alone, then their values in spans of
 *      keys that share a start
 *   2. one record's checks: the key's id, the value's size
 */
#include "host_read.h"

#include "ringx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- 1. the bounded read */

/* Bytes two keys share at their start. */
static size_t common_prefix(const ring_kv *a, const ring_kv *b) {
  size_t n = a->key_len < b->key_len ? a->key_len : b->key_len, i = 0;
  while (i < n && a->key[i] == b->key[i])
    i++;
  return i;
}

/* A span of a prefix's keys (keys->kvs[lo..hi)) that is exactly the set of
 * keys starting with their first `depth` bytes, at the read's revision. */
typedef struct span {
  uint32_t lo, hi;
  size_t depth;
} span;

/* Fetches the values of keys[lo..hi) at rev (the keys starting with the
 * first key's first `depth` bytes; with exact, that one key) into
 * all->kvs[lo..hi). A value over cap is dropped here (value NULL,
 * value_len kept), so memory holds one span of large values at most. */
static int fetch_span(ring_etcd *c, const ring_kvs *keys, span sp, bool exact, int64_t rev,
                      size_t cap, ring_kvs *all, ring_error *err) {
  const ring_kv *first = &keys->kvs[sp.lo];
  ring_range_opts o = {.prefix = !exact, .revision = rev};
  ring_kvs r;
  int rc = ring_etcd_range(c, first->key, exact ? first->key_len : sp.depth, &o, &r, err);
  if (rc != RING_OK)
    return rc;
  if (r.n != sp.hi - sp.lo)
    rc = ring__err(err, RING_EPROTO, "%.100s: %u keys at revision %lld, %u listed",
                   (const char *)first->key, r.n, (long long)rev, sp.hi - sp.lo);
  for (uint32_t i = 0; rc == RING_OK && i < r.n; i++) {
    ring_kv *kv = &r.kvs[i];
    const ring_kv *want = &keys->kvs[sp.lo + i];
    if (kv->key_len != want->key_len || memcmp(kv->key, want->key, kv->key_len) != 0) {
      rc = ring__err(err, RING_EPROTO, "%.100s: not the key listed at revision %lld",
                     (const char *)kv->key, (long long)rev);
      break;
    }
    if (kv->value_len > cap) {
      free(kv->value);
      kv->value = NULL;
    }
    all->kvs[sp.lo + i] = *kv;
    memset(kv, 0, sizeof *kv);
  }
  ring_kvs_clear(&r);
  return rc;
}

/* Splits a span over RD_HOST_PAGE_KEYS keys: its longest shared start d,
 * the key that is d bytes long (fetched alone), then one span per byte at
 * d pushed onto st. Every span it pushes is smaller than sp. */
static int split_span(ring_etcd *c, const ring_kvs *keys, span sp, int64_t rev, size_t cap,
                      ring_kvs *all, span *st, uint32_t *top, ring_error *err) {
  const ring_kv *k = keys->kvs;
  size_t d = common_prefix(&k[sp.lo], &k[sp.hi - 1]);
  if (k[sp.lo].key_len == d) {
    int rc = fetch_span(c, keys, (span){sp.lo, sp.lo + 1, d}, true, rev, cap, all, err);
    if (rc != RING_OK)
      return rc;
    sp.lo++;
  }
  for (uint32_t i = sp.lo, j; i < sp.hi; i = j) {
    for (j = i + 1; j < sp.hi && k[j].key[d] == k[i].key[d]; j++)
      ;
    st[(*top)++] = (span){i, j, d + 1};
  }
  return RING_OK;
}

int rd_host_pages(ring_etcd *c, const char *prefix, size_t plen, int64_t rev, size_t cap,
                  ring_kvs *out, ring_error *err) {
  ring_range_opts o = {.prefix = true, .keys_only = true, .revision = rev};
  ring_kvs keys;
  int rc = ring_etcd_range(c, prefix, plen, &o, &keys, err);
  if (rc != RING_OK)
    return rc;
  if (rev == 0) /* "now": the values at the revision the keys were listed at */
    rev = keys.revision;
  ring_kvs all = {.n = keys.n, .count = keys.n, .revision = rev};
  all.kvs = calloc(keys.n ? keys.n : 1, sizeof *all.kvs);
  span *st = calloc((size_t)keys.n + 1, sizeof *st);
  uint32_t top = 0;
  if (all.kvs == NULL || st == NULL)
    rc = ring__err(err, RING_ENOMEM, "out of memory reading %u keys of %.100s", keys.n, prefix);
  else if (keys.n > 0)
    st[top++] = (span){0, keys.n, plen};
  while (rc == RING_OK && top > 0) {
    span sp = st[--top];
    if (sp.hi - sp.lo <= RD_HOST_PAGE_KEYS)
      rc = fetch_span(c, &keys, sp, false, rev, cap, &all, err);
    else
      rc = split_span(c, &keys, sp, rev, cap, &all, st, &top, err);
  }
  free(st);
  ring_kvs_clear(&keys);
  if (rc != RING_OK) {
    ring_kvs_clear(&all);
    return rc;
  }
  *out = all;
  return RING_OK;
}

bool rd_host_compacted(int rc, const ring_error *err) {
  return rc == RING_ESERVER && strstr(err->message, "compacted") != NULL;
}

/* ----------------------------------------------------- 2. one record's checks */

static bool id_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
         ch == '-';
}

bool rd_host_key_id(const ring_kv *kv, size_t prefix_len, char id[RING_ID_MAX + 1]) {
  if (kv->key_len <= prefix_len || kv->key_len - prefix_len > RING_ID_MAX)
    return false;
  size_t n = kv->key_len - prefix_len;
  memcpy(id, kv->key + prefix_len, n);
  id[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if (!id_char(id[i]))
      return false;
  return true;
}

void rd_host_key_rest(const ring_kv *kv, size_t prefix_len, char out[RING_ID_MAX + 1]) {
  size_t n = kv->key_len > prefix_len ? kv->key_len - prefix_len : 0;
  n = n < RING_ID_MAX ? n : RING_ID_MAX;
  for (size_t i = 0; i < n; i++) {
    char ch = (char)kv->key[prefix_len + i];
    out[i] = id_char(ch) ? ch : '?';
  }
  out[n] = '\0';
}

int rd_host_check(rk_host_kind kind, const ring_kv *kv, size_t prefix_len, char id[RING_ID_MAX + 1],
                  char *why, size_t size) {
  if (!rd_host_key_id(kv, prefix_len, id)) {
    rd_host_key_rest(kv, prefix_len, id);
    snprintf(why, size, "the key names no id");
    return -1;
  }
  ring_error e = {RING_OK, ""};
  if (rk_host_size_check(kind, kv->value_len, &e) != RING_OK || kv->value == NULL) {
    snprintf(why, size, "%s", e.code ? e.message : "no value");
    return 0;
  }
  why[0] = '\0';
  return 1;
}
