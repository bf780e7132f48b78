/*
 * kv_server.h: what ring-kv's files share: kv_server.c (options,
 * registration, following the ring, the maintenance loop, main) and
 * kv_http.c (the HTTP API of PROTOCOL.md).
 */
#ifndef RING_KV_SERVER_H
#define RING_KV_SERVER_H

#include "daemon.h"
#include "kv_store.h"
#include "ring_etcd.h"

#include <stdatomic.h>

/* A token's role on this node in a table. MISSING: owned, but arcs/<token>/
 * is not there (a wiped or replaced disk the agent refills): writes are
 * staged as for a pending token, reads refused so clients read another
 * replica (PROTOCOL.md, "Missing arcs"). */
enum { KV_ROLE_NONE = 0, KV_ROLE_OWNER = 1, KV_ROLE_PENDING = 2, KV_ROLE_MISSING = 3 };

typedef struct kv_server_opts {
  RD_COMMON_MEMBERS;        /* lease_ttl_ms: the services/kv/<id> lease */
  uint64_t version_wait_ms; /* how long a request from a newer version waits for ours */
  uint64_t rescan_ms;       /* period of the maintenance pass */
  uint64_t commit_window_us;
  uint64_t max_segments;
} kv_server_opts;

typedef struct kv_server {
  kv_server_opts o;
  ring_etcd *etcd;
  ring_live *live;
  ring_watcher *watcher;
  kv_store *store;
  struct MHD_Daemon *mhd;
  uint16_t port;
  char addr[RING_ADDR_MAX + 1]; /* advertised HOST:PORT */

  int64_t lease; /* 0: not registered */
  ring_keeper *keeper;
  atomic_bool lease_lost;
  atomic_bool in_barrier;       /* clients/<client> is held: writes may be taken */
  char client[RING_ID_MAX + 1]; /* "kv.<id>": our name in clients/ and acks/ */

  pthread_mutex_t v_mu; /* with v_cv: requests waiting for a newer table */
  pthread_cond_t v_cv;
  rd_waker waker; /* the maintenance loop */
  atomic_bool stop;
  _Atomic uint64_t hlc; /* timestamps for writes that bring none */

  /* counters for /metrics */
  atomic_uint_fast64_t req_get, req_put, req_delete, st_2xx, st_404, st_409, st_421, st_503,
      st_other, adopted, dropped;
} kv_server;

/* The role of token on node `me` in t. */
int kv_role(const ring_table *t, uint32_t token, int me);
/* kv_role on this node's disk: an owned token whose arc is not there is
 * KV_ROLE_MISSING. */
int kv_role_here(kv_server *s, const ring_table *t, uint32_t token, int me);

/* Starts and stops the HTTP API on o.listen; kv_http_start fills port. */
int kv_http_start(kv_server *s, char *msg, size_t cap);
void kv_http_stop(kv_server *s);

#endif /* RING_KV_SERVER_H */
