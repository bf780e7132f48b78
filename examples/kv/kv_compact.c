/*
 * kv_compact.c: merging a token's segments (kv_store.h).
 *
 * The committer queues a token once one of its directories holds more
 * than max_segments segments; the compactor thread merges them: it reads
 * every segment of the directory, keeps the newest record of each key
 * (tombstones too), writes them verbatim (each record carries its own
 * checksum) into one new segment through kv/tmp/, renames it in, fsyncs,
 * and only then unlinks the old files. A crash in between leaves
 * duplicates, which merge away (newest wins). The token's mutex is held
 * throughout, so its reads and index updates wait for one compaction.
 */
#define _GNU_SOURCE
#include "kv_store_int.h"
#include "ring.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kv__compact_later(kv_store *s, kv_arc *a, uint32_t token) {
  if (a->compact_queued)
    return;
  a->compact_queued = true;
  pthread_mutex_lock(&s->c_mu);
  if (s->c_len < KV_TOKENS_MAX) {
    s->c_queue[(s->c_head + s->c_len) % KV_TOKENS_MAX] = token;
    s->c_len++;
  }
  pthread_cond_signal(&s->c_cv);
  pthread_mutex_unlock(&s->c_mu);
}

typedef struct merge {
  char (*names)[KV_NAME_MAX]; /* the segments merged */
  uint8_t **bufs;             /* their contents */
  size_t n;
  kv_map map; /* borrowed keys; entries' seg is the index into bufs */
} merge;

typedef struct merge_ctx {
  merge *m;
  size_t i;
} merge_ctx;

static int merge_one(void *ud, const kv_rec *r) {
  merge_ctx *c = ud;
  return kv_map_offer(&c->m->map, r, (void *)(uintptr_t)c->i) < 0 ? -1 : 0;
}

static void merge_free(merge *m) {
  for (size_t i = 0; i < m->n; i++)
    free(m->bufs[i]);
  free(m->bufs);
  free(m->names);
  kv_map_clear(&m->map);
}

/* Reads and merges the segments of a in where; a->mu held. */
static int merge_read(kv_store *s, kv_arc *a, uint32_t token, kv_where where, merge *m) {
  uint32_t cap = a->n_segs[where];
  m->names = calloc(cap, sizeof *m->names);
  m->bufs = calloc(cap, sizeof *m->bufs);
  if (m->names == NULL || m->bufs == NULL)
    return RING_ENOMEM;
  for (kv_seg *g = a->segs; g && m->n < cap; g = g->next) {
    if (g->where != where)
      continue;
    char path[KV_PATH_MAX];
    size_t len = 0;
    kv__path(s, path, sizeof path, token, where, g->name);
    int rc = kv__read_file(path, &m->bufs[m->n], &len);
    if (rc != RING_OK)
      return rc;
    snprintf(m->names[m->n], KV_NAME_MAX, "%s", g->name);
    merge_ctx c = {m, m->n++};
    if (kv_seg_scan(m->bufs[c.i], len, merge_one, &c, NULL) != 0)
      return RING_ENOMEM;
  }
  return RING_OK;
}

/* Writes the merged records as one segment and seals it into where. */
static int merge_write(kv_store *s, uint32_t token, kv_where where, merge *m) {
  const uint8_t **recs = malloc((m->map.n ? m->map.n : 1) * sizeof *recs);
  size_t *lens = malloc((m->map.n ? m->map.n : 1) * sizeof *lens), n = 0;
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc = recs && lens ? RING_OK : RING_ENOMEM;
  for (uint32_t i = 0; rc == RING_OK && i < m->map.cap; i++) {
    const kv_entry *e = &m->map.slots[i];
    if (e->key == NULL)
      continue;
    recs[n] = m->bufs[(uintptr_t)e->seg] + e->off;
    lens[n++] = kv_rec_size(e->klen, e->vlen);
  }
  char name[KV_NAME_MAX];
  bool made = false;
  kv__seg_name(s, name, sizeof name);
  if (rc == RING_OK)
    rc = kv__segment_build(recs, lens, n, &buf, &len);
  if (rc == RING_OK)
    rc = kv__write_tmp(s, name, buf, len, true);
  if (rc == RING_OK)
    rc = kv__seal(s, name, token, where, &made);
  char dir[KV_PATH_MAX];
  kv__path(s, dir, sizeof dir, token, where, NULL);
  if (rc == RING_OK && kv__fsync_dir(dir) != 0)
    rc = RING_EIO;
  free(recs);
  free(lens);
  free(buf);
  return rc;
}

int kv_store_compact(kv_store *s, uint32_t token, kv_where where) {
  kv_arc *a = s ? kv__arc_peek(s, token) : NULL;
  if (a == NULL)
    return s && token < KV_TOKENS_MAX ? RING_OK : RING_EINVAL;
  pthread_mutex_lock(&a->mu);
  merge m = {0};
  int rc = RING_OK;
  if (a->n_segs[where] >= 2) {
    rc = merge_read(s, a, token, where, &m);
    if (rc == RING_OK)
      rc = merge_write(s, token, where, &m);
    if (rc == RING_OK) {
      char dir[KV_PATH_MAX];
      for (size_t i = 0; i < m.n; i++) {
        char path[KV_PATH_MAX];
        kv__path(s, path, sizeof path, token, where, m.names[i]);
        unlink(path);
      }
      kv__path(s, dir, sizeof dir, token, where, NULL);
      kv__fsync_dir(dir);
      atomic_fetch_add(&s->compactions, 1);
    }
    int rb = kv__rebuild_locked(s, a, token);
    rc = rc != RING_OK ? rc : rb;
  }
  pthread_mutex_unlock(&a->mu);
  merge_free(&m);
  if (rc != RING_OK)
    kv__log(s, 1, "compaction failed", ring_strerror(rc));
  return rc;
}

void *kv__compactor_main(void *arg) {
  kv_store *s = arg;
  pthread_mutex_lock(&s->c_mu);
  for (;;) {
    while (s->c_len == 0 && !s->c_stop)
      pthread_cond_wait(&s->c_cv, &s->c_mu);
    if (s->c_stop)
      break;
    uint32_t token = s->c_queue[s->c_head];
    s->c_head = (s->c_head + 1) % KV_TOKENS_MAX;
    s->c_len--;
    pthread_mutex_unlock(&s->c_mu);
    kv_arc *a = kv__arc_peek(s, token);
    if (a) {
      pthread_mutex_lock(&a->mu);
      a->compact_queued = false;
      pthread_mutex_unlock(&a->mu);
      kv_store_compact(s, token, KV_ARC);
      kv_store_compact(s, token, KV_STAGING);
    }
    pthread_mutex_lock(&s->c_mu);
  }
  pthread_mutex_unlock(&s->c_mu);
  return NULL;
}
