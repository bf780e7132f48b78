/*
 * test_ringctl_admin.c: ringctl's cluster administration against real
 * etcd: init (once only), status and members (their JSON shapes), throttle,
 * drain, undrain and weight, usage errors and a dead etcd.
 *
 * Sections: init; status and members; throttle; node records; usage errors;
 * a dead etcd; authentication (last: it turns auth on for the whole etcd).
 */
#include "ringctl_fixture.h"

#include <signal.h>

/* -------------------------------------------------------------------- init */

START_TEST(init_once_then_conflict) {
  FX_EXPECT(0, "a-init",
            "init --tokens 64 --replicas 2 --failure-domain zone --best-effort rack"
            " --migration none --seed 7 --down-after 30s --auto-apply all"
            " --moves-per-node 2");
  char *v = fx_value("a-init", "config");
  rk_config c;
  ring_error err = {0};
  ck_assert_msg(rk_config_decode(v, strlen(v), &c, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(c.tokens, 64);
  ck_assert_uint_eq(c.replicas, 2);
  ck_assert_uint_eq(c.seed, 7);
  ck_assert_str_eq(c.failure_domain, "zone");
  ck_assert_str_eq(c.best_effort, "rack");
  ck_assert_int_eq(c.migration, RK_MIGRATE_NONE);
  ck_assert_uint_eq(c.down_after_ms, 30000);
  ck_assert_int_eq(c.auto_apply, RK_AUTO_ALL);
  ck_assert_uint_eq(c.throttle.moves_per_node, 2);
  free(v);
  FX_EXPECT_IN(3, err, "already initialised", "a-init",
               "init --tokens 128 --replicas 3 --failure-domain rack");
  v = fx_value("a-init", "config"); /* untouched */
  ck_assert_ptr_nonnull(strstr(v, "\"tokens\":64"));
  free(v);
}
END_TEST

START_TEST(init_bad_values) {
  const char *bad[] = {
      "init --tokens 100 --failure-domain zone",
      "init --tokens 32 --failure-domain zone",
      "init --replicas 8 --failure-domain zone",
      "init --replicas 0 --failure-domain zone",
      "init --tokens 64",
      "init --failure-domain zone --migration copy",
      "init --failure-domain zone --down-after 5",
      "init --failure-domain zone --down-after 10ms",
      "init --failure-domain zone --seed -1",
      "init --failure-domain zone --best-effort zone",
      "init --failure-domain zone --moves-per-wave x",
      "init --failure-domain zone extra",
      "init --failure-domain",
  };
  fx_expect_all(2, "a-bad", bad, sizeof bad / sizeof bad[0], "ringctl init: ");
  fx_assert_absent("a-bad", "config"); /* nothing written */
}
END_TEST

/* ------------------------------------------------------ status and members */

START_TEST(status_json_shape) {
  FX_EXPECT(1, "a-status", "status"); /* not initialised */
  fx_seed_cluster("a-status");
  cJSON *j = fx_json(0, "a-status", "status");
  static const char *const top[] = {"version", "nodes",   "health", "plan",
                                    "stuck",   "failing", "missing"};
  fx_fields(j, top, 7);
  ck_assert(cJSON_IsTrue(fx_get(fx_get(j, "health"), "ok")));
  ck_assert_int_eq((int)fx_num(j, "version"), 1);
  ck_assert(cJSON_IsNull(fx_get(j, "plan")));
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "stuck")), 0);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "failing")), 0);
  const cJSON *nodes = fx_get(j, "nodes");
  ck_assert_int_eq(cJSON_GetArraySize(nodes), FX_NODES);
  double owned = 0;
  const cJSON *n;
  cJSON_ArrayForEach(n, nodes) {
    static const char *const fields[] = {"id",       "state",  "labels", "weight",
                                         "replicas", "target", "bytes",  "bytes_reported"};
    fx_fields(n, fields, 8);
    ck_assert_double_eq(fx_num(n, "bytes"), 0); /* no sizes/ report: 0, and said so */
    ck_assert(cJSON_IsFalse(fx_get(n, "bytes_reported")));
    ck_assert_str_eq(fx_str(n, "state"), "active");
    ck_assert(cJSON_IsObject(fx_get(n, "labels")));
    ck_assert_ptr_nonnull(fx_str(fx_get(n, "labels"), "zone"));
    ck_assert_double_eq_tol(fx_num(n, "target"), FX_TOKENS * FX_REPLICAS / (double)FX_NODES, 1e-9);
    owned += fx_num(n, "replicas");
  }
  ck_assert_double_eq(owned, FX_TOKENS * FX_REPLICAS);
  cJSON_Delete(j);

  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("a-status", "n6", "z0", id);
  j = fx_json(0, "a-status", "status");
  const cJSON *plan = fx_get(j, "plan");
  static const char *const pf[] = {"id", "state", "moves_total", "moves_done"};
  fx_fields(plan, pf, 4);
  ck_assert_str_eq(fx_str(plan, "id"), id);
  ck_assert_str_eq(fx_str(plan, "state"), "proposed");
  ck_assert_int_gt((int)fx_num(plan, "moves_total"), 0);
  cJSON_Delete(j);

  fx_run r = fx_ringctl("a-status", "status");
  ck_assert_int_eq(r.code, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "version:  1"));
  ck_assert_ptr_nonnull(strstr(r.out, id));
  fx_free(&r);
}
END_TEST

START_TEST(members_alive_and_acks) {
  fx_seed_cluster("a-members");
  rk_alive a;
  memset(&a, 0, sizeof a);
  strcpy(a.id, "n0");
  strcpy(a.addr, "127.0.0.1:7000");
  a.weight = 1;
  a.started_ms = 1796000000000ull;
  char *json;
  size_t len;
  ck_assert_int_eq(rk_alive_encode(&a, &json, &len), RING_OK);
  fx_put_owned("a-members", "alive/n0", json, len);
  fx_put("a-members", "acks/n0", "1", 1);
  cJSON *j = fx_json(0, "a-members", "members");
  const cJSON *nodes = fx_get(j, "nodes");
  ck_assert_int_eq(cJSON_GetArraySize(nodes), FX_NODES);
  const cJSON *n0 = cJSON_GetArrayItem(nodes, 0), *n1 = cJSON_GetArrayItem(nodes, 1);
  ck_assert_str_eq(fx_str(n0, "id"), "n0");
  ck_assert(cJSON_IsTrue(fx_get(n0, "alive")));
  ck_assert_int_eq((int)fx_num(n0, "acked"), 1);
  ck_assert(cJSON_IsFalse(fx_get(n1, "alive")));
  ck_assert_int_eq((int)fx_num(n1, "acked"), 0);
  ck_assert_str_eq(fx_str(n0, "addr"), "127.0.0.1:7000");
  ck_assert_str_eq(fx_str(n0, "desired"), "active");
  cJSON_Delete(j);
  fx_run r = fx_ringctl("a-members", "members");
  ck_assert_int_eq(r.code, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "127.0.0.1:7005"));
  fx_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- throttle */

START_TEST(throttle_round_trip) {
  FX_EXPECT(0, "a-throttle", "init --tokens 64 --replicas 2 --failure-domain zone");
  cJSON *j = fx_json(0, "a-throttle", "throttle");
  ck_assert_int_eq((int)fx_num(j, "moves_per_node"), 4);
  ck_assert_int_eq((int)fx_num(j, "moves_per_wave"), 256);
  cJSON_Delete(j);
  j = fx_json(0, "a-throttle",
              "throttle --moves-per-wave 9 --bytes-per-sec=1048576 "
              "--moves-per-domain 3");
  ck_assert_int_eq((int)fx_num(j, "moves_per_node"), 4); /* kept */
  ck_assert_int_eq((int)fx_num(j, "moves_per_domain"), 3);
  ck_assert_int_eq((int)fx_num(j, "moves_per_wave"), 9);
  ck_assert_int_eq((int)fx_num(j, "bytes_per_sec"), 1048576);
  cJSON_Delete(j);
  char *v = fx_value("a-throttle", "config");
  rk_config c;
  ck_assert_int_eq(rk_config_decode(v, strlen(v), &c, NULL), RING_OK);
  ck_assert_uint_eq(c.throttle.moves_per_wave, 9);
  ck_assert_uint_eq(c.throttle.bytes_per_sec, 1048576);
  ck_assert_uint_eq(c.tokens, 64); /* the rest of the config kept */
  free(v);
  FX_EXPECT(2, "a-throttle", "throttle --moves-per-node -1");
  FX_EXPECT(2, "a-throttle", "throttle --moves-per-node");
  FX_EXPECT(2, "a-throttle", "throttle 5");
  FX_EXPECT(1, "a-throttle-none", "throttle --moves-per-node 1"); /* not initialised */
}
END_TEST

/* ------------------------------------------------------------ node records */

START_TEST(drain_undrain_weight) {
  fx_seed_cluster("a-nodes");
  FX_EXPECT(0, "a-nodes", "drain n1");
  ck_assert_int_eq(fx_node("a-nodes", "n1").desired, RK_WANT_DRAINED);
  ck_assert_int_eq(fx_node("a-nodes", "n1").state, RING_NODE_ACTIVE); /* the coordinator's */
  FX_EXPECT(0, "a-nodes", "undrain n1");
  ck_assert_int_eq(fx_node("a-nodes", "n1").desired, RK_WANT_ACTIVE);
  FX_EXPECT(0, "a-nodes", "weight n2 2.5");
  ck_assert_double_eq(fx_node("a-nodes", "n2").weight, 2.5);
  ck_assert_str_eq(fx_node("a-nodes", "n2").labels.value[0], "z2"); /* labels kept */

  FX_EXPECT_IN(1, err, "unknown node nx", "a-nodes", "drain nx");
  FX_EXPECT(1, "a-nodes", "weight nx 2");
  FX_EXPECT(2, "a-nodes", "drain");
  FX_EXPECT(2, "a-nodes", "drain N1");
  FX_EXPECT(2, "a-nodes", "drain n1 n2");
  FX_EXPECT(2, "a-nodes", "weight n2");
  FX_EXPECT(2, "a-nodes", "weight n2 0");
  FX_EXPECT(2, "a-nodes", "weight n2 -1");
  FX_EXPECT(2, "a-nodes", "weight n2 abc");
  FX_EXPECT(2, "a-nodes", "weight n2 nan");
  FX_EXPECT(2, "a-nodes", "weight n2 2000000");
  ck_assert_double_eq(fx_node("a-nodes", "n2").weight, 2.5);
}
END_TEST

/* ------------------------------------------------------------ usage errors */

START_TEST(usage_errors) {
  const char *bad[] = {
      "frobnicate",
      "status --bogus",
      "status extra",
      "lookup",
      "lookup a b",
      "render extra",
      "render --svg",
      "render --what",
      "apply a b",
      "apply --wait=yes",
      "plan --what-if nonsense",
      "plan --what-if add=",
      "plan --what-if add=n9,weight=-1",
      "plan --what-if add=n9,zone",
      "plan --what-if fail=zone",
      "plan --what-if remove=N9",
      "plan -o",
      "history now",
      "verify --fast",
      "pause x",
      "status --timeout 5",
      "status --timeout 0s",
      "status --user root",
      "status --cert c.pem",
      "status -x",
  };
  fx_expect_all(2, "a-usage", bad, sizeof bad / sizeof bad[0], "ringctl");
  fx_run r = fx_ringctl_raw("status"); /* no --cluster */
  ck_assert_int_eq(r.code, 2);
  ck_assert_ptr_nonnull(strstr(r.err, "--cluster"));
  fx_free(&r);
  r = fx_ringctl_raw("--cluster 'Bad Name' status");
  ck_assert_int_eq(r.code, 2);
  fx_free(&r);
  r = fx_ringctl_raw("apply --help");
  ck_assert_int_eq(r.code, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "Usage: ringctl apply"));
  fx_free(&r);
}
END_TEST

/* ------------------------------------------------------------- a dead etcd */

START_TEST(dead_etcd_fails_fast) {
  const char *cmds[] = {"status",   "init --failure-domain zone",
                        "plan",     "apply",
                        "drain n1", "throttle",
                        "lookup k", "verify",
                        "history",  "pause"};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    char args[256];
    snprintf(args, sizeof args, "--endpoints http://127.0.0.1:%d --cluster dead --timeout 2s %s",
             harness_free_port(), cmds[i]);
    double t0 = harness_now();
    fx_run r = fx_ringctl_raw(args);
    double took = harness_now() - t0;
    ck_assert_msg(r.code == 4, "%s: exit %d (%s)", cmds[i], r.code, r.err); /* could not tell */
    ck_assert_msg(strstr(r.err, "etcd") != NULL, "%s: %s", cmds[i], r.err);
    ck_assert_msg(took < 5, "%s took %.1fs", cmds[i], took);
    fx_free(&r);
  }
}
END_TEST

/* A frozen etcd (SIGSTOP: it accepts connections and never answers):
 * --timeout bounds the whole command, not each of its attempts, and the
 * exit code says "could not tell", also for wait and apply --wait. */
START_TEST(frozen_etcd_timeout_bounds_command) {
  FX_EXPECT(0, "a-frozen", "init --tokens 64 --replicas 2 --failure-domain zone");
  const char *cmds[] = {"status --timeout 2s", "status --json --timeout 2s", "wait --timeout 2s",
                        "apply --wait --timeout 2s"};
  etcd_member_signal(&fx_etcd, 0, SIGSTOP);
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    double t0 = harness_now();
    fx_run r = fx_ringctl("a-frozen", "%s", cmds[i]);
    double took = harness_now() - t0;
    fprintf(stderr, "etcd frozen: ringctl %s -> %d in %.2f s\n", cmds[i], r.code, took);
    ck_assert_msg(r.code == 4, "%s: exit %d (%s)", cmds[i], r.code, r.err);
    ck_assert_msg(took >= 1.9 && took < 3.0, "%s took %.2f s", cmds[i], took);
    fx_free(&r);
  }
  etcd_member_signal(&fx_etcd, 0, SIGCONT);
  FX_EXPECT(0, "a-frozen", "status");
}
END_TEST

/* ---------------------------------------------------------- authentication */

static void write_password(const char *path, const char *pw) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%s\n", pw);
  fclose(f);
}

START_TEST(auth_with_password_file) {
  FX_EXPECT(0, "a-auth", "init --tokens 64 --replicas 2 --failure-domain zone");
  ck_assert_int_eq(etcdctl(&fx_etcd, "user add root:rootpw"), 0);
  ck_assert_int_eq(etcdctl(&fx_etcd, "auth enable"), 0);
  char good[400], bad[400];
  snprintf(good, sizeof good, "%s/good.pw", fx_etcd.base);
  snprintf(bad, sizeof bad, "%s/bad.pw", fx_etcd.base);
  write_password(good, "rootpw");
  write_password(bad, "wrong");
  FX_EXPECT(1, "a-auth", "throttle"); /* no credentials */
  FX_EXPECT_IN(0, out, "moves-per-node", "a-auth", "throttle --user root --password-file %s", good);
  FX_EXPECT_IN(1, err, "auth", "a-auth", "throttle --user root --password-file %s", bad);
  FX_EXPECT_IN(1, err, "password file", "a-auth",
               "throttle --user root --password-file /nonexistent.pw");
  char empty[400]; /* one reader for every secret file, and it refuses an empty one */
  snprintf(empty, sizeof empty, "%s/empty.pw", fx_etcd.base);
  write_password(empty, "");
  FX_EXPECT_IN(1, err, "empty", "a-auth", "throttle --user root --password-file %s", empty);
  ck_assert_int_eq(etcdctl(&fx_etcd, "--user root:rootpw auth disable"), 0);
}
END_TEST

int main(void) {
  const TTest *const tests[] = {init_once_then_conflict,
                                init_bad_values,
                                status_json_shape,
                                members_alive_and_acks,
                                throttle_round_trip,
                                drain_undrain_weight,
                                usage_errors,
                                dead_etcd_fails_fast,
                                frozen_etcd_timeout_bounds_command,
                                auth_with_password_file};
  return fx_main("ringctl_admin", tests, sizeof tests / sizeof tests[0]);
}
