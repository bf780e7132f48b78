/*
 * kv_client.c: ring-kv's client library (kv_client.h).
 *
 * Sections: servers' addresses; the table; connection sets; routing;
 * operations; open and close.
 */
#define _GNU_SOURCE
#include "kv_client.h"
#include "kv_fanout.h"
#include "kv_hlc.h"
#include "kv_segment.h"
#include "ring_etcd.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SERVICES_MAX 1024

typedef struct service {
  char id[RING_ID_MAX + 1];
  char addr[RING_ADDR_MAX + 1];
} service;

struct kv_client {
  kv_client_opts o;
  char *endpoints, *cluster; /* copies */
  ring_etcd *etcd;
  ring_live *live;
  ring_watcher *watcher;      /* NULL with no_follow */
  pthread_mutex_t refresh_mu; /* one on-demand refresh at a time */

  pthread_rwlock_t svc_lock; /* guards svc and n_svc */
  service *svc;
  uint32_t n_svc;
  ring_watch *svc_watch;
  char svc_prefix[128];

  pthread_mutex_t pool_mu; /* guards pool */
  kv_fanout *pool;

  _Atomic uint64_t hlc;
  atomic_uint_fast64_t stale, refreshes, misdirected, fallbacks, retries;
};

/* --------------------------------------------------------- servers' addresses */

/* Sets (addr != NULL) or removes the address of id. Caller holds svc_lock. */
static void svc_set(kv_client *c, const char *id, const char *addr) {
  uint32_t i = 0;
  while (i < c->n_svc && strcmp(c->svc[i].id, id) != 0)
    i++;
  if (addr == NULL) {
    if (i < c->n_svc)
      c->svc[i] = c->svc[--c->n_svc];
    return;
  }
  if (i == c->n_svc && c->n_svc == SERVICES_MAX)
    return;
  if (i == c->n_svc)
    c->n_svc++;
  snprintf(c->svc[i].id, sizeof c->svc[i].id, "%s", id);
  snprintf(c->svc[i].addr, sizeof c->svc[i].addr, "%s", addr);
}

/* Applies one services/kv/<id> key-value (value NULL: deleted). */
static void svc_apply(kv_client *c, const ring_kv *kv, bool deleted) {
  size_t pl = strlen(c->svc_prefix);
  if (kv->key_len <= pl || kv->key_len - pl > RING_ID_MAX)
    return;
  const char *id = (const char *)kv->key + pl;
  cJSON *j = deleted ? NULL : cJSON_ParseWithLength((const char *)kv->value, kv->value_len);
  const cJSON *addr = cJSON_GetObjectItemCaseSensitive(j, "addr");
  pthread_rwlock_wrlock(&c->svc_lock);
  svc_set(c, id, cJSON_IsString(addr) ? addr->valuestring : NULL);
  pthread_rwlock_unlock(&c->svc_lock);
  cJSON_Delete(j);
}

/* Reads every registration; the store revision goes to *rev. */
static int svc_load(kv_client *c, int64_t *rev) {
  ring_kvs r;
  ring_range_opts ro = {.prefix = true};
  int rc = ring_etcd_range(c->etcd, c->svc_prefix, strlen(c->svc_prefix), &ro, &r, NULL);
  if (rc != RING_OK)
    return rc;
  pthread_rwlock_wrlock(&c->svc_lock);
  c->n_svc = 0;
  pthread_rwlock_unlock(&c->svc_lock);
  for (uint32_t i = 0; i < r.n; i++)
    svc_apply(c, &r.kvs[i], false);
  *rev = r.revision;
  ring_kvs_clear(&r);
  return RING_OK;
}

static int svc_event(void *ud, const ring_event *ev, uint32_t n, int64_t revision, bool compacted) {
  kv_client *c = ud;
  int64_t rev;
  (void)revision;
  if (compacted)
    svc_load(c, &rev); /* missed changes: read them all again */
  for (uint32_t i = 0; i < n; i++)
    svc_apply(c, &ev[i].kv, ev[i].type == RING_EVENT_DELETE);
  return 0;
}

/* The address of node id into addr; false when it is not registered. */
static bool svc_addr(kv_client *c, const char *id, char *addr, size_t cap) {
  bool found = false;
  pthread_rwlock_rdlock(&c->svc_lock);
  for (uint32_t i = 0; i < c->n_svc && !found; i++)
    if (strcmp(c->svc[i].id, id) == 0) {
      snprintf(addr, cap, "%s", c->svc[i].addr);
      found = true;
    }
  pthread_rwlock_unlock(&c->svc_lock);
  return found;
}

/* ------------------------------------------------------------------ the table */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads the current table once (a watcher started and stopped). */
static int read_table(kv_client *c) {
  ring_watcher_opts wo = {.cluster = c->cluster};
  ring_watcher *w = NULL;
  int rc = ring_watcher_start(c->etcd, &wo, c->live, &w, NULL);
  if (rc == RING_OK)
    ring_watcher_stop(w);
  return rc;
}

/* Brings the table to version want (0: whatever is newer) before
 * deadline: waits for the watcher, or re-reads it without one. */
static void refresh(kv_client *c, uint64_t want, uint64_t deadline) {
  uint64_t have = ring_live_version(c->live);
  do {
    if (c->watcher == NULL) {
      pthread_mutex_lock(&c->refresh_mu);
      if (ring_live_version(c->live) == have) { /* nobody refreshed meanwhile */
        read_table(c);
        atomic_fetch_add(&c->refreshes, 1);
      }
      pthread_mutex_unlock(&c->refresh_mu);
    }
    uint64_t v = ring_live_version(c->live);
    if ((want && v >= want) || (!want && v > have))
      return;
    sleep_ms(5);
  } while (now_ms() < deadline);
}

/* ---------------------------------------------------------- connection sets */

static kv_fanout *fanout_get(kv_client *c) {
  pthread_mutex_lock(&c->pool_mu);
  kv_fanout *f = c->pool;
  if (f)
    c->pool = f->next;
  pthread_mutex_unlock(&c->pool_mu);
  return f ? f : kv_fanout_new();
}

static void fanout_put(kv_client *c, kv_fanout *f) {
  if (f == NULL)
    return;
  pthread_mutex_lock(&c->pool_mu);
  f->next = c->pool;
  c->pool = f;
  pthread_mutex_unlock(&c->pool_mu);
}

/* ------------------------------------------------------------------ routing */

/* Where an operation goes at one table version. */
typedef struct plan {
  uint64_t version;
  char addr[KV_FANOUT_MAX][RING_ADDR_MAX + 1];
  bool owner[KV_FANOUT_MAX];
  int n;        /* targets with an address, in order */
  int n_owners; /* of which owners */
} plan;

static bool serving(const ring_table *t, uint16_t node) {
  ring_node_state st = ring_table_node_state(t, node);
  return st != RING_NODE_DOWN && st != RING_NODE_REMOVED;
}

static void plan_add(kv_client *c, const ring_table *t, plan *p, uint16_t node, bool owner) {
  if (p->n < KV_FANOUT_MAX && serving(t, node) &&
      svc_addr(c, ring_table_node_id(t, node), p->addr[p->n], sizeof p->addr[p->n])) {
    p->owner[p->n++] = owner;
    p->n_owners += owner;
  }
}

/* Targets of a key: for writes the write set; for reads the read replica,
 * the other owners, then the pending owners. RING_EUNAVAIL without a table. */
static int plan_key(kv_client *c, const void *key, size_t klen, bool read, plan *p) {
  memset(p, 0, sizeof *p);
  const ring_table *t = ring_live_enter(c->live);
  int rc = RING_EUNAVAIL;
  if (t) {
    uint16_t nodes[KV_FANOUT_MAX], first = RING_NODE_NONE;
    uint32_t R = ring_table_replicas(t);
    int n = ring_write_set(t, ring_table_token(t, key, klen), nodes, KV_FANOUT_MAX);
    p->version = ring_table_version(t);
    if (read && ring_read_replica(t, key, klen, &first) == RING_OK)
      plan_add(c, t, p, first, true);
    for (int i = 0; i < n; i++)
      if (nodes[i] != first)
        plan_add(c, t, p, nodes[i], (uint32_t)i < R);
    rc = n > 0 ? RING_OK : RING_EUNAVAIL;
  }
  ring_live_exit(c->live);
  return rc;
}

/* --------------------------------------------------------------- operations */

/* What a round of calls says to do next: RING_OK or another ring_errno
 * (done), or retry. */
enum { NEXT_RETRY = 1, NEXT_REFRESH = 2 };

/* One operation, its key escaped into a path. */
typedef struct op {
  const char *method; /* GET, PUT, DELETE */
  char path[3200];
  const void *value; /* PUT */
  size_t vlen;
  uint64_t ts;   /* writes */
  uint8_t **out; /* GET */
  size_t *out_len;
} op;

/* One round of a write: every target at once. */
static int write_round(kv_client *c, kv_fanout *f, const plan *p, op *o, uint64_t *want) {
  kv_call calls[KV_FANOUT_MAX];
  for (int i = 0; i < p->n; i++)
    calls[i] = (kv_call){.addr = p->addr[i],
                         .method = o->method,
                         .path = o->path,
                         .body = o->value,
                         .body_len = o->vlen,
                         .version = p->version,
                         .ts = o->ts};
  kv_fanout_run(f, calls, p->n, c->o.request_timeout_ms);
  int next = RING_OK;
  for (int i = 0; i < p->n; i++) {
    long st = calls[i].status;
    free(calls[i].resp);
    if (st == 409 || st == 421) {
      atomic_fetch_add(st == 409 ? &c->stale : &c->misdirected, 1);
      if (calls[i].srv_version > *want)
        *want = calls[i].srv_version;
      next = NEXT_REFRESH;
    } else if ((st < 200 || st >= 300) && next == RING_OK) {
      next = NEXT_RETRY;
    }
  }
  return next;
}

/* One round of a read: targets one after the other. RING_OK (a value),
 * RING_ENOTFOUND (a tombstone, or every owner has no record), or NEXT_*.
 * A 409 moves on to the next target (one that still owns the key at the
 * newer version answers stale senders' reads), and asks for a refresh
 * only when no target answered. */
static int read_round(kv_client *c, kv_fanout *f, const plan *p, op *o, uint64_t *want) {
  int absent_owners = 0, failed_owners = 0, stale = 0;
  for (int i = 0; i < p->n; i++) {
    kv_call call = {.addr = p->addr[i], .method = "GET", .path = o->path, .version = p->version};
    if (i > 0)
      atomic_fetch_add(&c->fallbacks, 1);
    kv_fanout_run(f, &call, 1, c->o.request_timeout_ms);
    if (call.status == 200) {
      *o->out = call.resp ? call.resp : malloc(1);
      *o->out_len = call.resp_len;
      return *o->out ? RING_OK : RING_ENOMEM;
    }
    free(call.resp);
    if (call.status == 404 && call.tombstone)
      return RING_ENOTFOUND;
    if (call.status == 409) {
      atomic_fetch_add(&c->stale, 1);
      if (call.srv_version > *want)
        *want = call.srv_version;
      stale++;
      continue;
    }
    absent_owners += call.status == 404 && p->owner[i];
    failed_owners += call.status != 404 && p->owner[i];
  }
  if (stale > 0)
    return NEXT_REFRESH; /* an absent owner at a stale version proves nothing */
  return absent_owners > 0 && failed_owners == 0 ? RING_ENOTFOUND : NEXT_RETRY;
}

/* Sleeps before attempt `attempt` (1, 2, ...): 10 ms doubling to 320 ms. */
static void backoff(kv_client *c, int attempt) {
  atomic_fetch_add(&c->retries, 1);
  sleep_ms(10L << (attempt < 6 ? attempt - 1 : 5));
}

/* Runs rounds of o on key until one is final or the deadline passes:
 * a refresh after a 409 or 421, a backoff after anything else. */
static int run_op(kv_client *c, const void *key, size_t klen, op *o) {
  bool read = strcmp(o->method, "GET") == 0;
  char *e = curl_easy_escape(NULL, key, (int)klen);
  snprintf(o->path, sizeof o->path, "/v1/kv/%s", e ? e : "");
  curl_free(e);
  uint64_t deadline = now_ms() + c->o.timeout_ms;
  kv_fanout *f = fanout_get(c);
  int rc = f ? RING_ETIMEDOUT : RING_ENOMEM;
  for (int attempt = 0; f; attempt++) {
    if (attempt > 0 && now_ms() >= deadline)
      break;
    plan p;
    uint64_t want = 0;
    int next = NEXT_RETRY;
    if (plan_key(c, key, klen, read, &p) == RING_OK && p.n_owners > 0)
      next = read ? read_round(c, f, &p, o, &want) : write_round(c, f, &p, o, &want);
    if (next <= 0) {
      rc = next;
      break;
    }
    if (next == NEXT_REFRESH)
      refresh(c, want > p.version ? want : 0, now_ms() + 1000);
    backoff(c, attempt + 1);
  }
  fanout_put(c, f);
  return rc;
}

static bool bad_key(const kv_client *c, const void *key, size_t klen) {
  return c == NULL || key == NULL || klen == 0 || klen > KV_KEY_MAX;
}

int kv_client_put(kv_client *c, const void *key, size_t klen, const void *value, size_t vlen) {
  if (bad_key(c, key, klen) || vlen > KV_VALUE_MAX || (vlen && value == NULL))
    return RING_EINVAL;
  op o = {.method = "PUT", .value = value, .vlen = vlen, .ts = kv_hlc_next(&c->hlc)};
  return run_op(c, key, klen, &o);
}

int kv_client_delete(kv_client *c, const void *key, size_t klen) {
  if (bad_key(c, key, klen))
    return RING_EINVAL;
  op o = {.method = "DELETE", .ts = kv_hlc_next(&c->hlc)};
  return run_op(c, key, klen, &o);
}

int kv_client_get(kv_client *c, const void *key, size_t klen, uint8_t **value, size_t *vlen) {
  if (bad_key(c, key, klen) || value == NULL || vlen == NULL)
    return RING_EINVAL;
  op o = {.method = "GET", .out = value, .out_len = vlen};
  return run_op(c, key, klen, &o);
}

uint64_t kv_client_version(kv_client *c) { return c ? ring_live_version(c->live) : 0; }

void kv_client_stats_get(kv_client *c, kv_client_stats *out) {
  kv_client_stats s = {atomic_load(&c->stale), atomic_load(&c->refreshes),
                       atomic_load(&c->misdirected), atomic_load(&c->fallbacks),
                       atomic_load(&c->retries)};
  *out = s;
}

/* ------------------------------------------------------------ open and close */

void kv_client_close(kv_client *c) {
  if (c == NULL)
    return;
  if (c->svc_watch)
    ring_watch_cancel(c->svc_watch);
  if (c->watcher)
    ring_watcher_stop(c->watcher);
  while (c->pool) {
    kv_fanout *next = c->pool->next;
    kv_fanout_free(c->pool);
    c->pool = next;
  }
  ring_live_free(c->live);
  if (c->o.etcd == NULL) /* ours */
    ring_etcd_close(c->etcd);
  pthread_rwlock_destroy(&c->svc_lock);
  pthread_mutex_destroy(&c->pool_mu);
  pthread_mutex_destroy(&c->refresh_mu);
  free(c->svc);
  free(c->endpoints);
  free(c->cluster);
  free(c);
}

static int client_start(kv_client *c, char *msg, size_t cap) {
  ring_error err = {0};
  ring_etcd_opts eo = {.endpoints = c->endpoints};
  if (c->o.etcd != NULL)
    c->etcd = c->o.etcd;
  else if (ring_etcd_open(&eo, &c->etcd, &err) != RING_OK)
    return snprintf(msg, cap, "etcd: %s", err.message), -1;
  if (ring_live_new(&c->live) != RING_OK)
    return snprintf(msg, cap, "out of memory"), -1;
  ring_watcher_opts wo = {.cluster = c->cluster};
  int rc =
      c->o.no_follow ? read_table(c) : ring_watcher_start(c->etcd, &wo, c->live, &c->watcher, &err);
  if (rc != RING_OK)
    return snprintf(msg, cap, "ring table: %s", ring_strerror(rc)), -1;
  int64_t rev = 0;
  if ((rc = svc_load(c, &rev)) != RING_OK)
    return snprintf(msg, cap, "services: %s", ring_strerror(rc)), -1;
  if (ring_etcd_watch(c->etcd, c->svc_prefix, strlen(c->svc_prefix), true, rev + 1, svc_event, c,
                      &c->svc_watch, &err) != RING_OK)
    return snprintf(msg, cap, "watching services: %s", err.message), -1;
  return 0;
}

int kv_client_open(const kv_client_opts *o, kv_client **out, char *msg, size_t cap) {
  if (o == NULL || (o->endpoints == NULL && o->etcd == NULL) || o->cluster == NULL || out == NULL)
    return snprintf(msg, cap, "endpoints and cluster are required"), RING_EINVAL;
  kv_client *c = calloc(1, sizeof *c);
  if (c == NULL)
    return snprintf(msg, cap, "out of memory"), RING_ENOMEM;
  c->o = *o;
  c->o.timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
  c->o.request_timeout_ms = o->request_timeout_ms ? o->request_timeout_ms : 3000;
  pthread_rwlock_init(&c->svc_lock, NULL);
  pthread_mutex_init(&c->pool_mu, NULL);
  pthread_mutex_init(&c->refresh_mu, NULL);
  c->endpoints = strdup(o->endpoints ? o->endpoints : "");
  c->cluster = strdup(o->cluster);
  c->svc = calloc(SERVICES_MAX, sizeof *c->svc);
  snprintf(c->svc_prefix, sizeof c->svc_prefix, "/ringkeeper/%s/services/kv/", o->cluster);
  if (c->endpoints == NULL || c->cluster == NULL || c->svc == NULL) {
    kv_client_close(c);
    return snprintf(msg, cap, "out of memory"), RING_ENOMEM;
  }
  if (client_start(c, msg, cap) != 0) {
    kv_client_close(c);
    return RING_EUNAVAIL;
  }
  *out = c;
  return RING_OK;
}
