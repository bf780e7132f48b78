/*
 * test_agent_faults.c: ring-agent when things break mid-move.
 *   - kill -9 of the receiver mid-transfer (large files, a low byte rate
 *     from the config), then a SIGTERM mid-transfer (prompt, clean exit,
 *     partial files kept): after the restarts the partial files are
 *     resumed, the arcs complete, the checksums match, and the rate change
 *     reaches the running transfers;
 *   - a receiver killed after installing, before the cutover: on restart
 *     its arcs are rechecked against the source, and only what the source
 *     wrote meanwhile is sent;
 *   - the source dies: the receiver fetches from another owner of the
 *     token, switching after a refused connection while alive/<source> is
 *     still there, and going straight to a live owner once it is gone.
 */
#include "test_agent_env.h"

#define A 0
#define B 1
#define C 2
#define MIB (1u << 20)

static bool progress_covers(const char *id, uint64_t v, const uint32_t *tokens, int n) {
  return env_progress_is(id, v, tokens, n);
}

START_TEST(receiver_killed_mid_transfer_resumes) {
  static const uint32_t big[] = {2, 4};
  env_config(1, 2, 1 * MIB);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  env_arc_write(A, 2, 3, 6 * MIB, 3); /* 6 + 6 + 2 MiB */
  env_arc_write(A, 4, 2, 3 * MIB, 4); /* 3 + 1 MiB */
  env_agent_start(A, "a", NULL);
  env_agent_start(B, "b", NULL);
  ring_table *t = env_table(1, 2, 1);
  env_publish_free(t);
  ck_assert(ENV_WAIT(env_ack("b") == 1, 10));
  ck_assert(ENV_WAIT(env_metric(B, "ring_agent_rate_limit_bytes_per_second") == MIB, 5));

  t = env_table(2, 2, 1);
  for (int k = 0; k < 2; k++)
    ck_assert_int_eq(ring_table_add_pending(t, big[k], 0, B), RING_OK);
  env_publish_free(t);
  ck_assert_msg(ENV_WAIT(env_tmp_bytes(B) >= 3 * MIB / 2, 20), "no partial transfer on B");
  ck_assert(ENV_WAIT(env_metric(B, "ring_agent_arcs_in_flight") == 2, 5));
  proc_kill(&env.a[B].p);
  ck_assert(!env_arc_has(B, 2) && !env_arc_has(B, 4));
  ck_assert(!progress_covers("b", 2, big, 2));
  uint64_t partial = env_tmp_bytes(B);

  env_agent_start(B, "b", NULL);
  ck_assert(ENV_WAIT(env_metric(B, "ring_agent_arcs_in_flight") == 2, 10));
  ck_assert(env_tmp_bytes(B) >= partial); /* kept for the jobs, not swept */

  /* SIGTERM mid-transfer: the fetches stop at once, the partial files stay. */
  ck_assert(ENV_WAIT(env_tmp_bytes(B) >= partial + MIB / 2, 10));
  double t0 = harness_now();
  ck_assert_int_eq(proc_term(&env.a[B].p, 10), 0);
  ck_assert_double_lt(harness_now() - t0, 3);
  ck_assert(!env_arc_has(B, 2) && !env_arc_has(B, 4));
  ck_assert_uint_ge(env_tmp_bytes(B), partial + MIB / 2);
  cJSON *gone = env_alive("b");
  ck_assert_ptr_null(gone);

  env_agent_start(B, "b", NULL);
  ck_assert(ENV_WAIT(env_metric(B, "ring_agent_arcs_in_flight") == 2, 10));
  env_config(1, 2, 0); /* lift the limit: the transfers speed up */
  ck_assert(ENV_WAIT(env_metric(B, "ring_agent_rate_limit_bytes_per_second") == 0, 3));
  ck_assert_msg(ENV_WAIT(progress_covers("b", 2, big, 2), 30), "the arcs did not complete");
  ck_assert_msg(env_metric(B, "ring_agent_resumed_files_total") >= 2,
                "the partial files were not resumed");
  for (int k = 0; k < 2; k++)
    ck_assert_msg(env_arc_same(A, B, big[k]), "token %u differs", big[k]);
  ck_assert_double_lt(env_metric(B, "ring_agent_bytes_in_total"), 18.0 * MIB - (double)partial / 2);
  ck_assert(ENV_WAIT(env_tmp_bytes(B) < 64 * 1024, 5));
  env_pass();
}
END_TEST

/* B installs two arcs and is killed before the cutover. After a restart
 * nothing counts as verified, so both are fetched again, but as rechecks:
 * every file is checked against A's checksums and only what A wrote
 * meanwhile (a new file in one arc) is sent. */
START_TEST(restarted_receiver_rechecks_instead_of_resending) {
  static const uint32_t moving[] = {2, 6};    /* A's in env_table */
  const double arc_bytes = MIB + MIB / 3 + 1; /* env_arc_write's two files */
  env_config(1, 2, 0);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  env_arc_write(A, 2, 2, MIB, 5);
  env_arc_write(A, 6, 2, MIB, 6);
  env_agent_start(A, "a", NULL);
  env_agent_start(B, "b", NULL);
  env_publish_free(env_table(1, 2, 1));
  ck_assert(ENV_WAIT(env_ack("b") == 1, 10));
  ring_table *t = env_table(2, 2, 1);
  for (int k = 0; k < 2; k++)
    ck_assert_int_eq(ring_table_add_pending(t, moving[k], 0, B), RING_OK);
  env_publish_free(t);
  ck_assert_msg(ENV_WAIT(progress_covers("b", 2, moving, 2), 20), "the arcs did not arrive");
  proc_kill(&env.a[B].p);

  env_arc_seal(A, 6, "f2", 100000);
  env_agent_start(B, "b", NULL);
  ck_assert_msg(ENV_WAIT(env_metric(B, "ring_agent_arcs_fetched_total") == 2, 20),
                "the arcs were not rechecked");
  for (int k = 0; k < 2; k++)
    ck_assert_msg(env_arc_same(A, B, moving[k]), "token %u differs", moving[k]);
  ck_assert_double_eq(env_metric(B, "ring_agent_bytes_in_total"), 100000);
  ck_assert_double_eq(env_metric(B, "ring_agent_reused_bytes_total"), 2 * arc_bytes);
  ck_assert_double_eq(env_metric(B, "ring_agent_stale_removed_total"), 2);
  ck_assert_double_eq(env_metric(B, "ring_agent_stale_files_total"), 0);
  ck_assert_double_eq(env_metric(B, "ring_agent_checksum_failures_total"), 0);
  env_pass();
}
END_TEST

/* A table over A, B, C with R 2 where A (slot 0) and C (slot 1) own the
 * tokens in `shared`; B pending on slot 0 of `pending`, owner of slot 0 of
 * `owned`. */
static void publish_abc(uint64_t v, const uint32_t *shared, int n_shared, const uint32_t *pending,
                        int n_pending, const uint32_t *owned, int n_owned) {
  ring_table *t = env_table(v, 3, 2);
  for (int k = 0; k < n_shared; k++) {
    ck_assert_int_eq(ring_table_set_owner(t, shared[k], 0, A), RING_OK);
    ck_assert_int_eq(ring_table_set_owner(t, shared[k], 1, C), RING_OK);
  }
  for (int k = 0; k < n_owned; k++)
    ck_assert_int_eq(ring_table_set_owner(t, owned[k], 0, B), RING_OK);
  for (int k = 0; k < n_pending; k++)
    ck_assert_int_eq(ring_table_add_pending(t, pending[k], 0, B), RING_OK);
  env_publish_free(t);
}

static bool alive_gone(const char *id) {
  cJSON *j = env_alive(id);
  cJSON_Delete(j);
  return j == NULL;
}

START_TEST(dead_source_switches_to_another_owner) {
  static const uint32_t shared[] = {5, 7, 9}, first[] = {5, 7}, second[] = {9};
  env_config(2, 2, 0);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  env_agent_init(C, "c");
  for (int k = 0; k < 3; k++) {
    env_arc_write(A, shared[k], 2, 200000, 11);
    env_arc_write(C, shared[k], 2, 200000, 11);
  }
  env_agent_start(A, "a", NULL);
  env_agent_start(B, "b", NULL);
  env_agent_start(C, "c", NULL);
  publish_abc(1, shared, 3, NULL, 0, NULL, 0);
  ck_assert(ENV_WAIT(env_ack("a") == 1 && env_ack("b") == 1 && env_ack("c") == 1, 10));

  /* A dies; its alive/ key lives on for the lease's TTL: B tries A first. */
  proc_kill(&env.a[A].p);
  ck_assert(!alive_gone("a"));
  publish_abc(2, shared, 3, first, 2, NULL, 0);
  ck_assert_msg(ENV_WAIT(progress_covers("b", 2, first, 2), 20), "B did not fetch from C");
  for (int k = 0; k < 2; k++)
    ck_assert_msg(env_arc_same(C, B, first[k]), "token %u differs", first[k]);
  ck_assert_double_ge(env_metric(B, "ring_agent_source_switches_total"), 1);
  ck_assert(file_contains(env.a[B].log, "source=c"));

  /* Once alive/a is gone, C is the first choice: no switch needed. */
  ck_assert(ENV_WAIT(alive_gone("a"), 10));
  double switches = env_metric(B, "ring_agent_source_switches_total");
  publish_abc(3, shared, 3, second, 1, first, 2);
  ck_assert_msg(ENV_WAIT(progress_covers("b", 3, second, 1), 20), "B did not fetch token 9");
  ck_assert(env_arc_same(C, B, 9));
  ck_assert_double_eq(env_metric(B, "ring_agent_source_switches_total"), switches);
  ck_assert(env_arc_has(B, 5) && env_arc_has(B, 7)); /* owned now */
  env_pass();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("agent_faults");
  env_add(s, "resume", 180, receiver_killed_mid_transfer_resumes);
  env_add(s, "source", 120, dead_source_switches_to_another_owner);
  env_add(s, "recheck", 120, restarted_receiver_rechecks_instead_of_resending);
  return s;
}

int main(void) { return run_suite_as(suite(), 1); }
