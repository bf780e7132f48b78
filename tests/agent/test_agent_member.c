/*
 * test_agent_member.c: ring-agent's membership and its surface, against
 * real etcd: bad flags exit 2; alive/<id> appears with the address, labels
 * and weight; a revoked lease is noticed and the host registers again; a
 * config change reaches the fetch limits within a second or two; SIGTERM
 * revokes the lease (alive/<id> goes at once) and exits 0; /metrics (with
 * the data dir's size and free bytes) and /healthz answer; etcd paused
 * past the lease's TTL: registered again.
 */
#include "test_agent_env.h"

/* Runs ring-agent with the given arguments (after the binary) and returns
 * its exit status; out gets what it printed. */
static int run_agent(const char *args, char *out, size_t cap) {
  char line[2048], *argv[PROC_ARGS_MAX];
  snprintf(line, sizeof line, "%s %s", RING_AGENT_BIN, args);
  env_argv(line, argv);
  return proc_run(argv, 20, out, cap);
}

START_TEST(bad_flags_exit_2) {
  char out[8192], args[1200];
  ck_assert_int_eq(run_agent("--bogus", out, sizeof out), 2);
  ck_assert_ptr_nonnull(strstr(out, "--bogus"));
  ck_assert_int_eq(run_agent("--endpoints http://127.0.0.1:1 --cluster c", out, sizeof out), 2);
  ck_assert_ptr_nonnull(strstr(out, "--id"));
  snprintf(args, sizeof args,
           "--endpoints %s --cluster c --id a --listen 127.0.0.1:0 --data-dir %s/x"
           " --secret-file %s --weight 0",
           env.etcd.endpoints, env.dir, env.secret);
  ck_assert_int_eq(run_agent(args, out, sizeof out), 2);
  snprintf(args, sizeof args,
           "--endpoints %s --cluster c --id a --listen 127.0.0.1:0 --data-dir %s/x"
           " --secret-file %s --lease-ttl soon",
           env.etcd.endpoints, env.dir, env.secret);
  ck_assert_int_eq(run_agent(args, out, sizeof out), 2);
  snprintf(args, sizeof args,
           "--endpoints %s --cluster c --id a --listen 127.0.0.1:0 --data-dir %s/x",
           env.etcd.endpoints, env.dir);
  ck_assert_int_eq(run_agent(args, out, sizeof out), 2);
  ck_assert_ptr_nonnull(strstr(out, "--secret-file"));
  ck_assert_int_eq(run_agent("--help", out, sizeof out), 0);
  ck_assert_ptr_nonnull(strstr(out, "--drop-grace"));
  env_pass();
}
END_TEST

static int64_t alive_lease(const char *id) {
  char what[64];
  snprintf(what, sizeof what, "alive/%s", id);
  int64_t lease;
  env_key_meta(what, &lease, NULL);
  return lease;
}

START_TEST(registers_reregisters_and_leaves) {
  env_config(1, 3, 0);
  env_agent_start(0, "h1", "--rack r7 --weight 2.5");
  env_agent *a = &env.a[0];
  ck_assert_msg(ENV_WAIT(env_alive_is("h1", a->listen), 10), "alive/h1 never named %s", a->listen);
  cJSON *j = env_alive("h1");
  const cJSON *labels = cJSON_GetObjectItemCaseSensitive(j, "labels");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(labels, "zone")->valuestring, "z0");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(labels, "rack")->valuestring, "r7");
  ck_assert_double_eq_tol(cJSON_GetObjectItemCaseSensitive(j, "weight")->valuedouble, 2.5, 1e-9);
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "id")->valuestring, "h1");
  double capacity = cJSON_GetObjectItemCaseSensitive(j, "capacity_bytes")->valuedouble;
  cJSON_Delete(j);
  ck_assert(ENV_WAIT(env_metric(0, "ring_agent_registered") == 1, 5));
  /* the disk-full alert's pair (deploy/prometheus): the data dir's file
   * system as alive/h1 reports it, and its free bytes within it */
  ck_assert_double_gt(capacity, 0);
  ck_assert_double_eq(env_metric(0, "ring_agent_data_capacity_bytes"), capacity);
  double free_bytes = env_metric(0, "ring_agent_data_free_bytes");
  ck_assert_msg(free_bytes > 0 && free_bytes <= capacity, "free %.0f of %.0f bytes", free_bytes,
                capacity);
  char url[64], *body = NULL;
  snprintf(url, sizeof url, "http://%s/healthz", a->metrics);
  ck_assert(ENV_WAIT(http_get(url, NULL) == 200, 5));
  ck_assert_int_eq(http_get(url, &body), 200);
  ck_assert_ptr_nonnull(strstr(body, "ok"));
  free(body);

  /* The config reaches the fetch limits. */
  ck_assert(ENV_WAIT(env_metric(0, "ring_agent_fetch_parallel") == 3, 5));
  env_config(1, 2, 123456);
  ck_assert(ENV_WAIT(env_metric(0, "ring_agent_rate_limit_bytes_per_second") == 123456, 2));
  ck_assert(ENV_WAIT(env_metric(0, "ring_agent_fetch_parallel") == 2, 2));

  /* Lease loss: revoked from outside; the agent registers again. */
  int64_t lease = alive_lease("h1");
  ck_assert_int_ne(lease, 0);
  ck_assert_int_eq(ring_etcd_lease_revoke(env.c, lease, NULL), RING_OK);
  ck_assert_msg(ENV_WAIT(alive_lease("h1") != 0 && alive_lease("h1") != lease, 10),
                "alive/h1 did not come back under a new lease");
  ck_assert(ENV_WAIT(env_metric(0, "ring_agent_leases_lost_total") == 1, 5));
  ck_assert(env_alive_is("h1", a->listen));

  /* SIGTERM: the lease is revoked, alive/h1 is gone at once, exit 0. */
  ck_assert_int_eq(proc_term(&a->p, 15), 0);
  ck_assert_ptr_null(env_alive("h1"));
  ck_assert(file_contains(a->log, "msg=stopped"));
  env_pass();
}
END_TEST

/* etcd stops answering for longer than the lease: the keeper gives the
 * lease up, and once etcd is back the agent registers again by itself. */
START_TEST(etcd_pause_reregisters) {
  env_agent_start(0, "h1", "--etcd-timeout 1s");
  ck_assert(ENV_WAIT(env_alive_is("h1", env.a[0].listen), 10));
  etcd_member_signal(&env.etcd, 0, SIGSTOP);
  bool lost = ENV_WAIT(env_metric(0, "ring_agent_leases_lost_total") >= 1, 15);
  etcd_member_signal(&env.etcd, 0, SIGCONT);
  ck_assert_msg(lost, "the agent did not notice its lease was lost");
  ck_assert_msg(
      ENV_WAIT(env_alive_is("h1", env.a[0].listen) && env_metric(0, "ring_agent_registered") == 1,
               15),
      "alive/h1 did not come back");
  ck_assert_double_ge(env_metric(0, "ring_agent_registrations_total"), 2);
  env_pass();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("agent_member");
  env_add(s, "flags", 60, bad_flags_exit_2);
  env_add(s, "membership", 120, registers_reregisters_and_leaves);
  env_add(s, "etcd_pause", 120, etcd_pause_reregisters);
  return s;
}

int main(void) { return run_suite_as(suite(), 1); }
