/*
 * test_e2e_auth.c: a cluster with etcd auth on and a user per process
 * (RING_E2E_AUTH, set here: e2e_cluster.h), where a new host n3 is started
 * with host n0's etcd credentials, as a host that holds another's password
 * file would. etcd refuses every write it makes as n3: it never registers
 * (no alive/n3, no ack), says why on /healthz (503, "permission denied")
 * and in its error count, and n0's keys and health stay as they were. The
 * rest of the membership suite runs under auth through ctest's
 * test_e2e_auth_* entries (tests/e2e/CMakeLists.txt).
 */
#include "e2e_cluster.h"

static void (*real_creds)(const char *id, char *flags, size_t cap);

static void as_n0(const char *id, char *flags, size_t cap) {
  (void)id;
  real_creds("n0", flags, cap);
}

static long healthz(int i, char **body) {
  char url[80];
  snprintf(url, sizeof url, "http://%s/healthz", env.a[i].metrics);
  free(*body);
  *body = NULL;
  return http_get(url, body);
}

START_TEST(borrowed_credentials) {
  e2e_opts o = {.no_data = true};
  e2e_bootstrap(&o, 3, 1);
  char *n0_before = env_get("alive/n0");
  ck_assert_ptr_nonnull(n0_before);
  real_creds = env.agent_creds;
  ck_assert_ptr_nonnull(real_creds); /* auth is on: every agent has a user */
  env.agent_creds = as_n0;
  env_agent_start(3, "n3", NULL);
  env.agent_creds = real_creds;
  char *body = NULL;
  ck_assert_msg(ENV_WAIT(healthz(3, &body) == 503 && body && strstr(body, "permission denied"), 15),
                "n3's /healthz: %s", body ? body : "(none)");
  ck_assert_msg(env_metric(3, "ring_agent_errors_total") > 0, "no error counted");
  ck_assert_msg(env_metric(3, "ring_agent_registered") == 0, "n3 registered");
  ck_assert_ptr_null(env_alive("n3"));
  ck_assert_uint_eq(env_ack("n3"), 0);
  char *n0_after = env_get("alive/n0");
  ck_assert_msg(n0_after && strcmp(n0_before, n0_after) == 0, "alive/n0 changed: %s", n0_after);
  ck_assert_msg(healthz(0, &body) == 200, "n0's /healthz: %s", body ? body : "(none)");
  free(body);
  free(n0_before);
  free(n0_after);
  env_pass();
}
END_TEST

int main(void) {
  setenv("RING_E2E_AUTH", "1", 1);
  Suite *s = suite_create("e2e_auth");
  e2e_add(s, "borrowed_credentials", 1, 240, borrowed_credentials);
  return run_suite_as(s, 1);
}
