/*
 * kv_store.c: ring-kv's store: opening and closing, token state, reads,
 * index rebuilds, staging (kv_store.h). Writes are in kv_commit.c,
 * compaction in kv_compact.c.
 *
 * Sections: helpers; token state; indexing; reads; directories changing
 * under us; staging; open and close; stats.
 */
#define _GNU_SOURCE /* syncfs, O_DIRECTORY */
#include "arc_dir.h"
#include "kv_store_int.h"
#include "ring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

/* ----------------------------------------------------------------- helpers */

void kv__log(kv_store *s, int level, const char *msg, const char *path) {
  if (s->o.log)
    s->o.log(s->o.log_ud, level, msg, path);
}

void kv__path(const kv_store *s, char *buf, size_t cap, uint32_t token, kv_where where,
              const char *name) {
  snprintf(buf, cap, "%s/%s/%u%s%s", s->dir, where == KV_ARC ? ARC_DIR_ARCS : "kv/staging", token,
           name ? "/" : "", name ? name : "");
}

void kv__seg_name(kv_store *s, char *buf, size_t cap) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long ms = (unsigned long long)ts.tv_sec * 1000u + (unsigned)(ts.tv_nsec / 1000000);
  snprintf(buf, cap, "seg-%013llu-%08u-%s.kv", ms, atomic_fetch_add(&s->seq, 1) % 100000000u,
           s->node);
}

static bool is_seg_name(const char *n) {
  size_t len = strlen(n);
  return len > 7 && len < KV_NAME_MAX && strncmp(n, "seg-", 4) == 0 &&
         strcmp(n + len - 3, ".kv") == 0;
}

int kv__read_file(const char *path, uint8_t **buf, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? RING_ENOTFOUND : RING_EIO;
  struct stat st;
  uint8_t *b = NULL;
  int rc = RING_EIO;
  if (fstat(fd, &st) == 0 && (b = malloc(st.st_size > 0 ? (size_t)st.st_size : 1)) != NULL) {
    size_t got = 0, want = (size_t)st.st_size;
    ssize_t n = 1;
    while (got < want && (n = read(fd, b + got, want - got)) > 0)
      got += (size_t)n;
    if (n >= 0) {
      rc = RING_OK;
      *buf = b;
      *len = got;
      b = NULL;
    }
  } else if (b == NULL && errno == ENOMEM) {
    rc = RING_ENOMEM;
  }
  free(b);
  close(fd);
  return rc;
}

int kv__fsync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

int kv__ensure_dir(const char *path, const char *parent) {
  if (mkdir(path, 0755) == 0)
    return parent ? kv__fsync_dir(parent) : 0;
  return errno == EEXIST ? 0 : -1;
}

static uint64_t dir_ino(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? (uint64_t)st.st_ino : 0;
}

/* ------------------------------------------------------------ token state */

kv_arc *kv__arc_peek(kv_store *s, uint32_t token) {
  return token < KV_TOKENS_MAX ? atomic_load(&s->arcs[token]) : NULL;
}

kv_arc *kv__arc(kv_store *s, uint32_t token) {
  kv_arc *a = kv__arc_peek(s, token);
  if (a != NULL || token >= KV_TOKENS_MAX)
    return a;
  pthread_mutex_lock(&s->mu);
  if ((a = atomic_load(&s->arcs[token])) == NULL && (a = calloc(1, sizeof *a)) != NULL) {
    pthread_mutex_init(&a->mu, NULL);
    a->map.own_keys = true;
    atomic_store(&s->arcs[token], a);
  }
  pthread_mutex_unlock(&s->mu);
  return a;
}

static void arc_clear(kv_store *s, kv_arc *a) {
  atomic_fetch_sub(&s->keys, a->map.n);
  kv_map_clear(&a->map);
  while (a->segs) {
    kv_seg *next = a->segs->next;
    free(a->segs);
    a->segs = next;
    atomic_fetch_sub(&s->segments, 1);
  }
  a->n_segs[0] = a->n_segs[1] = 0;
}

/* --------------------------------------------------------------- indexing */

typedef struct index_ctx {
  kv_store *s;
  kv_arc *a;
  kv_seg *seg;
  int rc;
} index_ctx;

static int index_one(void *ud, const kv_rec *r) {
  index_ctx *c = ud;
  uint32_t before = c->a->map.n;
  if (kv_map_offer(&c->a->map, r, c->seg) < 0)
    return c->rc = RING_ENOMEM;
  atomic_fetch_add(&c->s->keys, c->a->map.n - before);
  return 0;
}

int kv__index_segment(kv_store *s, kv_arc *a, uint32_t token, kv_where where, const char *name,
                      const uint8_t *buf, size_t len) {
  for (kv_seg *g = a->segs; g; g = g->next)
    if (g->where == where && strcmp(g->name, name) == 0)
      return RING_OK; /* a rebuild got there first */
  kv_seg *seg = calloc(1, sizeof *seg);
  if (seg == NULL)
    return RING_ENOMEM;
  snprintf(seg->name, sizeof seg->name, "%s", name);
  seg->where = where;
  seg->size = len;
  seg->next = a->segs;
  a->segs = seg;
  a->n_segs[where]++;
  atomic_fetch_add(&s->segments, 1);
  index_ctx c = {s, a, seg, RING_OK};
  kv_seg_info info;
  kv_seg_scan(buf, len, index_one, &c, &info);
  if (c.rc == RING_OK && !info.complete) {
    char path[KV_PATH_MAX];
    kv__path(s, path, sizeof path, token, where, name);
    atomic_fetch_add(&s->torn, 1);
    kv__log(s, 1, "torn segment: records after the damage are ignored", path);
  }
  return c.rc;
}

static int index_dir(kv_store *s, kv_arc *a, uint32_t token, kv_where where) {
  char path[KV_PATH_MAX];
  kv__path(s, path, sizeof path, token, where, NULL);
  DIR *d = opendir(path);
  if (d == NULL)
    return errno == ENOENT ? RING_OK : RING_EIO;
  int rc = RING_OK;
  struct dirent *e;
  while (rc == RING_OK && (e = readdir(d)) != NULL) {
    if (!is_seg_name(e->d_name))
      continue;
    char file[KV_PATH_MAX];
    uint8_t *buf = NULL;
    size_t len = 0;
    kv__path(s, file, sizeof file, token, where, e->d_name);
    int r = kv__read_file(file, &buf, &len);
    if (r == RING_OK)
      rc = kv__index_segment(s, a, token, where, e->d_name, buf, len);
    else if (r != RING_ENOTFOUND) /* gone meanwhile: compacted or dropped */
      rc = r;
    free(buf);
  }
  closedir(d);
  return rc;
}

int kv__rebuild_locked(kv_store *s, kv_arc *a, uint32_t token) {
  char path[KV_PATH_MAX];
  kv__path(s, path, sizeof path, token, KV_ARC, NULL);
  arc_clear(s, a);
  a->ino = dir_ino(path);
  atomic_fetch_add(&s->rebuilds, 1);
  int rc = index_dir(s, a, token, KV_ARC);
  if (rc == RING_OK)
    rc = index_dir(s, a, token, KV_STAGING);
  if (rc != RING_OK) {
    arc_clear(s, a);
    a->ino = 0; /* the next refresh tries again */
  }
  return rc;
}

int kv_store_rebuild(kv_store *s, uint32_t token) {
  kv_arc *a = s ? kv__arc(s, token) : NULL;
  if (a == NULL)
    return s && token < KV_TOKENS_MAX ? RING_ENOMEM : RING_EINVAL;
  pthread_mutex_lock(&a->mu);
  int rc = kv__rebuild_locked(s, a, token);
  pthread_mutex_unlock(&a->mu);
  return rc;
}

/* ------------------------------------------------------------------ reads */

/* Reads e's value; a->mu held. RING_ENOTFOUND when the file is gone. */
static int read_entry(kv_store *s, uint32_t token, const kv_entry *e, kv_value *out) {
  kv_value v = {NULL, 0, e->ts, e->kind == KV_KIND_TOMBSTONE};
  if (!v.tombstone) {
    const kv_seg *seg = e->seg;
    char path[KV_PATH_MAX];
    kv__path(s, path, sizeof path, token, seg->where, seg->name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return errno == ENOENT ? RING_ENOTFOUND : RING_EIO;
    v.data = malloc(e->vlen ? e->vlen : 1);
    ssize_t n = v.data ? pread(fd, v.data, e->vlen, (off_t)(e->off + KV_REC_HEADER + e->klen)) : -1;
    close(fd);
    if (n != (ssize_t)e->vlen) {
      free(v.data);
      return v.data ? RING_EIO : RING_ENOMEM;
    }
    v.len = e->vlen;
  }
  *out = v;
  return RING_OK;
}

int kv_store_get(kv_store *s, uint32_t token, const void *key, size_t klen, kv_value *out) {
  if (s == NULL || key == NULL || klen == 0 || klen > KV_KEY_MAX || out == NULL ||
      token >= KV_TOKENS_MAX)
    return RING_EINVAL;
  *out = (kv_value){.data = NULL}; /* kv_value_free is safe on every path */
  kv_arc *a = kv__arc_peek(s, token);
  if (a == NULL)
    return RING_ENOTFOUND;
  uint64_t hash = XXH3_64bits(key, klen);
  int rc = RING_ENOTFOUND;
  pthread_mutex_lock(&a->mu);
  for (int attempt = 0; attempt < 2; attempt++) {
    const kv_entry *e = kv_map_find(&a->map, key, (uint32_t)klen, hash);
    if (e == NULL) {
      rc = RING_ENOTFOUND;
      break;
    }
    rc = read_entry(s, token, e, out);
    if (rc != RING_ENOTFOUND)
      break;
    /* The file went away under the index (an agent replaced the arc):
     * index what is there now and look again. */
    if ((rc = kv__rebuild_locked(s, a, token)) != RING_OK)
      break;
    rc = RING_ENOTFOUND;
  }
  pthread_mutex_unlock(&a->mu);
  if (rc == RING_EIO)
    atomic_fetch_add(&s->io_errors, 1);
  return rc;
}

void kv_value_free(kv_value *v) {
  if (v) {
    free(v->data);
    v->data = NULL;
  }
}

/* ------------------------------------------- directories changing under us */

int kv_store_refresh(kv_store *s, uint32_t token) {
  if (s == NULL || token >= KV_TOKENS_MAX)
    return RING_EINVAL;
  char path[KV_PATH_MAX];
  kv__path(s, path, sizeof path, token, KV_ARC, NULL);
  uint64_t ino = dir_ino(path);
  kv_arc *a = kv__arc_peek(s, token);
  if (a == NULL && ino == 0)
    return RING_OK;
  if ((a = kv__arc(s, token)) == NULL)
    return RING_ENOMEM;
  int rc = RING_OK;
  pthread_mutex_lock(&a->mu);
  if (a->ino != ino)
    rc = kv__rebuild_locked(s, a, token);
  pthread_mutex_unlock(&a->mu);
  return rc;
}

uint32_t kv_store_next_token(kv_store *s, uint32_t from) {
  for (uint32_t t = from; s && t < KV_TOKENS_MAX; t++) {
    kv_arc *a = kv__arc_peek(s, t);
    if (a == NULL)
      continue;
    pthread_mutex_lock(&a->mu);
    bool any = a->segs != NULL || a->ino != 0;
    pthread_mutex_unlock(&a->mu);
    if (any)
      return t;
  }
  return KV_NO_TOKEN;
}

/* ----------------------------------------------------------------- staging */

bool kv_store_arc_missing(kv_store *s, uint32_t token) {
  char path[KV_PATH_MAX];
  struct stat st;
  kv__path(s, path, sizeof path, token, KV_ARC, NULL);
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return false;
  snprintf(path, sizeof path, "%s/" ARC_DIR_PLACED, s->dir);
  return stat(path, &st) == 0;
}

bool kv_store_has_staging(kv_store *s, uint32_t token) {
  kv_arc *a = s ? kv__arc_peek(s, token) : NULL;
  if (a == NULL)
    return false;
  pthread_mutex_lock(&a->mu);
  bool any = a->n_segs[KV_STAGING] > 0;
  pthread_mutex_unlock(&a->mu);
  return any;
}

/* Renames (adopt) or unlinks (drop) every staging segment of token; a->mu
 * held. */
static int move_staging(kv_store *s, uint32_t token, bool adopt) {
  char from[KV_PATH_MAX], to[KV_PATH_MAX], arcs[KV_PATH_MAX];
  kv__path(s, from, sizeof from, token, KV_STAGING, NULL);
  kv__path(s, to, sizeof to, token, KV_ARC, NULL);
  snprintf(arcs, sizeof arcs, "%s/arcs", s->dir);
  if (adopt && kv__ensure_dir(to, arcs) != 0)
    return RING_EIO;
  DIR *d = opendir(from);
  if (d == NULL)
    return errno == ENOENT ? RING_OK : RING_EIO;
  int rc = RING_OK;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char f[KV_PATH_MAX], t[KV_PATH_MAX];
    kv__path(s, f, sizeof f, token, KV_STAGING, e->d_name);
    kv__path(s, t, sizeof t, token, KV_ARC, e->d_name);
    if (adopt && is_seg_name(e->d_name) ? rename(f, t) != 0 : unlink(f) != 0)
      rc = RING_EIO;
  }
  closedir(d);
  if (rc == RING_OK && adopt && kv__fsync_dir(to) != 0)
    rc = RING_EIO;
  if (rc == RING_OK && rmdir(from) != 0 && errno != ENOENT)
    rc = RING_EIO;
  char staging[KV_PATH_MAX];
  snprintf(staging, sizeof staging, "%s/kv/staging", s->dir);
  kv__fsync_dir(staging);
  return rc;
}

static int staging_op(kv_store *s, uint32_t token, bool adopt) {
  kv_arc *a = s ? kv__arc(s, token) : NULL;
  if (a == NULL)
    return s && token < KV_TOKENS_MAX ? RING_ENOMEM : RING_EINVAL;
  pthread_mutex_lock(&a->mu);
  int rc = move_staging(s, token, adopt);
  int rb = kv__rebuild_locked(s, a, token);
  pthread_mutex_unlock(&a->mu);
  return rc != RING_OK ? rc : rb;
}

int kv_store_adopt(kv_store *s, uint32_t token) { return staging_op(s, token, true); }
int kv_store_drop_staging(kv_store *s, uint32_t token) { return staging_op(s, token, false); }

/* ---------------------------------------------------------- open and close */

/* Parses a decimal token directory name. */
static bool parse_token(const char *n, uint32_t *out) {
  char *end = NULL;
  if (n[0] < '0' || n[0] > '9' || (n[0] == '0' && n[1] != '\0'))
    return false;
  unsigned long v = strtoul(n, &end, 10);
  if (*end != '\0' || v >= KV_TOKENS_MAX)
    return false;
  *out = (uint32_t)v;
  return true;
}

/* Indexes every token directory under sub ("arcs" or "kv/staging"). */
static int index_all(kv_store *s, const char *sub) {
  char path[KV_PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", s->dir, sub);
  DIR *d = opendir(path);
  if (d == NULL)
    return RING_EIO;
  int rc = RING_OK;
  struct dirent *e;
  while (rc == RING_OK && (e = readdir(d)) != NULL) {
    uint32_t token;
    kv_arc *a;
    if (!parse_token(e->d_name, &token) || ((a = kv__arc_peek(s, token)) && a->segs))
      continue; /* not a token, or indexed with the other directory */
    rc = kv_store_rebuild(s, token);
  }
  closedir(d);
  return rc;
}

/* Empties kv/tmp: segments a crash cut short were never acknowledged. */
static void sweep_tmp(kv_store *s) {
  char path[KV_PATH_MAX];
  snprintf(path, sizeof path, "%s/kv/tmp", s->dir);
  DIR *d = opendir(path);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    char f[KV_PATH_MAX + 256];
    snprintf(f, sizeof f, "%s/%s", path, e->d_name);
    if (e->d_name[0] != '.' && unlink(f) == 0)
      kv__log(s, 0, "removed an unfinished segment", f);
  }
  if (d)
    closedir(d);
}

static int make_dirs(kv_store *s) {
  const char *subs[] = {"", "/arcs", "/kv", "/kv/tmp", "/kv/staging"};
  for (int i = 0; i < 5; i++) {
    char path[KV_PATH_MAX];
    snprintf(path, sizeof path, "%s%s", s->dir, subs[i]);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      return -1;
  }
  return 0;
}

static void store_free(kv_store *s) {
  if (s->arcs)
    for (uint32_t t = 0; t < KV_TOKENS_MAX; t++) {
      kv_arc *a = atomic_load(&s->arcs[t]);
      if (a) {
        arc_clear(s, a);
        pthread_mutex_destroy(&a->mu);
        free(a);
      }
    }
  if (s->dirfd >= 0)
    close(s->dirfd);
  free(s->arcs);
  free(s->c_queue);
  free(s->dir);
  free(s->node);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->q_mu);
  pthread_cond_destroy(&s->q_cv);
  pthread_cond_destroy(&s->done_cv);
  pthread_mutex_destroy(&s->c_mu);
  pthread_cond_destroy(&s->c_cv);
  free(s);
}

static kv_store *store_alloc(const kv_store_opts *o) {
  kv_store *s = calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  s->o = *o;
  s->dirfd = -1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->q_mu, NULL);
  pthread_cond_init(&s->q_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  pthread_mutex_init(&s->c_mu, NULL);
  pthread_cond_init(&s->c_cv, NULL);
  s->dir = strdup(o->data_dir);
  s->node = strdup(o->node_id);
  s->arcs = calloc(KV_TOKENS_MAX, sizeof *s->arcs);
  s->c_queue = calloc(KV_TOKENS_MAX, sizeof *s->c_queue);
  if (s->dir == NULL || s->node == NULL || s->arcs == NULL || s->c_queue == NULL) {
    store_free(s);
    return NULL;
  }
  if (s->o.max_batch == 0)
    s->o.max_batch = 256;
  if (s->o.max_segments == 0)
    s->o.max_segments = 8;
  return s;
}

/* Sets *stop under mu, wakes the thread and joins it. */
static void stop_thread(pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop, pthread_t th) {
  pthread_mutex_lock(mu);
  *stop = true;
  pthread_cond_signal(cv);
  pthread_mutex_unlock(mu);
  pthread_join(th, NULL);
}

int kv_store_open(const kv_store_opts *o, kv_store **out, char *msg, size_t cap) {
  size_t idlen = o && o->node_id ? strlen(o->node_id) : 0;
  if (o == NULL || o->data_dir == NULL || idlen == 0 || idlen > RING_ID_MAX || out == NULL)
    return snprintf(msg, cap, "a data dir and a node id are required"), RING_EINVAL;
  kv_store *s = store_alloc(o);
  if (s == NULL)
    return snprintf(msg, cap, "out of memory"), RING_ENOMEM;
  if (make_dirs(s) != 0 || (s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
    snprintf(msg, cap, "%s: %s", s->dir, strerror(errno));
    store_free(s);
    return RING_EIO;
  }
  sweep_tmp(s);
  int rc = index_all(s, ARC_DIR_ARCS);
  if (rc == RING_OK)
    rc = index_all(s, "kv/staging");
  if (rc != RING_OK) {
    snprintf(msg, cap, "indexing %s: %s", s->dir, ring_strerror(rc));
    store_free(s);
    return rc;
  }
  if (pthread_create(&s->committer, NULL, kv__committer_main, s) != 0) {
    store_free(s);
    return snprintf(msg, cap, "cannot start the committer"), RING_ENOMEM;
  }
  if (pthread_create(&s->compactor, NULL, kv__compactor_main, s) != 0) {
    stop_thread(&s->q_mu, &s->q_cv, &s->stop, s->committer);
    store_free(s);
    return snprintf(msg, cap, "cannot start the compactor"), RING_ENOMEM;
  }
  *out = s;
  return RING_OK;
}

void kv_store_close(kv_store *s) {
  if (s == NULL)
    return;
  stop_thread(&s->c_mu, &s->c_cv, &s->c_stop, s->compactor);
  stop_thread(&s->q_mu, &s->q_cv, &s->stop, s->committer); /* commits what is queued */
  store_free(s);
}

/* ------------------------------------------------------------------- stats */

void kv_store_stats_get(kv_store *s, kv_store_stats *out) {
  kv_store_stats st = {
      atomic_load(&s->keys),     atomic_load(&s->segments), atomic_load(&s->commits),
      atomic_load(&s->writes),   atomic_load(&s->bytes),    atomic_load(&s->compactions),
      atomic_load(&s->rebuilds), atomic_load(&s->torn),     atomic_load(&s->io_errors)};
  *out = st;
}
