/*
 * test_coord_failover.c: two coordinators on one cluster.
 *   - exactly one leads (leader key, ring_coordinator_leader);
 *   - the leader is killed (-9) in the middle of a join whose wave is held
 *     open: the other takes over and finishes the plan with every move
 *     done once (the versions replay consistently, moves_done equals
 *     moves_total, the table verifies clean);
 *   - the leader is frozen (SIGSTOP) past its lease: the other takes over
 *     and starts a plan; thawed, the old leader lands no write (the
 *     version does not move while the new leader waits, its publish
 *     counter stays) and the new leader finishes.
 */
#include "coord_env.h"

static env_config config(void) {
  return (env_config){.tokens = 256, .replicas = 3, .down_after_ms = 1500, .auto_apply = true};
}

/* Exactly one of coordinators 0 and 1 leads; returns it. */
static int one_leader(void) {
  int l = -1;
  WAIT_UNTIL((l = env_leader_index()) >= 0, 15, "no coordinator leads");
  WAIT_UNTIL(env_metric(l, "ring_coordinator_leader", "") == 1 &&
                 env_metric(1 - l, "ring_coordinator_leader", "") == 0,
             10, "ring_coordinator_leader is not 1 on %s and 0 on %s", env.coord_id[l],
             env.coord_id[1 - l]);
  return l;
}

/* A run is active with its wave pending and agent `a` holding progress. */
static bool pending_held(fake_agent *a) {
  env_run r;
  return env_active(&r) && strcmp(r.phase, "pending") == 0 && fake_agent_withheld(a);
}

START_TEST(kill_leader_mid_plan) {
  env_config k = config();
  uint64_t v1 = env_bootstrap(&k, 4, 3, 2, "--auto-apply");
  int l = one_leader();
  env_throttle(&k, 0, 16); /* ~10 waves for the join */

  /* a5 joins; two waves go through, the third is held open */
  fake_agent *a5 = env_agent_w("a5", "z1", 1.0, true);
  WAIT_UNTIL(pending_held(a5), 20, "no pending wave for a5's join");
  ck_assert_int_eq(fake_agent_hold(a5, false), RING_OK);
  env_run r;
  WAIT_UNTIL(env_active(&r) && r.moves_done >= 32, 30, "the join does not get past 2 waves");
  ck_assert_int_eq(fake_agent_hold(a5, true), RING_OK);
  WAIT_UNTIL(pending_held(a5), 20, "no further pending wave");
  ck_assert(env_active(&r));
  ck_assert_double_lt(r.moves_done, r.moves_total);
  uint64_t v_kill = env_version();
  fprintf(stderr, "killing %s at v%llu, %.0f of %.0f moves done\n", env.coord_id[l],
          (unsigned long long)v_kill, r.moves_done, r.moves_total);
  proc_kill(&env.coord[l]);
  ck_assert_int_eq(fake_agent_hold(a5, false), RING_OK);

  /* the other takes over after the lease, resumes and finishes */
  int o = 1 - l;
  WAIT_UNTIL(env_leader_index() == o, 15, "%s does not take over", env.coord_id[o]);
  env_run run = env_wait_done(2, 90);
  uint64_t v2 = env_version();
  ck_assert_uint_gt(v2, v_kill);
  ck_assert_double_eq(run.base_version, (double)v1);
  ck_assert_double_eq(run.moves_done, run.moves_total);
  ck_assert_double_eq(run.moves_total, run.lower_bound);
  ck_assert_uint_eq(env_replay(v1, v2, true), (uint32_t)run.moves_total);
  ring_table *t = env_verify_clean();
  ck_assert_uint_eq(env_replicas(t, "a5"), (uint32_t)run.moves_total);
  env_assert_balanced(t);
  ring_table_free(t);
  WAIT_UNTIL(env_node_is("a5", "active"), 10, "nodes/a5 never became active");
  WAIT_UNTIL(env_metric(o, "ring_coordinator_leader", "") == 1 &&
                 env_metric(o, "ring_coordinator_publishes_total", "") >= 1,
             5, "the new leader's gauges do not say it leads and published");
  WAIT_UNTIL(env_all_acked(v2), 10, "not every agent acked v%llu", (unsigned long long)v2);
  env_pass();
}
END_TEST

/* Every put of the version key seen by a watch: values in order. */
typedef struct version_log {
  pthread_mutex_t mu;
  uint64_t v[1024];
  int n;
} version_log;

static int on_version(void *ud, const ring_event *ev, uint32_t n, int64_t rev, bool compacted) {
  (void)rev;
  (void)compacted;
  version_log *log = ud;
  pthread_mutex_lock(&log->mu);
  for (uint32_t i = 0; i < n; i++)
    if (ev[i].type == RING_EVENT_PUT && log->n < 1024)
      log->v[log->n++] = strtoull((char *)ev[i].kv.value, NULL, 10);
  pthread_mutex_unlock(&log->mu);
  return 0;
}

START_TEST(frozen_leader_is_fenced) {
  env_config k = config();
  uint64_t v1 = env_bootstrap(&k, 4, 3, 2, "--auto-apply");
  int l = one_leader(), o = 1 - l;
  double published = env_metric(l, "ring_coordinator_publishes_total", "");
  ck_assert_double_ge(published, 1);
  char old_id[64];
  snprintf(old_id, sizeof old_id, "%s", env.coord_id[l]);

  /* every version written from now on */
  version_log vlog = {.n = 0};
  pthread_mutex_init(&vlog.mu, NULL);
  ring_watch *w;
  ring_error err;
  const char *vkey = ENV_PREFIX "version";
  ck_assert_msg(ring_etcd_watch(env.c, vkey, strlen(vkey), false, 0, on_version, &vlog, &w, &err) ==
                    RING_OK,
                "%s", err.message);

  /* freeze the leader past its 2 s lease: the other takes over */
  proc_signal(&env.coord[l], SIGSTOP);
  WAIT_UNTIL(env_leader_index() == o, 20, "%s does not take over from the frozen %s",
             env.coord_id[o], old_id);
  /* the new leader starts a join and holds in its first wave */
  env_throttle(&k, 0, 16);
  fake_agent *a5 = env_agent_w("a5", "z1", 1.0, true);
  WAIT_UNTIL(pending_held(a5), 20, "the new leader has no pending wave for a5");
  uint64_t v_held = env_version();

  /* thawed, the old leader must land nothing: the version stays while the
   * new leader waits for progress, and its publish counter stays */
  proc_signal(&env.coord[l], SIGCONT);
  double end = harness_now() + 4;
  while (harness_now() < end) {
    ck_assert_msg(env_version() == v_held, "the version moved from %llu to %llu while held",
                  (unsigned long long)v_held, (unsigned long long)env_version());
    harness_sleep_ms(100);
  }
  ck_assert(proc_running(&env.coord[l]));
  WAIT_UNTIL(env_metric(l, "ring_coordinator_leader", "") == 0, 10,
             "the thawed %s still reports itself leader", old_id);
  ck_assert_double_eq(env_metric(l, "ring_coordinator_publishes_total", ""), published);
  ck_assert_int_eq(env_leader_index(), o);

  /* the new leader finishes */
  ck_assert_int_eq(fake_agent_hold(a5, false), RING_OK);
  env_run run = env_wait_done(2, 90);
  uint64_t v2 = env_version();
  ck_assert_double_eq(run.moves_done, run.moves_total);
  ck_assert_uint_eq(env_replay(v1, v2, true), (uint32_t)run.moves_total);
  ring_table_free(env_verify_clean());
  ck_assert_double_eq(env_metric(l, "ring_coordinator_publishes_total", ""), published);
  ck_assert_int_eq(env_leader_index(), o);
  ring_watch_cancel(w);
  /* versions went up one at a time, from v1 + 1 to v2 */
  pthread_mutex_lock(&vlog.mu);
  ck_assert_int_gt(vlog.n, 0);
  for (int i = 0; i < vlog.n; i++)
    ck_assert_msg(vlog.v[i] == v1 + 1 + (uint64_t)i, "version write #%d is %llu, want %llu", i,
                  (unsigned long long)vlog.v[i], (unsigned long long)(v1 + 1 + (uint64_t)i));
  ck_assert_uint_eq(vlog.v[vlog.n - 1], v2);
  pthread_mutex_unlock(&vlog.mu);
  pthread_mutex_destroy(&vlog.mu);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{kill_leader_mid_plan, 300}, {frozen_leader_is_fenced, 300}};
  return env_main("coord_failover", tests, 2);
}
