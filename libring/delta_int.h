/*
 * delta_int.h: the delta codec's internal entry point (delta_codec.c),
 * for libring's watcher. Not installed.
 */
#ifndef RING_DELTA_INT_H
#define RING_DELTA_INT_H

#include "ring_int.h"

/* ring_delta_apply without its last step: on RING_OK *out owns the result
 * unsealed (every check done but ring_table_seal's), so a caller that holds
 * base inside a ring_live read section can leave the section before the
 * O(T*R) validation of the result. Seal it (ring_table_seal), or free it.
 * Failure as for ring_delta_apply. */
int ring__delta_build(const ring_table *base, const char *json, size_t len, ring_table **out,
                      ring_error *err);

#endif /* RING_DELTA_INT_H */
