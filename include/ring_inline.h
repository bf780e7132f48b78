/*
 * ring_inline.h: the lookup fast path, inlined into the caller.
 *
 * ring_lookup() costs a call into the shared library; a service routing
 * millions of keys a second can instead take the table's read-only view
 * once (ring_table_view) and look up here, with XXH3 inlined too. The view
 * lives as long as the table (inside a ring_live read section, as long as
 * the section). Needs xxhash.h (Debian libxxhash-dev).
 */
#ifndef RING_INLINE_H
#define RING_INLINE_H

#include "ring.h"

#include <string.h>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
/* gcc 12 misreads XXH3's bounds-checked reads of short keys once inlined
 * into a caller with a small key buffer (-Warray-bounds false positive). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#endif
#include <xxhash.h>

/* GCC and Clang leave XXH3_64bits_withSeed out of line (its long-input
 * paths make it big), so a lookup would pay a second call; flattening the
 * token function inlines the hash into it, and it inlines into callers. */
#if defined(__GNUC__)
#define RING__FLATTEN __attribute__((flatten))
#else
#define RING__FLATTEN
#endif

/* The token of a key under this view. */
RING__FLATTEN static inline uint32_t ring_view_token(const ring_view *v, const void *key,
                                                     size_t len) {
  return (uint32_t)(XXH3_64bits_withSeed(key, len, v->seed) >> v->shift);
}

/* Copies n (1..7) owners with a fixed-size copy per case, which compiles
 * to a few moves: memcpy of a run-time size would be a library call. */
static inline void ring__copy_owners(uint16_t *dst, const uint16_t *src, int n) {
  switch (n) {
  case 1:
    memcpy(dst, src, 2);
    break;
  case 2:
    memcpy(dst, src, 4);
    break;
  case 3:
    memcpy(dst, src, 6);
    break;
  case 4:
    memcpy(dst, src, 8);
    break;
  case 5:
    memcpy(dst, src, 10);
    break;
  case 6:
    memcpy(dst, src, 12);
    break;
  case 7:
    memcpy(dst, src, 14);
    break;
  default:
    break;
  }
}

/* The key's token's R owners in slot order, read in place: no copy. The
 * pointer lives as long as the view. */
static inline const uint16_t *ring_view_owners(const ring_view *v, const void *key, size_t len) {
  return v->owners + (size_t)ring_view_token(v, key, len) * v->replicas;
}

/* Same contract as ring_lookup: writes min(R, max) owners, returns the count
 * (max must be >= 1; no argument checks on this path). */
static inline int ring_view_lookup(const ring_view *v, const void *key, size_t len,
                                   uint16_t *owners, int max) {
  const uint16_t *o = ring_view_owners(v, key, len);
  const int n = max < (int)v->replicas ? max : (int)v->replicas;
  ring__copy_owners(owners, o, n);
  return n;
}

/* The primary owner of a key. */
static inline uint16_t ring_view_primary(const ring_view *v, const void *key, size_t len) {
  return v->owners[(size_t)ring_view_token(v, key, len) * v->replicas];
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif /* RING_INLINE_H */
