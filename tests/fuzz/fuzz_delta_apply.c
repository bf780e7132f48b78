/*
 * fuzz_delta_apply.c: libFuzzer target for ring_delta_apply against a fixed
 * base table (the one the seeds in corpus/delta_apply/ were made from). Any
 * input must either fail with a ring_errno and a message, leaving the
 * output untouched, or give a table that (a) the encoder turns into a delta
 * that applies to the same table, byte for byte, and (b) round-trips
 * through the table codec. Either way ring_delta_apply's short seal (only
 * the tokens the delta changes are checked again) must agree with the
 * full validation of the unsealed result (ring__delta_build, then
 * ring__table_validate): the same verdict, code and message; and the
 * process's shared build (ring__delta_apply_shared, as the watcher calls
 * it) must give the same table or the same refusal.
 *
 * The base: cluster "demo", version 7, seed 42, T=64, R=3, failure domain
 * "zone"; nodes n0..n5 (zones z0..z2, addr 127.0.0.1:7101+i), n0..n3 own
 * owners[t][r] = (t+r)%4, n4 is pending on (3,1) and (9,2), n5 is removed
 * and owns nothing.
 */
#include "../../libring/delta_int.h"

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

/* The full validation of the unsealed result agrees with rc and err. */
static void check_full_seal(const ring_table *base, const uint8_t *data, size_t size, int rc,
                            const ring_error *err) {
  ring_table *full = NULL;
  ring_error e = {0};
  int frc = ring__delta_build(base, (const char *)data, size, &full, &e);
  if (frc == RING_OK)
    frc = ring__table_validate(full, &e);
  ring_table_free(full);
  if (frc != rc || strcmp(e.message, err->message) != 0)
    abort();
}

/* The shared build gives the same table as t (NULL: the same refusal, rc). */
static void check_shared(const ring_table *base, const uint8_t *data, size_t size, int rc,
                         const ring_table *t) {
  ring_table *s = NULL;
  int src = ring__delta_apply_shared(base, (const char *)data, size, &s, NULL);
  if (src != rc || (t != NULL && !ring__table_same(s, t)))
    abort();
  ring_table_free(s);
  ring__delta_cache_clear(); /* each input leaves nothing behind */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static ring_table *base;
  if (base == NULL)
    base = make_base(); /* lives for the process: the fuzzer never exits cleanly */
  ring_table *t = (ring_table *)0x1;
  ring_error err = {0};
  int rc = ring_delta_apply(base, (const char *)data, size, &t, &err);
  check_full_seal(base, data, size, rc, &err);
  check_shared(base, data, size, rc, rc == RING_OK ? t : NULL);
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
