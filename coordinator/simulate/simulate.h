/*
 * simulate.h: the model behind `ringctl simulate`, internal to ringctl.
 *
 * Sections: keys and schemes; measuring schemes; fixed tokens; weighted
 * rendezvous; the request stream; bounded loads; the whole run and its
 * report.
 *
 * The question every scheme answers: on the key set "session-0" ..
 * "session-<K-1>", which node owns each key with N nodes, after node N
 * joins, and after node N-1 leaves? Nodes are numbered 0..N; the members
 * with N nodes are 0..N-1. Everything is deterministic: fixed hash seeds,
 * a fixed PRNG seed, no clocks.
 */
#ifndef RINGCTL_SIMULATE_H
#define RINGCTL_SIMULATE_H

#include "ring.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* -------------------------------------------------------- keys and schemes */

/* Limits `ringctl simulate` accepts (checked by the command). */
#define SIM_NODES_MAX 10000u
#define SIM_KEYS_MAX 100000000u

/* One key of the synthetic set. */
typedef struct sim_key {
  const char *s; /* "session-<i>", NUL-terminated */
  size_t len;    /* strlen(s) */
  uint64_t hash; /* XXH3_64bits(s), seed 0: what the hash-based schemes place */
} sim_key;

/* The memberships a scheme is asked about, as indexes into its answer. */
enum {
  SIM_LEAVE = 0, /* nodes 0..N-2: node N-1 left (drained, for fixed tokens) */
  SIM_BASE = 1,  /* nodes 0..N-1 */
  SIM_JOIN = 2,  /* nodes 0..N: node N joined */
  SIM_MEMBERSHIPS = 3
};

typedef struct sim_scheme sim_scheme;

/* A placement scheme over N nodes. A scheme is initialised by its
 * sim_<name>_init and released with sim_scheme_destroy. */
struct sim_scheme {
  const char *name; /* the JSON "name": "modulo", "ring", ... */
  uint32_t vnodes;  /* points per node for "ring", 0 for the others */
  uint32_t nodes;   /* N */
  /* Writes the key's owner (a node number) under each membership;
   * out[SIM_LEAVE] only when N >= 2 (there is no empty cluster to ask). */
  void (*owners)(const sim_scheme *s, const sim_key *k, uint32_t out[SIM_MEMBERSHIPS]);
  void (*destroy)(sim_scheme *s); /* frees state; NULL when there is none */
  void *state;                    /* the scheme's own data */
};

/* Initialisers: RING_OK, or RING_ENOMEM with *s left without state (a
 * sim_scheme_destroy of it is still safe). n >= 1. */
int sim_modulo_init(sim_scheme *s, uint32_t n);
int sim_ring_init(sim_scheme *s, uint32_t n, uint32_t vnodes);
int sim_rendezvous_init(sim_scheme *s, uint32_t n);
int sim_jump_init(sim_scheme *s, uint32_t n);
/* Maglev (Eisenbud et al. 2016): a lookup table of a prime size M >= 65537
 * (and >= 100 entries per node) filled from each node's permutation; the
 * table is rebuilt whole for every membership, as the seed says. */
int sim_maglev_init(sim_scheme *s, uint32_t n);
/* The table size M Maglev uses for n nodes (and n+1 after the join). */
uint32_t sim_maglev_size(uint32_t n);

/* Frees what an initialiser allocated; a zeroed scheme is a no-op. */
void sim_scheme_destroy(sim_scheme *s);

/* ------------------------------------------------------ measuring schemes */

/* What one scheme did on the key set. */
typedef struct sim_result {
  const char *name;     /* the scheme's name (static) */
  uint32_t vnodes;      /* the scheme's vnodes, 0 if not a ring */
  double moved_join;    /* share of keys whose owner changes from N to N+1 nodes */
  double moved_leave;   /* same from N to N-1 nodes; NAN when N = 1 */
  double max_over_mean; /* keys on the fullest node at N nodes, over K/N */
  double min_over_mean; /* keys on the emptiest node at N nodes, over K/N */
} sim_result;

/* Runs every key of "session-0".."session-<keys-1>" through each scheme
 * (one pass over the keys). Writes n results; RING_OK or RING_ENOMEM
 * (results then unspecified). */
int sim_measure(const sim_scheme *schemes, size_t n, uint64_t keys, sim_result *out);

/* ---------------------------------------------------------- fixed tokens */

/* Moves the planner made, next to its lower bound. */
typedef struct sim_plan_stats {
  uint32_t join_moves, join_lower_bound;   /* N -> N+1 */
  uint32_t leave_moves, leave_lower_bound; /* drain of node N-1; 0 when N = 1 */
} sim_plan_stats;

/* Ringkeeper's fixed tokens, R = 1, no failure domain: the planner's
 * initial placement of nodes "node-0".."node-<N-1>" on `tokens` tokens,
 * its plan for the join of "node-<N>", and its plan for draining
 * "node-<N-1>". A key's owner is ring_lookup's first owner. Returns
 * RING_OK, RING_ENOMEM, or the planner's error with err filled. */
int sim_tokens_init(sim_scheme *s, uint32_t n, uint32_t tokens, ring_error *err);

/* The table with N nodes (borrowed from s), and the plans' figures. */
const ring_table *sim_tokens_table(const sim_scheme *s);
void sim_tokens_plan_stats(const sim_scheme *s, sim_plan_stats *out);

/* ---------------------------------------------------- weighted rendezvous */

/* Weighted rendezvous (HRW) with top-k replicas, scored by libring's own
 * ring_rendezvous_pick (-w/ln(u)) over a table holding the nodes and their
 * weights: the k replicas of a key are its k successive picks, each among
 * the nodes not yet picked. Node i is "node-<i>"; node 0 is the one whose
 * share is compared with its weight. */
#define SIM_HRW_NODES_MAX 16u
#define SIM_HRW_KEYS_MAX 1000000u /* keys a weighted run reads, at most */
#define SIM_HRW_CASES 2           /* the seed's weights, and 3,2,2,2,1 */

typedef struct sim_hrw_case {
  const char *label; /* the JSON "weights" label */
  uint32_t nodes;    /* 2 .. SIM_HRW_NODES_MAX */
  double weight[SIM_HRW_NODES_MAX];
  double seed_share; /* node 0's share the seed printed; NAN if none */
} sim_hrw_case;

/* The cases `ringctl simulate` runs, in report order (static). */
const sim_hrw_case *sim_hrw_cases(void);

typedef struct sim_hrw_result {
  const sim_hrw_case *c;   /* the case run (static) */
  uint64_t keys;           /* keys read: min(K, SIM_HRW_KEYS_MAX) */
  uint32_t k;              /* replicas per key: min(3, nodes - 1) */
  double share;            /* keys whose first replica is node 0 */
  double ideal;            /* node 0's weight over the total */
  double max_err;          /* largest |share - ideal share| over the nodes */
  double leave_moved;      /* keys whose replica set changes when the last
                              node leaves: those it held */
  double leave_kept_moved; /* keys whose surviving replicas change or
                              reorder on that leave: 0 for HRW */
} sim_hrw_result;

/* Runs one case over the keys "session-0".. (at most SIM_HRW_KEYS_MAX).
 * Returns RING_OK and fills *out, RING_ENOMEM, or a table error with err
 * filled. */
int sim_hrw_run(const sim_hrw_case *c, uint64_t keys, sim_hrw_result *out, ring_error *err);

/* ----------------------------------------------------- the request stream */

/* Deterministic PRNG (SplitMix64): the same seed, the same stream. */
uint64_t sim_rng_next(uint64_t *state);
/* Uniform in [0, 1). */
double sim_rng_unit(uint64_t *state);

/* A Zipf(s) sampler over ranks 1..n by rejection-inversion (Hoermann and
 * Derflinger 1996): O(1) memory and time per draw, so a stream over 10^8
 * keys needs no 800 MB table of cumulative weights. */
typedef struct sim_zipf {
  uint64_t n;
  double s;
  double h_x1;   /* H(1.5) - 1 */
  double h_n;    /* H(n + 0.5) */
  double accept; /* a draw within this of its rank is accepted at once */
} sim_zipf;

/* n >= 1, s > 0. */
void sim_zipf_init(sim_zipf *z, uint64_t n, double s);
/* A rank in [1, n]: rank 1 is the hottest. */
uint64_t sim_zipf_draw(const sim_zipf *z, uint64_t *rng);

/* The skewed request stream the bounded-load runs replay: one request per
 * simulated millisecond for the key of a Zipf rank, each lasting a
 * uniform 1 .. 2*mean_ms-1 ms, so loads rise and fall. */
typedef struct sim_stream {
  double zipf_s;     /* Zipf exponent */
  uint64_t requests; /* requests in the run */
  uint64_t mean_ms;  /* mean duration = mean requests in flight */
  uint64_t warmup;   /* requests before loads are sampled */
  uint64_t stride;   /* loads are sampled every stride requests */
} sim_stream;

/* The stream for a cluster of n nodes: ~100 requests in flight per node. */
sim_stream sim_stream_for(uint32_t n);

/* --------------------------------------------------------- bounded loads */

/* Keys whose previous node a run remembers, for churn: ranks 1 .. this
 * (every key at K <= 2^20; the hottest otherwise, which carry the churn). */
#define SIM_TRACKED_KEYS_MAX (1u << 20)

typedef struct sim_bounded_result {
  ring_bounded_opts o;   /* the router's options; o.c = 0: plain lookups */
  double cap;            /* the load factor c; 0 for plain lookups (no cap) */
  double affinity;       /* share of requests sent to the key's first choice */
  double affinity_held;  /* share sent to the first choice or to the node
                            the key's previous request went to (its state,
                            the sticky node) */
  double churn;          /* share of repeated requests of a tracked key sent
                            to another node than its previous request */
  double max_over_mean;  /* busiest node's in-flight requests over the mean,
                            averaged over the sampled instants */
  double peak_over_mean; /* the largest sampled max/mean */
} sim_bounded_result;

/* Replays the stream over `keys` keys on table t, routing with
 * ring_bounded_route under options o (o->c = 0: ring_lookup's first owner,
 * the uncapped baseline). Returns RING_OK and fills *out, RING_ENOMEM,
 * RING_EINVAL for bad options, or a routing error (RING_EUNAVAIL). */
int sim_bounded_run(const ring_table *t, const sim_stream *st, uint64_t keys,
                    const ring_bounded_opts *o, sim_bounded_result *out);

/* The sticky router compared with the plain one: the same cap with
 * hysteresis and a sticky map sized and timed for the stream. */
ring_bounded_opts sim_sticky_opts(const sim_stream *st, double c);

/* ------------------------------------------------ the whole run, report */

#define SIM_SYSTEMS_MAX 9 /* modulo, 4 rings, rendezvous, jump, maglev, fixed tokens */
#define SIM_CAPS_MAX 3    /* none, 1.05, 1.25 */
#define SIM_STICKY_MAX 2  /* 1.05, 1.25 with hysteresis and the sticky map */

typedef struct sim_params {
  uint32_t nodes;  /* N, 1 .. SIM_NODES_MAX */
  uint64_t keys;   /* K, 1 .. SIM_KEYS_MAX */
  uint32_t tokens; /* T for fixed tokens, a power of two in [64, 65536] */
} sim_params;

typedef struct sim_report {
  sim_params p;
  double ideal_join;  /* 1/(N+1) */
  double ideal_leave; /* 1/N; NAN when N = 1 */
  sim_result systems[SIM_SYSTEMS_MAX];
  size_t n_systems;
  sim_plan_stats plans;                     /* fixed tokens' plans */
  sim_stream stream;                        /* what the bounded runs replayed */
  sim_bounded_result bounded[SIM_CAPS_MAX]; /* [0] is the uncapped baseline */
  size_t n_bounded;
  sim_bounded_result sticky[SIM_STICKY_MAX]; /* same caps, sticky and hysteresis */
  size_t n_sticky;
  sim_hrw_result hrw[SIM_HRW_CASES]; /* weighted rendezvous */
  size_t n_hrw;
} sim_report;

/* Runs every scheme and the bounded-load runs. Returns RING_OK, RING_ENOMEM,
 * or a libring error with err filled (a refused plan, say). */
int sim_run(const sim_params *p, sim_report *r, ring_error *err);

/* Prints the report as aligned tables. */
void sim_report_text(const sim_report *r, FILE *f);
/* Prints the report as one line of JSON (the shape `ringctl simulate
 * --json` promises; the uncapped baseline is left out). RING_OK or
 * RING_ENOMEM (nothing printed). */
int sim_report_json(const sim_report *r, FILE *f);

#endif /* RINGCTL_SIMULATE_H */
