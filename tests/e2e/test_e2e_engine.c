/*
 * test_e2e_engine.c: the migration engine as an operator steers it, on a
 * whole cluster (e2e_cluster.h: real etcd, a coordinator, ring-agents with
 * a ring-kv each, a data set):
 *   estimate  the agents report their arcs' sizes (sizes/<id>), which
 *             `ringctl status --json` sums into each node's bytes held, as
 *             each agent's ring_agent_bytes_held says; the plan
 *             for a join says the bytes its receivers then get, within 1%,
 *             and under a byte limit the time it takes (printed next to the
 *             real duration; only held to a loose bound here, since a
 *             test is no benchmark); `apply --wait` prints the estimate at
 *             approval and, at the end, the time taken against it;
 *   drain_estimate  a drain to three receivers at a byte limit: the
 *             plan's estimate (the run's steps, the node that bounds
 *             them) within 15% of the time the drain takes;
 *   throttle  a join runs at moves-per-node 1: the receiver fetches one arc
 *             at a time. Raised to 16 mid-run, the receiver fetches more at
 *             once within seconds; lowered to 2, no more than 2 after the
 *             fetches running then end. One plan id throughout, and the
 *             final check holds. A byte limit keeps the join long enough to
 *             watch, so the arcs/s printed stay level here: what concurrency
 *             buys on a disk is bench_agent_move --parallel's figure.
 */
#include "e2e_cluster.h"

#include <math.h>

/* The id of plan/active's plan, "" when no run is active. */
static void active_id(char id[24]) {
  char *v = env_get("plan/active");
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "plan");
  const cJSON *i = cJSON_GetObjectItemCaseSensitive(p, "id");
  snprintf(id, 24, "%s", cJSON_IsString(i) ? i->valuestring : "");
  cJSON_Delete(j);
}

static double bytes_in_all(int slots) {
  double b = 0;
  for (int i = 0; i < slots; i++)
    b += env_metric(i, "ring_agent_bytes_in_total");
  return b;
}

/* The sum of sizes/<id>'s bytes; -1 when it is absent or not JSON. */
static double report_sum(const char *id) {
  char what[64];
  snprintf(what, sizeof what, "sizes/%s", id);
  char *v = env_get(what);
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *b, *bytes = cJSON_GetObjectItemCaseSensitive(j, "bytes");
  double sum = j != NULL ? 0 : -1;
  cJSON_ArrayForEach(b, bytes) sum += b->valuedouble;
  cJSON_Delete(j);
  return sum;
}

/* Load: every node of `ringctl status --json` has a numeric bytes, reported,
 * equal to its sizes/ report's sum and to its agent's ring_agent_bytes_held
 * (slot i runs node n<i>). Polled: an agent may measure again meanwhile. */
static bool load_agrees(int slots) {
  char out[1 << 16];
  if (e2e_ringctl(out, sizeof out, "status --json") != 0)
    return false;
  cJSON *o = cJSON_Parse(out);
  const cJSON *n;
  int seen = 0;
  bool ok = o != NULL;
  cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(o, "nodes")) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(n, "id");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(n, "bytes");
    int slot = cJSON_IsString(id) ? atoi(id->valuestring + 1) : -1;
    ok = ok && cJSON_IsNumber(bytes) && bytes->valuedouble > 0 && slot >= 0 && slot < slots &&
         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(n, "bytes_reported")) &&
         bytes->valuedouble == report_sum(id->valuestring) &&
         bytes->valuedouble == env_metric(slot, "ring_agent_bytes_held");
    seen++;
  }
  cJSON_Delete(o);
  return ok && seen == slots;
}

/* Waits until the agents of slots 0..slots-1 measured their arcs after the
 * data set was loaded, and status, sizes/ and their metrics agree. */
static void sizes_measured(int slots) {
  e2e_sizes_fresh(slots);
  ck_assert_msg(ENV_WAIT(load_agrees(slots), 20),
                "status --json's bytes, sizes/ and ring_agent_bytes_held disagree");
}

START_TEST(estimate) {
  static const char *const fast[] = {"--sizes-every 1s", "--sizes-every 1s", "--sizes-every 1s"};
  const e2e_opts o = {.bytes_per_sec = 8000, .value_size = 100};
  e2e_bootstrap_with(&o, 3, 1, fast, NULL);
  sizes_measured(3);
  e2e_node_start(3, "n3", "--sizes-every 1s");
  char id[24];
  ck_assert_msg(ENV_WAIT(e2e_new_proposal(id), 30), "no plan for n3's join");
  char out[1 << 16];
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "plan --json"), 0);
  cJSON *p = cJSON_Parse(out);
  ck_assert_msg(p != NULL, "ringctl plan --json: %.200s", out);
  double bytes = cJSON_GetObjectItemCaseSensitive(p, "bytes_now")->valuedouble;
  double eta = cJSON_GetObjectItemCaseSensitive(p, "eta_s")->valuedouble;
  cJSON_Delete(p);
  ck_assert_double_gt(bytes, 0);
  double before = bytes_in_all(4), t0 = harness_now();
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "apply --wait %s", id), 0);
  ck_assert_msg(strstr(out, "estimate: ") != NULL && strstr(out, "estimated ") != NULL,
                "apply --wait holds the run to no estimate: %.400s", out);
  e2e_wait_done(id, 180);
  double took = harness_now() - t0, got = bytes_in_all(4) - before;
  printf("estimate: plan said %.0f bytes and %.1f s at 8000 B/s per agent; the receivers got "
         "%.0f bytes (%+.2f%%) in %.1f s (%+.0f%%)\n",
         bytes, eta, got, 100 * (got - bytes) / bytes, took, 100 * (took - eta) / eta);
  ck_assert_msg(fabs(got - bytes) <= 0.01 * bytes, "plan said %.0f bytes, %.0f were received",
                bytes, got);
  ck_assert_msg(took >= 0.5 * eta && took <= 2 * eta + 10, "ETA %.1f s, took %.1f s", eta, took);
  e2e_settle(2, 120);
  e2e_check(false);
  env_pass();
}
END_TEST

/* The case: n0 drained to three receivers (one zone each, R 3, so
 * each token goes to the one node without a replica of it) at a byte limit
 * per agent, 256 moves a step. The plan's estimate (plan_eta.c: the run's
 * steps, each as long as its slowest receiver) is within 15% of the time
 * `apply --wait` takes. */
START_TEST(drain_estimate) {
  e2e_eta e;
  e2e_eta_case(false, 1000, &e);
  printf("drain estimate: 3 receivers at 40000 B/s each: ETA %.1f s (%s; every byte at once "
         "%.1f s), took %.1f s (%+.0f%%)\n",
         e.eta, e.bound, e.ideal, e.took, 100 * (e.took - e.eta) / e.eta);
  ck_assert_msg(fabs(e.took - e.eta) <= 0.15 * e.eta, "ETA %.1f s, took %.1f s", e.eta, e.took);
  e2e_settle(2, 120);
  e2e_check(false);
  env_pass();
}
END_TEST

/* Polls slot i's running fetches for ms; returns the most seen. */
static double most_in_flight(int i, long ms) {
  double most = 0, end = harness_now() + (double)ms / 1000.0;
  while (harness_now() < end) {
    double n = env_metric(i, "ring_agent_arcs_in_flight");
    most = n > most ? n : most;
    harness_sleep_ms(20);
  }
  return most;
}

/* Arcs slot i installs per second over ms (the agent running throughout). */
static double fetch_rate(int i, long ms) {
  double a = env_metric(i, "ring_agent_arcs_fetched_total"), t0 = harness_now();
  ck_assert(HARNESS_HOLDS(proc_running(&env.a[i].p), (double)ms / 1000.0));
  return (env_metric(i, "ring_agent_arcs_fetched_total") - a) / (harness_now() - t0);
}

START_TEST(live_throttle) {
  const e2e_opts o = {
      .tokens = 1024, .per_node = 1, .per_wave = 4096, .keys = 4000, .bytes_per_sec = 20000};
  e2e_bootstrap(&o, 3, 1);
  e2e_node_start(3, "n3", NULL);
  char id[24], now[24];
  e2e_apply(id, 30);
  ck_assert_msg(ENV_WAIT(env_metric(3, "ring_agent_arcs_in_flight") > 0, 30),
                "n3 never started fetching");
  ck_assert_double_le(most_in_flight(3, 600), 1);
  double slow = fetch_rate(3, 800);
  ck_assert_int_eq(e2e_ringctl(NULL, 0, "throttle --moves-per-node 16"), 0);
  ck_assert_msg(ENV_WAIT(env_metric(3, "ring_agent_fetch_parallel") == 16, 5),
                "n3 did not take the raised limit within 5 s");
  ck_assert_double_gt(most_in_flight(3, 1000), 1);
  double fast = fetch_rate(3, 800);
  active_id(now);
  ck_assert_str_eq(now, id); /* the same run, no new plan */
  ck_assert_int_eq(e2e_ringctl(NULL, 0, "throttle --moves-per-node 2"), 0);
  ck_assert_msg(ENV_WAIT(env_metric(3, "ring_agent_fetch_parallel") == 2, 5),
                "n3 did not take the lowered limit within 5 s");
  ck_assert_msg(ENV_WAIT(env_metric(3, "ring_agent_arcs_in_flight") <= 2, 10),
                "the fetches running at 16 do not end");
  double after = most_in_flight(3, 600);
  printf("live throttle: %.0f arcs/s at 1 per node, %.0f at 16 (%.1fx), at most %.0f in flight "
         "at 2\n",
         slow, fast, slow > 0 ? fast / slow : 0, after);
  active_id(now);
  ck_assert_msg(now[0] == '\0' || strcmp(now, id) == 0, "another plan runs: %s", now);
  if (now[0] != '\0') /* the run may have ended meanwhile: then there is nothing to bound */
    ck_assert_double_le(after, 2);
  e2e_finish(id, false);
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("e2e_engine");
  e2e_add(s, "estimate", 1, 300, estimate);
  e2e_add(s, "drain_estimate", 1, 300, drain_estimate);
  e2e_add(s, "live_throttle", 1, 300, live_throttle);
  return run_suite_as(s, 1);
}
