/*
 * agent_member.c: membership. alive/<id> (ringkeeper.alive.v1: id, the arc
 * server's address, labels, weight, start time) lives under a lease the
 * keeper's thread keeps alive. When the lease is lost (etcd unreachable
 * past the TTL, a revoke, a long pause) the keeper calls back once; the
 * loop then grants a new lease and puts alive/<id> again, retrying every
 * second while etcd does not answer. On SIGTERM the lease is revoked, so
 * the host is gone at once instead of a TTL later.
 *
 * Also here: the health line (the last trouble) and key names.
 */
#include "agent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGISTER_RETRY_MS 1000

int agent_key(const agent *a, char key[RK_KEY_MAX], const char *dir) {
  return rk_key2(key, a->o.cluster, dir, a->o.id);
}

static void on_lease_lost(void *ud, int64_t lease) {
  agent *a = ud;
  (void)lease;
  atomic_store(&a->lease_lost, true);
  rd_waker_wake(&a->waker);
}

/* The alive/<id> value; malloc()'ed JSON in *json. */
static int alive_value(const agent *a, char **json, size_t *len) {
  rk_alive v;
  memset(&v, 0, sizeof v);
  snprintf(v.id, sizeof v.id, "%s", a->o.id);
  snprintf(v.addr, sizeof v.addr, "%s", a->addr);
  const char *keys[] = {"region", "zone", "rack", "host"};
  const char *values[] = {a->o.region, a->o.zone, a->o.rack, a->o.host};
  for (int i = 0; i < 4; i++)
    if (values[i] && rk_labels_set(&v.labels, keys[i], values[i], NULL) != RING_OK)
      return RING_EINVAL; /* checked with the options: cannot happen */
  v.weight = a->o.weight;
  v.started_ms = a->started_ms;
  v.capacity_bytes = arc_store_capacity_bytes(a->store);
  v.free_bytes = arc_store_free_bytes(a->store);
  return rk_alive_encode(&v, json, len);
}

/* Grants a lease, puts alive/<id> under it and keeps it alive. On failure
 * a granted lease is revoked and a->lease stays 0. */
static int register_host(agent *a, ring_error *err) {
  char key[RK_KEY_MAX], *json = NULL;
  size_t len = 0;
  int klen = agent_key(a, key, "alive/");
  int rc = alive_value(a, &json, &len);
  if (rc != RING_OK)
    return snprintf(err->message, sizeof err->message, "encoding alive: %s", ring_strerror(rc)), rc;
  int64_t ttl_s = (int64_t)((a->o.lease_ttl_ms + 999) / 1000), lease = 0;
  rc = ring_etcd_lease_grant(a->etcd, ttl_s, &lease, err);
  if (rc == RING_OK)
    rc = ring_etcd_put(a->etcd, key, (size_t)klen, json, len, lease, NULL, NULL, err);
  if (rc == RING_OK)
    rc = ring_etcd_keep_alive(a->etcd, lease, ttl_s, on_lease_lost, a, &a->keeper, err);
  free(json);
  if (rc != RING_OK) {
    if (lease != 0)
      ring_etcd_lease_revoke(a->etcd, lease, NULL);
    return rc;
  }
  a->lease = lease;
  return RING_OK;
}

static void drop_keeper(agent *a) {
  if (a->keeper)
    ring_keeper_stop(a->keeper);
  a->keeper = NULL;
}

uint64_t agent_member_tick(agent *a) {
  if (atomic_exchange(&a->lease_lost, false) && a->lease != 0) {
    rd_logf(RD_WARN, "lease %" PRId64 " lost: registering again", a->lease);
    drop_keeper(a);
    a->lease = 0;
    atomic_store(&a->m.registered, 0);
    atomic_fetch_add(&a->m.leases_lost, 1);
  }
  if (a->lease != 0)
    return UINT64_MAX;
  uint64_t now = rd_now_ms();
  if (now < a->register_retry_ms)
    return a->register_retry_ms - now;
  ring_error err = {0};
  if (register_host(a, &err) != RING_OK) {
    atomic_fetch_add(&a->m.errors, 1);
    agent_trouble(a, "registering", err.message);
    a->register_retry_ms = now + REGISTER_RETRY_MS;
    return REGISTER_RETRY_MS;
  }
  atomic_store(&a->m.registered, 1);
  atomic_fetch_add(&a->m.registrations, 1);
  char lease[24];
  snprintf(lease, sizeof lease, "%" PRId64, a->lease);
  rd_log(RD_INFO, "registered", "id", a->o.id, "addr", a->addr, "lease", lease, NULL);
  return UINT64_MAX;
}

void agent_member_leave(agent *a) {
  drop_keeper(a);
  if (a->lease == 0)
    return;
  ring_error err = {0};
  if (ring_etcd_lease_revoke(a->etcd, a->lease, &err) != RING_OK)
    rd_log(RD_WARN, "revoking the lease failed: alive/<id> goes when it expires", "err",
           err.message, NULL);
  a->lease = 0;
  atomic_store(&a->m.registered, 0);
}

/* ---------------------------------------------------------------- health */

void agent_trouble(agent *a, const char *what, const char *detail) {
  rd_health_trouble(&a->health, what, detail);
}
