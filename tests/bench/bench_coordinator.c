/*
 * bench_coordinator.c: ring-coordinator taking in ONE node on a large
 * cluster, against a real single-member etcd (tests/common/etcd_harness.h).
 * Prints figures; it never passes or fails on time (exit 1 only when the
 * run does not complete at all).
 *
 * Sections:
 *   1. options
 *   2. etcd and coordinator metrics
 *   3. the cluster: config, N alive keys, the coordinator
 *   4. one join, watched
 *   5. main
 *
 * Setup: N nodes in Z zones register cheaply (one lease for every alive/
 * key, puts in txns of 100); the coordinator places them (a first
 * placement is one version, no moves); then the throttle under test is
 * set, and the migration mode (`none`, or `stream`; in `stream` one watch
 * acks every version for all N registered nodes, see the acker).
 * Measured: one node joins, as a fake agent (tests/common/fake_agent.c)
 * that acks each version and reports its incoming arcs at once, so in
 * `stream` mode every wave is a pending version and a cutover; in `none`
 * mode one cutover per wave. The clock starts just before the join's
 * alive/ put; a watch on the cluster prefix timestamps plan/proposed,
 * plan/active, every version, and the history entry. Bytes and requests
 * come from the coordinator's /metrics (publishes, publish bytes, its etcd
 * requests, waves) and etcd's own /metrics at the client URL (mvcc put
 * bytes and counts, WAL bytes, gRPC calls: every client, the watch and
 * the fake agent included), as differences over the join.
 *
 *   bench_coordinator [--quick] [--nodes N] [--tokens T] [--zones Z]
 *                     [--per-node N] [--per-wave N] [--mode none|stream|both]
 *                     [--coordinator PATH]
 */
#include "etcd_harness.h" /* first: it defines _GNU_SOURCE */
#include "proc_harness.h"
#include "fake_agent.h"
#include "ring_etcd.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#define CLUSTER "bench"
#define PREFIX "/ringkeeper/" CLUSTER "/"

/* ------------------------------------------------------------ 1. options */

typedef struct options {
  uint32_t nodes, tokens, zones, per_node, per_wave;
  bool none, stream;
  const char *coordinator;
} options;

static void usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--quick] [--nodes N] [--tokens T] [--zones Z] [--per-node N] "
          "[--per-wave N] [--mode none|stream|both] [--coordinator PATH]\n",
          prog);
  exit(2);
}

static options parse_options(int argc, char **argv) {
#ifdef RING_COORDINATOR_BIN
  const char *bin = RING_COORDINATOR_BIN;
#else
  const char *bin = NULL;
#endif
  /* the config's default throttle: 4 moves per node, 256 per wave */
  options o = {1000, 65536, 10, 4, 256, true, true, bin};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      o.nodes = 100, o.tokens = 4096;
      continue;
    }
    if (v == NULL)
      usage(argv[0]);
    i++;
    if (strcmp(a, "--nodes") == 0)
      o.nodes = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(a, "--tokens") == 0)
      o.tokens = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(a, "--zones") == 0)
      o.zones = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(a, "--per-node") == 0)
      o.per_node = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(a, "--per-wave") == 0)
      o.per_wave = (uint32_t)strtoul(v, NULL, 10);
    else if (strcmp(a, "--mode") == 0) {
      o.none = strcmp(v, "none") == 0 || strcmp(v, "both") == 0;
      o.stream = strcmp(v, "stream") == 0 || strcmp(v, "both") == 0;
      if (!o.none && !o.stream)
        usage(argv[0]);
    } else if (strcmp(a, "--coordinator") == 0)
      o.coordinator = v;
    else
      usage(argv[0]);
  }
  if (o.nodes < 3 || o.nodes > 20000 || o.zones < 3 || o.zones > o.nodes || o.tokens < 64 ||
      o.tokens > 65536 || (o.tokens & (o.tokens - 1)) != 0) {
    fprintf(stderr, "bench_coordinator: option out of range\n");
    exit(2);
  }
  return o;
}

static void die(const char *what, const ring_error *err) {
  fprintf(stderr, "bench_coordinator: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
  exit(1);
}

/* --------------------------------------------- 2. etcd and coordinator metrics */

/* The figures read before and after the join. */
typedef struct counters {
  /* the coordinator's */
  double publishes, publish_bytes, etcd_requests, errors;
  /* etcd's, every client together */
  double put_bytes, puts, txns, ranges, wal_bytes, grpc_calls, proposals;
} counters;

/* Sum of every sample of a family (any labels). */
static double metric_sum(const char *text, const char *name) {
  double sum = 0;
  size_t nl = strlen(name);
  for (const char *line = text; line && *line;) {
    const char *eol = strchr(line, '\n');
    const char *end = eol ? eol : line + strlen(line), *sp = end;
    while (sp > line && sp[-1] != ' ')
      sp--;
    if (strncmp(line, name, nl) == 0 && (line[nl] == '{' || line[nl] == ' ') && sp > line)
      sum += strtod(sp, NULL);
    line = eol ? eol + 1 : NULL;
  }
  return sum;
}

static counters read_counters(const char *coord_listen, const char *etcd_hostport) {
  counters c;
  memset(&c, 0, sizeof c);
  char *m = metrics_scrape(coord_listen);
  if (m == NULL)
    die("the coordinator's /metrics does not answer", NULL);
  c.publishes = metric_value(m, "ring_coordinator_publishes_total", "");
  c.publish_bytes = metric_value(m, "ring_coordinator_publish_bytes_total", "");
  c.etcd_requests = metric_value(m, "ring_coordinator_etcd_requests_total", "");
  c.errors = metric_value(m, "ring_coordinator_errors_total", "");
  free(m);
  char *e = metrics_scrape(etcd_hostport);
  if (e == NULL)
    die("etcd's /metrics does not answer", NULL);
  c.put_bytes = metric_sum(e, "etcd_debugging_mvcc_total_put_size_in_bytes");
  c.puts = metric_sum(e, "etcd_mvcc_put_total");
  c.txns = metric_sum(e, "etcd_mvcc_txn_total");
  c.ranges = metric_sum(e, "etcd_mvcc_range_total");
  c.wal_bytes = metric_sum(e, "etcd_disk_wal_write_bytes_total");
  c.grpc_calls = metric_sum(e, "grpc_server_handled_total");
  c.proposals = metric_sum(e, "etcd_server_proposals_committed_total");
  free(e);
  return c;
}

/* ------------------------------------------------------------ 3. the cluster */

typedef struct bench {
  options o;
  const char *mode; /* "none" or "stream" */
  etcd_cluster etcd;
  ring_etcd *c;
  proc coord;
  char listen[32];        /* the coordinator's /metrics */
  char etcd_hostport[32]; /* etcd's client port, for its /metrics */
  char dir[128];
  int64_t lease; /* the one lease of every registered node */
  ring_keeper *keeper;
} bench;

static void put(bench *b, const char *what, const char *value) {
  char key[256];
  snprintf(key, sizeof key, PREFIX "%s", what);
  ring_error err;
  if (ring_etcd_put(b->c, key, strlen(key), value, strlen(value), 0, NULL, NULL, &err) != RING_OK)
    die(key, &err);
}

static void put_config(bench *b, const char *migration, uint32_t per_node, uint32_t per_wave) {
  char json[1024];
  snprintf(json, sizeof json,
           "{\"format\":\"ringkeeper.config.v1\",\"tokens\":%u,\"replicas\":3,\"seed\":0,"
           "\"failure_domain\":\"zone\",\"best_effort\":\"\",\"migration\":\"%s\","
           "\"down_after_ms\":60000,\"auto_apply\":true,"
           "\"throttle\":{\"moves_per_node\":%u,\"moves_per_domain\":0,\"moves_per_wave\":%u,"
           "\"bytes_per_sec\":0},\"retention\":{\"versions\":4,\"plans\":4}}",
           b->o.tokens, migration, per_node, per_wave);
  put(b, "config", json);
}

/* Whether the leader's /status.json shows the migration and throttle that
 * put_config wrote: it has read the config. */
static bool config_heard(const bench *b, const char *migration, uint32_t per_node,
                         uint32_t per_wave) {
  char url[64], want[3][64], *body = NULL;
  snprintf(url, sizeof url, "http://%s/status.json", b->listen);
  snprintf(want[0], sizeof want[0], "\"migration\":\"%s\"", migration);
  snprintf(want[1], sizeof want[1], "\"moves_per_node\":%u,", per_node);
  snprintf(want[2], sizeof want[2], "\"moves_per_wave\":%u,", per_wave);
  bool ok = http_get(url, &body) == 200 && strstr(body, want[0]) && strstr(body, want[1]) &&
            strstr(body, want[2]);
  free(body);
  return ok;
}

static void on_lost(void *ud, int64_t lease) {
  (void)ud;
  fprintf(stderr, "bench_coordinator: the nodes' lease %lld was lost\n", (long long)lease);
}

/* alive/n<i> for i in [0, n): one lease for all, puts in txns of 100. */
static void register_nodes(bench *b) {
  ring_error err;
  if (ring_etcd_lease_grant(b->c, 30, &b->lease, &err) != RING_OK ||
      ring_etcd_keep_alive(b->c, b->lease, 30, on_lost, NULL, &b->keeper, &err) != RING_OK)
    die("lease", &err);
  enum { BATCH = 100 };
  char keys[BATCH][64], vals[BATCH][256];
  ring_op ops[BATCH];
  for (uint32_t i = 0; i < b->o.nodes;) {
    uint32_t k = 0;
    for (; k < BATCH && i < b->o.nodes; k++, i++) {
      snprintf(keys[k], sizeof keys[k], PREFIX "alive/n%u", i);
      snprintf(vals[k], sizeof vals[k],
               "{\"format\":\"ringkeeper.alive.v1\",\"id\":\"n%u\",\"addr\":\"127.0.0.1:%u\","
               "\"labels\":{\"zone\":\"z%u\"},\"weight\":1,\"started_ms\":1796000000000}",
               i, 30000 + i % 30000, i % b->o.zones);
      ops[k] = (ring_op){RING_OP_PUT, keys[k], strlen(keys[k]), vals[k], strlen(vals[k]),
                         b->lease,    false};
    }
    if (ring_etcd_txn(b->c, NULL, 0, ops, k, NULL, 0, NULL, &err) != RING_OK)
      die("registering nodes", &err);
  }
}

static void start_coordinator(bench *b) {
  snprintf(b->listen, sizeof b->listen, "127.0.0.1:%d", harness_free_port());
  char log[200];
  snprintf(log, sizeof log, "%s/coordinator-%s.log", b->dir, b->mode);
  char *argv[] = {(char *)b->o.coordinator,
                  "--endpoints",
                  b->etcd.endpoints,
                  "--cluster",
                  CLUSTER,
                  "--id",
                  "bench",
                  "--listen",
                  b->listen,
                  "--auto-apply",
                  "--log-level",
                  "info",
                  "--lease-ttl",
                  "10s",
                  NULL};
  if (proc_spawn(&b->coord, log, argv) != 0)
    die("spawning ring-coordinator", NULL);
}

/* The newest history entry in state done, parsed; NULL when none. */
static int history_done(bench *b) {
  const char *key = PREFIX "plan/history/";
  ring_range_opts ro = {.prefix = true, .keys_only = false};
  ring_kvs kv;
  ring_error err;
  if (ring_etcd_range(b->c, key, strlen(key), &ro, &kv, &err) != RING_OK)
    die("reading history", &err);
  int done = 0;
  for (uint32_t i = 0; i < kv.n; i++)
    done += strstr((char *)kv.kvs[i].value, "\"state\":\"done\"") != NULL;
  ring_kvs_clear(&kv);
  return done;
}

static bool exists(bench *b, const char *what) {
  char key[256];
  snprintf(key, sizeof key, PREFIX "%s", what);
  ring_range_opts ro = {.count_only = true};
  ring_kvs kv;
  ring_error err;
  if (ring_etcd_range(b->c, key, strlen(key), &ro, &kv, &err) != RING_OK)
    die("reading", &err);
  bool e = kv.count > 0;
  ring_kvs_clear(&kv);
  return e;
}

/* Waits until `done` runs are done and nothing is active; false on timeout. */
static bool wait_done(bench *b, int done, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (harness_now() < end) {
    if (!proc_running(&b->coord))
      return false;
    if (history_done(b) >= done && !exists(b, "plan/active"))
      return true;
    harness_sleep_ms(20);
  }
  return false;
}

static void fail_run(bench *b, const char *what) {
  fprintf(stderr, "bench_coordinator (%s): %s\n", b->mode, what);
  file_tail(b->coord.log, 40);
  exit(1);
}

/* The registered nodes' acks: in stream mode the coordinator waits for
 * every alive host in the table to ack a pending version (every writer
 * must route to the pending owner before the cutover), so one watch on
 * `version` acks for all of them, in txns of 100. Its writes are counted
 * so that etcd's figures can be read without them. */
typedef struct acker {
  bench *b;
  ring_watch *w;
  _Atomic uint64_t txns, bytes;
} acker;

static int on_version_ack(void *ud, const ring_event *ev, uint32_t n, int64_t rev, bool compacted) {
  (void)rev;
  (void)compacted;
  acker *k = ud;
  enum { BATCH = 100 };
  char keys[BATCH][64];
  ring_op ops[BATCH];
  for (uint32_t e = 0; e < n; e++) {
    if (ev[e].type != RING_EVENT_PUT)
      continue;
    const char *v = (const char *)ev[e].kv.value;
    size_t vl = ev[e].kv.value_len;
    for (uint32_t i = 0; i < k->b->o.nodes;) {
      uint32_t j = 0;
      for (; j < BATCH && i < k->b->o.nodes; j++, i++) {
        snprintf(keys[j], sizeof keys[j], PREFIX "acks/n%u", i);
        ops[j] = (ring_op){RING_OP_PUT, keys[j], strlen(keys[j]), v, vl, 0, false};
        atomic_fetch_add(&k->bytes, vl);
      }
      ring_error err;
      if (ring_etcd_txn(k->b->c, NULL, 0, ops, j, NULL, 0, NULL, &err) != RING_OK)
        fprintf(stderr, "bench_coordinator: acks: %s\n", err.message);
      atomic_fetch_add(&k->txns, 1);
    }
  }
  return 0;
}

static void acker_start(acker *k, bench *b) {
  memset(k, 0, sizeof *k);
  k->b = b;
  const char *key = PREFIX "version";
  ring_error err;
  if (ring_etcd_watch(b->c, key, strlen(key), false, 0, on_version_ack, k, &k->w, &err) != RING_OK)
    die("the acks' watch", &err);
}

/* ------------------------------------------------------- 4. one join, watched */

/* What the watch on the cluster prefix saw during the join. */
typedef struct seen {
  pthread_mutex_t mu;
  double t0;                     /* the join's start */
  double proposed, active, done; /* seconds after t0; NAN until seen */
  double first_version, last_version;
  int versions;
  double table_bytes, delta_bytes; /* values put under tables/ and deltas/ */
  int tables, deltas;
} seen;

/* Whether the watch has seen the run's end. */
static bool saw_done(seen *s) {
  pthread_mutex_lock(&s->mu);
  bool done = !isnan(s->done);
  pthread_mutex_unlock(&s->mu);
  return done;
}

static bool has_prefix(const ring_kv *kv, const char *what) {
  size_t n = strlen(PREFIX) + strlen(what);
  char want[256];
  snprintf(want, sizeof want, PREFIX "%s", what);
  return kv->key_len >= n && memcmp(kv->key, want, n) == 0;
}

static int on_events(void *ud, const ring_event *ev, uint32_t n, int64_t rev, bool compacted) {
  (void)rev;
  (void)compacted;
  seen *s = ud;
  double now = harness_now() - s->t0;
  pthread_mutex_lock(&s->mu);
  for (uint32_t i = 0; i < n; i++) {
    const ring_kv *kv = &ev[i].kv;
    if (ev[i].type != RING_EVENT_PUT)
      continue;
    if (has_prefix(kv, "plan/proposed") && isnan(s->proposed))
      s->proposed = now;
    else if (has_prefix(kv, "plan/active") && isnan(s->active))
      s->active = now;
    else if (has_prefix(kv, "plan/history/") && isnan(s->done) && kv->value &&
             strstr((char *)kv->value, "\"state\":\"done\""))
      s->done = now;
    else if (has_prefix(kv, "tables/"))
      s->tables++, s->table_bytes += (double)kv->value_len;
    else if (has_prefix(kv, "deltas/"))
      s->deltas++, s->delta_bytes += (double)kv->value_len;
    else if (has_prefix(kv, "version") && kv->key_len == strlen(PREFIX "version")) {
      if (s->versions++ == 0)
        s->first_version = now;
      s->last_version = now;
    }
  }
  pthread_mutex_unlock(&s->mu);
  return 0;
}

/* The newest history entry's figures: moves, lower bound, waves. */
static void history_figures(bench *b, double *moves, double *bound, double *waves) {
  const char *key = PREFIX "plan/history/";
  ring_range_opts ro = {.prefix = true};
  ring_kvs kv;
  ring_error err;
  *moves = *bound = *waves = NAN;
  if (ring_etcd_range(b->c, key, strlen(key), &ro, &kv, &err) != RING_OK)
    die("reading history", &err);
  double newest = -1;
  for (uint32_t i = 0; i < kv.n; i++) {
    const char *v = (char *)kv.kvs[i].value;
    const char *p;
    double m = NAN, lb = NAN, w = NAN;
    if ((p = strstr(v, "\"moves_total\":")))
      m = strtod(p + 14, NULL);
    if ((p = strstr(v, "\"lower_bound\":")))
      lb = strtod(p + 14, NULL);
    if ((p = strstr(v, "\"waves\":")))
      w = strtod(p + 8, NULL);
    if ((double)kv.kvs[i].mod_revision > newest && strstr(v, "\"state\":\"done\"")) {
      newest = (double)kv.kvs[i].mod_revision;
      *moves = m, *bound = lb, *waves = w;
    }
  }
  ring_kvs_clear(&kv);
}

static const char *mb(double bytes, char *buf, size_t cap) {
  if (bytes >= 1e6)
    snprintf(buf, cap, "%.2f MB", bytes / 1e6);
  else
    snprintf(buf, cap, "%.1f kB", bytes / 1e3);
  return buf;
}

static void run_mode(const options *o, const char *mode) {
  bench b;
  memset(&b, 0, sizeof b);
  b.o = *o;
  b.mode = mode;
  snprintf(b.dir, sizeof b.dir, "/tmp/ringkeeper-bench-XXXXXX");
  if (mkdtemp(b.dir) == NULL)
    die("mkdtemp", NULL);
  etcd_cluster_start(&b.etcd, 1, NULL);
  snprintf(b.etcd_hostport, sizeof b.etcd_hostport, "127.0.0.1:%d", b.etcd.m[0].client_port);
  ring_etcd_opts eo = {.endpoints = b.etcd.endpoints, .timeout_ms = 30000};
  ring_error err;
  if (ring_etcd_open(&eo, &b.c, &err) != RING_OK)
    die("etcd client", &err);

  /* setup: first placement with the throttle off, one cutover per wave */
  put_config(&b, "none", 0, 0);
  double t = harness_now();
  register_nodes(&b);
  double t_register = harness_now() - t;
  t = harness_now();
  start_coordinator(&b);
  if (!wait_done(&b, 1, 1800))
    fail_run(&b, "the first placement did not finish");
  double t_first = harness_now() - t;
  printf("mode %s: setup: %u alive keys in %.2f s; first placement (throttle off) %.2f s\n", mode,
         o->nodes, t_register, t_first);

  /* the throttle and mode under test; the coordinator reads config each step */
  put_config(&b, mode, o->per_node, o->per_wave);
  acker ack;
  bool acking = strcmp(mode, "stream") == 0;
  if (acking)
    acker_start(&ack, &b);
  if (!HARNESS_WAIT(config_heard(&b, mode, o->per_node, o->per_wave), 30))
    fail_run(&b, "the coordinator did not read the throttle under test");

  seen s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.mu, NULL);
  s.proposed = s.active = s.done = NAN;
  ring_watch *w;
  const char *prefix = PREFIX;
  counters before = read_counters(b.listen, b.etcd_hostport);
  s.t0 = harness_now();
  if (ring_etcd_watch(b.c, prefix, strlen(prefix), true, 0, on_events, &s, &w, &err) != RING_OK)
    die("watch", &err);
  char id[32];
  snprintf(id, sizeof id, "n%u", o->nodes);
  char zone[16];
  snprintf(zone, sizeof zone, "z%u", o->nodes % o->zones);
  fake_agent joiner;
  fake_agent_opts fo = {.cluster = CLUSTER, .id = id, .zone = zone, .ttl_s = 10};
  pthread_mutex_lock(&s.mu);
  s.t0 = harness_now(); /* the clock starts at the join */
  pthread_mutex_unlock(&s.mu);
  if (fake_agent_start(&joiner, b.c, &fo, &err) != RING_OK)
    die("the joining agent", &err);
  bool ok = wait_done(&b, 2, 900);
  /* the last events reach the watch */
  ok = ok && HARNESS_WAIT(saw_done(&s), 10);
  counters after = read_counters(b.listen, b.etcd_hostport);
  ring_watch_cancel(w);
  if (acking)
    ring_watch_cancel(ack.w);
  if (!ok)
    fail_run(&b, "the join did not finish");

  double moves, bound, waves;
  history_figures(&b, &moves, &bound, &waves);
  double pubs = after.publishes - before.publishes;
  double per = waves; /* ring_coordinator_run_waves is the active run's, a gauge */
  char b1[32], b2[32], b3[32], b4[32];
  printf("  join of %s (%s): %.0f moves (lower bound %.0f) in %.0f waves; %d versions\n", id, zone,
         moves, bound, waves, s.versions);
  /* with auto-apply the coordinator writes plan/active directly, no proposal */
  printf("    alive -> plan/proposed      %8.1f ms%s\n", s.proposed * 1e3,
         isnan(s.proposed) ? " (not written: auto-apply goes straight to plan/active)" : "");
  printf("    alive -> plan/active        %8.1f ms\n", s.active * 1e3);
  printf("    alive -> first version      %8.1f ms\n", s.first_version * 1e3);
  printf("    alive -> history done       %8.1f ms  (%.1f ms per wave)\n", s.done * 1e3,
         per > 0 ? (s.done - s.active) * 1e3 / per : NAN);
  printf("  coordinator: %.0f publishes, %s published (%s per wave), %.0f etcd requests "
         "(%.1f per wave), %.0f errors\n",
         pubs, mb(after.publish_bytes - before.publish_bytes, b1, sizeof b1),
         mb(per > 0 ? (after.publish_bytes - before.publish_bytes) / per : 0, b2, sizeof b2),
         after.etcd_requests - before.etcd_requests,
         per > 0 ? (after.etcd_requests - before.etcd_requests) / per : NAN,
         after.errors - before.errors);
  printf("  etcd (all clients): %s put (%s per wave), WAL %s, %.0f puts, %.0f txns, "
         "%.0f ranges, %.0f gRPC calls, %.0f raft proposals\n",
         mb(after.put_bytes - before.put_bytes, b1, sizeof b1),
         mb(per > 0 ? (after.put_bytes - before.put_bytes) / per : 0, b2, sizeof b2),
         mb(after.wal_bytes - before.wal_bytes, b3, sizeof b3), after.puts - before.puts,
         after.txns - before.txns, after.ranges - before.ranges,
         after.grpc_calls - before.grpc_calls, after.proposals - before.proposals);
  if (acking)
    printf("  of which the registered nodes' acks: %llu txns, %s\n",
           (unsigned long long)atomic_load(&ack.txns),
           mb((double)atomic_load(&ack.bytes), b1, sizeof b1));
  printf("  values: %d tables/ (%s each), %d deltas/ (%s each)\n", s.tables,
         mb(s.tables ? s.table_bytes / s.tables : 0, b1, sizeof b1), s.deltas,
         mb(s.deltas ? s.delta_bytes / s.deltas : 0, b4, sizeof b4));
  fflush(stdout);

  fake_agent_free(&joiner);
  pthread_mutex_destroy(&s.mu);
  proc_term(&b.coord, 10);
  proc_kill(&b.coord);
  ring_keeper_stop(b.keeper);
  ring_etcd_close(b.c);
  etcd_cluster_stop(&b.etcd);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", b.dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", b.dir);
}

/* ------------------------------------------------------------------ 5. main */

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  options o = parse_options(argc, argv);
  if (o.coordinator == NULL) {
    printf("bench_coordinator: built without ring-coordinator (pass --coordinator PATH)\n");
    return 0;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  printf("bench_coordinator: %u nodes in %u zones, T %u, R 3; throttle %u moves per node, %u per "
         "wave\n",
         o.nodes, o.zones, o.tokens, o.per_node, o.per_wave);
  if (o.none)
    run_mode(&o, "none");
  if (o.stream)
    run_mode(&o, "stream");
  curl_global_cleanup();
  return 0;
}
