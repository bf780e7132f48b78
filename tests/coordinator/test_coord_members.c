/*
 * test_coord_members.c: membership changes other than a join, with six
 * fake agents in three zones and auto-apply:
 *   - `ringctl drain` empties a node (moves = its replicas = the lower
 *     bound), `ringctl undrain` gives it its share back;
 *   - `ringctl weight` changes a node's share and the others follow;
 *   - an agent whose alive/ key is gone longer than down_after is down,
 *     and a plan re-creates its replicas from live replicas; an alive/ key
 *     that flaps for less than down_after changes nothing;
 *   - an agent that comes back at another address moves its node record
 *     there, with a journal entry `ringctl history` shows.
 */
#include "coord_env.h"

static env_config config(void) {
  return (env_config){.tokens = 256, .replicas = 3, .down_after_ms = 2000, .auto_apply = true};
}

START_TEST(drain_and_undrain) {
  env_config k = config();
  uint64_t v1 = env_bootstrap(&k, 6, 3, 1, "--auto-apply");
  ring_table *t = env_table(v1);
  uint32_t had = env_replicas(t, "a1");
  ring_table_free(t);
  ck_assert_uint_gt(had, 0);

  ck_assert_int_eq(env_ringctl(NULL, 0, "drain a1"), 0);
  env_node n;
  ck_assert(env_node_read("a1", &n));
  ck_assert_str_eq(n.desired, "drained");
  env_run drain = env_wait_done(2, 60);
  uint64_t v2 = env_version();
  ck_assert_double_eq(drain.base_version, (double)v1);
  ck_assert_double_eq(drain.moves_total, had);
  ck_assert_double_eq(drain.lower_bound, had);
  ck_assert_double_eq(drain.moves_done, drain.moves_total);
  t = env_verify_clean();
  ck_assert_uint_eq(env_replicas(t, "a1"), 0);
  env_assert_balanced(t);
  ring_table_free(t);
  ck_assert(env_node_read("a1", &n));
  ck_assert_str_eq(n.state, "draining");
  ck_assert_str_eq(n.desired, "drained");
  ck_assert_uint_eq(env_replay(v1, v2, true), had);
  WAIT_UNTIL(env_metric(0, "ring_coordinator_nodes", "state=\"draining\"") == 1, 5,
             "ring_coordinator_nodes{state=\"draining\"} is not 1");

  ck_assert_int_eq(env_ringctl(NULL, 0, "undrain a1"), 0);
  ck_assert(env_node_read("a1", &n));
  ck_assert_str_eq(n.desired, "active");
  env_run undrain = env_wait_done(3, 60);
  ck_assert_double_eq(undrain.base_version, (double)v2);
  ck_assert_double_eq(undrain.moves_total, undrain.lower_bound);
  t = env_verify_clean();
  ck_assert_msg(fabs(env_replicas(t, "a1") - 128.0) <= 1, "a1 holds %u after undrain, share 128",
                env_replicas(t, "a1"));
  env_assert_balanced(t);
  ring_table_free(t);
  WAIT_UNTIL(env_node_is("a1", "active"), 10, "nodes/a1 never became active");
  env_pass();
}
END_TEST

START_TEST(weight_change) {
  env_config k = config();
  uint64_t v1 = env_bootstrap(&k, 6, 3, 1, "--auto-apply");
  /* a2 and a5 share zone z1, which holds one replica of every token */
  ck_assert_int_eq(env_ringctl(NULL, 0, "weight a2 2"), 0);
  env_node n;
  ck_assert(env_node_read("a2", &n));
  ck_assert_double_eq(n.weight, 2.0);
  env_run run = env_wait_done(2, 60);
  ck_assert_double_eq(run.base_version, (double)v1);
  ck_assert_double_eq(run.moves_total, run.lower_bound);
  ring_table *t = env_verify_clean();
  env_assert_balanced(t);
  ck_assert_double_eq(ring_table_node_weight(t, (uint16_t)ring_table_find_node(t, "a2")), 2.0);
  uint32_t r2 = env_replicas(t, "a2"), r5 = env_replicas(t, "a5");
  ck_assert_msg(fabs(r2 - 256.0 * 2 / 3) <= 1 && fabs(r5 - 256.0 / 3) <= 1,
                "a2 (weight 2) holds %u, a5 (weight 1) holds %u; zone z1 holds 256", r2, r5);
  ring_table_free(t);

  /* a fractional weight, and back */
  ck_assert_int_eq(env_ringctl(NULL, 0, "weight a2 0.5"), 0);
  env_wait_done(3, 60);
  t = env_verify_clean();
  env_assert_balanced(t);
  r2 = env_replicas(t, "a2"), r5 = env_replicas(t, "a5");
  ck_assert_msg(fabs(r2 - 256.0 / 3) <= 1 && fabs(r5 - 256.0 * 2 / 3) <= 1,
                "a2 (weight 0.5) holds %u, a5 (weight 1) holds %u", r2, r5);
  ring_table_free(t);
  env_pass();
}
END_TEST

/* Agent `id` re-registers at another address (its alive/ value, same
 * lease): the node record follows, and the journal says so. */
static void address_change_journaled(const char *id) {
  fake_agent *a = env_agent_find(id);
  env_node n;
  ck_assert(env_node_read(id, &n));
  char old[64], key[RK_KEY_MAX_TEST], *value = NULL;
  snprintf(old, sizeof old, "%s", n.addr);
  cJSON *alive = cJSON_Parse(a->alive_json);
  cJSON_ReplaceItemInObject(alive, "addr", cJSON_CreateString("127.0.0.1:1"));
  ck_assert_ptr_nonnull(value = cJSON_PrintUnformatted(alive));
  snprintf(key, sizeof key, ENV_PREFIX "alive/%s", id);
  ck_assert_int_eq(
      ring_etcd_put(env.c, key, strlen(key), value, strlen(value), a->lease, NULL, NULL, NULL),
      RING_OK);
  cJSON_Delete(alive);
  free(value);
  WAIT_UNTIL(env_node_read(id, &n) && strcmp(n.addr, "127.0.0.1:1") == 0, 10,
             "nodes/%s did not follow its alive/ key to 127.0.0.1:1", id);
  char out[16384], want[160];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "history --json"), 0);
  cJSON *h = cJSON_Parse(out);
  const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(h, "journal"), 0);
  ck_assert_msg(e != NULL, "no journal entry in %s", out);
  ck_assert_str_eq(jstr(e, "what"), "node.addr");
  ck_assert_str_eq(jstr(e, "node"), id);
  ck_assert_str_eq(jstr(e, "by"), "coordinator/coord-a");
  snprintf(want, sizeof want, "address %s -> 127.0.0.1:1", old);
  ck_assert_msg(strstr(jstr(e, "detail"), want) != NULL, "detail \"%s\" lacks \"%s\"",
                jstr(e, "detail"), want);
  cJSON_Delete(h);
}

START_TEST(down_after_and_flap) {
  env_config k = config();
  uint64_t v1 = env_bootstrap(&k, 6, 3, 1, "--auto-apply");

  /* a flap shorter than down_after: no new version, no plan */
  ring_error err;
  ck_assert_msg(fake_agent_flap(env_agent_find("a4"), 500, &err) == RING_OK, "%s", err.message);
  ck_assert_msg(HARNESS_HOLDS(env_version() == v1 && !env_exists("plan/proposed") &&
                                  !env_exists("plan/active"),
                              2 * 2.0 + 1.0),
                "a flap shorter than down_after moved something");
  ck_assert_int_eq(env_history_count("done", NULL), 1);
  env_node n;
  ck_assert(env_node_read("a4", &n));
  ck_assert_str_eq(n.state, "active");

  /* a3 dies: down only after down_after, then its replicas are re-made */
  ring_table *t = env_table(v1);
  uint32_t had = env_replicas(t, "a3");
  ring_table_free(t);
  double t0 = harness_now();
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a3")), RING_OK);
  WAIT_UNTIL(env_node_is("a3", "down"), 20, "a3 is not down 20 s after its lease went");
  double took = harness_now() - t0;
  ck_assert_msg(took >= 2.0 * 0.9, "a3 went down %.2f s after its alive/ key, down_after is 2 s",
                took);
  env_run run = env_wait_done(2, 60);
  uint64_t v2 = env_version();
  ck_assert_double_eq(run.base_version, (double)v1);
  ck_assert_double_eq(run.moves_total, had);
  ck_assert_double_eq(run.lower_bound, had);
  ck_assert_double_eq(run.lost, 0);
  t = env_verify_clean();
  ck_assert_uint_eq(env_replicas(t, "a3"), 0);
  env_assert_balanced(t);
  int i3 = ring_table_find_node(t, "a3");
  if (i3 >= 0)
    ck_assert_int_eq(ring_table_node_state(t, (uint16_t)i3), RING_NODE_DOWN);
  ring_table_free(t);
  ck_assert_uint_eq(env_replay(v1, v2, true), had);
  ck_assert(env_node_read("a3", &n));
  ck_assert_str_eq(n.state, "down");
  ck_assert_double_gt(n.lost_ms, 0);
  WAIT_UNTIL(env_metric(0, "ring_coordinator_nodes", "state=\"down\"") == 1, 5,
             "ring_coordinator_nodes{state=\"down\"} is not 1");

  /* the plan streamed every lost replica from a live replica, not from a3 */
  ring_table *base;
  ring_plan *p = env_plan_of(run.id, &base);
  const ring_table *target = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    ck_assert_str_eq(ring_table_node_id(target, m[i].from), "a3");
    ck_assert_uint_ne(m[i].source, RING_NODE_NONE);
    const char *src = ring_table_node_id(target, m[i].source);
    ck_assert_str_ne(src, "a3");
    ck_assert_msg(ring_table_node_state(target, m[i].source) == RING_NODE_ACTIVE,
                  "token %u streams from %s, which is not active", m[i].token, src);
    bool replica = false; /* the source held the token in the base table */
    for (uint32_t s = 0; s < 3; s++)
      replica = replica || strcmp(env_owner(base, m[i].token, s), src) == 0;
    ck_assert_msg(replica, "token %u streams from %s, which held no replica of it", m[i].token,
                  src);
  }
  ring_plan_free(p);
  ring_table_free(base);
  address_change_journaled("a4");
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {
      {drain_and_undrain, 300}, {weight_change, 300}, {down_after_and_flap, 300}};
  return env_main("coord_members", tests, 3);
}
