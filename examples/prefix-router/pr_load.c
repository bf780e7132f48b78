/*
 * pr_load.c: one load run against the prefix router: simulated backends
 * on loopback, their table from libring's planner, the router's front, and
 * closed-loop clients.
 *
 * Sections: the quick run; tables; prefix popularity; clients; the run.
 *
 * Everything is bounded: backends, clients and requests by the options,
 * time by max_ms (clients stop at the deadline; nothing waits past the
 * backends' slowest answer after it).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "pr.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BACKENDS_MAX 32u
#define CLIENTS_MAX 256u

/* ---------------------------------------------------------------- the quick run */

/* A few seconds on a laptop: 4 backends of 8 slots, 48 clients, 256
 * prefixes of which each cache holds 24, so only affinity makes hits; a
 * miss costs 8x a hit, as a long prefill would. */
pr_load_opts pr_load_quick(pr_mode mode) {
  pr_load_opts o = {.backends = 4,
                    .clients = 48,
                    .prefixes = 256,
                    .zipf_s = 0.99,
                    .requests = 3000,
                    .max_ms = 20000,
                    .join_at = 0,
                    .backend = {8, 24, 1000, 8000, 64},
                    .route = {mode, {1.25, 0.05, 4096, 10000}, 64}};
  return o;
}

/* -------------------------------------------------------------------- tables */

/* Plans backends 0..n-1 onto `current` (NULL: the first table) and swaps
 * the plan's target into live, as the watcher would install it. */
static int install(ring_live *live, const ring_table *current, pr_backend **b, uint32_t n,
                   char *err, size_t cap) {
  char id[BACKENDS_MAX + 1][16], addr[BACKENDS_MAX + 1][32];
  ring_node_spec spec[BACKENDS_MAX + 1];
  for (uint32_t i = 0; i < n; i++) {
    snprintf(id[i], sizeof id[i], "backend-%u", i);
    snprintf(addr[i], sizeof addr[i], "127.0.0.1:%u", (unsigned)pr_backend_port(b[i]));
    spec[i] = (ring_node_spec){id[i], addr[i], NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
  }
  const ring_plan_config cfg = {.cluster = "prefix-router", .tokens = 1024, .replicas = 1};
  ring_plan *p = NULL;
  ring_table *t = NULL;
  ring_error e = {RING_OK, ""};
  int rc = ring_plan_compute(current, spec, n, &cfg, &p, &e);
  if (rc == RING_OK)
    rc = ring_table_clone(ring_plan_target(p), ring_table_version(ring_plan_target(p)), &t);
  if (rc == RING_OK)
    rc = ring_table_seal(t, &e);
  if (rc == RING_OK)
    rc = ring_live_swap(live, t);
  if (rc != RING_OK) {
    snprintf(err, cap, "table: %s", e.code != RING_OK ? e.message : ring_strerror(rc));
    ring_table_free(t);
  }
  ring_plan_free(p);
  return rc;
}

/* One more backend joins: planned on the table in service. */
static int join_one(ring_live *live, pr_backend **b, uint32_t n, char *err, size_t cap) {
  ring_table *current = NULL;
  const ring_table *t = ring_live_enter(live);
  int rc = ring_table_clone(t, ring_table_version(t), &current);
  ring_live_exit(live); /* a swap must not run inside a read section */
  if (rc == RING_OK)
    rc = ring_table_seal(current, NULL);
  if (rc == RING_OK)
    rc = install(live, current, b, n, err, cap);
  ring_table_free(current);
  return rc;
}

/* ------------------------------------------------------------- prefix popularity */

/* Cumulative Zipf(s) weights of ranks 1..n: a draw is a binary search. */
static double *zipf_cdf(uint32_t n, double s) {
  double *c = malloc(n * sizeof *c), sum = 0;
  for (uint32_t i = 0; c != NULL && i < n; i++)
    c[i] = (sum += pow(i + 1.0, -s));
  for (uint32_t i = 0; c != NULL && i < n; i++)
    c[i] /= sum;
  return c;
}

static uint32_t zipf_draw(const double *cdf, uint32_t n, uint64_t *rng) {
  const double u = (double)(pr_rng_next(rng) >> 11) * 0x1p-53;
  uint32_t lo = 0, hi = n - 1;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (cdf[mid] < u)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* ------------------------------------------------------------------------ clients */

typedef struct shared {
  const pr_load_opts *o;
  const double *cdf;
  char url[64];
  uint64_t deadline_ns;
  atomic_uint_fast64_t next; /* the next request's number */
  atomic_uint_fast64_t done, errors;
  uint32_t *lat_us; /* per request number */
  ring_live *live;
  pr_backend **b;
  atomic_int join_rc; /* the join's result, 1 until it ran */
} shared;

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t discard(char *p, size_t size, size_t n, void *ud) {
  (void)p, (void)ud;
  return size * n;
}

/* A body: the prefix (a tenant's prompt, padded to the key's length),
 * then what differs per request. */
static int make_body(char *buf, size_t cap, uint32_t rank, uint32_t prefix_bytes, uint64_t i) {
  int n = snprintf(buf, cap, "system-prompt-%u|", rank);
  while ((uint32_t)n < prefix_bytes && (size_t)n + 1 < cap)
    buf[n++] = '.';
  return n + snprintf(buf + n, cap - (size_t)n, "|question-%" PRIu64, i);
}

/* The client that draws request join_at swaps the join in, as the
 * coordinator's publication reaching the watcher would mid-traffic. */
static void maybe_join(shared *s, uint64_t i) {
  if (s->o->join_at == 0 || i != s->o->join_at)
    return;
  char err[128];
  atomic_store(&s->join_rc, join_one(s->live, s->b, s->o->backends + 1, err, sizeof err));
}

static void client_one(shared *s, CURL *h, uint64_t i, uint64_t *rng) {
  char body[PR_PREFIX_MAX + 64];
  const uint32_t rank = zipf_draw(s->cdf, s->o->prefixes, rng);
  const int len = make_body(body, sizeof body, rank, s->o->route.prefix_bytes, i);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
  const uint64_t t0 = mono_ns();
  long status = 0;
  CURLcode rc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  s->lat_us[i] = (uint32_t)((mono_ns() - t0) / 1000u);
  atomic_fetch_add(rc == CURLE_OK && status == 200 ? &s->done : &s->errors, 1);
}

/* One client thread: its own connection and its own seeded draws. */
typedef struct client_arg {
  shared *s;
  uint64_t rng;
} client_arg;

static void *client(void *arg) {
  client_arg *c = arg;
  shared *s = c->s;
  CURL *h = curl_easy_init();
  if (h == NULL)
    return NULL;
  curl_easy_setopt(h, CURLOPT_URL, s->url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  for (;;) {
    const uint64_t i = atomic_fetch_add(&s->next, 1);
    if (i >= s->o->requests || mono_ns() >= s->deadline_ns)
      break;
    maybe_join(s, i);
    client_one(s, h, i, &c->rng);
  }
  curl_easy_cleanup(h);
  return NULL;
}

/* ------------------------------------------------------------------------ the run */

static bool valid_opts(const pr_load_opts *o) {
  return o->backends >= 2 && o->backends < BACKENDS_MAX && o->clients >= 1 &&
         o->clients <= CLIENTS_MAX && o->prefixes >= 1 && o->prefixes <= 100000 && o->zipf_s > 0 &&
         o->requests >= 1 && o->requests <= 10000000 && o->max_ms >= 1 &&
         o->backend.prefix_bytes == o->route.prefix_bytes;
}

/* Runs the clients to the end; their latencies are in s->lat_us. */
static int drive(shared *s) {
  pthread_t th[CLIENTS_MAX];
  client_arg args[CLIENTS_MAX];
  uint32_t started = 0;
  for (; started < s->o->clients; started++) {
    args[started] = (client_arg){s, 0x9e3779b97f4a7c15ull * (started + 1)};
    if (pthread_create(&th[started], NULL, client, &args[started]) != 0)
      break;
  }
  for (uint32_t i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  return started == s->o->clients ? RING_OK : RING_ENOMEM;
}

static int cmp_u32(const void *a, const void *b) {
  const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Latency percentiles over the requests sent (a number drawn at the
 * deadline was not sent: its latency stays 0 and is skipped). */
static void percentiles(shared *s, pr_load_result *out) {
  const uint64_t drawn = atomic_load(&s->next);
  uint64_t n = s->o->requests < drawn ? s->o->requests : drawn, skip = 0;
  qsort(s->lat_us, n, sizeof *s->lat_us, cmp_u32);
  while (skip < n && s->lat_us[skip] == 0)
    skip++;
  const uint32_t *v = s->lat_us + skip;
  n -= skip;
  out->p50_ms = n ? v[(n - 1) / 2] / 1000.0 : 0;
  out->p99_ms = n ? v[(n - 1) * 99 / 100] / 1000.0 : 0;
}

/* Hits, the router's figures and the latencies into *out. */
static void summarise(shared *s, pr_router *r, uint32_t n_backends, pr_load_result *out) {
  pr_backend_stats sum = {0, 0};
  for (uint32_t i = 0; i < n_backends; i++) {
    pr_backend_stats b;
    pr_backend_stats_get(s->b[i], &b);
    sum.hits += b.hits, sum.misses += b.misses;
  }
  pr_route_stats st;
  pr_router_stats(r, &st);
  out->done = atomic_load(&s->done);
  out->errors = atomic_load(&s->errors);
  out->hit_rate = sum.hits + sum.misses ? (double)sum.hits / (double)(sum.hits + sum.misses) : 0;
  out->first_share = st.routed ? (double)st.first / (double)st.routed : 0;
  out->max_over_mean = st.max_over_mean;
  out->peak_over_mean = st.peak_over_mean;
  percentiles(s, out);
}

/* Backends up, table in, front up, clients run; torn down in reverse. */
static int run_all(shared *s, pr_load_result *out, char *err, size_t cap) {
  const pr_load_opts *o = s->o;
  const uint32_t n_all = o->backends + (o->join_at > 0);
  pr_backend *b[BACKENDS_MAX] = {NULL};
  pr_router *r = NULL;
  pr_server *front = NULL;
  int rc = RING_OK;
  for (uint32_t i = 0; rc == RING_OK && i < n_all; i++)
    rc = pr_backend_start(&o->backend, &b[i], err, cap);
  s->b = b;
  if (rc == RING_OK)
    rc = install(s->live, NULL, b, o->backends, err, cap);
  if (rc == RING_OK && (rc = pr_router_new(&o->route, s->live, &r)) != RING_OK)
    snprintf(err, cap, "router: %s", ring_strerror(rc));
  if (rc == RING_OK && (front = pr_front_start(r, 0, err, cap)) == NULL)
    rc = RING_EIO;
  if (rc == RING_OK) {
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u/v1/generate",
             (unsigned)pr_server_port(front));
    const uint64_t t0 = mono_ns();
    s->deadline_ns = t0 + (uint64_t)o->max_ms * 1000000u;
    rc = drive(s);
    out->seconds = (double)(mono_ns() - t0) / 1e9;
    summarise(s, r, n_all, out);
    out->version = ring_live_version(s->live);
  }
  pr_server_stop(front);
  pr_router_free(r);
  for (uint32_t i = 0; i < n_all; i++)
    pr_backend_stop(b[i]);
  return rc;
}

int pr_load_run(const pr_load_opts *o, pr_load_result *out, char *err, size_t cap) {
  if (o == NULL || out == NULL || !valid_opts(o)) {
    snprintf(err, cap, "load options out of range");
    return RING_EINVAL;
  }
  *out = (pr_load_result){0};
  shared *s = calloc(1, sizeof *s);
  int rc = s == NULL ? RING_ENOMEM : RING_OK;
  if (rc == RING_OK) {
    s->o = o;
    atomic_init(&s->join_rc, 1);
    s->cdf = zipf_cdf(o->prefixes, o->zipf_s);
    s->lat_us = calloc(o->requests, sizeof *s->lat_us);
    rc = s->cdf && s->lat_us ? ring_live_new(&s->live) : RING_ENOMEM;
  }
  if (rc == RING_OK)
    rc = run_all(s, out, err, cap);
  if (rc == RING_OK && o->join_at > 0 && atomic_load(&s->next) > o->join_at &&
      atomic_load(&s->join_rc) != RING_OK) {
    snprintf(err, cap, "the join's table was not installed");
    rc = RING_EIO;
  }
  if (rc == RING_ENOMEM)
    snprintf(err, cap, "out of memory");
  if (s != NULL) {
    ring_live_free(s->live);
    free((void *)s->cdf);
    free(s->lat_us);
  }
  free(s);
  return rc;
}
