/*
 * test_plan.c: the planner on named cases: refusals, replace, down with
 * sources, domain caps, throttles, node list upkeep, and the verifiers
 * catching bad tables. The randomized property test is tests/planner/.
 */
#include "ring.h"
#include "test_cluster.h"
#include "check_main.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static ring_plan_config config(uint32_t T, uint32_t R, const char *fd) {
  return (ring_plan_config){"demo", T, R, 0, fd, NULL, 0, 0, 0, NULL, RING_BALANCE_TOKENS, NULL};
}

/* Computes a plan that must succeed and verify clean. */
static ring_plan *must_plan(const ring_table *cur, test_cluster *c, const ring_plan_config *cfg) {
  ring_plan *p = NULL;
  ring_error err = {0};
  int rc = ring_plan_compute(cur, c->specs, c->n, cfg, &p, &err);
  ck_assert_msg(rc == RING_OK, "plan refused: %s", err.message);
  char *report = NULL;
  int v = ring_plan_verify(cur, p, cfg, &report);
  ck_assert_msg(v == 0, "%d violations:\n%s", v, report ? report : "");
  free(report);
  return p;
}

static uint16_t idx(const ring_table *t, const char *id) {
  int i = ring_table_find_node(t, id);
  ck_assert_int_ge(i, 0);
  return (uint16_t)i;
}

START_TEST(refuses_too_few_domains) {
  test_cluster c = cluster_make(6, 2);
  ring_plan_config cfg = config(256, 3, "zone");
  ring_plan *p = (ring_plan *)0x1;
  ring_error err;
  ck_assert_int_eq(ring_plan_compute(NULL, c.specs, c.n, &cfg, &p, &err), RING_EPLAN);
  ck_assert_ptr_nonnull(strstr(err.message, "only 2 distinct \"zone\" values"));
  ck_assert_ptr_eq(p, (ring_plan *)0x1);
  cfg.replicas = 2; /* two zones do for two replicas */
  p = must_plan(NULL, &c, &cfg);
  ring_plan_free(p);
  c.specs[0].n_labels = 0; /* a node without the label cannot be placed */
  cfg.replicas = 2;
  ck_assert_int_eq(ring_plan_compute(NULL, c.specs, c.n, &cfg, &p, &err), RING_EPLAN);
  ck_assert_ptr_nonnull(strstr(err.message, "node n0 has no \"zone\" label"));
  cluster_free(&c);
}
END_TEST

START_TEST(refuses_bad_input) {
  test_cluster c = cluster_make(4, 4);
  ring_plan_config cfg = config(256, 3, "zone");
  ring_plan *p;
  ring_error err;
  cluster_add(&c, "n1", "z1", "r", 1.0, RING_NODE_ACTIVE);
  ck_assert_int_eq(ring_plan_compute(NULL, c.specs, c.n, &cfg, &p, &err), RING_EDUPNODE);
  ck_assert_ptr_nonnull(strstr(err.message, "nodes[4]"));
  c.n--;
  p = must_plan(NULL, &c, &cfg);
  ring_plan *q;
  cfg.tokens = 512; /* T is fixed at creation */
  ck_assert_int_eq(ring_plan_compute(ring_plan_target(p), c.specs, c.n, &cfg, &q, &err),
                   RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "tokens"));
  ck_assert_int_eq(ring_plan_compute(NULL, c.specs, c.n, NULL, &q, &err), RING_EINVAL);
  ring_plan_free(p);
  cluster_free(&c);
}
END_TEST

START_TEST(initial_is_balanced_and_spread) {
  test_cluster c = cluster_make(12, 3);
  ring_plan_config cfg = config(4096, 3, "zone");
  ring_plan *p = must_plan(NULL, &c, &cfg);
  const ring_table *t = ring_plan_target(p);
  ck_assert_uint_eq(ring_table_version(t), 1);
  ck_assert_uint_eq(ring_plan_move_count(p), 0);
  ck_assert_uint_eq(ring_plan_base_version(p), 0);
  for (uint16_t i = 0; i < 12; i++) /* 4096*3/12 = 1024 exactly */
    ck_assert_uint_eq(ring_table_node_replicas(t, i), 1024);
  /* primaries spread too: each node leads some tokens */
  uint32_t primaries[12] = {0};
  for (uint32_t tok = 0; tok < 4096; tok++)
    primaries[ring_table_owner(t, tok, 0)]++;
  for (int i = 0; i < 12; i++)
    ck_assert_uint_gt(primaries[i], 4096 / 12 / 2);
  ring_plan_free(p);
  cluster_free(&c);
}
END_TEST

START_TEST(replace_moves_only_the_lower_bound) {
  test_cluster c = cluster_make(9, 3);
  ring_plan_config cfg = config(1024, 3, "zone");
  ring_plan *p0 = must_plan(NULL, &c, &cfg);
  const ring_table *t0 = ring_plan_target(p0);
  uint32_t held = ring_table_node_replicas(t0, idx(t0, "n4"));
  cluster_find(&c, "n4")->state = RING_NODE_DRAINING;
  cluster_add(&c, "n4b", "z1", "z1-r0", 1.0, RING_NODE_JOINING); /* n4 is in z1 */
  ring_plan *p1 = must_plan(t0, &c, &cfg);
  const ring_table *t1 = ring_plan_target(p1);
  ck_assert_uint_eq(ring_plan_lower_bound(p1), held);
  ck_assert_uint_eq(ring_plan_move_count(p1), held);
  ck_assert_uint_eq(ring_table_node_replicas(t1, idx(t1, "n4")), 0);
  ck_assert_uint_eq(ring_table_node_replicas(t1, idx(t1, "n4b")), held);
  /* indexes of existing nodes are stable, the new node is appended */
  ck_assert_uint_eq(idx(t1, "n4"), idx(t0, "n4"));
  ck_assert_uint_eq(idx(t1, "n4b"), 9);
  ring_plan_free(p0);
  ring_plan_free(p1);
  cluster_free(&c);
}
END_TEST

START_TEST(down_streams_from_survivors) {
  test_cluster c = cluster_make(6, 3);
  ring_plan_config cfg = config(512, 3, "zone");
  ring_plan *p0 = must_plan(NULL, &c, &cfg);
  const ring_table *t0 = ring_plan_target(p0);
  cluster_find(&c, "n2")->state = RING_NODE_DOWN;
  ring_plan *p1 = must_plan(t0, &c, &cfg);
  const ring_table *t1 = ring_plan_target(p1);
  const uint16_t dead = idx(t1, "n2");
  const ring_move *m = ring_plan_moves(p1);
  uint32_t per_source[6] = {0};
  for (uint32_t i = 0; i < ring_plan_move_count(p1); i++) {
    ck_assert_uint_eq(m[i].from, dead);
    ck_assert_uint_ne(m[i].source, dead);
    ck_assert_uint_ne(m[i].source, RING_NODE_NONE);
    per_source[m[i].source]++;
  }
  ck_assert_uint_eq(ring_plan_move_count(p1), 256);
  ck_assert_uint_eq(ring_plan_lost_moves(p1), 0);
  uint32_t sources = 0; /* re-replication spreads over the survivors */
  for (int i = 0; i < 6; i++)
    sources += per_source[i] > 0;
  ck_assert_uint_ge(sources, 4);
  /* n2 stays in the list as down, owning nothing */
  ck_assert_int_eq(ring_table_node_state(t1, dead), RING_NODE_DOWN);
  ck_assert_uint_eq(ring_table_node_replicas(t1, dead), 0);
  ring_plan_free(p0);
  ring_plan_free(p1);
  cluster_free(&c);
}
END_TEST

START_TEST(all_replicas_down_is_reported_lost) {
  test_cluster c = cluster_make(4, 1);
  ring_plan_config cfg = config(64, 2, "");
  ring_plan *p0 = must_plan(NULL, &c, &cfg);
  cluster_find(&c, "n0")->state = RING_NODE_DOWN;
  cluster_find(&c, "n1")->state = RING_NODE_DOWN;
  ring_plan *p1 = must_plan(ring_plan_target(p0), &c, &cfg);
  uint32_t lost = 0, both = 0;
  const ring_table *t0 = ring_plan_target(p0);
  for (uint32_t tok = 0; tok < 64; tok++)
    both += ring_table_owner(t0, tok, 0) <= 1 && ring_table_owner(t0, tok, 1) <= 1;
  const ring_move *m = ring_plan_moves(p1);
  for (uint32_t i = 0; i < ring_plan_move_count(p1); i++)
    lost += m[i].source == RING_NODE_NONE;
  ck_assert_uint_gt(both, 0);
  ck_assert_uint_eq(lost, 2 * both); /* both slots of such tokens have no source */
  ck_assert_uint_eq(ring_plan_lost_moves(p1), lost);
  ring_plan_free(p0);
  ring_plan_free(p1);
  cluster_free(&c);
}
END_TEST

START_TEST(domain_cap_binds) {
  /* zone a: 8 nodes, zones b and c: 1 node each, R=3: every token needs one
   * replica in each zone, so each zone holds exactly T whatever its weight */
  test_cluster c = {0};
  for (int i = 0; i < 8; i++) {
    char id[8];
    snprintf(id, sizeof id, "a%d", i);
    cluster_add(&c, id, "a", "ra", i < 4 ? 1.0 : 3.0, RING_NODE_ACTIVE);
  }
  cluster_add(&c, "b0", "b", "rb", 1.0, RING_NODE_ACTIVE);
  cluster_add(&c, "c0", "c", "rc", 1.0, RING_NODE_ACTIVE);
  ring_plan_config cfg = config(1024, 3, "zone");
  ring_plan *p = must_plan(NULL, &c, &cfg);
  const ring_table *t = ring_plan_target(p);
  ck_assert_uint_eq(ring_table_node_replicas(t, idx(t, "b0")), 1024);
  ck_assert_uint_eq(ring_table_node_replicas(t, idx(t, "c0")), 1024);
  /* inside zone a, weight 3 nodes hold 3x the weight 1 nodes: 1024*3/16 vs 1024/16 */
  ck_assert_uint_eq(ring_table_node_replicas(t, idx(t, "a0")), 64);
  ck_assert_uint_eq(ring_table_node_replicas(t, idx(t, "a7")), 192);
  ring_plan_load l;
  ck_assert_int_eq(ring_plan_node_load(p, idx(t, "a7"), &l), RING_OK);
  ck_assert(fabs(l.target - 192.0) < 1e-9);
  ring_plan_free(p);
  cluster_free(&c);
}
END_TEST

START_TEST(weight_change_moves_to_the_heavier) {
  test_cluster c = cluster_make(10, 5);
  ring_plan_config cfg = config(2048, 3, "zone");
  ring_plan *p0 = must_plan(NULL, &c, &cfg);
  cluster_find(&c, "n3")->weight = 2.0;
  ring_plan *p1 = must_plan(ring_plan_target(p0), &c, &cfg);
  const ring_table *t1 = ring_plan_target(p1);
  ring_plan_load l;
  ring_plan_node_load(p1, idx(t1, "n3"), &l);
  ck_assert_uint_eq(l.before, 614 + (2048 * 3 % 10 > 3)); /* 6144/10 */
  ck_assert(fabs((double)l.after - l.target) < 1.0);
  ck_assert_uint_eq(ring_plan_move_count(p1), ring_plan_lower_bound(p1));
  ring_plan_free(p0);
  ring_plan_free(p1);
  cluster_free(&c);
}
END_TEST

START_TEST(throttles_shape_waves) {
  test_cluster c = cluster_make(8, 4);
  ring_plan_config cfg = config(1024, 2, "zone");
  ring_plan *p0 = must_plan(NULL, &c, &cfg);
  cluster_add(&c, "new", "z0", "z0-r5", 1.0, RING_NODE_JOINING);
  cfg.max_moves_per_node = 3;
  ring_plan *p1 = must_plan(ring_plan_target(p0), &c, &cfg);
  uint32_t moves = ring_plan_move_count(p1);
  /* the new node takes part in every move, 3 per wave at most */
  ck_assert_uint_eq(ring_plan_wave_count(p1), (moves + 2) / 3);
  cfg.max_moves_per_node = 0;
  cfg.max_moves_per_wave = 10;
  ring_plan *p2 = must_plan(ring_plan_target(p0), &c, &cfg);
  ck_assert_uint_eq(ring_plan_wave_count(p2), (moves + 9) / 10);
  cfg.max_moves_per_wave = 0;
  ring_plan *p3 = must_plan(ring_plan_target(p0), &c, &cfg);
  ck_assert_uint_eq(ring_plan_wave_count(p3), 1);
  ring_plan_free(p0);
  ring_plan_free(p1);
  ring_plan_free(p2);
  ring_plan_free(p3);
  cluster_free(&c);
}
END_TEST

START_TEST(removed_nodes_leave_the_list) {
  test_cluster c = cluster_make(5, 5);
  ring_plan_config cfg = config(256, 3, "zone");
  ring_plan *p0 = must_plan(NULL, &c, &cfg);
  c.specs[1] = c.specs[4]; /* n1 is gone from the membership */
  c.n = 4;
  ring_plan *p1 = must_plan(ring_plan_target(p0), &c, &cfg);
  const ring_table *t1 = ring_plan_target(p1);
  ck_assert_int_eq(ring_table_node_state(t1, idx(t1, "n1")), RING_NODE_REMOVED);
  ck_assert_uint_eq(ring_table_node_replicas(t1, idx(t1, "n1")), 0);
  ring_plan *p2 = must_plan(t1, &c, &cfg); /* nothing left to move: n1 is dropped */
  const ring_table *t2 = ring_plan_target(p2);
  ck_assert_int_eq(ring_table_find_node(t2, "n1"), RING_ENOTFOUND);
  ck_assert_uint_eq(ring_table_node_count(t2), 4);
  ck_assert_uint_eq(ring_plan_move_count(p2), 0);
  ring_plan_free(p0);
  ring_plan_free(p1);
  ring_plan_free(p2);
  cluster_free(&c);
}
END_TEST

START_TEST(bytes_and_best_effort_reported) {
  test_cluster c = cluster_make(12, 3); /* racks z<k>-r0, z<k>-r1 */
  uint64_t *bytes = malloc(512 * sizeof *bytes);
  for (int i = 0; i < 512; i++)
    bytes[i] = 1000 + (uint64_t)i;
  ring_plan_config cfg = {"demo", 512, 3, 0, "zone", "rack", 0, 0, 0, bytes, RING_BALANCE_TOKENS,
                          NULL};
  ring_plan *p0 = must_plan(NULL, &c, &cfg);
  ck_assert_uint_eq(ring_plan_best_effort_violations(p0), 0);
  cluster_add(&c, "n12", "z0", "z0-r0", 1.0, RING_NODE_JOINING);
  ring_plan *p1 = must_plan(ring_plan_target(p0), &c, &cfg);
  uint64_t want = 0;
  for (uint32_t i = 0; i < ring_plan_move_count(p1); i++)
    want += bytes[ring_plan_moves(p1)[i].token];
  ck_assert_uint_eq(ring_plan_bytes(p1), want);
  ring_plan_free(p0);
  ring_plan_free(p1);
  free(bytes);
  cluster_free(&c);
}
END_TEST

START_TEST(deterministic) {
  test_cluster c = cluster_make(30, 6);
  ring_plan_config cfg = config(4096, 3, "zone");
  cfg.max_moves_per_node = 4;
  ring_plan *a0 = must_plan(NULL, &c, &cfg), *b0 = must_plan(NULL, &c, &cfg);
  cluster_add(&c, "x", "z2", "z2-r1", 2.0, RING_NODE_JOINING);
  cluster_find(&c, "n7")->state = RING_NODE_DOWN;
  ring_plan *a1 = must_plan(ring_plan_target(a0), &c, &cfg);
  ring_plan *b1 = must_plan(ring_plan_target(b0), &c, &cfg);
  char *ja, *jb;
  size_t la, lb;
  ck_assert_int_eq(ring_table_encode(ring_plan_target(a1), &ja, &la), RING_OK);
  ck_assert_int_eq(ring_table_encode(ring_plan_target(b1), &jb, &lb), RING_OK);
  ck_assert(la == lb && memcmp(ja, jb, la) == 0);
  ck_assert_uint_eq(ring_plan_move_count(a1), ring_plan_move_count(b1));
  ck_assert(memcmp(ring_plan_moves(a1), ring_plan_moves(b1),
                   ring_plan_move_count(a1) * sizeof(ring_move)) == 0);
  free(ja);
  free(jb);
  ring_plan_free(a0);
  ring_plan_free(b0);
  ring_plan_free(a1);
  ring_plan_free(b1);
  cluster_free(&c);
}
END_TEST

/* A table built by hand: 3 nodes in zones a, a, b; R=2. */
static ring_table *hand_table(ring_node_state third) {
  ring_table_params prm = {"v", "zone", 1, 0, 64, 2};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&prm, &t, NULL), RING_OK);
  const char *k[] = {"zone"};
  const char *za[] = {"a"}, *zb[] = {"b"};
  ring_node_spec s0 = {"x", "h:1", k, za, 1, 1.0, RING_NODE_ACTIVE};
  ring_node_spec s1 = {"y", "h:2", k, za, 1, 1.0, RING_NODE_ACTIVE};
  ring_node_spec s2 = {"z", "h:3", k, zb, 1, 1.0, third};
  ring_table_add_node(t, &s0, NULL, NULL);
  ring_table_add_node(t, &s1, NULL, NULL);
  ring_table_add_node(t, &s2, NULL, NULL);
  return t;
}

START_TEST(table_verify_catches_violations) {
  ring_table *t = hand_table(RING_NODE_ACTIVE);
  for (uint32_t tok = 0; tok < 64; tok++) { /* x,y share zone a on even tokens */
    ring_table_set_owner(t, tok, 0, tok % 2 ? 2 : 0);
    ring_table_set_owner(t, tok, 1, 1);
  }
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  char *report = NULL;
  int v = ring_table_verify(t, NULL, &report);
  ck_assert_int_gt(v, 32);
  ck_assert_ptr_nonnull(strstr(report, "token 0: x and y share zone a"));
  ck_assert_ptr_nonnull(strstr(report, "node y owns 64 token-replicas, target"));
  free(report);
  /* under no failure domain only the balance is wrong */
  v = ring_table_verify(t, "rack", &report);
  ck_assert_int_gt(v, 0);
  free(report);
  ring_table_free(t);

  t = hand_table(RING_NODE_DRAINING);
  for (uint32_t tok = 0; tok < 64; tok++) {
    ring_table_set_owner(t, tok, 0, 0);
    ring_table_set_owner(t, tok, 1, 2);
  }
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  v = ring_table_verify(t, NULL, &report);
  ck_assert_int_gt(v, 0);
  ck_assert_ptr_nonnull(strstr(report, "node z is draining but owns 64"));
  free(report);
  ck_assert_int_eq(ring_table_verify(NULL, NULL, NULL), RING_EINVAL);
  ring_table_free(t);
}
END_TEST

static Suite *plan_suite(void) {
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("plan");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, refuses_too_few_domains);
  tcase_add_test(tc, refuses_bad_input);
  tcase_add_test(tc, initial_is_balanced_and_spread);
  tcase_add_test(tc, replace_moves_only_the_lower_bound);
  tcase_add_test(tc, down_streams_from_survivors);
  tcase_add_test(tc, all_replicas_down_is_reported_lost);
  tcase_add_test(tc, domain_cap_binds);
  tcase_add_test(tc, weight_change_moves_to_the_heavier);
  tcase_add_test(tc, throttles_shape_waves);
  tcase_add_test(tc, removed_nodes_leave_the_list);
  tcase_add_test(tc, bytes_and_best_effort_reported);
  tcase_add_test(tc, deterministic);
  tcase_add_test(tc, table_verify_catches_violations);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(plan_suite()); }
