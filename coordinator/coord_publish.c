/*
 * coord_publish.c: the tables a run passes through, and publishing one.
 *
 * A run's tables are all derived from (base, plan, done, pending): the
 * target's node list (so new nodes are known to every host from the first
 * pending version), the base's owners with the done moves applied in plan
 * order, and a pending owner per in-flight move. Nothing else is stored,
 * so a leader that takes over rebuilds exactly the table the cursor names.
 *
 * Publishing is one fenced txn: tables/<v>, deltas/<v>, version and the
 * caller's ops (plan/active or history), compared against the version and
 * plan/active mod revisions the step was computed from.
 */
#include "coord.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int coord_build_table(const ring_table *base, const ring_plan *p, const uint8_t *done,
                      const uint8_t *pending, uint64_t version, ring_table **out,
                      ring_error *err) {
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
    return rk_fail(err, rc, "building table version %" PRIu64 ": %s", version,
                   ring_strerror(rc));
  }
  if ((rc = ring_table_seal(t, err)) != RING_OK) {
    ring_table_free(t);
    return rc;
  }
  *out = t;
  return RING_OK;
}

/* ------------------------------------------------------------ publishing */

typedef struct pub {
  char ktable[RK_KEY_MAX], kdelta[RK_KEY_MAX], kver[RK_KEY_MAX], kact[RK_KEY_MAX];
  char ver[24];
  char *table, *delta;
  size_t table_len, delta_len;
} pub;

static int encode(coord *c, const ring_table *next, pub *p, ring_error *err) {
  uint64_t v = ring_table_version(next);
  int rc = ring_table_encode(next, &p->table, &p->table_len);
  if (rc == RING_OK && c->table)
    rc = ring_delta_encode(c->table, next, &p->delta, &p->delta_len);
  if (rc != RING_OK)
    return rk_fail(err, rc, "encoding version %" PRIu64 ": %s", v, ring_strerror(rc));
  rk_key_version(p->ktable, c->o.cluster, "tables/", v);
  rk_key_version(p->kdelta, c->o.cluster, "deltas/", v);
  coord_key(c, p->kver, "version");
  coord_key(c, p->kact, "plan/active");
  snprintf(p->ver, sizeof p->ver, "%" PRIu64, v);
  return RING_OK;
}

static ring_op put(const char *key, const void *value, size_t len) {
  return (ring_op){.type = RING_OP_PUT, .key = key, .key_len = strlen(key), .value = value,
                   .value_len = len};
}

int coord_publish(coord *c, const rk_state *s, ring_table *next, const ring_op *extra,
                  uint32_t n_extra, ring_error *err) {
  pub p = {.table = NULL};
  int rc = encode(c, next, &p, err);
  enum { MAX_EXTRA = 4 };
  if (rc == RING_OK && n_extra > MAX_EXTRA)
    rc = rk_fail(err, RING_EINVAL, "too many ops for one publish");
  if (rc == RING_OK) {
    ring_cmp cmps[2] = {
        {.key = p.kver, .key_len = strlen(p.kver), .target = RING_CMP_MOD, .op = RING_CMP_EQ,
         .number = s->version_mod},
        {.key = p.kact, .key_len = strlen(p.kact), .target = RING_CMP_MOD, .op = RING_CMP_EQ,
         .number = s->has_active ? s->active_mod : 0},
    };
    ring_op ops[3 + MAX_EXTRA];
    uint32_t n = 0;
    ops[n++] = put(p.ktable, p.table, p.table_len);
    if (p.delta)
      ops[n++] = put(p.kdelta, p.delta, p.delta_len);
    ops[n++] = put(p.kver, p.ver, strlen(p.ver));
    uint64_t bytes = p.table_len + p.delta_len + strlen(p.ver);
    for (uint32_t i = 0; i < n_extra; i++) {
      ops[n++] = extra[i];
      bytes += extra[i].value_len;
    }
    rc = coord_txn(c, cmps, 2, ops, n, err);
    if (rc == RING_OK) {
      atomic_fetch_add(&c->m.publishes, 1);
      atomic_fetch_add(&c->m.publish_bytes, bytes);
      rd_logf(RD_INFO, "published version %" PRIu64 " (%u pending, %zu + %zu bytes)",
              ring_table_version(next), ring_table_pending_count(next), p.table_len, p.delta_len);
    }
  }
  free(p.table);
  free(p.delta);
  if (rc != RING_OK) {
    ring_table_free(next);
    return rc;
  }
  ring_table_free(c->table);
  c->table = next;
  atomic_store(&c->m.version, ring_table_version(next));
  return RING_OK;
}
