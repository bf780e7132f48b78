/*
 * fuzz_delta_apply.c: libFuzzer target for ring_delta_apply against a fixed
 * base table (the one the seeds in corpus/delta_apply/ were made from). Any
 * input must either fail with a ring_errno and a message, leaving the
 * output untouched, or give a table that (a) the encoder turns into a delta
 * that applies to the same table, byte for byte, and (b) round-trips
 * through the table codec.
 *
 * The base: cluster "demo", version 7, seed 42, T=64, R=3, failure domain
 * "zone"; nodes n0..n5 (zones z0..z2, addr 127.0.0.1:7101+i), n0..n3 own
 * owners[t][r] = (t+r)%4, n4 is pending on (3,1) and (9,2), n5 is removed
 * and owns nothing.
 */
#include "ring.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ring_table *make_base(void) {
  ring_table_params p = {"demo", "zone", 7, 42, 64, 3};
  ring_table *t = NULL;
  if (ring_table_new(&p, &t, NULL) != RING_OK)
    abort();
  for (int i = 0; i < 6; i++) {
    char id[16], addr[32], zone[16];
    snprintf(id, sizeof id, "n%d", i);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 7101 + i);
    snprintf(zone, sizeof zone, "z%d", i % 3);
    const char *k[] = {"zone"}, *v[] = {zone};
    ring_node_spec s = {id, addr, k, v, 1, 1.0, i == 5 ? RING_NODE_REMOVED : RING_NODE_ACTIVE};
    if (ring_table_add_node(t, &s, NULL, NULL) != RING_OK)
      abort();
  }
  for (uint32_t tok = 0; tok < 64; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(t, tok, r, (uint16_t)((tok + r) % 4));
  ring_table_add_pending(t, 3, 1, 4);
  ring_table_add_pending(t, 9, 2, 4);
  if (ring_table_seal(t, NULL) != RING_OK)
    abort();
  return t;
}

static bool same_encoding(const ring_table *a, const ring_table *b) {
  char *x = NULL, *y = NULL;
  size_t xl = 0, yl = 0;
  bool same = ring_table_encode(a, &x, &xl) == RING_OK &&
              ring_table_encode(b, &y, &yl) == RING_OK && xl == yl && memcmp(x, y, xl) == 0;
  free(x);
  free(y);
  return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static ring_table *base;
  if (base == NULL)
    base = make_base(); /* lives for the process: the fuzzer never exits cleanly */
  ring_table *t = (ring_table *)0x1;
  ring_error err = {0};
  int rc = ring_delta_apply(base, (const char *)data, size, &t, &err);
  if (rc != RING_OK) {
    if (err.code != rc || err.message[0] == '\0' || t != (ring_table *)0x1)
      abort(); /* every failure is named, and the output untouched */
    return 0;
  }
  if (ring_table_version(t) <= ring_table_version(base))
    abort();
  char *d = NULL, *j = NULL;
  size_t dl = 0, jl = 0;
  ring_table *u = NULL, *w = NULL;
  if (ring_delta_encode(base, t, &d, &dl) != RING_OK || ring_delta_apply(base, d, dl, &u, &err) ||
      !same_encoding(t, u))
    abort(); /* the encoder's delta reaches the same table */
  if (ring_table_encode(t, &j, &jl) != RING_OK || ring_table_decode(j, jl, &w, &err) != RING_OK ||
      !same_encoding(t, w))
    abort(); /* and the result is a table like any other */
  uint16_t owners[RING_REPLICAS_MAX];
  if (ring_lookup(t, data, size, owners, RING_REPLICAS_MAX) != 3)
    abort();
  free(d);
  free(j);
  ring_table_free(u);
  ring_table_free(w);
  ring_table_free(t);
  return 0;
}
