/*
 * coord_env.h: the world of one coordinator acceptance test: its own etcd,
 * ring-coordinator processes, fake agents, ringctl runs, and readers of
 * what the coordinator wrote (version, tables, node records, plans, runs).
 * Every wait is bounded by a deadline. A test that fails shows the tail of
 * each coordinator's log and keeps the log directory (so does every test
 * when RING_TEST_KEEP_LOGS is set).
 *
 * Sections: the environment; config; coordinators; agents; ringctl;
 * reading etcd; runs and history; tables; waiting.
 *
 * Values are read with cJSON and written as proto/etcd.md spells them,
 * independently of the daemon's codecs.
 */
#ifndef RING_COORD_ENV_H
#define RING_COORD_ENV_H

#include "etcd_harness.h"
#include "proc_harness.h"
#include "check_main.h"
#include "etcd_client.h"
#include "fake_agent.h"
#include "ring.h"
#include "ring_etcd.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#ifndef RING_COORDINATOR_BIN
#error "RING_COORDINATOR_BIN: the ring-coordinator binary (tests/coordinator/CMakeLists.txt)"
#endif
#ifndef RINGCTL_BIN
#error "RINGCTL_BIN: the ringctl binary (tests/coordinator/CMakeLists.txt)"
#endif

#define ENV_CLUSTER "ck"
#define ENV_PREFIX "/ringkeeper/" ENV_CLUSTER "/"
#define ENV_COORDS 3
#define ENV_AGENTS 112 /* test_coord_versions runs 101 */
#define RK_KEY_MAX_TEST 256

/* ------------------------------------------------------- the environment */

typedef struct coord_env {
  etcd_cluster etcd;
  ring_etcd *c;
  char dir[128];                 /* logs and plan files */
  proc coord[ENV_COORDS];        /* ring-coordinator instances */
  char coord_id[ENV_COORDS][16]; /* their --id */
  char listen[ENV_COORDS][32];   /* their --listen, 127.0.0.1:<port> */
  fake_agent agent[ENV_AGENTS];
  bool agent_used[ENV_AGENTS];
  bool passed; /* set by env_pass() at a test's end */
} coord_env;

static coord_env env;

/* Checked fixture: etcd, a client and a log directory per test. */
static void env_setup(void) {
  memset(&env, 0, sizeof env);
  etcd_cluster_start(&env.etcd, 1, NULL);
  env.c = test_client(env.etcd.endpoints, 5000, 0);
  snprintf(env.dir, sizeof env.dir, "/tmp/ringkeeper-coord-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(env.dir));
}

/* A test's last line: what it checked held. */
static inline void env_pass(void) { env.passed = true; }

static void env_teardown(void) {
  if (!env.passed)
    for (int i = 0; i < ENV_COORDS; i++)
      if (env.coord_id[i][0])
        file_tail(env.coord[i].log, 80);
  for (int i = 0; i < ENV_COORDS; i++)
    if (env.coord_id[i][0])
      proc_kill(&env.coord[i]);
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.agent_used[i])
      fake_agent_free(&env.agent[i]);
  ring_etcd_close(env.c);
  etcd_cluster_stop(&env.etcd);
  if (env.passed && getenv("RING_TEST_KEEP_LOGS") == NULL) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", env.dir);
    if (system(cmd) != 0)
      fprintf(stderr, "could not remove %s\n", env.dir);
  } else {
    fprintf(stderr, "logs kept in %s\n", env.dir);
  }
}

/* One test and its timeout. */
typedef struct env_test {
  const TTest *test;
  int timeout_s;
} env_test;

/* Runs each test in a case of its own, with the fixture (its own etcd),
 * nofork (fixtures hold processes); returns the exit status. */
static inline int env_main(const char *suite, const env_test *tests, int n) {
  Suite *s = suite_create(suite);
  for (int i = 0; i < n; i++) {
    TCase *tc = tcase_create(tests[i].test->name);
    tcase_set_timeout(tc, tests[i].timeout_s);
    tcase_add_checked_fixture(tc, env_setup, env_teardown);
    tcase_add_test(tc, tests[i].test);
    suite_add_tcase(s, tc);
  }
  return run_suite_as(s, 1);
}

/* ------------------------------------------------------------------ config */

typedef struct env_config {
  uint32_t tokens, replicas;
  const char *failure_domain; /* NULL: "zone" */
  const char *migration;      /* NULL: "stream" */
  uint64_t down_after_ms;     /* 0: 1500 */
  bool auto_apply;
  uint32_t per_node, per_domain, per_wave; /* throttle; 0 = no limit */
  uint32_t keep_versions;                  /* 0: 64, so a test can read every version of a run */
  uint32_t keep_plans;                     /* 0: 32 */
} env_config;

/* The config value of proto/etcd.md; malloc()'ed. */
static inline char *env_config_json(const env_config *k) {
  char *json = NULL;
  int n =
      asprintf(&json,
               "{\"format\":\"ringkeeper.config.v1\",\"tokens\":%u,\"replicas\":%u,\"seed\":0,"
               "\"failure_domain\":\"%s\",\"best_effort\":\"\",\"migration\":\"%s\","
               "\"down_after_ms\":%llu,\"auto_apply\":%s,"
               "\"throttle\":{\"moves_per_node\":%u,\"moves_per_domain\":%u,\"moves_per_wave\":%u,"
               "\"bytes_per_sec\":0},\"retention\":{\"versions\":%u,\"plans\":%u}}",
               k->tokens, k->replicas, k->failure_domain ? k->failure_domain : "zone",
               k->migration ? k->migration : "stream",
               (unsigned long long)(k->down_after_ms ? k->down_after_ms : 1500),
               k->auto_apply ? "true" : "false", k->per_node, k->per_domain, k->per_wave,
               k->keep_versions ? k->keep_versions : 64, k->keep_plans ? k->keep_plans : 32);
  ck_assert_int_gt(n, 0);
  return json;
}

/* Puts a raw value at <prefix><what>. */
static inline void env_put(const char *what, const char *value) {
  char key[RK_KEY_MAX_TEST];
  snprintf(key, sizeof key, ENV_PREFIX "%s", what);
  ring_error err;
  ck_assert_msg(ring_etcd_put(env.c, key, strlen(key), value, strlen(value), 0, NULL, NULL, &err) ==
                    RING_OK,
                "put %s: %s", key, err.message);
}

/* Creates (or rewrites) the cluster's config. */
static inline void env_config_put(const env_config *k) {
  char *json = env_config_json(k);
  env_put("config", json);
  free(json);
}

/* ------------------------------------------------------------ coordinators */

/* /healthz of coordinator i: the HTTP status (0: no answer) and the body
 * into body[cap]. */
static inline long env_healthz(int i, char *body, size_t cap) {
  char url[64], *b = NULL;
  snprintf(url, sizeof url, "http://%.31s/healthz", env.listen[i]);
  long st = http_get(url, &b);
  snprintf(body, cap, "%s", b ? b : "");
  free(b);
  return st;
}

/* Starts coordinator i with --id id, --listen on a free port, a 2 s lease,
 * debug logs and `extra` flags (space-separated, may be NULL); its log goes
 * to <dir>/<id>.log. Waits until its HTTP listener answers. */
static inline void env_coord_start(int i, const char *id, const char *extra) {
  snprintf(env.coord_id[i], sizeof env.coord_id[i], "%s", id);
  snprintf(env.listen[i], sizeof env.listen[i], "127.0.0.1:%d", harness_free_port());
  char log[200], line[1024], *argv[PROC_ARGS_MAX];
  snprintf(log, sizeof log, "%s/%s.log", env.dir, id);
  snprintf(line, sizeof line,
           "%s --endpoints %s --cluster " ENV_CLUSTER
           " --id %s --listen %.31s --lease-ttl 2s --log-level debug --tick 200ms %s",
           RING_COORDINATOR_BIN, env.etcd.endpoints, id, env.listen[i], extra ? extra : "");
  int a = 0;
  for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok && a < PROC_ARGS_MAX - 1;
       tok = strtok_r(NULL, " ", &save))
    argv[a++] = tok;
  argv[a] = NULL;
  ck_assert_int_eq(proc_spawn(&env.coord[i], log, argv), 0);
  char body[256];
  double end = harness_now() + 10;
  while (env_healthz(i, body, sizeof body) == 0) {
    ck_assert_msg(proc_running(&env.coord[i]), "ring-coordinator %s exited at start; see %s", id,
                  log);
    ck_assert_msg(harness_now() < end, "ring-coordinator %s does not listen on %s", id,
                  env.listen[i]);
    harness_sleep_ms(50);
  }
}

/* A metric of coordinator i (NaN when absent or not answering). */
static inline double env_metric(int i, const char *name, const char *labels) {
  return metric_get(env.listen[i], name, labels);
}

/* ------------------------------------------------------------------ agents */

/* Starts fake agent `id` in `zone` (weight 1 unless given) with a 2 s
 * lease; hold: its progress waits for fake_agent_hold(false). */
static inline fake_agent *env_agent_w(const char *id, const char *zone, double weight, bool hold) {
  int i = 0;
  while (i < ENV_AGENTS && env.agent_used[i])
    i++;
  ck_assert_int_lt(i, ENV_AGENTS);
  fake_agent_opts o = {
      .cluster = ENV_CLUSTER, .id = id, .zone = zone, .weight = weight, .ttl_s = 2, .hold = hold};
  ring_error err;
  ck_assert_msg(fake_agent_start(&env.agent[i], env.c, &o, &err) == RING_OK, "agent %s: %s", id,
                err.message);
  env.agent_used[i] = true;
  return &env.agent[i];
}

static inline fake_agent *env_agent(const char *id, const char *zone) {
  return env_agent_w(id, zone, 1.0, false);
}

static inline fake_agent *env_agent_find(const char *id) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.agent_used[i] && strcmp(env.agent[i].id, id) == 0)
      return &env.agent[i];
  ck_abort_msg("no agent %s", id);
  return NULL;
}

/* Holds (or releases) every agent's progress. */
static inline void env_hold_all(bool hold) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.agent_used[i] && env.agent[i].watcher)
      ck_assert_int_eq(fake_agent_hold(&env.agent[i], hold), RING_OK);
}

/* ----------------------------------------------------------------- ringctl */

/* Runs `ringctl --endpoints E --cluster C ARGS` (args printf-formatted,
 * space-separated); output into out. Returns the exit code; a run that
 * takes over 60 s fails the test. */
static inline int env_ringctl(char *out, size_t cap, const char *fmt, ...) {
  char args[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  char local[8192];
  if (out == NULL)
    out = local, cap = sizeof local;
  int rc = proc_runf(60, out, cap, "%s --endpoints %s --cluster " ENV_CLUSTER " %s", RINGCTL_BIN,
                     env.etcd.endpoints, args);
  ck_assert_msg(rc >= 0, "ringctl %s did not finish in 60 s", args);
  fprintf(stderr, "ringctl %s -> %d%s%.*s\n", args, rc, *out ? ": " : "", 400, out);
  return rc;
}

/* ------------------------------------------------------------ reading etcd */

/* The value of <prefix><what>, malloc()'ed, NULL when absent; *mod (if not
 * NULL) its mod revision (0 when absent). */
static inline char *env_get(const char *what, int64_t *mod) {
  char key[RK_KEY_MAX_TEST];
  snprintf(key, sizeof key, ENV_PREFIX "%s", what);
  ring_kvs kv;
  ring_error err;
  ck_assert_msg(ring_etcd_range(env.c, key, strlen(key), NULL, &kv, &err) == RING_OK, "%s: %s", key,
                err.message);
  char *v = kv.n ? strdup((char *)kv.kvs[0].value) : NULL;
  if (mod)
    *mod = kv.n ? kv.kvs[0].mod_revision : 0;
  ring_kvs_clear(&kv);
  return v;
}

static inline bool env_exists(const char *what) {
  char *v = env_get(what, NULL);
  free(v);
  return v != NULL;
}

/* <prefix><what> parsed as JSON (cJSON_Delete it), NULL when absent; a
 * value that is not JSON fails the test. */
static inline cJSON *env_json(const char *what) {
  char *v = env_get(what, NULL);
  if (v == NULL)
    return NULL;
  cJSON *o = cJSON_Parse(v);
  ck_assert_msg(o != NULL, "%s is not JSON: %.200s", what, v);
  free(v);
  return o;
}

/* Small cJSON readers: a missing field reads as "" / NaN. */
static inline const char *jstr(const cJSON *o, const char *name) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsString(f) ? f->valuestring : "";
}
static inline double jnum(const cJSON *o, const char *name) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(f) ? f->valuedouble : NAN;
}
static inline const cJSON *jobj(const cJSON *o, const char *name) {
  return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* The `version` key (0 when absent). */
static inline uint64_t env_version(void) {
  char *v = env_get("version", NULL);
  uint64_t n = v ? strtoull(v, NULL, 10) : 0;
  free(v);
  return n;
}

/* acks/<id> (0 when absent). */
static inline uint64_t env_ack(const char *id) {
  char what[96];
  snprintf(what, sizeof what, "acks/%s", id);
  char *v = env_get(what, NULL);
  uint64_t n = v ? strtoull(v, NULL, 10) : 0;
  free(v);
  return n;
}

/* nodes/<id>: state, desired and weight; false when there is no record. */
typedef struct env_node {
  char state[16], desired[16];
  char addr[64];
  double weight;
  double lost_ms;
} env_node;

static inline bool env_node_read(const char *id, env_node *out) {
  char what[96];
  snprintf(what, sizeof what, "nodes/%s", id);
  cJSON *o = env_json(what);
  if (o == NULL)
    return false;
  ck_assert_str_eq(jstr(o, "format"), "ringkeeper.node.v1");
  snprintf(out->state, sizeof out->state, "%s", jstr(o, "state"));
  snprintf(out->desired, sizeof out->desired, "%s", jstr(o, "desired"));
  snprintf(out->addr, sizeof out->addr, "%s", jstr(o, "addr"));
  out->weight = jnum(o, "weight");
  out->lost_ms = jnum(o, "lost_ms");
  cJSON_Delete(o);
  return true;
}

/* True when nodes/<id> exists with this state. */
static inline bool env_node_is(const char *id, const char *state) {
  env_node n;
  return env_node_read(id, &n) && strcmp(n.state, state) == 0;
}

/* The leader key's id ("" when nobody leads). */
static inline void env_leader(char id[64]) {
  cJSON *o = env_json("leader");
  snprintf(id, 64, "%s", o ? jstr(o, "id") : "");
  if (o)
    ck_assert_str_eq(jstr(o, "format"), "ringkeeper.leader.v1");
  cJSON_Delete(o);
}

/* Index of the coordinator whose id leads, -1 when none of ours. */
static inline int env_leader_index(void) {
  char id[64];
  env_leader(id);
  for (int i = 0; i < ENV_COORDS; i++)
    if (env.coord_id[i][0] && strcmp(env.coord_id[i], id) == 0)
      return i;
  return -1;
}

/* ------------------------------------------------------ runs and history */

/* A run (plan/active or plan/history/<id>) as the tests read it. */
typedef struct env_run {
  char id[24];
  char state[16];
  char phase[16];
  double base_version, moves_total, lower_bound, waves, lost;
  double moves_done, wave, cursor_version, finished_ms;
} env_run;

static inline void env_run_from(const cJSON *o, env_run *r) {
  memset(r, 0, sizeof *r);
  ck_assert_str_eq(jstr(o, "format"), "ringkeeper.run.v1");
  const cJSON *p = jobj(o, "plan"), *c = jobj(o, "cursor");
  snprintf(r->id, sizeof r->id, "%s", jstr(p, "id"));
  snprintf(r->state, sizeof r->state, "%s", jstr(o, "state"));
  snprintf(r->phase, sizeof r->phase, "%s", jstr(c, "phase"));
  r->base_version = jnum(p, "base_version");
  r->moves_total = jnum(p, "moves_total");
  r->lower_bound = jnum(p, "lower_bound");
  r->waves = jnum(p, "waves");
  r->lost = jnum(p, "lost");
  r->moves_done = jnum(c, "moves_done");
  r->wave = jnum(c, "wave");
  r->cursor_version = jnum(c, "version");
  r->finished_ms = jnum(o, "finished_ms"); /* when it went to history; else when last updated */
  if (isnan(r->finished_ms))
    r->finished_ms = jnum(o, "updated_ms");
}

/* plan/active; false when there is none. */
static inline bool env_active(env_run *r) {
  cJSON *o = env_json("plan/active");
  if (o == NULL)
    return false;
  env_run_from(o, r);
  cJSON_Delete(o);
  return true;
}

/* Every plan/history/ entry, in key order (at most max). Returns the count. */
static inline int env_history(env_run *out, int max) {
  const char *key = ENV_PREFIX "plan/history/";
  ring_range_opts ro = {.prefix = true};
  ring_kvs kv;
  ring_error err;
  ck_assert_msg(ring_etcd_range(env.c, key, strlen(key), &ro, &kv, &err) == RING_OK, "%s",
                err.message);
  int n = 0;
  for (uint32_t i = 0; i < kv.n && n < max; i++) {
    cJSON *o = cJSON_Parse((char *)kv.kvs[i].value);
    ck_assert_msg(o != NULL, "%s is not JSON", (char *)kv.kvs[i].key);
    env_run_from(o, &out[n++]);
    cJSON_Delete(o);
  }
  ring_kvs_clear(&kv);
  return n;
}

/* History entries in `state`; *last (if not NULL) gets the one that
 * finished last. */
static inline int env_history_count(const char *state, env_run *last) {
  env_run h[64];
  int n = env_history(h, 64), k = 0;
  double best = -1;
  for (int i = 0; i < n; i++)
    if (strcmp(h[i].state, state) == 0) {
      k++;
      if (last && h[i].finished_ms > best) {
        best = h[i].finished_ms;
        *last = h[i];
      }
    }
  return k;
}

/* ------------------------------------------------------------------ tables */

/* tables/<v> decoded (v 0: the current version); NULL when absent. */
static inline ring_table *env_table(uint64_t v) {
  if (v == 0)
    v = env_version();
  char what[64];
  snprintf(what, sizeof what, "tables/%llu", (unsigned long long)v);
  char *j = env_get(what, NULL);
  if (j == NULL)
    return NULL;
  ring_table *t = NULL;
  ring_error err;
  ck_assert_msg(ring_table_decode(j, strlen(j), &t, &err) == RING_OK, "tables/%llu: %s",
                (unsigned long long)v, err.message);
  free(j);
  ck_assert_uint_eq(ring_table_version(t), v);
  return t;
}

/* ring_table_verify on the current table is clean; returns the table. */
static inline ring_table *env_verify_clean(void) {
  ring_table *t = env_table(0);
  ck_assert_msg(t != NULL, "no table at version %llu", (unsigned long long)env_version());
  char *report = NULL;
  int n = ring_table_verify(t, NULL, &report);
  ck_assert_msg(n == 0, "verify of version %llu: %d violations:\n%s",
                (unsigned long long)ring_table_version(t), n, report ? report : "");
  free(report);
  return t;
}

/* Token-replicas of node `id` in t (0 when it is not in the table). */
static inline uint32_t env_replicas(const ring_table *t, const char *id) {
  int i = ring_table_find_node(t, id);
  return i < 0 ? 0 : ring_table_node_replicas(t, (uint16_t)i);
}

/* Owner ids of (token, slot) in t ("" for none). */
static inline const char *env_owner(const ring_table *t, uint32_t token, uint32_t slot) {
  uint16_t o = ring_table_owner(t, token, slot);
  return o == RING_NODE_NONE ? "" : ring_table_node_id(t, o);
}
static inline const char *env_pending(const ring_table *t, uint32_t token, uint32_t slot) {
  uint16_t o = ring_table_pending(t, token, slot);
  return o == RING_NODE_NONE ? "" : ring_table_node_id(t, o);
}

/* Replays versions from..to (each must exist) and checks how the owners
 * moved: every owner change from v to v+1 goes to the node pending on that
 * slot in v when `stream` (new owner first, cutover after), and no slot
 * changes owner twice. Returns the number of owner changes. */
static inline uint32_t env_replay(uint64_t from, uint64_t to, bool stream) {
  ring_table *prev = env_table(from);
  ck_assert_msg(prev != NULL, "tables/%llu is gone", (unsigned long long)from);
  const uint32_t T = ring_table_tokens(prev), R = ring_table_replicas(prev);
  uint8_t *changed = calloc((size_t)T * R, 1);
  uint32_t changes = 0;
  for (uint64_t v = from + 1; v <= to; v++) {
    ring_table *t = env_table(v);
    ck_assert_msg(t != NULL, "tables/%llu is gone", (unsigned long long)v);
    for (uint32_t tok = 0; tok < T; tok++)
      for (uint32_t s = 0; s < R; s++) {
        const char *a = env_owner(prev, tok, s), *b = env_owner(t, tok, s);
        if (strcmp(a, b) == 0)
          continue;
        changes++;
        ck_assert_msg(!changed[tok * R + s], "token %u slot %u changed owner twice (v%llu: %s)",
                      tok, s, (unsigned long long)v, b);
        changed[tok * R + s] = 1;
        if (stream)
          ck_assert_msg(strcmp(env_pending(prev, tok, s), b) == 0,
                        "v%llu: token %u slot %u went %s -> %s without being pending on %s "
                        "in v%llu",
                        (unsigned long long)v, tok, s, a, b, b, (unsigned long long)v - 1);
      }
    ring_table_free(prev);
    prev = t;
  }
  ring_table_free(prev);
  free(changed);
  return changes;
}

/* ----------------------------------------------------------------- waiting */

/* Evaluates cond every 50 ms until it holds; after timeout_s the test
 * fails with the message. */
#define WAIT_UNTIL(cond, timeout_s, ...)                                                           \
  do {                                                                                             \
    double wait_end_ = harness_now() + (timeout_s);                                                \
    while (!(cond)) {                                                                              \
      ck_assert_msg(harness_now() < wait_end_, __VA_ARGS__);                                       \
      harness_sleep_ms(50);                                                                        \
    }                                                                                              \
  } while (0)

/* Waits until `done` runs are in history as done and nothing is active or
 * proposed; returns the run that finished last. */
static inline env_run env_wait_done(int done, double timeout_s) {
  env_run last, a;
  memset(&last, 0, sizeof last);
  WAIT_UNTIL(env_history_count("done", &last) >= done && !env_active(&a) &&
                 !env_exists("plan/proposed"),
             timeout_s, "no run #%d done in %.0f s (version %llu, history done %d)", done,
             (double)timeout_s, (unsigned long long)env_version(), env_history_count("done", NULL));
  return last;
}

/* Every running agent has acked at least v. */
static inline bool env_all_acked(uint64_t v) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.agent_used[i] && env.agent[i].watcher && env_ack(env.agent[i].id) < v)
      return false;
  return true;
}

/* ---------------------------------------------------------- bootstrapping */

/* Writes config k, starts agents a1..a<n> in zones z0..z<zones-1> (round
 * robin) and coordinators coord-a, coord-b, ... with `extra` flags, and
 * waits for the first placement to be done and acked. Returns its version. */
static inline uint64_t env_bootstrap(const env_config *k, int agents, int zones, int coords,
                                     const char *extra) {
  env_config_put(k);
  for (int i = 1; i <= agents; i++) {
    char id[16], zone[16];
    snprintf(id, sizeof id, "a%d", i);
    snprintf(zone, sizeof zone, "z%d", (i - 1) % zones);
    env_agent(id, zone);
  }
  for (int i = 0; i < coords; i++) {
    char id[16];
    snprintf(id, sizeof id, "coord-%c", 'a' + i);
    env_coord_start(i, id, extra);
  }
  env_wait_done(1, 60);
  uint64_t v = env_version();
  ck_assert_uint_gt(v, 0);
  WAIT_UNTIL(env_all_acked(v), 10, "not every agent acked version %llu", (unsigned long long)v);
  return v;
}

/* Changes the throttle in config (the next plans use it). */
static inline void env_throttle(env_config *k, uint32_t per_node, uint32_t per_wave) {
  k->per_node = per_node;
  k->per_wave = per_wave;
  env_config_put(k);
}

/* ------------------------------------------------------- weighted targets */

/* The weighted target of every node of t (DESIGN.md, invariant 2): serving
 * nodes (joining, active) share T*R by weight; a hard domain holds at most T
 * token-replicas and its excess goes to the other domains by weight; inside
 * a domain, nodes share by weight. target[i] is 0 for nodes that serve not. */
static inline void env_targets(const ring_table *t, double *target) {
  const uint32_t n = ring_table_node_count(t), T = ring_table_tokens(t);
  const char *fd = ring_table_failure_domain(t);
  int *dom = calloc(n, sizeof *dom);
  double *dw = calloc(n, sizeof *dw), *share = calloc(n, sizeof *share);
  bool *capped = calloc(n, sizeof *capped);
  for (uint32_t i = 0; i < n; i++) {
    ring_node_state st = ring_table_node_state(t, (uint16_t)i);
    bool serving = st == RING_NODE_ACTIVE || st == RING_NODE_JOINING;
    const char *v = *fd ? ring_table_node_label(t, (uint16_t)i, fd) : NULL;
    dom[i] = (int)i; /* no domain level (or no label): a domain of its own */
    for (uint32_t j = 0; v && j < i; j++) {
      const char *w = ring_table_node_label(t, (uint16_t)j, fd);
      if (w && strcmp(v, w) == 0) {
        dom[i] = dom[j];
        break;
      }
    }
    if (serving)
      dw[dom[i]] += ring_table_node_weight(t, (uint16_t)i);
  }
  double left = (double)T * ring_table_replicas(t);
  for (bool again = true; again;) { /* water-filling: cap domains over T */
    again = false;
    double w = 0;
    for (uint32_t d = 0; d < n; d++)
      w += capped[d] ? 0 : dw[d];
    for (uint32_t d = 0; d < n && w > 0; d++)
      if (!capped[d] && dw[d] > 0 && left * dw[d] / w > T + 1e-9 && *fd) {
        capped[d] = true, share[d] = T, left -= T, again = true;
      }
    if (!again)
      for (uint32_t d = 0; d < n; d++)
        if (!capped[d])
          share[d] = w > 0 ? left * dw[d] / w : 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    ring_node_state st = ring_table_node_state(t, (uint16_t)i);
    bool serving = st == RING_NODE_ACTIVE || st == RING_NODE_JOINING;
    target[i] = serving && dw[dom[i]] > 0
                    ? share[dom[i]] * ring_table_node_weight(t, (uint16_t)i) / dw[dom[i]]
                    : 0;
  }
  free(dom);
  free(dw);
  free(share);
  free(capped);
}

/* Every node of t holds within one token-replica of its weighted target. */
static inline void env_assert_balanced(const ring_table *t) {
  const uint32_t n = ring_table_node_count(t);
  double *target = calloc(n, sizeof *target);
  env_targets(t, target);
  for (uint32_t i = 0; i < n; i++) {
    double have = ring_table_node_replicas(t, (uint16_t)i);
    ck_assert_msg(fabs(have - target[i]) <= 1.0 + 1e-9,
                  "v%llu: %s holds %.0f token-replicas, its weighted target is %.2f",
                  (unsigned long long)ring_table_version(t), ring_table_node_id(t, (uint16_t)i),
                  have, target[i]);
  }
  free(target);
}

/* -------------------------------------------------- recomputing a run's plan */

/* The history entry whose plan id is `id`, as JSON (cJSON_Delete it). */
static inline cJSON *env_history_json(const char *id) {
  const char *key = ENV_PREFIX "plan/history/";
  ring_range_opts ro = {.prefix = true};
  ring_kvs kv;
  ring_error err;
  ck_assert_int_eq(ring_etcd_range(env.c, key, strlen(key), &ro, &kv, &err), RING_OK);
  cJSON *found = NULL;
  for (uint32_t i = 0; i < kv.n && !found; i++) {
    cJSON *o = cJSON_Parse((char *)kv.kvs[i].value);
    if (o && strcmp(jstr(jobj(o, "plan"), "id"), id) == 0)
      found = o;
    else
      cJSON_Delete(o);
  }
  ring_kvs_clear(&kv);
  ck_assert_msg(found != NULL, "no plan %s in history", id);
  return found;
}

/* Recomputes the plan of history entry `id` with libring's planner from
 * its recorded input and base table (proto/plan.md: the document is the
 * planner's input), so a test can look at the moves. *base (NULL for a
 * first placement) and the plan are the caller's to free. */
static inline ring_plan *env_plan_of(const char *id, ring_table **base) {
  cJSON *h = env_history_json(id);
  const cJSON *p = jobj(h, "plan"), *in = jobj(p, "input");
  uint64_t bv = (uint64_t)jnum(p, "base_version");
  *base = bv ? env_table(bv) : NULL;
  ck_assert_msg(bv == 0 || *base != NULL, "base tables/%llu of plan %s is gone",
                (unsigned long long)bv, id);
  const cJSON *nodes = jobj(in, "nodes");
  int n = cJSON_GetArraySize(nodes);
  ring_node_spec *specs = calloc((size_t)n, sizeof *specs);
  const char **keys = calloc((size_t)n * RING_LABELS_MAX, sizeof *keys);
  const char **vals = calloc((size_t)n * RING_LABELS_MAX, sizeof *vals);
  for (int i = 0; i < n; i++) {
    const cJSON *nd = cJSON_GetArrayItem(nodes, i), *l;
    uint32_t k = 0;
    cJSON_ArrayForEach(l, jobj(nd, "labels")) {
      keys[i * RING_LABELS_MAX + k] = l->string;
      vals[i * RING_LABELS_MAX + k] = l->valuestring;
      k++;
    }
    int st = ring_node_state_parse(jstr(nd, "state"));
    ck_assert_int_ge(st, 0);
    specs[i] = (ring_node_spec){jstr(nd, "id"),
                                jstr(nd, "addr"),
                                keys + i * RING_LABELS_MAX,
                                vals + i * RING_LABELS_MAX,
                                k,
                                jnum(nd, "weight"),
                                (ring_node_state)st};
  }
  ring_plan_config cfg = {ENV_CLUSTER,
                          (uint32_t)jnum(in, "tokens"),
                          (uint32_t)jnum(in, "replicas"),
                          (uint64_t)jnum(in, "seed"),
                          jstr(in, "failure_domain"),
                          jstr(in, "best_effort"),
                          (uint32_t)jnum(in, "moves_per_node"),
                          (uint32_t)jnum(in, "moves_per_domain"),
                          (uint32_t)jnum(in, "moves_per_wave"),
                          NULL};
  ring_plan *plan = NULL;
  ring_error err;
  ck_assert_msg(ring_plan_compute(*base, specs, (uint32_t)n, &cfg, &plan, &err) == RING_OK,
                "recomputing plan %s: %s", id, err.message);
  ck_assert_msg(ring_plan_move_count(plan) == (uint32_t)jnum(p, "moves_total"),
                "plan %s recomputed has %u moves, the document says %.0f", id,
                ring_plan_move_count(plan), jnum(p, "moves_total"));
  free(specs);
  free(keys);
  free(vals);
  cJSON_Delete(h);
  return plan;
}

#endif /* RING_COORD_ENV_H */
