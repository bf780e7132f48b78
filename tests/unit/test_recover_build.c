/*
 * test_recover_build.c: a restored etcd's records and the table `ringctl
 * recover` builds (coordinator/cluster/recover_build.c; proto/etcd.md, "A
 * restored etcd"):
 *   records           recovery/<id> and recovered: round trip, refusals
 *                     named (table_version above seen_version, tokens out
 *                     of order, seen_version not below version)
 *   all_held          every owner holds its arcs: the newest table again
 *   holders_fill      a slot whose owner lacks the arc goes to its pending
 *                     owner that holds it, else to another holder
 *   missing_and_lost  no holder left: the named owner stays (missing); a
 *                     token nobody holds is lost, never emptied
 *   unreported        an owner without a report refuses, naming it, unless
 *                     left out with --without (then it holds nothing)
 */
#include "cluster.h"
#include "check_main.h"
#include "test_tables.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

START_TEST(records) {
  uint32_t toks[] = {0, 3, 17};
  rk_recovery r = {.seen_version = 65,
                   .seen_revision = 8120,
                   .table_version = 65,
                   .n_tokens = 3,
                   .tokens = toks,
                   .at_ms = 1};
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_recovery_encode(&r, &json, &len), RING_OK);
  rk_recovery back;
  ring_error err = {0};
  ck_assert_int_eq(rk_recovery_decode(json, len, &back, &err), RING_OK);
  ck_assert_uint_eq(back.n_tokens, 3);
  ck_assert_uint_eq(back.tokens[2], 17);
  ck_assert_uint_eq(back.table_version, 65);
  rk_recovery_free(&back);
  free(json);
  r.table_version = 66;
  ck_assert_int_eq(rk_recovery_encode(&r, &json, &len), RING_EINVAL);
  const char *bad = "{\"format\":\"ringkeeper.recovery.v1\",\"seen_version\":5,\"seen_revision\":1,"
                    "\"table_version\":5,\"tokens\":[3,3],\"at_ms\":0}";
  ck_assert_int_eq(rk_recovery_decode(bad, strlen(bad), &back, &err), RING_EFIELD);
  ck_assert_ptr_nonnull(strstr(err.message, "tokens[1]"));
  const char *over =
      "{\"format\":\"ringkeeper.recovery.v1\",\"seen_version\":5,\"seen_revision\":1,"
      "\"table_version\":6,\"tokens\":[],\"at_ms\":0}";
  ck_assert_int_eq(rk_recovery_decode(over, strlen(over), &back, &err), RING_EVERSION);
  ck_assert_ptr_nonnull(strstr(err.message, "table_version"));

  ring__recovered d = {.version = 66, .seen_version = 65, .by = "ringctl", .at_ms = 2}, e;
  ck_assert_int_eq(ring__recovered_encode(&d, &json, &len), RING_OK);
  ck_assert_int_eq(ring__recovered_decode(json, len, &e, &err), RING_OK);
  ck_assert_uint_eq(e.version, 66);
  ck_assert_str_eq(e.by, "ringctl");
  free(json);
  d.seen_version = 66;
  ck_assert_int_eq(ring__recovered_encode(&d, &json, &len), RING_EINVAL);
  ck_assert_uint_eq(rk_host_value_max(RK_HOST_RECOVERY), RK_RECOVERY_VALUE_MAX);
  ck_assert_str_eq(rk_host_kind_dir(RK_HOST_RECOVERY), "recovery/");
}
END_TEST

/* 3 nodes, T 64, R 2, round robin (test_tables.h): reports of what each
 * holds, from the table, minus `drop` (token, node) pairs. */
typedef struct world {
  ring_table *t;
  rk_agent_recovery reps[3];
} world;

static void world_make(world *w, const uint32_t drop[][2], int n_drop) {
  w->t = test_table_rr(64, 2, 3, 3, NULL, 7);
  for (uint16_t i = 0; i < 3; i++) {
    rk_agent_recovery *r = &w->reps[i];
    snprintf(r->id, sizeof r->id, "n%u", i);
    r->r = (rk_recovery){.seen_version = 9, .table_version = 7};
    r->r.tokens = calloc(64, sizeof *r->r.tokens);
    for (uint32_t tok = 0; tok < 64; tok++) {
      bool owns = ring_table_owner(w->t, tok, 0) == i || ring_table_owner(w->t, tok, 1) == i;
      for (int k = 0; k < n_drop; k++)
        owns = owns && !(drop[k][0] == tok && drop[k][1] == i);
      if (owns)
        r->r.tokens[r->r.n_tokens++] = tok;
    }
  }
}

static void world_free(world *w) {
  for (int i = 0; i < 3; i++)
    rk_recovery_free(&w->reps[i].r);
  ring_table_free(w->t);
}

static void build(world *w, const char *const *without, uint32_t n_without, rk_recover *out) {
  ring_error err = {0};
  ck_assert_msg(rk_recover_build(w->t, w->reps, 3, without, n_without, 10, out, &err) == RING_OK,
                "%s", err.message);
  ck_assert_uint_eq(ring_table_version(out->table), 10);
}

START_TEST(all_held) {
  world w;
  world_make(&w, NULL, 0);
  rk_recover r;
  build(&w, NULL, 0, &r);
  ck_assert_uint_eq(r.n_missing + r.n_lost + r.n_moved, 0);
  for (uint32_t tok = 0; tok < 64; tok++)
    for (uint32_t s = 0; s < 2; s++)
      ck_assert_uint_eq(ring_table_owner(r.table, tok, s), ring_table_owner(w.t, tok, s));
  ck_assert_int_eq(ring_table_verify(r.table, NULL, NULL), 0);
  rk_recover_free(&r);
  world_free(&w);
}
END_TEST

START_TEST(holders_fill) {
  world w;
  /* token 0 is owned by n0 (slot 0) and n1 (slot 1); n0 lost it, n2 holds it */
  const uint32_t drop[][2] = {{0, 0}};
  world_make(&w, drop, 1);
  rk_recovery *n2 = &w.reps[2].r; /* n2 holds token 0 too: first, to stay ascending */
  memmove(n2->tokens + 1, n2->tokens, n2->n_tokens * sizeof *n2->tokens);
  n2->tokens[0] = 0;
  n2->n_tokens++;
  rk_recover r;
  build(&w, NULL, 0, &r);
  ck_assert_uint_eq(r.n_missing, 0);
  ck_assert_uint_eq(r.n_moved, 1);
  ck_assert_uint_eq(ring_table_owner(r.table, 0, 0), 2);
  ck_assert_uint_eq(ring_table_owner(r.table, 0, 1), 1);
  rk_recover_free(&r);
  world_free(&w);
}
END_TEST

START_TEST(missing_and_lost) {
  world w;
  /* token 5 (owners n1, n2): n1 lacks it; token 6 (n0, n1): both lack it */
  const uint32_t drop[][2] = {{5, 1}, {6, 0}, {6, 1}};
  world_make(&w, drop, 3);
  rk_recover r;
  build(&w, NULL, 0, &r);
  ck_assert_uint_eq(r.n_lost, 1);
  ck_assert_uint_eq(r.lost[0], 6);
  ck_assert_uint_eq(r.n_missing, 3);
  ck_assert_uint_eq(r.missing[0].token, 5);
  ck_assert_uint_eq(r.missing[0].owner, ring_table_owner(w.t, 5, r.missing[0].slot));
  ck_assert_uint_eq(ring_table_owner(r.table, 6, 0),
                    ring_table_owner(w.t, 6, 0)); /* named, never emptied */
  rk_recover_free(&r);
  world_free(&w);
}
END_TEST

START_TEST(unreported) {
  world w;
  world_make(&w, NULL, 0);
  w.reps[1].r.seen_version = 0; /* a report that did not parse */
  rk_recover r;
  ring_error err = {0};
  ck_assert_int_eq(rk_recover_build(w.t, w.reps, 3, NULL, 0, 10, &r, &err), RING_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(err.message, "n1"));
  const char *without[] = {"n1"};
  build(&w, without, 1, &r);
  ck_assert_uint_eq(r.n_lost, 0); /* every token has its other replica */
  ck_assert_uint_gt(r.n_missing, 0);
  for (uint32_t i = 0; i < r.n_missing; i++)
    ck_assert_str_eq(ring_table_node_id(r.table, r.missing[i].owner), "n1");
  rk_recover_free(&r);
  world_free(&w);
}
END_TEST

int main(void) {
  Suite *s = suite_create("recover");
  TCase *tc = tcase_create("recover");
  tcase_add_test(tc, records);
  tcase_add_test(tc, all_held);
  tcase_add_test(tc, holders_fill);
  tcase_add_test(tc, missing_and_lost);
  tcase_add_test(tc, unreported);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
