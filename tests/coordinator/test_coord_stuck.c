/*
 * test_coord_stuck.c: a move that cannot complete is made loud, never
 * completed by guesswork. A join whose receiver (a fake agent) reports
 * nothing, then reports every fetch failing, with --stuck-after 1s:
 *   - `ringctl apply --wait --stuck-timeout 2s` exits 1 showing the moves;
 *   - /metrics shows ring_coordinator_stuck_moves (and _failing_moves once
 *     the agent reports failures) equal to the receiver's moves in flight;
 *   - /healthz answers 503 "degraded: N moves stuck ..." with the reason;
 *   - the `stuck` key lists the moves with the reason (the agent's error
 *     once it reports one), rewritten when the reason changes;
 *   - `ringctl status` and `--json` list them;
 * and once the receiver reports its tokens the run completes, the gauges
 * go to 0, /healthz is ok again and the `stuck` key is gone.
 *
 * A lagging version barrier is loud too: a registered client that does not
 * ack the version in etcd makes ring_coordinator_barrier_wait_seconds
 * climb, with no plan at all; its ack brings it back to 0.
 */
#include "coord_env.h"

#include <inttypes.h>

#define AGENT_ERROR "source a1 answered not held"

/* Pending entries of the current table that name `id`. */
static uint32_t pending_to(const char *id) {
  ring_table *t = env_table(0);
  ck_assert_ptr_nonnull(t);
  uint32_t n = 0;
  for (uint32_t i = 0; i < ring_table_pending_count(t); i++) {
    uint32_t token, slot;
    uint16_t node;
    ck_assert_int_eq(ring_table_pending_at(t, i, &token, &slot, &node), RING_OK);
    n += strcmp(ring_table_node_id(t, node), id) == 0;
  }
  ring_table_free(t);
  return n;
}

/* The `stuck` key lists n moves, each to `to` with a reason holding `why`. */
static bool stuck_key_is(uint32_t n, const char *to, const char *why) {
  cJSON *o = env_json("stuck");
  if (o == NULL)
    return false;
  ck_assert_str_eq(jstr(o, "format"), "ringkeeper.stuck.v1");
  const cJSON *moves = jobj(o, "moves");
  bool ok = (uint32_t)cJSON_GetArraySize(moves) == n && jnum(o, "more") == 0 &&
            jnum(o, "version") == (double)env_version();
  const cJSON *m;
  cJSON_ArrayForEach(m, moves) {
    ok = ok && strcmp(jstr(m, "to"), to) == 0 && strstr(jstr(m, "error"), why) != NULL &&
         jnum(m, "for_ms") >= 1000;
  }
  cJSON_Delete(o);
  return ok;
}

static bool metric_is(const char *name, uint32_t want) {
  return env_metric(0, name, "") == (double)want;
}

static bool healthz_has(long status, const char *needle) {
  char body[1024];
  return env_healthz(0, body, sizeof body) == status && strstr(body, needle) != NULL;
}

/* `ringctl status --json` lists n stuck moves to `to` and n failing
 * fetches, next to the fields it always had. */
static void check_status_json(uint32_t n, const char *to) {
  char out[65536];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "status --json"), 0);
  cJSON *o = cJSON_Parse(out);
  ck_assert_msg(o != NULL, "not JSON: %.300s", out);
  ck_assert_double_eq(jnum(o, "version"), (double)env_version());
  ck_assert(cJSON_IsArray(jobj(o, "nodes")));
  ck_assert_str_eq(jstr(jobj(o, "plan"), "state"), "active");
  ck_assert_int_eq(cJSON_GetArraySize(jobj(o, "stuck")), (int)n);
  ck_assert_int_eq(cJSON_GetArraySize(jobj(o, "failing")), (int)n);
  const cJSON *m = cJSON_GetArrayItem(jobj(o, "stuck"), 0);
  ck_assert_str_eq(jstr(m, "to"), to);
  ck_assert_msg(strstr(jstr(m, "error"), AGENT_ERROR) != NULL, "%s", jstr(m, "error"));
  ck_assert(!isnan(jnum(m, "token")) && !isnan(jnum(m, "slot")) && !isnan(jnum(m, "for_ms")));
  ck_assert(cJSON_IsString(jobj(m, "from")));
  const cJSON *f = cJSON_GetArrayItem(jobj(o, "failing"), 0);
  ck_assert_str_eq(jstr(f, "node"), to);
  ck_assert_double_eq(jnum(f, "attempts"), 1);
  ck_assert_str_eq(jstr(f, "error"), AGENT_ERROR);
  cJSON_Delete(o);
}

START_TEST(stuck_moves_are_loud) {
  env_config k = {.tokens = 64, .replicas = 2, .down_after_ms = 60000, .auto_apply = true};
  uint64_t v1 = env_bootstrap(&k, 4, 3, 1, "--stuck-after 1s");
  WAIT_UNTIL(metric_is("ring_coordinator_stuck_moves", 0) && healthz_has(200, "ok"), 10,
             "the bootstrapped cluster is not calm");
  k.auto_apply = false; /* the join waits for ringctl apply */
  env_config_put_heard(&k);
  fake_agent *a5 = env_agent_w("a5", "z1", 1.0, true); /* reports nothing */
  WAIT_UNTIL(env_exists("plan/proposed") && env_version() == v1, 20, "no join proposed");

  /* the wait gives up on a run that does not move */
  char out[16384];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "apply --wait --stuck-timeout 2s"), 1);
  ck_assert_msg(strstr(out, "stuck") && strstr(out, "no progress reported by a5"), "%s", out);
  uint32_t n = pending_to("a5");
  ck_assert_uint_gt(n, 0);
  WAIT_UNTIL(metric_is("ring_coordinator_stuck_moves", n), 10, "stuck_moves is not %u", n);
  ck_assert(metric_is("ring_coordinator_failing_moves", 0));
  WAIT_UNTIL(stuck_key_is(n, "a5", "no progress reported by a5"), 10, "no stuck key");
  char body[1024];
  WAIT_UNTIL(env_healthz(0, body, sizeof body) == 503, 10, "/healthz is not degraded: %s", body);
  ck_assert_msg(strncmp(body, "degraded: ", 10) == 0 && strstr(body, "moves stuck for") &&
                    strstr(body, "-> a5: no progress reported by a5"),
                "%s", body);

  /* the agent reports why: every reason changes, and says so everywhere */
  ck_assert_int_eq(fake_agent_fail(a5, AGENT_ERROR), RING_OK);
  WAIT_UNTIL(stuck_key_is(n, "a5", AGENT_ERROR " (1 attempt)"), 10,
             "the stuck key does not carry the agent's error");
  WAIT_UNTIL(metric_is("ring_coordinator_failing_moves", n), 10, "failing_moves is not %u", n);
  WAIT_UNTIL(metric_is("ring_coordinator_stuck_moves", n) && healthz_has(503, AGENT_ERROR), 10,
             "/healthz or the gauge does not carry the agent's error");
  ck_assert_int_eq(env_ringctl(out, sizeof out, "status"), 0);
  ck_assert_msg(strstr(out, "stuck moves: ") && strstr(out, AGENT_ERROR), "%s", out);
  check_status_json(n, "a5");
  env_run r;
  ck_assert(env_active(&r));
  ck_assert_double_eq(r.moves_done, 0); /* nothing completed by guesswork */

  /* the data arrives: the run completes and everything is calm again */
  ck_assert_int_eq(fake_agent_fail(a5, NULL), RING_OK);
  ck_assert_int_eq(fake_agent_hold(a5, false), RING_OK);
  env_run last = env_wait_done(2, 60);
  ck_assert_double_eq(last.moves_done, last.moves_total);
  WAIT_UNTIL(metric_is("ring_coordinator_stuck_moves", 0) &&
                 metric_is("ring_coordinator_failing_moves", 0),
             10, "the gauges do not go back to 0");
  WAIT_UNTIL(healthz_has(200, "ok"), 10, "/healthz is not ok again");
  WAIT_UNTIL(!env_exists("stuck"), 10, "the stuck key stays");
  ck_assert_int_eq(env_ringctl(out, sizeof out, "status"), 0);
  ck_assert_msg(strstr(out, "stuck moves") == NULL, "%s", out);
  env_pass();
}
END_TEST

START_TEST(barrier_wait_is_loud) {
  env_config k = {.tokens = 64, .replicas = 2, .down_after_ms = 60000, .auto_apply = true};
  uint64_t v1 = env_bootstrap(&k, 3, 3, 1, "");
  WAIT_UNTIL(metric_is("ring_coordinator_barrier_wait_seconds", 0), 10,
             "the barrier waits with every agent acked");
  ck_assert(metric_is("ring_coordinator_down_replicas", 0));

  /* a client registers and never acks: the wait is counted from the first
   * look that saw it, and grows */
  env_put("clients/kv.lag", "{\"format\":\"ringkeeper.client.v1\",\"kind\":\"test\"}");
  WAIT_UNTIL(env_metric(0, "ring_coordinator_barrier_wait_seconds", "") >= 1, 10,
             "the barrier wait does not climb with kv.lag unacked");
  double first = env_metric(0, "ring_coordinator_barrier_wait_seconds", "");
  WAIT_UNTIL(env_metric(0, "ring_coordinator_barrier_wait_seconds", "") >= first + 1, 10,
             "the barrier wait stays at %.3f s", first);
  ck_assert_uint_eq(env_version(), v1); /* no plan: the version in etcd waits */

  /* its ack: nobody lags */
  char ack[32];
  snprintf(ack, sizeof ack, "%" PRIu64, v1);
  env_put("acks/kv.lag", ack);
  WAIT_UNTIL(metric_is("ring_coordinator_barrier_wait_seconds", 0), 10,
             "the barrier wait stays after kv.lag acked v%" PRIu64, v1);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{stuck_moves_are_loud, 300}, {barrier_wait_is_loud, 120}};
  return env_main("coord_stuck", tests, 2);
}
