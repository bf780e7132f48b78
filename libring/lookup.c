/*
 * lookup.c: key -> token -> owners, write sets, and the weighted rendezvous
 * pick of the replica that serves a key's reads.
 */
#include "ring_int.h"
#include "ring_inline.h" /* XXH3 inlined: the hash is most of a lookup */

#include <math.h>
#include <string.h>

static inline uint64_t key_hash(const ring_table *t, const void *key, size_t len) {
  return XXH3_64bits_withSeed(key, len, t->view.seed);
}

/* RING__FLATTEN (ring_inline.h): XXH3 inlined, not a second call. */
RING__FLATTEN uint32_t ring_table_token(const ring_table *t, const void *key, size_t len) {
  return (uint32_t)(key_hash(t, key, len) >> t->view.shift);
}

uint32_t ring_table_token_of_hash(const ring_table *t, uint64_t hash) {
  return (uint32_t)(hash >> t->view.shift);
}

RING__FLATTEN int ring_lookup(const ring_table *t, const void *key, size_t len, uint16_t *owners,
                              int max) {
  if (t == NULL || (key == NULL && len > 0) || owners == NULL || max < 1 || !t->sealed)
    return RING_EINVAL;
  const uint32_t R = t->view.replicas;
  const uint32_t tok = (uint32_t)(key_hash(t, key, len) >> t->view.shift);
  const int n = max < (int)R ? max : (int)R;
  ring__copy_owners(owners, &t->owners[(size_t)tok * R], n);
  return n;
}

int ring_write_set(const ring_table *t, uint32_t token, uint16_t *nodes, int max) {
  if (t == NULL || nodes == NULL || max < 0 || !t->sealed || token >= t->view.tokens)
    return RING_EINVAL;
  const uint32_t R = t->view.replicas;
  uint32_t first = ring__pending_first(t, token), end = first;
  while (end < t->n_pending && t->pending[end].token == token)
    end++;
  const uint32_t n = R + (end - first);
  if (n > (uint32_t)max)
    return RING_ERANGE;
  memcpy(nodes, &t->owners[(size_t)token * R], R * sizeof *nodes);
  for (uint32_t i = first; i < end; i++)
    nodes[R + i - first] = t->pending[i].node;
  return (int)n;
}

/* u in (0, 1) from 53 well-mixed bits of (key, node). */
static double unit_interval(uint64_t key_hash, uint64_t node_hash) {
  uint64_t x = ring__mix64(key_hash ^ node_hash);
  return ((double)(x >> 11) + 0.5) * 0x1p-53;
}

int ring_rendezvous_pick(const ring_table *t, uint64_t key_hash, const uint16_t *cand, int n) {
  if (t == NULL || cand == NULL || n < 1)
    return RING_EINVAL;
  bool equal = true;
  for (int i = 1; i < n && equal; i++)
    equal = t->nodes[cand[i]].weight == t->nodes[cand[0]].weight;
  int best = 0;
  double best_score = -1;
  for (int i = 0; i < n; i++) {
    const ring__node *nd = &t->nodes[cand[i]];
    double u = unit_interval(key_hash, nd->id_hash);
    /* -w/ln(u) is increasing in u, so equal weights compare u alone. */
    double score = equal ? u : -nd->weight / log(u);
    if (score > best_score) {
      best_score = score;
      best = i;
    }
  }
  return best;
}

static bool serves_reads(ring_node_state s) {
  return s != RING_NODE_DOWN && s != RING_NODE_REMOVED;
}

RING__FLATTEN int ring_read_replica(const ring_table *t, const void *key, size_t len,
                                    uint16_t *node) {
  if (t == NULL || (key == NULL && len > 0) || node == NULL || !t->sealed)
    return RING_EINVAL;
  const uint32_t R = t->view.replicas;
  const uint64_t h = key_hash(t, key, len);
  const uint16_t *o = &t->owners[(size_t)(h >> t->view.shift) * R];
  uint16_t cand[RING_REPLICAS_MAX];
  int n = 0;
  for (uint32_t r = 0; r < R; r++)
    if (serves_reads(t->nodes[o[r]].state))
      cand[n++] = o[r];
  if (n == 0)
    return RING_EUNAVAIL;
  *node = cand[ring_rendezvous_pick(t, h, cand, n)];
  return RING_OK;
}
