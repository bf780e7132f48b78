/*
 * agent_member.c: membership. alive/<id> (ringkeeper.alive.v1: id, the arc
 * server's address, labels, weight, start time) lives under a lease the
 * keeper's thread keeps alive. When the lease is lost (etcd unreachable
 * past the TTL, a revoke, a long pause) the keeper calls back once; the
 * loop then grants a new lease and puts alive/<id> again, retrying every
 * second while etcd does not answer. On SIGTERM the lease is revoked, so
 * the host is gone at once instead of a TTL later.
 *
 * One id, one process. alive/<id> is created only when it is absent (one
 * txn on its create revision: libring's campaign), or moved to a new lease
 * when it is still the key this process created (its create revision is
 * ours: a fenced txn). A key held otherwise belongs to another agent with
 * the same --id, and is never overwritten:
 *   - at start the agent waits out the holder's lease (its remaining TTL,
 *     read from etcd, plus a second): a crashed predecessor's key expires
 *     in that time, a live twin's does not, and the agent then refuses to
 *     start (exit 1, naming the holder's address);
 *   - later (our lease lost and the id taken meanwhile) it stays
 *     unregistered, /healthz degraded with the holder named, and tries again
 *     every second: it registers once the key is free.
 *
 * Sections: registering; the loop's tick; leaving; health.
 */
#define _GNU_SOURCE /* gmtime_r */
#include "agent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REGISTER_RETRY_MS 1000
#define START_POLL_MS 250    /* while waiting out a holder's lease at start */
#define START_MARGIN_MS 1000 /* past the holder's TTL: etcd expires leases every 500 ms */

int agent_key(const agent *a, char key[RK_KEY_MAX], const char *dir) {
  return rk_key2(key, a->o.cluster, dir, a->o.id);
}

/* ------------------------------------------------------------ registering */

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
  memcpy(v.key, a->key_hex, sizeof v.key);
  memcpy(v.next_key, a->next_hex, sizeof v.next_key);
  return rk_alive_encode(&v, json, len);
}

/* "another agent holds id n1 (addr H:P, started <UTC>, lease L)" for the
 * holder's key-value, into out. */
static void describe_holder(const agent *a, const ring_kv *h, char *out, size_t cap) {
  rk_alive v;
  ring_error err = {0};
  if (rk_alive_decode((const char *)h->value, h->value_len, &v, &err) != RING_OK) {
    snprintf(out, cap, "another writer holds id %s (lease %" PRId64 ", value unreadable: %s)",
             a->o.id, h->lease, err.message);
    return;
  }
  char when[32] = "unknown";
  time_t secs = (time_t)(v.started_ms / 1000);
  struct tm tm;
  if (v.started_ms != 0 && gmtime_r(&secs, &tm) != NULL)
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(out, cap, "another agent holds id %s (addr %s, started %s, lease %" PRId64 ")", a->o.id,
           v.addr, when, h->lease);
}

/* Moves alive/<id>, still the key we created, to `lease` (a put keeps the
 * create revision, so own_key stays valid). RING_ENOTLEADER when the key is
 * no longer ours; nothing is written then. */
static int take_back(agent *a, const char *key, const char *json, size_t len, int64_t lease,
                     ring_error *err) {
  ring_op put = {RING_OP_PUT, key, strlen(key), json, len, lease, false};
  return ring_etcd_fenced_txn(a->etcd, &a->own_key, NULL, 0, &put, 1, NULL, 0, NULL, err);
}

/* Creates alive/<id> under `lease` if it is absent, or takes it back if it
 * is ours: our create revision and still our last lease (a key someone put
 * over ours under another lease is theirs). RING_EBUSY when another holds
 * it: *holder gets its key-value (ring_kv_clear it). */
static int put_alive(agent *a, const char *json, size_t len, int64_t lease, ring_kv *holder,
                     ring_error *err) {
  char key[RK_KEY_MAX];
  agent_key(a, key, "alive/");
  ring_leadership won = {0};
  int rc = ring_etcd_campaign(a->etcd, key, json, len, lease, &won, holder, err);
  if (rc == RING_OK) {
    ring_leadership_clear(&a->own_key);
    a->own_key = won;
  } else if (rc == RING_EBUSY && a->own_key.key &&
             holder->create_revision == a->own_key.create_revision &&
             holder->lease == a->own_key.lease) {
    ring_kv_clear(holder);
    rc = take_back(a, key, json, len, lease, err);
    if (rc == RING_OK)
      a->own_key.lease = lease;
    if (rc == RING_ENOTLEADER) /* changed since the campaign read it: the next attempt sees */
      rc = RING_ECONFLICT;
  }
  return rc;
}

/* One attempt: grants a lease, puts alive/<id> under it (put_alive) and
 * keeps it alive. RING_OK: a->lease is set. RING_EBUSY: another agent
 * holds the key, *holder has it (ring_kv_clear it). On any failure the
 * granted lease is revoked and a->lease stays 0. */
static int register_host(agent *a, ring_kv *holder, ring_error *err) {
  char *json = NULL;
  size_t len = 0;
  int rc = alive_value(a, &json, &len);
  if (rc != RING_OK)
    return snprintf(err->message, sizeof err->message, "encoding alive: %s", ring_strerror(rc)), rc;
  int64_t ttl_s = (int64_t)((a->o.lease_ttl_ms + 999) / 1000), lease = 0;
  rc = ring_etcd_lease_grant(a->etcd, ttl_s, &lease, err);
  if (rc == RING_OK)
    rc = put_alive(a, json, len, lease, holder, err);
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

static void registered(agent *a) {
  atomic_store(&a->m.registered, 1);
  atomic_fetch_add(&a->m.registrations, 1);
  char lease[24];
  snprintf(lease, sizeof lease, "%" PRId64, a->lease);
  rd_log(RD_INFO, "registered", "id", a->o.id, "addr", a->addr, "lease", lease, NULL);
}

/* How long the holder's lease may still live, in ms: its remaining TTL
 * (etcd says whole seconds, rounded down: one more), 0 when it is gone,
 * our own TTL when etcd does not say. */
static uint64_t holder_ttl_ms(agent *a, int64_t lease) {
  int64_t ttl_s = 0;
  int rc = ring_etcd_lease_ttl(a->etcd, lease, &ttl_s, NULL);
  if (rc == RING_ENOTFOUND)
    return 0;
  return rc == RING_OK && ttl_s >= 0 ? ((uint64_t)ttl_s + 1) * 1000 : a->o.lease_ttl_ms;
}

/* Sleeps ms on the waker, or until SIGTERM. Returns false on SIGTERM. */
static bool start_sleep(agent *a, uint64_t ms) {
  uint64_t end = rd_now_ms() + ms;
  for (uint64_t now; !atomic_load(&a->stop) && (now = rd_now_ms()) < end;)
    rd_waker_wait(&a->waker, end - now);
  return !atomic_load(&a->stop);
}

int agent_member_start(agent *a, char *msg, size_t cap) {
  int64_t waited = -1; /* the holder lease being waited out */
  uint64_t deadline = 0;
  for (;;) {
    ring_kv holder = {0};
    ring_error err = {0};
    int rc = register_host(a, &holder, &err);
    if (rc == RING_OK) {
      registered(a);
      return 0;
    }
    uint64_t now = rd_now_ms();
    if (rc != RING_EBUSY) { /* etcd: the loop tries again */
      atomic_fetch_add(&a->m.errors, 1);
      agent_trouble(a, "registering", err.message);
      a->register_retry_ms = now + REGISTER_RETRY_MS;
      return 0;
    }
    describe_holder(a, &holder, msg, cap);
    if (holder.lease != waited) { /* a new holder: give its lease the time to run out */
      waited = holder.lease;
      uint64_t ttl = holder.lease != 0 ? holder_ttl_ms(a, holder.lease) : 0;
      deadline = holder.lease != 0 ? now + ttl + START_MARGIN_MS : now;
      rd_logf(RD_WARN, "%s: waiting up to %" PRIu64 " ms for its lease to expire", msg,
              deadline - now);
    }
    ring_kv_clear(&holder);
    if (now >= deadline) {
      size_t n = strlen(msg);
      snprintf(msg + n, cap - n, ": refusing to start");
      return -1;
    }
    if (!start_sleep(a, START_POLL_MS))
      return 0; /* SIGTERM: the loop stops */
  }
}

/* ---------------------------------------------------------- the loop's tick */

/* agent_main.c's start-up calls agent_member_start before it follows the
 * table, so a twin never acks or fetches. When etcd could not be reached
 * then, the first tick that reaches it decides instead, and a refusal
 * stops the agent cleanly with exit status 1. */
static void refuse_start(agent *a, const char *msg) {
  rd_log(RD_ERROR, "cannot start", "err", msg, NULL);
  a->start_refused = true;
  atomic_store(&a->stop, true);
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
  if (atomic_load(&a->m.registrations) == 0) { /* never registered: still starting */
    char msg[512];
    if (agent_member_start(a, msg, sizeof msg) != 0)
      refuse_start(a, msg);
    return a->lease != 0 ? UINT64_MAX : REGISTER_RETRY_MS;
  }
  ring_kv holder = {0};
  ring_error err = {0};
  int rc = register_host(a, &holder, &err);
  if (rc == RING_OK) {
    registered(a);
    return UINT64_MAX;
  }
  if (rc == RING_EBUSY) { /* a twin took the id while we had no lease: never fight it */
    char who[400];
    describe_holder(a, &holder, who, sizeof who);
    ring_kv_clear(&holder);
    snprintf(err.message, sizeof err.message, "%.200s: not taking it over, retrying every %d s",
             who, REGISTER_RETRY_MS / 1000);
    agent_trouble(a, "id taken", err.message);
  } else {
    atomic_fetch_add(&a->m.errors, 1);
    agent_trouble(a, "registering", err.message);
  }
  a->register_retry_ms = now + REGISTER_RETRY_MS;
  return REGISTER_RETRY_MS;
}

/* ---------------------------------------------------------------- leaving */

void agent_member_leave(agent *a) {
  drop_keeper(a);
  ring_error err = {0};
  if (a->lease != 0 && ring_etcd_lease_revoke(a->etcd, a->lease, &err) != RING_OK)
    rd_log(RD_WARN, "revoking the lease failed: alive/<id> goes when it expires", "err",
           err.message, NULL);
  else if (a->lease == 0 && a->own_key.key) /* ours may still sit under the lost lease */
    ring_etcd_resign(a->etcd, &a->own_key, NULL);
  ring_leadership_clear(&a->own_key);
  a->lease = 0;
  atomic_store(&a->m.registered, 0);
}

/* ---------------------------------------------------------------- health */

void agent_trouble(agent *a, const char *what, const char *detail) {
  rd_health_trouble(&a->health, what, detail);
}
