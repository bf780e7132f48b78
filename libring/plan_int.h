/*
 * plan_int.h: the planner's working state, shared by plan*.c.
 *
 * Phases (each in its own file):
 *   plan.c         membership -> target node list; orchestration; accessors
 *   plan_quota.c   hard domains, weighted targets with domain caps, integer quotas
 *   plan_assign.c  initial placement, and minimal-movement rebalancing
 *   plan_bytes.c   rebalancing by bytes held (--balance bytes)
 *   plan_waves.c   stream sources and throttled waves
 *   plan_verify.c  independent checks of tables and plans
 */
#ifndef RING_PLAN_INT_H
#define RING_PLAN_INT_H

#include "ring_int.h"

#define DOMAIN_NONE UINT32_MAX

/* Per-node facts the planner and the verifier both derive from a node list. */
typedef struct ring__shares {
  uint32_t n;      /* nodes */
  uint32_t n_dom;  /* distinct hard domains among eligible nodes */
  uint32_t *dom;   /* per node: hard domain id; eligible nodes' ids are < n_dom */
  double *target;  /* per node: weighted target, domain caps applied; 0 if ineligible */
  uint32_t *quota; /* per node: floor or ceil of target, summing to T*R */
  bool *eligible;  /* per node: active or joining */
} ring__shares;

/* Whether a node in this state takes replicas. */
static inline bool ring__eligible(ring_node_state s) {
  return s == RING_NODE_ACTIVE || s == RING_NODE_JOINING;
}

/* Whether a node in this state can still stream what it holds. */
static inline bool ring__alive(ring_node_state s) {
  return s != RING_NODE_DOWN && s != RING_NODE_REMOVED;
}

/* Computes domains, targets and quotas for t's node list under the hard
 * level `fd` ("" = every node is its own domain). `load` (per node, may be
 * NULL) breaks rounding ties toward nodes that already hold more, so fewer
 * replicas move. Returns RING_OK, RING_EPLAN with err naming a broken hard
 * rule (too few domains or nodes, a node without the label), RING_ENOMEM.
 * On success the caller frees with ring__shares_free. */
int ring__shares_compute(const ring_table *t, const char *fd, const uint32_t *load, ring__shares *s,
                         ring_error *err);
void ring__shares_free(ring__shares *s);

/* Id of a node's value of label `key` among all nodes (equal values, equal
 * ids); nodes without the label get distinct ids past the labelled ones.
 * Writes n ids to out; returns the count of distinct labelled values, or
 * RING_ENOMEM. */
int ring__label_ids(const ring_table *t, const char *key, uint32_t *out);

struct ring_plan {
  ring_table *target;    /* sealed target table */
  uint64_t base_version; /* 0 without a base */
  ring_move *moves;      /* in (wave, token, slot) order */
  uint32_t n_moves;
  uint32_t n_waves;
  uint32_t lower_bound;
  uint32_t soft_violations;
  uint32_t lost;          /* moves with no live source */
  uint32_t off_tolerance; /* bytes balance: serving nodes outside the objective */
  uint64_t bytes;
  uint64_t bytes_bound;  /* bytes balance: the fewest bytes a plan ending as close moves */
  ring_plan_load *loads; /* per target node */
  ring_plan_bytes_load *byte_loads; /* per target node, bytes balance only; else NULL */
};

/* The working state of one ring_plan_compute call. */
typedef struct ring__planner {
  const ring_plan_config *cfg;
  ring_table *target; /* unsealed; owners hold the working assignment */
  uint16_t *orig;     /* T*R base owners in target indexes; NULL without a base */
  ring__shares sh;    /* domains, targets, quotas of target's nodes */
  uint32_t *soft;     /* per node best-effort domain id, or NULL */
  uint32_t *load;     /* per node token-replicas in the working assignment */
  uint32_t T, R, n;
  uint32_t lower_bound;
  uint32_t off_tolerance; /* bytes balance (plan_bytes.c) */
  uint64_t bytes_bound;   /* bytes balance (plan_bytes.c), in the sizes it weighed */
  double *byte_target;    /* bytes balance: per node, its final target (plan_bytes.c) */
} ring__planner;

/* Fills p->target's owners: from scratch when p->orig is NULL, else moving
 * as few replicas from p->orig as it can. RING_EPLAN if stuck. */
int ring__plan_assign(ring__planner *p, ring_error *err);

/* Whether node u may own slot (t, r) of p->target without breaking a hard
 * rule before, during or after the token's moves (plan_assign.c). */
bool ring__can_take(const ring__planner *p, uint16_t u, uint32_t t, uint32_t r);
/* Owners of token t's other slots that share u's best-effort value. */
uint32_t ring__soft_conflicts(const ring__planner *p, uint16_t u, uint32_t t, uint32_t r);
/* Whether base slot (t, r) must move whatever else happens: its owner gives
 * everything up, or an earlier slot's owner shares its hard domain. */
bool ring__slot_forced(const ring__planner *p, uint32_t t, uint32_t r);

/* Rebalances p->target (owners start as p->orig) by bytes held instead of
 * token-replicas (plan_bytes.c). Sets p->lower_bound. RING_EPLAN if a
 * slot is stranded or a node cannot come within the largest arc of its
 * byte target. */
int ring__plan_assign_bytes(ring__planner *p, ring_error *err);

/* Bytes balance's objective for one serving node (plan_bytes.c): within
 * tol of its target `want`, or above it holding only arcs larger than tol
 * (`small`, its bytes in arcs of at most tol, is 0). Whether it is off. */
static inline bool ring__bytes_off(double want, double tol, double held, double small) {
  if (held >= want - tol && held <= want + tol)
    return false;
  return !(held > want + tol && small <= 0);
}

/* Per node of n: bytes held (into held) and bytes in arcs of at most tol[i]
 * (into small) under `owners` (T*R, every slot owned) and per-token sizes
 * (plan_verify.c; the planner counts its result with it). */
void ring__bytes_held(const uint16_t *owners, uint32_t T, uint32_t R, uint32_t n,
                      const uint64_t *sizes, const double *tol, double *held, double *small);

/* Bytes balance's targets under `owners` (plan_verify.c): per node of
 * sh->n, its share of all bytes by weight, except that a node whose
 * largest arc passes its whole band (share + tol) is pinned at that arc's
 * bytes (it holds it and should hold nothing else) and the rest of the
 * bytes are shared by weight among the other serving nodes. Writes want,
 * tol (RING_BALANCE_TOLERANCE of want, or the largest arc when that is
 * less: never looser than the floor), held, and small (bytes in arcs of at
 * most tol). */
void ring__bytes_targets(const uint16_t *owners, uint32_t T, uint32_t R, const ring__shares *sh,
                         const uint64_t *sizes, double *want, double *tol, double *held,
                         double *small);

/* Turns the difference between orig and target into moves with sources
 * and waves. Fills plan->moves, n_moves, n_waves, lost, bytes. */
int ring__plan_waves(const ring__planner *p, ring_plan *plan);

#endif /* RING_PLAN_INT_H */
