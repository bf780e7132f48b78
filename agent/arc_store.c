/*
 * arc_store.c: the arcs on this host, <data-dir>/arcs/<token>/, and the
 * temporary directories beside them in <data-dir>/tmp/.
 *
 * Sections: the checksum cache; open and close; manifests; listing,
 * removal and the temporary area.
 *
 * The store holds no open descriptors between calls: every call works on
 * paths under the data directory, so the server's threads, the fetchers
 * and the daemon's loop use one store at once. The only shared state is
 * the checksum cache, under `lock`.
 */
#define _GNU_SOURCE /* O_NOFOLLOW, O_DIRECTORY, O_CLOEXEC, st_mtim */
#include "arc_dir.h"
#include "arc_int.h"
#include "ringx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef ARC_CACHE_MAX
#define ARC_CACHE_MAX 65536u /* cached checksums; the cache is emptied when full */
#endif
#define CACHE_BUCKETS 4096u

/* ---------------------------------------------------- the checksum cache */

/* A file's checksum, valid while its identity (inode, size, mtime, ctime)
 * is unchanged. Arc files are immutable, so a hit is the normal case. */
typedef struct cache_entry {
  struct cache_entry *next; /* bucket chain */
  uint32_t token;
  char name[ARC_NAME_MAX + 1];
  uint64_t ino, size;
  int64_t mtime_ns, ctime_ns;
  uint64_t xxh3;
} cache_entry;

struct arc_store {
  char *dir;                           /* the data directory */
  char *arcs;                          /* dir/arcs */
  char *tmp;                           /* dir/tmp */
  pthread_mutex_t lock;                /* guards buckets and n_cached */
  cache_entry *buckets[CACHE_BUCKETS]; /* by XXH3(token, name) */
  uint32_t n_cached;
  uint64_t removals;                   /* names tmp/rm.<token>.<n>; under lock */
  uint64_t refused;                    /* names refused as not regular files; under lock */
  char refused_last[ARC_NAME_MAX + 8]; /* "<token>/<name>" of the last; under lock */
};

static uint32_t bucket_of(uint32_t token, const char *name) {
  return (uint32_t)(XXH3_64bits_withSeed(name, strlen(name), token) % CACHE_BUCKETS);
}

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static bool same_file(const cache_entry *e, const struct stat *st) {
  return e->ino == (uint64_t)st->st_ino && e->size == (uint64_t)st->st_size &&
         e->mtime_ns == ns_of(st->st_mtim) && e->ctime_ns == ns_of(st->st_ctim);
}

static bool unchanged(const struct stat *a, const struct stat *b) {
  return a->st_ino == b->st_ino && a->st_size == b->st_size &&
         ns_of(a->st_mtim) == ns_of(b->st_mtim) && ns_of(a->st_ctim) == ns_of(b->st_ctim);
}

static void cache_clear(arc_store *s) {
  for (uint32_t b = 0; b < CACHE_BUCKETS; b++)
    for (cache_entry *e = s->buckets[b], *next; e != NULL; e = next) {
      next = e->next;
      free(e);
    }
  memset(s->buckets, 0, sizeof s->buckets);
  s->n_cached = 0;
}

static bool cache_get(arc_store *s, uint32_t token, const char *name, const struct stat *st,
                      uint64_t *xxh3) {
  bool hit = false;
  pthread_mutex_lock(&s->lock);
  for (cache_entry *e = s->buckets[bucket_of(token, name)]; e != NULL && !hit; e = e->next)
    if (e->token == token && strcmp(e->name, name) == 0 && same_file(e, st)) {
      *xxh3 = e->xxh3;
      hit = true;
    }
  pthread_mutex_unlock(&s->lock);
  return hit;
}

/* Records a checksum, replacing a stale entry of the same file. */
static void cache_put(arc_store *s, uint32_t token, const char *name, const struct stat *st,
                      uint64_t xxh3) {
  uint32_t b = bucket_of(token, name);
  pthread_mutex_lock(&s->lock);
  cache_entry **pp = &s->buckets[b];
  while (*pp != NULL && !((*pp)->token == token && strcmp((*pp)->name, name) == 0))
    pp = &(*pp)->next;
  cache_entry *e = *pp;
  if (e == NULL) {
    if (s->n_cached >= ARC_CACHE_MAX)
      cache_clear(s), pp = &s->buckets[b];
    if ((e = calloc(1, sizeof *e)) != NULL) {
      *pp = e;
      s->n_cached++;
    }
  }
  if (e != NULL) {
    e->token = token;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ino = (uint64_t)st->st_ino;
    e->size = (uint64_t)st->st_size;
    e->mtime_ns = ns_of(st->st_mtim);
    e->ctime_ns = ns_of(st->st_ctim);
    e->xxh3 = xxh3;
  }
  pthread_mutex_unlock(&s->lock);
}

/* -------------------------------------------------------- open and close */

static char *join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *p = malloc(la + lb + 2);
  if (p != NULL) {
    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
  }
  return p;
}

static int make_dir(const char *path, ring_error *err) {
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return ring__err(err, arc__errno_code(-errno), "mkdir %s: %s", path, strerror(errno));
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return ring__err(err, RING_EIO, "%s: not a directory", path);
  return RING_OK;
}

int arc_store_open(const char *data_dir, arc_store **out, ring_error *err) {
  if (data_dir == NULL || data_dir[0] == '\0' || out == NULL)
    return ring__err(err, RING_EINVAL, "arc_store_open: no data directory");
  arc_store *s = calloc(1, sizeof *s);
  if (s == NULL)
    return ring__err(err, RING_ENOMEM, "arc_store_open: out of memory");
  int rc = RING_OK;
  s->dir = strdup(data_dir);
  s->arcs = join(data_dir, ARC_DIR_ARCS);
  s->tmp = join(data_dir, "tmp");
  if (s->dir == NULL || s->arcs == NULL || s->tmp == NULL)
    rc = ring__err(err, RING_ENOMEM, "arc_store_open: out of memory");
  if (rc == RING_OK)
    rc = make_dir(s->dir, err);
  if (rc == RING_OK)
    rc = make_dir(s->arcs, err);
  if (rc == RING_OK)
    rc = make_dir(s->tmp, err);
  if (rc == RING_OK && arc__fsync_dir(s->dir) != 0)
    rc = ring__err(err, RING_EIO, "fsync %s: %s", s->dir, strerror(errno));
  if (rc != RING_OK || pthread_mutex_init(&s->lock, NULL) != 0) {
    free(s->dir), free(s->arcs), free(s->tmp), free(s);
    return rc != RING_OK ? rc : ring__err(err, RING_ENOMEM, "arc_store_open: mutex");
  }
  *out = s;
  return RING_OK;
}

void arc_store_close(arc_store *s) {
  if (s == NULL)
    return;
  cache_clear(s);
  pthread_mutex_destroy(&s->lock);
  free(s->dir);
  free(s->arcs);
  free(s->tmp);
  free(s);
}

const char *arc_store_dir(const arc_store *s) { return s ? s->dir : NULL; }
const char *arc__store_arcs(const arc_store *s) { return s->arcs; }
const char *arc__store_tmp(const arc_store *s) { return s->tmp; }

/* ------------------------------------------------------------- manifests */

bool arc_store_has(arc_store *s, uint32_t token) {
  char path[64];
  snprintf(path, sizeof path, "%" PRIu32, token);
  struct stat st;
  char *p = s ? join(s->arcs, path) : NULL;
  bool has = p != NULL && lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
  free(p);
  return has;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const arc_file *)a)->name, ((const arc_file *)b)->name);
}

void arc__store_refuse(arc_store *s, uint32_t token, const char *name) {
  pthread_mutex_lock(&s->lock);
  s->refused++;
  snprintf(s->refused_last, sizeof s->refused_last, "%" PRIu32 "/%.*s", token, ARC_NAME_MAX, name);
  pthread_mutex_unlock(&s->lock);
}

uint64_t arc_store_refused(arc_store *s, char *last, size_t cap) {
  if (s == NULL)
    return 0;
  pthread_mutex_lock(&s->lock);
  uint64_t n = s->refused;
  if (last != NULL && cap > 0)
    snprintf(last, cap, "%s", s->refused_last);
  pthread_mutex_unlock(&s->lock);
  return n;
}

#define NOT_REGULAR 1 /* file_checksum: the name is no regular file (any more) */

/* The checksum of dfd/name, from the cache or hashed now (and cached if
 * the file did not change while it was read). NOT_REGULAR (refused and
 * counted) when what is there now is not a regular file: the listing's
 * check was by name, so it may have been swapped since. */
static int file_checksum(arc_store *s, uint32_t token, int dfd, arc_file *f, ring_error *err) {
  struct stat st, after;
  int fd = arc__open_regular(dfd, f->name, &st);
  if (fd == -ENOTSUP) {
    arc__store_refuse(s, token, f->name);
    return NOT_REGULAR;
  }
  if (fd < 0)
    return ring__err(err, RING_EIO, "arc %" PRIu32 ": %s: %s", token, f->name, strerror(-fd));
  f->size = (uint64_t)st.st_size;
  int rc = 0;
  if (!cache_get(s, token, f->name, &st, &f->xxh3)) {
    XXH3_state_t *h = XXH3_createState();
    rc = h == NULL ? -ENOMEM : 0;
    if (rc == 0 && XXH3_64bits_reset(h) == XXH_OK && (rc = arc__hash_fd(fd, f->size, h)) == 0) {
      f->xxh3 = XXH3_64bits_digest(h);
      if (fstat(fd, &after) == 0 && unchanged(&st, &after))
        cache_put(s, token, f->name, &st, f->xxh3);
    }
    XXH3_freeState(h);
  }
  close(fd);
  if (rc != 0)
    return ring__err(err, arc__errno_code(rc), "arc %" PRIu32 ": hashing %s: %s", token, f->name,
                     strerror(-rc));
  return RING_OK;
}

/* The regular files of dfd with valid names, sorted; sizes and checksums
 * still unset. Other entries are skipped: invalid names (writers' hidden
 * temporaries) silently, valid names of other types refused and counted. */
static int list_files(arc_store *s, int dfd, uint32_t token, arc_manifest *m, ring_error *err) {
  DIR *d = fdopendir(dup(dfd));
  if (d == NULL)
    return ring__err(err, RING_EIO, "arc %" PRIu32 ": %s", token, strerror(errno));
  uint32_t cap = 0;
  int rc = RING_OK;
  struct dirent *e;
  while (rc == RING_OK && (e = readdir(d)) != NULL) {
    struct stat st;
    if (!arc__valid_name(e->d_name) || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (!S_ISREG(st.st_mode)) { /* a FIFO, link, device, directory: never listed nor served */
      arc__store_refuse(s, token, e->d_name);
      continue;
    }
    if (m->n_files == ARC_FILES_MAX) {
      rc =
          ring__err(err, RING_ETOOBIG, "arc %" PRIu32 ": more than %u files", token, ARC_FILES_MAX);
    } else if (m->n_files == cap) {
      cap = cap ? cap * 2 : 16;
      arc_file *p = realloc(m->files, cap * sizeof *p);
      if (p == NULL)
        rc = ring__err(err, RING_ENOMEM, "arc %" PRIu32 ": out of memory", token);
      else
        m->files = p;
    }
    if (rc == RING_OK)
      snprintf(m->files[m->n_files++].name, ARC_NAME_MAX + 1, "%s", e->d_name);
  }
  closedir(d);
  if (rc == RING_OK && m->n_files > 1)
    qsort(m->files, m->n_files, sizeof *m->files, by_name);
  return rc;
}

int arc__store_open_arc(arc_store *s, uint32_t token, ring_error *err) {
  char name[16];
  snprintf(name, sizeof name, "%" PRIu32, token);
  int afd = open(s->arcs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (afd < 0) /* not "not held": the store itself is gone (a data disk not mounted?) */
    return ring__err(err, RING_EUNAVAIL, "%s: %s", s->arcs, strerror(errno));
  int dfd = openat(afd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int e = errno;
  close(afd);
  if (dfd >= 0)
    return dfd;
  return e == ENOENT || e == ENOTDIR || e == ELOOP
             ? ring__err(err, RING_ENOTFOUND, "arc %" PRIu32 ": not held", token)
             : ring__err(err, RING_EIO, "arc %" PRIu32 ": %s", token, strerror(e));
}

int arc_store_manifest(arc_store *s, uint32_t token, arc_manifest *out, ring_error *err) {
  if (s == NULL || out == NULL || token > ARC_TOKEN_MAX)
    return ring__err(err, RING_EINVAL, "arc_store_manifest: bad argument");
  int dfd = arc__store_open_arc(s, token, err);
  if (dfd < 0)
    return dfd;
  arc_manifest m = {.token = token};
  int rc = list_files(s, dfd, token, &m, err);
  for (uint32_t i = 0; rc == RING_OK && i < m.n_files;) {
    rc = file_checksum(s, token, dfd, &m.files[i], err);
    if (rc == NOT_REGULAR) { /* swapped since it was listed: left out, as if never there */
      memmove(&m.files[i], &m.files[i + 1], (m.n_files - i - 1) * sizeof *m.files);
      m.n_files--;
      rc = RING_OK;
      continue;
    }
    m.bytes += m.files[i++].size;
  }
  close(dfd);
  if (rc != RING_OK) {
    arc_manifest_free(&m);
    return rc;
  }
  *out = m;
  return RING_OK;
}

/* ------------------------------------- listing, removal, the temporary area */

static int by_token(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

int arc_store_list(arc_store *s, uint32_t **tokens, uint32_t *n) {
  if (s == NULL || tokens == NULL || n == NULL)
    return RING_EINVAL;
  DIR *d = opendir(s->arcs);
  if (d == NULL)
    return arc__errno_code(-errno);
  uint32_t *v = NULL, len = 0, cap = 0;
  int rc = RING_OK;
  struct dirent *e;
  while (rc == RING_OK && (e = readdir(d)) != NULL) {
    uint32_t t;
    if (!arc__parse_token(e->d_name, strlen(e->d_name), &t))
      continue;
    if (len == cap) {
      cap = cap ? cap * 2 : 64;
      uint32_t *p = realloc(v, cap * sizeof *p);
      if (p == NULL) {
        rc = RING_ENOMEM;
        break;
      }
      v = p;
    }
    v[len++] = t;
  }
  closedir(d);
  if (rc != RING_OK) {
    free(v);
    return rc;
  }
  if (len > 1)
    qsort(v, len, sizeof *v, by_token);
  *tokens = v;
  *n = len;
  return RING_OK;
}

/* Renames from to to, replacing nothing there (-EEXIST), also on file
 * systems without RENAME_NOREPLACE. Returns 0 or -errno. */
static int rename_noreplace(const char *from, const char *to) {
  if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
    return 0;
  if (errno != EINVAL)
    return -errno;
  struct stat st;
  if (lstat(to, &st) == 0)
    return -EEXIST;
  return rename(from, to) == 0 ? 0 : -errno;
}

/* Takes arcs/<token>/ out of service as tmp/<name> (replacing nothing
 * there, with noreplace): renamed, then arcs/ fsynced, so that it stays
 * out after a crash. *to gets the new path (malloc()ed, also on failure).
 * Returns 0 or -errno. */
static int take_out(arc_store *s, uint32_t token, const char *name, bool noreplace, char **to) {
  char t[16];
  snprintf(t, sizeof t, "%" PRIu32, token);
  char *from = join(s->arcs, t);
  *to = join(s->tmp, name);
  int rc = from && *to ? 0 : -ENOMEM;
  if (rc == 0 && noreplace)
    rc = rename_noreplace(from, *to);
  else if (rc == 0 && rename(from, *to) != 0)
    rc = -errno;
  if (rc == 0)
    rc = arc__fsync_dir(s->arcs);
  free(from);
  return rc;
}

static int store_code(int rc) {
  return rc == -ENOENT ? RING_ENOTFOUND : rc ? arc__errno_code(rc) : RING_OK;
}

int arc_store_remove(arc_store *s, uint32_t token) {
  if (s == NULL || token > ARC_TOKEN_MAX)
    return RING_EINVAL;
  char gone[64];
  pthread_mutex_lock(&s->lock);
  snprintf(gone, sizeof gone, "rm.%" PRIu32 ".%" PRIu64, token, s->removals++);
  pthread_mutex_unlock(&s->lock);
  char *to;
  int rc = take_out(s, token, gone, false, &to);
  if (rc == 0)
    rc = arc__rmtree(to); /* gone from arcs/ already; a leftover is swept later */
  free(to);
  return store_code(rc);
}

int arc_store_recheck(arc_store *s, uint32_t token, uint64_t version) {
  if (s == NULL || token > ARC_TOKEN_MAX)
    return RING_EINVAL;
  char partial[48];
  snprintf(partial, sizeof partial, "%" PRIu32 ".%" PRIu64, token, version);
  char *to;
  int rc = take_out(s, token, partial, true, &to);
  if (rc == 0)
    rc = arc__fsync_dir(s->tmp);
  free(to);
  if (rc == -EEXIST) /* a partial copy of that version: it is the one resumed */
    return arc_store_remove(s, token);
  return store_code(rc);
}

void arc_store_sweep_tmp(arc_store *s, const char *const *keep, uint32_t n_keep) {
  DIR *d = s ? opendir(s->tmp) : NULL;
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    uint32_t k = 0;
    while (k < n_keep && (keep[k] == NULL || strcmp(keep[k], e->d_name) != 0))
      k++;
    if (k < n_keep)
      continue;
    char *p = join(s->tmp, e->d_name);
    if (p != NULL)
      arc__rmtree(p);
    free(p);
  }
  closedir(d);
  arc__fsync_dir(s->tmp);
}

uint64_t arc_store_free_bytes(arc_store *s) {
  struct statvfs v;
  if (s == NULL || statvfs(s->arcs, &v) != 0)
    return 0;
  return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
}

uint64_t arc_store_capacity_bytes(arc_store *s) {
  struct statvfs v;
  if (s == NULL || statvfs(s->arcs, &v) != 0)
    return 0;
  return (uint64_t)v.f_blocks * (uint64_t)v.f_frsize;
}

/* ------------------------------------------------------------ installing */

int arc__install_dir(arc_store *s, const char *tmpdir, uint32_t token, ring_error *err) {
  char dst[4096];
  snprintf(dst, sizeof dst, "%s/%" PRIu32, s->arcs, token);
  int rc = rename_noreplace(tmpdir, dst);
  if (rc != 0)
    return ring__err(err, arc__errno_code(rc), "installing %s: %s", dst, strerror(-rc));
  int e = arc__fsync_dir(s->arcs);
  if (e == 0)
    e = arc__fsync_dir(s->tmp);
  if (e == 0)
    return RING_OK;
  /* The rename may not be on disk: the arc goes out of arcs/ again, so
   * that nothing there is unverified; the caller copies it anew. */
  int out = arc_store_remove(s, token);
  return ring__err(err, RING_EIO, "fsync after installing %s: %s%s", dst, strerror(-e),
                   out == RING_OK ? "" : "; it could not be taken out again");
}

int arc_store_adopt_empty(arc_store *s, const uint32_t *tokens, uint32_t n, uint32_t *made,
                          ring_error *err) {
  *made = 0;
  int rc = RING_OK;
  for (uint32_t i = 0; i < n && rc == RING_OK; i++) {
    char dst[4096];
    snprintf(dst, sizeof dst, "%s/%" PRIu32, s->arcs, tokens[i]);
    if (mkdir(dst, 0755) == 0)
      (*made)++;
    else if (errno != EEXIST) /* EEXIST: a fetch got there first; it is held */
      rc = ring__err(err, arc__errno_code(-errno), "mkdir %s: %s", dst, strerror(errno));
  }
  /* Empty directories: the entries in arcs/ are all there is to make
   * durable, and one fsync does it for every one of them. */
  int e = *made > 0 ? arc__fsync_dir(s->arcs) : 0;
  if (rc == RING_OK && e != 0)
    rc = ring__err(err, arc__errno_code(e), "fsync %s: %s", s->arcs, strerror(-e));
  return rc;
}

bool arc_store_usable(arc_store *s) {
  struct stat st;
  return s != NULL && lstat(s->arcs, &st) == 0 && S_ISDIR(st.st_mode) && lstat(s->tmp, &st) == 0 &&
         S_ISDIR(st.st_mode);
}

int arc_store_install_empty(arc_store *s, uint32_t token, uint64_t version, ring_error *err) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/%" PRIu32 ".%" PRIu64, s->tmp, token, version);
  if (arc_store_has(s, token))
    return ring__err(err, RING_EEXIST, "arc %" PRIu32 ": already installed", token);
  arc__rmtree(tmp); /* a partial copy from when a source still had data */
  if (mkdir(tmp, 0755) != 0)
    return ring__err(err, arc__errno_code(-errno), "mkdir %s: %s", tmp, strerror(errno));
  int e = arc__fsync_dir(tmp);
  if (e != 0)
    return ring__err(err, arc__errno_code(e), "fsync %s: %s", tmp, strerror(-e));
  return arc__install_dir(s, tmp, token, err);
}
