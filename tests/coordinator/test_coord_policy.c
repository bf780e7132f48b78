/*
 * test_coord_policy.c: the auto-apply policy (config.auto_apply), set with
 * `ringctl auto-apply` on a running cluster, no daemon flag:
 *   - none: a dead host's re-replication is proposed and waits;
 *   - switched to repair, that same proposal runs with no `ringctl apply`,
 *     every move off the down host and streamed from a live replica;
 *   - `ringctl remove` of the down host (it owns nothing now): the table
 *     without it moves nothing, so it too runs by itself;
 *   - under repair, a join is proposed and waits for `ringctl apply`;
 *   - the policy shows in `ringctl auto-apply --json`; a bad policy is a
 *     usage error that changes nothing.
 */
#include "coord_env.h"

/* `ringctl auto-apply --json`'s policy. */
static void assert_policy(const char *want) {
  char out[512];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "auto-apply --json"), 0);
  cJSON *o = cJSON_Parse(out);
  ck_assert_msg(o != NULL, "not JSON: %s", out);
  ck_assert_str_eq(jstr(o, "auto_apply"), want);
  cJSON_Delete(o);
}

/* Every move of run `id` takes a replica off `down` and streams it from a
 * live replica of the base table. */
static void assert_repair_of(const char *id, const char *down) {
  ring_table *base;
  ring_plan *p = env_plan_of(id, &base);
  const ring_table *target = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  ck_assert_uint_gt(ring_plan_move_count(p), 0);
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    ck_assert_str_eq(ring_table_node_id(target, m[i].from), down);
    ck_assert_uint_ne(m[i].source, RING_NODE_NONE);
    ck_assert_str_ne(ring_table_node_id(target, m[i].source), down);
  }
  ring_plan_free(p);
  ring_table_free(base);
}

START_TEST(repair_runs_changes_wait) {
  env_config k = {.tokens = 256, .replicas = 3, .down_after_ms = 1500, .auto_apply = false};
  uint64_t v1 = env_bootstrap(&k, 6, 3, 1, ""); /* policy none: the placement was applied */
  assert_policy("none");

  /* none: a3 dies; its re-replication is proposed and waits */
  ring_table *t = env_table(v1);
  uint32_t had = env_replicas(t, "a3");
  ring_table_free(t);
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a3")), RING_OK);
  WAIT_UNTIL(env_node_is("a3", "down"), 20, "a3 is not down 20 s after its lease went");
  WAIT_UNTIL(env_exists("plan/proposed"), 20, "no plan/proposed for a3's replicas");
  env_assert_nothing_runs(v1, 2500);
  /* what the "down, no repair" alert reads (deploy/prometheus) */
  WAIT_UNTIL(env_metric(0, "ring_coordinator_down_replicas", "") == had, 10,
             "ring_coordinator_down_replicas is not %u", had);

  /* a bad policy is refused and changes nothing */
  char out[512];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "auto-apply sometimes"), 2);
  assert_policy("none");

  /* repair: the same proposal runs by itself */
  ck_assert_int_eq(env_ringctl(out, sizeof out, "auto-apply repair"), 0);
  ck_assert_ptr_nonnull(strstr(out, "auto-apply: repair"));
  env_run repair = env_wait_done(2, 60);
  uint64_t v2 = env_version();
  ck_assert_double_eq(repair.base_version, (double)v1);
  ck_assert_double_eq(repair.moves_total, had);
  ck_assert_double_eq(repair.lost, 0);
  assert_repair_of(repair.id, "a3");
  t = env_verify_clean();
  ck_assert_uint_eq(env_replicas(t, "a3"), 0);
  ring_table_free(t);
  WAIT_UNTIL(env_metric(0, "ring_coordinator_down_replicas", "") == 0, 10,
             "ring_coordinator_down_replicas stays after the repair");
  WAIT_UNTIL(env_all_acked(v2), 10, "not every agent acked v%llu", (unsigned long long)v2);

  /* remove: the down a3 owns nothing; the table that drops it moves
   * nothing, so it runs by itself too */
  ck_assert_int_eq(env_ringctl(out, sizeof out, "remove a3"), 0);
  env_run drop = env_wait_done(3, 60);
  ck_assert_double_eq(drop.moves_total, 0);
  v2 = env_version();
  t = env_verify_clean();
  ck_assert_int_lt(ring_table_find_node(t, "a3"), 0);
  ring_table_free(t);
  WAIT_UNTIL(env_node_is("a3", "removed"), 10, "nodes/a3 never became removed");
  WAIT_UNTIL(env_all_acked(v2), 10, "not every agent acked v%llu", (unsigned long long)v2);

  /* repair: a join is a change, and waits for apply */
  env_agent("a7", "z2");
  WAIT_UNTIL(env_exists("plan/proposed"), 20, "no plan/proposed for a7's join");
  env_assert_nothing_runs(v2, 2500);
  ck_assert(env_node_is("a7", "joining"));
  ck_assert_int_eq(env_ringctl(NULL, 0, "apply"), 0);
  env_run join = env_wait_done(4, 60);
  ck_assert_double_gt(join.moves_total, 0);
  ring_table_free(env_verify_clean());
  WAIT_UNTIL(env_node_is("a7", "active"), 10, "nodes/a7 never became active");
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{repair_runs_changes_wait, 300}};
  return env_main("coord_policy", tests, 1);
}
