/*
 * kv_map.c: the per-token index (kv_map.h).
 */
#include "kv_map.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static kv_entry *slot_of(const kv_map *m, const void *key, uint32_t klen, uint64_t hash) {
  uint32_t mask = m->cap - 1;
  for (uint32_t i = (uint32_t)hash & mask;; i = (i + 1) & mask) {
    kv_entry *e = &m->slots[i];
    if (e->key == NULL || (e->hash == hash && e->klen == klen && memcmp(e->key, key, klen) == 0))
      return e;
  }
}

kv_entry *kv_map_find(const kv_map *m, const void *key, uint32_t klen, uint64_t hash) {
  if (m->cap == 0)
    return NULL;
  kv_entry *e = slot_of(m, key, klen, hash);
  return e->key ? e : NULL;
}

static int grow(kv_map *m) {
  uint32_t cap = m->cap ? m->cap * 2 : 16;
  kv_entry *slots = calloc(cap, sizeof *slots);
  if (slots == NULL)
    return -1;
  kv_map bigger = {slots, cap, m->n, m->own_keys};
  for (uint32_t i = 0; i < m->cap; i++)
    if (m->slots[i].key)
      *slot_of(&bigger, m->slots[i].key, m->slots[i].klen, m->slots[i].hash) = m->slots[i];
  free(m->slots);
  *m = bigger;
  return 0;
}

int kv_map_offer(kv_map *m, const kv_rec *r, void *seg) {
  if ((m->n + 1) * 4 > m->cap * 3 && grow(m) != 0)
    return -1;
  uint64_t hash = XXH3_64bits(r->key, r->key_len);
  kv_entry *e = slot_of(m, r->key, r->key_len, hash);
  if (e->key && !kv_rec_newer(r->ts, r->sum, e->ts, e->sum))
    return 0;
  if (e->key == NULL) {
    const uint8_t *key = r->key;
    if (m->own_keys) {
      uint8_t *copy = malloc(r->key_len);
      if (copy == NULL)
        return -1;
      memcpy(copy, r->key, r->key_len);
      key = copy;
    }
    e->key = key;
    e->klen = r->key_len;
    e->hash = hash;
    m->n++;
  }
  e->seg = seg;
  e->off = r->off;
  e->ts = r->ts;
  e->sum = r->sum;
  e->vlen = r->value_len;
  e->kind = (uint8_t)r->kind;
  return 1;
}

void kv_map_clear(kv_map *m) {
  if (m->own_keys)
    for (uint32_t i = 0; i < m->cap; i++)
      free((void *)m->slots[i].key);
  free(m->slots);
  m->slots = NULL;
  m->cap = m->n = 0;
}
