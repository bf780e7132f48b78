/*
 * coord_lead.c: leadership. One lease per term, kept alive from the
 * keeper's thread; the leader key `leader` is created under it only if
 * absent, and its create revision fences every write (coord_txn).
 *
 * A lost lease (etcd unreachable past the TTL, a SIGSTOP, a revoke) is
 * noticed by the keeper, which sets lease_lost and wakes the loop; the loop
 * steps down and campaigns again with a new lease. What this process says
 * about its role (the gauge, /healthz, the status page) follows lease_lost
 * at once, since the loop may be stuck in a call for several timeouts. A write that finds the
 * leader key changed (RING_ENOTLEADER) marks the fence lost (coord_store.c)
 * and the loop steps down the same way. Either way the old term's writes
 * can no longer commit. What the other parts kept for a term is theirs to
 * forget: the loop does it when it sees the term end (coord_main.c).
 */
#include "coord.h"
#include "ringx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The keeper calls this at the lease's deadline (the send time of its last
 * good keep-alive plus the TTL, on the monotonic clock), or when etcd says
 * the lease is gone. From then on this process cannot prove that it leads,
 * so the gauge, /healthz and the status page (coord_lease_lapsed) say so at
 * once, not when the loop next steps down: the loop may be inside a call
 * that etcd, cut off or frozen, answers only after its timeouts. */
static void on_lease_lost(void *ud, int64_t lease) {
  coord *c = ud;
  (void)lease;
  atomic_store(&c->lease_lost, true);
  atomic_store(&c->m.leader, 0);
  rd_waker_wake(&c->waker);
}

bool coord_lease_lapsed(coord *c) { return atomic_load(&c->lease_lost); }

/* Drops the caches a term built: the next leader step reads everything. */
static void forget_term(coord *c) {
  ring_leadership_clear(&c->lead);
  memset(&c->lead, 0, sizeof c->lead);
  c->leading = false;
  atomic_store(&c->m.leader, 0);
  ring_plan_free(c->run_plan);
  c->run_plan = NULL;
  c->run_plan_id[0] = '\0';
  ring_table_free(c->run_base);
  c->run_base = NULL;
  c->input_hash = 0;
  c->fence_lost = false;
}

void coord_step_down(coord *c, const char *why) {
  if (c->leading)
    rd_log(RD_WARN, "lost leadership", "id", c->o.id, "why", why, NULL);
  forget_term(c);
}

static void drop_lease(coord *c) {
  if (c->keeper) {
    ring_keeper_stop(c->keeper);
    c->keeper = NULL;
  }
  c->lease = 0;
  atomic_store(&c->lease_lost, false);
}

static int new_lease(coord *c) {
  ring_error err = {0};
  int64_t ttl_s = (int64_t)((c->o.lease_ttl_ms + 999) / 1000);
  if (ring_etcd_lease_grant(c->etcd, ttl_s, &c->lease, &err) != RING_OK ||
      ring_etcd_keep_alive(c->etcd, c->lease, ttl_s, on_lease_lost, c, &c->keeper, &err) !=
          RING_OK) {
    coord_trouble(c, "granting a lease", &err);
    c->lease = 0;
    return -1;
  }
  return 0;
}

/* One attempt to become leader with the current lease. */
static void campaign(coord *c) {
  char key[RK_KEY_MAX], *value = NULL;
  size_t len = 0;
  coord_key(c, key, "leader");
  rk_leader me = {.pid = (int64_t)getpid()};
  snprintf(me.id, sizeof me.id, "%s", c->o.id);
  snprintf(me.addr, sizeof me.addr, "%s", c->o.listen ? c->o.listen : "");
  if (rk_leader_encode(&me, &value, &len) != RING_OK)
    return;
  ring_error err = {0};
  int rc = ring_etcd_campaign(c->etcd, key, value, len, c->lease, &c->lead, NULL, &err);
  free(value);
  if (rc == RING_OK) {
    c->leading = true;
    atomic_store(&c->m.leader, !coord_lease_lapsed(c)); /* lapsed meanwhile: the next pass */
    atomic_fetch_add(&c->m.terms, 1);
    rd_log(RD_INFO, "became leader", "id", c->o.id, NULL);
    rd_logf(RD_INFO, "fencing revision %" PRId64 " lease %" PRId64, c->lead.create_revision,
            c->lease);
  } else if (rc != RING_EBUSY) {
    coord_trouble(c, "campaigning", &err);
  } else {
    rd_health_ok(&c->health); /* a follower that reaches etcd is healthy */
  }
}

bool coord_lead(coord *c) {
  if (c->fence_lost)
    coord_step_down(c, "a write found another leader");
  if (atomic_load(&c->lease_lost)) {
    coord_step_down(c, "lease lost");
    drop_lease(c);
  }
  if (c->leading)
    return true;
  if (c->lease == 0 && new_lease(c) != 0)
    return false;
  campaign(c);
  return c->leading;
}

void coord_resign(coord *c) {
  ring_error err = {0};
  if (c->leading && ring_etcd_resign(c->etcd, &c->lead, &err) != RING_OK)
    rd_log(RD_WARN, "resign failed: the lease expiry will end the term", "err", err.message, NULL);
  forget_term(c);
  int64_t lease = c->lease;
  drop_lease(c);
  if (lease != 0)
    ring_etcd_lease_revoke(c->etcd, lease, &err);
}
