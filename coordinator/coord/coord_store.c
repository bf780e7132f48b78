/*
 * coord_store.c: the coordinator's bottom layer, what every part of it
 * writes and keeps through: key names, the fenced write, the table held,
 * the memo key of a look, and trouble for /healthz. It calls no other
 * part of coord/, so every part can call it.
 *
 * A write that finds the leader key changed (RING_ENOTLEADER) marks the
 * fence lost here; stepping down (logging it, forgetting the term) is
 * leadership's (coord_lead.c) at the loop's next pass, so no write path
 * climbs back up into it.
 */
#include "coord.h"
#include "ringx.h"

int coord_key(const coord *c, char key[RK_KEY_MAX], const char *what) {
  return rk_key(key, c->o.cluster, what);
}

int coord_txn(coord *c, const ring_cmp *cmps, uint32_t n_cmps, const ring_op *ops, uint32_t n_ops,
              ring_error *err) {
  if (!c->leading || c->fence_lost)
    return ring__err(err, RING_ENOTLEADER, "not the leader");
  ring_txn_result r = {0};
  int rc = ring_etcd_fenced_txn(c->etcd, &c->lead, cmps, n_cmps, ops, n_ops, NULL, 0, &r, err);
  if (rc == RING_OK && r.succeeded)
    rk_cache_wrote(c->cache, r.revision); /* no look acts on a state older than this */
  if (rc == RING_OK)
    ring_txn_result_clear(&r);
  if (rc == RING_ENOTLEADER)
    c->fence_lost = true; /* no further write of this term; coord_lead steps down */
  return rc;
}

void coord_table_set(coord *c, ring_table *next) {
  if (next == NULL && c->table == NULL)
    return;
  ring_table_free(c->table);
  c->table = next;
  c->table_gen++;
}

coord_memo coord_memo_of(const coord *c, const rk_state *s) {
  return (coord_memo){s->stamp, c->table_gen, atomic_load(&c->m.terms)};
}

bool coord_memo_same(const coord_memo *kept, const coord_memo *now) {
  return now->stamp != 0 && kept->stamp == now->stamp && kept->table_gen == now->table_gen &&
         kept->term == now->term;
}

void coord_trouble(coord *c, const char *what, const ring_error *err) {
  atomic_fetch_add(&c->m.errors, 1);
  rd_health_trouble(&c->health, what, err ? err->message : NULL);
}
