/*
 * kv_commit.c: writes and group commit (kv_store.h).
 *
 * Sections: building and sealing segments; the writer's side; the
 * committer.
 *
 * A writer encodes its record, queues it and sleeps until the committer
 * has made it durable. The committer takes what is queued (waiting up to
 * commit_window_us after the first write for more), groups it by token
 * and directory, writes one segment per group to kv/tmp/, syncs, renames
 * each into place, syncs the directories, indexes the segments and wakes
 * the writers. A small batch is synced file by file (fdatasync, then
 * fsync of each directory); a batch touching many tokens with two
 * syncfs(2) calls, which cost about as much as two fsyncs whatever the
 * number of files (measured: 64 files, 10 ms against 22 ms).
 */
#define _GNU_SOURCE /* syncfs */
#include "kv_store_int.h"
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef KV_SYNC_EACH_MAX
#define KV_SYNC_EACH_MAX 4 /* groups up to which files are synced one by one */
#endif

/* ------------------------------------------- building and sealing segments */

int kv__segment_build(const uint8_t *const *recs, const size_t *lens, size_t n, uint8_t **buf,
                      size_t *len) {
  size_t total = KV_SEG_MAGIC_LEN + KV_REC_HEADER;
  for (size_t i = 0; i < n; i++)
    total += lens[i];
  uint8_t *b = malloc(total);
  if (b == NULL)
    return RING_ENOMEM;
  memcpy(b, KV_SEG_MAGIC, KV_SEG_MAGIC_LEN);
  size_t off = KV_SEG_MAGIC_LEN;
  for (size_t i = 0; i < n; i++) {
    memcpy(b + off, recs[i], lens[i]);
    off += lens[i];
  }
  off += kv_rec_encode(b + off, KV_KIND_END, NULL, 0, NULL, 0, (uint64_t)n, NULL);
  *buf = b;
  *len = off;
  return RING_OK;
}

int kv__write_tmp(kv_store *s, const char *name, const uint8_t *buf, size_t len, bool sync) {
  char path[KV_PATH_MAX];
  snprintf(path, sizeof path, "%s/kv/tmp/%s", s->dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return errno == ENOSPC ? RING_ENOSPC : RING_EIO;
  size_t done = 0;
  ssize_t n = 0;
  while (done < len && (n = write(fd, buf + done, len - done)) > 0)
    done += (size_t)n;
  int e = done == len ? 0 : (n < 0 ? errno : EIO);
  if (e == 0 && sync && fdatasync(fd) != 0)
    e = errno;
  if (close(fd) != 0 && e == 0)
    e = errno;
  if (e != 0) {
    unlink(path);
    return e == ENOSPC ? RING_ENOSPC : RING_EIO;
  }
  return RING_OK;
}

int kv__seal(kv_store *s, const char *name, uint32_t token, kv_where where, bool *made) {
  char from[KV_PATH_MAX], dir[KV_PATH_MAX], to[KV_PATH_MAX], parent[KV_PATH_MAX];
  snprintf(from, sizeof from, "%s/kv/tmp/%s", s->dir, name);
  kv__path(s, dir, sizeof dir, token, where, NULL);
  kv__path(s, to, sizeof to, token, where, name);
  snprintf(parent, sizeof parent, "%s/%s", s->dir, where == KV_ARC ? "arcs" : "kv/staging");
  struct stat st;
  *made = stat(dir, &st) != 0;
  if ((*made && kv__ensure_dir(dir, parent) != 0) || rename(from, to) != 0) {
    unlink(from);
    return RING_EIO;
  }
  return RING_OK;
}

/* ---------------------------------------------------------- the writer's side */

int kv_store_put(kv_store *s, uint32_t token, kv_where where, const void *key, size_t klen,
                 const void *value, size_t vlen, bool tombstone, uint64_t ts) {
  if (s == NULL || key == NULL || klen == 0 || klen > KV_KEY_MAX || vlen > KV_VALUE_MAX ||
      (vlen && value == NULL) || (tombstone && vlen) || token >= KV_TOKENS_MAX ||
      (where != KV_ARC && where != KV_STAGING))
    return RING_EINVAL;
  kv_req r = {token, where, NULL, kv_rec_size(klen, vlen), RING_OK, false, NULL};
  if ((r.rec = malloc(r.len)) == NULL)
    return RING_ENOMEM;
  kv_rec_encode(r.rec, tombstone ? KV_KIND_TOMBSTONE : KV_KIND_VALUE, key, klen, value, vlen, ts,
                NULL);
  pthread_mutex_lock(&s->q_mu);
  if (s->stop) {
    r.rc = RING_EIO;
  } else {
    if (s->q_tail)
      s->q_tail->next = &r;
    else
      s->q_head = &r;
    s->q_tail = &r;
    s->q_len++;
    pthread_cond_signal(&s->q_cv);
    while (!r.done)
      pthread_cond_wait(&s->done_cv, &s->q_mu);
  }
  pthread_mutex_unlock(&s->q_mu);
  free(r.rec);
  return r.rc;
}

/* ------------------------------------------------------------ the committer */

static int req_cmp(const void *a, const void *b) {
  const kv_req *x = *(kv_req *const *)a, *y = *(kv_req *const *)b;
  if (x->token != y->token)
    return x->token < y->token ? -1 : 1;
  return (int)x->where - (int)y->where;
}

typedef struct group {
  kv_req **reqs; /* the batch's slice */
  size_t n;
  char name[KV_NAME_MAX];
  uint8_t *buf; /* the segment */
  size_t len;
  bool made; /* its directory was created */
  int rc;
} group;

/* Builds and writes group g's segment to kv/tmp/. */
static void write_group(kv_store *s, group *g, bool sync) {
  const uint8_t **recs = malloc(g->n * sizeof *recs);
  size_t *lens = malloc(g->n * sizeof *lens);
  g->rc = RING_ENOMEM;
  if (recs && lens) {
    for (size_t i = 0; i < g->n; i++) {
      recs[i] = g->reqs[i]->rec;
      lens[i] = g->reqs[i]->len;
    }
    kv__seg_name(s, g->name, sizeof g->name);
    g->rc = kv__segment_build(recs, lens, g->n, &g->buf, &g->len);
    if (g->rc == RING_OK)
      g->rc = kv__write_tmp(s, g->name, g->buf, g->len, sync);
  }
  free(recs);
  free(lens);
}

/* Indexes a sealed group's segment. */
static void index_group(kv_store *s, group *g) {
  uint32_t token = g->reqs[0]->token;
  kv_where where = g->reqs[0]->where;
  kv_arc *a = kv__arc(s, token);
  if (a == NULL) {
    g->rc = RING_ENOMEM;
    return;
  }
  pthread_mutex_lock(&a->mu);
  if (g->made && where == KV_ARC) {
    char dir[KV_PATH_MAX];
    struct stat st;
    kv__path(s, dir, sizeof dir, token, KV_ARC, NULL);
    if (a->segs == NULL && stat(dir, &st) == 0)
      a->ino = (uint64_t)st.st_ino; /* our own directory: no rebuild needed */
  }
  g->rc = kv__index_segment(s, a, token, where, g->name, g->buf, g->len);
  bool compact = a->n_segs[where] > s->o.max_segments;
  if (compact)
    kv__compact_later(s, a, token);
  pthread_mutex_unlock(&a->mu);
}

static void commit_batch(kv_store *s, kv_req **batch, size_t n) {
  qsort(batch, n, sizeof *batch, req_cmp);
  group *g = calloc(n, sizeof *g);
  size_t ng = 0;
  if (g == NULL) {
    for (size_t i = 0; i < n; i++)
      batch[i]->rc = RING_ENOMEM;
    return;
  }
  for (size_t i = 0; i < n; ng++) {
    size_t j = i + 1;
    while (j < n && req_cmp(&batch[i], &batch[j]) == 0)
      j++;
    g[ng].reqs = batch + i;
    g[ng].n = j - i;
    i = j;
  }
  bool each = ng <= KV_SYNC_EACH_MAX;
  for (size_t k = 0; k < ng; k++)
    write_group(s, &g[k], each);
  if (!each && syncfs(s->dirfd) != 0)
    for (size_t k = 0; k < ng; k++)
      g[k].rc = g[k].rc ? g[k].rc : RING_EIO;
  for (size_t k = 0; k < ng; k++)
    if (g[k].rc == RING_OK)
      g[k].rc = kv__seal(s, g[k].name, g[k].reqs[0]->token, g[k].reqs[0]->where, &g[k].made);
  for (size_t k = 0; k < ng; k++) {
    char dir[KV_PATH_MAX];
    kv__path(s, dir, sizeof dir, g[k].reqs[0]->token, g[k].reqs[0]->where, NULL);
    if (each && g[k].rc == RING_OK && kv__fsync_dir(dir) != 0)
      g[k].rc = RING_EIO;
  }
  if (!each && syncfs(s->dirfd) != 0)
    for (size_t k = 0; k < ng; k++)
      g[k].rc = g[k].rc ? g[k].rc : RING_EIO;
  for (size_t k = 0; k < ng; k++) {
    if (g[k].rc == RING_OK)
      index_group(s, &g[k]);
    for (size_t i = 0; i < g[k].n; i++)
      g[k].reqs[i]->rc = g[k].rc;
    if (g[k].rc == RING_OK) {
      atomic_fetch_add(&s->writes, g[k].n);
      atomic_fetch_add(&s->bytes, g[k].len);
    } else {
      atomic_fetch_add(&s->io_errors, 1);
    }
    free(g[k].buf);
  }
  atomic_fetch_add(&s->commits, 1);
  free(g);
}

/* Waits for writes; returns how many it took into batch (0: stop). */
static size_t take_batch(kv_store *s, kv_req **batch) {
  pthread_mutex_lock(&s->q_mu);
  while (s->q_head == NULL && !s->stop)
    pthread_cond_wait(&s->q_cv, &s->q_mu);
  if (s->o.commit_window_us && s->q_head) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)s->o.commit_window_us * 1000u;
    dl.tv_sec += (time_t)(ns / 1000000000u);
    dl.tv_nsec = (long)(ns % 1000000000u);
    while (s->q_len < s->o.max_batch && !s->stop &&
           pthread_cond_timedwait(&s->q_cv, &s->q_mu, &dl) == 0)
      ;
  }
  size_t n = 0;
  while (s->q_head && n < s->o.max_batch) {
    batch[n++] = s->q_head;
    s->q_head = s->q_head->next;
    s->q_len--;
  }
  if (s->q_head == NULL)
    s->q_tail = NULL;
  pthread_mutex_unlock(&s->q_mu);
  return n;
}

void *kv__committer_main(void *arg) {
  kv_store *s = arg;
  kv_req **batch = malloc(s->o.max_batch * sizeof *batch);
  for (;;) {
    size_t n = batch ? take_batch(s, batch) : 0;
    if (n == 0) {
      pthread_mutex_lock(&s->q_mu);
      bool stop = s->stop || batch == NULL;
      if (stop) /* fail whatever is left (only without memory for a batch) */
        for (kv_req *r = s->q_head; r; r = r->next)
          r->rc = RING_ENOMEM, r->done = true;
      if (stop) {
        s->q_head = s->q_tail = NULL;
        s->q_len = 0;
        s->stop = true; /* later writes fail at once instead of waiting */
      }
      pthread_cond_broadcast(&s->done_cv);
      pthread_mutex_unlock(&s->q_mu);
      if (stop)
        break;
      continue;
    }
    commit_batch(s, batch, n);
    pthread_mutex_lock(&s->q_mu);
    for (size_t i = 0; i < n; i++)
      batch[i]->done = true;
    pthread_cond_broadcast(&s->done_cv);
    pthread_mutex_unlock(&s->q_mu);
  }
  free(batch);
  return NULL;
}
