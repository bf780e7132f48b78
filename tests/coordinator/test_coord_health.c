/*
 * test_coord_health.c: the coordinator's /healthz means it, and `ringctl
 * status` names the same reasons (issue 30, part A), with real etcd, the
 * real coordinator and ringctl, and fake agents:
 *   - policy none: a missing replica nobody refills ("refill waits for
 *     policy none", status no longer says "refilled"), then a dead host's
 *     token-replicas below R ("repair waits for policy none"), each with
 *     its gauge and its reason in `status` and `status --json`;
 *   - a receiver that dies in the middle of a run: its moves are stuck
 *     ("receiver a5 is not alive") after --stuck-after;
 *   - `ringctl label a2 zone-` is refused without --force; with it every
 *     plan is refused and a2's host disagrees with its record: both are
 *     reasons; draining the only node of a zone (fewer zones than R) is
 *     refused without --force;
 *   - load: every node has a numeric `bytes` in `status --json` and
 *     `members --json` (bytes_reported false before any sizes/), the sum
 *     of its sizes/ report after, and a BYTES column;
 *   - lifecycle: a drained node shows `drained`; removed with its agent
 *     still running it stays removed (never joining), is counted and shown
 *     "removed, agent still running"; once its agent stops it is hidden
 *     from status and members unless --all.
 */
#include "coord_env.h"

#include <inttypes.h>

static bool healthz_has(long status, const char *needle) {
  char body[2048];
  return env_healthz(0, body, sizeof body) == status && strstr(body, needle) != NULL;
}

static bool metric_is(const char *name, double want) { return env_metric(0, name, "") == want; }

/* `ringctl ARGS --json` parsed (cJSON_Delete it); exits 0. */
static cJSON *ringctl_json(const char *args) {
  static char out[1 << 17];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "%s --json", args), 0);
  cJSON *o = cJSON_Parse(out);
  ck_assert_msg(o != NULL, "not JSON: %.300s", out);
  return o;
}

/* Whether `ringctl status --json` has a health reason of `kind` whose text
 * holds `needle` (and health.ok is false), or, kind NULL, health.ok. */
static bool status_reason(const char *kind, const char *needle) {
  cJSON *o = ringctl_json("status");
  const cJSON *h = jobj(o, "health");
  bool found = kind == NULL && cJSON_IsTrue(jobj(h, "ok"));
  const cJSON *r;
  cJSON_ArrayForEach(r, jobj(h, "reasons")) {
    found = found || (kind != NULL && strcmp(jstr(r, "kind"), kind) == 0 &&
                      strstr(jstr(r, "text"), needle) != NULL && cJSON_IsFalse(jobj(h, "ok")));
  }
  cJSON_Delete(o);
  return found;
}

/* `ringctl status` (text) holds needle. */
static bool status_says(const char *args, const char *needle) {
  static char out[1 << 17];
  return env_ringctl(out, sizeof out, "%s", args) == 0 && strstr(out, needle) != NULL;
}

/* The node `id` of `ringctl CMD --json`'s nodes; NULL when not listed. */
static const cJSON *node_of(const cJSON *o, const char *id) {
  const cJSON *n;
  cJSON_ArrayForEach(n, jobj(o, "nodes")) {
    if (strcmp(jstr(n, "id"), id) == 0)
      return n;
  }
  return NULL;
}

/* Every node of `ringctl CMD --json` has a numeric bytes; with `reported`
 * each equals what sizes() makes its own report sum to, else 0 unreported. */
static void assert_bytes(const char *cmd, const ring_table *t, bool reported) {
  cJSON *o = ringctl_json(cmd);
  const cJSON *n;
  int count = 0;
  cJSON_ArrayForEach(n, jobj(o, "nodes")) {
    ck_assert_msg(cJSON_IsNumber(jobj(n, "bytes")), "%s: %s has no numeric bytes", cmd,
                  jstr(n, "id"));
    ck_assert(cJSON_IsBool(jobj(n, "bytes_reported")));
    ck_assert(cJSON_IsTrue(jobj(n, "bytes_reported")) == reported);
    double want = reported ? 1000.0 * env_replicas(t, jstr(n, "id")) : 0;
    ck_assert_msg(jnum(n, "bytes") == want, "%s: %s bytes %.0f, want %.0f", cmd, jstr(n, "id"),
                  jnum(n, "bytes"), want);
    count++;
  }
  ck_assert_int_gt(count, 0);
  cJSON_Delete(o);
}

static uint64_t kilobyte(const ring_table *t, uint32_t tok, uint16_t owner) {
  (void)t, (void)tok, (void)owner;
  return 1000;
}

/* A token node `id` owns in t. */
static uint32_t owned_token(const ring_table *t, const char *id) {
  for (uint32_t tok = 0; tok < ring_table_tokens(t); tok++)
    for (uint32_t s = 0; s < ring_table_replicas(t); s++)
      if (strcmp(env_owner(t, tok, s), id) == 0)
        return tok;
  ck_abort_msg("%s owns nothing", id);
  return 0;
}

START_TEST(policy_none_is_loud) {
  env_config k = {.tokens = 128, .replicas = 3, .down_after_ms = 1500, .auto_apply = false};
  uint64_t v1 = env_bootstrap(&k, 6, 3, 1, "");
  WAIT_UNTIL(healthz_has(200, "ok") && status_reason(NULL, NULL), 10, "not calm at the start");
  ring_table *t = env_table(v1);

  /* load: numeric bytes before any report, then the sum of each report */
  assert_bytes("status", t, false);
  assert_bytes("members", t, false);
  env_put_sizes(t, kilobyte);
  assert_bytes("status", t, true);
  assert_bytes("members", t, true);
  char need[64];
  snprintf(need, sizeof need, "%.1f KiB", 1000.0 * env_replicas(t, "a1") / 1024);
  ck_assert_msg(status_says("members", "BYTES") && status_says("members", need), "no %s", need);

  /* a2 reports an owned arc missing: under none nothing refills it */
  char value[160];
  snprintf(value, sizeof value,
           "{\"format\":\"ringkeeper.missing.v1\",\"version\":%" PRIu64 ",\"tokens\":[%u]}", v1,
           owned_token(t, "a2"));
  env_put("missing/a2", value);
  WAIT_UNTIL(healthz_has(503, "refill waits for policy none"), 10, "/healthz: no refill reason");
  WAIT_UNTIL(metric_is("ring_coordinator_refill_waiting_replicas", 1), 10, "refill gauge not 1");
  ck_assert(status_reason("refill_waits", "refill waits for policy none"));
  ck_assert(status_says("status", "NOT refilled"));
  ck_assert(!status_says("status", "refilled from the other owners"));
  ck_assert_int_eq(ring_etcd_delete(env.c, ENV_PREFIX "missing/a2", strlen(ENV_PREFIX "missing/a2"),
                                    false, NULL, NULL, NULL),
                   RING_OK);
  WAIT_UNTIL(healthz_has(200, "ok"), 10, "/healthz is not ok once the arc is back");
  ck_assert(metric_is("ring_coordinator_refill_waiting_replicas", 0));

  /* a3 dies: its token-replicas are below R and the repair waits */
  uint32_t had = env_replicas(t, "a3");
  ring_table_free(t);
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a3")), RING_OK);
  WAIT_UNTIL(env_node_is("a3", "down"), 20, "a3 is not down");
  char reason[96];
  snprintf(reason, sizeof reason, "%u token-replicas below R (down: a3)", had);
  WAIT_UNTIL(healthz_has(503, reason), 20, "/healthz does not say %s", reason);
  WAIT_UNTIL(env_exists("plan/proposed"), 20, "no repair proposed");
  WAIT_UNTIL(healthz_has(503, "; repair waits for policy none"), 10, "/healthz: no policy reason");
  ck_assert(metric_is("ring_coordinator_down_replicas", had));
  ck_assert(status_reason("below_r", reason));
  ck_assert(status_reason("below_r", "repair waits for policy none"));
  ck_assert(status_says("status", "health:   degraded: "));

  /* approved, it runs; once done everything is calm again */
  ck_assert_int_eq(env_ringctl(NULL, 0, "apply"), 0);
  env_wait_done(2, 60);
  WAIT_UNTIL(healthz_has(200, "ok") && metric_is("ring_coordinator_down_replicas", 0), 20,
             "/healthz not ok after the repair");
  ck_assert(status_reason(NULL, NULL));
  env_pass();
}
END_TEST

/* A receiver that dies in the middle of a run: stuck, named, degraded. */
START_TEST(dead_receiver_is_stuck) {
  env_config k = {.tokens = 64, .replicas = 2, .down_after_ms = 60000, .auto_apply = true};
  env_bootstrap(&k, 4, 3, 1, "--stuck-after 2s");
  WAIT_UNTIL(healthz_has(200, "ok"), 10, "not calm at the start");
  fake_agent *a5 = env_agent_w("a5", "z1", 1.0, true); /* receives, reports nothing */
  env_run r;
  WAIT_UNTIL(env_active(&r), 20, "the join does not run");
  ck_assert_int_eq(fake_agent_kill(a5), RING_OK);
  WAIT_UNTIL(healthz_has(503, "receiver a5 is not alive"), 20, "/healthz does not name a5");
  ck_assert(env_metric(0, "ring_coordinator_stuck_moves", "") > 0);
  ck_assert(status_says("status", "a5 is not alive"));
  env_pass();
}
END_TEST

START_TEST(refusals_are_loud) {
  env_config k = {.tokens = 64, .replicas = 3, .down_after_ms = 60000, .auto_apply = true};
  env_bootstrap(&k, 4, 3, 1, ""); /* a1 z0, a2 z1, a3 z2, a4 z0 */
  WAIT_UNTIL(healthz_has(200, "ok"), 10, "not calm at the start");
  char out[4096];

  /* draining the only node of z1 leaves 2 zones for R=3: refused */
  ck_assert_int_eq(env_ringctl(out, sizeof out, "drain a2"), 1);
  ck_assert_msg(strstr(out, "refused") && strstr(out, "--force"), "%s", out);
  env_node n;
  ck_assert(env_node_read("a2", &n));
  ck_assert_str_eq(n.desired, "active");

  /* removing the failure-domain key: refused, then forced */
  ck_assert_int_eq(env_ringctl(out, sizeof out, "label a2 zone-"), 1);
  ck_assert_msg(strstr(out, "failure domain") && strstr(out, "--force"), "%s", out);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "label a2 zone- --force"), 0);
  WAIT_UNTIL(healthz_has(503, "every plan is refused"), 20, "/healthz: no refusal");
  WAIT_UNTIL(healthz_has(503, "labels differ from their record (a2)"), 10, "/healthz: labels");
  WAIT_UNTIL(metric_is("ring_coordinator_plans_refused", 1) &&
                 metric_is("ring_coordinator_label_mismatch_nodes", 1),
             10, "the refusal and mismatch gauges are not 1");
  ck_assert(status_reason("plan_refused", "every plan is refused"));
  ck_assert(status_reason("label_mismatch", "(a2)"));

  /* the record settled: calm again */
  ck_assert_int_eq(env_ringctl(out, sizeof out, "label a2 zone=z1"), 0);
  WAIT_UNTIL(healthz_has(200, "ok"), 20, "/healthz is not ok once a2's zone is back");
  ck_assert(metric_is("ring_coordinator_plans_refused", 0));
  ck_assert(status_reason(NULL, NULL));
  env_pass();
}
END_TEST

/* Whether `ringctl CMD --json` lists `id` in `state`. */
static bool listed_as(const char *cmd, const char *id, const char *state) {
  cJSON *o = ringctl_json(cmd);
  const cJSON *n = node_of(o, id);
  bool yes = n != NULL && strcmp(jstr(n, "state"), state) == 0;
  cJSON_Delete(o);
  return yes;
}

START_TEST(lifecycle_settles) {
  env_config k = {.tokens = 64, .replicas = 2, .down_after_ms = 60000, .auto_apply = true};
  env_bootstrap(&k, 4, 2, 1, ""); /* a1 z0, a2 z1, a3 z0, a4 z1 */

  /* a drain done shows as drained */
  ck_assert_int_eq(env_ringctl(NULL, 0, "drain a1"), 0);
  env_wait_done(2, 60);
  WAIT_UNTIL(listed_as("status", "a1", "drained") && listed_as("members", "a1", "drained"), 10,
             "a1 does not show drained");
  ck_assert(status_says("members", "drained"));

  /* removed with its agent running: stays removed, counted, shown */
  ck_assert_int_eq(env_ringctl(NULL, 0, "remove a1"), 0);
  WAIT_UNTIL(env_node_is("a1", "removed"), 30, "a1 never became removed");
  WAIT_UNTIL(metric_is("ring_coordinator_removed_alive_nodes", 1), 10, "removed_alive is not 1");
  ck_assert_msg(HARNESS_HOLDS(env_node_is("a1", "removed"), 3), "a1 flipped out of removed");
  ck_assert(status_says("status", "removed, agent still running"));
  cJSON *o = ringctl_json("status");
  ck_assert(cJSON_IsTrue(jobj(node_of(o, "a1"), "agent_running")));
  cJSON_Delete(o);

  /* its agent stops: hidden unless --all */
  ck_assert_int_eq(fake_agent_kill(env_agent_find("a1")), RING_OK);
  WAIT_UNTIL(metric_is("ring_coordinator_removed_alive_nodes", 0), 20, "removed_alive stays");
  o = ringctl_json("status");
  ck_assert_ptr_null(node_of(o, "a1"));
  cJSON_Delete(o);
  ck_assert(listed_as("status --all", "a1", "removed"));
  ck_assert(listed_as("members --all", "a1", "removed"));
  ck_assert(status_says("members", "1 removed nodes hidden"));
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{policy_none_is_loud, 300},
                            {dead_receiver_is_stuck, 180},
                            {refusals_are_loud, 180},
                            {lifecycle_settles, 240}};
  return env_main("coord_health", tests, 4);
}
