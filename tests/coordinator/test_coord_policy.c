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
 * And config.balance bytes (`ringctl balance bytes`): plans by tokens while
 * sizes are unknown, by the reported sizes once they all are.
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

/* a1's arcs weigh 40x the others. */
static uint64_t a1_heavy(const ring_table *t, uint32_t tok, uint16_t owner) {
  (void)tok;
  return strcmp(ring_table_node_id(t, owner), "a1") == 0 ? 40000 : 1000;
}

/* Whether plan/proposed is balanced by bytes (it carries arc sizes). */
static bool proposed_by_bytes(void) {
  char *v = env_get("plan/proposed", NULL);
  bool yes = v && strstr(v, "\"balance\":\"bytes\",\"arc_sizes\":\"") != NULL;
  free(v);
  return yes;
}

/* config.balance bytes: while sizes are unknown a join is planned by
 * tokens (never by guesses); once every token's size is reported, the
 * coordinator plans it again by bytes, and that plan runs. */
START_TEST(balance_bytes_follows_sizes) {
  env_config k = {.tokens = 256, .replicas = 3, .down_after_ms = 5000, .auto_apply = false};
  uint64_t v1 = env_bootstrap(&k, 6, 3, 1, "");
  char out[512];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "balance bytes"), 0);
  env_agent("a7", "z2");
  WAIT_UNTIL(env_exists("plan/proposed"), 20, "no plan/proposed for a7's join");
  ck_assert(!proposed_by_bytes()); /* no sizes yet: by tokens */
  ring_table *t = env_table(v1);
  env_put_sizes(t, a1_heavy);
  ring_table_free(t);
  WAIT_UNTIL(proposed_by_bytes(), 20, "the join was not planned again by bytes");
  ck_assert_int_eq(env_ringctl(NULL, 0, "apply"), 0);
  env_run join = env_wait_done(2, 60);
  ck_assert_double_gt(join.moves_total, 0);
  ring_plan *p = env_plan_of(join.id, &t);
  uint32_t from_a1 = 0;
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++)
    from_a1 +=
        strcmp(ring_table_node_id(ring_plan_target(p), ring_plan_moves(p)[i].from), "a1") == 0;
  ck_assert_uint_gt(from_a1, 0); /* the heavy node gives arcs up */
  ring_plan_free(p);
  ring_table_free(t);
  WAIT_UNTIL(env_node_is("a7", "active"), 10, "nodes/a7 never became active");
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{repair_runs_changes_wait, 300}, {balance_bytes_follows_sizes, 200}};
  return env_main("coord_policy", tests, 2);
}
