/*
 * test_fault_coordinator.c: the coordinators die or freeze during an
 * apply, on a whole cluster (e2e_cluster.h: etcd, two coordinators, four
 * nodes of ring-agent + ring-kv, a data set).
 *   killed   kill -9 the leading coordinator at a random point of an
 *            apply, then start it again: the other one takes over and the
 *            run finishes from plan/active. 10 trials (RING_LONG: 30), each
 *            a weight change; every trial prints its seed and when the
 *            kill came (RING_SEED=N replays a run's seeds).
 *   frozen   SIGSTOP the leader mid-apply past its lease: the other one
 *            takes over and finishes; the frozen one, thawed, is fenced
 *            and the run stays done.
 * Every trial ends with e2e_check (ringctl verify, replicas byte for byte,
 * every key read back), and a reader checks that ring-kv served every
 * read throughout.
 */
#include "e2e_cluster.h"

/* Sleeps up to ms, or less when plan `id` went to history meanwhile. */
static void sleep_in_run(const char *id, long ms) {
  double end = harness_now() + (double)ms / 1000.0;
  char state[16];
  while (harness_now() < end) {
    e2e_history_state(id, state, NULL);
    if (state[0])
      return;
    harness_sleep_ms(20);
  }
}

/* The cursor of plan/active as "wave W phase P" into out ("no run"). */
static void cursor_text(char *out, size_t cap) {
  char *v = env_get("plan/active");
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cursor");
  const cJSON *wv = cJSON_GetObjectItemCaseSensitive(c, "wave");
  const cJSON *ph = cJSON_GetObjectItemCaseSensitive(c, "phase");
  const cJSON *md = cJSON_GetObjectItemCaseSensitive(c, "moves_done");
  if (cJSON_IsNumber(wv) && cJSON_IsString(ph) && cJSON_IsNumber(md))
    snprintf(out, cap, "wave %d, phase %s, %d moves done", wv->valueint, ph->valuestring,
             md->valueint);
  else
    snprintf(out, cap, "no run active");
  cJSON_Delete(j);
}

START_TEST(killed) {
  e2e_opts o = {.per_node = 8, .per_wave = 16};
  e2e_bootstrap(&o, 4, 2);
  const char *seed_env = getenv("RING_SEED");
  unsigned base = seed_env ? (unsigned)strtoul(seed_env, NULL, 10)
                           : (unsigned)time(NULL) ^ (unsigned)getpid() << 8;
  int trials = e2e_long() ? 30 : 10;
  fprintf(stderr, "coordinator kill: %d trials, seeds from RING_SEED=%u\n", trials, base);
  e2e_reader_start(); /* reads through every trial */
  for (int k = 0; k < trials; k++) {
    unsigned seed = base + (unsigned)k;
    long delay = (long)(rand_r(&seed) % 2500); /* an apply here takes about 3 s */
    int node = (k / 2) % 4;
    ck_assert_int_eq(e2e_ringctl(NULL, 0, "weight n%d %d", node, k % 2 ? 1 : 2), 0);
    char id[24], where[96];
    e2e_apply(id, 30);
    sleep_in_run(id, delay);
    int leader = e2e_leader();
    ck_assert_int_ge(leader, 0);
    cursor_text(where, sizeof where);
    fprintf(stderr, "trial %d seed %u: kill -9 %s %ld ms into plan %s (version %" PRIu64 ", %s)\n",
            k, base + (unsigned)k, w.coord_id[leader], delay, id, e2e_version(), where);
    proc_kill(&w.coord[leader]);
    e2e_coord_start(leader);
    e2e_wait_done(id, 120);
    e2e_settle(2, 60);
    e2e_check(false);
  }
  e2e_reader_check();
  env_pass();
}
END_TEST

START_TEST(frozen) {
  e2e_opts o = {.per_node = 4, .per_wave = 8};
  e2e_bootstrap(&o, 4, 2);
  e2e_reader_start();
  char id[24], state[16];
  e2e_join(4, "n4", id);
  sleep_in_run(id, 1000);
  e2e_history_state(id, state, NULL);
  ck_assert_msg(!state[0], "plan %s ended (%s) before the freeze", id, state);
  int leader = e2e_leader();
  ck_assert_int_ge(leader, 0);
  int other = 1 - leader;
  fprintf(stderr, "SIGSTOP %s at version %" PRIu64 "\n", w.coord_id[leader], e2e_version());
  proc_signal(&w.coord[leader], SIGSTOP);
  ck_assert_msg(ENV_WAIT(e2e_leader() == other, 15), "%s did not take over", w.coord_id[other]);
  uint64_t took_over = e2e_version();
  /* the leader still frozen, the new one moves the run on and finishes it */
  ck_assert_msg(ENV_WAIT((e2e_history_state(id, state, NULL), state[0]), 120),
                "%s did not finish plan %s while %s was frozen", w.coord_id[other], id,
                w.coord_id[leader]);
  ck_assert_str_eq(state, "done");
  uint64_t done_at = e2e_version();
  ck_assert_uint_gt(done_at, took_over);
  ck_assert_msg(proc_frozen(&w.coord[leader]), "%s thawed before SIGCONT", w.coord_id[leader]);
  fprintf(stderr, "SIGCONT %s at version %" PRIu64 " (%s took over at %" PRIu64 ")\n",
          w.coord_id[leader], done_at, w.coord_id[other], took_over);
  proc_signal(&w.coord[leader], SIGCONT);
  /* thawed, it finds its lease gone and stops leading before writing again */
  ck_assert_msg(
      ENV_WAIT(metric_get(w.coord_listen[leader], "ring_coordinator_leader", "") == 0, 10),
      "the thawed coordinator still says it leads");
  /* the gauge goes at the lease's lapse, the loop steps down a moment after */
  ck_assert(ENV_WAIT(file_contains(w.coord[leader].log, "lost leadership"), 10));
  e2e_wait_done(id, 120);
  e2e_settle(2, 60);
  ck_assert_int_eq(e2e_leader(), other);
  ck_assert_msg(proc_running(&w.coord[leader]), "the thawed coordinator exited");
  e2e_check(false);
  e2e_reader_check();
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault_coordinator");
  e2e_add(s, "killed", 1, e2e_long() ? 3000 : 600, killed);
  e2e_add(s, "frozen", 1, 300, frozen);
  return run_suite_as(s, 1);
}
