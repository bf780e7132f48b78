/*
 * kv_server.c: ring-kv, an example key-value server on libring
 * (PROTOCOL.md). Options; opening etcd; registering services/kv/<id>;
 * following the ring; the maintenance loop; main.
 *
 * Usage: ring-kv --endpoints URLS --cluster NAME --id NODE_ID --listen HOST:PORT
 *        --data-dir DIR [--advertise HOST:PORT] [--config FILE] (see --help)
 */
#define _GNU_SOURCE /* strdup, gethostname */
#include "kv_server.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- options */

static rd_opt *opts_table(kv_server_opts *o) {
  const rd_opt table[] = {
      rd_common_row(&o->common, RD_CLUSTER, NULL),
      rd_common_row(&o->common, RD_ID, "this node's id in the ring table"),
      rd_common_row(&o->common, RD_LISTEN, "HOST:PORT of the key-value API"),
      rd_common_row(&o->common, RD_ADVERTISE,
                    "HOST:PORT clients reach (default: the listen address)"),
      rd_common_row(&o->common, RD_DATA_DIR, "the host's data dir (shared with ring-agent)"),
      rd_common_row(&o->common, RD_LOG_LEVEL, NULL),
      rd_common_row(&o->common, RD_LEASE_TTL,
                    "services/kv/<id> lease: clients stop using a dead server this long after"),
      {"version-wait", RD_OPT_MS, &o->version_wait_ms, 0, 60000,
       "how long a request from a newer ring version waits for this node's table"},
      {"rescan-interval", RD_OPT_MS, &o->rescan_ms, 50, 3600000,
       "period of the pass that notices arcs installed or removed by the agent"},
      {"commit-window-us", RD_OPT_UINT, &o->commit_window_us, 0, 100000,
       "group commit: after a write, wait this many microseconds for more"},
      {"max-segments", RD_OPT_UINT, &o->max_segments, 2, 1000,
       "segments per token directory before they are compacted into one"},
      {NULL, 0, NULL, 0, 0, NULL},
  };
  return rd_opts_with_etcd(&o->etcd, table);
}

/* ------------------------------------------------------------ opening etcd */

static int open_etcd(kv_server *s, char *msg, size_t cap) {
  return rd_etcd_open(&s->o.etcd, &s->etcd, msg, cap);
}

/* ------------------------------------------------------------- registering */

static void lease_lost(void *ud, int64_t lease) {
  kv_server *s = ud;
  (void)lease;
  atomic_store(&s->in_barrier, false); /* stop taking writes at once */
  atomic_store(&s->lease_lost, true);
  rd_waker_wake(&s->waker);
}

/* clients/<client> under a fresh lease kept alive: from now on every move's
 * copy waits until this server has acked its version (proto/etcd.md, the
 * version barrier), so it is put before the watcher starts and again
 * before writes are taken after a lost lease. */
static int join_barrier(kv_server *s, ring_error *err) {
  char key[160];
  snprintf(key, sizeof key, "/ringkeeper/%s/clients/%s", s->o.cluster, s->client);
  const char *value = "{\"format\":\"ringkeeper.client.v1\",\"kind\":\"ring-kv\"}";
  int64_t ttl = (int64_t)(s->o.lease_ttl_ms / 1000), lease = 0;
  int rc = ring_etcd_lease_grant(s->etcd, ttl, &lease, err);
  if (rc == RING_OK)
    rc = ring_etcd_put(s->etcd, key, strlen(key), value, strlen(value), lease, NULL, NULL, err);
  if (rc == RING_OK)
    rc = ring_etcd_keep_alive(s->etcd, lease, ttl, lease_lost, s, &s->keeper, err);
  if (rc != RING_OK) {
    if (lease)
      ring_etcd_lease_revoke(s->etcd, lease, NULL);
    return rc;
  }
  s->lease = lease;
  atomic_store(&s->lease_lost, false);
  return RING_OK;
}

/* services/kv/<id> = {"format":"ringkeeper.kv-service.v1","id","addr","started_ms"}
 * under the barrier's lease. */
static int register_service(kv_server *s) {
  char key[160], *value = NULL;
  snprintf(key, sizeof key, "/ringkeeper/%s/services/kv/%s", s->o.cluster, s->o.id);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "format", "ringkeeper.kv-service.v1");
  cJSON_AddStringToObject(j, "id", s->o.id);
  cJSON_AddStringToObject(j, "addr", s->addr);
  cJSON_AddNumberToObject(j, "started_ms", (double)rd_wall_ms());
  value = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (value == NULL)
    return RING_ENOMEM;
  ring_error err = {0};
  int rc = s->lease ? RING_OK : join_barrier(s, &err);
  if (rc == RING_OK)
    rc = ring_etcd_put(s->etcd, key, strlen(key), value, strlen(value), s->lease, NULL, NULL, &err);
  free(value);
  if (rc != RING_OK) {
    rd_log(RD_WARN, "cannot register", "key", key, "err", err.message, NULL);
    return rc;
  }
  atomic_store(&s->in_barrier, true);
  rd_log(RD_INFO, "registered", "key", key, "addr", s->addr, "client", s->client, NULL);
  return RING_OK;
}

static void unregister_service(kv_server *s) {
  atomic_store(&s->in_barrier, false);
  if (s->keeper)
    ring_keeper_stop(s->keeper);
  s->keeper = NULL;
  if (s->lease)
    ring_etcd_lease_revoke(s->etcd, s->lease, NULL);
  s->lease = 0;
}

/* The advertised address: --advertise, else the listen host (the host
 * name for a wildcard) with the bound port. */
static void advertised_addr(kv_server *s) {
  if (s->o.advertise) {
    snprintf(s->addr, sizeof s->addr, "%s", s->o.advertise);
    return;
  }
  rd_listen_advertise(s->o.listen, s->port, s->addr, sizeof s->addr);
}

/* -------------------------------------------------------- following the ring */

int kv_role(const ring_table *t, uint32_t token, int me) {
  if (me < 0)
    return KV_ROLE_NONE;
  uint32_t R = ring_table_replicas(t);
  for (uint32_t r = 0; r < R; r++)
    if (ring_table_owner(t, token, r) == (uint16_t)me)
      return KV_ROLE_OWNER;
  for (uint32_t r = 0; r < R; r++)
    if (ring_table_pending(t, token, r) == (uint16_t)me)
      return KV_ROLE_PENDING;
  return KV_ROLE_NONE;
}

/* Once placed, an owner holds arcs/<token>/ for every token it owns
 * (docs/DESIGN.md, explicit ownership); without it the arc is missing here and
 * only the agent may bring it back, whole: creating it would hide the loss
 * from the agent's check and stand in the way of its atomic install. */
int kv_role_here(kv_server *s, const ring_table *t, uint32_t token, int me) {
  int role = kv_role(t, token, me);
  return role == KV_ROLE_OWNER && kv_store_arc_missing(s->store, token) ? KV_ROLE_MISSING : role;
}

static void on_table(void *ud, const ring_table *t) {
  kv_server *s = ud;
  pthread_mutex_lock(&s->v_mu);
  pthread_cond_broadcast(&s->v_cv);
  pthread_mutex_unlock(&s->v_mu);
  rd_waker_wake(&s->waker);
  char v[24];
  snprintf(v, sizeof v, "%" PRIu64, ring_table_version(t));
  rd_log(RD_INFO, "ring table in service", "version", v, NULL);
}

/* -------------------------------------------------------- the maintenance loop */

/* Roles of every token in the table in service, copied out of the read
 * section; *n the token count. NULL before the first table. */
static uint8_t *roles_now(kv_server *s, uint32_t *n) {
  const ring_table *t = ring_live_enter(s->live);
  uint8_t *roles = NULL;
  if (t && (roles = malloc(ring_table_tokens(t))) != NULL) {
    int me = ring_table_find_node(t, s->o.id);
    *n = ring_table_tokens(t);
    for (uint32_t tok = 0; tok < *n; tok++)
      roles[tok] = (uint8_t)kv_role_here(s, t, tok, me);
  }
  ring_live_exit(s->live);
  return roles;
}

/* One pass: adopt staging of tokens now owned, drop staging of tokens
 * neither owned nor pending, re-index arcs the agent installed or removed.
 * Staging of a token whose arc is missing waits for the agent's refill. */
static void maintain(kv_server *s) {
  uint32_t n = 0;
  uint8_t *roles = roles_now(s, &n);
  if (roles == NULL)
    return;
  for (uint32_t tok = 0; tok < n && !atomic_load(&s->stop); tok++) {
    char token[16];
    snprintf(token, sizeof token, "%" PRIu32, tok);
    bool waits = roles[tok] == KV_ROLE_PENDING || roles[tok] == KV_ROLE_MISSING;
    if (!waits && kv_store_has_staging(s->store, tok)) {
      bool adopt = roles[tok] == KV_ROLE_OWNER;
      int rc = adopt ? kv_store_adopt(s->store, tok) : kv_store_drop_staging(s->store, tok);
      atomic_fetch_add(adopt ? &s->adopted : &s->dropped, rc == RING_OK);
      rd_log(rc == RING_OK ? RD_INFO : RD_WARN,
             adopt ? "staged writes moved into the arc" : "staged writes dropped", "token", token,
             "err", rc == RING_OK ? "" : ring_strerror(rc), NULL);
    }
    if (roles[tok] != KV_ROLE_NONE)
      kv_store_refresh(s->store, tok);
  }
  for (uint32_t tok = kv_store_next_token(s->store, 0); tok != KV_NO_TOKEN;
       tok = kv_store_next_token(s->store, tok + 1))
    if (tok >= n || roles[tok] == KV_ROLE_NONE)
      kv_store_refresh(s->store, tok); /* dropped by the agent: forget it */
  free(roles);
}

static void run_loop(kv_server *s) {
  while (!atomic_load(&s->stop)) {
    if (atomic_load(&s->lease_lost))
      unregister_service(s);
    if (!atomic_load(&s->in_barrier))
      register_service(s);
    maintain(s);
    rd_waker_wait(&s->waker, s->o.rescan_ms);
  }
}

/* ------------------------------------------------------------------- main */

static void on_stop(void *ud) {
  kv_server *s = ud;
  atomic_store(&s->stop, true);
  rd_waker_wake(&s->waker);
  pthread_mutex_lock(&s->v_mu);
  pthread_cond_broadcast(&s->v_cv);
  pthread_mutex_unlock(&s->v_mu);
}

static void store_log(void *ud, int level, const char *msg, const char *path) {
  (void)ud;
  rd_log(level ? RD_WARN : RD_INFO, msg, "path", path ? path : "", NULL);
}

static int server_open(kv_server *s, char *msg, size_t cap) {
  kv_store_opts so = {.data_dir = s->o.data_dir,
                      .node_id = s->o.id,
                      .commit_window_us = (uint32_t)s->o.commit_window_us,
                      .max_segments = (uint32_t)s->o.max_segments,
                      .log = store_log};
  if (kv_store_open(&so, &s->store, msg, cap) != RING_OK || open_etcd(s, msg, cap) != 0)
    return -1;
  if (ring_live_new(&s->live) != RING_OK)
    return snprintf(msg, cap, "out of memory"), -1;
  ring_watcher_opts wo = {.cluster = s->o.cluster,
                          .ack_id = s->client,
                          .on_table = on_table,
                          .ud = s,
                          .log = rd_ring_log};
  ring_error err = {0};
  snprintf(s->client, sizeof s->client, "kv.%s", s->o.id);
  if (join_barrier(s, &err) != RING_OK)
    return snprintf(msg, cap, "joining the version barrier: %s", err.message), -1;
  if (ring_watcher_start(s->etcd, &wo, s->live, &s->watcher, &err) != RING_OK)
    return snprintf(msg, cap, "ring watcher: %s", err.message), -1;
  if (kv_http_start(s, msg, cap) != 0)
    return -1;
  advertised_addr(s);
  return 0;
}

static void server_close(kv_server *s) {
  kv_http_stop(s);
  if (s->etcd)
    unregister_service(s);
  if (s->watcher)
    ring_watcher_stop(s->watcher);
  ring_live_free(s->live);
  kv_store_close(s->store);
  ring_etcd_close(s->etcd);
}

int main(int argc, char **argv) {
  static kv_server s = {.o = {.lease_ttl_ms = 5000,
                              .version_wait_ms = 2000,
                              .rescan_ms = 1000,
                              .commit_window_us = 500,
                              .max_segments = 8,
                              .etcd = {.timeout_ms = 5000}}};
  static const rd_daemon d = {.name = "ring-kv",
                              .component = "kv",
                              .summary = "ring-kv: a key-value server that routes by the ring",
                              .need = RD_NEED_ID | RD_NEED_LISTEN | RD_NEED_DATA_DIR,
                              .id_meta = "NODE_ID",
                              .id_max = RING_ID_MAX - 3}; /* "kv.<id>" names a client */
  char msg[512];
  rd_opt *table = opts_table(&s.o);
  int p = rd_daemon_start(&d, argc, argv, table, &s.o.common, &s.o);
  if (p >= 0) {
    rd_opts_release(table);
    return p;
  }
  pthread_mutex_init(&s.v_mu, NULL);
  pthread_cond_init(&s.v_cv, NULL);
  rd_waker_init(&s.waker);
  int rc = rd_signals_start(on_stop, NULL, &s);
  if (rc != 0 || server_open(&s, msg, sizeof msg) != 0) {
    rd_log(RD_ERROR, "cannot start", "err", rc ? strerror(rc) : msg, NULL);
    server_close(&s);
    rd_opts_release(table);
    return 1;
  }
  char port[8];
  snprintf(port, sizeof port, "%u", (unsigned)s.port);
  rd_log(RD_INFO, "serving", "listen", s.o.listen, "port", port, "data_dir", s.o.data_dir, NULL);
  run_loop(&s);
  rd_log(RD_INFO, "stopping", NULL);
  server_close(&s);
  rd_waker_destroy(&s.waker);
  rd_opts_release(table);
  return 0;
}
