/*
 * bench_delta.c: what building the next table from a delta costs a
 * watcher: ring_delta_apply (parse, apply, validate, seal) at T 16384 and
 * T 65536, R 3, 12 nodes, for two deltas: bench_etcd's (8 tokens swap
 * their first two replicas) and a join's cutover (a 13th node takes its
 * share at once, ~1/13 of the slots). Prints figures; it never passes or
 * fails on time.
 *
 * Each figure is the median of `--reps` runs of one apply and the free of
 * its result, on a base of the same content each time.
 *
 *   bench_delta [--quick] [--reps N]
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_stats.h"
#include "ring.h"
#include "test_cluster.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- basics */

typedef struct options {
  int reps;
  bool quick;
} options;

static options parse_options(int argc, char **argv) {
  options o = {400, false};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      o.quick = true;
      o.reps = 40;
    } else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0) {
      o.reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--quick] [--reps N]\n", argv[0]);
      exit(2);
    }
  }
  if (o.reps < 1 || o.reps > 1000000) {
    fprintf(stderr, "bench_delta: option out of range\n");
    exit(2);
  }
  return o;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const ring_error *err) {
  fprintf(stderr, "bench_delta: %s: %s\n", what, err ? err->message : "failed");
  exit(1);
}

/* ------------------------------------------------------------ tables */

/* The planner's placement of n nodes in 3 zones, as version v. */
static ring_table *placed(const ring_table *base, uint32_t n, uint32_t tokens, uint64_t v) {
  test_cluster c = cluster_make(n, 3);
  ring_plan_config cfg = {"bench", tokens, 3, 0, "zone", NULL, 0, 0, 0, NULL, RING_BALANCE_TOKENS,
                          NULL};
  ring_plan *p;
  ring_table *t;
  ring_error err;
  if (ring_plan_compute(base, c.specs, c.n, &cfg, &p, &err) != RING_OK)
    die("plan", &err);
  if (ring_table_clone(ring_plan_target(p), v, &t) != RING_OK || ring_table_seal(t, &err))
    die("table", &err);
  ring_plan_free(p);
  cluster_free(&c);
  return t;
}

/* bench_etcd's next version: 8 tokens swap their first two replicas. */
static ring_table *swapped(const ring_table *prev) {
  ring_table *t;
  const uint64_t v = ring_table_version(prev) + 1;
  if (ring_table_clone(prev, v, &t) != RING_OK)
    die("clone", NULL);
  const uint32_t T = ring_table_tokens(prev);
  for (uint32_t k = 0; k < 8; k++) {
    uint32_t tok = (uint32_t)((v * 977 + k * 131) % T);
    uint16_t a = ring_table_owner(prev, tok, 0), b = ring_table_owner(prev, tok, 1);
    ring_table_set_owner(t, tok, 0, b);
    ring_table_set_owner(t, tok, 1, a);
  }
  ring_error err;
  if (ring_table_seal(t, &err) != RING_OK)
    die("seal", &err);
  return t;
}

/* ---------------------------------------------------------- measuring */

/* Median microseconds of one ring_delta_apply of delta to base. */
static double apply_us(const ring_table *base, const char *delta, size_t len, int reps) {
  double *dt = malloc((size_t)reps * sizeof *dt);
  for (int i = 0; i < reps; i++) {
    ring_table *t;
    ring_error err;
    double t0 = now();
    if (ring_delta_apply(base, delta, len, &t, &err) != RING_OK)
      die("apply", &err);
    ring_table_free(t);
    dt[i] = (now() - t0) * 1e6;
  }
  double m = bench_median(dt, (size_t)reps);
  free(dt);
  return m;
}

static void one_case(const char *name, const ring_table *a, const ring_table *b,
                     const options *o) {
  char *delta;
  size_t len;
  if (ring_delta_encode(a, b, &delta, &len) != RING_OK)
    die("encode", NULL);
  printf("  %-28s T %5u R %u: delta %7zu bytes   apply+seal %8.1f us\n", name,
         ring_table_tokens(a), ring_table_replicas(a), len, apply_us(a, delta, len, o->reps));
  free(delta);
}

int main(int argc, char **argv) {
  options o = parse_options(argc, argv);
  printf("bench_delta: ring_delta_apply, median of %d runs%s\n", o.reps, o.quick ? " (quick)" : "");
  const uint32_t sizes[] = {16384, 65536};
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    ring_table *a = placed(NULL, 12, sizes[k], 1);
    ring_table *b = swapped(a);
    ring_table *c = placed(a, 13, sizes[k], 2);
    one_case("8 tokens swap 2 replicas", a, b, &o);
    one_case("a 13th node's cutover", a, c, &o);
    ring_table_free(a);
    ring_table_free(b);
    ring_table_free(c);
  }
  return 0;
}
