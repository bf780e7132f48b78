/*
 * test_agent_move.c: arcs moving between real ring-agents on versions
 * published by hand. A holds arcs it owns; a version with B pending for
 * them makes B fetch them (byte-identical), ack the version and report the
 * tokens in progress/B; the cutover version makes A drop its copies after
 * the 1 s grace while B keeps them. A stale copy on B (left from an old
 * ownership) is replaced, never reported as it is. Migration mode `none`
 * fetches nothing. Agents with a certificate move arcs over HTTPS. An
 * arc B fetched and owned is rechecked when B is pending for it again
 * after versions it never saw (one took the token away: its writes went
 * to A only), never reported as it is.
 */
#include "test_agent_env.h"

#define A 0
#define B 1

static const uint32_t moving[] = {2, 4, 6, 10}; /* even tokens: A's with 2 nodes, R 1 */
#define N_MOVING 4

static bool all_fetched(void) {
  for (int k = 0; k < N_MOVING; k++)
    if (!env_arc_has(B, moving[k]))
      return false;
  return true;
}

static bool none_on_a(void) {
  for (int k = 0; k < N_MOVING; k++)
    if (env_arc_has(A, moving[k]))
      return false;
  return true;
}

/* Version v: R 1 over A and B (even tokens A's, odd B's), with B pending
 * for the moving tokens when `pending`, or owning them when `cutover`. */
static void publish_version(uint64_t v, bool pending, bool cutover) {
  ring_table *t = env_table(v, 2, 1);
  for (int k = 0; k < N_MOVING; k++) {
    if (pending)
      ck_assert_int_eq(ring_table_add_pending(t, moving[k], 0, B), RING_OK);
    if (cutover)
      ck_assert_int_eq(ring_table_set_owner(t, moving[k], 0, B), RING_OK);
  }
  env_publish_free(t);
}

START_TEST(pending_fetch_then_cutover_drop) {
  env_config(1, 2, 0);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  for (int k = 0; k < N_MOVING; k++)
    env_arc_write(A, moving[k], 3, 40000 + 1000 * (uint64_t)k, 7);
  env_arc_write(A, 8, 2, 5000, 7); /* stays A's throughout */
  /* A stale copy of token 10 on B, from an ownership long gone: it must be
   * replaced by A's, not reported as it is. */
  env_arc_write(B, 10, 1, 999, 99);
  env_agent_start(A, "a", NULL);
  env_agent_start(B, "b", "--drop-grace 30s");
  publish_version(1, false, false);
  ck_assert(ENV_WAIT(env_ack("a") == 1 && env_ack("b") == 1, 10));

  publish_version(2, true, false);
  ck_assert_msg(ENV_WAIT(env_progress_is("b", 2, moving, N_MOVING), 20),
                "progress/b never covered the moving tokens");
  ck_assert_uint_ge(env_ack("b"), 2);
  for (int k = 0; k < N_MOVING; k++)
    ck_assert_msg(env_arc_same(A, B, moving[k]), "token %u differs", moving[k]);
  ck_assert(env_arc_has(A, 8) && !env_arc_has(B, 8));
  ck_assert_double_ge(env_metric(B, "ring_agent_arcs_fetched_total"), N_MOVING);
  ck_assert_double_ge(env_metric(B, "ring_agent_stale_removed_total"), 1);
  ck_assert_double_gt(env_metric(B, "ring_agent_bytes_in_total"), 4 * 40000);
  ck_assert_double_gt(env_metric(A, "ring_agent_bytes_out_total"), 4 * 40000);
  ck_assert_double_eq(env_metric(B, "ring_agent_pending_version"), 2);

  publish_version(3, false, true);
  ck_assert_msg(ENV_WAIT(none_on_a(), 10), "A kept arcs it no longer owns");
  ck_assert(all_fetched());
  ck_assert(env_arc_has(A, 8));
  /* The arcs leave the disk a moment before the counter moves: wait for it. */
  ck_assert(ENV_WAIT(env_metric(A, "ring_agent_arcs_dropped_total") == N_MOVING, 5));
  ck_assert(ENV_WAIT(env_ack("a") == 3 && env_ack("b") == 3, 10));
  ck_assert(ENV_WAIT(env_metric(B, "ring_agent_version") == 3, 5));
  env_pass();
}
END_TEST

START_TEST(migration_none_fetches_nothing) {
  char json[600];
  snprintf(json, sizeof json,
           "{\"format\":\"ringkeeper.config.v1\",\"tokens\":%u,\"replicas\":1,\"seed\":0,"
           "\"failure_domain\":\"\",\"best_effort\":\"\",\"migration\":\"none\","
           "\"down_after_ms\":60000,\"auto_apply\":false,"
           "\"throttle\":{\"moves_per_node\":0,\"moves_per_domain\":0,\"moves_per_wave\":0,"
           "\"bytes_per_sec\":0},\"retention\":{\"versions\":16,\"plans\":32}}",
           ENV_TOKENS);
  env_put("config", json);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  env_arc_write(A, 2, 1, 1000, 1);
  env_agent_start(A, "a", NULL);
  env_agent_start(B, "b", NULL);
  publish_version(1, false, false);
  publish_version(2, false, true); /* cutover at once: nothing to stream */
  ck_assert(ENV_WAIT(env_ack("a") == 2 && env_ack("b") == 2, 10));
  ck_assert_msg(ENV_WAIT(!env_arc_has(A, 2), 10), "A kept an arc it no longer owns");
  /* B owns token 2 now, granted with nothing to copy: it holds it, empty,
   * so it can serve it as an arc like any other (explicit ownership). */
  ck_assert_msg(ENV_WAIT(env_arc_has(B, 2), 10), "B does not hold the token it owns");
  ck_assert_double_ge(env_metric(B, "ring_agent_arcs_adopted_total"), 1);
  ck_assert_double_eq(env_metric(B, "ring_agent_arcs_missing"), 0);
  ck_assert_double_eq(env_metric(B, "ring_agent_arcs_fetched_total"), 0);
  ck_assert_ptr_null(env_get("progress/b"));
  env_pass();
}
END_TEST

START_TEST(moves_over_tls) {
  char cmd[1200], cert[200], key[200], flags[700];
  snprintf(cert, sizeof cert, "%s/cert.pem", env.dir);
  snprintf(key, sizeof key, "%s/key.pem", env.dir);
  snprintf(cmd, sizeof cmd,
           "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
           "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1",
           key, cert);
  if (system(cmd) != 0) {
    fprintf(stderr, "moves_over_tls: skipped, openssl cannot make a certificate\n");
    env_pass();
    return;
  }
  snprintf(flags, sizeof flags, "--tls-cert %s --tls-key %s --ca-file %s", cert, key, cert);
  env_config(1, 2, 0);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  for (int k = 0; k < N_MOVING; k++)
    env_arc_write(A, moving[k], 2, 100000, 5);
  env_agent_start(A, "a", flags);
  env_agent_start(B, "b", flags);
  publish_version(1, false, false);
  publish_version(2, true, false);
  ck_assert_msg(ENV_WAIT(env_progress_is("b", 2, moving, N_MOVING), 20),
                "progress/b never covered the moving tokens");
  for (int k = 0; k < N_MOVING; k++)
    ck_assert_msg(env_arc_same(A, B, moving[k]), "token %u differs", moving[k]);
  env_pass();
}
END_TEST

/* B fetches the moving arcs (v2) and owns them (v3). Then B sees v5 after
 * v3: v4, which it never saw, gave the tokens back to A (a host cut from
 * etcd, marked down and repaired), and A took a write of token 2 meanwhile.
 * At v5 B is pending for them again, holding its v3 copies: it must
 * recheck them against A (only A's new file is sent), not report them as
 * they are. */
START_TEST(pending_again_after_unseen_version_rechecks) {
  env_config(1, 2, 0);
  env_agent_init(A, "a");
  env_agent_init(B, "b");
  for (int k = 0; k < N_MOVING; k++)
    env_arc_write(A, moving[k], 2, 20000, 3);
  env_agent_start(A, "a", "--drop-grace 60s"); /* A still holds them when they are its again */
  env_agent_start(B, "b", "--drop-grace 60s");
  publish_version(1, false, false);
  publish_version(2, true, false);
  ck_assert_msg(ENV_WAIT(env_progress_is("b", 2, moving, N_MOVING), 20),
                "progress/b never covered the moving tokens");
  publish_version(3, false, true);
  ck_assert(ENV_WAIT(env_ack("b") == 3 && env_metric(B, "ring_agent_version") == 3, 10));
  double in = env_metric(B, "ring_agent_bytes_in_total");

  env_arc_seal(A, 2, "late", 30000); /* a write B missed while the token was A's */
  publish_version(5, true, false);
  ck_assert_msg(ENV_WAIT(env_progress_is("b", 5, moving, N_MOVING), 20),
                "progress/b never covered the moving tokens at v5");
  for (int k = 0; k < N_MOVING; k++)
    ck_assert_msg(env_arc_same(A, B, moving[k]), "token %u: B reported a stale copy", moving[k]);
  ck_assert_double_eq(env_metric(B, "ring_agent_bytes_in_total") - in, 30000);
  ck_assert_double_ge(env_metric(B, "ring_agent_stale_removed_total"), N_MOVING);
  env_pass();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("agent_move");
  env_add(s, "move", 120, pending_fetch_then_cutover_drop);
  env_add(s, "none", 60, migration_none_fetches_nothing);
  env_add(s, "tls", 60, moves_over_tls);
  env_add(s, "unseen", 60, pending_again_after_unseen_version_rechecks);
  return s;
}

int main(void) { return run_suite_as(suite(), 1); }
