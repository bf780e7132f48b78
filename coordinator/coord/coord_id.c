/*
 * coord_id.c: one live coordinator per --id. At start the coordinator
 * puts coordinators/<id> (its id, address and pid) under a lease of its
 * own, only if the key is absent, and keeps the lease alive for as long
 * as it runs; a second coordinator given the same id finds the key and
 * refuses to start, before it serves, registers or campaigns. Ids name a
 * coordinator in the log, the leader key and the status page: two
 * processes under one id would make every one of those ambiguous.
 *
 * A coordinator that died without revoking its lease holds the key until
 * the lease expires, so a start waits up to one lease TTL (and a second)
 * for the key to go before refusing: a supervisor's restart goes through.
 * A lease lost while running (etcd unreachable past the TTL) is claimed
 * again at the next pass of the loop; if another process took the id
 * meanwhile, this one stops with an error.
 */
#include "coord.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLAIM_RETRY_MS 250 /* how often a start looks again at a held id */

static void on_id_lost(void *ud, int64_t lease) {
  coord *c = ud;
  (void)lease;
  atomic_store(&c->id_lost, true);
  rd_waker_wake(&c->waker);
}

static void drop_id_lease(coord *c, bool revoke) {
  if (c->id_keeper != NULL)
    ring_keeper_stop(c->id_keeper);
  c->id_keeper = NULL;
  ring_error err;
  if (revoke && c->id_lease != 0)
    ring_etcd_lease_revoke(c->etcd, c->id_lease, &err); /* deletes the key: a restart is free */
  if (!revoke && c->id_lease != 0)
    c->id_lease_lost = c->id_lease; /* the key may outlive our keeper: know it as ours */
  c->id_lease = 0;
}

/* The holder of coordinators/<id> as "pid P at ADDR" into who (for the
 * error), "" when it cannot be read. */
static void holder(coord *c, const char *key, char *who, size_t cap) {
  ring_kvs r = {0};
  ring_error err;
  rk_leader l;
  who[0] = '\0';
  if (ring_etcd_range(c->etcd, key, strlen(key), NULL, &r, &err) == RING_OK && r.n == 1 &&
      rk_leader_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &l, NULL) == RING_OK)
    snprintf(who, cap, " (pid %" PRId64 " at %.64s)", l.pid, l.addr[0] ? l.addr : "no --listen");
  ring_kvs_clear(&r);
}

/* The key held under the lease this process lost (an etcd restarted keeps
 * leases, and the keeper may give one up that etcd still holds): moves it
 * to the new lease, if it still is that one. Returns 1 when taken, 0 when
 * the key is not ours, -1 on an etcd error. Positive evidence only: the
 * lease etcd names on the key is ours, checked and replaced in one txn. */
static int take_back(coord *c, const char *key, const char *value, size_t len, ring_error *err) {
  ring_kvs r = {0};
  if (ring_etcd_range(c->etcd, key, strlen(key), NULL, &r, err) != RING_OK)
    return -1;
  bool ours = c->id_lease_lost != 0 && r.n == 1 && r.kvs[0].lease == c->id_lease_lost;
  int64_t mod = ours ? r.kvs[0].mod_revision : 0;
  ring_kvs_clear(&r);
  if (!ours)
    return 0;
  ring_cmp same = {key, strlen(key), RING_CMP_MOD, RING_CMP_EQ, mod, NULL, 0};
  ring_op put = {RING_OP_PUT, key, strlen(key), value, len, c->id_lease, false};
  ring_txn_result t = {0};
  if (ring_etcd_txn(c->etcd, &same, 1, &put, 1, NULL, 0, &t, err) != RING_OK)
    return -1;
  bool took = t.succeeded;
  ring_txn_result_clear(&t);
  if (took) {
    ring_etcd_lease_revoke(c->etcd, c->id_lease_lost, err); /* nothing else is under it */
    c->id_lease_lost = 0;
  }
  return took ? 1 : 0;
}

/* One attempt: 1 when the key is ours now, 0 when another process holds
 * it, -1 on an etcd error (err set). */
static int claim_once(coord *c, const char *key, ring_error *err) {
  if (c->id_lease == 0) {
    int64_t ttl_s = (int64_t)((c->o.lease_ttl_ms + 999) / 1000);
    if (ring_etcd_lease_grant(c->etcd, ttl_s, &c->id_lease, err) != RING_OK)
      return c->id_lease = 0, -1;
    atomic_store(&c->id_lost, false);
    if (ring_etcd_keep_alive(c->etcd, c->id_lease, ttl_s, on_id_lost, c, &c->id_keeper, err) !=
        RING_OK)
      return drop_id_lease(c, true), -1;
  }
  rk_leader me = {.pid = (int64_t)getpid()};
  snprintf(me.id, sizeof me.id, "%s", c->o.id);
  snprintf(me.addr, sizeof me.addr, "%s", c->o.listen ? c->o.listen : "");
  char *value = NULL;
  size_t len = 0;
  if (rk_leader_encode(&me, &value, &len) != RING_OK)
    return ring__err(err, RING_ENOMEM, "out of memory"), -1;
  ring_cmp absent = {key, strlen(key), RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0};
  ring_op put = {RING_OP_PUT, key, strlen(key), value, len, c->id_lease, false};
  ring_txn_result r = {0};
  int got = -1;
  if (ring_etcd_txn(c->etcd, &absent, 1, &put, 1, NULL, 0, &r, err) == RING_OK) {
    got = r.succeeded ? 1 : 0;
    ring_txn_result_clear(&r);
  }
  if (got == 0)
    got = take_back(c, key, value, len, err);
  free(value);
  return got;
}

/* Whether err is etcd not answering or busy (worth waiting for), not etcd
 * saying no: a refused permission or credential, or a request it cannot
 * take, which waiting would not change (the start fails naming it). */
static bool unreachable(const ring_error *err) {
  return err->code != RING_EAUTH && err->code != RING_EINVAL && err->code != RING_ENOMEM &&
         err->code != RING_ETOOBIG;
}

int coord_id_claim(coord *c, char *msg, size_t cap) {
  char key[RK_KEY_MAX];
  coord_key(c, key, "coordinators/");
  strncat(key, c->o.id, sizeof key - strlen(key) - 1);
  uint64_t end = rd_now_ms() + c->o.lease_ttl_ms + 1000;
  ring_error err = {0};
  int got;
  /* Only a holder seen past the window refuses the start: an etcd that does
   * not answer is waited for (said on the log once), never taken for a
   * conflict, as a daemon started before its etcd must come up with it. */
  bool said = false;
  while ((got = claim_once(c, key, &err)) != 1 && !atomic_load(&c->stop) &&
         (got < 0 ? unreachable(&err) : rd_now_ms() < end)) {
    if (got < 0 && !said)
      rd_log(RD_WARN, "waiting for etcd to claim the id", "id", c->o.id, "err", err.message, NULL);
    said = said || got < 0;
    if (got < 0)
      end = rd_now_ms() + c->o.lease_ttl_ms + 1000; /* the window starts once etcd answers */
    rd_waker_wait(&c->waker, CLAIM_RETRY_MS);
  }
  if (got == 1 || (got < 0 && atomic_load(&c->stop)))
    return 0; /* claimed, or stopped while etcd was away: a clean stop follows */
  if (got < 0) {
    snprintf(msg, cap, "claiming --id %s: %s", c->o.id, err.message);
  } else {
    char who[160];
    holder(c, key, who, sizeof who);
    snprintf(msg, cap,
             "another ring-coordinator runs with --id %s%s: ids must be unique; stop it or give "
             "this one another --id",
             c->o.id, who);
  }
  drop_id_lease(c, true);
  return -1;
}

bool coord_id_keep(coord *c) {
  if (!atomic_load(&c->id_lost))
    return true;
  drop_id_lease(c, false);
  char key[RK_KEY_MAX];
  coord_key(c, key, "coordinators/");
  strncat(key, c->o.id, sizeof key - strlen(key) - 1);
  ring_error err = {0};
  int got = claim_once(c, key, &err);
  if (got == 1) {
    rd_log(RD_INFO, "claimed the id again after losing its lease", "id", c->o.id, NULL);
    return true;
  }
  atomic_store(&c->id_lost, true); /* tried again at the next pass */
  if (got < 0) {
    coord_trouble(c, "claiming the coordinator id again", &err);
    return true;
  }
  rd_log(RD_ERROR, "another ring-coordinator took this --id while its lease was lost: stopping",
         "id", c->o.id, NULL);
  return false;
}

void coord_id_release(coord *c) { drop_id_lease(c, true); }
