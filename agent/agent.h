/*
 * agent.h: the ring-agent daemon's parts. Internal to the binary.
 *
 * One agent runs per host. It registers the host (alive/<id> under a lease
 * it keeps alive), follows the table through libring's live watcher (which
 * acks each version it swaps in), fetches the arcs the newest version makes
 * it the pending owner of, reports them in progress/<id> once installed and
 * verified, serves the arcs it holds to other agents, and drops the arcs it
 * no longer owns after a grace period.
 *
 * Threads:
 *   - the main loop (agent_main.c) owns everything not marked otherwise: it
 *     sleeps on `waker` and does all etcd writes but acks (the watcher's);
 *   - the watcher's thread only swaps the table and wakes the loop;
 *   - the config watch and the lease keeper only set a flag and wake it;
 *   - a fixed pool of fetch workers (agent_fetchers.c) takes jobs from the
 *     job list, which the loop fills from the table: at most one job per
 *     pending token, so the list is bounded by T, never by time;
 *   - the arc server and /metrics serve from threads of their own and read
 *     only atomics and the store.
 *
 * Sections: options; jobs; the daemon; membership; following the table;
 * fetch workers; reporting; dropping arcs; ownership; refilling arcs;
 * metrics and health.
 */
#ifndef RING_AGENT_H
#define RING_AGENT_H

#include "arc.h"
#include "daemon.h"
#include "records.h"
#include "ring.h"
#include "ring_etcd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#ifndef AGENT_WORKERS_MAX
#define AGENT_WORKERS_MAX 16 /* fetch threads; throttle.moves_per_node caps how many run */
#endif
#ifndef AGENT_WORKERS_DEFAULT
#define AGENT_WORKERS_DEFAULT 4 /* parallel fetches when the config says "no limit" */
#endif
#define AGENT_PROGRESS_EVERY_MS 200 /* progress/<id> is written at most this often */
#define AGENT_ERROR_MAX 160         /* bytes of a failing fetch's error in progress/<id> */
#define AGENT_ALLOW_MAX 64          /* --allow-from entries */

/* ---------------------------------------------------------------- options */

typedef struct agent_opts {
  RD_COMMON_MEMBERS; /* listen: the arc server; advertise: the address in alive/<id> */
  char *endpoints;
  char *region, *zone, *rack, *host; /* failure-domain labels, NULL when unset */
  double weight;
  char *secret_file;   /* the cluster secret(s): one per line, the first signs (arc_keyring_load) */
  char *key_file;      /* this node's Ed25519 key; NULL: <data-dir>/node.key (made if absent) */
  char *next_key_file; /* a rotation's next key, published in alive/<id>; NULL: none */
  uint64_t clock_skew_ms;      /* how far a signed request's time may be from ours */
  char *allow_from;            /* comma list: client addresses the arc server admits besides the
                                  table's hosts */
  uint64_t max_connections;    /* the arc server's connections at once; 0: default */
  uint64_t max_per_address;    /* from one client address; 0: default */
  uint64_t header_deadline_ms; /* a request's headers, in total */
  char *metrics;               /* /metrics and /healthz; NULL: none */
  uint64_t drop_grace_ms;
  uint64_t sizes_every_ms;  /* how often sizes/<id> is measured (agent_sizes.c) */
  char *tls_cert, *tls_key; /* the arc server's HTTPS */
  char *ca_file;            /* to verify https sources */
} agent_opts;

/* ------------------------------------------------------------------- jobs */

typedef enum agent_job_state {
  AGENT_JOB_QUEUED = 0, /* a worker may take it */
  AGENT_JOB_RUNNING,    /* a worker is fetching it */
  AGENT_JOB_RETRY,      /* failed; the loop requeues it at retry_at_ms with fresh sources */
  AGENT_JOB_DONE        /* installed and verified by this process */
} agent_job_state;

/* One incoming arc: a pending entry naming this host. Allocated one by one
 * (a running fetch holds &job->stop), freed by the loop once not running. */
typedef struct agent_job {
  uint32_t token;
  uint64_t version; /* names tmp/<token>.<version>: kept across versions to resume */
  char sources[RING_REPLICAS_MAX][RING_ADDR_MAX + 1]; /* host:port, best first */
  char source_ids[RING_REPLICAS_MAX][RING_ID_MAX + 1];
  uint32_t n_sources;
  agent_job_state state;
  atomic_bool stop;  /* set to abandon the fetch (cancel or SIGTERM); read by its worker */
  bool cancelled;    /* no longer pending: the loop frees it once not running */
  uint32_t failures; /* consecutive failed attempts, for the backoff and progress */
  char last_error[AGENT_ERROR_MAX + 1]; /* the last attempt's error, reported in progress */
  uint64_t retry_at_ms;                 /* AGENT_JOB_RETRY: when to requeue */
  uint64_t bytes;                       /* the arc's size once installed */
  bool refill; /* an owned arc this host lacks, fetched from the other owners
                  (agent_refill.c); not a pending entry, never in progress/ */
} agent_job;

/* ------------------------------------------------------------ the daemon */

/* A temporary directory a previous run left: resumed if still pending. */
typedef struct agent_leftover {
  uint32_t token;
  uint64_t version;
} agent_leftover;

/* Counters and gauges for /metrics, written anywhere, read by the server. */
typedef struct agent_metrics {
  _Atomic uint64_t version;           /* the table in service */
  _Atomic uint64_t pending_version;   /* newest version naming us pending; 0: none */
  _Atomic uint64_t bytes_in;          /* arc bytes received */
  _Atomic uint64_t rate_in;           /* bytes/s over the last second or so */
  _Atomic uint64_t rate_limit;        /* throttle.bytes_per_sec in force; 0: none */
  _Atomic uint64_t parallel;          /* fetches allowed at once */
  _Atomic uint64_t in_flight;         /* fetches running */
  _Atomic uint64_t queued;            /* jobs waiting (queued or retrying) */
  _Atomic uint64_t fetched;           /* arcs installed */
  _Atomic uint64_t fetch_failures;    /* attempts that failed */
  _Atomic uint64_t source_switches;   /* a dead source replaced by another */
  _Atomic uint64_t busy_waits;        /* fetches put back because every source was busy */
  _Atomic uint64_t checksum_failures; /* files refetched after a mismatch */
  _Atomic uint64_t resumed_files;     /* files continued after a restart or a break */
  _Atomic uint64_t stale_removed;     /* unverified arcs taken out of service to be rechecked */
  _Atomic uint64_t stale_files;       /* files of those, changed at the source: fetched anew */
  _Atomic uint64_t reused_bytes;      /* leftover bytes verified against a source, not sent */
  _Atomic uint64_t empty_arcs;        /* empty arcs installed: on a signed empty manifest, or a
                                         loss the operator accepted */
  _Atomic uint64_t not_held;          /* a source the table names answered "not held" (signed) */
  _Atomic uint64_t bad_signatures;    /* answers refused: not signed by the node expected */
  _Atomic uint64_t alive_refused;     /* alive/ values refused: over the cap, or no id */
  _Atomic uint64_t losses_accepted;   /* arcs installed empty on the operator's word */
  _Atomic uint64_t adopted;           /* empty arcs made for tokens granted with nothing to copy */
  _Atomic uint64_t missing;           /* owned tokens (not pending) with no arc here */
  _Atomic uint64_t refilled;          /* missing arcs refilled from the other owners */
  _Atomic uint64_t store_ok;          /* 1 while arcs/ and tmp/ are there */
  _Atomic uint64_t dropped;           /* arcs dropped after the grace */
  _Atomic uint64_t held;              /* arcs installed on disk */
  _Atomic uint64_t bytes_held;        /* bytes of owned arcs held, at the last sizes measure */
  _Atomic uint64_t registered;        /* 1 while alive/<id> is up */
  _Atomic uint64_t registrations;     /* times alive/<id> was put */
  _Atomic uint64_t leases_lost;
  _Atomic uint64_t progress_writes;
  _Atomic uint64_t errors; /* etcd operations that failed */
  _Atomic uint64_t pinned; /* nodes with a key pinned in nodes/ (agent_pins.c) */
} agent_metrics;

typedef struct agent {
  agent_opts o;
  char addr[RING_ADDR_MAX + 1];  /* advertised arc server address */
  arc_keyring *keys;             /* sign and verify arc requests and answers */
  char key_hex[RK_KEY_HEX + 1];  /* this node's public key, published in alive/<id> */
  char next_hex[RK_KEY_HEX + 1]; /* --next-key-file's public key, published too; "" none */
  pthread_mutex_t pins_mu;       /* guards pins, n_pins (read by server and fetch threads) */
  struct pin *pins;              /* nodes/ pins, sorted by id (agent_pins.c) */
  uint32_t n_pins;
  atomic_bool pins_stale; /* a lookup missed: read nodes/ again soon */
  uint64_t pins_read_ms;  /* rd_now_ms of the last read */
  ring_etcd *etcd;
  rd_waker waker;
  atomic_bool stop; /* SIGTERM */
  uint64_t started_ms;

  /* arcs */
  arc_store *store;
  arc_server *server;
  arc_limiter *limiter;

  /* membership (agent_member.c) */
  int64_t lease; /* 0: not registered */
  ring_keeper *keeper;
  atomic_bool lease_lost;     /* set by the keeper's thread */
  uint64_t register_retry_ms; /* next attempt while unregistered */
  ring_leadership own_key;    /* alive/<id> as this process created it (create revision, last
                                 lease): only that key is ever taken back; key NULL before */
  bool start_refused;         /* another live agent holds the id: exit 1 */

  /* following (agent_follow.c) */
  ring_live *live;
  ring_watcher *watcher;
  atomic_bool table_changed; /* set by the watcher's thread */
  ring_watch *config_watch;
  atomic_bool config_changed; /* set by the config watch */
  rk_config config;
  bool has_config;
  uint64_t seen_version;     /* the table the jobs were computed from */
  uint32_t tokens;           /* T of that table; 0 before the first */
  uint8_t *owned;            /* T bits: we own a slot of the token */
  uint8_t *pending;          /* T bits: a pending entry names us */
  uint8_t *verified;         /* T bits: installed by a job, owned or pending in every
                                version since (all cleared when the loop skips versions);
                                guarded by jobs_mu (workers set it) */
  uint8_t *loss_ok;          /* T bits: the operator accepted the loss of the token in
                                loss_version (the `loss` key); guarded by jobs_mu */
  uint64_t loss_version;     /* the table version loss_ok is for; 0: none */
  agent_leftover *leftovers; /* tmp/<token>.<version> found at start, until the first table */
  uint32_t n_leftovers;

  /* jobs (agent_fetchers.c); the lock guards the list and every job */
  pthread_mutex_t jobs_mu;
  pthread_cond_t jobs_cv; /* workers wait here for a queued job or stop */
  agent_job **jobs;
  uint32_t n_jobs, cap_jobs;
  uint32_t parallel; /* fetches allowed at once (<= AGENT_WORKERS_MAX) */
  uint32_t running;
  uint64_t barrier_version; /* fetches start only once every host and client acked this
                               (proto/etcd.md, the version barrier); 0: open */
  bool workers_stop;
  pthread_t workers[AGENT_WORKERS_MAX];
  uint32_t n_workers;

  /* reporting (agent_report.c) */
  uint64_t report_version; /* the table in service if its pending entries name us, else 0 */
  bool report_dirty;
  uint64_t report_written_version;
  uint64_t report_written_digest; /* of the tokens last written */
  uint64_t report_last_ms;

  /* dropping (agent_gc.c) */
  uint64_t *drop_at;     /* T entries: monotonic ms to drop the arc, 0: none */
  uint64_t next_drop_ms; /* earliest drop_at, 0: none */

  /* ownership (agent_own.c) */
  uint64_t own_checked_ms;    /* rd_now_ms of the last check */
  bool own_store_ok;          /* arcs/ and tmp/ were there */
  uint32_t own_missing;       /* owned tokens with no arc, at the last check */
  uint32_t own_missing_first; /* the lowest of them */
  bool own_decided;           /* the data dir is known new, or placed: adoption may be judged */

  /* refilling missing arcs (agent_refill.c) */
  uint32_t *refill_missing; /* the owned tokens with no arc at the last check, ascending */
  uint32_t n_refill_missing;
  uint64_t refill_version; /* the table version of that check */
  int refill_written;      /* missing/<id>: 0 unknown (at start), 1 absent, 2 written */
  uint64_t refill_digest;  /* of the record last written */
  uint64_t refill_last_ms; /* rd_now_ms of the last write attempt */
  bool refill_held;        /* missing arcs wait: the auto-apply policy is none */
  /* arc sizes (agent_sizes.c) */
  uint64_t sizes_ms;      /* rd_now_ms of the last measure; 0: none yet */
  uint64_t sizes_version; /* the table version then */
  int sizes_written;      /* sizes/<id>: 0 unknown (at start), 1 absent, 2 written */
  uint64_t sizes_digest;  /* of the tokens and sizes last written */
  /* a restored etcd (agent_restore.c) */
  rd_restore restore;              /* went back: the loop's state, /healthz, the gauge */
  ring_etcd_history restore_saved; /* the marks as last written to the data dir */
  uint64_t restore_saved_ms;       /* rd_now_ms of that write */
  uint64_t restore_probe_ms;       /* rd_now_ms of the last read of the version key */
  bool recovery_written;           /* recovery/<id> is up for this restore */

  rd_health health;                         /* the last trouble of the loop, for /healthz */
  uint64_t rate_bytes, rate_ms;             /* last rate sample */
  uint64_t refused_logged;                  /* arc_store_refused when last logged (the loop's) */
  char alive_refused_last[RING_ID_MAX + 1]; /* the host last named for a refused alive/ */

  agent_metrics m;
} agent;

/* Records a failed step for /healthz and the log (rd_health_trouble;
 * the loop's thread only). */
void agent_trouble(agent *a, const char *what, const char *detail);
/* "/ringkeeper/<cluster>/<dir><id>" for this agent (dir "alive/" etc.). */
int agent_key(const agent *a, char key[RK_KEY_MAX], const char *dir);

/* ------------------------------------------------------------ membership */

/* Registers when not registered (or the lease was lost): grants a lease,
 * puts alive/<id> under it, keeps it alive. Retries every second while it
 * fails; returns the ms until the next attempt is due (0: registered). */
uint64_t agent_member_tick(agent *a);
/* At start: registers, first waiting out the lease of a key another
 * process holds (a crashed predecessor's expires within its TTL). Returns 0
 * when registered, or when etcd did not answer or SIGTERM came (the tick
 * tries again); -1 with msg naming the holder when a live agent holds the id. */
int agent_member_start(agent *a, char *msg, size_t cap);
/* Stops the keeper and revokes the lease: alive/<id> goes at once. */
void agent_member_leave(agent *a);

/* --------------------------------------------------- following the table */

/* Starts the live watcher (acking as <id>) and the config watch. */
int agent_follow_start(agent *a, char *msg, size_t cap);
void agent_follow_stop(agent *a);
/* Applies a changed config (throttle, migration mode); retries the config
 * watch when it could not start. */
void agent_follow_config(agent *a);
/* Recomputes jobs, progress and drop timers when the table changed;
 * requeues jobs whose retry time has come (with fresh sources). Returns the
 * ms until a retry is due (UINT64_MAX: none). */
uint64_t agent_follow_tick(agent *a);
/* Reads every key under the cluster's `dir` ("alive/", "nodes/") into *r
 * (ring_kvs_clear); the prefix length, or -1 (counted in errors). */
int agent_read_dir(agent *a, const char *dir, size_t cap, ring_kvs *r, ring_error *err);

/* agent_pins.c: the keys pinned in nodes/, for arc_keyring_set_pins. */
uint32_t agent_pins_lookup(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]);
void agent_pins_refresh(agent *a);  /* reads nodes/ (a failed read keeps the last pins) */
uint64_t agent_pins_tick(agent *a); /* after a missed lookup; ms until it may read again */
void agent_pins_free(agent *a);
/* The backoff after `failures` failed attempts in a row: 0.5 s doubling to 10 s. */
uint64_t agent_retry_delay(uint32_t failures);

/* --------------------------------------------------------- fetch workers */

int agent_fetchers_start(agent *a);
/* Abandons every fetch (temp dirs stay for resumption) and joins workers. */
void agent_fetchers_stop(agent *a);
/* Sets how many fetches may run at once (0: AGENT_WORKERS_DEFAULT). */
void agent_fetchers_limit(agent *a, uint32_t parallel);
/* The job of token, NULL if none. Caller holds jobs_mu. */
agent_job *agent_job_find(agent *a, uint32_t token);
/* Appends a queued job; returns it or NULL on no memory. Caller holds jobs_mu. */
agent_job *agent_job_add(agent *a, uint32_t token, uint64_t version);
/* Frees cancelled jobs no worker runs. Caller holds jobs_mu. */
void agent_jobs_reap(agent *a);
/* Bytes of the installed arc's regular files (0 when it is not there). */
uint64_t agent_arc_bytes(agent *a, uint32_t token);

/* ------------------------------------------------------------- reporting */

/* Writes progress/<id> when it changed, at most every AGENT_PROGRESS_EVERY_MS.
 * Returns the ms until a coalesced write is due (UINT64_MAX: none). */
uint64_t agent_report_tick(agent *a);

/* --------------------------------------------------------- dropping arcs */

/* Scans tmp/ for leftovers of a previous run into a->leftovers: resumed
 * if their token is still pending at the first table, swept otherwise. */
void agent_gc_scan_leftovers(agent *a);
/* After a new table: starts the grace of every installed arc we neither own
 * nor are pending for; stops it for the others; sweeps tmp/. */
void agent_gc_retime(agent *a);
/* Drops arcs whose grace is over. Returns the ms until the next drop. */
uint64_t agent_gc_tick(agent *a);

/* ------------------------------------------------------------- ownership */

/* At start-up, before following: tells a data dir new to the cluster from
 * one that replaces a wiped disk under an id the cluster knows (it then
 * adopts nothing). Until etcd can say, nothing is adopted (asked again by
 * agent_own_tick). */
void agent_own_start(agent *a);
/* After a table (or a config) change: makes the empty arcs of tokens
 * granted with nothing to copy (first placement, migration none) and
 * counts owned tokens with no arc (agent_own.c says when which). */
void agent_own_check(agent *a);
/* Checks again every few seconds; raises what the last check found for
 * /healthz. Returns the ms until the next check. */
uint64_t agent_own_tick(agent *a);

/* ------------------------------------------------------ refilling arcs */

/* After each ownership check: makes the refill jobs match the owned tokens
 * with no arc (missing[0..n), ascending; copied), fetched from the token's
 * other owners like a move, and cancels those no longer missing. */
void agent_refill_sync(agent *a, const uint32_t *missing, uint32_t n);
/* Writes missing/<id> when the set or its reasons changed, deletes it when
 * the set is empty; asks for a check when a refill has landed. Returns the
 * ms until a coalesced write is due (UINT64_MAX: none). */
uint64_t agent_refill_tick(agent *a);
/* ------------------------------------------------------------ arc sizes */

/* Measures the owned arcs held (every 30 s, and 5 s after a new table at
 * the soonest) and writes sizes/<id> when they changed, deletes it when
 * none is held. Returns the ms until the next measure is due. */
uint64_t agent_sizes_tick(agent *a);

/* FNV-1a over what a report says (tokens, failing entries by token, error
 * and the magnitude of their attempts): tells whether it changed since the
 * last write, without rewriting at every retry (agent_report.c). */
uint64_t agent_report_digest(const uint32_t *tokens, uint32_t n, const rk_failing *failing,
                             uint32_t n_failing);
/* ------------------------------------------------------ a restored etcd */

/* At start-up, after the client opens and before any etcd call: seeds the
 * client with the marks saved in the data dir (agent_restore.c). */
void agent_restore_start(agent *a);
/* Probes the version key, notices a restore (and its settling), reports
 * recovery/<id>, saves the marks. Returns the ms until the next probe. */
uint64_t agent_restore_tick(agent *a);
/* Whether etcd's history went back: no drops, fetches, progress or acks.
 * Any thread. */
bool agent_restored(agent *a);

/* ----------------------------------------------------- metrics and health */

void agent_metrics_text(void *ud, rd_text *t);
bool agent_health_text(void *ud, rd_text *t);
/* Updates the measured byte rate (called by the loop). */
void agent_metrics_tick(agent *a);

/* Whether arcs travel over HTTPS: the cluster's agents then all serve TLS
 * (--tls-cert) and verify each other (--ca-file). */
static inline bool agent_tls(const agent *a) {
  return a->o.tls_cert != NULL || a->o.ca_file != NULL;
}

/* Bit helpers over T-bit sets. */
static inline bool agent_bit(const uint8_t *set, uint32_t i) {
  return set != NULL && (set[i >> 3] >> (i & 7)) & 1u;
}
static inline void agent_bit_set(uint8_t *set, uint32_t i, bool on) {
  if (on)
    set[i >> 3] = (uint8_t)(set[i >> 3] | (1u << (i & 7)));
  else
    set[i >> 3] = (uint8_t)(set[i >> 3] & ~(1u << (i & 7)));
}

#endif /* RING_AGENT_H */
