/*
 * test_ringctl_loss.c: stuck moves as ringctl shows them and the
 * operator's explicit word on lost data, against real etcd:
 *   - `ringctl accept-loss`: refuses a token that is not pending (exit 2)
 *     and bad lists (exit 2); without --yes it writes nothing and prints
 *     the tokens, the version and the command; --yes writes `loss`; a
 *     stale --version is exit 3; a second acceptance for the same version
 *     is the union, one for an older version is replaced; --stuck takes the
 *     coordinator's report;
 *   - `ringctl status` (text and --json) lists the `stuck` report and the
 *     failing fetches of progress/;
 *   - token-replicas an owner reports in missing/<id>: status names them,
 *     verify fails on them, a token every owner lacks is lost, a token the
 *     host no longer owns is not counted; accept-loss takes them (--lost:
 *     the lost ones) and refuses tokens neither pending nor missing.
 */
#include "ringctl_fixture.h"

#define PLAN_ID "0123456789abcdef"

/* Version 2 of the seeded cluster: the same owners, with `tokens` pending
 * (slot 0) on a node that holds no replica of them. */
static void seed_pending(const char *cluster, const uint32_t *tokens, uint32_t n) {
  fx_seed_cluster(cluster);
  ring_table *t = fx_table(cluster, FX_TOKENS, FX_REPLICAS, FX_NODES, FX_ZONES, 2);
  for (uint32_t i = 0; i < n; i++) {
    uint16_t node = 0;
    while (ring_table_owner(t, tokens[i], 0) == node || ring_table_owner(t, tokens[i], 1) == node)
      node++;
    ck_assert_int_eq(ring_table_add_pending(t, tokens[i], 0, node), RING_OK);
  }
  ring_error err = {0};
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  fx_seed_table(cluster, t);
  ring_table_free(t);
}

static const uint32_t pending[] = {3, 17, 40};
#define N_PENDING 3

/* The loss record of the cluster, decoded (rk_loss_free it). */
static rk_loss loss_of(const char *cluster) {
  char *v = fx_value(cluster, "loss");
  rk_loss l;
  ring_error err = {0};
  ck_assert_msg(rk_loss_decode(v, strlen(v), &l, &err) == RING_OK, "loss: %s (%s)", err.message, v);
  free(v);
  return l;
}

static void assert_tokens(const rk_loss *l, uint64_t version, const uint32_t *want, uint32_t n) {
  ck_assert_uint_eq(l->version, version);
  ck_assert_uint_eq(l->n_tokens, n);
  for (uint32_t i = 0; i < n; i++)
    ck_assert_uint_eq(l->tokens[i], want[i]);
  ck_assert_str_eq(l->by, "ringctl");
  ck_assert_uint_gt(l->at_ms, 1700000000000ull);
}

/* A `stuck` report for `version` listing the moves of tokens[0..n). */
static void seed_stuck(const char *cluster, uint64_t version, const uint32_t *tokens, uint32_t n) {
  rk_stuck k = {.version = version, .plan = PLAN_ID, .n_moves = n};
  k.moves = calloc(n, sizeof *k.moves);
  for (uint32_t i = 0; i < n; i++) {
    k.moves[i] = (rk_stuck_move){.token = tokens[i], .for_ms = 650000};
    snprintf(k.moves[i].from, sizeof k.moves[i].from, "n0");
    snprintf(k.moves[i].to, sizeof k.moves[i].to, "n%u", 1 + i);
    snprintf(k.moves[i].error, sizeof k.moves[i].error,
             "owner n0 does not hold token %u (4 attempts)", tokens[i]);
  }
  char *json;
  size_t len;
  ck_assert_int_eq(rk_stuck_encode(&k, &json, &len), RING_OK);
  fx_put_owned(cluster, "stuck", json, len);
  rk_stuck_free(&k);
}

START_TEST(accept_loss_refuses) {
  seed_pending("l-refuse", pending, N_PENDING);
  static const char *const usage[] = {
      "accept-loss",      "accept-loss 3 --stuck", "accept-loss 3,x",
      "accept-loss 5-3",  "accept-loss 70000",     "accept-loss 3,,17",
      "accept-loss 3 17", "accept-loss -1",        "accept-loss 3 --version 0"};
  fx_expect_all(2, "l-refuse", usage, sizeof usage / sizeof usage[0], "ringctl accept-loss: ");
  /* a token that is not moving: its data is where it was, nothing to accept */
  FX_EXPECT_IN(2, err, "token 4 is not pending in version 2", "l-refuse", "accept-loss 3,4 --yes");
  FX_EXPECT_IN(2, err, "not pending", "l-refuse", "accept-loss 63");
  fx_assert_absent("l-refuse", "loss");
  FX_EXPECT_IN(0, out, "accept-loss", "l-refuse", "accept-loss --help");
  FX_EXPECT_IN(0, out, "accept-loss", "l-refuse", "--help");
}
END_TEST

START_TEST(accept_loss_dry_run_then_yes) {
  seed_pending("l-yes", pending, N_PENDING);
  fx_run r = fx_ringctl("l-yes", "accept-loss 17,3");
  ck_assert_msg(r.code == 0, "%s", r.err);
  ck_assert_msg(strstr(r.out, "version 2, 2 tokens: 3,17\n"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "dry run: nothing written"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "--cluster l-yes accept-loss 3,17 --version 2 --yes"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "token 17 slot 0: "), "%s", r.out);
  fx_free(&r);
  fx_assert_absent("l-yes", "loss");

  FX_EXPECT_IN(0, out, "wrote loss for version 2", "l-yes", "accept-loss 3 --version 2 --yes");
  rk_loss l = loss_of("l-yes");
  assert_tokens(&l, 2, (const uint32_t[]){3}, 1);
  rk_loss_free(&l);
  /* the same version again: the union */
  FX_EXPECT(0, "l-yes", "accept-loss 17-17,40 --yes");
  l = loss_of("l-yes");
  assert_tokens(&l, 2, pending, N_PENDING);
  rk_loss_free(&l);
}
END_TEST

START_TEST(accept_loss_stale_version) {
  seed_pending("l-stale", pending, N_PENDING);
  FX_EXPECT_IN(3, err, "not 1", "l-stale", "accept-loss 3 --version 1 --yes");
  fx_assert_absent("l-stale", "loss");
  /* a record for an older version is replaced, not merged */
  rk_loss old = {.version = 1,
                 .n_tokens = 1,
                 .tokens = (uint32_t[]){9},
                 .by = "ops",
                 .at_ms = 1796000000000ull};
  char *json;
  size_t len;
  ck_assert_int_eq(rk_loss_encode(&old, &json, &len), RING_OK);
  fx_put_owned("l-stale", "loss", json, len);
  FX_EXPECT(0, "l-stale", "accept-loss 40 --yes");
  rk_loss l = loss_of("l-stale");
  assert_tokens(&l, 2, (const uint32_t[]){40}, 1);
  rk_loss_free(&l);
  /* the version moves on: the tokens are no longer pending there */
  fx_bump_version("l-stale", 3);
  FX_EXPECT_IN(2, err, "not pending in version 3", "l-stale", "accept-loss 40 --yes");
  FX_EXPECT_IN(3, err, "not 2", "l-stale", "accept-loss 40 --version 2 --yes");
}
END_TEST

START_TEST(accept_loss_stuck) {
  seed_pending("l-stuck", pending, N_PENDING);
  FX_EXPECT_IN(0, out, "nothing to accept", "l-stuck", "accept-loss --stuck --yes");
  fx_assert_absent("l-stuck", "loss");
  seed_stuck("l-stuck", 1, (const uint32_t[]){3}, 1); /* another version's report */
  FX_EXPECT_IN(0, out, "nothing to accept", "l-stuck", "accept-loss --stuck --yes");
  seed_stuck("l-stuck", 2, (const uint32_t[]){17, 40}, 2);
  FX_EXPECT_IN(0, out, "accept-loss 17,40 --version 2 --yes", "l-stuck", "accept-loss --stuck");
  fx_assert_absent("l-stuck", "loss");
  FX_EXPECT(0, "l-stuck", "accept-loss --stuck --yes");
  rk_loss l = loss_of("l-stuck");
  assert_tokens(&l, 2, (const uint32_t[]){17, 40}, 2);
  rk_loss_free(&l);
}
END_TEST

START_TEST(status_shows_stuck_and_failing) {
  seed_pending("l-status", pending, N_PENDING);
  seed_stuck("l-status", 2, (const uint32_t[]){17, 40}, 2);
  rk_failing f = {.token = 3, .attempts = 2, .error = "n0: connection refused"};
  rk_progress p = {.version = 2, .n_failing = 1, .failing = &f};
  char *json;
  size_t len;
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_OK);
  fx_put_owned("l-status", "progress/n4", json, len);
  rk_progress old = {.version = 1, .n_failing = 1, .failing = &f}; /* another version: not shown */
  ck_assert_int_eq(rk_progress_encode(&old, &json, &len), RING_OK);
  fx_put_owned("l-status", "progress/n5", json, len);

  fx_run r = fx_ringctl("l-status", "status");
  ck_assert_int_eq(r.code, 0);
  ck_assert_msg(strstr(r.out, "stuck moves: 2"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "owner n0 does not hold token 40 (4 attempts)"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "failing, not yet stuck: 1"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "n0: connection refused"), "%s", r.out);
  fx_free(&r);

  cJSON *j = fx_json(0, "l-status", "status");
  static const char *const top[] = {"version", "nodes",   "health", "plan",
                                    "stuck",   "failing", "missing"};
  fx_fields(j, top, 7);
  ck_assert(!cJSON_IsTrue(fx_get(fx_get(j, "health"), "ok"))); /* stuck moves: not healthy */
  const cJSON *stuck = fx_get(j, "stuck");
  ck_assert_int_eq(cJSON_GetArraySize(stuck), 2);
  const cJSON *m = cJSON_GetArrayItem(stuck, 1);
  static const char *const mf[] = {"token", "slot", "from", "to", "error", "for_ms"};
  fx_fields(m, mf, 6);
  ck_assert_int_eq((int)fx_num(m, "token"), 40);
  ck_assert_str_eq(fx_str(m, "from"), "n0");
  ck_assert_str_eq(fx_str(m, "to"), "n2");
  ck_assert_int_eq((int)fx_num(m, "for_ms"), 650000);
  const cJSON *failing = fx_get(j, "failing");
  ck_assert_int_eq(cJSON_GetArraySize(failing), 1);
  const cJSON *e = cJSON_GetArrayItem(failing, 0);
  static const char *const ef[] = {"node", "token", "attempts", "error"};
  fx_fields(e, ef, 4);
  ck_assert_str_eq(fx_str(e, "node"), "n4");
  ck_assert_int_eq((int)fx_num(e, "attempts"), 2);
  cJSON_Delete(j);

  /* a report about another version is stale: not shown */
  fx_bump_version("l-status", 3);
  j = fx_json(0, "l-status", "status");
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "stuck")), 0);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "failing")), 0);
  cJSON_Delete(j);
}
END_TEST

/* ------------------------------------------------------ missing replicas */

/* missing/<id> for `version` listing tokens[0..n), with a reason for `why`. */
static void seed_missing(const char *cluster, const char *id, uint64_t version,
                         const uint32_t *tokens, uint32_t n, uint32_t why) {
  rk_failing f = {.token = why, .attempts = 3, .error = "owner n9 does not hold it"};
  rk_missing m = {.version = version,
                  .n_tokens = n,
                  .tokens = (uint32_t *)tokens,
                  .n_failing = 1,
                  .failing = &f};
  char *json, what[80];
  size_t len;
  ck_assert_int_eq(rk_missing_encode(&m, &json, &len), RING_OK);
  snprintf(what, sizeof what, "missing/%s", id);
  fx_put_owned(cluster, what, json, len);
}

START_TEST(missing_named_verified_and_accepted) {
  seed_pending("l-miss", pending, N_PENDING);
  ring_table *t = fx_table("l-miss", FX_TOKENS, FX_REPLICAS, FX_NODES, FX_ZONES, 2);
  const uint32_t tok = 5; /* not pending, nor is 6 */
  char a[RING_ID_MAX + 1], b[RING_ID_MAX + 1];
  snprintf(a, sizeof a, "%s", ring_table_node_id(t, ring_table_owner(t, tok, 0)));
  snprintf(b, sizeof b, "%s", ring_table_node_id(t, ring_table_owner(t, tok, 1)));
  uint32_t not_owned = 0; /* a token `a` does not own: never counted for it */
  while (ring_table_owner(t, not_owned, 0) == ring_table_find_node(t, a) ||
         ring_table_owner(t, not_owned, 1) == ring_table_find_node(t, a))
    not_owned++;
  ring_table_free(t);
  uint32_t listed[2] = {tok, not_owned};
  if (not_owned < tok)
    listed[0] = not_owned, listed[1] = tok;
  seed_missing("l-miss", a, 2, listed, 2, tok);

  fx_run r = fx_ringctl("l-miss", "status");
  ck_assert_msg(r.code == 0 && strstr(r.out, "missing replicas: 1"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "owner n9 does not hold it"), "%s", r.out);
  fx_free(&r);
  cJSON *j = fx_json(0, "l-miss", "status");
  const cJSON *m = fx_get(j, "missing");
  ck_assert_int_eq((int)fx_num(m, "replicas"), 1);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(m, "lost")), 0);
  const cJSON *h = cJSON_GetArrayItem(fx_get(m, "hosts"), 0);
  static const char *const hf[] = {"host", "count", "tokens", "failing"};
  fx_fields(h, hf, 4);
  ck_assert_str_eq(fx_str(h, "host"), a);
  ck_assert_int_eq((int)cJSON_GetArrayItem(fx_get(h, "tokens"), 0)->valuedouble, (int)tok);
  const cJSON *health = fx_get(j, "health"); /* a replica short is degraded, refilling or not */
  ck_assert(!cJSON_IsTrue(fx_get(health, "ok")));
  const cJSON *why = cJSON_GetArrayItem(fx_get(health, "reasons"), 0);
  ck_assert_msg(strcmp(fx_str(why, "kind"), "missing") == 0 ||
                    strcmp(fx_str(why, "kind"), "refill_waits") == 0,
                "%s", fx_str(why, "kind"));
  ck_assert_int_eq((int)fx_num(why, "count"), 1);
  cJSON_Delete(j);
  FX_EXPECT_IN(1, out, "reports 1 owned token-replicas missing: 5", "l-miss", "verify");

  /* its other owner lacks it too: lost */
  seed_missing("l-miss", b, 2, &tok, 1, tok);
  FX_EXPECT_IN(1, out, "1 tokens lost (every owner reports them missing): 5", "l-miss", "verify");
  FX_EXPECT_IN(0, out, "lost tokens: 1", "l-miss", "status");
  /* accept-loss takes missing tokens, refuses tokens neither pending nor missing */
  FX_EXPECT_IN(2, err, "no owner reports it missing", "l-miss", "accept-loss 5,6 --yes");
  FX_EXPECT_IN(0, out, "(every owner lacks it)", "l-miss", "accept-loss --lost");
  fx_assert_absent("l-miss", "loss");
  FX_EXPECT(0, "l-miss", "accept-loss --lost --yes");
  rk_loss l = loss_of("l-miss");
  assert_tokens(&l, 2, &tok, 1);
  rk_loss_free(&l);
  FX_EXPECT_IN(0, out, "wrote loss", "l-miss", "accept-loss 3,5 --yes"); /* pending and missing */
}
END_TEST

int main(void) {
  const TTest *const tests[] = {
      accept_loss_refuses, accept_loss_dry_run_then_yes,   accept_loss_stale_version,
      accept_loss_stuck,   status_shows_stuck_and_failing, missing_named_verified_and_accepted};
  return fx_main("ringctl_loss", tests, sizeof tests / sizeof tests[0]);
}
