/*
 * agent_main.c: ring-agent's entry point: options, start-up, the loop, and
 * a clean stop on SIGTERM.
 *
 * Sections: options; start-up; the loop; stopping; main.
 *
 * Usage: ring-agent --endpoints URLS --cluster NAME --id ID --listen HOST:PORT
 *        --data-dir DIR [--advertise HOST:PORT] [--zone Z] ... [--config FILE]
 *        (see --help and deploy/ring-agent.conf)
 */
#define _GNU_SOURCE /* strdup, gethostname */
#include "agent.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- options */

static rd_opt *opts_table(agent_opts *o) {
  const rd_opt table[] = {
      rd_common_row(&o->common, RD_CLUSTER, NULL),
      rd_common_row(&o->common, RD_ID, "this host's node id ([a-z0-9._-]{1,63})"),
      rd_common_row(&o->common, RD_LISTEN, "HOST:PORT of the arc server"),
      rd_common_row(&o->common, RD_ADVERTISE,
                    "HOST:PORT other agents fetch from (default: the listen address)"),
      rd_common_row(&o->common, RD_DATA_DIR, "where arcs live: DIR/arcs/<token>/"),
      {"region", RD_OPT_STRING, &o->region, 0, 0, "failure-domain label region"},
      {"zone", RD_OPT_STRING, &o->zone, 0, 0, "failure-domain label zone"},
      {"rack", RD_OPT_STRING, &o->rack, 0, 0, "failure-domain label rack"},
      {"host", RD_OPT_STRING, &o->host, 0, 0, "failure-domain label host"},
      {"weight", RD_OPT_DOUBLE, &o->weight, 1e-6, 1e6, "capacity relative to other hosts"},
      {"secret-file", RD_OPT_STRING, &o->secret_file, 0, 0,
       "the cluster secret, one line of at least 32 bytes (two while rotating: the first "
       "signs), mode 0600 (required)"},
      {"key-file", RD_OPT_STRING, &o->key_file, 0, 0,
       "this node's Ed25519 signing key, mode 0600 (default DATA-DIR/node.key, made if absent)"},
      {"next-key-file", RD_OPT_STRING, &o->next_key_file, 0, 0,
       "a key rotation's next signing key (made if absent): published in alive/<id> so that "
       "`ringctl trust` pins it before the agent is restarted with it as --key-file"},
      {"clock-skew", RD_OPT_MS, &o->clock_skew_ms, 1000, 600000,
       "how far a signed arc request's time may be from this host's clock"},
      {"allow-from", RD_OPT_STRING, &o->allow_from, 0, 0,
       "ADDR[,ADDR...]: clients the arc server admits besides the hosts in the table"},
      {"max-connections", RD_OPT_UINT, &o->max_connections, 1, RD_ADMIT_TOTAL_MAX,
       "the arc server's connections open at once"},
      {"max-per-address", RD_OPT_UINT, &o->max_per_address, 1, RD_ADMIT_TOTAL_MAX,
       "the arc server's connections from one client address"},
      {"header-deadline", RD_OPT_MS, &o->header_deadline_ms, 100, 600000,
       "a request's line and headers must arrive within this, in total"},
      {"metrics", RD_OPT_STRING, &o->metrics, 0, 0, "HOST:PORT for /metrics and /healthz"},
      rd_common_row(&o->common, RD_LOG_LEVEL, NULL),
      rd_common_row(&o->common, RD_LEASE_TTL,
                    "alive/<id> lease: the host counts as gone this long after it dies"),
      {"drop-grace", RD_OPT_MS, &o->drop_grace_ms, 0, 604800000,
       "how long an arc no longer owned is kept before it is removed"},
      {"sizes-every", RD_OPT_MS, &o->sizes_every_ms, 1000, 3600000,
       "how often the owned arcs' sizes are measured for sizes/<id> (plans' estimates)"},
      {"tls-cert", RD_OPT_STRING, &o->tls_cert, 0, 0,
       "PEM certificate: the arc server speaks HTTPS"},
      {"tls-key", RD_OPT_STRING, &o->tls_key, 0, 0, "PEM key of --tls-cert"},
      {"ca-file", RD_OPT_STRING, &o->ca_file, 0, 0,
       "CA bundle to verify other agents' HTTPS arc servers"},
      {NULL, 0, NULL, 0, 0, NULL},
  };
  return rd_opts_with_etcd(&o->etcd, table);
}

/* The failure-domain labels given as flags, validated. */
static int opts_labels(const agent_opts *o, rk_labels *l, char *msg, size_t cap) {
  const char *keys[] = {"region", "zone", "rack", "host"};
  const char *values[] = {o->region, o->zone, o->rack, o->host};
  memset(l, 0, sizeof *l);
  for (int i = 0; i < 4; i++) {
    ring_error err = {0};
    if (values[i] && rk_labels_set(l, keys[i], values[i], &err) != RING_OK)
      return snprintf(msg, cap, "--%s: %s", keys[i], err.message), -1;
  }
  return 0;
}

/* Checks what the option parser cannot, beyond the shared options
 * (rd_daemon_start): the secret, pairs, labels. */
static int opts_check(const void *opts, char *msg, size_t cap) {
  const agent_opts *o = opts;
  rk_labels l;
  if (o->secret_file == NULL || o->secret_file[0] == '\0')
    return snprintf(msg, cap, "--secret-file is required: arc servers only serve with a secret"),
           -1;
  if ((o->tls_cert == NULL) != (o->tls_key == NULL))
    return snprintf(msg, cap, "--tls-cert and --tls-key go together"), -1;
  return opts_labels(o, &l, msg, cap);
}

/* ------------------------------------------------------------- start-up */

static void on_stop(void *ud) {
  agent *a = ud;
  atomic_store(&a->stop, true);
  rd_waker_wake(&a->waker);
}

static int open_etcd(agent *a, char *msg, size_t cap) {
  return rd_etcd_open(&a->o.etcd, &a->etcd, msg, cap);
}

/* The address other agents reach the arc server at: --advertise, else the
 * listen address with the bound port (the host name for a wildcard). */
static void advertised_addr(agent *a) {
  if (a->o.advertise) {
    snprintf(a->addr, sizeof a->addr, "%s", a->o.advertise);
    return;
  }
  rd_listen_advertise(a->o.listen, arc_server_port(a->server), a->addr, sizeof a->addr);
}

/* This node's key (made in the data dir at the first start), its public
 * half for alive/<id>, and the pins other nodes' signatures are checked
 * against. */
static int node_key(agent *a, ring_error *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/node.key", a->o.data_dir);
  int rc = arc_keyring_node_key(a->keys, a->o.key_file ? a->o.key_file : path, err);
  if (rc != RING_OK)
    return rc;
  unsigned char pk[ARC_PK_LEN];
  arc_keyring_public(a->keys, pk);
  sodium_bin2hex(a->key_hex, sizeof a->key_hex, pk, ARC_PK_LEN);
  if (a->o.next_key_file != NULL) {
    if ((rc = arc_node_key_public(a->o.next_key_file, pk, err)) != RING_OK)
      return rc;
    sodium_bin2hex(a->next_hex, sizeof a->next_hex, pk, ARC_PK_LEN);
  }
  pthread_mutex_init(&a->pins_mu, NULL);
  arc_keyring_set_pins(a->keys, agent_pins_lookup, a);
  return RING_OK;
}

/* The arc store, limiter and server. */
static int open_arcs(agent *a, char *msg, size_t cap) {
  ring_error err = {0};
  if (arc_keyring_load(a->o.secret_file, &a->keys, &err) != RING_OK)
    return snprintf(msg, cap, "--secret-file: %s", err.message), -1;
  if (arc_store_open(a->o.data_dir, &a->store, &err) != 0)
    return snprintf(msg, cap, "data dir: %s", err.message), -1;
  if (node_key(a, &err) != RING_OK)
    return snprintf(msg, cap, "node key: %s", err.message), -1;
  if (arc_limiter_new(0, &a->limiter) != 0)
    return snprintf(msg, cap, "rate limiter: out of memory"), -1;
  char *list = a->o.allow_from ? strdup(a->o.allow_from) : NULL;
  const char *extra[AGENT_ALLOW_MAX];
  uint32_t n_extra = 0;
  for (char *save = NULL, *p = list ? strtok_r(list, ",", &save) : NULL;
       p != NULL && n_extra < AGENT_ALLOW_MAX; p = strtok_r(NULL, ",", &save))
    extra[n_extra++] = p;
  arc_server_opts so = {.listen = a->o.listen,
                        .allow_from = extra,
                        .n_allow_from = n_extra,
                        .max_connections = (uint32_t)a->o.max_connections,
                        .max_per_address = (uint32_t)a->o.max_per_address,
                        .header_deadline_ms = (uint32_t)a->o.header_deadline_ms,
                        .keys = a->keys,
                        .node_id = a->o.id,
                        .skew_ms = (uint32_t)a->o.clock_skew_ms,
                        .tls_cert = a->o.tls_cert,
                        .tls_key = a->o.tls_key};
  int rc = arc_server_start(a->store, &so, &a->server, &err);
  free(list); /* the addresses are resolved at start */
  if (rc != 0)
    return snprintf(msg, cap, "arc server on %s: %s", a->o.listen, err.message), -1;
  advertised_addr(a);
  return 0;
}

/* Everything but the loop. On failure msg says why; agent_close undoes
 * whatever got started. */
static int agent_open(agent *a, rd_http **http, char *msg, size_t cap) {
  if (open_arcs(a, msg, cap) != 0 || open_etcd(a, msg, cap) != 0)
    return -1;
  agent_restore_start(a); /* before the first reply: a restore while we were down shows there */
  if (agent_member_start(a, msg, cap) != 0) /* a live twin holds the id */
    return -1;
  agent_own_start(a); /* before following: a wiped data dir must adopt nothing */
  agent_gc_scan_leftovers(a);
  if (agent_fetchers_start(a) != 0)
    return snprintf(msg, cap, "cannot start fetch workers"), -1;
  if (agent_follow_start(a, msg, cap) != 0)
    return -1;
  if (a->o.metrics && (*http = rd_http_start(a->o.metrics, agent_metrics_text, agent_health_text, a,
                                             msg, cap)) == NULL)
    return -1;
  return 0;
}

/* ------------------------------------------------------------- the loop */

static uint64_t min_ms(uint64_t x, uint64_t y) { return x < y ? x : y; }

static void run_loop(agent *a) {
  while (!atomic_load(&a->stop)) {
    uint64_t wait = 1000; /* the longest sleep: a safety net, every change wakes the loop */
    rd_health_step(&a->health);
    wait = min_ms(wait, agent_member_tick(a));
    wait = min_ms(wait, agent_restore_tick(a));
    agent_follow_config(a);
    if (!agent_restored(a)) { /* a restored etcd: act on nothing it says (agent_restore.c) */
      wait = min_ms(wait, agent_pins_tick(a));
      wait = min_ms(wait, agent_follow_tick(a));
      wait = min_ms(wait, agent_report_tick(a));
      wait = min_ms(wait, agent_gc_tick(a));
      wait = min_ms(wait, agent_own_tick(a));
      wait = min_ms(wait, agent_refill_tick(a));
      wait = min_ms(wait, agent_sizes_tick(a));
    }
    agent_metrics_tick(a);
    if (a->lease != 0)
      rd_health_ok(&a->health);
    if (wait > 0)
      rd_waker_wait(&a->waker, wait);
  }
}

/* ------------------------------------------------------------- stopping */

/* SIGTERM: no more acks, fetches abandoned (their temp dirs stay for the
 * next start), nothing served, the lease revoked so the host is gone at
 * once. Also undoes a start-up that failed part way. */
static void agent_close(agent *a, rd_http *http) {
  if (http) /* first: /metrics reads the server, the store and the client */
    rd_http_stop(http);
  agent_follow_stop(a);
  agent_fetchers_stop(a);
  if (a->server)
    arc_server_stop(a->server);
  if (a->etcd)
    agent_member_leave(a);
  ring_etcd_close(a->etcd);
  arc_limiter_free(a->limiter);
  arc_store_close(a->store);
  arc_keyring_free(a->keys);
  agent_pins_free(a);
  free(a->owned);
  free(a->pending);
  free(a->loss_ok);
  free(a->verified);
  free(a->drop_at);
  free(a->leftovers);
  free(a->refill_missing);
  free(a->jobs);
}

/* ----------------------------------------------------------------- main */

static int parse(agent *a, rd_opt **tablep, int argc, char **argv) {
  static const rd_daemon d = {
      .name = "ring-agent",
      .component = "agent",
      .summary = "ring-agent: registers this host, follows the ring, streams the arcs it is given "
                 "and serves its own",
      .need = RD_NEED_ID | RD_NEED_LISTEN | RD_NEED_DATA_DIR,
      .id_meta = "ID",
      .check = opts_check};
  a->o = (agent_opts){.weight = 1.0,
                      .lease_ttl_ms = 10000,
                      .drop_grace_ms = 60000,
                      .sizes_every_ms = 30000,
                      .clock_skew_ms = 30000,
                      .etcd = {.timeout_ms = 5000}};
  *tablep = opts_table(&a->o);
  return rd_daemon_start(&d, argc, argv, *tablep, &a->o.common, &a->o);
}

/* Two malloc arenas shared by every thread, not one per thread (glibc's
 * default, up to 8 per core): with one each, what a fetch worker or a
 * server thread frees (1 MiB staging and receive buffers among it) stays
 * resident in its own arena, unused by the others. In bench_agent_move
 * the receiver's peak RSS went from 30.4-31.0 MiB to 24.7-24.8 MiB, CPU
 * unchanged: a worker allocates a few times per file, nothing contends.
 * MALLOC_ARENA_MAX in the environment still decides when set. */
static void few_arenas(void) {
#ifdef M_ARENA_MAX
  if (getenv("MALLOC_ARENA_MAX") == NULL)
    mallopt(M_ARENA_MAX, 2);
#endif
}

int main(int argc, char **argv) {
  static agent a; /* one per process; its address is handed to threads */
  rd_opt *table = NULL;
  few_arenas(); /* before any thread starts */
  int rc = parse(&a, &table, argc, argv);
  if (rc >= 0) {
    rd_opts_release(table);
    return rc;
  }
  a.started_ms = rd_wall_ms();
  rd_waker_init(&a.waker);
  rd_health_init(&a.health);
  rd_restore_init(&a.restore);
  pthread_mutex_init(&a.jobs_mu, NULL);
  pthread_cond_init(&a.jobs_cv, NULL);
  if (rd_signals_start(on_stop, NULL, &a) != 0) {
    fprintf(stderr, "ring-agent: cannot set up signal handling\n");
    return 1;
  }
  char msg[512] = "";
  rd_http *http = NULL;
  rc = 0;
  if (agent_open(&a, &http, msg, sizeof msg) != 0) {
    rd_log(RD_ERROR, "cannot start", "err", msg, NULL);
    rc = 1;
  } else {
    rd_log(RD_INFO, "started", "id", a.o.id, "cluster", a.o.cluster, "addr", a.addr, "data_dir",
           a.o.data_dir, NULL);
    run_loop(&a);
    rd_log(RD_INFO, "stopping", "id", a.o.id, NULL);
  }
  agent_close(&a, http);
  if (a.start_refused)
    rc = 1;
  if (rc == 0)
    rd_log(RD_INFO, "stopped", "id", a.o.id, NULL);
  rd_opts_release(table);
  return rc;
}
