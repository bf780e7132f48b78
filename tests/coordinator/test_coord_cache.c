/*
 * test_coord_cache.c: the coordinator's watch-fed state cache
 * (coordinator/cluster/state_cache.c) found wrong by its periodic check,
 * with real etcd and a real coordinator. The coordinator's test knobs
 * (coord_main.c, inert unless set) make the check run every 3 s
 * (RING_TEST_CACHE_CHECK_MS) and alter node a2's weight in the cache alone
 * (RING_TEST_CACHE_CORRUPT), as a bug in the cache would:
 *   - the coordinator first acts on the altered state: it proposes a plan
 *     for the weight etcd does not hold;
 *   - the check finds the difference: an error line naming the key,
 *     ring_coordinator_cache_resyncs_total{why="diverged"} on /metrics;
 *   - the cache is replaced by the full read, and the coordinator then acts
 *     on the right state: the proposal is withdrawn (the table matches),
 *     nothing else is written, and no further check finds a difference.
 */
#include "coord_env.h"

#define CHECK_MS "3000"

/* The log line of the divergence: level=error, naming the key. */
static bool diverged_logged(const char *log) {
  char *text = file_slurp(log);
  bool found = false;
  for (char *line = strtok(text, "\n"); line != NULL && !found; line = strtok(NULL, "\n"))
    found = strstr(line, "level=error") && strstr(line, "differed from a full read") &&
            strstr(line, "nodes/a2");
  free(text);
  return found;
}

static double diverged(void) {
  return env_metric(0, "ring_coordinator_cache_resyncs_total", "why=\"diverged\"");
}

START_TEST(divergence_is_caught_and_replaced) {
  env_config k = {.tokens = 64, .replicas = 2, .down_after_ms = 60000, .auto_apply = false};
  uint64_t v = env_bootstrap(&k, 3, 3, 1, "");
  env_node a2;
  ck_assert(env_node_read("a2", &a2));
  ck_assert_double_eq(a2.weight, 1);
  ck_assert(!env_exists("plan/proposed"));
  ck_assert_int_eq(proc_term(&env.coord[0], 10), 0);

  /* the same coordinator again, its test build with the knobs */
  env.coord_bin = RING_COORDINATOR_FAULTS_BIN;
  setenv("RING_TEST_CACHE_CHECK_MS", CHECK_MS, 1);
  setenv("RING_TEST_CACHE_CORRUPT", "a2", 1);
  env_coord_start(0, "coord-a", "");
  unsetenv("RING_TEST_CACHE_CHECK_MS");
  unsetenv("RING_TEST_CACHE_CORRUPT");
  const char *log = env.coord[0].log;

  /* acting on the altered cache: a plan for a weight nobody set */
  WAIT_UNTIL(file_contains(log, "test knob: altered a cached record"), 10,
             "the knob altered nothing; see %s", log);
  WAIT_UNTIL(env_exists("plan/proposed"), 10, "no plan proposed from the altered cache");

  /* the check: logged at error with the key, counted */
  WAIT_UNTIL(diverged() >= 1, 15, "ring_coordinator_cache_resyncs_total{why=\"diverged\"} is %g",
             diverged());
  ck_assert_msg(diverged_logged(log), "no error line naming nodes/a2; see %s", log);

  /* replaced by the full read: the right state says the table matches */
  WAIT_UNTIL(!env_exists("plan/proposed"), 10, "the proposal from the altered cache stays");
  ck_assert(file_contains(log, "proposal withdrawn"));
  ck_assert_uint_eq(env_version(), v);
  ck_assert(!env_exists("plan/active"));
  ck_assert(env_node_read("a2", &a2));
  ck_assert_double_eq(a2.weight, 1); /* the altered weight never reached etcd */

  /* later checks find the cache right */
  double periodic = env_metric(0, "ring_coordinator_cache_resyncs_total", "why=\"periodic\"");
  WAIT_UNTIL(env_metric(0, "ring_coordinator_cache_resyncs_total", "why=\"periodic\"") >=
                 periodic + 2,
             15, "the periodic check stopped running");
  ck_assert_double_eq(diverged(), 1);
  ck_assert(!env_exists("plan/proposed"));
  char body[512];
  WAIT_UNTIL(env_healthz(0, body, sizeof body) == 200, 10, "/healthz is not ok: %s", body);
  ck_assert_int_eq(proc_term(&env.coord[0], 10), 0);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{divergence_is_caught_and_replaced, 240}};
  return env_main("coord_cache", tests, 1);
}
