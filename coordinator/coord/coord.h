/*
 * coord.h: the ring-coordinator daemon's parts. Internal to the binary.
 *
 * One main thread does all the work in a loop (coord_main.c): campaign for
 * leadership, and while leading, read the cluster state in one txn and take
 * at most one step towards what it should be (membership records, a
 * proposal, the next step of the active run, retention). Every write is a
 * fenced txn that also compares the mod revisions it was computed from, so
 * a step computed from a stale read, or by a leader that lost its lease
 * while paused, never lands. Watches and the lease keeper only wake the loop.
 *
 * Sections: the daemon; leadership; membership; proposals; runs; stuck
 * moves; tables and publishing; retention; metrics; the status page.
 */
#ifndef RING_COORD_H
#define RING_COORD_H

#include "cluster.h"
#include "daemon.h"
#include "state_cache.h"

#include <stdatomic.h>

/* ------------------------------------------------------------ the daemon */

typedef struct coord_opts {
  /* id: the name in the leader key; listen: /metrics, /healthz and the
   * status page (NULL: none); no advertise, no data dir */
  RD_COMMON_MEMBERS;
  char *status_allow; /* --status-allow: who may read the status page; NULL: loopback */
  bool auto_apply;    /* approve every plan (policy all), whatever config says */
  bool full_reads;    /* read the whole state at every look, not the watch-fed cache */
  uint64_t tick_ms;   /* the loop's longest sleep */
  uint64_t compact_every_ms;
  uint64_t stuck_after_ms; /* a receiver without progress this long: its moves are stuck */
} coord_opts;

/* What the pure pieces of a look are computed from, besides the clock:
 * the state's stamp (state_cache.h: it changes whenever the content may
 * have), the table held (c->table_gen) and the term. A piece a part keeps
 * under one key still holds at a look with the same key, so an idle look
 * costs O(changes), not O(hosts); anything driven by the clock is still
 * decided at every look. */
typedef struct coord_memo {
  uint64_t stamp, table_gen, term;
} coord_memo;

/* Counters and gauges read by /metrics from the server's thread. */
typedef struct coord_metrics {
  _Atomic uint64_t leader; /* 1 while leading */
  _Atomic uint64_t terms;  /* times elected */
  _Atomic uint64_t version;
  _Atomic uint64_t nodes[5]; /* by ring_node_state */
  _Atomic int plan_state;    /* COORD_PLAN_* */
  _Atomic uint64_t moves_total, moves_done, waves_total, wave;
  _Atomic uint64_t errors;
  _Atomic uint64_t publishes, publish_bytes;
  _Atomic uint64_t runs_done, runs_failed, runs_cancelled;
  _Atomic uint64_t stuck_moves;     /* in-flight moves stuck (coord_stuck.c) */
  _Atomic uint64_t failing_moves;   /* in-flight moves whose receiver reports a failing fetch */
  _Atomic uint64_t barrier_wait_ms; /* the version in etcd has waited this long for an ack */
  _Atomic uint64_t down_replicas;   /* token-replicas the table gives to down nodes */
  _Atomic uint64_t key_refused;     /* nodes whose agent signs with a key not pinned for it */
  _Atomic uint64_t removed_alive;   /* removed nodes whose agent still runs (refused) */
} coord_metrics;

enum {
  COORD_PLAN_NONE,
  COORD_PLAN_PROPOSED,
  COORD_PLAN_ACTIVE,
  COORD_PLAN_PAUSED,
  COORD_PLAN_CANCELLING
};

/* One sample of the active run's progress, for the status page's rate
 * chart (coord_status_plan.c). */
typedef struct coord_sample {
  uint64_t t_ms;       /* rd_wall_ms when taken */
  uint64_t moves_done; /* the run's cursor then */
  uint64_t bytes_done;
} coord_sample;

#define COORD_SAMPLES_MAX 600 /* ten minutes at one a second; older ones are dropped */

/* The status page's state (coord_status.c). Locking: mu guards json and
 * the fields after it up to routes, and is held to swap or copy json, or
 * by the HTTP thread to wait for a newer one (cv); `wanted` and the two
 * atomics are shared without it; the rest belongs to the loop. */
typedef struct coord_status {
  pthread_mutex_t mu;          /* guards json .. json_stamp */
  pthread_cond_t cv;           /* broadcast when json is swapped */
  char *json;                  /* /status.json's body (cJSON_free); never NULL after init */
  uint64_t serial;             /* counts the swaps of json */
  uint64_t json_ms;            /* rd_now_ms when json was built */
  uint64_t json_stamp;         /* the state stamp json shows (0: not the leader's view) */
  _Atomic uint64_t asked_ms;   /* rd_now_ms of the last GET /status.json; 0: none yet */
  _Atomic uint64_t latest;     /* the stamp of the loop's last look (0: not leading) */
  atomic_bool wanted;          /* the HTTP thread waits for a newer json */
  _Atomic uint64_t woken_ms;   /* rd_now_ms when a GET last woke the loop; 0: never */
  _Atomic uint64_t wakes;      /* GETs that woke the loop */
  _Atomic uint64_t builds;     /* views published */
  _Atomic uint64_t denied;     /* GETs refused by the allow-list */
  rd_addrs *allow;             /* who may read the page (--status-allow); NULL: anyone */
  rd_http_route routes[4];     /* /, /status, /status.json, end */
  bool leading;                /* json is the leader's view */
  uint64_t stamp;              /* the state stamp it shows (leader's view) */
  uint64_t built_ms;           /* rd_now_ms when json was built; 0: never */
  char *nodes;                 /* the "nodes" array as JSON text (free); NULL: none */
  coord_memo nodes_key;        /* the look it was made at */
  uint64_t nodes_targets;      /* and the targets_key it used */
  uint64_t targets_key;        /* what targets were computed for; 0: none */
  double *targets;             /* per node index of that table; NULL: none */
  struct cJSON *history;       /* the finished runs shown, newest first; NULL: not read */
  struct cJSON *last_run;      /* the newest of them as the plan panel shows it */
  uint32_t history_keys;       /* plan/history/ keys when history was read */
  int64_t history_mod;         /* their newest mod revision then */
  uint64_t history_ms;         /* rd_now_ms of that read */
  uint64_t history_checked_ms; /* rd_now_ms when the keys were last looked at */
  int64_t plans_mod;           /* the plan keys' mod revisions then (folded) */
  struct cJSON *run_bytes;     /* the active run's bytes per receiver (coord_status_bytes.c) */
  char run_bytes_id[RK_PLAN_ID_LEN + 1]; /* the run they were computed for; "": none */
  /* the active run's flow and rates (coord_status_plan.c) */
  char flow_plan[RK_PLAN_ID_LEN + 1];      /* the run flow was made for; "": none */
  struct cJSON *flow;                      /* its "flow" object; NULL: none yet */
  char samples_plan[RK_PLAN_ID_LEN + 1];   /* the run the samples follow; "": none */
  coord_sample samples[COORD_SAMPLES_MAX]; /* a ring: the oldest at first */
  uint32_t first, n_samples;               /* where the oldest is; how many */
} coord_status;

/* Stuck moves (coord_stuck.c). Locking: mu guards health only (the HTTP
 * thread reads it); the rest belongs to the loop. */
typedef struct coord_stuck {
  char plan[RK_PLAN_ID_LEN + 1]; /* the in-flight set watched: its run's plan */
  uint64_t version;              /* and its cursor version; 0: none watched */
  uint32_t n_recv;               /* entries below, one per node index of the plan's target */
  uint32_t *covered;             /* in-flight tokens the receiver's progress covered */
  uint64_t *since_ms;            /* rd_now_ms of its last progress, or of the set's start */
  pthread_mutex_t mu;            /* guards health */
  char health[512];              /* /healthz's "degraded: ..." line; "" when nothing is stuck */
} coord_stuck;

typedef struct coord {
  coord_opts o;
  ring_etcd *etcd;
  rd_waker waker;
  atomic_bool stop;

  /* leadership (coord_lead.c) */
  int64_t lease; /* 0: none */
  ring_keeper *keeper;
  atomic_bool lease_lost; /* set by the keeper's thread */
  int64_t id_lease;       /* coordinators/<id>'s lease (coord_id.c); 0: none */
  int64_t id_lease_lost;  /* the lease this process held before losing it; 0: none */
  ring_keeper *id_keeper;
  atomic_bool id_lost; /* set by id_keeper's thread */
  bool leading;
  bool fence_lost; /* a write of this term found another leader (coord_store.c) */
  ring_leadership lead;

  rk_cache *cache;     /* the cluster's state, fed by the one watch on its prefix (which
                          also wakes the loop); a new term starts from a full read */
  uint64_t cache_term; /* c->m.terms the cache was last used in */

  /* caches, owned by the loop */
  ring_table *table;   /* the table at `version` */
  uint64_t table_gen;  /* counts the changes of `table` (coord_memo) */
  ring_plan *run_plan; /* the active run's plan, recomputed once */
  char run_plan_id[RK_PLAN_ID_LEN + 1];
  ring_table *run_base; /* its base table (NULL for a first placement) */
  uint64_t input_hash;  /* the last proposal's input and base */
  bool input_repair;    /* that proposal only re-replicates down nodes' tokens */
  uint64_t last_gc_ms;
  int64_t compact_at; /* revision to compact to at the next pass */

  rd_health health;   /* the last trouble that stopped a step */
  rd_restore restore; /* etcd's history went back (coord_restore.c) */

  coord_metrics m;
  coord_status status;
  coord_stuck stuck;
} coord;

/* ------------------------------------------- the store (coord_store.c) */

/* The bottom layer: every part below the loop writes and keeps through
 * these, and they call no part of coord/. */

/* The key of `what` under the cluster's prefix into key; its length or -1. */
int coord_key(const coord *c, char key[RK_KEY_MAX], const char *what);
/* Runs a txn fenced by this term's leader key; on RING_ENOTLEADER marks the
 * fence lost (every later write of the term is refused at once, and
 * coord_lead steps down at the loop's next pass). */
int coord_txn(coord *c, const ring_cmp *cmps, uint32_t n_cmps, const ring_op *ops, uint32_t n_ops,
              ring_error *err);
/* Records a failed step for /healthz and the log (rd_health_trouble) and
 * counts it in errors_total. */
void coord_trouble(coord *c, const char *what, const ring_error *err);

/* The key of a look at s. */
coord_memo coord_memo_of(const coord *c, const rk_state *s);
/* Whether what was kept under *kept holds for *now: the same key, from a
 * cached state (stamp not 0; a plain read is never trusted this way). */
bool coord_memo_same(const coord_memo *kept, const coord_memo *now);
/* Replaces c->table (taking next, which may be NULL) and counts the change. */
void coord_table_set(coord *c, ring_table *next);

/* ------------------------------------------------------------ leadership */

/* Campaigns when not leading; steps down first after a lost lease or a
 * lost fence. Returns true when this instance leads after the call. A new
 * term shows in c->m.terms; what other parts kept is the loop's to forget. */
bool coord_lead(coord *c);
/* Ends the term: logs why and forgets leadership's own state. */
void coord_step_down(coord *c, const char *why);
/* Whether the keeper found this term's lease lapsed (any thread): the
 * process no longer says it leads, whatever the loop still holds. */
bool coord_lease_lapsed(coord *c);
/* Resigns and revokes the lease (SIGTERM). */
void coord_resign(coord *c);

/* One live coordinator per --id (coord_id.c). coord_id_claim: takes
 * coordinators/<id> under a lease of its own, waiting up to one lease TTL
 * for a dead holder's lease to expire; 0, or -1 with msg naming the live
 * holder. coord_id_keep: the loop's pass; claims the id again after a lost
 * lease, false when another process took it (the coordinator stops).
 * coord_id_release: revokes the lease, so the key goes at once. */
int coord_id_claim(coord *c, char *msg, size_t cap);
bool coord_id_keep(coord *c);
void coord_id_release(coord *c);

/* ------------------------------------------------------------ membership */

/* Creates records for new agents and updates states (lost, down, back,
 * joining -> active, removed). Returns 1 when it wrote (re-read before the
 * next step), 0 when nothing changed, or a negative ring_errno. */
int coord_membership(coord *c, const rk_state *s);

/* ------------------------------------------------------------- proposals */

/* Proposes (and with auto-apply approves) a plan when the desired
 * membership differs from the table; drops a proposal that no longer
 * applies. Same return convention as coord_membership. */
int coord_propose(coord *c, const rk_state *s);

/* ------------------------------------------------------------------ runs */

/* Takes the next step of plan/active. Same return convention. */
int coord_run_step(coord *c, const rk_state *s);

/* ----------------------------------------------------------- stuck moves */

/* Sets up c->stuck; returns 0 or an errno value. coord_stuck_free undoes it. */
int coord_stuck_init(coord *c);
void coord_stuck_free(coord *c);
/* The loop, leading, after a look that wrote nothing else: follows the
 * receivers of the active run's in-flight set (rd_now_ms), updates the
 * gauges and the /healthz line, and writes the `stuck` key (fenced) when
 * the stuck set or a reason changed, or deletes it when nothing is stuck.
 * Returns 0 (that write needs no second look), or a negative ring_errno
 * (out of memory, a failed write: counted by coord_trouble). */
int coord_stuck_step(coord *c, const rk_state *s);
/* Forgets what a term watched (stepping down): gauges 0, healthy. */
void coord_stuck_forget(coord *c);
/* /healthz's part: writes the "degraded: ..." line and returns false when
 * moves are stuck; writes nothing and returns true otherwise. */
bool coord_stuck_health(coord *c, rd_text *t);

/* ------------------------------------------------------- a restored etcd */

/* The leader's look, before any step: feeds s to the client's history
 * marks (rk_state_history) and returns true while the history went back:
 * the look then writes nothing. */
bool coord_restore_step(coord *c, const rk_state *s);
/* Not leading: the marks the client holds, for /healthz and the log. */
void coord_restore_follow(coord *c);

/* ------------------------------------------------ tables and publishing */

/* Publishes `next` (version = s->version + 1): tables/<v>, deltas/<v>
 * (from c->table when there is one), version, and the extra ops, in one
 * fenced txn that compares the version key and plan/active as read in s.
 * On success c->table becomes next (ownership taken); on failure next is
 * freed. */
int coord_publish(coord *c, const rk_state *s, ring_table *next, const ring_op *extra,
                  uint32_t n_extra, ring_error *err);

/* ------------------------------------------------------------- retention */

/* Every compact_every: deletes tables and deltas older than the retention
 * (never the active run's base), history beyond its count, and compacts
 * etcd to the revision seen one period ago. */
void coord_gc(coord *c, const rk_state *s);

/* -------------------------------------------------------------- metrics */

void coord_metrics_text(void *ud, rd_text *t);
bool coord_health_text(void *ud, rd_text *t);
/* Updates gauges from a state read by the leader. */
void coord_metrics_observe(coord *c, const rk_state *s);
/* The loop, leading, after the table is in sync (c->table at s's version,
 * else the look is skipped: right after a publish the next look counts):
 * how long the version in etcd has waited for a live host's or a
 * client's ack (the version barrier), on this leader's clock, and how
 * (ring_coordinator_down_replicas is coord_health.c's to set). */
void coord_metrics_table(coord *c, const rk_state *s);
/* Stepping down: those two gauges 0 (the leader reports them). */
void coord_metrics_forget(coord *c);

/* ------------------------------------------------------- the status page */

/* Sets up c->status (its view says "starting"); c->o must be parsed.
 * Returns 0 or an errno value. coord_status_free undoes it. */
int coord_status_init(coord *c);
void coord_status_free(coord *c);
/* The routes for rd_http_start_routes (stored in c->status), with the
 * allow-list of --status-allow (default: loopback only). NULL with the
 * reason in msg when that list does not parse. */
const rd_http_route *coord_status_routes(coord *c, char *msg, size_t cap);
/* Adds to the status page's plan panel o the active run's bytes per
 * receiver ("bytes_in"), their sum ("bytes_now"), the tokens whose size is
 * known ("sizes_known") and the time at the throttle's byte rate ("eta_s",
 * 0 without a limit): computed once per run from sizes/ (read then, as it
 * is large), not every second. Nothing is added when no host reported
 * sizes or the run's plan is not computed yet. */
void coord_status_bytes(coord *c, const rk_state *s, struct cJSON *o);
void coord_status_bytes_free(coord *c);

/* The page for / and /status (coord_status_page.c): static, NUL-terminated. */
extern const char coord_status_html[];
/* rd_page_fn: the page for / and /status, the JSON for /status.json. A
 * GET of the JSON that finds it a second old, or older than the state the
 * loop last looked at (and 200 ms old), asks the loop for a new one and
 * waits for it at most STATUS_WAIT_MS (then answers with what there is). */
unsigned coord_status_page(void *ud, const char *path, rd_text *t, const char **type);
/* The loop, leading: follows the active run (coord_status_plan_follow) and
 * rebuilds the leader's view from s (and c->table when it is at s's
 * version) when a GET waits for it, or, while the page was asked for in
 * the last STATUS_WATCHED_MS, when s changed (at most every 200 ms) or the
 * view is a second old. Nobody asking, an idle look builds nothing. */
void coord_status_observe(coord *c, const rk_state *s);
/* The loop, not leading: at most once a second (or when a GET waits),
 * reads the leader key and makes the view "follower, leader is X". */
void coord_status_follow(coord *c);
/* The loop, on winning an election: the page says "leader" at once, and
 * that its first look is under way, until that look builds the view. */
void coord_status_took_over(coord *c);

/* The active run's part of the page (coord_status_plan.c).
 * coord_status_plan_follow, at every look (whoever watches): takes a
 * progress sample (at most one a second; a new run starts a new series)
 * and counts the run's flow once (who gives how many to whom, from
 * c->run_plan). coord_status_plan adds "flow" and "rates" (the samples
 * as moves/s and bytes/s) to o. Both stay for the last run once it is
 * over. */
void coord_status_plan_follow(coord *c, const rk_state *s);
void coord_status_plan(coord *c, struct cJSON *o);
/* Frees what coord_status_plan keeps. */
void coord_status_plan_free(coord *c);

/* ------------------------------------------------------ missing replicas */

/* The loop, leading, after the table is in sync: the view of missing/
 * (coord_missing.c) for the gauges, /healthz and the status page. */
void coord_missing_observe(coord *c, const rk_state *s);
/* Stepping down: a follower reports nothing missing (the leader does). */
void coord_missing_forget(void);
/* /healthz's part: writes "degraded: N token-replicas missing (...)"
 * (after "; " when `after`) and returns false while any are. */
bool coord_missing_health(rd_text *t, bool after);
/* The status page's "missing" object: a new cJSON the caller deletes. */
struct cJSON *coord_missing_json(void);
/* The two gauges, for /metrics. */
void coord_missing_metrics(rd_text *t);
/* The token-replicas missing at the last look (0 after coord_missing_forget). */
uint64_t coord_missing_count(void);

/* ---------------------------------------------------- the cluster's health */

/* The loop, leading, after coord_missing_observe: cluster_health.c's view
 * (a token below R, every plan refused, a refill waiting for policy, labels
 * that differ) for the gauges, /healthz and the log (coord_health.c). */
void coord_health_observe(coord *c, const rk_state *s);
/* Stepping down: a follower reports nothing (the leader does). */
void coord_health_forget(void);
/* /healthz's part: writes "degraded: REASON; REASON" (after "; " when
 * `after`) and returns false while any reason holds. */
bool coord_health_reasons(rd_text *t, bool after);
/* The gauges, for /metrics. */
void coord_health_metrics(rd_text *t);

#endif /* RING_COORD_H */
