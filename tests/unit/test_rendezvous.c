/*
 * test_rendezvous.c: the read replica of a key (ring_read_replica) and the
 * weighted rendezvous pick under it (ring_rendezvous_pick).
 *
 * Sections: helpers; spread by weight; stability; down nodes; arguments.
 *
 * Three nodes with R = 3 own every token together, so every key chooses
 * among all three and the spread is the rendezvous pick's alone. Spreads
 * are measured over 1e6 distinct keys and must be within 1% (absolute) of
 * the weight shares: the binomial standard deviation there is ~0.05%.
 */
#include "ring.h"
#include "test_tables.h"
#include "check_main.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS 1000000u
#define TOLERANCE 0.01

/* ---------------------------------------------------------------- helpers */

/* SplitMix64: deterministic 64-bit values standing in for key hashes. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static size_t key_of(uint32_t i, char *buf, size_t cap) {
  return (size_t)snprintf(buf, cap, "read-%u", i);
}

/* Counts, over KEYS distinct keys, how many reads each of 3 nodes serves.
 * Returns the number of calls that did not return RING_OK. */
static uint32_t read_counts(const ring_table *t, uint32_t counts[3]) {
  uint32_t failed = 0;
  memset(counts, 0, 3 * sizeof *counts);
  for (uint32_t i = 0; i < KEYS; i++) {
    char key[32];
    uint16_t node = RING_NODE_NONE;
    if (ring_read_replica(t, key, key_of(i, key, sizeof key), &node) != RING_OK || node > 2)
      failed++;
    else
      counts[node]++;
  }
  return failed;
}

static void assert_shares(const char *what, const uint32_t counts[3], const double want[3]) {
  printf("rendezvous: %s: shares %.4f %.4f %.4f (want %.4f %.4f %.4f)\n", what,
         counts[0] / (double)KEYS, counts[1] / (double)KEYS, counts[2] / (double)KEYS, want[0],
         want[1], want[2]);
  fflush(stdout);
  for (int i = 0; i < 3; i++) {
    double share = counts[i] / (double)KEYS;
    ck_assert_msg(fabs(share - want[i]) <= TOLERANCE, "%s: node %d share %.4f, want %.4f", what, i,
                  share, want[i]);
  }
}

/* A sealed copy of t (version + 1) with node `index` set to `state`. */
static ring_table *with_state(const ring_table *t, uint16_t index, ring_node_state state) {
  ring_table *c = NULL;
  ck_assert_int_eq(ring_table_clone(t, ring_table_version(t) + 1, &c), RING_OK);
  ck_assert_int_eq(ring_table_set_node(c, index, state, ring_table_node_weight(t, index)), RING_OK);
  ck_assert_int_eq(ring_table_seal(c, NULL), RING_OK);
  return c;
}

/* ------------------------------------------------------- spread by weight */

START_TEST(test_read_weighted_spread) {
  const double w[] = {3, 1, 1}, want[] = {0.6, 0.2, 0.2};
  ring_table *t = test_table_rr(1024, 3, 3, 3, w, 1);
  uint32_t counts[3];
  ck_assert_uint_eq(read_counts(t, counts), 0);
  assert_shares("read_replica weights 3,1,1", counts, want);
  ring_table_free(t);
}
END_TEST

START_TEST(test_read_equal_spread) {
  const double want[] = {1 / 3.0, 1 / 3.0, 1 / 3.0};
  ring_table *t = test_table_rr(1024, 3, 3, 3, NULL, 1);
  uint32_t counts[3];
  ck_assert_uint_eq(read_counts(t, counts), 0);
  assert_shares("read_replica weights 1,1,1", counts, want);
  ring_table_free(t);
}
END_TEST

/* The pick itself, over raw key hashes, without the table lookup. */
START_TEST(test_pick_weighted_spread) {
  const double w[] = {3, 1, 1}, want[] = {0.6, 0.2, 0.2};
  ring_table *t = test_table_rr(64, 3, 3, 3, w, 1);
  const uint16_t cand[] = {0, 1, 2};
  uint32_t counts[3] = {0}, failed = 0;
  uint64_t rng = 1;
  for (uint32_t i = 0; i < KEYS; i++) {
    int p = ring_rendezvous_pick(t, rng_next(&rng), cand, 3);
    if (p < 0 || p > 2)
      failed++;
    else
      counts[p]++;
  }
  ck_assert_uint_eq(failed, 0);
  assert_shares("rendezvous_pick weights 3,1,1", counts, want);
  ring_table_free(t);
}
END_TEST

/* -------------------------------------------------------------- stability */

/* A key reads from one replica: call after call, in a newer version of the
 * same table, and whatever the slot order of its token's owners. */
START_TEST(test_read_stable) {
  const double w[] = {3, 1, 1};
  ring_table *t = test_table_rr(256, 3, 3, 3, w, 1);
  ring_table *newer = NULL, *shuffled = NULL;
  ck_assert_int_eq(ring_table_clone(t, 2, &newer), RING_OK);
  ck_assert_int_eq(ring_table_seal(newer, NULL), RING_OK);
  ck_assert_int_eq(ring_table_clone(t, 3, &shuffled), RING_OK);
  for (uint32_t tok = 0; tok < 256; tok++) /* owners 2,0,1 instead of 0,1,2 */
    for (uint32_t r = 0; r < 3; r++)
      ck_assert_int_eq(ring_table_set_owner(shuffled, tok, r, (uint16_t)((r + 2) % 3)), RING_OK);
  ck_assert_int_eq(ring_table_seal(shuffled, NULL), RING_OK);
  uint32_t moved = 0;
  for (uint32_t i = 0; i < 100000; i++) {
    char key[32];
    size_t len = key_of(i, key, sizeof key);
    uint16_t a = 0, b = 1, c = 2, d = 3;
    ck_assert_int_eq(ring_read_replica(t, key, len, &a), RING_OK);
    ck_assert_int_eq(ring_read_replica(t, key, len, &b), RING_OK);
    ck_assert_int_eq(ring_read_replica(newer, key, len, &c), RING_OK);
    ck_assert_int_eq(ring_read_replica(shuffled, key, len, &d), RING_OK);
    moved += a != b || a != c || a != d;
  }
  ck_assert_uint_eq(moved, 0);
  ring_table_free(shuffled);
  ring_table_free(newer);
  ring_table_free(t);
}
END_TEST

/* The winner does not depend on the order candidates are listed in. */
START_TEST(test_pick_order_independent) {
  const double w[] = {3, 1, 1};
  ring_table *t = test_table_rr(64, 3, 3, 3, w, 1);
  static const uint16_t perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                       {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  uint64_t rng = 9;
  uint32_t differ = 0;
  for (uint32_t i = 0; i < 10000; i++) {
    uint64_t h = rng_next(&rng);
    uint16_t winner = perms[0][ring_rendezvous_pick(t, h, perms[0], 3)];
    for (int p = 1; p < 6; p++)
      differ += perms[p][ring_rendezvous_pick(t, h, perms[p], 3)] != winner;
  }
  ck_assert_uint_eq(differ, 0);
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------------------------- down nodes */

/* With node 1 down (or removed) reads never go to it; the other two split
 * the reads by their weights, 3:1, and keys that did not read from node 1
 * keep their replica. */
static void check_without_node1(ring_node_state state, const char *what) {
  const double w[] = {3, 1, 1}, want[] = {0.75, 0, 0.25};
  ring_table *t = test_table_rr(1024, 3, 3, 3, w, 1);
  ring_table *d = with_state(t, 1, state);
  uint32_t counts[3];
  ck_assert_uint_eq(read_counts(d, counts), 0);
  ck_assert_uint_eq(counts[1], 0);
  assert_shares(what, counts, want);
  uint32_t moved = 0;
  for (uint32_t i = 0; i < 100000; i++) {
    char key[32];
    size_t len = key_of(i, key, sizeof key);
    uint16_t before, after;
    ck_assert_int_eq(ring_read_replica(t, key, len, &before), RING_OK);
    ck_assert_int_eq(ring_read_replica(d, key, len, &after), RING_OK);
    moved += before != 1 && before != after;
  }
  ck_assert_uint_eq(moved, 0);
  ring_table_free(d);
  ring_table_free(t);
}

START_TEST(test_read_skips_down) { check_without_node1(RING_NODE_DOWN, "node 1 down"); }
END_TEST

START_TEST(test_read_skips_removed) { check_without_node1(RING_NODE_REMOVED, "node 1 removed"); }
END_TEST

START_TEST(test_read_all_down) {
  ring_table *t = test_table_rr(64, 3, 3, 3, NULL, 1);
  ring_table *a = with_state(t, 0, RING_NODE_DOWN);
  ring_table *b = with_state(a, 1, RING_NODE_REMOVED);
  ring_table *c = with_state(b, 2, RING_NODE_DOWN);
  uint16_t node = 77;
  ck_assert_int_eq(ring_read_replica(c, "k", 1, &node), RING_EUNAVAIL);
  ck_assert_uint_eq(node, 77);
  ck_assert_int_eq(ring_read_replica(b, "k", 1, &node), RING_OK);
  ck_assert_uint_eq(node, 2);
  ring_table_free(c);
  ring_table_free(b);
  ring_table_free(a);
  ring_table_free(t);
}
END_TEST

/* -------------------------------------------------------------- arguments */

START_TEST(test_bad_args) {
  ring_table *t = test_table_rr(64, 3, 3, 3, NULL, 1);
  const uint16_t cand[] = {0, 1, 2};
  uint16_t node = 77;
  ck_assert_int_eq(ring_read_replica(NULL, "k", 1, &node), RING_EINVAL);
  ck_assert_int_eq(ring_read_replica(t, NULL, 1, &node), RING_EINVAL);
  ck_assert_int_eq(ring_read_replica(t, "k", 1, NULL), RING_EINVAL);
  ck_assert_uint_eq(node, 77);
  ck_assert_int_eq(ring_read_replica(t, NULL, 0, &node), RING_OK); /* the empty key */
  ck_assert_int_eq(ring_rendezvous_pick(t, 1, cand, 0), RING_EINVAL);
  ck_assert_int_eq(ring_rendezvous_pick(t, 1, cand, -1), RING_EINVAL);
  ck_assert_int_eq(ring_rendezvous_pick(t, 1, NULL, 3), RING_EINVAL);
  ck_assert_int_eq(ring_rendezvous_pick(NULL, 1, cand, 3), RING_EINVAL);
  ck_assert_int_eq(ring_rendezvous_pick(t, 1, cand + 2, 1), 0);
  ring_table_free(t);
}
END_TEST

static Suite *rendezvous_suite(void) {
  Suite *s = suite_create("rendezvous");
  TCase *spread = tcase_create("spread");
  tcase_set_timeout(spread, 300);
  tcase_add_test(spread, test_read_weighted_spread);
  tcase_add_test(spread, test_read_equal_spread);
  tcase_add_test(spread, test_pick_weighted_spread);
  suite_add_tcase(s, spread);

  TCase *stable = tcase_create("stability");
  tcase_set_timeout(stable, 120);
  tcase_add_test(stable, test_read_stable);
  tcase_add_test(stable, test_pick_order_independent);
  suite_add_tcase(s, stable);

  TCase *down = tcase_create("down");
  tcase_set_timeout(down, 300);
  tcase_add_test(down, test_read_skips_down);
  tcase_add_test(down, test_read_skips_removed);
  tcase_add_test(down, test_read_all_down);
  suite_add_tcase(s, down);

  TCase *args = tcase_create("args");
  tcase_add_test(args, test_bad_args);
  suite_add_tcase(s, args);
  return s;
}

int main(void) { return run_suite(rendezvous_suite()); }
