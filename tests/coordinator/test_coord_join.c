/*
 * test_coord_join.c: ring-coordinator with auto-apply places a new cluster
 * and takes in a joining node. Four fake agents in three zones: the first
 * placement is a plan that runs to done, its table verifies clean and
 * every agent acks it. A fifth agent joins: its node record appears as
 * joining, a plan moves exactly the lower bound of token-replicas to it
 * (new owner pending first, cutover after, no slot twice), the node
 * becomes active with its weighted share, and the metrics say so. With
 * migration `none` the same join is one cutover per wave and needs no
 * progress.
 */
#include "coord_env.h"

/* Every line of a daemon log is a logfmt event: ts=... level=... msg=... */
static void assert_logfmt(const char *path) {
  char *s = file_slurp(path);
  int lines = 0;
  for (char *line = s, *eol; line && *line; line = eol ? eol + 1 : NULL) {
    eol = strchr(line, '\n');
    if (eol)
      *eol = '\0';
    ck_assert_msg(strncmp(line, "ts=", 3) == 0 && strstr(line, " level=") && strstr(line, " msg="),
                  "%s: not a logfmt line: %.200s", path, line);
    lines++;
  }
  ck_assert_int_gt(lines, 0);
  free(s);
}

/* Coordinator 0's metrics once the cluster is settled at version v with
 * `active` active nodes: no plan, no node joining, no error. */
static void assert_settled_metrics(uint64_t v, double active) {
  WAIT_UNTIL(env_metric(0, "ring_coordinator_version", "") == (double)v, 5,
             "ring_coordinator_version is not %llu", (unsigned long long)v);
  ck_assert_double_eq(env_metric(0, "ring_coordinator_leader", ""), 1);
  /* The node gauges follow the next state the leader reads after the
   * publish that moved the version gauge: wait for it, bounded. */
  WAIT_UNTIL(env_metric(0, "ring_coordinator_nodes", "state=\"active\"") == active &&
                 env_metric(0, "ring_coordinator_nodes", "state=\"joining\"") == 0,
             5, "ring_coordinator_nodes: %.0f active (want %.0f), %.0f joining",
             env_metric(0, "ring_coordinator_nodes", "state=\"active\""), active,
             env_metric(0, "ring_coordinator_nodes", "state=\"joining\""));
  /* the plan gauge follows the look that saw the run finished: bounded */
  WAIT_UNTIL(env_metric(0, "ring_coordinator_plan", "state=\"none\"") == 1 &&
                 env_metric(0, "ring_coordinator_plan", "state=\"active\"") == 0,
             5, "ring_coordinator_plan is not none");
  ck_assert_double_eq(env_metric(0, "ring_coordinator_errors_total", ""), 0);
}

START_TEST(first_placement_then_join) {
  env_config k = {.tokens = 256, .replicas = 3, .down_after_ms = 1500, .auto_apply = true};
  env_config_put(&k);
  env_agent("a1", "z0");
  env_agent("a2", "z1");
  env_agent("a3", "z2");
  env_agent("a4", "z0");
  env_coord_start(0, "coord-a", "--auto-apply");

  /* the first placement: a plan from version 0 with no moves (proto/plan.md:
   * version 1 places every slot at once) */
  env_run first = env_wait_done(1, 60);
  ck_assert_double_eq(first.base_version, 0);
  ck_assert_double_eq(first.moves_total, 0);
  ck_assert_double_eq(first.waves, 0);
  ck_assert_double_eq(first.moves_done, 0);
  uint64_t v1 = env_version();
  ck_assert_uint_gt(v1, 0);
  ring_table *t = env_verify_clean();
  ck_assert_uint_eq(ring_table_node_count(t), 4);
  ck_assert_uint_eq(ring_table_tokens(t), 256);
  ck_assert_uint_eq(ring_table_replicas(t), 3);
  ck_assert_uint_eq(ring_table_pending_count(t), 0);
  ck_assert_str_eq(ring_table_failure_domain(t), "zone");
  env_assert_balanced(t);
  for (uint16_t i = 0; i < 4; i++)
    ck_assert_int_eq(ring_table_node_state(t, i), RING_NODE_ACTIVE);
  ring_table_free(t);
  WAIT_UNTIL(env_all_acked(v1), 10, "not every agent acked v%llu", (unsigned long long)v1);
  const char *ids[] = {"a1", "a2", "a3", "a4"};
  for (int i = 0; i < 4; i++) {
    env_node n;
    /* the membership step writes the state a step after the run's record */
    WAIT_UNTIL(env_node_is(ids[i], "active"), 10, "nodes/%s never became active", ids[i]);
    ck_assert_msg(env_node_read(ids[i], &n), "no nodes/%s", ids[i]);
    ck_assert_str_eq(n.state, "active");
    ck_assert_str_eq(n.desired, "active");
    ck_assert_double_eq(n.weight, 1.0);
  }
  char leader[64];
  env_leader(leader);
  ck_assert_str_eq(leader, "coord-a");
  assert_settled_metrics(v1, 4);
  ck_assert_double_ge(env_metric(0, "ring_coordinator_publishes_total", ""), 1);
  ck_assert_double_gt(env_metric(0, "ring_coordinator_publish_bytes_total", ""), 0);
  ck_assert_double_gt(env_metric(0, "ring_coordinator_etcd_requests_total", ""), 0);

  /* a fifth agent joins; its progress is held so the first wave stays open */
  fake_agent *a5 = env_agent_w("a5", "z1", 1.0, true);
  env_run run;
  WAIT_UNTIL(env_active(&run) && strcmp(run.phase, "pending") == 0, 20,
             "no pending wave for a5's join (version %llu)", (unsigned long long)env_version());
  ck_assert_double_eq(run.base_version, (double)v1);
  ck_assert_str_eq(run.state, "active");
  ck_assert(env_node_is("a5", "joining"));
  t = env_table(0); /* the pending version: a5 is the pending owner, nobody else */
  ck_assert_uint_gt(ring_table_pending_count(t), 0);
  for (uint32_t i = 0; i < ring_table_pending_count(t); i++) {
    uint32_t tok, slot;
    uint16_t node;
    ck_assert_int_eq(ring_table_pending_at(t, i, &tok, &slot, &node), RING_OK);
    ck_assert_str_eq(ring_table_node_id(t, node), "a5");
  }
  ring_table_free(t);
  WAIT_UNTIL(env_metric(0, "ring_coordinator_plan", "state=\"active\"") == 1, 5,
             "ring_coordinator_plan{state=\"active\"} is not 1 during the run");
  WAIT_UNTIL(env_metric(0, "ring_coordinator_nodes", "state=\"joining\"") == 1 &&
                 env_metric(0, "ring_coordinator_run_moves", "") == run.moves_total,
             5, "the node and run gauges do not show a5's join");
  env_run still; /* held: the wave does not finish */
  ck_assert_msg(HARNESS_HOLDS(env_active(&still) && still.moves_done == run.moves_done &&
                                  strcmp(still.phase, "pending") == 0,
                              1.0),
                "a held wave moved on");
  ck_assert_int_eq(fake_agent_hold(a5, false), RING_OK);

  env_run join = env_wait_done(2, 60);
  uint64_t v2 = env_version();
  ck_assert_double_eq(join.base_version, (double)v1);
  ck_assert_double_gt(join.moves_total, 0);
  ck_assert_msg(join.moves_total == join.lower_bound, "the join moved %.0f, lower bound %.0f",
                join.moves_total, join.lower_bound);
  ck_assert_double_eq(join.moves_done, join.moves_total);
  t = env_verify_clean();
  env_assert_balanced(t);
  uint32_t r5 = env_replicas(t, "a5");
  /* three zones and R 3: each zone holds 256; a5 shares z1 with a2 */
  ck_assert_msg(fabs(r5 - 128.0) <= 1, "a5 holds %u, its share is 128", r5);
  ck_assert_uint_eq(r5, (uint32_t)join.moves_total); /* a join only moves to the new node */
  ck_assert_int_eq(ring_table_node_state(t, (uint16_t)ring_table_find_node(t, "a5")),
                   RING_NODE_ACTIVE);
  ck_assert_uint_eq(ring_table_pending_count(t), 0);
  ring_table_free(t);
  WAIT_UNTIL(env_node_is("a5", "active"), 10, "nodes/a5 never became active");
  ck_assert_uint_eq(env_replay(v1, v2, true), (uint32_t)join.moves_total);
  WAIT_UNTIL(env_all_acked(v2), 10, "not every agent acked v%llu", (unsigned long long)v2);
  /* nothing left to propose once the table matches the membership */
  WAIT_UNTIL(!env_exists("plan/proposed"), 5, "plan/proposed stays after the run is done");
  assert_settled_metrics(v2, 5);
  assert_logfmt(env.coord[0].log);
  env_pass();
}
END_TEST

/* Migration `none` (rebuildable caches): one cutover per step (at most
 * moves_per_wave moves, read live), no pending owners, so the run needs no
 * progress at all (the agents hold theirs). */
START_TEST(join_without_migration) {
  env_config k = {
      .tokens = 256, .replicas = 3, .down_after_ms = 1500, .auto_apply = true, .migration = "none"};
  uint64_t v1 = env_bootstrap(&k, 4, 3, 1, "--auto-apply");
  env_throttle(&k, 0, 32); /* 4 steps for a5's 128 moves */
  env_hold_all(true);
  env_agent_w("a5", "z1", 1.0, true);
  env_run join = env_wait_done(2, 60);
  uint64_t v2 = env_version();
  ck_assert_double_eq(join.base_version, (double)v1);
  ck_assert_double_eq(join.moves_done, join.moves_total);
  ck_assert_double_eq(join.moves_total, join.lower_bound);
  ck_assert_double_eq(join.waves, 1); /* the plan's waves are dependency layers only */
  uint64_t steps = ((uint64_t)join.moves_total + 31) / 32;
  ck_assert_msg(v2 - v1 == steps, "%.0f moves took %llu versions, want one per 32",
                join.moves_total, (unsigned long long)(v2 - v1));
  for (uint64_t v = v1 + 1; v <= v2; v++) {
    ring_table *t = env_table(v);
    ck_assert_msg(ring_table_pending_count(t) == 0, "v%llu has %u pending entries",
                  (unsigned long long)v, ring_table_pending_count(t));
    ring_table_free(t);
  }
  ck_assert_uint_eq(env_replay(v1, v2, false), (uint32_t)join.moves_total);
  ring_table *t = env_verify_clean();
  env_assert_balanced(t);
  ring_table_free(t);
  WAIT_UNTIL(env_node_is("a5", "active"), 10, "nodes/a5 never became active");
  ck_assert_uint_eq(fake_agent_progress_version(env_agent_find("a5")), 0);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{first_placement_then_join, 240}, {join_without_migration, 240}};
  return env_main("coord_join", tests, 2);
}
