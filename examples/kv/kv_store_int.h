/*
 * kv_store_int.h: what the store's files share (kv_store.c: tokens,
 * indexes, reads, rebuilds; kv_commit.c: writes and group commit;
 * kv_compact.c: compaction). Not for the server or the client.
 */
#ifndef RING_KV_STORE_INT_H
#define RING_KV_STORE_INT_H

#include "kv_map.h"
#include "kv_store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#define KV_NAME_MAX 128 /* seg-<13>-<8>-<63>.kv fits */
#define KV_PATH_MAX 4096

/* One segment file of a token. */
typedef struct kv_seg {
  char name[KV_NAME_MAX];
  kv_where where; /* its directory */
  uint64_t size;
  struct kv_seg *next;
} kv_seg;

/* A token's state. Created on first use, freed only at close. Lock: mu
 * guards every field. */
typedef struct kv_arc {
  pthread_mutex_t mu;
  kv_map map;          /* own_keys; entries' seg is a kv_seg of segs */
  kv_seg *segs;        /* every segment indexed, both directories */
  uint32_t n_segs[2];  /* per kv_where */
  uint64_t ino;        /* inode of arcs/<token>/ when last indexed; 0: none */
  bool compact_queued; /* waiting in the compactor's queue */
} kv_arc;

/* A write waiting for its group commit. */
typedef struct kv_req {
  uint32_t token;
  kv_where where;
  uint8_t *rec; /* the encoded record */
  size_t len;
  int rc; /* set by the committer */
  bool done;
  struct kv_req *next;
} kv_req;

struct kv_store {
  kv_store_opts o;         /* strings are the copies below */
  char *dir;               /* data dir */
  char *node;              /* node id */
  int dirfd;               /* the data dir, for syncfs */
  _Atomic(kv_arc *) *arcs; /* KV_TOKENS_MAX slots; creation under mu */
  pthread_mutex_t mu;      /* creates arcs; nothing else */
  atomic_uint seq;         /* segment names */

  /* group commit. Lock: q_mu guards the queue, stop and every kv_req. */
  pthread_mutex_t q_mu;
  pthread_cond_t q_cv;    /* committer: work arrived or stop */
  pthread_cond_t done_cv; /* writers: a batch finished */
  kv_req *q_head, *q_tail;
  uint32_t q_len;
  bool stop;
  pthread_t committer;

  /* compaction. Lock: c_mu guards the queue and c_stop. */
  pthread_mutex_t c_mu;
  pthread_cond_t c_cv;
  uint32_t *c_queue; /* KV_TOKENS_MAX slots, a ring */
  uint32_t c_head, c_len;
  bool c_stop;
  pthread_t compactor;

  atomic_uint_fast64_t keys, segments, commits, writes, bytes, compactions, rebuilds, torn,
      io_errors;
};

/* The token's state, created if need be; NULL when out of memory. */
kv_arc *kv__arc(kv_store *s, uint32_t token);
/* The token's state if it exists. */
kv_arc *kv__arc_peek(kv_store *s, uint32_t token);
/* "<dir>/arcs/<token>" or "<dir>/kv/staging/<token>", plus "/name" when
 * name is not NULL. */
void kv__path(const kv_store *s, char *buf, size_t cap, uint32_t token, kv_where where,
              const char *name);
/* A fresh segment name for this node. */
void kv__seg_name(kv_store *s, char *buf, size_t cap);
/* Rebuilds a's index from disk; a->mu held. */
int kv__rebuild_locked(kv_store *s, kv_arc *a, uint32_t token);
/* Adds segment `name` (just renamed into `where`) with its records to the
 * index; a->mu held. Skips a name already indexed. */
int kv__index_segment(kv_store *s, kv_arc *a, uint32_t token, kv_where where, const char *name,
                      const uint8_t *buf, size_t len);
/* Whole file into a malloc()'ed buffer; RING_OK, RING_ENOTFOUND, RING_EIO. */
int kv__read_file(const char *path, uint8_t **buf, size_t *len);
/* Writes buf to kv/tmp/name, fdatasync()ing it when sync; RING_OK or
 * RING_EIO / RING_ENOSPC (the file removed then). */
int kv__write_tmp(kv_store *s, const char *name, const uint8_t *buf, size_t len, bool sync);
/* Renames kv/tmp/name into token's directory in where (made if missing:
 * *made says so). RING_OK or RING_EIO. */
int kv__seal(kv_store *s, const char *name, uint32_t token, kv_where where, bool *made);
/* A segment of records: the magic, recs[0..n) (encoded records), the end
 * marker. malloc()'ed into *buf; RING_OK or RING_ENOMEM. */
int kv__segment_build(const uint8_t *const *recs, const size_t *lens, size_t n, uint8_t **buf,
                      size_t *len);
/* fsync of a directory; 0 or -1. */
int kv__fsync_dir(const char *path);
/* mkdir if missing, fsyncing the parent when it was made; 0 or -1. */
int kv__ensure_dir(const char *path, const char *parent);
/* Queues a token for compaction (once). */
void kv__compact_later(kv_store *s, kv_arc *a, uint32_t token);
void kv__log(kv_store *s, int level, const char *msg, const char *path);

void *kv__committer_main(void *arg);
void *kv__compactor_main(void *arg);

#endif /* RING_KV_STORE_INT_H */
