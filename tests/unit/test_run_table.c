/*
 * test_run_table.c: the tables a run passes through (rk_run_table). Every
 * intermediate table of a plan, after any prefix of waves and with any
 * subset of the next wave in flight, seals, keeps each token's owners in
 * distinct zones, and the last one is the plan's target.
 */
#include "check_main.h"
#include "cluster.h"
#include "test_tables.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* The base's nodes as specs plus one joining node "new" in zone z0. */
typedef struct join_input {
  ring_node_spec specs[16];
  const char *keys[16][1], *vals[16][1];
  char ids[16][16], addrs[16][32];
  uint32_t n;
} join_input;

static void join_specs(const ring_table *base, join_input *in) {
  uint32_t n = ring_table_node_count(base);
  for (uint32_t i = 0; i <= n; i++) {
    snprintf(in->ids[i], sizeof in->ids[i], "%s",
             i < n ? ring_table_node_id(base, (uint16_t)i) : "new");
    snprintf(in->addrs[i], sizeof in->addrs[i], "127.0.0.1:%u", 7500 + i);
    in->keys[i][0] = "zone";
    in->vals[i][0] = i < n ? ring_table_node_label(base, (uint16_t)i, "zone") : "z0";
    in->specs[i] = (ring_node_spec){in->ids[i], in->addrs[i], in->keys[i],     in->vals[i],
                                    1,          1.0,          RING_NODE_ACTIVE};
  }
  in->n = n + 1;
}

static ring_plan *plan_join(const ring_table *base, uint32_t per_node) {
  join_input in;
  join_specs(base, &in);
  ring_plan_config cfg = {.failure_domain = "zone", .max_moves_per_node = per_node};
  ring_plan *p = NULL;
  ring_error err = {0};
  ck_assert_msg(ring_plan_compute(base, in.specs, in.n, &cfg, &p, &err) == RING_OK, "%s",
                err.message);
  return p;
}

/* Each token's owners sit in distinct zones. */
static void check_zones(const ring_table *t) {
  for (uint32_t tok = 0; tok < ring_table_tokens(t); tok++)
    for (uint32_t a = 0; a < ring_table_replicas(t); a++)
      for (uint32_t b = a + 1; b < ring_table_replicas(t); b++) {
        const char *za = ring_table_node_label(t, ring_table_owner(t, tok, a), "zone");
        const char *zb = ring_table_node_label(t, ring_table_owner(t, tok, b), "zone");
        ck_assert_msg(strcmp(za, zb) != 0, "token %u: slots %u and %u both in %s", tok, a, b, za);
      }
}

static ring_table *build(const ring_table *base, const ring_plan *p, const uint8_t *done,
                         const uint8_t *pending, uint64_t v) {
  ring_table *t = NULL;
  ring_error err = {0};
  ck_assert_msg(rk_run_table(base, p, done, pending, v, &t, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(ring_table_version(t), v);
  return t;
}

START_TEST(every_wave_prefix_and_subset_is_safe) {
  ring_table *base = test_table_rr(256, 3, 6, 3, NULL, 7);
  ring_plan *p = plan_join(base, 2);
  uint32_t n = ring_plan_move_count(p), waves = ring_plan_wave_count(p);
  ck_assert_uint_gt(waves, 1);
  const ring_move *m = ring_plan_moves(p);
  uint8_t *done = calloc(n / 8 + 1, 1), *pend = calloc(n / 8 + 1, 1);
  uint64_t v = 8;
  for (uint32_t w = 0; w < waves; w++) {
    memset(pend, 0, n / 8 + 1);
    uint32_t k = 0, in_wave = 0;
    for (uint32_t i = 0; i < n; i++)
      if (m[i].wave == w && (in_wave++ % 2 == 0)) { /* every other move: a throttled subset */
        rk_bit_set(pend, i, true);
        k++;
      }
    ring_table *t = build(base, p, done, pend, v++);
    ck_assert_uint_eq(ring_table_pending_count(t), k);
    check_zones(t);
    ring_table_free(t);
    for (uint32_t i = 0; i < n; i++)
      if (m[i].wave == w)
        rk_bit_set(done, i, true);
    t = build(base, p, done, NULL, v++);
    ck_assert_uint_eq(ring_table_pending_count(t), 0);
    check_zones(t);
    ring_table_free(t);
  }
  ring_table *last = build(base, p, done, NULL, v);
  const ring_table *target = ring_plan_target(p);
  for (uint32_t tok = 0; tok < 256; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ck_assert_uint_eq(ring_table_owner(last, tok, r), ring_table_owner(target, tok, r));
  ring_table_free(last);
  free(done);
  free(pend);
  ring_plan_free(p);
  ring_table_free(base);
}
END_TEST

START_TEST(nothing_done_is_the_base) {
  ring_table *base = test_table_rr(128, 3, 6, 3, NULL, 3);
  ring_plan *p = plan_join(base, 0);
  ring_table *t = build(base, p, NULL, NULL, 4);
  for (uint32_t tok = 0; tok < 128; tok++)
    for (uint32_t r = 0; r < 3; r++) {
      const char *id = ring_table_node_id(t, ring_table_owner(t, tok, r));
      ck_assert_str_eq(id, ring_table_node_id(base, ring_table_owner(base, tok, r)));
    }
  ck_assert_int_ge(ring_table_find_node(t, "new"), 0); /* known before it owns anything */
  ring_table_free(t);
  ring_plan_free(p);
  ring_table_free(base);
}
END_TEST

START_TEST(first_placement_is_the_target) {
  ring_table *shape = test_table_rr(64, 3, 5, 3, NULL, 1);
  join_input in;
  join_specs(shape, &in);
  ring_plan_config cfg = {.cluster = "test", .tokens = 64, .replicas = 3, .failure_domain = "zone"};
  ring_plan *p = NULL;
  ring_error err = {0};
  ck_assert_msg(ring_plan_compute(NULL, in.specs, in.n, &cfg, &p, &err) == RING_OK, "%s",
                err.message);
  ring_table *t = build(NULL, p, NULL, NULL, 1);
  char *a = NULL, *b = NULL;
  size_t la, lb;
  ck_assert_int_eq(ring_table_encode(t, &a, &la), RING_OK);
  ck_assert_int_eq(ring_table_encode(ring_plan_target(p), &b, &lb), RING_OK);
  ck_assert_str_eq(a, b);
  free(a);
  free(b);
  ring_table_free(t);
  ring_plan_free(p);
  ring_table_free(shape);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("run_table");
  TCase *tc = tcase_create("run_table");
  tcase_add_test(tc, every_wave_prefix_and_subset_is_safe);
  tcase_add_test(tc, nothing_done_is_the_base);
  tcase_add_test(tc, first_placement_is_the_target);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
