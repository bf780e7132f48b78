/*
 * table_validate.c: the structural rules every table obeys, checked when a
 * table is sealed (and so when one is decoded): owners in range and
 * distinct per token, R <= node count, pending entries well formed. A full
 * seal checks every token; the delta codec's seal (ring__table_seal_tokens)
 * checks the tokens its delta changed, the rest being its sealed base's.
 * Placement quality (balance, failure domains) is the planner verifier's job.
 */
#include "ring_int.h"

#include <stdlib.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* One token's owners: node indexes in range and distinct. */
static int check_token(const ring_table *t, uint32_t tok, ring_error *err) {
  const uint32_t R = t->view.replicas;
  const uint16_t *o = &t->owners[(size_t)tok * R];
  for (uint32_t r = 0; r < R; r++) {
    if (o[r] >= t->n_nodes)
      return ring__err(err, RING_EINDEX, "owners[%u][%u]: node index %u, %u nodes", tok, r, o[r],
                       t->n_nodes);
    for (uint32_t q = 0; q < r; q++)
      if (o[q] == o[r])
        return ring__err(err, RING_EDUPOWNER, "token %u: slots %u and %u both owned by %s", tok, q,
                         r, t->nodes[o[r]].id);
  }
  return RING_OK;
}

static int cmp_pending(const void *a, const void *b) {
  const ring__pending *x = a, *y = b;
  if (x->token != y->token)
    return x->token < y->token ? -1 : 1;
  return (x->slot > y->slot) - (x->slot < y->slot);
}

/* A pending owner joins a slot's write set, so it must be a real node that
 * does not already hold a replica of the token or another pending slot. */
static int check_pending_entry(const ring_table *t, uint32_t i, ring_error *err) {
  const uint32_t R = t->view.replicas;
  const ring__pending *p = &t->pending[i];
  if (p->token >= t->view.tokens || p->slot >= R)
    return ring__err(err, RING_EPENDING, "pending[%u]: token %u slot %u out of range", i, p->token,
                     p->slot);
  if (p->node >= t->n_nodes)
    return ring__err(err, RING_EPENDING, "pending[%u]: node index %u, %u nodes", i, p->node,
                     t->n_nodes);
  if (i > 0 && cmp_pending(&t->pending[i - 1], p) == 0)
    return ring__err(err, RING_EPENDING, "pending[%u]: token %u slot %u listed twice", i, p->token,
                     p->slot);
  const uint16_t *o = &t->owners[(size_t)p->token * R];
  for (uint32_t r = 0; r < R; r++)
    if (o[r] == p->node)
      return ring__err(err, RING_EPENDING, "pending[%u]: %s already owns token %u", i,
                       t->nodes[p->node].id, p->token);
  for (uint32_t j = i; j-- > 0 && t->pending[j].token == p->token;)
    if (t->pending[j].node == p->node)
      return ring__err(err, RING_EPENDING, "pending[%u]: %s pending twice on token %u", i,
                       t->nodes[p->node].id, p->token);
  return RING_OK;
}

static int check_replicas(const ring_table *t, ring_error *err) {
  if (t->view.replicas > t->n_nodes)
    return ring__err(err, RING_EREPLICAS, "replicas: %u exceeds the %u nodes", t->view.replicas,
                     t->n_nodes);
  return RING_OK;
}

static int check_pending(const ring_table *t, ring_error *err) {
  int rc = RING_OK;
  for (uint32_t i = 0; rc == RING_OK && i < t->n_pending; i++)
    rc = check_pending_entry(t, i, err);
  return rc;
}

int ring__table_validate(const ring_table *t, ring_error *err) {
  int rc = check_replicas(t, err);
  for (uint32_t tok = 0; rc == RING_OK && tok < t->view.tokens; tok++)
    rc = check_token(t, tok, err);
  return rc == RING_OK ? check_pending(t, err) : rc;
}

/* The last step of every seal, once the nodes' replica counts are right. */
static void seal_counted(ring_table *t) {
  t->n_serving = 0;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    t->n_serving += ring__node_serves(&t->nodes[i]);
  if (!t->sum_known)
    t->owners_sum = ring__owners_checksum(t);
  t->sum_known = true;
  t->sealed = true;
}

void ring__table_freeze(ring_table *t) {
  const size_t slots = (size_t)t->view.tokens * t->view.replicas;
  for (uint32_t i = 0; i < t->n_nodes; i++)
    t->nodes[i].replicas = 0;
  for (size_t s = 0; s < slots; s++)
    t->nodes[t->owners[s]].replicas++;
  seal_counted(t);
}

int ring__table_seal_tokens(ring_table *t, const uint32_t *tokens, uint32_t n_tokens,
                            ring_error *err) {
  if (t == NULL || t->sealed)
    return ring__err(err, RING_EINVAL, "ring_table_seal: NULL or sealed table");
  int rc = check_replicas(t, err);
  for (uint32_t i = 0; rc == RING_OK && i < n_tokens; i++)
    rc = check_token(t, tokens[i], err);
  if (rc == RING_OK && (rc = check_pending(t, err)) == RING_OK)
    seal_counted(t);
  return rc;
}

int ring_table_seal(ring_table *t, ring_error *err) {
  if (t == NULL || t->sealed)
    return ring__err(err, RING_EINVAL, "ring_table_seal: NULL or sealed table");
  if (t->n_pending > 1)
    qsort(t->pending, t->n_pending, sizeof *t->pending, cmp_pending);
  int rc = ring__table_validate(t, err);
  if (rc == RING_OK)
    ring__table_freeze(t);
  return rc;
}

uint64_t ring__owners_checksum(const ring_table *t) {
  if (t->sealed && t->sum_known)
    return t->owners_sum;
  const size_t slots = (size_t)t->view.tokens * t->view.replicas;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return XXH3_64bits(t->owners, slots * sizeof *t->owners);
#else
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  for (size_t s = 0; s < slots; s++) {
    uint8_t le[2] = {(uint8_t)t->owners[s], (uint8_t)(t->owners[s] >> 8)};
    XXH3_64bits_update(&st, le, 2);
  }
  return XXH3_64bits_digest(&st);
#endif
}
