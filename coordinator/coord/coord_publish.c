/*
 * coord_publish.c: publishing a table version.
 *
 * Publishing is one fenced txn: tables/<v>, deltas/<v>, version/delta (the
 * same delta again, next to `version`, so that a watcher's one watch
 * response carries it: proto/etcd.md), version and the caller's ops
 * (plan/active or history), compared against the version and plan/active
 * mod revisions the step was computed from.
 */
#include "coord.h"
#include "ringx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ publishing */

typedef struct pub {
  char ktable[RK_KEY_MAX], kdelta[RK_KEY_MAX], kver[RK_KEY_MAX], kact[RK_KEY_MAX];
  char kcarry[RK_KEY_MAX]; /* version/delta */
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
    return ring__err(err, rc, "encoding version %" PRIu64 ": %s", v, ring_strerror(rc));
  rk_key_version(p->ktable, c->o.cluster, "tables/", v);
  rk_key_version(p->kdelta, c->o.cluster, "deltas/", v);
  coord_key(c, p->kver, "version");
  coord_key(c, p->kcarry, RING__VERSION_DELTA);
  coord_key(c, p->kact, "plan/active");
  snprintf(p->ver, sizeof p->ver, "%" PRIu64, v);
  return RING_OK;
}

static ring_op put(const char *key, const void *value, size_t len) {
  return (ring_op){
      .type = RING_OP_PUT, .key = key, .key_len = strlen(key), .value = value, .value_len = len};
}

int coord_publish(coord *c, const rk_state *s, ring_table *next, const ring_op *extra,
                  uint32_t n_extra, ring_error *err) {
  pub p = {.table = NULL};
  int rc = encode(c, next, &p, err);
  enum { MAX_EXTRA = 4 };
  if (rc == RING_OK && n_extra > MAX_EXTRA)
    rc = ring__err(err, RING_EINVAL, "too many ops for one publish");
  if (rc == RING_OK) {
    ring_cmp cmps[2] = {
        {.key = p.kver,
         .key_len = strlen(p.kver),
         .target = RING_CMP_MOD,
         .op = RING_CMP_EQ,
         .number = s->version_mod},
        {.key = p.kact,
         .key_len = strlen(p.kact),
         .target = RING_CMP_MOD,
         .op = RING_CMP_EQ,
         .number = s->has_active ? s->active_mod : 0},
    };
    ring_op ops[4 + MAX_EXTRA];
    uint32_t n = 0;
    ops[n++] = put(p.ktable, p.table, p.table_len);
    if (p.delta) {
      ops[n++] = put(p.kdelta, p.delta, p.delta_len);
      ops[n++] = put(p.kcarry, p.delta, p.delta_len);
    }
    ops[n++] = put(p.kver, p.ver, strlen(p.ver));
    uint64_t bytes = p.table_len + 2 * p.delta_len + strlen(p.ver);
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
  coord_table_set(c, next);
  atomic_store(&c->m.version, ring_table_version(next));
  return RING_OK;
}
