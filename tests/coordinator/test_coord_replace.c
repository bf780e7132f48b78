/*
 * test_coord_replace.c: `ringctl replace OLD NEW` with a real coordinator
 * and fake agents, under the default policy (repair):
 *   - refused while NEW is in another zone, unknown, or is OLD;
 *   - the plan after it moves exactly OLD's token-replicas, each from OLD
 *     to NEW, and waits for `ringctl apply`;
 *   - after it, NEW holds what OLD held, OLD owns nothing and leaves the
 *     table by itself (a plan that moves nothing), the table verifies and
 *     the journal names the replacement.
 */
#include "coord_env.h"

/* The finished run that moved `moves` replicas. */
static env_run run_with(double moves) {
  env_run h[16];
  int n = env_history(h, 16);
  for (int i = 0; i < n; i++)
    if (h[i].moves_total == moves)
      return h[i];
  ck_abort_msg("no run in history moved %.0f replicas", moves);
  return h[0];
}

static bool proposed_with(double moves) {
  cJSON *p = env_json("plan/proposed");
  bool ok = p && jnum(p, "moves_total") == moves;
  cJSON_Delete(p);
  return ok;
}

START_TEST(new_takes_old_one_for_one) {
  env_config k = {.tokens = 256, .replicas = 3, .down_after_ms = 60000, .auto_apply = false};
  env_bootstrap(&k, 6, 3, 1, "");
  ck_assert_int_eq(env_ringctl(NULL, 0, "auto-apply repair"), 0);
  uint64_t v1 = env_version();
  ring_table *t = env_table(v1);
  uint32_t had = env_replicas(t, "a3"); /* a3 is in z2 */
  ring_table_free(t);

  env_agent("a7", "z2");
  env_agent("a8", "z0");
  WAIT_UNTIL(env_node_is("a8", "joining") && env_exists("plan/proposed"), 20,
             "no proposal for the joins");
  char out[1024];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "replace a3 a8"), 1); /* another zone */
  ck_assert_ptr_nonnull(strstr(out, "failure domain"));
  ck_assert_int_eq(env_ringctl(NULL, 0, "replace a3 a9"), 1);
  ck_assert_int_eq(env_ringctl(NULL, 0, "replace a3 a3"), 2);
  ck_assert_int_eq(env_ringctl(NULL, 0, "replace a3"), 2);
  /* a8 is not wanted now: only the replacement should move anything */
  ck_assert_int_eq(env_ringctl(NULL, 0, "drain a8"), 0);

  ck_assert_int_eq(env_ringctl(out, sizeof out, "replace a3 a7 --as carol"), 0);
  WAIT_UNTIL(proposed_with(had), 20, "no proposal moving a3's %u token-replicas", had);
  env_assert_nothing_runs(v1, 1500); /* a change, not a repair: it waits */
  ck_assert_int_eq(env_ringctl(NULL, 0, "apply"), 0);
  env_wait_done(3, 60); /* the replacement, then a3 leaving the table */
  env_run run = run_with(had);
  ck_assert_str_eq(run.state, "done");
  ring_table *base;
  ring_plan *p = env_plan_of(run.id, &base);
  const ring_table *target = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    ck_assert_str_eq(ring_table_node_id(target, m[i].from), "a3");
    ck_assert_str_eq(ring_table_node_id(target, m[i].to), "a7");
  }
  ring_plan_free(p);
  ring_table_free(base);

  /* a3 owns nothing: the table without it moves nothing and runs by itself */
  WAIT_UNTIL(env_node_is("a3", "removed"), 30, "a3 never left the table");
  t = env_verify_clean();
  ck_assert_uint_eq(env_replicas(t, "a7"), had);
  ck_assert_int_lt(ring_table_find_node(t, "a3"), 0);
  ring_table_free(t);
  cJSON *h = NULL;
  char hist[16384];
  ck_assert_int_eq(env_ringctl(hist, sizeof hist, "history --json"), 0);
  h = cJSON_Parse(hist);
  ck_assert_msg(h != NULL, "history --json is not JSON");
  bool found = false;
  const cJSON *e;
  cJSON_ArrayForEach(e, jobj(h, "journal")) found =
      found ||
      (strcmp(jstr(e, "what"), "node.replace") == 0 && strcmp(jstr(e, "by"), "carol") == 0);
  ck_assert_msg(found, "no node.replace by carol in the journal");
  cJSON_Delete(h);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{new_takes_old_one_for_one, 300}};
  return env_main("coord_replace", tests, 1);
}
