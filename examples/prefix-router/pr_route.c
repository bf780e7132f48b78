/*
 * pr_route.c: the router's choice of backend: the body's prefix as the
 * key, libring's bounded loads over the live table, in-flight loads kept
 * here (ring.h: "the caller updates loads").
 *
 * Sections: the prefix; the router; one choice; loads and figures.
 *
 * One mutex guards the ring_bounded router (not thread-safe), the loads
 * and the figures: a choice is a hash and a short walk, far shorter than
 * the request it routes.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "pr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- the prefix */

size_t pr_prefix_len(size_t len, uint32_t prefix_bytes) {
  return len < prefix_bytes ? len : prefix_bytes;
}

uint64_t pr_rng_next(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
  *state = x;
  return x * 2685821657736338717ull;
}

/* ------------------------------------------------------------------ the router */

struct pr_router {
  pr_route_opts o;
  ring_live *live;      /* borrowed */
  ring_bounded *router; /* PR_BOUNDED only */
  pthread_mutex_t mu;   /* guards everything below and router */
  uint64_t *loads;      /* per node index: requests in flight */
  uint64_t total;       /* their sum */
  uint64_t rng;         /* PR_RANDOM's state */
  pr_route_stats st;
  double ratio_sum;
  uint64_t samples;
};

static bool valid_opts(const pr_route_opts *o) {
  return o->prefix_bytes >= 1 && o->prefix_bytes <= PR_PREFIX_MAX &&
         (o->mode == PR_RANDOM || o->mode == PR_RING || o->mode == PR_BOUNDED);
}

int pr_router_new(const pr_route_opts *o, ring_live *live, pr_router **out) {
  if (o == NULL || live == NULL || out == NULL || !valid_opts(o))
    return RING_EINVAL;
  pr_router *r = calloc(1, sizeof *r);
  if (r == NULL)
    return RING_ENOMEM;
  *r = (pr_router){.o = *o, .live = live, .rng = 0x9e3779b97f4a7c15ull};
  /* Indexes are uint16: one counter per possible index, 512 KiB, so a
   * table that grows never needs the array to move under readers. */
  r->loads = calloc(RING_NODES_MAX, sizeof *r->loads);
  int rc = r->loads == NULL ? RING_ENOMEM : RING_OK;
  if (rc == RING_OK && o->mode == PR_BOUNDED)
    rc = ring_bounded_new(&o->bounded, &r->router);
  if (rc == RING_OK && pthread_mutex_init(&r->mu, NULL) != 0)
    rc = RING_ENOMEM;
  if (rc != RING_OK) {
    ring_bounded_free(r->router);
    free(r->loads);
    free(r);
    return rc;
  }
  *out = r;
  return RING_OK;
}

void pr_router_free(pr_router *r) {
  if (r == NULL)
    return;
  pthread_mutex_destroy(&r->mu);
  ring_bounded_free(r->router);
  free(r->loads);
  free(r);
}

/* ---------------------------------------------------------------- one choice */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool serves(const ring_table *t, uint16_t i) {
  const ring_node_state s = ring_table_node_state(t, i);
  return s != RING_NODE_DOWN && s != RING_NODE_REMOVED && ring_table_node_replicas(t, i) > 0;
}

/* Tries a bounded number of draws for a serving node, then the first owner. */
static uint16_t random_node(pr_router *r, const ring_table *t, uint16_t first) {
  const uint32_t n = ring_table_node_count(t);
  for (int i = 0; i < 64; i++) {
    const uint16_t pick = (uint16_t)((pr_rng_next(&r->rng) >> 32) % n);
    if (serves(t, pick))
      return pick;
  }
  return first;
}

/* The choice under the mode; called with mu held. */
static int choose(pr_router *r, const ring_table *t, const char *key, size_t len, uint16_t *node,
                  int *first) {
  uint16_t owner = RING_NODE_NONE;
  if (ring_lookup(t, key, len, &owner, 1) != 1)
    return RING_EUNAVAIL;
  if (r->o.mode == PR_BOUNDED)
    return ring_bounded_route(r->router, t, key, len, r->loads, r->total, now_ms(), node, first);
  *node = r->o.mode == PR_RANDOM ? random_node(r, t, owner) : owner;
  *first = *node == owner;
  return serves(t, *node) ? RING_OK : RING_EUNAVAIL;
}

/* ------------------------------------------------------ loads and figures */

/* max/mean of the in-flight loads before this route, over serving nodes. */
static void sample(pr_router *r, const ring_table *t) {
  uint64_t max = 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < ring_table_node_count(t); i++)
    if (serves(t, (uint16_t)i)) {
      n++;
      max = r->loads[i] > max ? r->loads[i] : max;
    }
  /* Below a mean of 4 in flight one request moves max/mean by a quarter
   * or more: such instants (a run's start and end) say nothing of balance. */
  if (n == 0 || r->total < 4u * n)
    return;
  const double ratio = (double)max * n / (double)r->total;
  r->ratio_sum += ratio;
  r->samples++;
  r->st.peak_over_mean = ratio > r->st.peak_over_mean ? ratio : r->st.peak_over_mean;
}

int pr_route_begin(pr_router *r, const char *body, size_t len, pr_pick *out) {
  const size_t klen = pr_prefix_len(len, r->o.prefix_bytes);
  const ring_table *t = ring_live_enter(r->live);
  if (t == NULL) {
    ring_live_exit(r->live);
    return RING_EUNAVAIL;
  }
  int first = 0, rc;
  uint16_t node = RING_NODE_NONE;
  pthread_mutex_lock(&r->mu);
  sample(r, t);
  rc = choose(r, t, body, klen, &node, &first);
  if (rc == RING_OK) {
    r->loads[node]++;
    r->total++;
    r->st.routed++;
    r->st.first += first != 0;
  }
  pthread_mutex_unlock(&r->mu);
  if (rc == RING_OK) {
    *out = (pr_pick){node, first != 0, ""};
    snprintf(out->addr, sizeof out->addr, "%s", ring_table_node_addr(t, node));
  }
  ring_live_exit(r->live);
  return rc;
}

void pr_route_end(pr_router *r, const pr_pick *p) {
  pthread_mutex_lock(&r->mu);
  r->loads[p->node]--;
  r->total--;
  pthread_mutex_unlock(&r->mu);
}

void pr_router_stats(pr_router *r, pr_route_stats *out) {
  pthread_mutex_lock(&r->mu);
  *out = r->st;
  out->max_over_mean = r->samples ? r->ratio_sum / (double)r->samples : 0;
  pthread_mutex_unlock(&r->mu);
}
