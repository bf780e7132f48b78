/*
 * simulate_schemes.c: the hash-based placement schemes `ringctl simulate`
 * compares fixed tokens with.
 *
 * Sections: modulo; the hashed ring with virtual nodes; rendezvous; jump
 * consistent hash; destroying a scheme.
 *
 * Each answers for the three memberships in one go (see simulate.h), so a
 * ring does one binary search per key and rendezvous one pass over the
 * nodes. All hashes are XXH3, as in libring: the schemes differ in how
 * they place keys, not in the quality of their hash.
 */
#include "simulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

/* ---------------------------------------------------------------- modulo */

/* hash % n: the owner of nearly every key changes with n. */
static void modulo_owners(const sim_scheme *s, const sim_key *k, uint32_t out[SIM_MEMBERSHIPS]) {
  const uint32_t n = s->nodes;
  out[SIM_BASE] = (uint32_t)(k->hash % n);
  out[SIM_JOIN] = (uint32_t)(k->hash % (n + 1));
  if (n >= 2)
    out[SIM_LEAVE] = (uint32_t)(k->hash % (n - 1));
}

int sim_modulo_init(sim_scheme *s, uint32_t n) {
  *s = (sim_scheme){.name = "modulo", .nodes = n, .owners = modulo_owners};
  return RING_OK;
}

/* ---------------------------------------------- ring with virtual nodes */

/* One point on the circle. */
typedef struct point {
  uint64_t pos;  /* XXH3_64bits("node-<i>#<v>") */
  uint32_t node; /* i */
} point;

/* The points of nodes 0..N, sorted: the rings with N-1 and N nodes are the
 * same circle with the later nodes' points skipped, so one array serves
 * all three memberships. */
typedef struct ring_state {
  point *pts;
  size_t n_pts;
} ring_state;

static int point_cmp(const void *a, const void *b) {
  const point *x = a, *y = b;
  if (x->pos != y->pos)
    return x->pos < y->pos ? -1 : 1;
  return x->node < y->node ? -1 : x->node > y->node;
}

/* Index of the first point strictly after h (bisect_right), n_pts if none. */
static size_t after(const ring_state *r, uint64_t h) {
  size_t lo = 0, hi = r->n_pts;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->pts[mid].pos <= h)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Walks clockwise from the key: the first point is the join owner, the
 * first of a node < N the owner with N nodes, the first of a node < N-1
 * the owner after the leave. */
static void ring_owners(const sim_scheme *s, const sim_key *k, uint32_t out[SIM_MEMBERSHIPS]) {
  const ring_state *r = s->state;
  const uint32_t n = s->nodes;
  size_t i = after(r, k->hash);
  bool base_found = false;
  for (size_t step = 0; step < r->n_pts; step++, i++) {
    const uint32_t node = r->pts[i % r->n_pts].node;
    if (step == 0)
      out[SIM_JOIN] = node;
    if (!base_found && node < n) {
      out[SIM_BASE] = node;
      base_found = true;
    }
    if (n == 1 && base_found)
      return; /* no leave to answer for */
    if (n >= 2 && node < n - 1) {
      out[SIM_LEAVE] = node; /* node < N-1 < N: the base owner is known by now */
      return;
    }
  }
}

static void ring_destroy(sim_scheme *s) {
  ring_state *r = s->state;
  if (r != NULL)
    free(r->pts);
  free(r);
  s->state = NULL;
}

int sim_ring_init(sim_scheme *s, uint32_t n, uint32_t vnodes) {
  *s = (sim_scheme){
      .name = "ring", .vnodes = vnodes, .nodes = n, .owners = ring_owners, .destroy = ring_destroy};
  ring_state *r = calloc(1, sizeof *r);
  if (r == NULL)
    return RING_ENOMEM;
  s->state = r;
  r->n_pts = (size_t)(n + 1) * vnodes;
  if ((r->pts = malloc(r->n_pts * sizeof *r->pts)) == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i <= n; i++)
    for (uint32_t v = 0; v < vnodes; v++) {
      char name[32];
      int len = snprintf(name, sizeof name, "node-%u#%u", i, v);
      r->pts[(size_t)i * vnodes + v] = (point){XXH3_64bits(name, (size_t)len), i};
    }
  qsort(r->pts, r->n_pts, sizeof *r->pts, point_cmp);
  return RING_OK;
}

/* ------------------------------------------------------------ rendezvous */

/* Per node, the seed that makes XXH3 a hash of (key, node): a key's score
 * on node i is XXH3_64bits_withSeed(key, seed[i]), and the highest wins. */
typedef struct rendezvous_state {
  uint64_t *seed; /* N+1 entries */
} rendezvous_state;

/* One pass over nodes 0..N: the best among the first N-1, N and N+1. */
static void rendezvous_owners(const sim_scheme *s, const sim_key *k,
                              uint32_t out[SIM_MEMBERSHIPS]) {
  const rendezvous_state *r = s->state;
  const uint32_t n = s->nodes;
  uint64_t best = 0;
  uint32_t winner = 0;
  for (uint32_t i = 0; i <= n; i++) {
    const uint64_t score = XXH3_64bits_withSeed(k->s, k->len, r->seed[i]);
    if (i == 0 || score > best) {
      best = score;
      winner = i;
    }
    if (n >= 2 && i == n - 2)
      out[SIM_LEAVE] = winner;
    if (i == n - 1)
      out[SIM_BASE] = winner;
  }
  out[SIM_JOIN] = winner;
}

static void rendezvous_destroy(sim_scheme *s) {
  rendezvous_state *r = s->state;
  if (r != NULL)
    free(r->seed);
  free(r);
  s->state = NULL;
}

int sim_rendezvous_init(sim_scheme *s, uint32_t n) {
  *s = (sim_scheme){
      .name = "rendezvous", .nodes = n, .owners = rendezvous_owners, .destroy = rendezvous_destroy};
  rendezvous_state *r = calloc(1, sizeof *r);
  if (r == NULL)
    return RING_ENOMEM;
  s->state = r;
  if ((r->seed = malloc(((size_t)n + 1) * sizeof *r->seed)) == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i <= n; i++) {
    char name[24];
    int len = snprintf(name, sizeof name, "node-%u", i);
    r->seed[i] = XXH3_64bits(name, (size_t)len);
  }
  return RING_OK;
}

/* ------------------------------------------------------------------ jump */

/* Jump consistent hash (Lamping and Veach 2014, figure 1): the bucket in
 * [0, buckets) of a 64-bit key; growing buckets by one moves 1/(n+1). */
static uint32_t jump(uint64_t key, uint32_t buckets) {
  int64_t b = -1, j = 0;
  while (j < (int64_t)buckets) {
    b = j;
    key = key * 2862933555777941757ull + 1;
    j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
  }
  return (uint32_t)b;
}

/* Jump hash only removes the highest bucket, which is why every scheme
 * here lets node N-1, the last, leave. */
static void jump_owners(const sim_scheme *s, const sim_key *k, uint32_t out[SIM_MEMBERSHIPS]) {
  const uint32_t n = s->nodes;
  out[SIM_BASE] = jump(k->hash, n);
  out[SIM_JOIN] = jump(k->hash, n + 1);
  if (n >= 2)
    out[SIM_LEAVE] = jump(k->hash, n - 1);
}

int sim_jump_init(sim_scheme *s, uint32_t n) {
  *s = (sim_scheme){.name = "jump", .nodes = n, .owners = jump_owners};
  return RING_OK;
}

/* ----------------------------------------------------- destroying a scheme */

void sim_scheme_destroy(sim_scheme *s) {
  if (s != NULL && s->destroy != NULL)
    s->destroy(s);
}
