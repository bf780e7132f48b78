/*
 * test_agent_twin.c: one id, one process, against real etcd and real
 * ring-agent processes: a second agent with a running agent's --id exits 1
 * naming the holder's address and leaves alive/<id> alone; an agent killed
 * with -9 and started again at once registers when the old lease expires;
 * a running agent whose key was taken while its lease was lost does not
 * fight the holder, and registers again once the key is free.
 */
#include "test_agent_env.h"

#define TWIN_BOUND_S 10 /* the twin waits out a 2 s lease, then refuses */

/* alive/<id>'s address ("" when absent) and lease (0 when absent). */
static void alive_addr_lease(const char *id, char *addr, size_t cap, int64_t *lease) {
  char key[96];
  snprintf(key, sizeof key, ENV_PREFIX "alive/%s", id);
  ring_kvs r = {0};
  ck_assert_int_eq(ring_etcd_range(env.c, key, strlen(key), NULL, &r, NULL), RING_OK);
  addr[0] = '\0';
  *lease = r.n ? r.kvs[0].lease : 0;
  cJSON *j = r.n ? cJSON_Parse((const char *)r.kvs[0].value) : NULL;
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "addr");
  if (cJSON_IsString(a))
    snprintf(addr, cap, "%s", a->valuestring);
  cJSON_Delete(j);
  ring_kvs_clear(&r);
}

/* Starts agent 0 as id "a" and waits until it is registered. */
static void start_a(void) {
  env_agent_start(0, "a", NULL);
  ck_assert_msg(ENV_WAIT(env_alive_is("a", env.a[0].listen), 10), "alive/a never named agent a");
  ck_assert(ENV_WAIT(env_metric(0, "ring_agent_registered") == 1, 5));
}

START_TEST(twin_refused_at_start) {
  start_a();
  char addr[64];
  int64_t lease;
  alive_addr_lease("a", addr, sizeof addr, &lease);
  ck_assert_int_ne(lease, 0);

  /* The twin: same id, its own port and data dir. */
  char line[1400], *argv[PROC_ARGS_MAX], out[16384];
  snprintf(line, sizeof line,
           "%s --endpoints %s --cluster " ENV_CLUSTER " --id a --listen 127.0.0.1:%d"
           " --metrics 127.0.0.1:%d --data-dir %s/twin --zone z9 --secret-file %s"
           " --lease-ttl 2s",
           RING_AGENT_BIN, env.etcd.endpoints, harness_free_port(), harness_free_port(), env.dir,
           env.secret);
  env_argv(line, argv);
  double t0 = harness_now();
  int rc = proc_run(argv, TWIN_BOUND_S + 10, out, sizeof out);
  double took = harness_now() - t0;
  ck_assert_msg(rc == 1, "the twin exited %d, not 1:\n%s", rc, out);
  ck_assert_msg(took < TWIN_BOUND_S, "the twin took %.1f s to refuse", took);
  ck_assert_msg(strstr(out, env.a[0].listen) != NULL, "the twin's output does not name %s:\n%s",
                env.a[0].listen, out);
  ck_assert_msg(strstr(out, "refusing to start") != NULL, "no refusal in:\n%s", out);

  /* alive/a is untouched; A keeps serving, never re-registered. */
  char now_addr[64];
  int64_t now_lease;
  alive_addr_lease("a", now_addr, sizeof now_addr, &now_lease);
  ck_assert_str_eq(now_addr, env.a[0].listen);
  ck_assert_int_eq(now_lease, lease);
  ck_assert(env_metric(0, "ring_agent_registered") == 1);
  ck_assert(env_metric(0, "ring_agent_registrations_total") == 1);
  ck_assert(env_metric(0, "ring_agent_leases_lost_total") == 0);
  char url[64];
  snprintf(url, sizeof url, "http://%s/healthz", env.a[0].metrics);
  ck_assert_int_eq(http_get(url, NULL), 200);
  env_pass();
}
END_TEST

/* kill -9, then the same id at once: the old key still stands under the
 * dead process's lease, the new one waits it out and registers. */
START_TEST(restart_after_crash_registers) {
  start_a();
  char addr[64];
  int64_t old;
  alive_addr_lease("a", addr, sizeof addr, &old);
  proc_signal(&env.a[0].p, SIGKILL);
  ck_assert_int_eq(proc_wait(&env.a[0].p, 5), 128 + SIGKILL);
  char first[220]; /* the new process logs afresh; the old log stays beside it */
  snprintf(first, sizeof first, "%s.1", env.a[0].log);
  ck_assert_int_eq(rename(env.a[0].log, first), 0);
  double t0 = harness_now();
  env_agent_start(0, "a", NULL);
  ck_assert_msg(ENV_WAIT(env_metric(0, "ring_agent_registered") == 1, 2 + 4),
                "the restarted agent did not register within the lease TTL and a margin");
  ck_assert_msg(harness_now() - t0 < 6, "registered too late");
  int64_t lease;
  alive_addr_lease("a", addr, sizeof addr, &lease);
  ck_assert_int_ne(lease, 0);
  ck_assert_int_ne(lease, old);
  ck_assert_str_eq(addr, env.a[0].listen);
  ck_assert(proc_running(&env.a[0].p));
  ck_assert(!file_contains(env.a[0].log, "refusing"));
  env_pass();
}
END_TEST

/* While A has no lease, another process holds alive/a (written over A's
 * key under a lease of its own, as a twin of an older release would): A
 * leaves it alone, reports it, and registers once it is gone. */
START_TEST(taken_while_running_not_fought) {
  start_a();
  char addr[64], key[96];
  int64_t lease_a, twin = 0;
  alive_addr_lease("a", addr, sizeof addr, &lease_a);
  snprintf(key, sizeof key, ENV_PREFIX "alive/a");
  const char *value = "{\"format\":\"ringkeeper.alive.v1\",\"id\":\"a\",\"addr\":\"127.0.0.1:1\","
                      "\"labels\":{},\"weight\":1.0,\"started_ms\":1796000000000}";
  ck_assert_int_eq(ring_etcd_lease_grant(env.c, 60, &twin, NULL), RING_OK);
  ck_assert_int_eq(
      ring_etcd_put(env.c, key, strlen(key), value, strlen(value), twin, NULL, NULL, NULL),
      RING_OK);
  ck_assert_int_eq(ring_etcd_lease_revoke(env.c, lease_a, NULL), RING_OK);

  ck_assert_msg(ENV_WAIT(env_metric(0, "ring_agent_leases_lost_total") == 1, 5),
                "agent a did not notice its lease was lost");
  /* several retries: the twin's record stays, a stays unregistered */
  ck_assert(HARNESS_HOLDS(
      env_alive_is("a", "127.0.0.1:1") && env_metric(0, "ring_agent_registered") == 0, 3.0));
  char url[64];
  snprintf(url, sizeof url, "http://%s/healthz", env.a[0].metrics);
  ck_assert_int_ne(http_get(url, NULL), 200);
  ck_assert(file_contains(env.a[0].log, "another agent holds id a (addr 127.0.0.1:1"));

  ck_assert_int_eq(ring_etcd_lease_revoke(env.c, twin, NULL), RING_OK);
  ck_assert_msg(ENV_WAIT(env_alive_is("a", env.a[0].listen), 5), "agent a did not register again");
  ck_assert(ENV_WAIT(env_metric(0, "ring_agent_registered") == 1, 2));
  ck_assert(ENV_WAIT(http_get(url, NULL) == 200, 3));
  env_pass();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("agent_twin");
  env_add(s, "twin", 60, twin_refused_at_start);
  env_add(s, "restart", 60, restart_after_crash_registers);
  env_add(s, "taken", 60, taken_while_running_not_fought);
  return s;
}

int main(void) { return run_suite_as(suite(), 1); }
