/*
 * simulate_bounded.c: bounded-load routing (ring.h section 4) on a skewed
 * request stream, for `ringctl simulate`.
 *
 * Sections: the stream; completions; one run's state; routing one
 * request; sim_bounded_run.
 *
 * Loads are requests in flight, so they rise and fall as requests finish:
 * a cap that only ever saw arrivals would measure a static assignment, not
 * a router. The caller's loads are what ring_bounded_route reads, exactly
 * as a data-plane service would keep them.
 */
#include "completion_heap.h"
#include "simulate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------- the stream */

/* YCSB's default skew: the hottest of 10^5 keys takes ~8% of requests,
 * most of a node's fair share in a cluster of 8. */
#define ZIPF_S 0.99
#define INFLIGHT_PER_NODE 100u
#define REQUESTS_MIN 200000u
#define SAMPLES_PER_NODE_MAX 16u /* sampling cost per request, in nodes */
#define RNG_SEED 0x5eedull

sim_stream sim_stream_for(uint32_t n) {
  sim_stream st = {.zipf_s = ZIPF_S, .mean_ms = (uint64_t)INFLIGHT_PER_NODE * n};
  /* At least six mean durations: loads have settled after two (the longest
   * request lasts under 2 * mean_ms); the rest are measured. */
  st.requests = 6 * st.mean_ms > REQUESTS_MIN ? 6 * st.mean_ms : REQUESTS_MIN;
  st.warmup = 2 * st.mean_ms;
  /* A sample costs a scan of the nodes: every 1 + n/16 requests keeps that
   * under ~16 node reads per request at any cluster size. */
  st.stride = 1 + n / SAMPLES_PER_NODE_MAX;
  return st;
}

/* ------------------------------------------------------------ completions */

/* ------------------------------------------------------ one run's state */

typedef struct run {
  const ring_table *t;
  const sim_stream *st;
  ring_bounded *router; /* NULL: plain lookups, the uncapped baseline */
  sim_zipf zipf;
  uint64_t rng;
  uint64_t *loads;  /* per node index of t: requests in flight */
  uint64_t total;   /* sum of loads */
  uint32_t serving; /* nodes that own tokens: the mean is over them */
  heap inflight;
  uint64_t first;    /* requests routed to their key's first choice */
  double ratio_sum;  /* sum of sampled max/mean */
  double ratio_peak; /* largest sampled max/mean */
  uint64_t samples;
} run;

static uint32_t count_serving(const ring_table *t) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < ring_table_node_count(t); i++)
    n += ring_table_node_replicas(t, (uint16_t)i) > 0;
  return n;
}

static void run_free(run *r) {
  ring_bounded_free(r->router);
  free(r->loads);
  free(r->inflight.v);
}

/* Sets up a run; on failure what was allocated is left for run_free. */
static int run_init(run *r, const ring_table *t, const sim_stream *st, uint64_t keys, double c) {
  *r = (run){.t = t, .st = st, .rng = RNG_SEED, .serving = count_serving(t)};
  sim_zipf_init(&r->zipf, keys, st->zipf_s);
  r->loads = calloc(ring_table_node_count(t), sizeof *r->loads);
  r->inflight.v = malloc(2 * st->mean_ms * sizeof *r->inflight.v);
  if (r->loads == NULL || r->inflight.v == NULL)
    return RING_ENOMEM;
  if (c == 0)
    return RING_OK;
  /* The plain rule of the paper, as the seeds measure it: no hysteresis
   * and no sticky map. Both keep a moved key away from its first choice on
   * purpose (so it stays where its state now is), which would count
   * against "affinity" here while helping a cache. */
  const ring_bounded_opts o = {c, 0, 0, 0};
  return ring_bounded_new(&o, &r->router);
}

/* ---------------------------------------------------- routing one request */

static void finish_until(run *r, uint64_t now) {
  while (r->inflight.n > 0 && r->inflight.v[0].at <= now) {
    done d = heap_pop(&r->inflight);
    r->loads[d.node]--;
    r->total--;
  }
}

/* Routes the key of one Zipf draw; the node it lands on takes the request
 * until now + a uniform duration in [1, 2 * mean_ms). */
static int route_one(run *r, uint64_t now) {
  char key[32];
  const uint64_t rank = sim_zipf_draw(&r->zipf, &r->rng);
  const int len = snprintf(key, sizeof key, "session-%" PRIu64, rank - 1);
  uint16_t node = RING_NODE_NONE;
  int first = 1, rc;
  if (r->router == NULL)
    rc = ring_lookup(r->t, key, (size_t)len, &node, 1) == 1 ? RING_OK : RING_EUNAVAIL;
  else
    rc = ring_bounded_route(r->router, r->t, key, (size_t)len, r->loads, r->total, now, &node,
                            &first);
  if (rc != RING_OK)
    return rc;
  r->first += first != 0;
  r->loads[node]++;
  r->total++;
  const uint64_t span = 2 * r->st->mean_ms - 1;
  heap_push(&r->inflight, (done){now + 1 + sim_rng_next(&r->rng) % span, node});
  return RING_OK;
}

static void sample(run *r) {
  uint64_t max = 0;
  for (uint32_t i = 0; i < ring_table_node_count(r->t); i++)
    max = r->loads[i] > max ? r->loads[i] : max;
  const double ratio = (double)max * r->serving / (double)r->total;
  r->ratio_sum += ratio;
  r->ratio_peak = ratio > r->ratio_peak ? ratio : r->ratio_peak;
  r->samples++;
}

/* ------------------------------------------------------- sim_bounded_run */

static int replay(run *r) {
  const sim_stream *st = r->st;
  for (uint64_t now = 0; now < st->requests; now++) {
    finish_until(r, now);
    int rc = route_one(r, now);
    if (rc != RING_OK)
      return rc;
    if (now >= st->warmup && (now - st->warmup) % st->stride == 0)
      sample(r);
  }
  return RING_OK;
}

int sim_bounded_run(const ring_table *t, const sim_stream *st, uint64_t keys, double c,
                    sim_bounded_result *out) {
  run r;
  int rc = run_init(&r, t, st, keys, c);
  if (rc == RING_OK)
    rc = replay(&r);
  if (rc == RING_OK) {
    const double samples = r.samples ? (double)r.samples : 1;
    *out = (sim_bounded_result){c, (double)r.first / (double)st->requests, r.ratio_sum / samples,
                                r.ratio_peak};
  }
  run_free(&r);
  return rc;
}
