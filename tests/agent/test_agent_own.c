/*
 * test_agent_own.c: explicit ownership on real ring-agents. At the first
 * placement every owner makes an empty arc for each token it owns, so a
 * source never answers "not held" for a token it owns. An agent whose data
 * dir was wiped and that comes back under its id adopts nothing: its owned
 * tokens are missing, counted and shown in /healthz, and never served as
 * empty arcs.
 */
#include "test_agent_env.h"

#define A 0
#define B 1

/* How many of the ENV_TOKENS tokens agent i holds an arc of. */
static uint32_t held(int i) {
  uint32_t n = 0;
  for (uint32_t t = 0; t < ENV_TOKENS; t++)
    n += env_arc_has(i, t);
  return n;
}

START_TEST(first_placement_adopts_then_wiped_disk_adopts_nothing) {
  env_config(1, 2, 0);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  env_agent_start(A, "a", NULL);
  env_agent_start(B, "b", NULL);
  env_publish_free(env_table(1, 2, 1)); /* R 1: A owns the even tokens, B the odd */
  ck_assert(ENV_WAIT(env_ack("a") == 1 && env_ack("b") == 1, 10));
  ck_assert_msg(ENV_WAIT(held(A) == ENV_TOKENS / 2 && held(B) == ENV_TOKENS / 2, 10),
                "owners hold %u and %u arcs of %u each", held(A), held(B), ENV_TOKENS / 2);
  /* the counter moves once the whole batch is on disk, after the arcs show */
  ck_assert_msg(ENV_WAIT(env_metric(A, "ring_agent_arcs_adopted_total") == ENV_TOKENS / 2, 10),
                "adopted %g", env_metric(A, "ring_agent_arcs_adopted_total"));
  ck_assert_double_eq(env_metric(A, "ring_agent_arcs_missing"), 0);
  env_arc_write(A, 2, 2, 5000, 3); /* data the service wrote into an adopted arc */

  /* A's disk is replaced: same id, empty data dir. */
  proc_kill(&env.a[A].p);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", env.a[A].data, env.a[A].data);
  ck_assert_int_eq(system(cmd), 0);
  env_agent_start(A, "a", NULL);
  ck_assert_msg(ENV_WAIT(env_metric(A, "ring_agent_arcs_missing") == ENV_TOKENS / 2, 15),
                "the wiped agent reports %.0f missing arcs, not %u",
                env_metric(A, "ring_agent_arcs_missing"), ENV_TOKENS / 2);
  ck_assert_uint_eq(held(A), 0); /* nothing made empty: not token 2, not any */
  ck_assert_double_eq(env_metric(A, "ring_agent_arcs_adopted_total"), 0);
  char url[64], *body = NULL;
  snprintf(url, sizeof url, "http://%s/healthz", env.a[A].metrics);
  long status = http_get(url, &body);
  ck_assert_msg(status != 200 && body && strstr(body, "missing"), "/healthz %ld: %s", status,
                body ? body : "");
  free(body);
  /* The restart of an agent on its own data dir is not a wipe. */
  proc_kill(&env.a[B].p);
  env_agent_start(B, "b", NULL);
  ck_assert(ENV_WAIT(env_metric(B, "ring_agent_version") == 1, 10));
  ck_assert(HARNESS_HOLDS(env_metric(B, "ring_agent_arcs_missing") == 0, 0.5));
  ck_assert_uint_eq(held(B), ENV_TOKENS / 2);
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("agent_own");
  env_add(s, "first_placement_adopts_then_wiped_disk_adopts_nothing", 120,
          first_placement_adopts_then_wiped_disk_adopts_nothing);
  return run_suite_as(s, 1);
}
