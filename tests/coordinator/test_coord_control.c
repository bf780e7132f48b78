/*
 * test_coord_control.c: operating a run and the daemon.
 *   - `ringctl pause` mid-plan: the pending wave completes, then nothing
 *     new starts; `ringctl resume` goes on; `ringctl cancel` with a wave
 *     in flight drops it (no owner of it changes), the run goes to history
 *     cancelled, and the coordinator proposes (and, auto-applying, runs) a
 *     plan from where the table is;
 *   - SIGTERM: the leader resigns (its leader key goes) and exits 0.
 */
#include "coord_env.h"

static env_config config(void) {
  return (env_config){.tokens = 256, .replicas = 3, .down_after_ms = 1500, .auto_apply = true};
}

static bool active_is(const char *state, const char *phase, env_run *r) {
  return env_active(r) && strcmp(r->state, state) == 0 && (!phase || strcmp(r->phase, phase) == 0);
}

START_TEST(pause_resume_cancel) {
  env_config k = config();
  uint64_t v1 = env_bootstrap(&k, 4, 3, 1, "--auto-apply");
  env_throttle(&k, 0, 8); /* ~20 waves for the join */
  fake_agent *a5 = env_agent_w("a5", "z1", 1.0, true);
  env_run r;
  WAIT_UNTIL(active_is("active", "pending", &r) && fake_agent_withheld(a5), 20,
             "no pending wave for a5's join");

  /* paused with a wave in flight: it completes, nothing new starts */
  ck_assert_int_eq(env_ringctl(NULL, 0, "pause"), 0);
  WAIT_UNTIL(active_is("paused", NULL, &r), 5, "plan/active is not paused");
  WAIT_UNTIL(env_metric(0, "ring_coordinator_plan", "state=\"paused\"") == 1, 5,
             "ring_coordinator_plan{state=\"paused\"} is not 1");
  ck_assert_int_eq(fake_agent_hold(a5, false), RING_OK);
  WAIT_UNTIL(active_is("paused", "settled", &r), 15, "the paused run's wave does not complete");
  ck_assert_double_gt(r.moves_done, 0);
  uint64_t vp = env_version();
  double done = r.moves_done;
  double end = harness_now() + 2.5;
  while (harness_now() < end) {
    ck_assert_uint_eq(env_version(), vp);
    ck_assert(active_is("paused", "settled", &r));
    ck_assert_double_eq(r.moves_done, done);
    harness_sleep_ms(100);
  }
  ring_table *t = env_table(vp);
  ck_assert_uint_eq(ring_table_pending_count(t), 0);
  ring_table_free(t);

  /* resumed: it goes on */
  ck_assert_int_eq(env_ringctl(NULL, 0, "resume"), 0);
  WAIT_UNTIL(env_active(&r) && strcmp(r.state, "active") == 0 && r.moves_done > done, 15,
             "the resumed run does not go on");

  /* cancelled with a wave in flight */
  ck_assert_int_eq(fake_agent_hold(a5, true), RING_OK);
  WAIT_UNTIL(active_is("active", "pending", &r) && fake_agent_withheld(a5), 20,
             "no further pending wave");
  uint64_t vc = env_version();
  ring_table *held = env_table(vc);
  ck_assert_uint_gt(ring_table_pending_count(held), 0);
  ck_assert_int_eq(env_ringctl(NULL, 0, "cancel"), 0);
  env_run cancelled = {0};
  WAIT_UNTIL(env_history_count("cancelled", &cancelled) == 1, 15, "no cancelled run in history");
  ck_assert_double_lt(cancelled.moves_done, cancelled.moves_total);
  ck_assert_double_gt(cancelled.moves_done, 0);
  /* the version after the cancellation drops the pending entries and keeps
   * the owners of the wave that was in flight */
  WAIT_UNTIL(env_version() > vc, 10, "no version drops the cancelled wave");
  t = env_table(vc + 1);
  ck_assert_ptr_nonnull(t);
  for (uint32_t i = 0; i < ring_table_pending_count(held); i++) {
    uint32_t tok, slot;
    uint16_t node;
    ring_table_pending_at(held, i, &tok, &slot, &node);
    ck_assert_str_eq(env_owner(t, tok, slot), env_owner(held, tok, slot));
    ck_assert_str_eq(env_pending(t, tok, slot), "");
  }
  ring_table_free(t);
  ring_table_free(held);

  /* a new plan from where the table is finishes the join */
  ck_assert_int_eq(fake_agent_hold(a5, false), RING_OK);
  env_run last = env_wait_done(2, 90);
  ck_assert_double_gt(last.base_version, (double)v1);
  ck_assert_double_eq(last.moves_done, last.moves_total);
  uint64_t v2 = env_version();
  t = env_verify_clean();
  env_assert_balanced(t);
  ck_assert_uint_eq(env_replicas(t, "a5"), (uint32_t)(last.moves_total + cancelled.moves_done));
  ring_table_free(t);
  ck_assert_uint_eq(env_replay(v1, v2, true), (uint32_t)(last.moves_total + cancelled.moves_done));
  WAIT_UNTIL(env_node_is("a5", "active"), 10, "nodes/a5 never became active");
  env_pass();
}
END_TEST

START_TEST(sigterm_resigns) {
  env_config k = config();
  env_bootstrap(&k, 4, 3, 1, "--auto-apply");
  char id[64];
  env_leader(id);
  ck_assert_str_eq(id, "coord-a");
  double t0 = harness_now();
  int rc = proc_term(&env.coord[0], 10);
  ck_assert_msg(rc == 0, "SIGTERM: exit %d", rc);
  double took = harness_now() - t0;
  env_leader(id); /* gone at once: resigned, not left to expire (2 s) */
  ck_assert_msg(id[0] == '\0', "the leader key still names %s after exit", id);
  ck_assert_msg(took < 1.9, "exit took %.2f s", took);
  ck_assert(file_contains(env.coord[0].log, "level=info"));
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{pause_resume_cancel, 300}, {sigterm_resigns, 120}};
  return env_main("coord_control", tests, 2);
}
