/*
 * fake_agent.c: see fake_agent.h. Sections: values and keys; the lease and
 * alive/<id>; progress; the agent's life.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fake_agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

/* ------------------------------------------------------- values and keys */

static void agent_key(const fake_agent *a, const char *dir, char *key, size_t cap) {
  snprintf(key, cap, "/ringkeeper/%s/%s/%s", a->cluster, dir, a->id);
}

static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(uint32_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

char *fake_alive_encode(const char *id, const char *addr, const char *zone, const char *rack,
                        double weight) {
  char labels[160] = "";
  if (zone && rack)
    snprintf(labels, sizeof labels, "\"zone\":\"%s\",\"rack\":\"%s\"", zone, rack);
  else if (zone || rack)
    snprintf(labels, sizeof labels, "\"%s\":\"%s\"", zone ? "zone" : "rack", zone ? zone : rack);
  char *json = NULL;
  if (asprintf(&json,
               "{\"format\":\"ringkeeper.alive.v1\",\"id\":\"%s\",\"addr\":\"%s\","
               "\"labels\":{%s},\"weight\":%.17g,\"started_ms\":%llu}",
               id, addr, labels, weight, (unsigned long long)wall_ms()) < 0)
    return NULL;
  return json;
}

char *fake_progress_encode(uint64_t version, const uint32_t *tokens, uint32_t n, uint64_t bytes,
                           const char *error) {
  uint32_t k = error ? (n < 64 ? n : 64) : 0;
  size_t cap = 200 + (size_t)n * 12 + (size_t)k * (strlen(error ? error : "") + 48);
  char *json = malloc(cap);
  if (json == NULL)
    return NULL;
  size_t off = (size_t)snprintf(json, cap,
                                "{\"format\":\"ringkeeper.progress.v1\",\"version\":%llu,"
                                "\"tokens\":[",
                                (unsigned long long)version);
  for (uint32_t i = 0; i < n && !error; i++)
    off += (size_t)snprintf(json + off, cap - off, "%s%u", i ? "," : "", tokens[i]);
  off += (size_t)snprintf(json + off, cap - off, "],\"bytes\":%llu",
                          (unsigned long long)(error ? 0 : bytes));
  for (uint32_t i = 0; i < k; i++)
    off +=
        (size_t)snprintf(json + off, cap - off, "%s{\"token\":%u,\"attempts\":1,\"error\":\"%s\"}",
                         i ? "," : ",\"failing\":[", tokens[i], error);
  snprintf(json + off, cap - off, "%s}", k ? "]" : "");
  return json;
}

/* ------------------------------------------------ the lease and alive/<id> */

static void on_lost(void *ud, int64_t lease) {
  (void)lease;
  fake_agent *a = ud;
  atomic_store(&a->lost, true);
}

/* Grants a lease, puts alive/<id> under it and keeps it alive. On failure
 * the lease (if granted) is revoked and a->lease stays 0. */
static int live_up(fake_agent *a, ring_error *err) {
  char key[RING_ID_MAX * 2 + 40];
  agent_key(a, "alive", key, sizeof key);
  int64_t lease = 0;
  int rc = ring_etcd_lease_grant(a->c, a->ttl_s, &lease, err);
  if (rc != RING_OK)
    return rc;
  rc = ring_etcd_put(a->c, key, strlen(key), a->alive_json, strlen(a->alive_json), lease, NULL,
                     NULL, err);
  if (rc == RING_OK)
    rc = ring_etcd_keep_alive(a->c, lease, a->ttl_s, on_lost, a, &a->keeper, err);
  if (rc != RING_OK) {
    ring_etcd_lease_revoke(a->c, lease, NULL);
    return rc;
  }
  atomic_store(&a->lost, false);
  a->lease = lease;
  return RING_OK;
}

/* Stops the keeper and revokes the lease (revoke = false: lets it lapse). */
static int live_down(fake_agent *a, bool revoke, ring_error *err) {
  ring_keeper_stop(a->keeper);
  a->keeper = NULL;
  int rc = RING_OK;
  if (a->lease && revoke)
    rc = ring_etcd_lease_revoke(a->c, a->lease, err);
  a->lease = 0;
  return rc;
}

/* -------------------------------------------------------------- progress */

/* Writes the wanted progress (or, failing, the failing one) unless it is
 * already written. Caller holds mu. */
static int write_progress_locked(fake_agent *a) {
  bool failing = a->fail_error[0] != '\0';
  if (a->want_version == 0 || a->want_version == (failing ? a->failed_version : a->written_version))
    return RING_OK;
  char *json =
      fake_progress_encode(a->want_version, a->want_tokens, a->n_want,
                           (uint64_t)a->n_want * a->arc_bytes, failing ? a->fail_error : NULL);
  if (json == NULL)
    return RING_ENOMEM;
  char key[RING_ID_MAX * 2 + 40];
  agent_key(a, "progress", key, sizeof key);
  ring_error err;
  int rc = ring_etcd_put(a->c, key, strlen(key), json, strlen(json), 0, NULL, NULL, &err);
  free(json);
  if (rc == RING_OK && failing) {
    a->failed_version = a->want_version;
  } else if (rc == RING_OK) {
    a->written_version = a->want_version;
    atomic_fetch_add(&a->progress, 1);
  } else {
    atomic_fetch_add(&a->errors, 1);
    fprintf(stderr, "fake agent %s: progress %llu: %s\n", a->id,
            (unsigned long long)a->want_version, err.message);
  }
  return rc;
}

/* The watcher's callback: collects this node's pending tokens of the new
 * table and reports them (or keeps them for release). */
static void on_table(void *ud, const ring_table *t) {
  fake_agent *a = ud;
  atomic_fetch_add(&a->tables, 1);
  int me = ring_table_find_node(t, a->id);
  uint32_t n = ring_table_pending_count(t);
  if (me < 0 || n == 0)
    return;
  uint32_t *tokens = malloc((size_t)n * sizeof *tokens), k = 0;
  if (tokens == NULL)
    return;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t token, slot;
    uint16_t node;
    if (ring_table_pending_at(t, i, &token, &slot, &node) == RING_OK && node == (uint16_t)me &&
        (k == 0 || tokens[k - 1] != token)) /* (token, slot) order: ascending tokens */
      tokens[k++] = token;
  }
  if (k == 0) {
    free(tokens);
    return;
  }
  if (a->delay_ms)
    sleep_ms(a->delay_ms); /* a fixed time is the point: the slow agent played */
  pthread_mutex_lock(&a->mu);
  if (ring_table_version(t) > a->want_version) {
    free(a->want_tokens);
    a->want_tokens = tokens;
    a->n_want = k;
    a->want_version = ring_table_version(t);
    tokens = NULL;
  }
  if (!a->hold || a->fail_error[0])
    write_progress_locked(a);
  pthread_mutex_unlock(&a->mu);
  free(tokens);
}

int fake_agent_fail(fake_agent *a, const char *error) {
  pthread_mutex_lock(&a->mu);
  snprintf(a->fail_error, sizeof a->fail_error, "%s", error ? error : "");
  a->failed_version = 0;
  int rc = error || !a->hold ? write_progress_locked(a) : RING_OK;
  pthread_mutex_unlock(&a->mu);
  return rc;
}

int fake_agent_hold(fake_agent *a, bool hold) {
  pthread_mutex_lock(&a->mu);
  a->hold = hold;
  int rc = hold && !a->fail_error[0] ? RING_OK : write_progress_locked(a);
  pthread_mutex_unlock(&a->mu);
  return rc;
}

bool fake_agent_withheld(fake_agent *a) {
  pthread_mutex_lock(&a->mu);
  bool w = a->want_version > a->written_version;
  pthread_mutex_unlock(&a->mu);
  return w;
}

uint64_t fake_agent_progress_version(fake_agent *a) {
  pthread_mutex_lock(&a->mu);
  uint64_t v = a->written_version;
  pthread_mutex_unlock(&a->mu);
  return v;
}

uint64_t fake_agent_version(fake_agent *a) { return a->live ? ring_live_version(a->live) : 0; }

/* ------------------------------------------------------- the agent's life */

static atomic_uint next_port = 21000;

int fake_agent_start(fake_agent *a, ring_etcd *c, const fake_agent_opts *o, ring_error *err) {
  memset(a, 0, sizeof *a);
  snprintf(a->cluster, sizeof a->cluster, "%s", o->cluster);
  snprintf(a->id, sizeof a->id, "%s", o->id);
  snprintf(a->addr, sizeof a->addr, "127.0.0.1:%u", atomic_fetch_add(&next_port, 1));
  a->ttl_s = o->ttl_s ? o->ttl_s : 2;
  a->delay_ms = o->delay_ms;
  a->arc_bytes = o->arc_bytes ? o->arc_bytes : 4096;
  a->hold = o->hold;
  a->c = c;
  pthread_mutex_init(&a->mu, NULL);
  int rc = RING_ENOMEM;
  a->alive_json =
      fake_alive_encode(a->id, a->addr, o->zone, o->rack, o->weight > 0 ? o->weight : 1.0);
  if (a->alive_json == NULL)
    goto fail_json;
  rc = ring_live_new(&a->live);
  if (rc != RING_OK)
    goto fail_live;
  rc = live_up(a, err);
  if (rc != RING_OK)
    goto fail_lease;
  ring_watcher_opts wo = {.cluster = a->cluster, .ack_id = a->id, .on_table = on_table, .ud = a};
  rc = ring_watcher_start(c, &wo, a->live, &a->watcher, err);
  if (rc != RING_OK)
    goto fail_watcher;
  return RING_OK;

fail_watcher:
  live_down(a, true, NULL);
fail_lease:
  ring_live_free(a->live);
  a->live = NULL;
fail_live:
  free(a->alive_json);
  a->alive_json = NULL;
fail_json:
  pthread_mutex_destroy(&a->mu);
  if (err && rc == RING_ENOMEM)
    snprintf(err->message, sizeof err->message, "fake agent %s: out of memory", a->id);
  return rc;
}

int fake_agent_kill(fake_agent *a) {
  ring_error err;
  int rc = live_down(a, true, &err);
  ring_watcher_stop(a->watcher);
  a->watcher = NULL;
  return rc;
}

void fake_agent_abandon(fake_agent *a) {
  live_down(a, false, NULL);
  ring_watcher_stop(a->watcher);
  a->watcher = NULL;
}

int fake_agent_flap(fake_agent *a, uint32_t gap_ms, ring_error *err) {
  int rc = live_down(a, true, err);
  if (rc != RING_OK)
    return rc;
  sleep_ms(gap_ms); /* a fixed time is the point: the flap's length */
  return live_up(a, err);
}

void fake_agent_free(fake_agent *a) {
  if (a->live == NULL)
    return; /* never started, or freed */
  fake_agent_kill(a);
  ring_live_free(a->live);
  a->live = NULL;
  free(a->alive_json);
  a->alive_json = NULL;
  free(a->want_tokens);
  a->want_tokens = NULL;
  pthread_mutex_destroy(&a->mu);
}
