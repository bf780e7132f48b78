/*
 * run_table.c: the tables a run passes through (cluster.h, rk_run_table).
 *
 * A run's tables are all derived from (base, plan, done, pending): the
 * target's node list (so new nodes are known to every host from the first
 * pending version), the base's owners with the done moves applied in plan
 * order, and a pending owner per in-flight move. Nothing else is stored,
 * so a leader that takes over rebuilds exactly the table the cursor names.
 */
#include "cluster.h"
#include "ringx.h"

#include <inttypes.h>
#include <stdlib.h>

/* Base node index -> target index, by id (the target may append nodes and
 * drop finished removals). */
static int index_map(const ring_table *base, const ring_table *target, uint16_t **out) {
  uint32_t n = ring_table_node_count(base);
  uint16_t *map = malloc(((size_t)n + 1) * sizeof *map);
  if (map == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    int t = ring_table_find_node(target, ring_table_node_id(base, (uint16_t)i));
    map[i] = t < 0 ? RING_NODE_NONE : (uint16_t)t;
  }
  *out = map;
  return RING_OK;
}

/* Owners: base's (mapped), then the done moves. */
static int set_owners(ring_table *t, const ring_table *base, const ring_plan *p,
                      const uint8_t *done, const uint16_t *map) {
  uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t);
  for (uint32_t tok = 0; base && tok < T; tok++)
    for (uint32_t r = 0; r < R; r++) {
      uint16_t o = ring_table_owner(base, tok, r);
      int rc = ring_table_set_owner(t, tok, r, o == RING_NODE_NONE ? o : map[o]);
      if (rc != RING_OK)
        return rc;
    }
  const ring_move *m = ring_plan_moves(p);
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++)
    if (base == NULL || rk_bit(done, i)) {
      int rc = ring_table_set_owner(t, m[i].token, m[i].slot, m[i].to);
      if (rc != RING_OK)
        return rc;
    }
  return RING_OK;
}

int rk_run_table(const ring_table *base, const ring_plan *p, const uint8_t *done,
                 const uint8_t *pending, uint64_t version, ring_table **out, ring_error *err) {
  const ring_table *target = ring_plan_target(p);
  ring_table *t = NULL;
  uint16_t *map = NULL;
  int rc = ring_table_clone(target, version, &t);
  if (rc == RING_OK && base)
    rc = index_map(base, target, &map);
  if (rc == RING_OK)
    rc = set_owners(t, base, p, done, map);
  const ring_move *m = ring_plan_moves(p);
  for (uint32_t i = 0; rc == RING_OK && pending && i < ring_plan_move_count(p); i++)
    if (rk_bit(pending, i))
      rc = ring_table_add_pending(t, m[i].token, m[i].slot, m[i].to);
  free(map);
  if (rc != RING_OK) {
    ring_table_free(t);
    return ring__err(err, rc, "building table version %" PRIu64 ": %s", version, ring_strerror(rc));
  }
  if ((rc = ring_table_seal(t, err)) != RING_OK) {
    ring_table_free(t);
    return rc;
  }
  *out = t;
  return RING_OK;
}
