/*
 * delta_int.h: the delta codec's internal entry points (delta_codec.c,
 * delta_cache.c), for libring's watcher and the tests. Not installed.
 */
#ifndef RING_DELTA_INT_H
#define RING_DELTA_INT_H

#include "ring_int.h"

/* ring_delta_apply without its last step: on RING_OK *out owns the result
 * unsealed (every check done but the seal's; its owners checksum verified
 * and its nodes' replica counts kept), for the property test that holds
 * ring_delta_apply's short seal to the full one: seal it with
 * ring_table_seal, or free it. Failure as for ring_delta_apply. */
int ring__delta_build(const ring_table *base, const char *json, size_t len, ring_table **out,
                      ring_error *err);

/* ring_delta_apply through the process's cache of tables built from
 * deltas (delta_cache.c): when the same delta bytes were applied to a base
 * of the same contents (ring__table_same) not long ago, *out is a new
 * reference to the table built then, else the table is built (once, while
 * other callers with the same base and delta wait for it, up to a bound)
 * and kept for them. Either way *out is exactly what ring_delta_apply
 * would give, sealed; ring_table_free it (it may be shared: it never
 * changes). base is only read; a reference to it may be kept. Failure as
 * for ring_delta_apply (a refused delta is not cached: each caller gets
 * the refusal from its own apply). Thread-safe. */
int ring__delta_apply_shared(const ring_table *base, const char *json, size_t len, ring_table **out,
                             ring_error *err);

/* The cache's counters since the process started: calls answered from it,
 * and tables it built (for tests and benchmarks). */
typedef struct ring__delta_cache_stats {
  uint64_t hits, builds;
} ring__delta_cache_stats;
void ring__delta_cache_stats_get(ring__delta_cache_stats *out);

/* Drops every table the cache holds (entries being built stay). For tests
 * that count their allocations, and for a process done with its watchers. */
void ring__delta_cache_clear(void);

#endif /* RING_DELTA_INT_H */
