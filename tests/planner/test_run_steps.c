/*
 * test_run_steps.c: the run's step chooser (coordinator/cluster/run_steps.c,
 * rk_run_choose and rk_run_next_wave) as a property. Random clusters and
 * membership changes are planned without limits, as the coordinator plans,
 * then run step by step with limits drawn afresh at every step, as an
 * operator changing the throttle mid-run would. At every step:
 *   - at least one move goes (no limit stalls a run);
 *   - every move taken is of the current wave and not done before;
 *   - no token has two replicas in flight;
 *   - a set of more than one move stays within moves_per_wave, and within
 *     moves_per_domain for every hard domain it touches.
 * At the end every move is done exactly once, in at most as many steps as
 * there are moves. And a drain's first step spreads its moves evenly over
 * the receivers; the estimate (plan_eta.c) follows the steps and a
 * source's stream limit. RING_PROPERTY_SEED and RING_PROPERTY_CASES tune a run.
 */
#include "check_main.h"
#include "cluster.h"
#include "test_tables.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static uint32_t rng(uint32_t n) { /* splitmix64, uniform enough for [0, n) */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (uint32_t)((z ^ (z >> 31)) % n);
}

static uint64_t env_u64(const char *name, uint64_t def) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : def;
}

/* The plan for a random change of a random round-robin cluster; NULL when
 * the planner refuses it (too few zones for R). *base gets the table. */
static ring_plan *random_plan(ring_table **base) {
  static const uint32_t tokens[] = {64, 128, 256};
  uint32_t T = tokens[rng(3)], R = 1 + rng(3), n = R + 1 + rng(8), zones = R + rng(3);
  *base = test_table_rr(T, R, n, zones, NULL, 1);
  uint32_t extra = rng(4), total = n + extra;
  ring_node_spec *specs = calloc(total, sizeof *specs);
  char(*ids)[16] = calloc(total, sizeof *ids), (*zone)[16] = calloc(total, sizeof *zone);
  const char **keys = calloc(total, sizeof *keys), **vals = calloc(total, sizeof *vals);
  for (uint32_t i = 0; i < total; i++) {
    snprintf(ids[i], sizeof ids[i], "n%u", i);
    snprintf(zone[i], sizeof zone[i], "z%u", i < n ? i % zones : rng(zones));
    keys[i] = "zone";
    vals[i] = zone[i];
    specs[i] = (ring_node_spec){
        ids[i],          "127.0.0.1:7000", &keys[i], &vals[i], 1, 1.0 + (i >= n ? rng(3) : 0),
        RING_NODE_ACTIVE};
  }
  if (rng(2)) /* a node leaves too: drained or down */
    specs[rng(n)].state = rng(2) ? RING_NODE_DRAINING : RING_NODE_DOWN;
  ring_plan_config cfg = {.failure_domain = "zone"};
  ring_plan *p = NULL;
  ring_error err = {0};
  int rc = ring_plan_compute(*base, specs, total, &cfg, &p, &err);
  ck_assert_msg(rc == RING_OK || rc == RING_EPLAN, "planning: %s", err.message);
  free(specs), free(ids), free(zone), free(keys), free(vals);
  return rc == RING_OK ? p : NULL;
}

/* The hard domain of node i of the target, "" when unlabelled. */
static const char *domain(const ring_table *t, uint16_t i) {
  const char *v = i == RING_NODE_NONE ? NULL : ring_table_node_label(t, i, "zone");
  return v ? v : "";
}

/* Checks one step's set against its limits. */
static void check_set(const ring_plan *p, const uint8_t *done, const uint8_t *pick, uint32_t n,
                      uint32_t wave, const rk_throttle *th) {
  const ring_move *m = ring_plan_moves(p);
  const ring_table *t = ring_plan_target(p);
  uint32_t T = ring_table_tokens(t), moves = ring_plan_move_count(p), *per_token = calloc(T, 4);
  const char *dom[64];
  uint32_t per_dom[64] = {0}, n_dom = 0, counted = 0;
  for (uint32_t i = 0; i < moves; i++) {
    if (!rk_bit(pick, i))
      continue;
    counted++;
    ck_assert_uint_eq(m[i].wave, wave);
    ck_assert_msg(!rk_bit(done, i), "move %u taken twice", i);
    ck_assert_msg(++per_token[m[i].token] == 1, "token %u has two replicas in flight", m[i].token);
    const char *d[2] = {domain(t, m[i].from), domain(t, m[i].to)};
    for (int k = 0; k < 2 && th->moves_per_domain; k++) {
      if (k == 1 && strcmp(d[0], d[1]) == 0)
        break; /* a move inside one domain counts once there */
      uint32_t j = 0;
      while (j < n_dom && strcmp(dom[j], d[k]) != 0)
        j++;
      if (j == n_dom && n_dom < 64)
        dom[n_dom++] = d[k];
      per_dom[j < 64 ? j : 63]++;
    }
  }
  ck_assert_uint_eq(counted, n);
  if (n > 1 && th->moves_per_wave)
    ck_assert_uint_le(n, th->moves_per_wave);
  for (uint32_t j = 0; n > 1 && j < n_dom; j++)
    ck_assert_msg(per_dom[j] <= th->moves_per_domain, "domain %s: %u moves, limit %u", dom[j],
                  per_dom[j], th->moves_per_domain);
  free(per_token);
}

/* Runs p to the end with limits drawn at every step; returns the steps. */
static uint32_t run_to_end(const ring_plan *p) {
  uint32_t moves = ring_plan_move_count(p), steps = 0, left = moves;
  size_t bytes = (moves + 7) / 8 + 1;
  uint8_t *done = calloc(bytes, 1), *pick = calloc(bytes, 1);
  uint32_t wave = rk_run_next_wave(p, done, 0);
  while (wave < ring_plan_wave_count(p)) {
    rk_throttle th = {.moves_per_wave = rng(3) ? rng(40) : 0,
                      .moves_per_domain = rng(3) ? rng(8) : 0,
                      .moves_per_node = rng(8)}; /* the agents': never limits a set */
    memset(pick, 0, bytes);
    uint32_t n = rk_run_choose(p, done, &th, wave, pick);
    ck_assert_uint_ge(n, 1);
    check_set(p, done, pick, n, wave, &th);
    for (size_t b = 0; b < bytes; b++)
      done[b] |= pick[b];
    left -= n;
    ck_assert_uint_le(++steps, moves);
    wave = rk_run_next_wave(p, done, wave);
  }
  ck_assert_uint_eq(left, 0);
  for (uint32_t i = 0; i < moves; i++)
    ck_assert_msg(rk_bit(done, i), "move %u never ran", i);
  free(done);
  free(pick);
  return steps;
}

START_TEST(limits_hold_at_every_step) {
  rng_state = env_u64("RING_PROPERTY_SEED", 0x5eed5);
  uint64_t cases = env_u64("RING_PROPERTY_CASES", 400), planned = 0, moves = 0, steps = 0;
  for (uint64_t c = 0; c < cases; c++) {
    ring_table *base = NULL;
    ring_plan *p = random_plan(&base);
    if (p != NULL) {
      planned++;
      moves += ring_plan_move_count(p);
      steps += run_to_end(p);
    }
    ring_plan_free(p);
    ring_table_free(base);
  }
  printf("run steps: %llu cases, %llu planned, %llu moves in %llu steps\n",
         (unsigned long long)cases, (unsigned long long)planned, (unsigned long long)moves,
         (unsigned long long)steps);
  ck_assert_uint_gt(planned, cases / 2);
}
END_TEST

/* Owners in ranges, as joins over time leave them: of 4 nodes, n0 owns
 * every token and the one node without a replica of token t is n3 in the
 * first third, n2 in the second, n1 in the last. So a drain of n0 gives
 * its moves, in plan (token) order, to one receiver at a time. */
static uint16_t owner_ranges(uint32_t t, uint32_t r, uint32_t tokens, uint32_t replicas,
                             uint32_t n) {
  (void)replicas, (void)n;
  uint16_t without = (uint16_t)(3 - t * 3 / tokens);
  uint16_t o = (uint16_t)r; /* slots 0..2 over the nodes 0..3 but `without` */
  return o >= without ? (uint16_t)(o + 1) : o;
}

/* A drain of n0 from 4 nodes in 4 zones, R 3, planned without limits as
 * the coordinator plans. */
static ring_plan *drain_plan(uint32_t T, uint32_t n, ring_table **base) {
  *base = test_table_owned(T, 3, n, n, NULL, 1, owner_ranges);
  ring_node_spec specs[8];
  char ids[8][8], zone[8][8];
  const char *keys[8], *vals[8];
  for (uint32_t i = 0; i < n; i++) {
    snprintf(ids[i], sizeof ids[i], "n%u", i);
    snprintf(zone[i], sizeof zone[i], "z%u", i);
    keys[i] = "zone", vals[i] = zone[i];
    specs[i] = (ring_node_spec){ids[i],
                                "127.0.0.1:7000",
                                &keys[i],
                                &vals[i],
                                1,
                                1.0,
                                i == 0 ? RING_NODE_DRAINING : RING_NODE_ACTIVE};
  }
  ring_plan_config cfg = {.failure_domain = "zone"};
  ring_plan *p = NULL;
  ring_error err = {0};
  ck_assert_msg(ring_plan_compute(*base, specs, n, &cfg, &p, &err) == RING_OK, "%s", err.message);
  return p;
}

/* The case: a drain to three receivers, 256 moves at once. Filled
 * in plan order the first set goes 256 / 0 / 0 here (193 / 63 / 0 in the
 * issue's cluster); one per receiver in turn it gives each a third, so no
 * receiver idles while another works. */
START_TEST(first_step_spreads_receivers) {
  ring_table *base;
  ring_plan *p = drain_plan(1024, 4, &base);
  uint32_t moves = ring_plan_move_count(p), per[4] = {0}, n;
  ck_assert_uint_eq(moves, 1024); /* n0 holds a replica of every token */
  uint8_t *done = calloc(moves / 8 + 1, 1), *pick = calloc(moves / 8 + 1, 1);
  rk_throttle th = {.moves_per_wave = 256, .moves_per_node = 4};
  n = rk_run_choose(p, done, &th, rk_run_next_wave(p, done, 0), pick);
  ck_assert_uint_eq(n, 256);
  for (uint32_t i = 0; i < moves; i++)
    per[ring_plan_moves(p)[i].to] += rk_bit(pick, i);
  printf("first step of a drain to three receivers: %u / %u / %u\n", per[1], per[2], per[3]);
  ck_assert_uint_eq(per[0], 0);
  for (int r = 1; r <= 3; r++)
    ck_assert_msg(per[r] >= 85 && per[r] <= 86, "receiver n%d got %u of 256", r, per[r]);
  free(done), free(pick);
  ring_plan_free(p);
  ring_table_free(base);
}
END_TEST

/* The estimate: equal arcs spread evenly come within an arc a step of the
 * busiest receiver's share (in plan order they took 2.5 times as long);
 * one source serving one arc at a time (moves_per_node 1) to three
 * receivers takes three times as long, and the estimate names that
 * source. */
START_TEST(eta_models_steps_and_sources) {
  ring_table *base;
  ring_plan *p = drain_plan(1024, 4, &base);
  uint64_t *arc = malloc(1024 * sizeof *arc);
  for (uint32_t t = 0; t < 1024; t++)
    arc[t] = 1000;
  rk_throttle th = {.moves_per_wave = 256, .moves_per_node = 4, .bytes_per_sec = 1000};
  rk_eta e;
  char why[96];
  ck_assert_int_eq(rk_plan_eta(p, arc, &th, &e), RING_OK);
  printf("drain eta %.1f s, ideal %.1f s, %s\n", (double)e.ms / 1e3, (double)e.ideal_ms / 1e3,
         rk_eta_text(p, &e, why, sizeof why));
  ck_assert_uint_ge(e.ms, e.ideal_ms);
  ck_assert_uint_le(e.ms, e.ideal_ms + 1000u * e.steps); /* an arc's rounding per step */
  ck_assert(!e.bound_sends && e.bound != 0);
  th.moves_per_node = 1;
  ck_assert_int_eq(rk_plan_eta(p, arc, &th, &e), RING_OK);
  printf("one stream per source: eta %.1f s, %s\n", (double)e.ms / 1e3,
         rk_eta_text(p, &e, why, sizeof why));
  ck_assert(e.bound_sends && e.bound == 0);
  ck_assert_uint_ge(e.ms, 3 * e.ideal_ms - 3000);
  th.bytes_per_sec = 0; /* no rate: no estimate */
  ck_assert_int_eq(rk_plan_eta(p, arc, &th, &e), RING_OK);
  ck_assert_uint_eq(e.ms, 0);
  free(arc);
  ring_plan_free(p);
  ring_table_free(base);
}
END_TEST

int main(void) {
  Suite *s = suite_create("run_steps");
  TCase *tc = tcase_create("steps");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, limits_hold_at_every_step);
  tcase_add_test(tc, first_step_spreads_receivers);
  tcase_add_test(tc, eta_models_steps_and_sources);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
