/*
 * test_ringctl_json.c: the commands that change a cluster, with --json,
 * against real etcd: each prints one JSON object that parses and carries
 * exactly the fields its help names, with the values of what it did.
 *
 * Sections: init; node records; plans and runs; render and accept-loss.
 */
#include "ringctl_fixture.h"

#include <unistd.h>

/* -------------------------------------------------------------------- init */

START_TEST(init_json) {
  cJSON *j = fx_json(0, "j-init", "init --tokens 64 --replicas 2 --failure-domain zone");
  const char *const fields[] = {"cluster",     "tokens",    "replicas",   "failure_domain",
                                "best_effort", "migration", "auto_apply", "created"};
  fx_fields(j, fields, 8);
  ck_assert_str_eq(fx_str(j, "cluster"), "j-init");
  ck_assert_int_eq((int)fx_num(j, "tokens"), 64);
  ck_assert_int_eq((int)fx_num(j, "replicas"), 2);
  ck_assert_str_eq(fx_str(j, "failure_domain"), "zone");
  ck_assert_str_eq(fx_str(j, "best_effort"), "none");
  ck_assert_str_eq(fx_str(j, "migration"), "stream");
  ck_assert_str_eq(fx_str(j, "auto_apply"), "repair");
  ck_assert(cJSON_IsTrue(fx_get(j, "created")));
  cJSON_Delete(j);
}
END_TEST

/* ------------------------------------------------------------ node records */

/* Runs `ringctl ARGS --json` for a node edit and checks its object. */
static void expect_edit(const char *cluster, const char *args, const char *field, const char *value,
                        const char *was, bool changed) {
  cJSON *j = fx_json(0, cluster, "%s", args);
  const char *const fields[] = {"node", field, "was", "changed"};
  fx_fields(j, fields, 4);
  ck_assert_str_eq(fx_str(j, "node"), "n0");
  ck_assert_str_eq(fx_str(j, field), value);
  ck_assert_str_eq(fx_str(j, "was"), was);
  ck_assert_int_eq(cJSON_IsTrue(fx_get(j, "changed")), changed);
  cJSON_Delete(j);
}

START_TEST(node_edits_json) {
  fx_seed_cluster("j-node");
  expect_edit("j-node", "drain n0", "desired", "drained", "active", true);
  expect_edit("j-node", "drain n0", "desired", "drained", "drained", false);
  expect_edit("j-node", "undrain n0", "desired", "active", "drained", true);
  cJSON *j = fx_json(0, "j-node", "weight n0 2.5");
  const char *const fields[] = {"node", "weight", "was", "changed"};
  fx_fields(j, fields, 4);
  ck_assert_str_eq(fx_str(j, "node"), "n0");
  ck_assert(fx_num(j, "weight") == 2.5);
  ck_assert(cJSON_IsTrue(fx_get(j, "changed")));
  cJSON_Delete(j);
  rk_node n = fx_node("j-node", "n0"); /* what the JSON said is what was written */
  ck_assert(n.weight == 2.5);
  ck_assert_int_eq(n.desired, RK_WANT_ACTIVE);
}
END_TEST

/* ---------------------------------------------------------- plans and runs */

static void expect_run(const char *args, const char *id, const char *state, bool changed) {
  cJSON *j = fx_json(0, "j-run", "%s", args);
  const char *const fields[] = {"plan", "state", "changed"};
  fx_fields(j, fields, 3);
  ck_assert_str_eq(fx_str(j, "plan"), id);
  ck_assert_str_eq(fx_str(j, "state"), state);
  ck_assert_int_eq(cJSON_IsTrue(fx_get(j, "changed")), changed);
  cJSON_Delete(j);
}

START_TEST(apply_and_runs_json) {
  fx_seed_cluster("j-run");
  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("j-run", "n6", "z0", id);
  FX_EXPECT_IN(2, err, "without --wait", "j-run", "apply --wait --json");
  cJSON *j = fx_json(0, "j-run", "apply");
  const char *const fields[] = {"plan", "base_version", "moves_total", "waves", "applied"};
  fx_fields(j, fields, 5);
  ck_assert_str_eq(fx_str(j, "plan"), id);
  ck_assert_int_eq((int)fx_num(j, "base_version"), 1);
  ck_assert_int_gt((int)fx_num(j, "moves_total"), 0);
  ck_assert_int_gt((int)fx_num(j, "waves"), 0);
  ck_assert(cJSON_IsTrue(fx_get(j, "applied")));
  cJSON_Delete(j);
  expect_run("pause", id, "paused", true);
  expect_run("pause", id, "paused", false);
  expect_run("resume", id, "active", true);
  expect_run("cancel", id, "cancelling", true);
}
END_TEST

/* ------------------------------------------------ render and accept-loss */

START_TEST(render_json) {
  fx_seed_cluster("j-render");
  char path[400];
  snprintf(path, sizeof path, "%s/ring.svg", fx_etcd.base);
  cJSON *j = fx_json(0, "j-render", "render --svg %s", path);
  const char *const fields[] = {"file", "what", "bytes", "version"};
  fx_fields(j, fields, 4);
  ck_assert_str_eq(fx_str(j, "file"), path);
  ck_assert_str_eq(fx_str(j, "what"), "ring");
  ck_assert_int_gt((int)fx_num(j, "bytes"), 0);
  ck_assert_int_eq((int)fx_num(j, "version"), 1);
  cJSON_Delete(j);
  ck_assert_int_eq(access(path, R_OK), 0);
}
END_TEST

START_TEST(accept_loss_json_nothing) {
  fx_seed_cluster("j-loss");
  cJSON *j = fx_json(0, "j-loss", "accept-loss --lost --yes");
  const char *const fields[] = {"version", "tokens", "written"};
  fx_fields(j, fields, 3);
  ck_assert_int_eq((int)fx_num(j, "version"), 1);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "tokens")), 0);
  ck_assert(cJSON_IsFalse(fx_get(j, "written"))); /* nothing lost: nothing to write */
  cJSON_Delete(j);
  fx_assert_absent("j-loss", "loss");
}
END_TEST

int main(void) {
  const TTest *const tests[] = {init_json, node_edits_json, apply_and_runs_json, render_json,
                                accept_loss_json_nothing};
  return fx_main("ringctl_json", tests, sizeof tests / sizeof tests[0]);
}
