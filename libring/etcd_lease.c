/*
 * etcd_lease.c: leases (grant, revoke, time-to-live, one keep-alive round
 * trip) and the keeper, a thread that keeps one lease alive.
 *
 * Sections:
 *   1. the four lease calls, over ring__etcd_call
 *   2. the keeper's own bounded, interruptible keep-alive request
 *   3. the keeper thread: schedule, deadline, loss, stop
 *
 * Why the keeper has a request path of its own: it must report a lost lease
 * at the lease's deadline and stop at once when asked, but ring__etcd_call
 * may block for several timeouts (it retries across endpoints). So the
 * keeper sends each keep-alive on a curl multi handle of its own, with a
 * timeout cut to the time left before the deadline, and sleeps between
 * refreshes in the same handle's poll, so ring_keeper_stop wakes it
 * wherever it is (curl_multi_wakeup). Every wait is a relative timeout on
 * the monotonic clock (keeper_wait). Failover is shared with the client: a keep-alive that
 * fails moves c to its next endpoint, like any read.
 *
 * The deadline is conservative: a refresh sent at time t renews the lease
 * until at least t + TTL on the server (the server renews it when the
 * request arrives, after t), so the keeper counts from the moment it sent.
 */
#define _POSIX_C_SOURCE 200809L
#include "etcd_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef RING_KEEPER_STACK
#define RING_KEEPER_STACK (256u << 10) /* keeper thread stack; the lost callback runs on it */
#endif
#define KEEPER_REPLY_MAX (64u << 10) /* a keep-alive reply is ~200 bytes */
#define KEEPER_JSON_DEPTH 16         /* deeper replies are refused before cJSON recurses */

/* ------------------------------------------------------ 1. lease calls */

/* Sends {"ID": lease} (plus TTL for a grant) to lease/<path>. */
static int lease_call(ring_etcd *c, const char *path, const char *field, int64_t v, cJSON **resp,
                      ring_error *err) {
  cJSON *body = cJSON_CreateObject();
  if (body == NULL || ring__json_add_i64(body, field, v) != RING_OK) {
    cJSON_Delete(body);
    return ring__err(err, RING_ENOMEM, "request body");
  }
  int rc = ring__etcd_call(c, path, body, RING__READ, resp, err);
  cJSON_Delete(body);
  return rc;
}

/* A grant repeated after an uncertain attempt can at most leave an orphan
 * lease with nothing attached, which expires by itself after ttl_s: so a
 * grant is retried on another endpoint like a read. */
int ring_etcd_lease_grant(ring_etcd *c, int64_t ttl_s, int64_t *lease, ring_error *err) {
  if (c == NULL || lease == NULL || ttl_s < 1)
    return ring__err(err, RING_EINVAL, "ring_etcd_lease_grant: bad argument");
  cJSON *resp = NULL;
  int rc = lease_call(c, "lease/grant", "TTL", ttl_s, &resp, err);
  if (rc != RING_OK)
    return rc;
  int64_t id = 0;
  bool ok = ring__json_i64(resp, "ID", &id) && id != 0;
  cJSON_Delete(resp);
  if (!ok)
    return ring__err(err, RING_EPROTO, "etcd lease grant: no lease ID in the reply");
  *lease = id;
  return RING_OK;
}

/* Revoking twice leaves the same state, so a revoke retries like a read;
 * RING_ENOTFOUND when the lease was already gone (etcd's NotFound). */
int ring_etcd_lease_revoke(ring_etcd *c, int64_t lease, ring_error *err) {
  if (c == NULL || lease == 0)
    return ring__err(err, RING_EINVAL, "ring_etcd_lease_revoke: bad argument");
  cJSON *resp = NULL;
  int rc = lease_call(c, "lease/revoke", "ID", lease, &resp, err);
  cJSON_Delete(resp);
  return rc;
}

int ring_etcd_lease_ttl(ring_etcd *c, int64_t lease, int64_t *ttl_s, ring_error *err) {
  if (c == NULL || lease == 0 || ttl_s == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_lease_ttl: bad argument");
  cJSON *resp = NULL;
  int rc = lease_call(c, "lease/timetolive", "ID", lease, &resp, err);
  if (rc != RING_OK)
    return rc;
  int64_t ttl = 0;
  bool ok = ring__json_i64(resp, "TTL", &ttl);
  cJSON_Delete(resp);
  if (!ok)
    return ring__err(err, RING_EPROTO, "etcd lease time-to-live: malformed TTL");
  if (ttl < 0) /* etcd answers -1 for a lease that expired or never was */
    return ring__err(err, RING_ENOTFOUND, "etcd: lease %lld has expired", (long long)lease);
  *ttl_s = ttl;
  return RING_OK;
}

/* The keep-alive stream's one message: {"result":{"ID":..,"TTL":".."}}.
 * A TTL absent or 0 means the lease is gone. */
static int keepalive_result(const cJSON *resp, int64_t lease, int64_t *ttl_s, ring_error *err) {
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(resp, "result");
  int64_t ttl = 0;
  if (!cJSON_IsObject(r) || !ring__json_i64(r, "TTL", &ttl))
    return ring__err(err, RING_EPROTO, "etcd lease keep-alive: malformed reply");
  if (ttl <= 0)
    return ring__err(err, RING_ENOTFOUND, "etcd: lease %lld is gone", (long long)lease);
  *ttl_s = ttl;
  return RING_OK;
}

int ring_etcd_lease_refresh(ring_etcd *c, int64_t lease, int64_t *ttl_s, ring_error *err) {
  if (c == NULL || lease == 0)
    return ring__err(err, RING_EINVAL, "ring_etcd_lease_refresh: bad argument");
  cJSON *resp = NULL;
  int rc = lease_call(c, "lease/keepalive", "ID", lease, &resp, err);
  if (rc != RING_OK)
    return rc;
  int64_t ttl = 0;
  rc = keepalive_result(resp, lease, &ttl, err);
  cJSON_Delete(resp);
  if (rc == RING_OK && ttl_s)
    *ttl_s = ttl;
  return rc;
}

/* ------------------------------------------- 2. the keeper's request */

/* Locking: lock guards stopping; the thread polls multi between refreshes
 * (relative timeouts) and during one; ring_keeper_stop sets stopping and
 * wakes the poll (curl_multi_wakeup). Everything else belongs to the thread. */
struct ring_keeper {
  ring_etcd *c;            /* borrowed; outlives the keeper */
  int64_t lease;           /* the lease kept alive */
  int64_t ttl_ms;          /* the lease's TTL as the keeper counts it */
  ring_lease_lost_cb lost; /* called at most once, from the thread */
  void *ud;                /* lost's argument */
  CURLM *multi;            /* the keeper's requests; woken by stop */
  pthread_t thread;        /* runs keeper_main */
  pthread_mutex_t lock;    /* guards stopping */
  bool stopping;           /* ring_keeper_stop was called */
  int64_t deadline;        /* ms (monotonic): the lease may expire from here on; thread-owned */
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool stop_requested(ring_keeper *k) {
  pthread_mutex_lock(&k->lock);
  bool s = k->stopping;
  pthread_mutex_unlock(&k->lock);
  return s;
}

/* Nesting depth of a JSON text (brackets outside strings): the keeper's
 * stack is small, so a deeply nested reply is refused before cJSON sees it. */
static int json_depth(const char *p, size_t n) {
  int depth = 0, max = 0;
  bool str = false, esc = false;
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (str) { /* inside a string: brackets do not count */
      if (esc)
        esc = false;
      else if (ch == '\\')
        esc = true;
      else if (ch == '"')
        str = false;
    } else if (ch == '"') {
      str = true;
    } else if (ch == '{' || ch == '[') {
      max = ++depth > max ? depth : max;
    } else if (ch == '}' || ch == ']') {
      depth--;
    }
  }
  return max;
}

/* Maps a keep-alive reply to a status: RING_OK with *ttl_s, or the error
 * etcd states (ring__etcd_error): RING_ENOTFOUND when the lease is gone,
 * RING_EAUTH when the token was refused; anything else is worth another
 * try before the deadline. */
static int keeper_reply(ring_keeper *k, const ring__buf *b, long status, int64_t *ttl_s,
                        ring_error *err) {
  if (b->p == NULL || json_depth(b->p, b->len) > KEEPER_JSON_DEPTH)
    return ring__err(err, RING_EPROTO, "etcd keep-alive: HTTP %ld, unusable body", status);
  cJSON *j = cJSON_ParseWithLength(b->p, b->len);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return ring__err(err, RING_EPROTO, "etcd keep-alive: HTTP %ld, non-JSON body", status);
  }
  int rc;
  if (status == 200 && cJSON_HasObjectItem(j, "result")) {
    rc = keepalive_result(j, k->lease, ttl_s, err);
  } else {
    rc = ring__etcd_error(j, status, "etcd keep-alive", NULL, err);
  }
  cJSON_Delete(j);
  return rc;
}

/* One keep-alive POST to the current endpoint, abandoned after timeout_ms
 * or as soon as stop is requested (then *stopped). Fails over on any
 * failure but a stated answer. */
static int keeper_post(ring_keeper *k, long timeout_ms, int64_t *ttl_s, bool *stopped,
                       ring_error *err) {
  ring_etcd *c = k->c;
  char body[64];
  snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)k->lease);
  uint32_t ep = atomic_load(&c->current) % c->n_endpoints;
  struct curl_slist *hdr = NULL;
  CURL *h = ring__etcd_handle_new(c, ep, "lease/keepalive", true, &hdr);
  if (h == NULL || hdr == NULL) {
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return ring__err(err, RING_ENOMEM, "keep-alive request");
  }
  ring__buf b = {NULL, 0, 0, KEEPER_REPLY_MAX, false};
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ring__buf_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  CURLcode crc = CURLE_OPERATION_TIMEDOUT;
  if (curl_multi_add_handle(k->multi, h) != CURLM_OK)
    crc = CURLE_OUT_OF_MEMORY;
  else {
    int running = 1;
    const int64_t give_up = now_ms() + timeout_ms + 1000; /* curl's own timeout ends it first */
    while (curl_multi_perform(k->multi, &running) == CURLM_OK && running) {
      if ((*stopped = stop_requested(k)) || now_ms() > give_up)
        break;
      curl_multi_poll(k->multi, NULL, 0, 1000, NULL);
    }
    int left;
    for (CURLMsg *m; (m = curl_multi_info_read(k->multi, &left)) != NULL;)
      if (m->msg == CURLMSG_DONE && m->easy_handle == h)
        crc = m->data.result;
    curl_multi_remove_handle(k->multi, h);
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(h); /* its connection stays in k->multi's cache for the next refresh */
  int rc;
  if (*stopped)
    rc = ring__err(err, RING_ETIMEDOUT, "keeper stopped");
  else if (crc != CURLE_OK)
    rc = ring__err(err, crc == CURLE_OPERATION_TIMEDOUT ? RING_ETIMEDOUT : RING_ECONNECT,
                   "etcd %s keep-alive: %s", c->endpoints[ep], curl_easy_strerror(crc));
  else
    rc = keeper_reply(k, &b, status, ttl_s, err);
  free(b.p);
  if (rc != RING_OK && rc != RING_ENOTFOUND && rc != RING_EAUTH && !*stopped)
    ring__etcd_failover(c, ep);
  return rc;
}

/* -------------------------------------------------- 3. the keeper thread */

/* Waits until `until` (monotonic ms) or stop; true when stop was asked.
 * Sleeps in curl_multi_poll with a relative timeout (poll(2): the kernel
 * counts it on CLOCK_MONOTONIC) and is woken by ring_keeper_stop's
 * curl_multi_wakeup, which stays pending if it comes first. No absolute
 * deadline goes to pthread_cond_timedwait: a library that fakes the wall
 * clock (libfaketime) converts such deadlines, and with the monotonic
 * clock left real it turns them into ones that have passed, a spin. */
static bool keeper_wait(ring_keeper *k, int64_t until) {
  for (;;) {
    if (stop_requested(k))
      return true;
    int64_t left = until - now_ms();
    if (left <= 0)
      return false;
    if (curl_multi_poll(k->multi, NULL, 0, left > 1000 ? 1000 : (int)left, NULL) != CURLM_OK)
      return stop_requested(k); /* cannot wait: give up the wait, never spin on it */
  }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The loop ends on stop or on loss; each round is bounded by the deadline.
 * Refreshes a third of the TTL after the last good one was sent; after a
 * failure, again after a tenth of the TTL (50 ms .. 1 s), never past the
 * deadline. Each attempt gets at most a third of the TTL, so a hung member
 * still leaves time to fail over to another. */
static void *keeper_main(void *arg) {
  ring_keeper *k = arg;
  const int64_t period = k->ttl_ms / 3, retry = max64(50, min64(k->ttl_ms / 10, 1000));
  const int64_t per_try = min64(k->c->timeout_ms, max64(k->ttl_ms / 3, 250));
  int64_t wake = k->deadline - k->ttl_ms + period; /* the first refresh was sent then */
  for (;;) {
    if (keeper_wait(k, min64(wake, k->deadline)))
      return NULL;
    int64_t sent = now_ms();
    if (sent >= k->deadline)
      break; /* not refreshed in time: the lease may be gone */
    int64_t ttl_s = 0;
    bool stopped = false;
    ring_error err;
    pthread_mutex_lock(&k->c->lock);
    uint64_t gen = k->c->token_gen;
    pthread_mutex_unlock(&k->c->lock);
    int rc = keeper_post(k, (long)min64(per_try, k->deadline - sent), &ttl_s, &stopped, &err);
    if (stopped)
      return NULL;
    if (rc == RING_OK) {
      k->deadline = sent + min64(ttl_s * 1000, k->ttl_ms);
      wake = sent + period;
      continue;
    }
    if (rc == RING_ENOTFOUND)
      break;              /* expired or revoked */
    if (rc == RING_EAUTH) /* etcd 3.4 does not check tokens here; later ones may */
      ring__etcd_reauth(k->c, gen, &err);
    wake = now_ms() + retry;
  }
  pthread_mutex_lock(&k->lock);
  bool report = !k->stopping;
  pthread_mutex_unlock(&k->lock);
  if (report)
    k->lost(k->ud, k->lease);
  return NULL;
}

static void keeper_free(ring_keeper *k) {
  if (k->multi)
    curl_multi_cleanup(k->multi);
  pthread_mutex_destroy(&k->lock);
  free(k);
}

/* Refreshes once in the caller's thread (so a lease that is already gone is
 * an error here, not a callback), then starts the thread. */
int ring_etcd_keep_alive(ring_etcd *c, int64_t lease, int64_t ttl_s, ring_lease_lost_cb lost,
                         void *ud, ring_keeper **out, ring_error *err) {
  if (c == NULL || lease == 0 || lost == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_keep_alive: bad argument");
  int64_t sent = now_ms(), granted = 0;
  int rc = ring_etcd_lease_refresh(c, lease, &granted, err);
  if (rc != RING_OK)
    return rc;
  ring_keeper *k = calloc(1, sizeof *k);
  if (k == NULL)
    return ring__err(err, RING_ENOMEM, "keeper");
  *k = (ring_keeper){.c = c, .lease = lease, .lost = lost, .ud = ud};
  k->ttl_ms = 1000 * (ttl_s > 0 ? min64(ttl_s, granted) : granted);
  k->deadline = sent + k->ttl_ms;
  pthread_mutex_init(&k->lock, NULL);
  if ((k->multi = curl_multi_init()) == NULL) {
    keeper_free(k);
    return ring__err(err, RING_ENOMEM, "keeper: curl_multi_init");
  }
  pthread_attr_t ta;
  pthread_attr_init(&ta);
  pthread_attr_setstacksize(&ta, RING_KEEPER_STACK);
  int e = pthread_create(&k->thread, &ta, keeper_main, k);
  pthread_attr_destroy(&ta);
  if (e != 0) {
    keeper_free(k);
    return ring__err(err, RING_ENOMEM, "keeper: pthread_create: %s", strerror(e));
  }
  *out = k;
  return RING_OK;
}

/* Wakes the thread wherever it waits (between refreshes, or inside one)
 * and joins it: no callback runs after this returns. Not to be called from
 * the lost callback (the thread cannot join itself). */
void ring_keeper_stop(ring_keeper *k) {
  if (k == NULL)
    return;
  pthread_mutex_lock(&k->lock);
  k->stopping = true;
  pthread_mutex_unlock(&k->lock);
  curl_multi_wakeup(k->multi);
  pthread_join(k->thread, NULL);
  keeper_free(k);
}
