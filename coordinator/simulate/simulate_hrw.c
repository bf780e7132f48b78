/*
 * simulate_hrw.c: weighted rendezvous hashing (highest random weight) with
 * top-k replicas, for `ringctl simulate`.
 *
 * Sections: the cases; the table of weights; top-k picks; sim_hrw_run.
 *
 * The score is libring's (ring_rendezvous_pick, the rule ring_read_replica
 * serves reads by), never a copy: what is measured is what ships. A table
 * is only the carrier of the nodes' ids and weights here; its tokens are
 * not read.
 */
#include "simulate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

/* -------------------------------------------------------------- the cases */

/* The chapter's rendezvous.py weighs node0 3 and seven others 1 (50000
 * keys, blake2b): node0 gets 29.9%, ideal 30%. The set 3,2,2,2,1
 * has the same ideal with fewer, unequal peers. */
static const sim_hrw_case cases[SIM_HRW_CASES] = {
    {"3,1,1,1,1,1,1,1", 8, {3, 1, 1, 1, 1, 1, 1, 1}, 0.299},
    {"3,2,2,2,1", 5, {3, 2, 2, 2, 1}, NAN},
};

const sim_hrw_case *sim_hrw_cases(void) { return cases; }

/* ------------------------------------------------------ the table of weights */

#define HRW_TOKENS 64u /* the smallest table: its tokens are not read */

/* A sealed table of nodes "node-<i>" with the case's weights. Returns
 * RING_OK and *out (ring_table_free it), or an error with err filled. */
static int weights_table(const sim_hrw_case *c, ring_table **out, ring_error *err) {
  const ring_table_params p = {"simulate", NULL, 1, 0, HRW_TOKENS, 1};
  ring_table *t = NULL;
  int rc = ring_table_new(&p, &t, err);
  for (uint32_t i = 0; rc == RING_OK && i < c->nodes; i++) {
    char id[16], addr[24];
    snprintf(id, sizeof id, "node-%u", i);
    snprintf(addr, sizeof addr, "127.0.0.1:%u", 10000 + i); /* never contacted */
    const ring_node_spec n = {id, addr, NULL, NULL, 0, c->weight[i], RING_NODE_ACTIVE};
    rc = ring_table_add_node(t, &n, NULL, err);
  }
  for (uint32_t tok = 0; rc == RING_OK && tok < HRW_TOKENS; tok++)
    rc = ring_table_set_owner(t, tok, 0, 0);
  if (rc == RING_OK)
    rc = ring_table_seal(t, err);
  if (rc != RING_OK) {
    ring_table_free(t);
    return rc;
  }
  *out = t;
  return RING_OK;
}

/* ------------------------------------------------------------ top-k picks */

/* The key's k replicas among nodes 0..n-1, best first: each a pick among
 * the nodes left, so dropping one node shifts the others up unchanged. */
static void top_k(const ring_table *t, uint64_t h, uint32_t n, uint32_t k, uint16_t *out) {
  uint16_t cand[SIM_HRW_NODES_MAX];
  for (uint32_t i = 0; i < n; i++)
    cand[i] = (uint16_t)i;
  for (uint32_t j = 0; j < k; j++) {
    const int w = ring_rendezvous_pick(t, h, cand, (int)(n - j));
    out[j] = cand[w];
    cand[w] = cand[n - j - 1]; /* order among the rest does not matter */
  }
}

/* Whether the replicas other than `gone`, in order, lead `after`. */
static bool kept_in_order(const uint16_t *before, const uint16_t *after, uint32_t k,
                          uint16_t gone) {
  uint32_t j = 0;
  for (uint32_t i = 0; i < k; i++)
    if (before[i] != gone && before[i] != after[j++])
      return false;
  return true;
}

/* --------------------------------------------------------------- sim_hrw_run */

typedef struct hrw_tally {
  uint64_t first[SIM_HRW_NODES_MAX]; /* keys by first replica */
  uint64_t moved, kept_moved;        /* on the leave of the last node */
} hrw_tally;

static void tally_key(const ring_table *t, const sim_hrw_case *c, uint32_t k, uint64_t i,
                      hrw_tally *y) {
  char key[32];
  const int len = snprintf(key, sizeof key, "session-%" PRIu64, i);
  const uint64_t h = XXH3_64bits_withSeed(key, (size_t)len, ring_table_seed(t));
  uint16_t all[SIM_HRW_NODES_MAX], left[SIM_HRW_NODES_MAX];
  top_k(t, h, c->nodes, k, all);
  top_k(t, h, c->nodes - 1, k, left);
  y->first[all[0]]++;
  const uint16_t gone = (uint16_t)(c->nodes - 1);
  bool held = false;
  for (uint32_t j = 0; j < k; j++)
    held = held || all[j] == gone;
  y->moved += held;
  y->kept_moved += !kept_in_order(all, left, k, gone);
}

static void hrw_result(const sim_hrw_case *c, const hrw_tally *y, uint64_t keys, uint32_t k,
                       sim_hrw_result *out) {
  double total = 0, max_err = 0;
  for (uint32_t i = 0; i < c->nodes; i++)
    total += c->weight[i];
  for (uint32_t i = 0; i < c->nodes; i++) {
    const double e = fabs((double)y->first[i] / (double)keys - c->weight[i] / total);
    max_err = e > max_err ? e : max_err;
  }
  *out = (sim_hrw_result){c,
                          keys,
                          k,
                          (double)y->first[0] / (double)keys,
                          c->weight[0] / total,
                          max_err,
                          (double)y->moved / (double)keys,
                          (double)y->kept_moved / (double)keys};
}

int sim_hrw_run(const sim_hrw_case *c, uint64_t keys, sim_hrw_result *out, ring_error *err) {
  if (c->nodes < 2 || c->nodes > SIM_HRW_NODES_MAX || keys == 0)
    return RING_EINVAL;
  ring_table *t = NULL;
  int rc = weights_table(c, &t, err);
  if (rc != RING_OK)
    return rc;
  keys = keys < SIM_HRW_KEYS_MAX ? keys : SIM_HRW_KEYS_MAX;
  const uint32_t k = c->nodes - 1 < 3 ? c->nodes - 1 : 3;
  hrw_tally y = {{0}, 0, 0};
  for (uint64_t i = 0; i < keys; i++)
    tally_key(t, c, k, i, &y);
  hrw_result(c, &y, keys, k, out);
  ring_table_free(t);
  return RING_OK;
}
