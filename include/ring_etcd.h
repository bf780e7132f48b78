/*
 * ring_etcd.h: libring's etcd v3 client (over etcd's gRPC-JSON gateway,
 * /v3/...) and the live ring watcher built on it.
 *
 * Sections:
 *   1. the client: endpoints, auth, TLS, failover
 *   2. key-value: range, put, delete, txn
 *   3. watch: streamed, resumable across member loss and compaction
 *   4. leases: grant, keep-alive, revoke, time-to-live
 *   5. election and fencing
 *   6. the live ring watcher for embedders
 *   7. users and roles (etcd auth administration)
 *
 * Threads: a ring_etcd handle may be used from any number of threads at
 * once (each call takes its own connection from a small pool). Watches and
 * lease keep-alives run on threads of their own and call back from there.
 *
 * Keys and values are bytes (pointer + length). Revisions, versions and
 * lease ids are int64 as in etcd. Results that hold memory are freed with
 * the matching *_free; callbacks' arguments are borrowed for the call.
 *
 * Failover: a read that fails to connect, times out or meets an unavailable
 * member moves to the next endpoint and is retried there. A write is
 * retried only when it certainly never reached a server (connection
 * refused); when its outcome is unknown the call returns RING_EUNKNOWN and
 * the caller re-reads, so nothing is applied twice.
 */
#ifndef RING_ETCD_H
#define RING_ETCD_H

#include "ring.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- 1. client */

typedef struct ring_etcd ring_etcd;

typedef struct ring_etcd_opts {
  const char
      *endpoints;   /* comma-separated URLs, e.g. "http://127.0.0.1:2379,..."; host:port is http */
  const char *user; /* NULL: no auth */
  const char *password;
  const char *ca_file;         /* TLS: CA bundle to verify members; NULL: system default */
  const char *cert_file;       /* TLS client certificate, or NULL */
  const char *key_file;        /* TLS client key, or NULL */
  uint32_t timeout_ms;         /* per request; 0: 5000 */
  uint32_t connect_timeout_ms; /* per connection attempt; 0: 1000 */
} ring_etcd_opts;

/* Opens a client. Connects lazily: a dead etcd fails the first call, not
 * this one, unless auth is asked for (then it authenticates now and fails
 * with RING_EAUTH on a wrong password). */
RING_EXTERN int ring_etcd_open(const ring_etcd_opts *o, ring_etcd **out, ring_error *err);
/* Stops nothing else: close watches, keep-alives and watchers first. */
RING_EXTERN void ring_etcd_close(ring_etcd *c);
/* The endpoint the next request goes to (after failover, another one). */
RING_EXTERN const char *ring_etcd_endpoint(ring_etcd *c);
/* One deadline for every later unary call on c (key-value, txn, lease
 * grant and revoke, auth; not watch streams or keep-alives), for a caller
 * whose whole task is bounded (a command-line tool): deadline_ms is on
 * CLOCK_MONOTONIC in milliseconds, 0 for none. Each attempt gets at most
 * what is left (and its own timeouts), and a call that meets an
 * unavailable etcd retries with backoff until the deadline instead of a
 * fixed number of tries, so a blip shorter than the time left is ridden
 * out. Past it, a call fails with RING_ETIMEDOUT without sending. */
RING_EXTERN void ring_etcd_set_deadline(ring_etcd *c, int64_t deadline_ms);
/* Requests sent so far (all endpoints, retries included): for benchmarks. */
RING_EXTERN uint64_t ring_etcd_requests(ring_etcd *c);

/* History: every reply's header passes through the client, which keeps
 * high-water marks of what etcd said (libring/etcd_history.c; one home for
 * every caller): the highest store revision of a linearizable reply (reads,
 * writes, leases: never a watch header, which a lagging member may send),
 * the cluster id, and the highest value of a cluster's `version` key that a
 * caller noted. The history *went back* when a reply's revision is below
 * the mark as it stood when the request left (replies to concurrent
 * requests may cross), its cluster id differs, or a noted version is below
 * the mark:
 * etcd was restored from an older snapshot (or replaced). That is latched
 * until ring_etcd_history_settle: callers take no data action meanwhile
 * (proto/etcd.md, "A restored etcd"). The marks stay the highest seen; the
 * back_* fields follow what the restored etcd says now. */
#define RING_HISTORY_WHY_MAX 192
typedef struct ring_etcd_history {
  int64_t revision;         /* highest header revision seen; 0: none yet */
  uint64_t cluster_id;      /* the replies' cluster id; 0: none yet */
  uint64_t version;         /* highest `version` noted; 0: none */
  int64_t version_revision; /* the revision it was read at (0: not known, e.g. seeded) */
  bool went_back;           /* latched until settled */
  int64_t back_revision;    /* latest revision seen below the mark (0: none) */
  uint64_t back_version;    /* latest version noted below the mark (0: none) */
  uint64_t back_cluster_id; /* a cluster id other than cluster_id (0: none) */
} ring_etcd_history;

/* A copy of c's marks (all zero for c NULL). */
RING_EXTERN void ring_etcd_history_get(ring_etcd *c, ring_etcd_history *out);
/* Notes a value of the `version` key read from etcd (0 is ignored) at
 * store revision `revision` (the reply's header revision, or the key's mod
 * revision for a watch event). A value below the mark read at or after the
 * mark's own revision is the history going back; one read at an older
 * revision is a reply that crossed a newer one and changes nothing.
 * Returns true when the history went back (now or before). */
RING_EXTERN bool ring_etcd_note_version(ring_etcd *c, uint64_t version, int64_t revision);
/* Raises c's marks to h's (a process that persisted them, e.g. an agent's
 * data dir), and latches went_back with h's back_* when h says so. */
RING_EXTERN void ring_etcd_history_seed(ring_etcd *c, const ring_etcd_history *h);
/* The operator settled a restore: `ringctl recover` published table
 * `recovered_version` above every version any host saw, with a `recovered`
 * record. When the history went back, recovered_version is above the
 * version mark and the `version` key (current_version) has reached it, the
 * marks start afresh at current_version (the next reply sets the revision
 * and cluster id) and went_back clears. Returns true when it settled. */
RING_EXTERN bool ring_etcd_history_settle(ring_etcd *c, uint64_t recovered_version,
                                          uint64_t current_version);
/* Reads the cluster's `recovered` record and `version` key (one txn) and
 * settles as above. RING_OK (with *settled, if not NULL) or an etcd error;
 * a malformed record settles nothing. A no-op while nothing went back. */
RING_EXTERN int ring_etcd_history_resume(ring_etcd *c, const char *cluster, bool *settled,
                                         ring_error *err);
/* "etcd history went back: version 65 -> 1, revision 812 -> 20" (the parts
 * that went back; "cluster id X -> Y" too) into buf; returns buf. "" when
 * it did not. */
RING_EXTERN const char *ring_etcd_history_text(const ring_etcd_history *h, char *buf, size_t size);

/* ---------------------------------------------------------- 2. key-value */

typedef struct ring_kv {
  uint8_t *key; /* malloc()'ed, NUL-terminated for convenience */
  size_t key_len;
  uint8_t *value; /* malloc()'ed, NUL-terminated; NULL with keys_only */
  size_t value_len;
  int64_t create_revision;
  int64_t mod_revision;
  int64_t version;
  int64_t lease;
} ring_kv;

typedef struct ring_kvs {
  ring_kv *kvs; /* n entries */
  uint32_t n;
  int64_t count;    /* keys in the range (may exceed n with a limit) */
  bool more;        /* the limit cut the range short */
  int64_t revision; /* the store revision the read saw */
} ring_kvs;

RING_EXTERN void ring_kvs_clear(ring_kvs *r); /* frees the contents, not r */

typedef struct ring_range_opts {
  bool prefix;      /* every key starting with key */
  int64_t limit;    /* 0: no limit */
  int64_t revision; /* 0: latest */
  bool keys_only;
  bool count_only;
} ring_range_opts;

/* Reads a key or a prefix. opts may be NULL. Fills *out (ring_kvs_clear it). */
RING_EXTERN int ring_etcd_range(ring_etcd *c, const void *key, size_t key_len,
                                const ring_range_opts *opts, ring_kvs *out, ring_error *err);

/* Puts a value; lease 0 for none. *revision (if not NULL) receives the
 * store revision of the write; *prev (if not NULL) the previous key-value
 * (key NULL when there was none). */
RING_EXTERN int ring_etcd_put(ring_etcd *c, const void *key, size_t key_len, const void *value,
                              size_t value_len, int64_t lease, int64_t *revision, ring_kv *prev,
                              ring_error *err);
RING_EXTERN void ring_kv_clear(ring_kv *kv); /* frees the contents, not kv */

/* Deletes a key or a prefix; *deleted receives how many went. */
RING_EXTERN int ring_etcd_delete(ring_etcd *c, const void *key, size_t key_len, bool prefix,
                                 int64_t *deleted, int64_t *revision, ring_error *err);

typedef enum ring_cmp_target {
  RING_CMP_VERSION,
  RING_CMP_CREATE, /* create_revision; 0 = the key does not exist */
  RING_CMP_MOD,    /* mod_revision */
  RING_CMP_VALUE
} ring_cmp_target;

typedef enum ring_cmp_op { RING_CMP_EQ, RING_CMP_NE, RING_CMP_LT, RING_CMP_GT } ring_cmp_op;

typedef struct ring_cmp {
  const void *key;
  size_t key_len;
  ring_cmp_target target;
  ring_cmp_op op;
  int64_t number;    /* for VERSION, CREATE, MOD */
  const void *value; /* for VALUE */
  size_t value_len;
} ring_cmp;

typedef enum ring_op_type { RING_OP_RANGE, RING_OP_PUT, RING_OP_DELETE } ring_op_type;

typedef struct ring_op {
  ring_op_type type;
  const void *key;
  size_t key_len;
  const void *value; /* PUT */
  size_t value_len;
  int64_t lease; /* PUT */
  bool prefix;   /* RANGE, DELETE */
} ring_op;

typedef struct ring_txn_result {
  bool succeeded;   /* the compares held: the success ops ran */
  int64_t revision; /* the header's revision: the store after the txn */
  ring_kvs *ranges; /* one per op that ran (empty for PUT and DELETE) */
  uint32_t n_ranges;
} ring_txn_result;

RING_EXTERN void ring_txn_result_clear(ring_txn_result *r);

/* One atomic transaction: if every compare holds, the success ops run,
 * else the failure ops. out may be NULL. RING_EUNKNOWN when the request
 * may or may not have been applied (re-read before acting). */
RING_EXTERN int ring_etcd_txn(ring_etcd *c, const ring_cmp *cmps, uint32_t n_cmps,
                              const ring_op *success, uint32_t n_success, const ring_op *failure,
                              uint32_t n_failure, ring_txn_result *out, ring_error *err);

/* Compacts the store's history up to revision (inclusive). */
RING_EXTERN int ring_etcd_compact(ring_etcd *c, int64_t revision, ring_error *err);

/* -------------------------------------------------------------- 3. watch */

typedef enum ring_event_type { RING_EVENT_PUT, RING_EVENT_DELETE } ring_event_type;

typedef struct ring_event {
  ring_event_type type;
  ring_kv kv; /* borrowed for the callback */
} ring_event;

/* Called on the watch's thread with each batch of events, in revision
 * order, or with n == 0 for a progress notification (revision: the store
 * has no change for this watch up to it). When etcd compacted past the next
 * revision the watch wanted, `compacted` is true and revision is the
 * oldest revision still available: the watcher missed changes, so it must
 * re-read; the watch resumes from there. Return 0 to go on, non-zero to
 * stop the watch. */
typedef int (*ring_watch_cb)(void *ud, const ring_event *events, uint32_t n, int64_t revision,
                             bool compacted);

typedef struct ring_watch ring_watch;

/* Watches key (or the prefix) from start_revision (0: now). A broken stream
 * reconnects with backoff (to another endpoint if need be) and resumes from
 * the last revision seen + 1: no event is missed or repeated. */
RING_EXTERN int ring_etcd_watch(ring_etcd *c, const void *key, size_t key_len, bool prefix,
                                int64_t start_revision, ring_watch_cb cb, void *ud,
                                ring_watch **out, ring_error *err);
/* Stops the watch and joins its thread; no callback runs after it returns.
 * Not to be called from the watch's own callback (return non-zero instead). */
RING_EXTERN void ring_watch_cancel(ring_watch *w);

/* ------------------------------------------------------------- 4. leases */

RING_EXTERN int ring_etcd_lease_grant(ring_etcd *c, int64_t ttl_s, int64_t *lease, ring_error *err);
RING_EXTERN int ring_etcd_lease_revoke(ring_etcd *c, int64_t lease, ring_error *err);
/* Remaining seconds of a lease; RING_ENOTFOUND when it has expired. */
RING_EXTERN int ring_etcd_lease_ttl(ring_etcd *c, int64_t lease, int64_t *ttl_s, ring_error *err);
/* One keep-alive round trip; RING_ENOTFOUND when the lease is gone. */
RING_EXTERN int ring_etcd_lease_refresh(ring_etcd *c, int64_t lease, int64_t *ttl_s,
                                        ring_error *err);

/* Keeps a lease alive from a thread of its own, refreshing before a third
 * of the TTL is spent. When the lease is lost (expired, revoked, or not
 * refreshed in time because etcd was unreachable), `lost` is called once
 * from that thread and the keeper stops. */
typedef void (*ring_lease_lost_cb)(void *ud, int64_t lease);
typedef struct ring_keeper ring_keeper;
RING_EXTERN int ring_etcd_keep_alive(ring_etcd *c, int64_t lease, int64_t ttl_s,
                                     ring_lease_lost_cb lost, void *ud, ring_keeper **out,
                                     ring_error *err);
/* Stops keeping the lease alive (it expires later unless revoked). */
RING_EXTERN void ring_keeper_stop(ring_keeper *k);

/* -------------------------------------------------- 5. election, fencing */

/* Leadership of one key: held while `key` exists with our lease. The
 * key's create revision is the leader's fencing token. */
typedef struct ring_leadership {
  char *key; /* malloc()'ed copy */
  int64_t lease;
  int64_t create_revision; /* fencing token */
} ring_leadership;

/* Tries once to become leader: creates key = value under lease only if the
 * key is absent. RING_OK and *out filled when elected; RING_EBUSY when
 * someone else leads (their value in *current if not NULL). */
RING_EXTERN int ring_etcd_campaign(ring_etcd *c, const char *key, const void *value,
                                   size_t value_len, int64_t lease, ring_leadership *out,
                                   ring_kv *current, ring_error *err);
/* Observes an election: the current leader's key-value, RING_ENOTFOUND
 * when nobody leads. To follow changes, watch the key (section 3). */
RING_EXTERN int ring_etcd_leader(ring_etcd *c, const char *key, ring_kv *out, ring_error *err);
/* Gives up leadership: deletes the key if it is still ours. */
RING_EXTERN int ring_etcd_resign(ring_etcd *c, const ring_leadership *l, ring_error *err);
RING_EXTERN void ring_leadership_clear(ring_leadership *l);

/* A txn that commits only while l is still the leader (the leader key's
 * create revision is unchanged), so a paused ex-leader can never write.
 * RING_ENOTLEADER when leadership is gone (nothing was applied);
 * RING_ECONFLICT when the leader compares held but the caller's did not
 * (the failure ops ran). */
RING_EXTERN int ring_etcd_fenced_txn(ring_etcd *c, const ring_leadership *l, const ring_cmp *cmps,
                                     uint32_t n_cmps, const ring_op *success, uint32_t n_success,
                                     const ring_op *failure, uint32_t n_failure,
                                     ring_txn_result *out, ring_error *err);

/* ------------------------------------------------ 6. live ring watcher */

/* Follows /ringkeeper/<cluster>/version and keeps the matching table in a
 * ring_live: on each new version, when it is exactly one version behind,
 * it applies the delta that came in the same watch response (version/delta,
 * proto/etcd.md), or else fetches deltas/<v> (proto/delta.md); otherwise,
 * or when the delta is refused, tables/<v>. It validates the result, swaps
 * it in and calls the callback. A table that fails
 * validation is refused, logged and counted, and the last good table stays
 * in service; so it does while etcd is unreachable, and while its client's
 * history went back (section 1, ring_watcher_restored below). Watchers of
 * one process that follow the same table build a delta's table once and
 * share it (each ring_live holds a reference): the callback's table may be
 * the very one another watcher's callback gets. */
typedef struct ring_watcher ring_watcher;

typedef void (*ring_table_cb)(void *ud, const ring_table *t);

/* What the watcher has to say (a table refused, etcd refusing it, its
 * history going back): one event, for the embedder's log. The strings live
 * for the call only. */
typedef enum ring_log_level { RING_LOG_INFO = 1, RING_LOG_WARN, RING_LOG_ERROR } ring_log_level;
typedef struct ring_log_event {
  ring_log_level level;
  const char *msg;     /* what happened, e.g. "table refused" */
  const char *cluster; /* the watcher's cluster */
  uint64_t version;    /* the table version concerned (0: none) */
  const char *source;  /* where it came from: "version", "table", "delta", "etcd", "history" */
  const char *error;   /* the detail, never NULL */
} ring_log_event;
/* Called from the watcher's thread (or from ring_watcher_start's). */
typedef void (*ring_log_cb)(void *log_ud, const ring_log_event *ev);

/* Zero-initialise (`ring_watcher_opts o = {.cluster = "c"};`): every field
 * left out has a working default, and fields are only ever added at the
 * end. */
typedef struct ring_watcher_opts {
  const char *cluster;    /* [a-z0-9._-]{1,63} */
  const char *ack_id;     /* when set, writes acks/<id> = version after each swap */
  ring_table_cb on_table; /* called after each swap from the watcher's thread (the
                           * stream's, shared unless own_stream: never stop a watcher
                           * from it), or NULL */
  void *ud;
  ring_log_cb log; /* NULL: one logfmt line per event on stderr,
                    * `ts=... level=warn msg="table refused" cluster=c
                    * version=7 source=table err="..."` */
  void *log_ud;    /* passed to log */
  /* false (the default): the watchers of one client that follow one
   * cluster share one watch stream and one thread, and their acks are
   * written together (one etcd txn per batch of up to 128). true: a stream
   * and thread of its own, so no other watcher's on_table ever delays it. */
  bool own_stream;
} ring_watcher_opts;

/* Starts following. Reads the current table before returning (a cluster
 * with no table yet is not an error: the holder stays empty). */
RING_EXTERN int ring_watcher_start(ring_etcd *c, const ring_watcher_opts *o, ring_live *live,
                                   ring_watcher **out, ring_error *err);
RING_EXTERN void ring_watcher_stop(ring_watcher *w);

typedef struct ring_watcher_stats {
  uint64_t version;  /* in service */
  uint64_t swaps;    /* tables installed */
  uint64_t deltas;   /* of which built from a delta */
  uint64_t rejected; /* tables or deltas refused by validation */
  uint64_t errors;   /* etcd errors (retried) */
} ring_watcher_stats;
RING_EXTERN void ring_watcher_stats_get(ring_watcher *w, ring_watcher_stats *out);
/* Whether the watcher stopped following because etcd's history went back
 * (its client's marks, above): it then installs nothing and acks nothing,
 * and keeps the table it has in service (never an older one) until the
 * history is settled (ring_etcd_history_settle on its client, which a
 * daemon does on the operator's `recovered` record). *out (if not NULL)
 * receives the client's marks. Callable from any thread. */
RING_EXTERN bool ring_watcher_restored(ring_watcher *w, ring_etcd_history *out);

/* ------------------------------------------------- 7. users and roles */

/* etcd's own access control (/v3/auth/...), which `ringctl auth` uses to
 * give each actor of a cluster a user of its own (deploy/PRODUCTION.md,
 * "Authentication and TLS"). Once auth is on only a user with etcd's root
 * role may call these. Adding a name that exists is RING_EEXIST; a grant
 * of what is granted changes nothing. */
typedef enum ring_perm {
  RING_PERM_READ = 0,
  RING_PERM_WRITE = 1,
  RING_PERM_READWRITE = 2
} ring_perm;

RING_EXTERN int ring_etcd_user_add(ring_etcd *c, const char *user, const char *password,
                                   ring_error *err);
RING_EXTERN int ring_etcd_user_password(ring_etcd *c, const char *user, const char *password,
                                        ring_error *err);
RING_EXTERN int ring_etcd_user_grant(ring_etcd *c, const char *user, const char *role,
                                     ring_error *err);
RING_EXTERN int ring_etcd_role_add(ring_etcd *c, const char *role, ring_error *err);
/* Deleting a name that is not there is RING_ENOTFOUND. */
RING_EXTERN int ring_etcd_user_delete(ring_etcd *c, const char *user, ring_error *err);
RING_EXTERN int ring_etcd_role_delete(ring_etcd *c, const char *role, ring_error *err);
/* Grants perm on the one key `key` (prefix false: etcd matches it exactly,
 * so alive/n1 never covers alive/n10) or on every key starting with it. */
RING_EXTERN int ring_etcd_role_grant(ring_etcd *c, const char *role, ring_perm perm,
                                     const char *key, bool prefix, ring_error *err);
/* Needs a user `root` holding the role `root`. */
RING_EXTERN int ring_etcd_auth_enable(ring_etcd *c, ring_error *err);

#ifdef __cplusplus
}
#endif
#endif /* RING_ETCD_H */
