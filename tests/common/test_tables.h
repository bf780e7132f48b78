/*
 * test_tables.h: tables for tests and benchmarks, built through the public
 * builder API. Not a planner: owners are laid out round-robin, which gives
 * every node an equal share and distinct owners per token (n >= R), or as
 * a test's own function says.
 */
#ifndef RING_TEST_TABLES_H
#define RING_TEST_TABLES_H

#include "ring.h"

#include <stdio.h>
#include <stdlib.h>

/* The owner of slot r of token t, for test_table_owned. */
typedef uint16_t (*test_owner_fn)(uint32_t t, uint32_t r, uint32_t tokens, uint32_t replicas,
                                  uint32_t n);

/* Round-robin: owners[t*R+r] = (t*R+r) % n. */
static inline uint16_t test_owner_rr(uint32_t t, uint32_t r, uint32_t tokens, uint32_t replicas,
                                     uint32_t n) {
  (void)tokens;
  return (uint16_t)(((uint64_t)t * replicas + r) % n);
}

/* A sealed table of n nodes "n0".."n<n-1>" in zones "z0".."z<zones-1>",
 * weights all 1 unless weights != NULL, owners as owner() says (distinct
 * per token). Aborts on failure: a test that cannot build its input cannot
 * go on. */
static inline ring_table *test_table_owned(uint32_t tokens, uint32_t replicas, uint32_t n,
                                           uint32_t zones, const double *weights, uint64_t version,
                                           test_owner_fn owner) {
  ring_table_params p = {"test", "zone", version, 0, tokens, replicas};
  ring_table *t = NULL;
  ring_error err = {0};
  if (ring_table_new(&p, &t, &err) != RING_OK) {
    fprintf(stderr, "test_table_owned: %s\n", err.message);
    abort();
  }
  for (uint32_t i = 0; i < n; i++) {
    char id[32], addr[32], zone[32];
    snprintf(id, sizeof id, "n%u", i);
    snprintf(addr, sizeof addr, "127.0.0.1:%u", 7000 + i % 50000);
    snprintf(zone, sizeof zone, "z%u", zones ? i % zones : 0);
    const char *keys[] = {"zone"}, *vals[] = {zone};
    ring_node_spec s = {id, addr, keys, vals, 1, weights ? weights[i] : 1.0, RING_NODE_ACTIVE};
    if (ring_table_add_node(t, &s, NULL, &err) != RING_OK) {
      fprintf(stderr, "test_table_owned: %s\n", err.message);
      abort();
    }
  }
  for (uint32_t tok = 0; tok < tokens; tok++)
    for (uint32_t r = 0; r < replicas; r++)
      ring_table_set_owner(t, tok, r, owner(tok, r, tokens, replicas, n));
  if (ring_table_seal(t, &err) != RING_OK) {
    fprintf(stderr, "test_table_owned: %s\n", err.message);
    abort();
  }
  return t;
}

/* test_table_owned with owners laid out round-robin (test_owner_rr). */
static inline ring_table *test_table_rr(uint32_t tokens, uint32_t replicas, uint32_t n,
                                        uint32_t zones, const double *weights, uint64_t version) {
  return test_table_owned(tokens, replicas, n, zones, weights, version, test_owner_rr);
}

/* The next version of prev, as a publisher's step: k tokens, number i at
 * (v * a + i * b) % T, swap their first two owners (they stay distinct),
 * so its delta moves 2k slots. R >= 2. Sealed; NULL on failure (no
 * asserts: writer threads call it). */
static inline ring_table *test_table_swapped(const ring_table *prev, uint64_t v, uint32_t k,
                                             uint64_t a, uint64_t b) {
  ring_table *t;
  if (ring_table_clone(prev, v, &t) != RING_OK)
    return NULL;
  const uint32_t T = ring_table_tokens(prev);
  for (uint32_t i = 0; i < k; i++) {
    uint32_t tok = (uint32_t)((v * a + i * b) % T);
    uint16_t x = ring_table_owner(prev, tok, 0), y = ring_table_owner(prev, tok, 1);
    ring_table_set_owner(t, tok, 0, y);
    ring_table_set_owner(t, tok, 1, x);
  }
  if (ring_table_seal(t, NULL) != RING_OK) {
    ring_table_free(t);
    return NULL;
  }
  return t;
}

#endif /* RING_TEST_TABLES_H */
