/*
 * coord_gc.c: keeping etcd's size bounded. Every compact_every the leader
 * deletes tables/<v> and deltas/<v> older than config.retention.versions
 * behind the current version (never the active run's base: a new leader
 * recomputes the run from it), history entries beyond retention.plans
 * (oldest finished first), journal entries beyond RK_JOURNAL_KEEP
 * (oldest created first), and compacts etcd's history to the revision it
 * saw one period earlier, so a watcher that is at most one period behind
 * never meets a compacted revision.
 */
#include "coord.h"
#include "journal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELETE_BATCH 64

/* Deletes `keys` in fenced txns of DELETE_BATCH; returns how many went. */
static uint32_t delete_keys(coord *c, char (*keys)[RK_KEY_MAX], uint32_t n) {
  uint32_t gone = 0;
  for (uint32_t at = 0; at < n && c->leading; at += DELETE_BATCH) {
    ring_op ops[DELETE_BATCH];
    uint32_t k = n - at < DELETE_BATCH ? n - at : DELETE_BATCH;
    for (uint32_t i = 0; i < k; i++)
      ops[i] =
          (ring_op){.type = RING_OP_DELETE, .key = keys[at + i], .key_len = strlen(keys[at + i])};
    ring_error err = {0};
    if (coord_txn(c, NULL, 0, ops, k, &err) != RING_OK)
      break;
    gone += k;
  }
  return gone;
}

/* Versions below `keep_from` under dir ("tables/" or "deltas/"), except
 * `pinned`, are deleted. */
static uint32_t trim_versions(coord *c, const char *dir, uint64_t keep_from, uint64_t pinned) {
  char prefix[RK_KEY_MAX];
  int plen = coord_key(c, prefix, dir);
  ring_range_opts ro = {.prefix = true, .keys_only = true};
  ring_kvs r;
  if (ring_etcd_range(c->etcd, prefix, (size_t)plen, &ro, &r, NULL) != RING_OK)
    return 0;
  char(*keys)[RK_KEY_MAX] = calloc(r.n + 1u, RK_KEY_MAX);
  uint32_t n = 0;
  for (uint32_t i = 0; keys && i < r.n; i++) {
    uint64_t v = strtoull((const char *)r.kvs[i].key + plen, NULL, 10);
    if (v != 0 && v < keep_from && v != pinned)
      snprintf(keys[n++], RK_KEY_MAX, "%s", (const char *)r.kvs[i].key);
  }
  ring_kvs_clear(&r);
  uint32_t gone = keys ? delete_keys(c, keys, n) : 0;
  free(keys);
  return gone;
}

typedef struct aged {
  uint64_t age; /* larger is newer: a finish time, a create revision */
  char key[RK_KEY_MAX];
} aged;

static int newest_first(const void *a, const void *b) {
  uint64_t x = ((const aged *)a)->age, y = ((const aged *)b)->age;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Deletes all but the newest `keep` of a[0..n); returns how many went. */
static uint32_t trim_oldest(coord *c, aged *a, uint32_t n, uint32_t keep) {
  if (n <= keep)
    return 0;
  qsort(a, n, sizeof *a, newest_first);
  char(*keys)[RK_KEY_MAX] = calloc(n - keep, RK_KEY_MAX);
  for (uint32_t i = keep; keys && i < n; i++)
    memcpy(keys[i - keep], a[i].key, RK_KEY_MAX);
  uint32_t gone = keys ? delete_keys(c, keys, n - keep) : 0;
  free(keys);
  return gone;
}

/* History beyond `keep` entries, oldest first to go. */
static uint32_t trim_history(coord *c, uint32_t keep) {
  char prefix[RK_KEY_MAX];
  int plen = coord_key(c, prefix, "plan/history/");
  ring_range_opts ro = {.prefix = true};
  ring_kvs r;
  if (ring_etcd_range(c->etcd, prefix, (size_t)plen, &ro, &r, NULL) != RING_OK)
    return 0;
  aged *a = calloc(r.n + 1u, sizeof *a);
  for (uint32_t i = 0; a && i < r.n; i++) {
    rk_run run;
    snprintf(a[i].key, sizeof a[i].key, "%s", (const char *)r.kvs[i].key);
    if (rk_run_decode((const char *)r.kvs[i].value, r.kvs[i].value_len, &run, NULL) == RING_OK) {
      a[i].age = run.finished_ms;
      rk_run_free(&run);
    } /* an unreadable entry sorts as oldest: it goes first */
  }
  uint32_t n = r.n;
  ring_kvs_clear(&r);
  uint32_t gone = a ? trim_oldest(c, a, n, keep) : 0;
  free(a);
  return gone;
}

/* The journal beyond RK_JOURNAL_KEEP entries, by create revision (the
 * names carry writers' clocks, which differ). */
static uint32_t trim_journal(coord *c) {
  char prefix[RK_KEY_MAX];
  int plen = coord_key(c, prefix, "journal/");
  ring_range_opts ro = {.prefix = true, .keys_only = true};
  ring_kvs r;
  if (ring_etcd_range(c->etcd, prefix, (size_t)plen, &ro, &r, NULL) != RING_OK)
    return 0;
  aged *a = r.n > RK_JOURNAL_KEEP ? calloc(r.n, sizeof *a) : NULL;
  for (uint32_t i = 0; a && i < r.n; i++) {
    snprintf(a[i].key, sizeof a[i].key, "%s", (const char *)r.kvs[i].key);
    a[i].age = (uint64_t)r.kvs[i].create_revision;
  }
  uint32_t n = r.n;
  ring_kvs_clear(&r);
  uint32_t gone = a ? trim_oldest(c, a, n, RK_JOURNAL_KEEP) : 0;
  free(a);
  return gone;
}

void coord_gc(coord *c, const rk_state *s) {
  uint64_t now = rd_now_ms();
  if (c->last_gc_ms != 0 && now - c->last_gc_ms < c->o.compact_every_ms)
    return;
  c->last_gc_ms = now;
  uint64_t keep = s->config.keep_versions;
  uint64_t keep_from = s->version > keep ? s->version - keep + 1 : 0;
  uint64_t pinned = s->has_active ? s->active.plan.base_version : 0;
  uint32_t tables = trim_versions(c, "tables/", keep_from, pinned);
  uint32_t deltas = trim_versions(c, "deltas/", keep_from, pinned);
  uint32_t plans = trim_history(c, s->config.keep_plans);
  uint32_t events = trim_journal(c);
  ring_error err = {0};
  int64_t compacted = 0;
  if (c->compact_at > 0 && c->leading && ring_etcd_compact(c->etcd, c->compact_at, &err) == RING_OK)
    compacted = c->compact_at;
  c->compact_at = s->revision;
  if (tables + deltas + plans + events > 0 || compacted > 0)
    rd_logf(RD_INFO,
            "retention: deleted %u tables, %u deltas, %u plans, %u journal entries; compacted to "
            "%" PRId64,
            tables, deltas, plans, events, compacted);
}
