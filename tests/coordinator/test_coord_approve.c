/*
 * test_coord_approve.c: without auto-apply the coordinator only proposes.
 * The first placement waits in plan/proposed until `ringctl apply`; a join
 * is proposed and nothing moves; `ringctl plan -o F` saves the plan, and
 * `ringctl apply F` runs it while its base version is current and refuses
 * it (exit 3, nothing changed) once the base is stale.
 */
#include "coord_env.h"

/* plan/proposed as JSON, NULL when absent. */
static cJSON *proposed(void) { return env_json("plan/proposed"); }

static bool proposed_on(uint64_t base) {
  cJSON *p = proposed();
  bool ok = p && jnum(p, "base_version") == (double)base;
  cJSON_Delete(p);
  return ok;
}

/* Checks a plan document's shape (proto/plan.md); returns its id. */
static void check_plan_doc(const cJSON *p, uint64_t base, char id[24]) {
  ck_assert_str_eq(jstr(p, "format"), "ringkeeper.plan.v1");
  ck_assert_str_eq(jstr(p, "cluster"), ENV_CLUSTER);
  ck_assert_double_eq(jnum(p, "base_version"), (double)base);
  const char *pid = jstr(p, "id"), *digest = jstr(p, "digest");
  ck_assert_uint_eq(strlen(pid), 16);
  ck_assert_msg(strncmp(digest, "xxh3-128:", 9) == 0 && strlen(digest) == 41, "digest %s", digest);
  ck_assert_msg(strncmp(digest + 9, pid, 16) == 0, "id %s is not the digest's first 16 digits",
                pid);
  ck_assert_int_eq(cJSON_GetArraySize(jobj(p, "violations")), 0);
  ck_assert_int_eq(jnum(p, "moves_total") > 0, base > 0); /* a first placement has none */
  snprintf(id, 24, "%s", pid);
}

START_TEST(proposals_wait_for_apply) {
  env_config k = {.tokens = 256, .replicas = 3, .down_after_ms = 1500, .auto_apply = false};
  env_config_put(&k);
  env_agent("a1", "z0");
  env_agent("a2", "z1");
  env_agent("a3", "z2");
  env_agent("a4", "z0");
  env_coord_start(0, "coord-a", NULL);

  /* the first placement is a proposal too, and waits */
  WAIT_UNTIL(proposed_on(0), 20, "no plan/proposed for the first placement");
  cJSON *p = proposed();
  char id0[24];
  check_plan_doc(p, 0, id0);
  ck_assert_double_eq(jnum(p, "moves_total"), 0);
  cJSON_Delete(p);
  env_assert_nothing_runs(0, 2000);
  WAIT_UNTIL(env_metric(0, "ring_coordinator_plan", "state=\"proposed\"") == 1, 5,
             "ring_coordinator_plan{state=\"proposed\"} is not 1");

  /* `ringctl apply` approves the current proposal */
  ck_assert_int_eq(env_ringctl(NULL, 0, "apply"), 0);
  env_run first = env_wait_done(1, 60);
  ck_assert_str_eq(first.id, id0);
  uint64_t v1 = env_version();
  ring_table_free(env_verify_clean());
  WAIT_UNTIL(env_all_acked(v1), 10, "not every agent acked v%llu", (unsigned long long)v1);

  /* a join is proposed; nothing moves; the plan is saved to a file */
  env_agent("a5", "z1");
  WAIT_UNTIL(proposed_on(v1), 20, "no plan/proposed for a5's join");
  p = proposed();
  char id1[24];
  check_plan_doc(p, v1, id1);
  double moves1 = jnum(p, "moves_total");
  cJSON_Delete(p);
  char file1[200], out[8192];
  snprintf(file1, sizeof file1, "%s/join-a5.json", env.dir);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "plan -o %s", file1), 0);
  char *saved = file_slurp(file1);
  cJSON *f = cJSON_Parse(saved);
  ck_assert_msg(f != NULL, "%s is not JSON: %.200s", file1, saved);
  free(saved);
  char fid[24];
  check_plan_doc(f, v1, fid);
  ck_assert_str_eq(fid, id1);
  ck_assert_int_eq(cJSON_GetArraySize(jobj(f, "moves")), (int)moves1);
  cJSON_Delete(f);
  env_assert_nothing_runs(v1, 2000);
  ck_assert(env_node_is("a5", "joining"));

  /* `ringctl apply FILE` of the current plan runs it */
  ck_assert_int_eq(env_ringctl(NULL, 0, "apply %s", file1), 0);
  env_run join = env_wait_done(2, 60);
  ck_assert_str_eq(join.id, id1);
  uint64_t v2 = env_version();
  ck_assert_uint_gt(v2, v1);
  ring_table_free(env_verify_clean());
  WAIT_UNTIL(env_node_is("a5", "active"), 10, "nodes/a5 never became active");

  /* another join, approved with `ringctl apply` (no argument) */
  env_agent("a6", "z2");
  WAIT_UNTIL(proposed_on(v2), 20, "no plan/proposed for a6's join");
  char file2[200];
  snprintf(file2, sizeof file2, "%s/join-a6.json", env.dir);
  ck_assert_int_eq(env_ringctl(NULL, 0, "plan -o %s", file2), 0);
  ck_assert_int_eq(env_ringctl(NULL, 0, "apply"), 0);
  env_wait_done(3, 60);
  uint64_t v3 = env_version();
  ring_table_free(env_verify_clean());

  /* both saved plans are stale now: refused with exit 3, nothing changes */
  ck_assert_int_eq(env_ringctl(out, sizeof out, "apply %s", file2), 3);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "apply %s", file1), 3);
  env_assert_nothing_runs(v3, 1500);
  ck_assert_int_eq(env_history_count("done", NULL), 3);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{proposals_wait_for_apply, 300}};
  return env_main("coord_approve", tests, 1);
}
