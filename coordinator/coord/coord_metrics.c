/*
 * coord_metrics.c: /metrics (Prometheus text) and /healthz. The loop
 * stores gauges in atomics after each read; the HTTP thread only loads
 * them, so a slow scrape never holds up the loop.
 *
 * Bad records (rk_state's bad): ring_coordinator_bad_records_total{kind}
 * counts each ignored value once (kind, key and mod revision not seen
 * ignored at the loop's previous look), ring_coordinator_bad_record_hosts
 * is how many hosts have one now. Their state lives here, not in
 * coord_metrics (coord.h), as one set per process: one coordinator runs
 * in a process, and only its loop calls coord_metrics_observe.
 *
 * The version barrier (coord_metrics_table): the first look of this term
 * that found the version in etcd not acked by a live host or a client
 * starts a clock (rd_now_ms, ours: no other host's clock is compared);
 * ring_coordinator_barrier_wait_seconds is its reading until a look finds
 * nobody lagging. It is kept for every version, not only a run's pending
 * ones: a host or client that stops acking holds up the next step of any
 * plan, so the operator hears of it before a plan waits on it.
 */
#include "coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t bad_total[RK_BAD_KINDS]; /* by rk_bad_kind */
static _Atomic uint64_t bad_hosts;               /* hosts with a bad record now */
static rk_bad_record *bad_seen;                  /* the loop's: last look's, sorted */
static uint32_t n_bad_seen;
static uint64_t lag_version;  /* the loop's: the version found waiting for an ack; 0: none */
static uint64_t lag_since_ms; /* rd_now_ms of the first look that found it waiting */

static int bad_order(const void *pa, const void *pb) {
  const rk_bad_record *a = pa, *b = pb;
  if (a->kind != b->kind)
    return a->kind < b->kind ? -1 : 1;
  int c = strcmp(a->host, b->host);
  if (c != 0)
    return c;
  return a->mod_revision < b->mod_revision ? -1 : a->mod_revision > b->mod_revision;
}

/* Counts the bad records of s not seen at the last look, and keeps s's
 * (sorted by rk_state_read) for the next. Out of memory, the next look
 * counts again what it could not keep. */
static void observe_bad(const rk_state *s) {
  for (uint32_t i = 0; i < s->n_bad; i++) {
    const rk_bad_record *b = &s->bad[i];
    if ((unsigned)b->kind < RK_BAD_KINDS &&
        (n_bad_seen == 0 ||
         bsearch(b, bad_seen, n_bad_seen, sizeof *bad_seen, bad_order) == NULL)) {
      char text[RK_BAD_WHY_MAX + 96];
      atomic_fetch_add(&bad_total[b->kind], 1);
      rd_log(RD_WARN, "ignoring a bad record", "record", rk_bad_text(b, text, sizeof text), NULL);
    }
  }
  free(bad_seen);
  bad_seen = s->n_bad ? malloc(s->n_bad * sizeof *bad_seen) : NULL;
  n_bad_seen = bad_seen != NULL ? s->n_bad : 0;
  if (bad_seen != NULL) {
    memcpy(bad_seen, s->bad, s->n_bad * sizeof *bad_seen);
    qsort(bad_seen, n_bad_seen, sizeof *bad_seen, bad_order);
  }
  atomic_store(&bad_hosts, rk_bad_hosts(s));
}

void coord_metrics_observe(coord *c, const rk_state *s) {
  static coord_memo seen; /* the look these gauges were set at: the same state sets the same */
  coord_memo key = coord_memo_of(c, s);
  if (coord_memo_same(&seen, &key))
    return;
  seen = key;
  uint64_t by_state[5] = {0};
  for (uint32_t i = 0; i < s->n_nodes; i++)
    if ((unsigned)s->nodes[i].state < 5)
      by_state[s->nodes[i].state]++;
  for (int i = 0; i < 5; i++)
    atomic_store(&c->m.nodes[i], by_state[i]);
  atomic_store(&c->m.version, s->version);
  int plan = COORD_PLAN_NONE;
  if (s->has_active)
    plan = s->active.state == RK_RUN_PAUSED       ? COORD_PLAN_PAUSED
           : s->active.state == RK_RUN_CANCELLING ? COORD_PLAN_CANCELLING
                                                  : COORD_PLAN_ACTIVE;
  else if (s->has_proposed)
    plan = COORD_PLAN_PROPOSED;
  atomic_store(&c->m.plan_state, plan);
  observe_bad(s);
  if (!s->has_active) {
    atomic_store(&c->m.moves_total, 0);
    atomic_store(&c->m.moves_done, 0);
    atomic_store(&c->m.waves_total, 0);
    atomic_store(&c->m.wave, 0);
  }
}

void coord_metrics_table(coord *c, const rk_state *s) {
  static struct {
    coord_memo key;
    bool lagging; /* someone has not acked the version */
  } kept;         /* what the state and table say, kept while they are the same */
  const ring_table *t = c->table;
  if (t == NULL || ring_table_version(t) != s->version)
    return;
  coord_memo key = coord_memo_of(c, s);
  bool same = coord_memo_same(&kept.key, &key);
  if (!same)
    kept.lagging = rk_barrier_laggard(s, t, s->version) != NULL;
  uint64_t now = rd_now_ms(), wait = 0;
  if (!kept.lagging) {
    lag_version = 0;
  } else {
    if (lag_version != s->version)
      lag_version = s->version, lag_since_ms = now;
    wait = now - lag_since_ms;
  }
  atomic_store(&c->m.barrier_wait_ms, wait);
  kept.key = key;
}

void coord_metrics_forget(coord *c) {
  lag_version = 0; /* the kept figures are for a term: the next has another key */
  atomic_store(&c->m.barrier_wait_ms, 0);
  atomic_store(&c->m.down_replicas, 0);
}

/* The state cache's looks (coordinator/cluster/state_cache.h): full reads
 * by why, looks served from the watch, events applied. */
#define CACHE_FIELD(field, name, help)                                                             \
  RD_METRIC_FIELD(RD_METRIC_U64, 0, rk_cache_stats, field, name, "counter", help)
static const rd_metric_desc cache_table[] = {
    CACHE_FIELD(incremental, "ring_coordinator_cache_looks_total",
                "looks at the cluster served from the watch-fed cache (no full read)"),
    CACHE_FIELD(events, "ring_coordinator_cache_events_total",
                "watch events applied to the cluster state cache"),
    CACHE_FIELD(waits, "ring_coordinator_cache_waits_total",
                "looks skipped while the watch, still moving, was bringing the coordinator's own "
                "last write (etcd busy)"),
};

static void cache_metrics(rd_text *t, const void *base) {
  const coord *c = base;
  rk_cache_stats st = {0};
  if (c->cache != NULL)
    rk_cache_stats_get(c->cache, &st);
  rd_metric_head(t, "ring_coordinator_cache_resyncs_total", "counter",
                 "full reads of the cluster state by why (diverged: a periodic check found the "
                 "watch-fed cache differed from etcd, counted besides periodic)");
  for (int i = 0; i < RK_RESYNC_KINDS; i++)
    rd_metric_labeled(t, "ring_coordinator_cache_resyncs_total", "why",
                      rk_resync_why_name((rk_resync_why)i), (double)st.full[i]);
  const void *bases[] = {&st};
  rd_metric_table(t, cache_table, sizeof cache_table / sizeof *cache_table, bases);
}

static void nodes_family(rd_text *t, const void *base) {
  const coord *c = base;
  rd_metric_head(t, "ring_coordinator_nodes", "gauge", "node records by state");
  for (int i = 0; i < 5; i++)
    rd_metric_labeled(t, "ring_coordinator_nodes", "state",
                      ring_node_state_name((ring_node_state)i), (double)c->m.nodes[i]);
}

static void plan_family(rd_text *t, const void *base) {
  static const char *const plans[] = {"none", "proposed", "active", "paused", "cancelling"};
  const coord *c = base;
  rd_metric_head(t, "ring_coordinator_plan", "gauge", "1 for the plan state the cluster is in");
  for (int i = 0; i < 5; i++)
    rd_metric_labeled(t, "ring_coordinator_plan", "state", plans[i],
                      atomic_load(&c->m.plan_state) == i);
}

static void bad_records_family(rd_text *t, const void *base) {
  (void)base;
  rd_metric_head(t, "ring_coordinator_bad_records_total", "counter",
                 "host records (and leader, stuck values) ignored as over their cap or malformed, "
                 "each value once");
  for (int i = 0; i < RK_BAD_KINDS; i++)
    rd_metric_labeled(t, "ring_coordinator_bad_records_total", "kind",
                      rk_bad_kind_name((rk_bad_kind)i), (double)atomic_load(&bad_total[i]));
}

static void missing_family(rd_text *t, const void *base) {
  (void)base;
  coord_missing_metrics(t);
  coord_health_metrics(t);
}

static double etcd_requests(const void *base) {
  return (double)ring_etcd_requests(((const coord *)base)->etcd);
}

static double etcd_restored(const void *base) {
  return atomic_load(&((const coord *)base)->restore.restored) ? 1.0 : 0.0;
}

static double bad_record_hosts(const void *base) {
  (void)base;
  return (double)atomic_load(&bad_hosts);
}

#define GAUGE(field, name, help)                                                                   \
  RD_METRIC_FIELD(RD_METRIC_ATOMIC, 0, coord, field, name, "gauge", help)
#define COUNTER(field, name, help)                                                                 \
  RD_METRIC_FIELD(RD_METRIC_ATOMIC, 0, coord, field, name, "counter", help)
static const rd_metric_desc coord_table[] = {
    GAUGE(m.leader, "ring_coordinator_leader", "1 while this instance leads"),
    COUNTER(m.terms, "ring_coordinator_terms_total", "times this instance was elected"),
    GAUGE(m.version, "ring_coordinator_version", "the table version in etcd"),
    RD_METRIC_PUT(0, nodes_family),
    RD_METRIC_PUT(0, plan_family),
    GAUGE(m.moves_total, "ring_coordinator_run_moves", "moves of the active run"),
    GAUGE(m.moves_done, "ring_coordinator_run_moves_done", "moves of the active run done"),
    GAUGE(m.waves_total, "ring_coordinator_run_waves", "waves of the active run"),
    GAUGE(m.wave, "ring_coordinator_run_wave", "the wave the active run is in"),
    COUNTER(m.errors, "ring_coordinator_errors_total", "failed etcd writes and steps"),
    RD_METRIC_GETTER(0, etcd_requests, "ring_coordinator_etcd_requests_total", "counter",
                     "etcd requests sent"),
    COUNTER(m.publishes, "ring_coordinator_publishes_total", "table versions published"),
    COUNTER(m.publish_bytes, "ring_coordinator_publish_bytes_total",
            "bytes of values written by publishes"),
    COUNTER(m.runs_done, "ring_coordinator_runs_done_total", "runs finished"),
    COUNTER(m.runs_failed, "ring_coordinator_runs_failed_total", "runs failed"),
    COUNTER(m.runs_cancelled, "ring_coordinator_runs_cancelled_total", "runs cancelled"),
    RD_METRIC_GETTER(0, etcd_restored, "ring_coordinator_etcd_restored", "gauge",
                     "1 while etcd's history went back (a restore from an older snapshot): "
                     "nothing is planned, published or marked down until `ringctl recover`"),
    GAUGE(m.stuck_moves, "ring_coordinator_stuck_moves",
          "moves in flight whose receiver made no progress for --stuck-after"),
    GAUGE(m.failing_moves, "ring_coordinator_failing_moves",
          "moves in flight whose receiver reports failed fetches (stuck or not yet)"),
    RD_METRIC_PUT(0, bad_records_family),
    RD_METRIC_GETTER(0, bad_record_hosts, "ring_coordinator_bad_record_hosts", "gauge",
                     "hosts with a record ignored as bad now"),
    {.name = "ring_coordinator_barrier_wait_seconds",
     .type = "gauge",
     .help = "how long the table version in etcd has waited for a live host's or a registered "
             "client's ack (the version barrier); 0: every one acked it",
     .kind = RD_METRIC_ATOMIC,
     .offset = offsetof(coord, m.barrier_wait_ms),
     .divisor = 1000.0},
    GAUGE(m.down_replicas, "ring_coordinator_down_replicas",
          "token-replicas the table in service gives to nodes whose record is down: what a "
          "repair has yet to re-make"),
    GAUGE(m.key_refused, "ring_coordinator_key_refused_nodes",
          "nodes whose agent signs with a key other than the one pinned in nodes/<id>: "
          "their peers refuse them until ringctl trust (/healthz names them)"),
    GAUGE(m.removed_alive, "ring_coordinator_removed_alive_nodes",
          "removed nodes whose agent still holds alive/<id>: refused, never re-joined; "
          "`ringctl status` shows them as \"removed, agent still running\""),
    RD_METRIC_PUT(0, missing_family),
    RD_METRIC_PUT(0, cache_metrics),
    /* the status page's reads: what woke the loop, what was built, what was refused
     * (coord_status.c) */
    COUNTER(status.wakes, "ring_coordinator_status_wakes_total",
            "status page reads that woke the loop for a new view (at most one per 200 ms)"),
    COUNTER(status.builds, "ring_coordinator_status_builds_total", "status page views built"),
    COUNTER(status.denied, "ring_coordinator_status_denied_total",
            "status page reads refused (403) by --status-allow"),
};

void coord_metrics_text(void *ud, rd_text *t) {
  const void *bases[] = {ud};
  rd_metric_table(t, coord_table, sizeof coord_table / sizeof *coord_table, bases);
}

/* Stuck moves first, then missing replicas (both last until data arrives
 * or a loss is accepted), then the cluster's reasons (coord_health.c),
 * then the last trouble of a step; one line, healthy only without any. */
bool coord_health_text(void *ud, rd_text *t) {
  coord *c = ud;
  if (!rd_restore_health(&c->restore, t)) /* first: it outweighs any other trouble */
    return false;
  if (coord_lease_lapsed(c)) {
    ring__sb_printf(t, "degraded: the leadership lease lapsed (etcd did not renew it in its "
                       "TTL): not leading\n");
    return false;
  }
  rd_text trouble = {0};
  bool ok = rd_health_text(&c->health, &trouble);
  bool calm = coord_stuck_health(c, t);
  calm = coord_missing_health(t, !calm) && calm; /* missing replicas: after the stuck moves */
  calm = coord_health_reasons(t, !calm) && calm; /* then the cluster's other reasons */
  const char *line = trouble.p != NULL ? trouble.p : "ok\n";
  if (calm)
    ring__sb_printf(t, "%s", line);
  else if (ok)
    ring__sb_printf(t, "\n");
  else
    ring__sb_printf(t, "; %s", line);
  free(trouble.p);
  return calm && ok;
}
