/*
 * test_fault_agent.c: agents and disks fail during a migration, on a whole
 * cluster (e2e_cluster.h). Values are 1 KB and each agent takes at most
 * 256 KB/s, so arcs stream for seconds.
 *   killed_mid_stream  kill -9 the joining node's agent while it streams
 *                      its arcs, and start it again; then kill -9 a source
 *                      agent while it serves and start it again: the
 *                      receivers go on from another replica or the same one
 *                      back. The run finishes.
 *   disk_full          the joining node's data dir is a small tmpfs: its
 *                      fetches fail with a clear "no space" error in its
 *                      log, it reports no arc it does not hold, and the
 *                      table never makes it the owner of one. Then the node
 *                      dies: the run fails (a receiver is down) and the
 *                      next plan makes the replicas again from the others.
 */
#include "e2e_cluster.h"

static const e2e_opts big = {
    .per_node = 8, .per_wave = 16, .bytes_per_sec = 256 * 1024, .value_size = 1000};

START_TEST(killed_mid_stream) {
  e2e_bootstrap(&big, 4, 2);
  e2e_reader_start();
  char id[24];
  e2e_join(4, "n4", id);
  /* mid-stream: some 64 KiB in (a quarter second at 256 KiB/s), the run going on */
  ck_assert_msg(ENV_WAIT(env_metric(4, "ring_agent_bytes_in_total") >= 64 * 1024, 30),
                "n4 streams nothing");
  double in = env_metric(4, "ring_agent_bytes_in_total");
  fprintf(stderr, "kill -9 n4's agent after %.0f bytes in (version %" PRIu64 ")\n", in,
          e2e_version());
  proc_kill(&env.a[4].p); /* reaped: its port and data dir are free */
  env_agent_start(4, "n4", NULL);
  /* a source now: some agent that has served bytes since */
  int src = -1;
  ck_assert_msg(ENV_WAIT((env_metric(4, "ring_agent_bytes_in_total") > 0 &&
                          (src = (int)(harness_now() * 10) % 4,
                           env_metric(src, "ring_agent_bytes_out_total") > 0)),
                         30),
                "n4 streams nothing after its restart");
  char state[16];
  e2e_history_state(id, state, NULL);
  fprintf(stderr, "kill -9 source n%d's agent (run %s)\n", src, state[0] ? state : "active");
  proc_kill(&env.a[src].p);
  char sid[8];
  snprintf(sid, sizeof sid, "n%d", src);
  env_agent_start(src, sid, NULL);
  e2e_finish(id, false);
  e2e_reader_check();
  env_pass();
}
END_TEST

/* Whether every token n4 reports in progress/n4 is on its disk. */
static bool reports_only_held(int *reported) {
  char *v = env_get("progress/n4");
  cJSON *j = v ? cJSON_Parse(v) : NULL;
  free(v);
  const cJSON *toks = cJSON_GetObjectItemCaseSensitive(j, "tokens"), *t;
  bool ok = true;
  *reported = 0;
  cJSON_ArrayForEach(t, toks) {
    (*reported)++;
    if (!env_arc_has(4, (uint32_t)t->valuedouble)) {
      fprintf(stderr, "n4 reports token %d but does not hold it\n", t->valueint);
      ok = false;
    }
  }
  cJSON_Delete(j);
  return ok;
}

/* Whether n4 holds every token the table in service makes it own. */
static bool owns_only_held(void) {
  ring_table *t = e2e_table();
  int n = ring_table_find_node(t, "n4");
  bool ok = true;
  for (uint32_t tok = 0; n >= 0 && tok < ring_table_tokens(t); tok++)
    for (uint32_t r = 0; r < ring_table_replicas(t); r++)
      if (ring_table_owner(t, tok, r) == n && !env_arc_has(4, tok)) {
        fprintf(stderr, "v%" PRIu64 ": n4 owns token %u, which it does not hold\n",
                ring_table_version(t), tok);
        ok = false;
      }
  ring_table_free(t);
  return ok;
}

START_TEST(disk_full) {
  if (geteuid() != 0) {
    fprintf(stderr, "skipped: mounting a tmpfs needs root\n");
    env_pass();
    return;
  }
  e2e_bootstrap(&big, 4, 2);
  ck_assert(e2e_mount_tmpfs(4, "n4", 256 * 1024));
  char id[24];
  e2e_join(4, "n4", id);
  ck_assert_msg(ENV_WAIT(file_contains(env.a[4].log, "No space left on device") ||
                             file_contains(env.a[4].log, "more bytes"),
                         60),
                "n4 logs no clear error for its full disk");
  int reported = 0; /* a while of failed fetches: n4 claims only what it holds */
  ck_assert(HARNESS_HOLDS(reports_only_held(&reported) && owns_only_held(), 1.0));
  char state[16];
  e2e_history_state(id, state, NULL);
  ck_assert_msg(state[0] == '\0', "the run ended (%s) with n4's disk full", state);
  double failures = env_metric(4, "ring_agent_fetch_failures_total");
  fprintf(stderr, "n4: %d arcs reported, %.0f fetches failed, %.0f bytes free\n", reported,
          failures, env_metric(4, "ring_agent_data_free_bytes"));
  ck_assert_double_gt(failures, 0);

  /* The node dies: the run fails, the next plan re-replicates from the others. */
  e2e_node_kill(4);
  e2e_unmount(4);
  ck_assert_msg(ENV_WAIT((e2e_history_state(id, state, NULL), state[0] != '\0'), 60),
                "the run did not end after its receiver went down");
  char reason[256];
  e2e_history_state(id, state, reason);
  fprintf(stderr, "the run ended %s: %s\n", state, reason);
  ck_assert_str_eq(state, "failed");
  ck_assert_msg(strstr(reason, "n4"), "the reason does not name the node: %s", reason);
  ck_assert_msg(ENV_WAIT(e2e_record_is("n4", "down"), 30), "n4 is not down");
  e2e_settle(3, 120);
  ck_assert_uint_eq(e2e_replicas_of("n4"), 0);
  e2e_check(false);
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault_agent");
  e2e_add(s, "killed_mid_stream", 1, 300, killed_mid_stream);
  e2e_add(s, "disk_full", 1, 300, disk_full);
  return run_suite_as(s, 1);
}
