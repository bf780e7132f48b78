/*
 * coord_main.c: ring-coordinator's entry point: options, start-up, the
 * loop, and a clean stop on SIGTERM.
 *
 * Sections: options; start-up; the loop; main.
 *
 * Usage: ring-coordinator --endpoints URLS --cluster NAME [--listen HOST:PORT]
 *        [--auto-apply] [--config FILE] ...  (see --help and deploy/ring-coordinator.conf)
 */
#define _GNU_SOURCE /* strdup, gethostname */
#include "coord.h"
#include "ringx.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A catch-up (rk_cache_catching_up) longer than this is degraded on
 * /healthz: a watch a few seconds behind is a saturated etcd, which an
 * operator should see before the full read at RK_CACHE_CATCHUP_MS. */
#define COORD_CATCHUP_LOUD_MS 5000u

/* ---------------------------------------------------------------- options */

static rd_opt *opts_table(coord_opts *o) {
  const rd_opt table[] = {
      rd_common_row(&o->common, RD_CLUSTER, NULL),
      rd_common_row(&o->common, RD_ID, "this instance's name (default: hostname-pid)"),
      rd_common_row(&o->common, RD_LISTEN,
                    "HOST:PORT for /metrics, /healthz and the status page (/)"),
      {"status-allow", RD_OPT_STRING, &o->status_allow, 0, 0,
       "addresses or names allowed to read the status page, comma-separated, or any "
       "(default: 127.0.0.1,::1); /metrics and /healthz stay open"},
      {"auto-apply", RD_OPT_BOOL, &o->auto_apply, 0, 0,
       "approve own plans (else the cluster config decides)"},
      {"full-reads", RD_OPT_BOOL, &o->full_reads, 0, 0,
       "read the whole cluster state at every look instead of keeping it from the watch "
       "(the cost before the cache, for comparison; a fallback)"},
      rd_common_row(&o->common, RD_LEASE_TTL,
                    "leadership lease; a follower takes over within 2 of these"),
      {"tick", RD_OPT_MS, &o->tick_ms, 50, 60000, "longest sleep between two looks at etcd"},
      {"compact-every", RD_OPT_MS, &o->compact_every_ms, 1000, 86400000,
       "retention and etcd compaction period"},
      {"stuck-after", RD_OPT_MS, &o->stuck_after_ms, 100, 604800000,
       "a move whose receiver makes no progress this long is stuck (/healthz, /metrics, stuck)"},
      rd_common_row(&o->common, RD_LOG_LEVEL, NULL),
      {NULL, 0, NULL, 0, 0, NULL},
  };
  return rd_opts_with_etcd(&o->etcd, table);
}

/* ------------------------------------------------------------- start-up */

static void on_stop(void *ud) {
  coord *c = ud;
  atomic_store(&c->stop, true);
  rd_waker_wake(&c->waker);
}

static void wake_loop(void *ud) { rd_waker_wake(&((coord *)ud)->waker); }

#ifdef RING_FAULT_INJECTION
/* Test knobs, only in ring-coordinator-faults (never installed), inert
 * unless set (state_cache.h, rk_cache_check_every and rk_cache_corrupt;
 * tests/coordinator/test_coord_cache.c): the cache's periodic check every
 * RING_TEST_CACHE_CHECK_MS, and one cached record of node
 * RING_TEST_CACHE_CORRUPT altered, to see the check catch it. */
static void test_knobs(rk_cache *k) {
  const char *every = getenv("RING_TEST_CACHE_CHECK_MS"), *node = getenv("RING_TEST_CACHE_CORRUPT");
  if (every != NULL) {
    rk_cache_check_every(k, strtoull(every, NULL, 10));
    rd_log(RD_WARN, "test knob: the cache's check runs every RING_TEST_CACHE_CHECK_MS", "ms", every,
           NULL);
  }
  if (node != NULL)
    rk_cache_corrupt(k, node);
}
#else
static void test_knobs(rk_cache *k) { (void)k; }
#endif

static int open_etcd(coord *c, char *msg, size_t cap) {
  if (rd_etcd_open(&c->o.etcd, &c->etcd, msg, cap) != 0)
    return -1;
  if (rk_cache_new(c->o.cluster, &c->cache) != RING_OK)
    return snprintf(msg, cap, "out of memory"), -1;
  rk_cache_full_reads(c->cache, c->o.full_reads);
  test_knobs(c->cache);
  ring_error err = {0};
  if (rk_cache_watch(c->cache, c->etcd, wake_loop, c, &err) != RING_OK)
    rd_log(RD_WARN, "no watch yet: polling every tick and reading whole until etcd answers", "err",
           err.message, NULL); /* the loop still runs on its tick; retried below */
  return 0;
}

static void default_id(coord_opts *o) {
  if (o->id != NULL)
    return;
  char host[64] = "coordinator";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  char buf[RING_ID_MAX + 1];
  snprintf(buf, sizeof buf, "%.40s-%ld", host, (long)getpid());
  o->id = strdup(buf);
}

/* ------------------------------------------------------------- the loop */

/* Keeps c->table at the version in etcd (it changes under us only when
 * another leader published, or at start). */
static int sync_table(coord *c, const rk_state *s) {
  if (c->table && ring_table_version(c->table) == s->version)
    return RING_OK;
  coord_table_set(c, NULL);
  ring_error err = {0};
  if (s->version == 0)
    return RING_OK;
  ring_table *t = NULL;
  int rc = rk_table_read(c->etcd, c->o.cluster, s->version, &t, &err);
  if (rc != RING_OK)
    coord_trouble(c, "reading the current table", &err);
  else
    coord_table_set(c, t);
  return rc;
}

/* What the parts kept for a term (stuck moves, missing replicas, the
 * gauges) ends with it: a follower reports none of it, and a new term
 * starts from nothing. */
static void forget_parts(coord *c) {
  coord_stuck_forget(c);
  coord_missing_forget();
  coord_health_forget();
  coord_metrics_forget(c);
}

/* A term won (even one won back at once): the last term's parts are
 * forgotten, the state is read whole, and the status page says "leader"
 * before the first look. */
static void begin_term(coord *c, uint64_t term) {
  forget_parts(c);
  rk_cache_drop(c->cache);
  c->cache_term = term;
  coord_status_took_over(c);
}

/* A pass while following: the term's parts forgotten once, a new term
 * will start from a full read, the follower's page and restore check. */
static void follow(coord *c) {
  if (c->cache_term != 0)
    forget_parts(c), c->cache_term = 0;
  rk_cache_drop(c->cache);
  coord_status_follow(c);
  coord_restore_follow(c);
}

/* One look at the cluster while leading: at most one kind of write per
 * look (records, then the run, then a proposal, then the stuck report,
 * then retention). Returns
 * true when it wrote, so the loop looks again at once. */
static bool leader_step(coord *c) {
  const rk_state *s;
  ring_error err = {0};
  rd_health_step(&c->health);
  uint64_t term = atomic_load(&c->m.terms);
  if (term != c->cache_term) /* a new term, even one won back at once */
    begin_term(c, term);
  uint64_t behind_ms = 0;
  if (rk_cache_catching_up(c->cache, &behind_ms)) {
    if (behind_ms >= COORD_CATCHUP_LOUD_MS) { /* degraded on /healthz until a look is served */
      char why[96];
      snprintf(why, sizeof why, "the last write is %.1f s old and not back yet (etcd is slow)",
               (double)behind_ms / 1000);
      rd_health_trouble(&c->health, "waiting for the cluster watch", why);
    }
    /* a status page asked for meanwhile shows the last look, at its revision */
    coord_status_observe(c, rk_cache_held(c->cache));
    return false; /* the watch is bringing our last write: the next event or tick looks */
  }
  if (rk_cache_look(c->cache, c->etcd, &s, &err) != RING_OK) {
    coord_trouble(c, "reading the cluster state", &err);
    return false;
  }
  coord_metrics_observe(c, s);
  int wrote = -1;
  if (coord_restore_step(c, s))
    wrote = 0; /* a restored etcd: act on nothing it says (coord_restore.c) */
  else if (!s->has_config)
    coord_trouble(c, "idle",
                  (ring__err(&err, RING_ENOTFOUND, "no config: run `ringctl init`"), &err));
  else if (sync_table(c, s) == RING_OK && (wrote = coord_membership(c, s)) == 0 &&
           (wrote = coord_run_step(c, s)) == 0 && !s->has_active)
    wrote = coord_propose(c, s);
  bool restored = atomic_load(&c->restore.restored);
  if (wrote == 0 && !restored)
    wrote = coord_stuck_step(c, s);
  if (wrote == 0 && !restored)
    coord_gc(c, s);
  if (s->has_config && c->table != NULL) {
    coord_missing_observe(c, s);
    coord_health_observe(c, s);
    coord_metrics_table(c, s);
  }
  if (wrote >= 0)
    rd_health_ok(&c->health);
  /* after a write too: a page asked for while the loop writes look after
   * look (a first placement) is built from this look, at its revision,
   * rather than left to time out on the page before */
  coord_status_observe(c, s);
  return wrote > 0;
}

static void run_loop(coord *c) {
  while (!atomic_load(&c->stop) && coord_id_keep(c)) {
    bool again = false;
    if (!rk_cache_watching(c->cache))
      rk_cache_watch(c->cache, c->etcd, wake_loop, c, NULL);
    if (coord_lead(c))
      again = leader_step(c);
    else
      follow(c);
    if (!again)
      rd_waker_wait(&c->waker, c->o.tick_ms);
  }
}

/* ----------------------------------------------------------------- main */

static int start(coord *c, rd_opt **tablep, int argc, char **argv) {
  static const rd_daemon d = {.name = "ring-coordinator",
                              .component = "coordinator",
                              .summary = "ring-coordinator: membership, plans and throttled "
                                         "migrations for one Ringkeeper cluster"};
  c->o = (coord_opts){.lease_ttl_ms = 10000,
                      .tick_ms = 1000,
                      .compact_every_ms = 300000,
                      .stuck_after_ms = 600000,
                      .etcd = {.timeout_ms = 5000}};
  *tablep = opts_table(&c->o);
  int rc = rd_daemon_start(&d, argc, argv, *tablep, &c->o.common, &c->o);
  if (rc >= 0)
    return rc;
  default_id(&c->o);
  if (c->o.tick_ms > c->o.lease_ttl_ms / 3)
    c->o.tick_ms = c->o.lease_ttl_ms / 3; /* take over well within 2 TTLs */
  return -1;
}

int main(int argc, char **argv) {
  static coord c; /* one per process; its address is handed to threads */
  rd_opt *table = NULL;
  int rc = start(&c, &table, argc, argv);
  if (rc >= 0) {
    rd_opts_release(table);
    return rc;
  }
  rd_waker_init(&c.waker);
  rd_health_init(&c.health);
  rd_restore_init(&c.restore);
  coord_stuck_init(&c);
  coord_status_init(&c);
  if (rd_signals_start(on_stop, NULL, &c) != 0) {
    fprintf(stderr, "ring-coordinator: cannot set up signal handling\n");
    return 1;
  }
  char msg[512] = "";
  rd_http *http = NULL;
  const rd_http_route *routes = NULL;
  if (open_etcd(&c, msg, sizeof msg) != 0 || coord_id_claim(&c, msg, sizeof msg) != 0 ||
      (c.o.listen &&
       ((routes = coord_status_routes(&c, msg, sizeof msg)) == NULL ||
        (http = rd_http_start_routes(c.o.listen, coord_metrics_text, coord_health_text, &c, routes,
                                     msg, sizeof msg)) == NULL))) {
    rd_log(RD_ERROR, "cannot start", "err", msg, NULL);
    coord_id_release(&c);
    rk_cache_free(c.cache);
    coord_status_free(&c);
    coord_stuck_free(&c);
    ring_etcd_close(c.etcd);
    rd_opts_release(table);
    return 1;
  }
  rd_log(RD_INFO, "started", "id", c.o.id, "cluster", c.o.cluster, "endpoints", c.o.etcd.endpoints,
         NULL);
  run_loop(&c);
  bool taken = !atomic_load(&c.stop); /* the loop ended on a lost id */
  coord_resign(&c);
  coord_id_release(&c);
  rk_cache_free(c.cache);
  if (http)
    rd_http_stop(http);
  coord_status_free(&c);
  coord_stuck_free(&c);
  ring_table_free(c.table);
  ring_plan_free(c.run_plan);
  ring_table_free(c.run_base);
  ring_etcd_close(c.etcd);
  rd_log(RD_INFO, "stopped", "id", c.o.id, NULL);
  rd_opts_release(table);
  return taken ? 1 : 0;
}
