/*
 * prefix_router.c: prefix-router, the HTTP router (README.md): follows a
 * cluster's ring in etcd with libring's watcher and routes each POST by
 * its body's prefix to a backend, under the bounded-load cap.
 *
 * Usage: prefix-router --endpoints URLS --cluster NAME [--port P]
 *        [--prefix-bytes N] [--cap C] [--margin M] (see --help)
 *
 * Sections: options; following the ring; main.
 */
#include "daemon.h"
#include "pr.h"
#include "ring_etcd.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ options */

typedef struct opts {
  rd_etcd_conf etcd;
  char *cluster;
  uint64_t port, prefix_bytes;
  double cap, margin; /* cap 0: no cap, the key's first owner always */
} opts;

static rd_opt *opts_table(opts *o) {
  const rd_opt own[] = {
      {"cluster", RD_OPT_STRING, &o->cluster, 0, 0, "cluster name: keys under /ringkeeper/NAME/"},
      {"port", RD_OPT_UINT, &o->port, 0, 65535, "port on 127.0.0.1 (0: any free one)"},
      {"prefix-bytes", RD_OPT_UINT, &o->prefix_bytes, 1, PR_PREFIX_MAX,
       "bytes of the body that form the routing key"},
      {"cap", RD_OPT_DOUBLE, &o->cap, 0, 100, "load factor c >= 1 (0: no cap)"},
      {"margin", RD_OPT_DOUBLE, &o->margin, 0, 0.99, "hysteresis under the cap"},
      {NULL, 0, NULL, 0, 0, NULL},
  };
  return rd_opts_with_etcd(&o->etcd, own);
}

static pr_route_opts route_opts(const opts *o) {
  const ring_bounded_opts b = {o->cap, o->margin, 4096, 10000};
  return (pr_route_opts){o->cap > 0 ? PR_BOUNDED : PR_RING, b, (uint32_t)o->prefix_bytes};
}

/* -------------------------------------------------------- following the ring */

static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;
static bool stopping;

static void on_stop(void *ud) {
  (void)ud;
  pthread_mutex_lock(&stop_mu);
  stopping = true;
  pthread_cond_signal(&stop_cv);
  pthread_mutex_unlock(&stop_mu);
}

static void on_table(void *ud, const ring_table *t) {
  (void)ud;
  rd_logf(RD_INFO, "table installed: version %llu, %u nodes",
          (unsigned long long)ring_table_version(t), ring_table_node_count(t));
}

/* Routes until SIGTERM or SIGINT. Returns the exit code. */
static int serve(const opts *o, ring_etcd *etcd) {
  ring_live *live = NULL;
  ring_watcher *w = NULL;
  pr_router *r = NULL;
  pr_server *front = NULL;
  ring_error err = {RING_OK, ""};
  char msg[256] = "";
  const pr_route_opts ro = route_opts(o);
  const ring_watcher_opts wo = {.cluster = o->cluster, .on_table = on_table, .log = rd_ring_log};
  int rc = ring_live_new(&live);
  if (rc == RING_OK)
    rc = ring_watcher_start(etcd, &wo, live, &w, &err);
  if (rc == RING_OK)
    rc = pr_router_new(&ro, live, &r);
  if (rc == RING_OK && (front = pr_front_start(r, (uint16_t)o->port, msg, sizeof msg)) == NULL)
    rc = RING_EIO;
  if (rc == RING_OK) {
    rd_logf(RD_INFO, "listening on 127.0.0.1:%u", (unsigned)pr_server_port(front));
    pthread_mutex_lock(&stop_mu);
    while (!stopping)
      pthread_cond_wait(&stop_cv, &stop_mu);
    pthread_mutex_unlock(&stop_mu);
  } else {
    rd_logf(RD_ERROR, "cannot start: %s",
            msg[0]     ? msg
            : err.code ? err.message
                       : ring_strerror(rc));
  }
  pr_server_stop(front);
  pr_router_free(r);
  ring_watcher_stop(w);
  ring_live_free(live);
  return rc == RING_OK ? 0 : 1;
}

/* --------------------------------------------------------------------- main */

int main(int argc, char **argv) {
  opts o = {.port = 8080, .prefix_bytes = 256, .cap = 1.25, .margin = 0.05};
  rd_opt *table = opts_table(&o);
  char msg[512];
  int prc = table ? rd_opts_parse(argc, argv, "routes requests by body prefix on libring", table,
                                  msg, sizeof msg)
                  : RD_OPTS_ERROR;
  int code = prc == RD_OPTS_HELP ? 0 : 2;
  if (prc == RD_OPTS_OK && (o.cap != 0 && o.cap < 1))
    snprintf(msg, sizeof msg, "--cap must be 0 or at least 1");
  else if (prc == RD_OPTS_OK && !ring_id_valid(o.cluster))
    snprintf(msg, sizeof msg, "--cluster NAME is required ([a-z0-9._-]{1,63})");
  else if (prc == RD_OPTS_OK && rd_etcd_check(&o.etcd, msg, sizeof msg) == 0) {
    rd_log_init("prefix-router", RD_INFO, 2);
    ring_etcd *etcd = NULL;
    code = 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK &&
        rd_signals_start(on_stop, NULL, NULL) == 0 &&
        rd_etcd_open(&o.etcd, &etcd, msg, sizeof msg) == 0)
      code = serve(&o, etcd);
    ring_etcd_close(etcd);
    msg[0] = code == 1 ? msg[0] : '\0';
  }
  if (code != 0 && prc != RD_OPTS_HELP && msg[0] != '\0')
    fprintf(stderr, "prefix-router: %s\n", msg);
  rd_opts_release(table);
  return code;
}
