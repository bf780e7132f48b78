/*
 * delta_cache.c: one built table per process for the watchers that follow
 * the same table (delta_int.h, ring__delta_apply_shared).
 *
 * Several watchers in one process (an embedder's, a test fleet's clients,
 * each with its own ring_etcd client or sharing one) each get version v's
 * delta and each hold v-1: without this each would parse the delta, copy
 * T*R owners, hash them and seal its own copy of the same table. With it
 * the first builds and the others take a reference to its table: a sealed
 * table never changes, and ring_table_free frees it with its last holder
 * (ring_int.h, "References"), so every ring_live holding it frees it the
 * usual way, after its own grace period.
 *
 * What proves a hit is the same table: ring_delta_apply is a function of
 * (base, delta bytes) alone, so an entry is keyed by both, exactly: the
 * delta's bytes are kept and compared (memcmp), and the base it was
 * applied to is kept (a reference) and compared by ring__table_same
 * (pointer, else every field, node, owner and pending entry; the owners
 * checksum first, so different tables part early). The delta's own
 * checks (cluster, base version, base checksum, the result's checksum)
 * ran when the entry was built, on those very bytes and that base. Not the
 * cluster name or the etcd endpoint: two watchers get the same table when
 * and only when they would have built the same table.
 *
 * Building: the first caller claims a slot (marked by result == NULL) and
 * builds outside the lock; callers with the same key wait on `built`, up
 * to CACHE_WAIT_MS, then build for themselves. A refused delta frees its
 * slot (refusals are not kept: each waiter then applies it itself and gets
 * its own error). No one spins.
 *
 * Bounds: CACHE_SLOTS entries, the least recently used replaced (never one
 * being built: when all are, the caller builds alone, uncached); deltas
 * over CACHE_DELTA_MAX bytes are applied uncached. So the cache holds at
 * most CACHE_SLOTS delta copies and 2 * CACHE_SLOTS tables (bases and
 * results, most of them tables the watchers hold anyway).
 *
 * Locking: cache.lock guards the slots, the tick and the counters.
 * ring__table_same runs under it: O(1) when watchers share their base (the
 * table the cache gave them for the previous version), O(T*R) when their
 * bases were read apart (the first version after they started).
 */
#define _POSIX_C_SOURCE 200809L
#include "delta_int.h"
#include "etcd_int.h" /* ring__deadline_ms */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CACHE_SLOTS 4              /* a few versions of a few clusters */
#define CACHE_DELTA_MAX (1u << 20) /* a delta of ~130,000 owner changes */
#define CACHE_WAIT_MS 2000L        /* then a waiter builds for itself */

typedef struct entry {
  ring_table *base;   /* a reference; NULL: the slot is free */
  char *delta;        /* malloc()'ed copy of the delta's bytes */
  size_t len;         /* its length */
  ring_table *result; /* a reference; NULL while being built */
  uint64_t used;      /* cache.tick when last claimed or hit: the oldest is replaced */
} entry;

static struct {
  pthread_once_t once;  /* initializes `built` */
  pthread_mutex_t lock; /* guards everything below */
  pthread_cond_t built; /* broadcast when a build ends, either way; CLOCK_MONOTONIC */
  entry slots[CACHE_SLOTS];
  uint64_t tick;
  ring__delta_cache_stats stats;
} cache = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static void cache_init(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&cache.built, &ca);
  pthread_condattr_destroy(&ca);
}

/* The entry for (base, delta), built or being built; NULL if none. */
static entry *find(const ring_table *base, const char *json, size_t len) {
  for (int i = 0; i < CACHE_SLOTS; i++) {
    entry *e = &cache.slots[i];
    if (e->base != NULL && e->len == len && memcmp(e->delta, json, len) == 0 &&
        ring__table_same(e->base, base))
      return e;
  }
  return NULL;
}

/* A free slot, else the least recently used built one; NULL when every
 * slot is being built. */
static entry *victim(void) {
  entry *best = NULL;
  for (int i = 0; i < CACHE_SLOTS; i++) {
    entry *e = &cache.slots[i];
    if (e->base == NULL)
      return e;
    if (e->result != NULL && (best == NULL || e->used < best->used))
      best = e;
  }
  return best;
}

/* Empties e; what it held goes to *held (freed by the caller, unlocked). */
static void take(entry *e, entry *held) {
  *held = *e;
  *e = (entry){0};
}

static void release(entry *held) {
  ring_table_free(held->base);
  ring_table_free(held->result);
  free(held->delta);
}

/* Builds the table for a slot this caller claimed, then fills or frees
 * the slot and wakes the waiters. */
static int build_claimed(entry *e, const ring_table *base, const char *json, size_t len,
                         ring_table **out, ring_error *err) {
  ring_table *t = NULL;
  int rc = ring_delta_apply(base, json, len, &t, err);
  entry held = {0};
  pthread_mutex_lock(&cache.lock);
  if (rc == RING_OK) {
    e->result = ring__table_ref(t);
    cache.stats.builds++;
  } else {
    take(e, &held);
  }
  pthread_cond_broadcast(&cache.built);
  pthread_mutex_unlock(&cache.lock);
  release(&held);
  if (rc == RING_OK)
    *out = t;
  return rc;
}

int ring__delta_apply_shared(const ring_table *base, const char *json, size_t len, ring_table **out,
                             ring_error *err) {
  if (base == NULL || json == NULL || out == NULL || !base->sealed || len > CACHE_DELTA_MAX)
    return ring_delta_apply(base, json, len, out, err); /* which names what is wrong */
  pthread_once(&cache.once, cache_init);
  struct timespec until = ring__deadline_ms(CACHE_WAIT_MS);
  pthread_mutex_lock(&cache.lock);
  entry *e;
  while ((e = find(base, json, len)) != NULL && e->result == NULL)
    if (pthread_cond_timedwait(&cache.built, &cache.lock, &until) == ETIMEDOUT)
      break;
  if (e != NULL && e->result != NULL) { /* built: share it */
    *out = ring__table_ref(e->result);
    e->used = ++cache.tick;
    cache.stats.hits++;
    pthread_mutex_unlock(&cache.lock);
    return RING_OK;
  }
  entry held = {0};
  char *copy = e == NULL ? malloc(len ? len : 1) : NULL; /* once per key: under the lock */
  if (copy != NULL && (e = victim()) != NULL) {          /* claim it */
    take(e, &held);
    memcpy(copy, json, len);
    *e = (entry){ring__table_ref(base), copy, len, NULL, ++cache.tick};
  } else { /* still being built after the wait, every slot is, or no memory: build alone */
    free(copy);
    e = NULL;
  }
  pthread_mutex_unlock(&cache.lock);
  release(&held);
  return e ? build_claimed(e, base, json, len, out, err)
           : ring_delta_apply(base, json, len, out, err);
}

void ring__delta_cache_stats_get(ring__delta_cache_stats *out) {
  pthread_mutex_lock(&cache.lock);
  *out = cache.stats;
  pthread_mutex_unlock(&cache.lock);
}

void ring__delta_cache_clear(void) {
  entry held[CACHE_SLOTS] = {{0}};
  pthread_mutex_lock(&cache.lock);
  for (int i = 0; i < CACHE_SLOTS; i++)
    if (cache.slots[i].result != NULL) /* one being built is its builder's */
      take(&cache.slots[i], &held[i]);
  pthread_mutex_unlock(&cache.lock);
  for (int i = 0; i < CACHE_SLOTS; i++)
    release(&held[i]);
}
