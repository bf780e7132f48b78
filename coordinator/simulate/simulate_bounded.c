/*
 * simulate_bounded.c: bounded-load routing (ring.h section 4) on a skewed
 * request stream, for `ringctl simulate`.
 *
 * Sections: the stream; one run's state; routing one request; churn;
 * sim_bounded_run.
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
  uint16_t *last;    /* per tracked rank - 1: node of its latest request */
  uint64_t tracked;  /* ranks tracked: min(keys, SIM_TRACKED_KEYS_MAX) */
  uint64_t first;    /* requests routed to their key's first choice */
  uint64_t held;     /* ... or to the node of the key's previous request */
  uint64_t repeats;  /* requests of a tracked key seen before */
  uint64_t moved;    /* of those, sent elsewhere than the time before */
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
  free(r->last);
}

/* Sets up a run; on failure what was allocated is left for run_free. */
static int run_init(run *r, const ring_table *t, const sim_stream *st, uint64_t keys,
                    const ring_bounded_opts *o) {
  *r = (run){.t = t, .st = st, .rng = RNG_SEED, .serving = count_serving(t)};
  sim_zipf_init(&r->zipf, keys, st->zipf_s);
  r->tracked = keys < SIM_TRACKED_KEYS_MAX ? keys : SIM_TRACKED_KEYS_MAX;
  r->loads = calloc(ring_table_node_count(t), sizeof *r->loads);
  r->inflight.v = malloc(2 * st->mean_ms * sizeof *r->inflight.v);
  r->last = malloc(r->tracked * sizeof *r->last);
  if (r->loads == NULL || r->inflight.v == NULL || r->last == NULL)
    return RING_ENOMEM;
  for (uint64_t i = 0; i < r->tracked; i++)
    r->last[i] = RING_NODE_NONE;
  if (o->c == 0)
    return RING_OK;
  return ring_bounded_new(o, &r->router);
}

/* The paper's plain rule is {c, 0, 0, 0}, as the seeds measure it. Both
 * additions keep a moved key away from its first choice on purpose (so it
 * stays where its state now is), which lowers "affinity" and is why
 * affinity_held and churn are reported next to it. The hysteresis margin
 * is ring.h's example; an entry outlives a mean request, so a hot key's
 * next request (a few ms later) finds it; the map holds every key a node
 * set of this size spills at once with room to spare. */
#define STICKY_MARGIN 0.05
#define STICKY_CAPACITY 65536u

ring_bounded_opts sim_sticky_opts(const sim_stream *st, double c) {
  return (ring_bounded_opts){c, STICKY_MARGIN, STICKY_CAPACITY, st->mean_ms};
}

static void finish_until(run *r, uint64_t now) {
  while (r->inflight.n > 0 && r->inflight.v[0].at <= now) {
    done d = heap_pop(&r->inflight);
    r->loads[d.node]--;
    r->total--;
  }
}

/* ------------------------------------------------------------------ churn */

/* A tracked key's request against its previous one: held if it went to
 * its first choice or stayed where the key was; moved if it changed node. */
static void note_churn(run *r, uint64_t rank, uint16_t node, bool first) {
  if (rank > r->tracked) {
    r->held += first;
    return;
  }
  uint16_t *last = &r->last[rank - 1];
  const bool seen = *last != RING_NODE_NONE;
  r->held += first || (seen && *last == node);
  r->repeats += seen;
  r->moved += seen && *last != node;
  *last = node;
}

/* ---------------------------------------------------- routing one request */

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
  note_churn(r, rank, node, first != 0);
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

static sim_bounded_result result_of(const run *r, const ring_bounded_opts *o) {
  const double requests = (double)r->st->requests;
  const double samples = r->samples ? (double)r->samples : 1;
  const double repeats = r->repeats ? (double)r->repeats : 1;
  return (sim_bounded_result){*o,
                              o->c,
                              (double)r->first / requests,
                              (double)r->held / requests,
                              (double)r->moved / repeats,
                              r->ratio_sum / samples,
                              r->ratio_peak};
}

int sim_bounded_run(const ring_table *t, const sim_stream *st, uint64_t keys,
                    const ring_bounded_opts *o, sim_bounded_result *out) {
  run r;
  int rc = run_init(&r, t, st, keys, o);
  if (rc == RING_OK)
    rc = replay(&r);
  if (rc == RING_OK)
    *out = result_of(&r, o);
  run_free(&r);
  return rc;
}
