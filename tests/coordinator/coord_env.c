/* coord_env.c: the definitions of coord_env.h (see there). */
#include "coord_env.h"
#include "ringx.h"
#include "sizes.h"

coord_env env;

/* Checked fixture: etcd, a client and a log directory per test. */
static void env_setup(void) {
  memset(&env, 0, sizeof env);
  etcd_cluster_start(&env.etcd, 1, NULL);
  env.c = test_client(env.etcd.endpoints, 5000, 0);
  snprintf(env.dir, sizeof env.dir, "/tmp/ringkeeper-coord-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(env.dir));
}

void env_pass(void) { env.passed = true; }

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
  proc_dir_done(env.dir, env.passed, "RING_TEST_KEEP_LOGS");
}

int env_main(const char *suite, const env_test *tests, int n) {
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

char *env_config_json(const env_config *k) {
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

void env_put(const char *what, const char *value) {
  char key[RK_KEY_MAX_TEST];
  snprintf(key, sizeof key, ENV_PREFIX "%s", what);
  ring_error err;
  ck_assert_msg(ring_etcd_put(env.c, key, strlen(key), value, strlen(value), 0, NULL, NULL, &err) ==
                    RING_OK,
                "put %s: %s", key, err.message);
}

void env_config_put(const env_config *k) {
  char *json = env_config_json(k);
  env_put("config", json);
  free(json);
}

long env_healthz(int i, char *body, size_t cap) {
  char url[64], *b = NULL;
  snprintf(url, sizeof url, "http://%.31s/healthz", env.listen[i]);
  long st = http_get(url, &b);
  snprintf(body, cap, "%s", b ? b : "");
  free(b);
  return st;
}

void env_coord_spawn(int i, const char *id, const char *extra) {
  snprintf(env.coord_id[i], sizeof env.coord_id[i], "%s", id);
  snprintf(env.listen[i], sizeof env.listen[i], "127.0.0.1:%d", harness_free_port());
  char log[200], line[1024], *argv[PROC_ARGS_MAX];
  snprintf(log, sizeof log, "%s/%s.log", env.dir, id);
  snprintf(line, sizeof line,
           "%s --endpoints %s --cluster " ENV_CLUSTER
           " --id %s --listen %.31s --lease-ttl 2s --log-level debug --tick 200ms %s",
           env.coord_bin != NULL ? env.coord_bin : RING_COORDINATOR_BIN, env.etcd.endpoints, id,
           env.listen[i], extra ? extra : "");
  int a = 0;
  for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok && a < PROC_ARGS_MAX - 1;
       tok = strtok_r(NULL, " ", &save))
    argv[a++] = tok;
  argv[a] = NULL;
  ck_assert_int_eq(proc_spawn(&env.coord[i], log, argv), 0);
}

void env_coord_start(int i, const char *id, const char *extra) {
  env_coord_spawn(i, id, extra);
  char log[200];
  snprintf(log, sizeof log, "%s/%s.log", env.dir, id);
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

double env_metric(int i, const char *name, const char *labels) {
  return metric_get(env.listen[i], name, labels);
}

fake_agent *env_agent_w(const char *id, const char *zone, double weight, bool hold) {
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

fake_agent *env_agent(const char *id, const char *zone) {
  return env_agent_w(id, zone, 1.0, false);
}

fake_agent *env_agent_find(const char *id) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.agent_used[i] && strcmp(env.agent[i].id, id) == 0)
      return &env.agent[i];
  ck_abort_msg("no agent %s", id);
  return NULL;
}

void env_hold_all(bool hold) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.agent_used[i] && env.agent[i].watcher)
      ck_assert_int_eq(fake_agent_hold(&env.agent[i], hold), RING_OK);
}

int env_ringctl(char *out, size_t cap, const char *fmt, ...) {
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

char *env_get(const char *what, int64_t *mod) {
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

bool env_exists(const char *what) {
  char *v = env_get(what, NULL);
  free(v);
  return v != NULL;
}

cJSON *env_json(const char *what) {
  char *v = env_get(what, NULL);
  if (v == NULL)
    return NULL;
  cJSON *o = cJSON_Parse(v);
  ck_assert_msg(o != NULL, "%s is not JSON: %.200s", what, v);
  free(v);
  return o;
}

const char *jstr(const cJSON *o, const char *name) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsString(f) ? f->valuestring : "";
}

double jnum(const cJSON *o, const char *name) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsNumber(f) ? f->valuedouble : NAN;
}

const cJSON *jobj(const cJSON *o, const char *name) {
  return cJSON_GetObjectItemCaseSensitive(o, name);
}

uint64_t env_version(void) {
  char *v = env_get("version", NULL);
  uint64_t n = v ? strtoull(v, NULL, 10) : 0;
  free(v);
  return n;
}

uint64_t env_ack(const char *id) {
  char what[96];
  snprintf(what, sizeof what, "acks/%s", id);
  char *v = env_get(what, NULL);
  uint64_t n = v ? strtoull(v, NULL, 10) : 0;
  free(v);
  return n;
}

bool env_node_read(const char *id, env_node *out) {
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

bool env_node_is(const char *id, const char *state) {
  env_node n;
  return env_node_read(id, &n) && strcmp(n.state, state) == 0;
}

void env_leader(char id[64]) {
  cJSON *o = env_json("leader");
  snprintf(id, 64, "%s", o ? jstr(o, "id") : "");
  if (o)
    ck_assert_str_eq(jstr(o, "format"), "ringkeeper.leader.v1");
  cJSON_Delete(o);
}

int env_leader_index(void) {
  char id[64];
  env_leader(id);
  for (int i = 0; i < ENV_COORDS; i++)
    if (env.coord_id[i][0] && strcmp(env.coord_id[i], id) == 0)
      return i;
  return -1;
}

void env_run_from(const cJSON *o, env_run *r) {
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

bool env_active(env_run *r) {
  cJSON *o = env_json("plan/active");
  if (o == NULL)
    return false;
  env_run_from(o, r);
  cJSON_Delete(o);
  return true;
}

int env_history(env_run *out, int max) {
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

int env_history_count(const char *state, env_run *last) {
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

ring_table *env_table(uint64_t v) {
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

ring_table *env_verify_clean(void) {
  ring_table *t = env_table(0);
  ck_assert_msg(t != NULL, "no table at version %llu", (unsigned long long)env_version());
  char *report = NULL;
  int n = ring_table_verify(t, NULL, &report);
  ck_assert_msg(n == 0, "verify of version %llu: %d violations:\n%s",
                (unsigned long long)ring_table_version(t), n, report ? report : "");
  free(report);
  return t;
}

uint32_t env_replicas(const ring_table *t, const char *id) {
  int i = ring_table_find_node(t, id);
  return i < 0 ? 0 : ring_table_node_replicas(t, (uint16_t)i);
}

const char *env_owner(const ring_table *t, uint32_t token, uint32_t slot) {
  uint16_t o = ring_table_owner(t, token, slot);
  return o == RING_NODE_NONE ? "" : ring_table_node_id(t, o);
}

const char *env_pending(const ring_table *t, uint32_t token, uint32_t slot) {
  uint16_t o = ring_table_pending(t, token, slot);
  return o == RING_NODE_NONE ? "" : ring_table_node_id(t, o);
}

uint32_t env_replay(uint64_t from, uint64_t to, bool stream) {
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

/* plan/proposed's value, cut to 300 bytes, or "none": for messages. The
 * buffer is static: one message at a time. */
static const char *env_proposed_text(void) {
  static char out[320];
  char *v = env_get("plan/proposed", NULL);
  snprintf(out, sizeof out, "%.300s", v && *v ? v : "none");
  free(v);
  return out;
}

env_run env_wait_done(int done, double timeout_s) {
  env_run last, a;
  memset(&last, 0, sizeof last);
  WAIT_UNTIL(env_history_count("done", &last) >= done && !env_active(&a) &&
                 !env_exists("plan/proposed"),
             timeout_s,
             "no run #%d done in %.0f s (version %llu, history done %d, active %d, proposed %s)",
             done, (double)timeout_s, (unsigned long long)env_version(),
             env_history_count("done", NULL), env_active(&a), env_proposed_text());
  return last;
}

bool env_all_acked(uint64_t v) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.agent_used[i] && env.agent[i].watcher && env_ack(env.agent[i].id) < v)
      return false;
  return true;
}

uint64_t env_bootstrap(const env_config *k, int agents, int zones, int coords, const char *extra) {
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
  if (!k->auto_apply && strstr(extra, "--auto-apply") == NULL) {
    WAIT_UNTIL(env_exists("plan/proposed"), 20, "no plan/proposed for the first placement");
    ck_assert_int_eq(env_ringctl(NULL, 0, "apply"), 0);
  }
  env_wait_done(1, 60);
  uint64_t v = env_version();
  ck_assert_uint_gt(v, 0);
  WAIT_UNTIL(env_all_acked(v), 10, "not every agent acked version %llu", (unsigned long long)v);
  return v;
}

void env_assert_nothing_runs(uint64_t v, long ms) {
  double end = harness_now() + (double)ms / 1000.0;
  while (harness_now() < end) {
    ck_assert_uint_eq(env_version(), v);
    ck_assert(!env_exists("plan/active"));
    harness_sleep_ms(100);
  }
}

/* Whether coordinator i leads and its /status.json shows k's auto_apply and throttle. */
static bool leader_config_is(int i, const env_config *k) {
  char url[80], *body = NULL;
  snprintf(url, sizeof url, "http://%.31s/status.json", env.listen[i]);
  if (!proc_running(&env.coord[i]) || http_get(url, &body) != 200) {
    free(body);
    return false;
  }
  cJSON *s = cJSON_Parse(body);
  free(body);
  const cJSON *role = cJSON_GetObjectItemCaseSensitive(s, "role");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(s, "config");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "throttle");
  bool ok = cJSON_IsString(role) && strcmp(role->valuestring, "leader") == 0 && cJSON_IsObject(t) &&
            strcmp(jstr(c, "auto_apply"), k->auto_apply ? "all" : "none") == 0 &&
            jnum(t, "moves_per_node") == k->per_node &&
            jnum(t, "moves_per_domain") == k->per_domain &&
            jnum(t, "moves_per_wave") == k->per_wave;
  cJSON_Delete(s);
  return ok;
}

bool env_config_heard(const env_config *k) {
  for (int i = 0; i < ENV_COORDS; i++)
    if (env.coord_id[i][0] && leader_config_is(i, k))
      return true;
  return false;
}

void env_config_put_heard(const env_config *k) {
  env_config_put(k);
  WAIT_UNTIL(env_config_heard(k), 15, "the leader did not read the new config");
}

void env_throttle(env_config *k, uint32_t per_node, uint32_t per_wave) {
  k->per_node = per_node;
  k->per_wave = per_wave;
  env_config_put_heard(k);
}

void env_targets(const ring_table *t, double *target) {
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

void env_assert_balanced(const ring_table *t) {
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

cJSON *env_history_json(const char *id) {
  const char *key = ENV_PREFIX "plan/";
  ring_range_opts ro = {.prefix = true}; /* plan/active and plan/history/ hold runs */
  ring_kvs kv;
  ring_error err;
  ck_assert_int_eq(ring_etcd_range(env.c, key, strlen(key), &ro, &kv, &err), RING_OK);
  cJSON *found = NULL;
  for (uint32_t i = 0; i < kv.n && !found; i++) {
    cJSON *o = cJSON_Parse((char *)kv.kvs[i].value);
    const cJSON *plan = o ? cJSON_GetObjectItemCaseSensitive(o, "plan") : NULL;
    if (cJSON_IsObject(plan) && strcmp(jstr(plan, "id"), id) == 0)
      found = o;
    else
      cJSON_Delete(o);
  }
  ring_kvs_clear(&kv);
  ck_assert_msg(found != NULL, "no run of plan %s in plan/active or plan/history/", id);
  return found;
}

/* A bytes plan's weights from its input's arc_sizes (proto/plan.md), or
 * NULL for a plan by tokens. */
static uint64_t *arc_weights(const cJSON *in, uint32_t tokens) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(in, "arc_sizes");
  if (!cJSON_IsString(a))
    return NULL;
  uint8_t *q = malloc(tokens);
  uint64_t *w = malloc(tokens * sizeof *w);
  ck_assert(q && w);
  ck_assert_int_eq(ring__base64_decode(a->valuestring, strlen(a->valuestring), q, tokens),
                   (long)tokens);
  for (uint32_t t = 0; t < tokens; t++)
    w[t] = rk_size_weight(q[t]);
  free(q);
  return w;
}

ring_plan *env_plan_of(const char *id, ring_table **base) {
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
                          NULL,
                          RING_BALANCE_TOKENS,
                          NULL};
  uint64_t *weights = arc_weights(in, cfg.tokens);
  if (weights != NULL) {
    cfg.balance = RING_BALANCE_BYTES;
    cfg.balance_sizes = weights;
  }
  ring_plan *plan = NULL;
  ring_error err;
  ck_assert_msg(ring_plan_compute(*base, specs, (uint32_t)n, &cfg, &plan, &err) == RING_OK,
                "recomputing plan %s: %s", id, err.message);
  ck_assert_msg(ring_plan_move_count(plan) == (uint32_t)jnum(p, "moves_total"),
                "plan %s recomputed has %u moves, the document says %.0f", id,
                ring_plan_move_count(plan), jnum(p, "moves_total"));
  free(weights);
  free(specs);
  free(keys);
  free(vals);
  cJSON_Delete(h);
  return plan;
}

void env_put_sizes(const ring_table *t,
                   uint64_t (*size)(const ring_table *t, uint32_t token, uint16_t owner)) {
  uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t);
  for (uint16_t n = 0; n < ring_table_node_count(t); n++) {
    rk_sizes z = {.version = ring_table_version(t)};
    z.tokens = calloc(T, sizeof *z.tokens);
    z.bytes = calloc(T, sizeof *z.bytes);
    ck_assert(z.tokens && z.bytes);
    for (uint32_t tok = 0; tok < T; tok++)
      for (uint32_t r = 0; r < R; r++)
        if (ring_table_owner(t, tok, r) == n) {
          z.tokens[z.n] = tok;
          z.bytes[z.n++] = size(t, tok, n);
        }
    char *json, what[RK_KEY_MAX_TEST];
    ck_assert_int_eq(rk_sizes_encode(&z, &json, NULL), RING_OK);
    snprintf(what, sizeof what, "sizes/%s", ring_table_node_id(t, n));
    env_put(what, json);
    free(json);
    rk_sizes_free(&z);
  }
}
