/* ringctl_fixture.c: the definitions of ringctl_fixture.h (see there). */
#include "ringctl_fixture.h"

etcd_cluster fx_etcd;

ring_etcd *fx_client;

void fx_start(void) {
  etcd_cluster_start(&fx_etcd, 1, NULL);
  fx_client = test_client(fx_etcd.endpoints, 5000, 0);
}

void fx_stop(void) {
  ring_etcd_close(fx_client);
  etcd_cluster_stop(&fx_etcd);
}

char *fx_slurp_file(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(buf);
  buf[fread(buf, 1, (size_t)n, f)] = '\0';
  fclose(f);
  return buf;
}

fx_run fx_shell(const char *command) {
  char out[] = "/tmp/ringctl-out-XXXXXX", err[] = "/tmp/ringctl-err-XXXXXX";
  int fo = mkstemp(out), fe = mkstemp(err);
  ck_assert(fo >= 0 && fe >= 0);
  close(fo);
  close(fe);
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s >%s 2>%s </dev/null", command, out, err);
  int status = system(cmd);
  fx_run r = {-1, fx_slurp_file(out), fx_slurp_file(err)};
  if (status != -1 && WIFEXITED(status))
    r.code = WEXITSTATUS(status);
  unlink(out);
  unlink(err);
  return r;
}

fx_run fx_ringctl_raw(const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s' %s", RINGCTL_PATH, args);
  return fx_shell(cmd);
}

fx_run fx_ringctl_tty(const char *cluster, const char *args) {
  char cmd[3072];
  snprintf(cmd, sizeof cmd, "script -qec \"'%s' --endpoints %s --cluster %s %s\" /dev/null",
           RINGCTL_PATH, fx_etcd.endpoints, cluster, args);
  return fx_shell(cmd);
}

fx_run fx_ringctl(const char *cluster, const char *fmt, ...) {
  char args[2048], all[3072];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(all, sizeof all, "--endpoints %s --cluster %s %s", fx_etcd.endpoints, cluster, args);
  return fx_ringctl_raw(all);
}

void fx_free(fx_run *r) {
  free(r->out);
  free(r->err);
}

void fx_expect_all(int want, const char *cluster, const char *const *args, size_t n,
                   const char *prefix) {
  for (size_t i = 0; i < n; i++) {
    fx_run r = fx_ringctl(cluster, "%s", args[i]);
    ck_assert_msg(r.code == want, "%s: exit %d (%s)", args[i], r.code, r.err);
    ck_assert_msg(strncmp(r.err, prefix, strlen(prefix)) == 0, "%s: %s", args[i], r.err);
    fx_free(&r);
  }
}

cJSON *fx_json(int code, const char *cluster, const char *fmt, ...) {
  char args[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  fx_run r = fx_ringctl(cluster, "%s --json", args);
  ck_assert_msg(r.code == code, "exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.out,
                r.err);
  cJSON *j = cJSON_Parse(r.out);
  ck_assert_msg(j != NULL, "not JSON: %s", r.out);
  fx_free(&r);
  return j;
}

const cJSON *fx_get(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  ck_assert_msg(v != NULL, "no field \"%s\"", name);
  return v;
}

double fx_num(const cJSON *o, const char *name) {
  const cJSON *v = fx_get(o, name);
  ck_assert_msg(cJSON_IsNumber(v), "\"%s\" is not a number", name);
  return v->valuedouble;
}

const char *fx_str(const cJSON *o, const char *name) {
  const cJSON *v = fx_get(o, name);
  ck_assert_msg(cJSON_IsString(v), "\"%s\" is not a string", name);
  return v->valuestring;
}

void fx_fields(const cJSON *o, const char *const *names, int n) {
  ck_assert_int_eq(cJSON_GetArraySize(o), n);
  for (int i = 0; i < n; i++)
    fx_get(o, names[i]);
}

void fx_put(const char *cluster, const char *what, const char *value, size_t len) {
  char key[RK_KEY_MAX];
  ck_assert_int_ge(rk_key(key, cluster, what), 0);
  ring_error err = {0};
  ck_assert_msg(ring_etcd_put(fx_client, key, strlen(key), value, len, 0, NULL, NULL, &err) ==
                    RING_OK,
                "%s", err.message);
}

void fx_put_owned(const char *cluster, const char *what, char *json, size_t len) {
  fx_put(cluster, what, json, len);
  free(json);
}

char *fx_value(const char *cluster, const char *what) {
  char key[RK_KEY_MAX];
  ck_assert_int_ge(rk_key(key, cluster, what), 0);
  ring_kvs r;
  ring_error err = {0};
  ck_assert_int_eq(ring_etcd_range(fx_client, key, strlen(key), NULL, &r, &err), RING_OK);
  char *s = strdup(r.n ? (const char *)r.kvs[0].value : "");
  ring_kvs_clear(&r);
  return s;
}

void fx_assert_absent(const char *cluster, const char *what) {
  char *v = fx_value(cluster, what);
  ck_assert_msg(v[0] == '\0', "%s is there: %s", what, v);
  free(v);
}

void fx_seed_config(const char *cluster, uint32_t tokens, uint32_t replicas) {
  rk_config c;
  rk_config_defaults(&c);
  c.tokens = tokens;
  c.replicas = replicas;
  strcpy(c.failure_domain, "zone");
  char *json;
  size_t len;
  ck_assert_int_eq(rk_config_encode(&c, &json, &len), RING_OK);
  fx_put_owned(cluster, "config", json, len);
}

void fx_seed_nodes(const char *cluster, uint32_t n, uint32_t zones) {
  for (uint32_t i = 0; i < n; i++) {
    rk_node node;
    memset(&node, 0, sizeof node);
    snprintf(node.id, sizeof node.id, "n%u", i);
    snprintf(node.addr, sizeof node.addr, "127.0.0.1:%u", 7000 + i);
    char zone[16];
    snprintf(zone, sizeof zone, "z%u", i % zones);
    ck_assert_int_eq(rk_labels_set(&node.labels, "zone", zone, NULL), RING_OK);
    node.weight = 1.0;
    node.state = RING_NODE_ACTIVE;
    node.desired = RK_WANT_ACTIVE;
    node.since_ms = 1796000000000ull;
    char *json, what[80];
    size_t len;
    ck_assert_int_eq(rk_node_encode(&node, &json, &len), RING_OK);
    snprintf(what, sizeof what, "nodes/%s", node.id);
    fx_put_owned(cluster, what, json, len);
  }
}

void fx_seed_table(const char *cluster, const ring_table *t) {
  char *json, what[64], v[24];
  size_t len;
  ck_assert_int_eq(ring_table_encode(t, &json, &len), RING_OK);
  snprintf(what, sizeof what, "tables/%llu", (unsigned long long)ring_table_version(t));
  fx_put_owned(cluster, what, json, len);
  snprintf(v, sizeof v, "%llu", (unsigned long long)ring_table_version(t));
  fx_put(cluster, "version", v, strlen(v));
}

ring_table *fx_table(const char *cluster, uint32_t tokens, uint32_t replicas, uint32_t n,
                     uint32_t zones, uint64_t version) {
  ring_table *rr = test_table_rr(tokens, replicas, n, zones, NULL, version);
  if (strcmp(cluster, "test") == 0)
    return rr;
  /* Rebuild under the cluster's name: same nodes and owners. */
  ring_table_params p = {cluster, "zone", version, 0, tokens, replicas};
  ring_table *t = NULL;
  ring_error err = {0};
  ck_assert_int_eq(ring_table_new(&p, &t, &err), RING_OK);
  for (uint32_t i = 0; i < n; i++) {
    const char *keys[] = {"zone"}, *vals[] = {ring_table_node_label(rr, (uint16_t)i, "zone")};
    ring_node_spec s = {ring_table_node_id(rr, (uint16_t)i),
                        ring_table_node_addr(rr, (uint16_t)i),
                        keys,
                        vals,
                        1,
                        1.0,
                        RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, &err), RING_OK);
  }
  for (uint32_t tok = 0; tok < tokens; tok++)
    for (uint32_t r = 0; r < replicas; r++)
      ring_table_set_owner(t, tok, r, ring_table_owner(rr, tok, r));
  ring_table_free(rr);
  return t;
}

void fx_seed_cluster(const char *cluster) {
  const uint32_t tokens = FX_TOKENS, replicas = FX_REPLICAS, n = FX_NODES, zones = FX_ZONES;
  fx_seed_config(cluster, tokens, replicas);
  fx_seed_nodes(cluster, n, zones);
  ring_table *t = fx_table(cluster, tokens, replicas, n, zones, 1);
  ring_error err = {0};
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  fx_seed_table(cluster, t);
  ring_table_free(t);
}

void fx_propose_add(const char *cluster, const char *id, const char *zone,
                    char id_out[RK_PLAN_ID_LEN + 1]) {
  rk_state st;
  ring_error err = {0};
  ck_assert_msg(rk_state_read(fx_client, cluster, RK_READ_ALL, &st, &err) == RING_OK, "%s",
                err.message);
  ring_table *base = NULL;
  ck_assert_int_eq(rk_table_read(fx_client, cluster, st.version, &base, &err), RING_OK);
  rk_plan_input in;
  ck_assert_msg(rk_desired_input(&st, base, &in, &err) == RING_OK, "%s", err.message);
  in.nodes = realloc(in.nodes, (in.n_nodes + 1) * sizeof *in.nodes);
  rk_node *n = &in.nodes[in.n_nodes++];
  memset(n, 0, sizeof *n);
  snprintf(n->id, sizeof n->id, "%s", id);
  snprintf(n->addr, sizeof n->addr, "127.0.0.1:7999");
  ck_assert_int_eq(rk_labels_set(&n->labels, "zone", zone, NULL), RING_OK);
  n->weight = 1.0;
  n->state = RING_NODE_ACTIVE;
  rk_plan_doc d;
  ring_plan *plan = NULL;
  ck_assert_msg(rk_plan_doc_make(base, cluster, &in, 1796000000000ull, &d, &plan, &err) == RING_OK,
                "%s", err.message);
  ck_assert_ptr_nonnull(plan);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_plan_doc_encode(&d, NULL, &json, &len), RING_OK);
  fx_put_owned(cluster, "plan/proposed", json, len);
  snprintf(id_out, RK_PLAN_ID_LEN + 1, "%s", d.id);
  ring_plan_free(plan);
  rk_plan_doc_free(&d);
  rk_plan_input_free(&in);
  ring_table_free(base);
  rk_state_free(&st);
}

void fx_bump_version(const char *cluster, uint64_t v) {
  ring_table *t = fx_table(cluster, FX_TOKENS, FX_REPLICAS, FX_NODES, FX_ZONES, v);
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  fx_seed_table(cluster, t);
  ring_table_free(t);
}

int fx_main(const char *name, const TTest *const *tests, size_t n) {
  Suite *s = suite_create(name);
  TCase *tc = tcase_create(name);
  tcase_add_unchecked_fixture(tc, fx_start, fx_stop);
  tcase_set_timeout(tc, 300);
  for (size_t i = 0; i < n; i++)
    tcase_add_test(tc, tests[i]);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1);
}

rk_node fx_node(const char *cluster, const char *id) {
  char what[80];
  snprintf(what, sizeof what, "nodes/%s", id);
  char *v = fx_value(cluster, what);
  rk_node n;
  ring_error err = {0};
  ck_assert_msg(rk_node_decode(v, strlen(v), &n, &err) == RING_OK, "%s", err.message);
  free(v);
  return n;
}
