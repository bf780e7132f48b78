/*
 * bench_stats.h: the order statistics the benchmarks print (medians and
 * quantiles of repeated runs), one implementation for all of them.
 */
#ifndef RING_BENCH_STATS_H
#define RING_BENCH_STATS_H

#include <stddef.h>
#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts v[0..n) ascending. */
static inline void bench_sort(double *v, size_t n) { qsort(v, n, sizeof *v, bench_cmp_double); }

/* The median of v[0..n), n >= 1 (sorts v). */
static inline double bench_median(double *v, size_t n) {
  bench_sort(v, n);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* RING_BENCH_STATS_H */
