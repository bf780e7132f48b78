/*
 * bench_delta.c: what building the next table from a delta costs a
 * watcher: ring_delta_apply (parse, apply, validate, seal) at T 16384 and
 * T 65536, R 3, 12 nodes, for two deltas: bench_etcd's (8 tokens swap
 * their first two replicas) and a join's cutover (a 13th node takes its
 * share at once, ~1/13 of the slots). Prints figures; it never passes or
 * fails on time.
 *
 * Columns: "apply+seal" is one ring_delta_apply and the free of its
 * result, on the same base each time. "100 watchers" is what one version
 * costs 100 watchers of one process through the shared build
 * (ring__delta_apply_shared, as libring's watcher calls it), in one
 * thread: "apart" when each holds its own copy of the base (read apart,
 * as right after they start: one build, then 99 exact base comparisons),
 * "shared" when they hold the one base the cache gave them (one build, 99
 * references). Each is the median of `--reps` runs (a tenth as many for
 * the 100-watcher columns).
 *
 *   bench_delta [--quick] [--reps N]
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_stats.h"
#include "delta_int.h"
#include "test_cluster.h"
#include "test_tables.h"

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
  ring_table *t = test_table_swapped(prev, ring_table_version(prev) + 1, 8, 977, 131);
  if (t == NULL)
    die("next table", NULL);
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

#define WATCHERS 100

/* Median microseconds for WATCHERS watchers to get the table of delta
 * through the shared build, from bases[i] (all the same table, or copies). */
static double shared_us(ring_table *const *bases, const char *delta, size_t len, int reps) {
  double *dt = malloc((size_t)reps * sizeof *dt);
  ring_table *got[WATCHERS];
  for (int i = 0; i < reps; i++) {
    ring__delta_cache_clear(); /* every run builds once */
    double t0 = now();
    for (int w = 0; w < WATCHERS; w++) {
      ring_error err;
      if (ring__delta_apply_shared(bases[w], delta, len, &got[w], &err) != RING_OK)
        die("shared apply", &err);
    }
    dt[i] = (now() - t0) * 1e6;
    for (int w = 0; w < WATCHERS; w++)
      ring_table_free(got[w]);
  }
  double m = bench_median(dt, (size_t)reps);
  free(dt);
  return m;
}

/* A copy of t read apart: encoded and decoded. */
static ring_table *copy_of(const ring_table *t) {
  char *json;
  size_t len;
  ring_table *c = NULL;
  ring_error err;
  if (ring_table_encode(t, &json, &len) != RING_OK || ring_table_decode(json, len, &c, &err))
    die("copy", &err);
  free(json);
  return c;
}

static void one_case(const char *name, const ring_table *a, const ring_table *b, const options *o) {
  char *delta;
  size_t len;
  if (ring_delta_encode(a, b, &delta, &len) != RING_OK)
    die("encode", NULL);
  ring_table *apart[WATCHERS], *same[WATCHERS];
  for (int w = 0; w < WATCHERS; w++) {
    apart[w] = copy_of(a);
    same[w] = apart[0];
  }
  int few = o->reps / 10 > 3 ? o->reps / 10 : 3;
  printf("  %-26s T %5u: delta %6zu B  apply+seal %7.1f us   100 watchers: apart %7.1f us, "
         "shared %7.1f us\n",
         name, ring_table_tokens(a), len, apply_us(a, delta, len, o->reps),
         shared_us(apart, delta, len, few), shared_us(same, delta, len, few));
  for (int w = 0; w < WATCHERS; w++)
    ring_table_free(apart[w]);
  ring__delta_cache_clear();
  free(delta);
}

int main(int argc, char **argv) {
  options o = parse_options(argc, argv);
  printf("bench_delta: R 3, 12 nodes; median of %d runs%s\n", o.reps, o.quick ? " (quick)" : "");
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
