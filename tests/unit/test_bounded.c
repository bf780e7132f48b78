/*
 * test_bounded.c: routing with bounded loads (ring_bounded_*).
 *
 * Sections: helpers (PRNG, Zipf keys, tables, keys with a given first
 * choice); the cap under a skewed stream (prints the figures);
 * the cap's n; hysteresis; the sticky map; down nodes and RING_EUNAVAIL;
 * argument checks.
 *
 * Tables with R = 1 and round-robin owners make preference orders easy to
 * read: a key whose token is owned by node i prefers i, i+1, i+2, ...
 * Hot loops count failures and assert once: every ck_assert records a
 * mark point, which would dominate a 200k-request simulation.
 */
#include "ring.h"
#include "completion_heap.h"
#include "test_tables.h"
#include "check_main.h"

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* SplitMix64: deterministic, so a failure reproduces. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }

/* Zipf(s) over ranks 0..n-1 by inverse CDF: rank 0 is the hottest key. */
typedef struct zipf {
  double *cdf; /* cdf[i] = P(rank <= i) */
  uint32_t n;
} zipf;

static void zipf_init(zipf *z, uint32_t n, double s) {
  z->cdf = malloc(n * sizeof *z->cdf);
  ck_assert_ptr_nonnull(z->cdf);
  z->n = n;
  double sum = 0;
  for (uint32_t i = 0; i < n; i++)
    z->cdf[i] = (sum += 1 / pow(i + 1, s));
  for (uint32_t i = 0; i < n; i++)
    z->cdf[i] /= sum;
}

static uint32_t zipf_draw(const zipf *z, uint64_t *rng) {
  double u = rng_unit(rng);
  uint32_t lo = 0, hi = z->n - 1;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (z->cdf[mid] < u)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* A sealed table of n nodes with the given ids (NULL: "n0".."n<n-1>") and
 * states (NULL: all active); owners round-robin over the first `owning`
 * nodes, so nodes from `owning` on hold no token. */
static ring_table *table_with(uint32_t tokens, uint32_t R, uint32_t n, uint32_t owning,
                              const char *const *ids, const ring_node_state *states,
                              uint64_t version) {
  ring_table_params p = {"test", NULL, version, 0, tokens, R};
  ring_table *t = NULL;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  for (uint32_t i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof id, "n%u", i);
    ring_node_spec s = {ids ? ids[i] : id,
                        "127.0.0.1:7000",
                        NULL,
                        NULL,
                        0,
                        1.0,
                        states ? states[i] : RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  }
  for (uint32_t tok = 0; tok < tokens; tok++)
    for (uint32_t r = 0; r < R; r++)
      ck_assert_int_eq(ring_table_set_owner(t, tok, r, (uint16_t)((tok * R + r) % owning)),
                       RING_OK);
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  return t;
}

/* The i-th key (i = 0, 1, ...) whose first choice in t is `node`, written
 * to buf; returns its length. */
static size_t key_preferring(const ring_table *t, uint16_t node, uint32_t i, char *buf,
                             size_t cap) {
  for (uint32_t k = 0, found = 0;; k++) {
    int len = snprintf(buf, cap, "key-%u", k);
    uint16_t owner;
    ck_assert_int_eq(ring_lookup(t, buf, (size_t)len, &owner, 1), 1);
    if (owner == node && found++ == i)
      return (size_t)len;
  }
}

static ring_bounded *router(double c, double margin, uint32_t sticky, uint64_t ttl) {
  ring_bounded_opts o = {c, margin, sticky, ttl};
  ring_bounded *b = NULL;
  ck_assert_int_eq(ring_bounded_new(&o, &b), RING_OK);
  ck_assert_ptr_nonnull(b);
  return b;
}

static uint64_t sum(const uint64_t *loads, uint32_t n) {
  uint64_t s = 0;
  for (uint32_t i = 0; i < n; i++)
    s += loads[i];
  return s;
}

/* Routes with total = the sum of loads; returns the node, asserting OK. */
static uint16_t route_ok(ring_bounded *b, const ring_table *t, const char *key,
                         const uint64_t *loads, uint64_t now, int *first) {
  uint16_t node = RING_NODE_NONE;
  int rc = ring_bounded_route(b, t, key, strlen(key), loads, sum(loads, ring_table_node_count(t)),
                              now, &node, first);
  ck_assert_int_eq(rc, RING_OK);
  ck_assert_uint_lt(node, ring_table_node_count(t));
  return node;
}

/* -------------------------------------------------- the cap under skew */

#define SIM_REQUESTS 200000u
#define SIM_KEYS 100000u
#define SIM_MEAN_MS 1000u /* mean duration: ~1000 requests in flight */

static const struct {
  uint32_t nodes;
  double c;
} sim_cfg[] = {{10, 1.05}, {10, 1.25}, {50, 1.05}, {50, 1.25}};

typedef struct sim_stats {
  uint64_t first;    /* routed to the first choice */
  uint64_t over_cap; /* assignments that would take a node past the cap */
  uint64_t failed;   /* routes that did not return RING_OK */
  double ratio_sum;  /* sum of max/mean over the sampled steps */
  double ratio_peak; /* the worst max/mean seen */
  uint64_t samples;  /* steps sampled (after warm-up) */
  uint64_t repeats;  /* requests for a key seen before */
  uint64_t same;     /* ... routed to the node its previous request got */
  uint16_t *last;    /* per key rank: the node of its latest request */
} sim_stats;

/* One request at time `now`: route, check the cap, assign, schedule. */
static void sim_step(ring_bounded *b, const ring_table *t, uint32_t n, double c, uint64_t *loads,
                     uint64_t *total, heap *h, uint64_t now, uint32_t rank, uint64_t *rng,
                     sim_stats *st) {
  char key[16];
  int len = snprintf(key, sizeof key, "k%u", rank);
  uint16_t node;
  int first;
  if (ring_bounded_route(b, t, key, (size_t)len, loads, *total, now, &node, &first) != RING_OK) {
    st->failed++;
    return;
  }
  uint64_t cap = (uint64_t)ceil(c * (double)(*total + 1) / n);
  st->over_cap += loads[node] + 1 > cap;
  st->first += first != 0;
  st->repeats += st->last[rank] != RING_NODE_NONE;
  st->same += st->last[rank] == node;
  st->last[rank] = node;
  loads[node]++;
  (*total)++;
  heap_push(h, (done){now + 1 + rng_next(rng) % (2 * SIM_MEAN_MS - 1), node});
}

static void sim_sample(const uint64_t *loads, uint32_t n, uint64_t total, sim_stats *st) {
  if (total == 0)
    return;
  uint64_t max = 0;
  for (uint32_t i = 0; i < n; i++)
    max = loads[i] > max ? loads[i] : max;
  double ratio = (double)max * n / (double)total;
  st->ratio_sum += ratio;
  st->ratio_peak = ratio > st->ratio_peak ? ratio : st->ratio_peak;
  st->samples++;
}

/* A Zipf(1.0) stream over 100k keys, one request a millisecond, durations
 * uniform in [1, 2*SIM_MEAN_MS): the hottest key alone is ~8% of traffic,
 * most of a 10-node cluster's fair share per node. No assignment may take
 * a node past the cap. Printed: affinity, the fraction routed to the first
 * choice; same-node, the fraction of repeat requests that went where the
 * key's previous one did (what the sticky map buys); max/mean load. */
START_TEST(test_cap_holds_under_skew) {
  const uint32_t n = sim_cfg[_i].nodes;
  const double c = sim_cfg[_i].c;
  ring_table *t = test_table_rr(1024, 3, n, 3, NULL, 1);
  ring_bounded *b = router(c, 0.05, 4096, 2000);
  zipf z;
  zipf_init(&z, SIM_KEYS, 1.0);
  uint64_t *loads = calloc(n, sizeof *loads), total = 0, rng = 42;
  heap h = {malloc(SIM_REQUESTS * sizeof *h.v), 0};
  ck_assert(loads != NULL && h.v != NULL);
  sim_stats st = {.last = malloc(SIM_KEYS * sizeof *st.last)};
  ck_assert_ptr_nonnull(st.last);
  memset(st.last, 0xff, SIM_KEYS * sizeof *st.last); /* RING_NODE_NONE */
  for (uint64_t now = 0; now < SIM_REQUESTS; now++) {
    while (h.n > 0 && h.v[0].at <= now) {
      done d = heap_pop(&h);
      loads[d.node]--;
      total--;
    }
    sim_step(b, t, n, c, loads, &total, &h, now, zipf_draw(&z, &rng), &rng, &st);
    if (now >= 5 * SIM_MEAN_MS)
      sim_sample(loads, n, total, &st);
  }
  printf("bounded: nodes=%u c=%.2f requests=%u affinity=%.4f same-node=%.4f "
         "max/mean avg=%.3f peak=%.3f\n",
         n, c, SIM_REQUESTS, (double)st.first / SIM_REQUESTS, (double)st.same / (double)st.repeats,
         st.ratio_sum / (double)st.samples, st.ratio_peak);
  fflush(stdout);
  ck_assert_uint_eq(st.failed, 0);
  ck_assert_uint_eq(st.over_cap, 0);
  ck_assert_uint_eq(total, sum(loads, n));
  free(st.last);
  free(h.v);
  free(loads);
  free(z.cdf);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* With room everywhere a key goes to its first choice: ring_lookup's primary. */
START_TEST(test_first_choice_when_room) {
  ring_table *t = test_table_rr(256, 3, 10, 3, NULL, 1);
  ring_bounded *b = router(1.25, 0.05, 64, 1000);
  uint64_t loads[10] = {0};
  for (uint32_t k = 0; k < 1000; k++) {
    char key[16];
    snprintf(key, sizeof key, "f%u", k);
    uint16_t primary;
    ck_assert_int_eq(ring_lookup(t, key, strlen(key), &primary, 1), 1);
    int first = -1;
    ck_assert_uint_eq(route_ok(b, t, key, loads, k, &first), primary);
    ck_assert_int_eq(first, 1);
  }
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------------------------ the cap's n */

/* n counts nodes that own a token and are up: with node 3 down, loads
 * {3,3,3,0} give cap ceil(10/3) = 4 (n = 3), not ceil(10/4) = 3. */
START_TEST(test_cap_excludes_down_nodes) {
  const ring_node_state st[] = {RING_NODE_ACTIVE, RING_NODE_ACTIVE, RING_NODE_ACTIVE,
                                RING_NODE_DOWN};
  ring_table *t = table_with(64, 1, 4, 4, NULL, st, 1);
  ring_bounded *b = router(1.0, 0, 0, 0);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  uint64_t loads[] = {3, 3, 3, 0};
  int first = 0;
  ck_assert_uint_eq(route_ok(b, t, key, loads, 0, &first), 0);
  ck_assert_int_eq(first, 1);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* A node without tokens neither counts toward n nor takes keys: with node
 * 4 tokenless, loads {3,3,3,3,0} give cap ceil(13/4) = 4, not 3. */
START_TEST(test_cap_excludes_tokenless_nodes) {
  ring_table *t = table_with(64, 1, 5, 4, NULL, NULL, 1);
  ck_assert_uint_eq(ring_table_node_replicas(t, 4), 0);
  ring_bounded *b = router(1.0, 0, 0, 0);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  uint64_t loads[] = {3, 3, 3, 3, 0};
  ck_assert_uint_eq(route_ok(b, t, key, loads, 0, NULL), 0);
  /* Owners all past the cap (total understated): the idle node 4 is not
   * in any preference order, so nothing qualifies. */
  uint64_t full[] = {50, 50, 50, 50, 0};
  uint16_t node = 77;
  ck_assert_int_eq(ring_bounded_route(b, t, key, strlen(key), full, 12, 0, &node, NULL),
                   RING_EUNAVAIL);
  ck_assert_uint_eq(node, 77);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* A node exactly at the cap is skipped; one below it is not. */
START_TEST(test_cap_boundary) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.0, 0, 0, 0);
  uint64_t at_cap[] = {5, 4, 4, 4}; /* total 17: cap ceil(18/4) = 5 */
  int first = 1;
  ck_assert_uint_eq(route_ok(b, t, key, at_cap, 0, &first), 1);
  ck_assert_int_eq(first, 0);
  uint64_t under[] = {4, 4, 4, 4}; /* total 16: cap ceil(17/4) = 5 */
  ck_assert_uint_eq(route_ok(b, t, key, under, 1, &first), 0);
  ck_assert_int_eq(first, 1);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* A huge c or total saturates the cap instead of overflowing: every node
 * is under it and the key goes to its first choice. */
START_TEST(test_cap_saturates) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  uint64_t loads[] = {1000, 0, 0, 0};
  const double cs[] = {1e300, 1.0};
  const uint64_t totals[] = {1000, UINT64_MAX - 1};
  for (int i = 0; i < 2; i++) {
    ring_bounded *b = router(cs[i], 0, 16, 100);
    uint16_t node = 77;
    ck_assert_int_eq(ring_bounded_route(b, t, key, strlen(key), loads, totals[i], 0, &node, NULL),
                     RING_OK);
    ck_assert_uint_eq(node, 0);
    ring_bounded_free(b);
  }
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------------------------ hysteresis */

/* c = 2, margin 0.5, 4 nodes, key prefers node 0. Once node 0 reaches the
 * cap it is skipped until its load is at most cap/2, then taken again. */
START_TEST(test_hysteresis_skips_until_margin) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(2.0, 0.5, 0, 0);
  int first = 1;
  uint64_t at_cap[] = {11, 2, 2, 2}; /* cap ceil(2*18/4) = 9: node 0 hot */
  ck_assert_uint_eq(route_ok(b, t, key, at_cap, 0, &first), 1);
  ck_assert_int_eq(first, 0);
  uint64_t below[] = {6, 2, 2, 2}; /* cap 7, cool floor(3.5) = 3 */
  ck_assert_uint_eq(route_ok(b, t, key, below, 1, &first), 1);
  ck_assert_int_eq(first, 0);
  ring_bounded *fresh = router(2.0, 0.5, 0, 0); /* never saw node 0 hot */
  ck_assert_uint_eq(route_ok(fresh, t, key, below, 1, NULL), 0);
  ring_bounded_free(fresh);
  uint64_t near[] = {3, 2, 2, 2}; /* cap 5, cool floor(2.5) = 2: still hot */
  ck_assert_uint_eq(route_ok(b, t, key, near, 2, NULL), 1);
  uint64_t cooled[] = {2, 2, 2, 2}; /* cap 5, cool 2: 2 <= 2, eligible */
  ck_assert_uint_eq(route_ok(b, t, key, cooled, 3, &first), 0);
  ck_assert_int_eq(first, 1);
  /* Cooled means cleared: back at 3 (under the cap) node 0 stays eligible. */
  ck_assert_uint_eq(route_ok(b, t, key, near, 4, NULL), 0);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* A hot flag belongs to a node, not an index: a newer table that puts
 * another node at the hot node's index starts that node cool. */
START_TEST(test_hysteresis_follows_identity) {
  const char *ids1[] = {"n0", "n1", "n2", "n3"}, *ids2[] = {"x0", "n1", "n2", "n3"};
  ring_table *t1 = table_with(64, 1, 4, 4, ids1, NULL, 1);
  ring_table *same = table_with(64, 1, 4, 4, ids1, NULL, 2);
  ring_table *other = table_with(64, 1, 4, 4, ids2, NULL, 3);
  char key[32];
  key_preferring(t1, 0, 0, key, sizeof key);
  ring_bounded *b = router(2.0, 0.5, 0, 0);
  uint64_t at_cap[] = {11, 2, 2, 2}, below[] = {6, 2, 2, 2};
  ck_assert_uint_eq(route_ok(b, t1, key, at_cap, 0, NULL), 1);
  ck_assert_uint_eq(route_ok(b, same, key, below, 1, NULL), 1);
  ck_assert_uint_eq(route_ok(b, other, key, below, 2, NULL), 0);
  ring_bounded_free(b);
  ring_table_free(t1);
  ring_table_free(same);
  ring_table_free(other);
}
END_TEST

/* margin 0: no hysteresis, a node is eligible as soon as it is under the cap. */
START_TEST(test_hysteresis_zero_margin) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(2.0, 0, 0, 0);
  uint64_t at_cap[] = {11, 2, 2, 2};
  ck_assert_uint_eq(route_ok(b, t, key, at_cap, 0, NULL), 1);
  uint64_t below[] = {6, 2, 2, 2}; /* cap 7 */
  ck_assert_uint_eq(route_ok(b, t, key, below, 1, NULL), 0);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* When every node under the cap is hot, the hysteresis gives way rather
 * than refuse the key: the first of them in preference order takes it. */
START_TEST(test_hysteresis_never_refuses) {
  ring_table *t = table_with(64, 1, 2, 2, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.0, 0.5, 0, 0);
  uint64_t a_full[] = {6, 5}; /* cap ceil(12/2) = 6: node 0 hot */
  ck_assert_uint_eq(route_ok(b, t, key, a_full, 0, NULL), 1);
  uint64_t b_full[] = {5, 7}; /* cap 7: node 1 at it, node 0 hot at 5 > 3 */
  ck_assert_uint_eq(route_ok(b, t, key, b_full, 1, NULL), 0);
  uint64_t both_hot[] = {6, 6}; /* cap 7, cool 3: both hot, both under */
  ck_assert_uint_eq(route_ok(b, t, key, both_hot, 2, NULL), 0);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------------------------ sticky map */

/* c = 1.25, margin 0, ttl 1000 ms, 4 nodes, key prefers node 0. */
#define STICKY_TTL 1000u

static uint16_t place_away(ring_bounded *b, const ring_table *t, const char *key, uint64_t now) {
  uint64_t full[] = {10, 0, 0, 0}; /* cap ceil(1.25*11/4) = 4 */
  int first = 1;
  uint16_t node = route_ok(b, t, key, full, now, &first);
  ck_assert_int_eq(first, 0);
  return node;
}

/* Moved once, the key stays on its new node while that node is eligible,
 * even though its first choice has room again; each hit renews the ttl. */
START_TEST(test_sticky_keeps_key) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.25, 0, 64, STICKY_TTL);
  ck_assert_uint_eq(place_away(b, t, key, 0), 1);
  uint64_t even[] = {1, 1, 1, 1}; /* cap 2: every node eligible */
  int first = 1;
  ck_assert_uint_eq(route_ok(b, t, key, even, 500, &first), 1);
  ck_assert_int_eq(first, 0);
  ck_assert_uint_eq(route_ok(b, t, key, even, 1400, NULL), 1); /* 900 after 500 */
  ring_bounded *fresh = router(1.25, 0, 64, STICKY_TTL);
  ck_assert_uint_eq(route_ok(fresh, t, key, even, 1400, NULL), 0);
  ring_bounded_free(fresh);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* ttl after the last use the entry is gone: the key is back on its first
 * choice, and stays there (no entry once placed there). */
START_TEST(test_sticky_expires) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.25, 0, 64, STICKY_TTL);
  ck_assert_uint_eq(place_away(b, t, key, 100), 1);
  uint64_t even[] = {1, 1, 1, 1};
  ck_assert_uint_eq(route_ok(b, t, key, even, 100 + STICKY_TTL - 1, NULL), 1);
  int first = 0;
  const uint64_t expired = 100 + 2 * STICKY_TTL - 1; /* ttl after the hit */
  ck_assert_uint_eq(route_ok(b, t, key, even, expired, &first), 0);
  ck_assert_int_eq(first, 1);
  ck_assert_uint_eq(route_ok(b, t, key, even, expired + 1, NULL), 0);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* A sticky node that stops being eligible (at the cap, or down in a newer
 * table) loses the key at once, ttl or not. */
START_TEST(test_sticky_yields_when_ineligible) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.25, 0, 64, STICKY_TTL);
  ck_assert_uint_eq(place_away(b, t, key, 0), 1);
  uint64_t one_full[] = {1, 5, 1, 1}; /* cap ceil(1.25*9/4) = 3 */
  int first = 0;
  ck_assert_uint_eq(route_ok(b, t, key, one_full, 10, &first), 0);
  ck_assert_int_eq(first, 1);

  ck_assert_uint_eq(place_away(b, t, key, 20), 1);
  const ring_node_state st[] = {RING_NODE_ACTIVE, RING_NODE_DOWN, RING_NODE_ACTIVE,
                                RING_NODE_ACTIVE};
  ring_table *t2 = table_with(64, 1, 4, 4, NULL, st, 2);
  uint64_t even[] = {1, 1, 1, 1};
  ck_assert_uint_eq(route_ok(b, t2, key, even, 30, NULL), 0);
  ring_table_free(t2);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* An entry names its node by id as well as index: a newer table that puts
 * another node at that index does not inherit the key. */
START_TEST(test_sticky_detects_reused_index) {
  const char *ids1[] = {"n0", "n1", "n2", "n3"}, *ids2[] = {"n0", "x1", "n2", "n3"};
  ring_table *t1 = table_with(64, 1, 4, 4, ids1, NULL, 1);
  ring_table *same = table_with(64, 1, 4, 4, ids1, NULL, 2);
  ring_table *other = table_with(64, 1, 4, 4, ids2, NULL, 3);
  char key[32];
  key_preferring(t1, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.25, 0, 64, STICKY_TTL);
  ck_assert_uint_eq(place_away(b, t1, key, 0), 1);
  uint64_t even[] = {1, 1, 1, 1};
  ck_assert_uint_eq(route_ok(b, same, key, even, 10, NULL), 1);
  ck_assert_uint_eq(route_ok(b, other, key, even, 20, NULL), 0);
  ring_bounded_free(b);
  ring_table_free(t1);
  ring_table_free(same);
  ring_table_free(other);
}
END_TEST

/* Places `count` keys preferring node 0 away from it (node 0 full), one a
 * millisecond, then routes them again with room everywhere and marks in
 * stuck[i] whether key i is still held by the map. Returns how many are. */
static uint32_t stuck_after_flood(ring_bounded *b, const ring_table *t, uint32_t count,
                                  bool *stuck) {
  uint32_t *ids = malloc(count * sizeof *ids); /* "key-<id>" prefers node 0 */
  ck_assert_ptr_nonnull(ids);
  char key[32];
  for (uint32_t k = 0, i = 0; i < count; k++) {
    int len = snprintf(key, sizeof key, "key-%u", k);
    uint16_t owner;
    ck_assert_int_eq(ring_lookup(t, key, (size_t)len, &owner, 1), 1);
    if (owner == 0)
      ids[i++] = k;
  }
  uint64_t full[] = {1000, 0, 0, 0}, idle[] = {0, 0, 0, 0};
  uint32_t away = 0, held = 0;
  for (uint32_t i = 0; i < count; i++) {
    snprintf(key, sizeof key, "key-%u", ids[i]);
    int first = 1;
    route_ok(b, t, key, full, i, &first);
    away += first == 0;
  }
  ck_assert_uint_eq(away, count);
  for (uint32_t i = 0; i < count; i++) {
    snprintf(key, sizeof key, "key-%u", ids[i]);
    int first = 1;
    route_ok(b, t, key, idle, count, &first);
    held += (stuck[i] = first == 0);
  }
  free(ids);
  return held;
}

/* The map never grows: flooding a map of capacity 5 (rounded up to 8) with
 * 100 moved keys leaves at most 8 held, and those are the newest. */
START_TEST(test_sticky_capacity_small) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  ring_bounded *b = router(1.25, 0, 5, UINT64_MAX);
  bool stuck[100];
  uint32_t held = stuck_after_flood(b, t, 100, stuck);
  ck_assert_uint_le(held, 8);
  for (uint32_t i = 0; i < 90; i++)
    ck_assert_msg(!stuck[i], "old key %u survived", i);
  for (uint32_t i = 95; i < 100; i++)
    ck_assert_msg(stuck[i], "new key %u evicted", i);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* 20000 moved keys through a map of 1000 (1024) entries: at most 1024 are
 * held afterwards, the first thousand have all given way, and the map is
 * used (more than half full). */
START_TEST(test_sticky_capacity_large) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  ring_bounded *b = router(1.25, 0, 1000, UINT64_MAX);
  enum { COUNT = 20000 };
  bool *stuck = calloc(COUNT, sizeof *stuck);
  ck_assert_ptr_nonnull(stuck);
  uint32_t held = stuck_after_flood(b, t, COUNT, stuck);
  printf("bounded: sticky capacity 1000 (1024 slots), %d moved keys, %u held\n", COUNT, held);
  fflush(stdout);
  ck_assert_uint_le(held, 1024);
  ck_assert_uint_gt(held, 512);
  uint32_t old = 0;
  for (uint32_t i = 0; i < 1000; i++)
    old += stuck[i];
  ck_assert_uint_eq(old, 0);
  free(stuck);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* Capacity 0 disables the map: a moved key returns as soon as it can. */
START_TEST(test_sticky_disabled) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.25, 0, 0, STICKY_TTL);
  ck_assert_uint_eq(place_away(b, t, key, 0), 1);
  uint64_t even[] = {1, 1, 1, 1};
  ck_assert_uint_eq(route_ok(b, t, key, even, 1, NULL), 0);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------ down nodes and RING_EUNAVAIL */

/* Down and removed nodes never take a key, whatever the loads, and the cap
 * (over the 7 serving nodes) still holds. */
START_TEST(test_down_never_chosen) {
  ring_node_state st[10];
  for (int i = 0; i < 10; i++)
    st[i] = RING_NODE_ACTIVE;
  st[2] = st[5] = RING_NODE_DOWN;
  st[7] = RING_NODE_REMOVED;
  st[8] = RING_NODE_DRAINING; /* draining still serves */
  ring_table *t = table_with(256, 3, 10, 10, NULL, st, 1);
  ring_bounded *b = router(1.1, 0.05, 256, 100);
  uint64_t loads[10] = {0}, rng = 7, total = 0;
  uint32_t bad = 0, over = 0, failed = 0, draining = 0;
  for (uint32_t k = 0; k < 20000; k++) {
    char key[16];
    int len = snprintf(key, sizeof key, "d%u", (uint32_t)(rng_next(&rng) % 500));
    uint16_t node;
    if (ring_bounded_route(b, t, key, (size_t)len, loads, total, k, &node, NULL) != RING_OK) {
      failed++;
      continue;
    }
    uint64_t cap = (uint64_t)ceil(1.1 * (double)(total + 1) / 7);
    bad += st[node] == RING_NODE_DOWN || st[node] == RING_NODE_REMOVED;
    over += loads[node] >= cap;
    draining += node == 8;
    loads[node]++;
    total++;
    uint16_t victim = (uint16_t)(rng_next(&rng) % 10); /* a random completion */
    if (loads[victim] > 0 && k % 3 != 0) {
      loads[victim]--;
      total--;
    }
  }
  ck_assert_uint_eq(failed, 0);
  ck_assert_uint_eq(bad, 0);
  ck_assert_uint_eq(over, 0);
  ck_assert_uint_gt(draining, 0);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* A key whose token's owners are all down walks on to the next tokens. */
START_TEST(test_walks_past_down_owners) {
  const ring_node_state st[] = {RING_NODE_DOWN, RING_NODE_DOWN, RING_NODE_ACTIVE, RING_NODE_ACTIVE};
  ring_table *t = table_with(64, 2, 4, 4, NULL, st, 1); /* tokens own {0,1} or {2,3} */
  char key[32];
  key_preferring(t, 0, 0, key, sizeof key);
  ring_bounded *b = router(1.25, 0, 64, STICKY_TTL);
  uint64_t loads[] = {0, 0, 0, 0};
  int first = 1;
  ck_assert_uint_eq(route_ok(b, t, key, loads, 0, &first), 2);
  ck_assert_int_eq(first, 0);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

START_TEST(test_unavail_all_down) {
  const ring_node_state st[] = {RING_NODE_DOWN, RING_NODE_DOWN, RING_NODE_REMOVED, RING_NODE_DOWN};
  ring_table *t = table_with(64, 2, 4, 4, NULL, st, 1);
  ring_bounded *b = router(1.25, 0.05, 64, STICKY_TTL);
  uint64_t loads[] = {0, 0, 0, 0};
  uint16_t node = 77;
  int first = 77;
  ck_assert_int_eq(ring_bounded_route(b, t, "k", 1, loads, 0, 0, &node, &first), RING_EUNAVAIL);
  ck_assert_uint_eq(node, 77);
  ck_assert_int_eq(first, 77);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* Loads the total does not cover can put every node at the cap. */
START_TEST(test_unavail_all_full) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  ring_bounded *b = router(1.25, 0.05, 64, STICKY_TTL);
  uint64_t loads[] = {5, 5, 5, 5};
  uint16_t node = 77;
  ck_assert_int_eq(ring_bounded_route(b, t, "k", 1, loads, 0, 0, &node, NULL), RING_EUNAVAIL);
  ck_assert_uint_eq(node, 77);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------------------- argument checks */

START_TEST(test_new_bad_args) {
  ring_bounded *b = NULL; /* must stay untouched */
  const ring_bounded_opts bad[] = {
      {0.99, 0.05, 16, 1},     {NAN, 0.05, 16, 1},
      {INFINITY, 0.05, 16, 1}, {-1, 0.05, 16, 1},
      {1.25, -0.01, 16, 1},    {1.25, 1.0, 16, 1},
      {1.25, NAN, 16, 1},      {1.25, 0.05, (1u << 31) + 1, 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_msg(ring_bounded_new(&bad[i], &b) == RING_EINVAL, "opts %zu accepted", i);
    ck_assert_ptr_null(b);
  }
  const ring_bounded_opts ok = {1.0, 0, 0, 0};
  ck_assert_int_eq(ring_bounded_new(NULL, &b), RING_EINVAL);
  ck_assert_int_eq(ring_bounded_new(&ok, NULL), RING_EINVAL);
  ck_assert_int_eq(ring_bounded_new(&ok, &b), RING_OK);
  ck_assert_ptr_nonnull(b);
  ring_bounded_free(b);
  ring_bounded_free(NULL);
}
END_TEST

START_TEST(test_route_bad_args) {
  ring_table *t = table_with(64, 1, 4, 4, NULL, NULL, 1);
  ring_bounded *b = router(1.25, 0.05, 16, 100);
  uint64_t loads[] = {0, 0, 0, 0};
  uint16_t node = 77;
  ck_assert_int_eq(ring_bounded_route(NULL, t, "k", 1, loads, 0, 0, &node, NULL), RING_EINVAL);
  ck_assert_int_eq(ring_bounded_route(b, NULL, "k", 1, loads, 0, 0, &node, NULL), RING_EINVAL);
  ck_assert_int_eq(ring_bounded_route(b, t, NULL, 1, loads, 0, 0, &node, NULL), RING_EINVAL);
  ck_assert_int_eq(ring_bounded_route(b, t, "k", 1, NULL, 0, 0, &node, NULL), RING_EINVAL);
  ck_assert_int_eq(ring_bounded_route(b, t, "k", 1, loads, 0, 0, NULL, NULL), RING_EINVAL);
  ck_assert_uint_eq(node, 77);
  /* The empty key is a key. */
  ck_assert_int_eq(ring_bounded_route(b, t, NULL, 0, loads, 0, 0, &node, NULL), RING_OK);

  ring_table_params p = {"test", NULL, 1, 0, 64, 1};
  ring_table *open = NULL;
  ck_assert_int_eq(ring_table_new(&p, &open, NULL), RING_OK);
  ring_node_spec s = {"n0", "127.0.0.1:7000", NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
  ck_assert_int_eq(ring_table_add_node(open, &s, NULL, NULL), RING_OK);
  for (uint32_t tok = 0; tok < 64; tok++)
    ring_table_set_owner(open, tok, 0, 0);
  node = 77;
  ck_assert_int_eq(ring_bounded_route(b, open, "k", 1, loads, 0, 0, &node, NULL), RING_EINVAL);
  ck_assert_uint_eq(node, 77);
  ring_table_free(open);
  ring_bounded_free(b);
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------------------------------ main */

static Suite *bounded_suite(void) {
  Suite *s = suite_create("bounded");
  TCase *sim = tcase_create("cap");
  tcase_set_timeout(sim, 300);
  tcase_add_loop_test(sim, test_cap_holds_under_skew, 0, (int)(sizeof sim_cfg / sizeof sim_cfg[0]));
  tcase_add_test(sim, test_first_choice_when_room);
  tcase_add_test(sim, test_cap_excludes_down_nodes);
  tcase_add_test(sim, test_cap_excludes_tokenless_nodes);
  tcase_add_test(sim, test_cap_boundary);
  tcase_add_test(sim, test_cap_saturates);
  suite_add_tcase(s, sim);

  TCase *hyst = tcase_create("hysteresis");
  tcase_add_test(hyst, test_hysteresis_skips_until_margin);
  tcase_add_test(hyst, test_hysteresis_follows_identity);
  tcase_add_test(hyst, test_hysteresis_zero_margin);
  tcase_add_test(hyst, test_hysteresis_never_refuses);
  suite_add_tcase(s, hyst);

  TCase *sticky = tcase_create("sticky");
  tcase_set_timeout(sticky, 120);
  tcase_add_test(sticky, test_sticky_keeps_key);
  tcase_add_test(sticky, test_sticky_expires);
  tcase_add_test(sticky, test_sticky_yields_when_ineligible);
  tcase_add_test(sticky, test_sticky_detects_reused_index);
  tcase_add_test(sticky, test_sticky_capacity_small);
  tcase_add_test(sticky, test_sticky_capacity_large);
  tcase_add_test(sticky, test_sticky_disabled);
  suite_add_tcase(s, sticky);

  TCase *avail = tcase_create("availability");
  tcase_add_test(avail, test_down_never_chosen);
  tcase_add_test(avail, test_walks_past_down_owners);
  tcase_add_test(avail, test_unavail_all_down);
  tcase_add_test(avail, test_unavail_all_full);
  suite_add_tcase(s, avail);

  TCase *args = tcase_create("args");
  tcase_add_test(args, test_new_bad_args);
  tcase_add_test(args, test_route_bad_args);
  suite_add_tcase(s, args);
  return s;
}

int main(void) { return run_suite(bounded_suite()); }
