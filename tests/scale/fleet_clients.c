/*
 * fleet_clients.c: one slice of the fleet's clients (fleet.h). Each is
 * what a data-plane process embedding libring is to the cluster
 * (proto/etcd.md, `clients/<name>`): an etcd client, a lease,
 * clients/<name> under it written before its watcher starts, and a real
 * ring_watcher with ack id <name>, so it takes part in the version barrier
 * and reads every table or delta itself. The lease is kept alive with the
 * slice's others (fleet_lease.c).
 *
 * The etcd client is the client's own by default (--clients-per-conn 1:
 * its connections and single-flight reads shared with nobody). With
 * --clients-per-conn K, K clients share one ring_etcd: one pool of
 * connections for their reads and acks, as watchers in one process do;
 * each still has its own watch stream (ring_watcher_opts.own_stream: one
 * connection per watch). That is what lets 10,000 clients fit etcd's file
 * limit on one machine: K = 1 costs etcd two or more descriptors a client.
 * With --shared-streams 1 the K clients are what K watchers of one process
 * are by default: one watch stream, and one ack txn a version (libring's
 * watch_hub.c) — a process that speaks for many, not K processes.
 *
 * With --client-acks 0 a client is one that stamps its requests with its
 * version (proto/etcd.md: registration is optional): no lease, no
 * clients/<name>, a watcher with no ack id; it takes no part in the
 * barrier and writes nothing.
 *
 * Cost: one watch thread (256 KiB stack) and one watch connection per
 * client (the tables are shared by the process's watchers: libring's
 * delta_cache.c and table_reads.c); up to ETCD_POOL_MAX (8) idle pooled
 * connections per ring_etcd, so 10,000 clients take K = 100 to stay
 * inside etcd's 20,000 descriptors here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct client {
  char name[16];
  ring_etcd *c; /* shared with the others of its group; the first of the group owns it */
  bool owns;
  ring_live *live;
  ring_watcher *w;
  fleet_seq seq; /* the watch thread's until the watcher stops */
} client;

struct fleet_clients {
  client *cl;
  uint32_t n; /* started */
  _Atomic uint64_t warnings;
};

/* The watcher's log: warnings are counted, the first few printed. */
static void on_log(void *ud, const ring_log_event *ev) {
  fleet_clients *fc = ud;
  if (ev->level < RING_LOG_WARN)
    return;
  if (atomic_fetch_add(&fc->warnings, 1) < 10)
    fprintf(stderr, "fleet_sim: client watcher: %s version=%llu source=%s: %s\n", ev->msg,
            (unsigned long long)ev->version, ev->source, ev->error);
}

/* The version of each installed table, in the client's sequence. */
static void on_table(void *ud, const ring_table *t) {
  client *c = ud;
  fleet_seq_note(&c->seq, ring_table_version(t));
}

/* clients/<name> under a lease of its own: the client takes part in the
 * version barrier (proto/etcd.md, `clients/<name>`). */
static int client_register(const fleet_opts *o, fleet_leases *l, client *c, ring_error *err) {
  int64_t lease;
  char key[FLEET_KEY_MAX];
  static const char value[] = "{\"format\":\"ringkeeper.client.v1\",\"kind\":\"fleet-sim\"}";
  int klen = fleet_key(key, sizeof key, o->cluster, "clients/", c->name);
  int rc = fleet_leases_grant(l, &lease, err);
  return rc != RING_OK ? rc
                       : ring_etcd_put(c->c, key, (size_t)klen, value, sizeof value - 1, lease,
                                       NULL, NULL, err);
}

/* shared: the etcd client of the client's group, or NULL to open one. */
static int client_start(const fleet_opts *o, fleet_leases *l, fleet_clients *fc, client *c,
                        uint32_t num, ring_etcd *shared, ring_error *err) {
  snprintf(c->name, sizeof c->name, "c%05u", num);
  ring_etcd_opts eo = {.endpoints = o->endpoints, .timeout_ms = 30000};
  int rc = RING_OK;
  c->owns = shared == NULL;
  c->c = shared;
  if (c->owns && (rc = ring_etcd_open(&eo, &c->c, err)) != RING_OK)
    return rc;
  if ((o->client_acks && (rc = client_register(o, l, c, err)) != RING_OK) ||
      (rc = ring_live_new(&c->live)) != RING_OK)
    goto fail;
  ring_watcher_opts wo = {.cluster = o->cluster,
                          .ack_id = o->client_acks ? c->name : NULL,
                          .on_table = on_table,
                          .ud = c,
                          .log = on_log,
                          .log_ud = fc,
                          .own_stream = !o->shared_streams};
  if ((rc = ring_watcher_start(c->c, &wo, c->live, &c->w, err)) != RING_OK)
    goto fail;
  return RING_OK;
fail:
  ring_live_free(c->live);
  c->live = NULL;
  if (c->owns)
    ring_etcd_close(c->c);
  c->c = NULL;
  return rc;
}

int fleet_clients_start(const fleet_opts *o, fleet_leases *l, fleet_clients **out,
                        ring_error *err) {
  fleet_clients *fc = calloc(1, sizeof *fc);
  uint32_t want = o->clients / o->procs + (o->proc < o->clients % o->procs);
  if (fc == NULL || (fc->cl = calloc(want ? want : 1, sizeof *fc->cl)) == NULL) {
    free(fc);
    snprintf(err->message, sizeof err->message, "clients: no memory");
    return RING_ENOMEM;
  }
  for (; fc->n < want; fc->n++) {
    ring_etcd *shared = fc->n % o->per_conn ? fc->cl[fc->n - 1].c : NULL;
    int rc = client_start(o, l, fc, &fc->cl[fc->n], o->client_base + fc->n * o->procs + o->proc,
                          shared, err);
    if (rc != RING_OK) {
      fprintf(stderr, "fleet_sim: client %u of slice %u: %s\n", fc->n, o->proc, err->message);
      fleet_clients_stop(fc, NULL, NULL, NULL);
      return rc;
    }
  }
  *out = fc;
  return RING_OK;
}

void fleet_clients_stop(fleet_clients *fc, fleet_report *r,
                        void (*check)(void *ud, const fleet_seq *s), void *ud) {
  if (fc == NULL)
    return;
  for (uint32_t i = 0; i < fc->n; i++) {
    client *c = &fc->cl[i];
    ring_watcher_stats st = {0};
    ring_watcher_stats_get(c->w, &st); /* before the stop frees the watcher */
    ring_watcher_stop(c->w);           /* joins its thread: seq is ours now */
    if (r) {
      r->clients++;
      r->client_swaps += st.swaps;
      r->client_deltas += st.deltas;
      r->errors += st.errors;
      if (r->client_last_min == 0 || c->seq.last < r->client_last_min)
        r->client_last_min = c->seq.last;
      if (c->seq.last > r->client_last_max)
        r->client_last_max = c->seq.last;
      if (c->owns)
        r->requests += ring_etcd_requests(c->c);
    }
    if (check)
      check(ud, &c->seq);
    ring_live_free(c->live);
  }
  for (uint32_t i = 0; i < fc->n; i++) /* every watcher of a group stopped: close */
    if (fc->cl[i].owns)
      ring_etcd_close(fc->cl[i].c);
  free(fc->cl);
  free(fc);
}
