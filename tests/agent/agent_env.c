/* agent_env.c: the definitions of test_agent_env.h (see there). */
#include "test_agent_env.h"

#include "records.h"

#include <sys/stat.h>

agent_env env;

void env_setup(void) {
  memset(&env, 0, sizeof env);
  etcd_cluster_start(&env.etcd, 1, NULL);
  env.c = test_client(env.etcd.endpoints, 5000, 0);
  snprintf(env.dir, sizeof env.dir, "/tmp/ringkeeper-agent-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(env.dir));
  snprintf(env.secret, sizeof env.secret, "%s/secret", env.dir);
  FILE *f = fopen(env.secret, "w");
  ck_assert_ptr_nonnull(f);
  fputs("test-secret-1234-of-thirty-two-bytes\n", f);
  fclose(f);
  ck_assert_int_eq(chmod(env.secret, 0600), 0); /* the agent refuses a secret others may read */
}

void env_pass(void) { env.passed = true; }

void env_teardown(void) {
  bool clean = true;
  for (int i = 0; i < ENV_AGENTS; i++) {
    env_agent *a = &env.a[i];
    if (!a->used)
      continue;
    if (proc_running(&a->p) && proc_term(&a->p, 15) != 0) {
      fprintf(stderr, "ring-agent %s did not stop cleanly on SIGTERM\n", a->id);
      clean = false;
    }
    proc_kill(&a->p);
    if (file_contains(a->log, "Sanitizer") || file_contains(a->log, "runtime error")) {
      fprintf(stderr, "ring-agent %s: sanitizer report in %s\n", a->id, a->log);
      clean = false;
    }
    if (!env.passed || !clean)
      file_tail(a->log, 60);
  }
  env.passed = env.passed && clean;
  ring_etcd_close(env.c);
  etcd_cluster_stop(&env.etcd);
  proc_dir_done(env.dir, env.passed, "RING_TEST_KEEP");
  ck_assert_msg(clean, "an agent did not stop cleanly (see above)");
}

TCase *env_tcase(const char *name, int timeout_s) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, timeout_s);
  tcase_add_checked_fixture(tc, env_setup, env_teardown);
  return tc;
}

void env_add(Suite *s, const char *name, int timeout_s, const TTest *test) {
  TCase *tc = env_tcase(name, timeout_s);
  tcase_add_test(tc, test);
  suite_add_tcase(s, tc);
}

void env_put(const char *what, const char *value) {
  char key[256];
  snprintf(key, sizeof key, ENV_PREFIX "%s", what);
  ring_error err;
  ck_assert_msg(ring_etcd_put(env.c, key, strlen(key), value, strlen(value), 0, NULL, NULL, &err) ==
                    RING_OK,
                "put %s: %s", key, err.message);
}

void env_config(uint32_t replicas, uint32_t per_node, uint64_t bytes_per_sec) {
  char json[600];
  snprintf(json, sizeof json,
           "{\"format\":\"ringkeeper.config.v1\",\"tokens\":%u,\"replicas\":%u,\"seed\":0,"
           "\"failure_domain\":\"\",\"best_effort\":\"\",\"migration\":\"stream\","
           "\"down_after_ms\":60000,\"auto_apply\":false,"
           "\"throttle\":{\"moves_per_node\":%u,\"moves_per_domain\":0,\"moves_per_wave\":0,"
           "\"bytes_per_sec\":%llu},\"retention\":{\"versions\":16,\"plans\":32}}",
           ENV_TOKENS, replicas, per_node, (unsigned long long)bytes_per_sec);
  env_put("config", json);
}

void env_argv(char *line, char **argv) {
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok && n < PROC_ARGS_MAX - 1;
       tok = strtok_r(NULL, " ", &save))
    argv[n++] = tok;
  argv[n] = NULL;
}

env_agent *env_agent_init(int i, const char *id) {
  env_agent *a = &env.a[i];
  if (a->used)
    return a;
  a->used = true;
  snprintf(a->id, sizeof a->id, "%s", id);
  snprintf(a->listen, sizeof a->listen, "127.0.0.1:%d", harness_free_port());
  snprintf(a->metrics, sizeof a->metrics, "127.0.0.1:%d", harness_free_port());
  snprintf(a->data, sizeof a->data, "%s/%s", env.dir, id);
  snprintf(a->log, sizeof a->log, "%s/%s.log", env.dir, id);
  snprintf(a->zone, sizeof a->zone, "z%d", i);
  mkdir(a->data, 0755);
  return a;
}

void env_agent_start(int i, const char *id, const char *extra) {
  env_agent *a = env_agent_init(i, id);
  char line[1800], *argv[PROC_ARGS_MAX], creds[300] = "";
  if (env.agent_creds != NULL)
    env.agent_creds(a->id, creds, sizeof creds);
  snprintf(line, sizeof line,
           "%s --endpoints %s --cluster " ENV_CLUSTER " --id %s --listen %s --metrics %s"
           " --data-dir %s --zone %s --secret-file %s --lease-ttl 2s --drop-grace 1s"
           " --log-level debug %s %s",
           env.agent_bin ? env.agent_bin : RING_AGENT_BIN, env.etcd.endpoints, a->id, a->listen,
           a->metrics, a->data, a->zone, env.secret, creds, extra ? extra : "");
  env_argv(line, argv);
  char log[sizeof a->log];
  memcpy(log, a->log, sizeof log); /* proc_spawn writes into a->p */
  ck_assert_int_eq(proc_spawn(&a->p, log, argv), 0);
  char url[64];
  snprintf(url, sizeof url, "http://%s/healthz", a->metrics);
  double end = harness_now() + 15;
  while (http_get(url, NULL) == 0) {
    ck_assert_msg(proc_running(&a->p), "ring-agent %s exited at start; see %s", id, a->log);
    ck_assert_msg(harness_now() < end, "ring-agent %s does not listen on %s", id, a->metrics);
    harness_sleep_ms(50);
  }
}

double env_metric(int i, const char *name) { return metric_get(env.a[i].metrics, name, ""); }

uint8_t env_byte(uint32_t token, int f, uint64_t k, uint32_t seed) {
  uint64_t x =
      (k + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)token << 40) ^ ((uint64_t)f << 32) ^ seed;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (uint8_t)(x >> 56);
}

void env_arc_write(int i, uint32_t token, int n, uint64_t size, uint32_t seed) {
  char path[400];
  snprintf(path, sizeof path, "%s/arcs", env.a[i].data);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/arcs/%u", env.a[i].data, token);
  /* An owner may hold the arc already, empty (explicit ownership): a
   * writer fills it as a data-plane service would. */
  ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
  uint8_t *buf = malloc(65536);
  ck_assert_ptr_nonnull(buf);
  for (int f = 0; f < n; f++) {
    char file[460];
    snprintf(file, sizeof file, "%s/f%d", path, f);
    FILE *out = fopen(file, "w");
    ck_assert_ptr_nonnull(out);
    uint64_t len = f == n - 1 && n > 1 ? size / 3 + 1 : size;
    for (uint64_t k = 0; k < len; k += 65536) {
      size_t chunk = len - k < 65536 ? (size_t)(len - k) : 65536;
      for (size_t b = 0; b < chunk; b++)
        buf[b] = env_byte(token, f, k + b, seed);
      ck_assert_uint_eq(fwrite(buf, 1, chunk, out), chunk);
    }
    fclose(out);
  }
  free(buf);
}

void env_arc_seal(int i, uint32_t token, const char *name, size_t n) {
  char aside[460], path[460];
  snprintf(aside, sizeof aside, "%s/%s.sealing", env.a[i].data, name);
  snprintf(path, sizeof path, "%s/arcs/%u/%s", env.a[i].data, token, name);
  FILE *f = fopen(aside, "wb");
  ck_assert_ptr_nonnull(f);
  for (size_t k = 0; k < n; k++)
    ck_assert_int_ne(fputc((int)(k * 131 % 251), f), EOF);
  ck_assert_int_eq(fclose(f), 0);
  ck_assert_int_eq(rename(aside, path), 0);
}

bool env_arc_has(int i, uint32_t token) {
  char path[400];
  struct stat st;
  snprintf(path, sizeof path, "%s/arcs/%u", env.a[i].data, token);
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool env_same_file(const char *p, const char *q) {
  FILE *f = fopen(p, "r"), *g = fopen(q, "r");
  bool same = f && g;
  char x[65536], y[65536];
  while (same) {
    size_t n = fread(x, 1, sizeof x, f), m = fread(y, 1, sizeof y, g);
    same = n == m && memcmp(x, y, n) == 0;
    if (n == 0 || !same)
      break;
  }
  if (f)
    fclose(f);
  if (g)
    fclose(g);
  return same;
}

bool env_arc_same(int i, int j, uint32_t token) {
  char pi[400], pj[400];
  snprintf(pi, sizeof pi, "%s/arcs/%u", env.a[i].data, token);
  snprintf(pj, sizeof pj, "%s/arcs/%u", env.a[j].data, token);
  DIR *d = opendir(pi), *e = opendir(pj);
  int files_i = 0, files_j = 0;
  bool same = d && e;
  struct dirent *x;
  while (same && (x = readdir(d)) != NULL) {
    if (x->d_name[0] == '.')
      continue;
    char fi[700], fj[700];
    snprintf(fi, sizeof fi, "%s/%s", pi, x->d_name);
    snprintf(fj, sizeof fj, "%s/%s", pj, x->d_name);
    same = env_same_file(fi, fj);
    files_i++;
  }
  while (same && (x = readdir(e)) != NULL)
    files_j += x->d_name[0] != '.';
  if (d)
    closedir(d);
  if (e)
    closedir(e);
  return same && files_i > 0 && files_i == files_j;
}

bool env_arc_valid(int i, uint32_t token, int n, uint64_t size, uint32_t seed) {
  bool ok = true;
  for (int f = 0; ok && f < n; f++) {
    char file[460];
    snprintf(file, sizeof file, "%s/arcs/%u/f%d", env.a[i].data, token, f);
    FILE *in = fopen(file, "r");
    uint64_t len = f == n - 1 && n > 1 ? size / 3 + 1 : size, k = 0;
    int c;
    while (in && ok && (c = fgetc(in)) != EOF)
      ok = k < len && (uint8_t)c == env_byte(token, f, k++, seed);
    ok = ok && in && k == len;
    if (in)
      fclose(in);
  }
  return ok;
}

uint64_t env_tmp_bytes(int i) {
  char cmd[300], out[64] = "";
  snprintf(cmd, sizeof cmd, "du -sb '%s/tmp' 2>/dev/null", env.a[i].data);
  FILE *p = popen(cmd, "r");
  if (p) {
    if (fgets(out, sizeof out, p) == NULL)
      out[0] = '\0';
    pclose(p);
  }
  return strtoull(out, NULL, 10);
}

ring_table *env_table(uint64_t v, int n, uint32_t replicas) {
  ring_table_params p = {ENV_CLUSTER, NULL, v, 0, ENV_TOKENS, replicas};
  ring_table *t;
  ring_error err;
  ck_assert_msg(ring_table_new(&p, &t, &err) == RING_OK, "%s", err.message);
  for (int i = 0; i < n; i++) {
    env_agent *a = &env.a[i];
    const char *keys[] = {"zone"}, *vals[] = {a->zone};
    ring_node_spec s = {a->id, a->listen, keys, vals, 1, 1.0, RING_NODE_ACTIVE};
    ck_assert_msg(ring_table_add_node(t, &s, NULL, &err) == RING_OK, "%s", err.message);
  }
  for (uint32_t tok = 0; tok < ENV_TOKENS; tok++)
    for (uint32_t r = 0; r < replicas; r++)
      ck_assert_int_eq(ring_table_set_owner(t, tok, r, (uint16_t)((tok * replicas + r) % n)),
                       RING_OK);
  return t;
}

void env_seal(ring_table *t) {
  ring_error err;
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
}

/* What the coordinator does at a node's first join: nodes/<id> made from
 * alive/<id>, pinning its key, for every node of t that is registered and
 * has no record yet (the agents check signatures against these pins). */
static void env_pin_nodes(const ring_table *t) {
  for (uint32_t i = 0; i < ring_table_node_count(t); i++) {
    const char *id = ring_table_node_id(t, (uint16_t)i);
    char what[128], key[160];
    snprintf(what, sizeof what, "alive/%s", id);
    char *alive = env_get(what);
    snprintf(what, sizeof what, "nodes/%s", id);
    char *node = env_get(what);
    rk_alive a;
    rk_node n = {.weight = 1.0, .state = RING_NODE_ACTIVE};
    if (alive != NULL && node == NULL &&
        rk_alive_decode(alive, strlen(alive), &a, NULL) == RING_OK && a.key[0] != '\0') {
      memcpy(n.id, a.id, sizeof n.id);
      memcpy(n.addr, a.addr, sizeof n.addr);
      memcpy(n.key, a.key, sizeof n.key);
      char *v;
      size_t vl;
      ck_assert_int_eq(rk_node_encode(&n, &v, &vl), RING_OK);
      snprintf(key, sizeof key, ENV_PREFIX "nodes/%s", id);
      ring_op op = {RING_OP_PUT, key, strlen(key), v, vl, 0, false};
      ring_error err;
      ck_assert_msg(ring_etcd_txn(env.c, NULL, 0, &op, 1, NULL, 0, NULL, &err) == RING_OK, "%s",
                    err.message);
      free(v);
    }
    free(alive);
    free(node);
  }
}

void env_publish(const ring_table *t) {
  env_pin_nodes(t);
  char tkey[96], vval[24];
  const char *vkey = ENV_PREFIX "version";
  snprintf(tkey, sizeof tkey, ENV_PREFIX "tables/%llu", (unsigned long long)ring_table_version(t));
  snprintf(vval, sizeof vval, "%llu", (unsigned long long)ring_table_version(t));
  char *tj;
  size_t tl;
  ck_assert_int_eq(ring_table_encode(t, &tj, &tl), RING_OK);
  ring_op ops[2] = {{RING_OP_PUT, tkey, strlen(tkey), tj, tl, 0, false},
                    {RING_OP_PUT, vkey, strlen(vkey), vval, strlen(vval), 0, false}};
  ring_error err;
  int rc = ring_etcd_txn(env.c, NULL, 0, ops, 2, NULL, 0, NULL, &err);
  free(tj);
  ck_assert_msg(rc == RING_OK, "%s", err.message);
}

void env_publish_free(ring_table *t) {
  env_seal(t);
  env_publish(t);
  ring_table_free(t);
}

void env_key_meta(const char *what, int64_t *lease, int64_t *mod_revision) {
  char key[256];
  snprintf(key, sizeof key, ENV_PREFIX "%s", what);
  ring_kvs r = {0};
  ck_assert_int_eq(ring_etcd_range(env.c, key, strlen(key), NULL, &r, NULL), RING_OK);
  if (lease)
    *lease = r.n ? r.kvs[0].lease : 0;
  if (mod_revision)
    *mod_revision = r.n ? r.kvs[0].mod_revision : 0;
  ring_kvs_clear(&r);
}

char *env_get(const char *what) {
  char key[256];
  snprintf(key, sizeof key, ENV_PREFIX "%s", what);
  ring_kvs r = {0};
  ring_error err;
  ck_assert_msg(ring_etcd_range(env.c, key, strlen(key), NULL, &r, &err) == RING_OK, "%s",
                err.message);
  char *v = r.n ? strdup((const char *)r.kvs[0].value) : NULL;
  ring_kvs_clear(&r);
  return v;
}

ring_table *env_current_table(void) {
  char *v = env_get("version");
  if (v == NULL)
    return NULL;
  char what[48];
  snprintf(what, sizeof what, "tables/%s", v);
  free(v);
  char *json = env_get(what);
  ring_table *t = NULL;
  if (json)
    ck_assert_int_eq(ring_table_decode(json, strlen(json), &t, NULL), RING_OK);
  free(json);
  return t;
}

uint64_t env_ack(const char *id) {
  char what[64];
  snprintf(what, sizeof what, "acks/%s", id);
  char *v = env_get(what);
  uint64_t n = v ? strtoull(v, NULL, 10) : 0;
  free(v);
  return n;
}

bool env_progress_is(const char *id, uint64_t version, const uint32_t *tokens, int n) {
  char what[64];
  snprintf(what, sizeof what, "progress/%s", id);
  char *v = env_get(what);
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "version");
  const cJSON *toks = cJSON_GetObjectItemCaseSensitive(j, "tokens");
  bool ok = cJSON_IsNumber(ver) && (uint64_t)ver->valuedouble == version && cJSON_IsArray(toks) &&
            cJSON_GetArraySize(toks) == n;
  for (int k = 0; ok && k < n; k++)
    ok = (uint32_t)cJSON_GetArrayItem(toks, k)->valuedouble == tokens[k];
  cJSON_Delete(j);
  return ok;
}

cJSON *env_alive(const char *id) {
  char what[64];
  snprintf(what, sizeof what, "alive/%s", id);
  char *v = env_get(what);
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  return j;
}

bool env_alive_is(const char *id, const char *addr) {
  cJSON *j = env_alive(id);
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "addr");
  bool ok = cJSON_IsString(a) && strcmp(a->valuestring, addr) == 0;
  cJSON_Delete(j);
  return ok;
}
