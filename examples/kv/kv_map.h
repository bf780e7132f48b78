/*
 * kv_map.h: the in-memory index of one token: key -> where the newest
 * record of the key lies. Open addressing with linear probing; entries are
 * never removed one by one (a token's index is rebuilt whole instead).
 * Not thread-safe: the store guards each map with its token's mutex.
 */
#ifndef RING_KV_MAP_H
#define RING_KV_MAP_H

#include "kv_segment.h"

typedef struct kv_entry {
  const uint8_t *key; /* NULL: empty slot; owned by the map when own_keys */
  uint64_t hash;      /* XXH3-64 of the key */
  void *seg;          /* the segment holding the record (the caller's type) */
  uint64_t off;       /* the record's offset in that segment */
  uint64_t ts;        /* its hybrid timestamp */
  uint64_t sum;       /* its checksum (breaks timestamp ties) */
  uint32_t klen;
  uint32_t vlen;
  uint8_t kind; /* KV_KIND_VALUE or KV_KIND_TOMBSTONE */
} kv_entry;

typedef struct kv_map {
  kv_entry *slots; /* cap entries, cap a power of two (or 0) */
  uint32_t cap;
  uint32_t n;    /* used slots; kept under 3/4 of cap */
  bool own_keys; /* keys are copied in and freed by kv_map_clear */
} kv_map;

/* The entry of a key, or NULL. */
kv_entry *kv_map_find(const kv_map *m, const void *key, uint32_t klen, uint64_t hash);

/* Keeps record r (found in segment seg) if the map has no record of its
 * key or an older one. Returns 1 when the map changed, 0 when r lost to a
 * newer record, -1 when out of memory (the map is unchanged). */
int kv_map_offer(kv_map *m, const kv_rec *r, void *seg);

/* Frees the slots (and owned keys); the map is empty and usable after. */
void kv_map_clear(kv_map *m);

#endif /* RING_KV_MAP_H */
