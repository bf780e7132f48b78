/*
 * test_plan_property.c: property tests of the planner (ring_plan_compute)
 * on random clusters and membership changes, and named regression cases.
 *
 * Sections:
 *   1. run parameters, the PRNG, the per-thread context
 *   2. the membership model: nodes, the desired list, the changes
 *   3. independent checks: feasibility, weighted targets, preference lists
 *      wave by wave, the figures a plan reports
 *   4. one plan: compute, check, compute again (determinism)
 *   5. movement statistics
 *   6. the random cases, spread over threads
 *   7. named regression cases: Riak's known failures, refusals, and the
 *      smallest inputs found for each planner bug the random cases met
 *
 * Every case has its own seed (base seed + case index), printed on failure;
 * RING_PROPERTY_SEED=<that seed> RING_PROPERTY_CASES=1 replays it alone.
 * RING_PROPERTY_SHOW=N prints the first N failures (default 8);
 * RING_PROPERTY_DUMP=1 adds the memberships (node/zone/rack/weight/state);
 * RING_PROPERTY_TRACE=1 prints a line per plan (moves, lower bound, a hash
 * of the target) on stderr, so two builds can be diffed;
 * RING_PROPERTY_THREADS=N runs the cases on N threads (default: the online
 * CPUs, at most 8). Results do not depend on the thread count.
 *
 * Section 3 recomputes from the public API, and from docs/DESIGN.md's rules,
 * what ring_plan_verify checks from the inside: the verifier shares the
 * target arithmetic (plan_quota.c) with the planner, so a bug in it would
 * pass the verifier but not these checks.
 *
 * Checks count failures and the test asserts once at the end: a ck_assert
 * per check would dominate the run, a count shows how widespread a bug is,
 * and ck_assert may not be called from the worker threads. Conditions only
 * a broken harness can fail use NEED, which aborts.
 */
#define _POSIX_C_SOURCE 200809L

#include "ring.h"
#include "test_cluster.h"
#include "check_main.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------- 1. parameters, PRNG, per-thread context */

#ifndef PROPERTY_CASES_DEFAULT
#if defined(RING_PROPERTY_SANITIZED)
/* ASan+UBSan (with libFuzzer's coverage, as tests/run.sh builds them) run a
 * case 3 (-O1) to 7 (-O0) times slower than -O2 without them: fewer cases
 * keep the sanitized run to minutes; the unsanitized build runs them all. */
#define PROPERTY_CASES_DEFAULT 2000u
#else
#define PROPERTY_CASES_DEFAULT 10000u
#endif
#endif
#define PROPERTY_SEED_DEFAULT 0x52696e676b656570ull /* "Ringkeep" */
#define PROPERTY_THREADS_MAX 8u
#define FAILURES_SHOWN 8u
#define SEED_MASK ((1ull << 53) - 1) /* table seeds must be exact in JSON */

#define MODEL_NODES_MAX 512u /* 300 initial + 3 changes of at most 16 nodes */
#define ZONES_MAX 16u        /* 12 initial + 3 new zones */
#define RACK_STRIDE 16u      /* rack id = zone * RACK_STRIDE + rack */
#define DOMAIN_IDS_MAX (RACK_STRIDE * ZONES_MAX + MODEL_NODES_MAX)

#define NEED(cond) ((cond) ? (void)0 : need_failed(#cond, __LINE__))

static void need_failed(const char *what, int line) __attribute__((noreturn));
static void need_failed(const char *what, int line) {
  fprintf(stderr, "test_plan_property.c:%d: harness failure: %s\n", line, what);
  abort();
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0')
    return fallback;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 0);
  if (*end != '\0') {
    fprintf(stderr, "%s=%s is not a number; using %llu\n", name, v, (unsigned long long)fallback);
    return fallback;
  }
  return x;
}

/* SplitMix64: deterministic, so a failure reproduces from its seed. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }
static uint32_t rng_below(uint64_t *s, uint32_t n) { return (uint32_t)(rng_next(s) % n); }
static uint32_t rng_range(uint64_t *s, uint32_t lo, uint32_t hi) {
  return lo + rng_below(s, hi - lo + 1);
}
static bool rng_chance(uint64_t *s, uint32_t percent) { return rng_below(s, 100) < percent; }
/* 0.5 .. 4 in steps of 1/8: exact in binary, so equal sums compare equal. */
static double rng_weight(uint64_t *s) { return 0.5 + rng_below(s, 29) / 8.0; }

typedef enum change {
  CH_INITIAL,
  CH_JOIN,
  CH_DRAIN,
  CH_DOWN,
  CH_WEIGHT,
  CH_ZONE,
  CH_REPLACE,
  CH_REMOVE,
  CH_COUNT
} change;

static const char *const change_name[CH_COUNT] = {"initial", "join",     "drain",   "down",
                                                  "weight",  "new-zone", "replace", "remove"};

#define EXCESS_BUCKETS 6

/* Moves against the lower bound (lb) for one kind of change. */
typedef struct move_stats {
  uint32_t plans;
  uint32_t over;                 /* moves > 1.01 * lb */
  uint32_t over_big;             /* the same among lb >= 100 */
  uint32_t hist[EXCESS_BUCKETS]; /* moves - lb: 0, 1, 2, 3-5, 6-20, > 20 */
  double worst_ratio;            /* moves / lb, 1 when lb = 0 */
  uint32_t worst_ratio_moves, worst_ratio_lb;
  uint64_t worst_ratio_seed;
  uint32_t worst_excess, worst_excess_lb; /* moves - lb */
  uint64_t worst_excess_seed;
  uint64_t moves, lb;
} move_stats;

typedef struct mnode {
  uint32_t zone; /* label zone=z<zone> */
  uint32_t rack; /* label rack=z<zone>-r<rack> */
  uint32_t pos;  /* position inside its zone, for symmetric changes */
  double weight;
  ring_node_state state;
  bool present; /* false: left out of the desired list (removal) */
} mnode;        /* the node's id is n<index> */

typedef struct model {
  mnode node[MODEL_NODES_MAX];
  uint32_t n;         /* nodes created so far */
  uint32_t zones;     /* zones created so far */
  uint32_t racks;     /* racks per zone */
  uint32_t positions; /* symmetric: nodes per zone so far */
  bool symmetric;     /* every zone holds the same weights by position */
  bool unit_weights;  /* new nodes get weight 1 */
} model;

/* What one thread owns: its counters, its statistics, and scratch arrays
 * indexed by the nodes of the target table under check. */
typedef struct worker {
  unsigned failures;
  uint32_t plans, refused;
  move_stats stats[CH_COUNT][2]; /* [change][hard domains of equal weight] */
  model m, saved;                /* the membership, and before the change */
  uint32_t dom[MODEL_NODES_MAX], soft[MODEL_NODES_MAX];
  uint32_t before[MODEL_NODES_MAX], load[MODEL_NODES_MAX];
  uint16_t map[MODEL_NODES_MAX];
  double target[MODEL_NODES_MAX];
  double dw[DOMAIN_IDS_MAX];
  bool capped[DOMAIN_IDS_MAX];
} worker;

static worker *worker_new(void) {
  worker *w = calloc(1, sizeof *w);
  NEED(w != NULL);
  return w;
}

/* ------------------------------------------------------ 2. the model */

typedef struct case_cfg {
  uint64_t seed; /* the case's seed */
  uint32_t T, R;
  const char *fd;                          /* hard level: "zone" or "" */
  const char *be;                          /* best-effort level: "rack", "zone" or "" */
  uint32_t per_node, per_domain, per_wave; /* throttle, 0 = none */
  uint64_t *arc_bytes;                     /* T sizes, or NULL */
  const char *name;                        /* a named case's name; NULL for random cases */
} case_cfg;

static bool is_eligible(ring_node_state s) {
  return s == RING_NODE_ACTIVE || s == RING_NODE_JOINING;
}

static bool node_serves(const mnode *x) { return x->present && is_eligible(x->state); }
static bool node_present(const mnode *x) { return x->present; }

static uint32_t model_add(model *m, uint32_t zone, uint32_t rack, uint32_t pos, double weight,
                          ring_node_state state) {
  NEED(m->n < MODEL_NODES_MAX);
  m->node[m->n] = (mnode){zone, rack, pos, weight, state, true};
  return m->n++;
}

/* The desired membership, built with test_cluster.h. cluster_free it. */
static test_cluster model_cluster(const model *m) {
  test_cluster c = {0};
  for (uint32_t i = 0; i < m->n; i++) {
    const mnode *x = &m->node[i];
    if (!x->present)
      continue;
    char id[16], zone[16], rack[16];
    snprintf(id, sizeof id, "n%u", i);
    snprintf(zone, sizeof zone, "z%u", x->zone);
    snprintf(rack, sizeof rack, "z%u-r%u", x->zone, x->rack);
    cluster_add(&c, id, zone, rack, x->weight, x->state);
  }
  return c;
}

/* A uniformly chosen node for which `ok` holds, or UINT32_MAX. */
static uint32_t pick_node(const model *m, uint64_t *s, bool (*ok)(const mnode *)) {
  uint32_t count = 0;
  for (uint32_t i = 0; i < m->n; i++)
    count += ok(&m->node[i]);
  if (count == 0)
    return UINT32_MAX;
  uint32_t k = rng_below(s, count);
  for (uint32_t i = 0; i < m->n; i++)
    if (ok(&m->node[i]) && k-- == 0)
      return i;
  return UINT32_MAX;
}

/* Cluster sizes 1..300, most of them small: a plan's cost grows with n. */
static uint32_t draw_size(uint64_t *s) {
  uint32_t k = rng_below(s, 10);
  return k < 5 ? rng_range(s, 1, 30) : k < 8 ? rng_range(s, 31, 100) : rng_range(s, 101, 300);
}

/* T = 64 .. 16384; squaring a uniform favours small T (a T=16384 plan
 * costs about 256 times a T=64 one). */
static uint32_t draw_tokens(uint64_t *s) {
  double u = rng_unit(s);
  return 64u << (uint32_t)(u * u * 9);
}

/* Symmetric: `per` nodes in every zone, weights by position, so every zone
 * has the same total weight and symmetric changes keep it so. */
static void init_symmetric(model *m, uint64_t *s, uint32_t n, bool equal) {
  uint32_t per = n / m->zones ? n / m->zones : 1;
  double w[MODEL_NODES_MAX];
  for (uint32_t p = 0; p < per; p++)
    w[p] = equal ? 1.0 : rng_weight(s);
  for (uint32_t p = 0; p < per; p++)
    for (uint32_t z = 0; z < m->zones; z++)
      model_add(m, z, rng_below(s, m->racks), p, w[p], RING_NODE_ACTIVE);
  m->positions = per;
}

static void init_random(model *m, uint64_t *s, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t z = i < m->zones ? i : rng_below(s, m->zones); /* no empty zone */
    double w = m->unit_weights ? 1.0 : rng_weight(s);
    ring_node_state st = rng_chance(s, 5) ? RING_NODE_JOINING : RING_NODE_ACTIVE;
    model_add(m, z, rng_below(s, m->racks), 0, w, st);
  }
}

static void draw_throttle(uint64_t *s, case_cfg *cc) {
  cc->per_node = rng_chance(s, 50) ? 0 : rng_range(s, 1, 8);
  cc->per_domain = rng_chance(s, 50) ? 0 : rng_range(s, 1, 8);
  cc->per_wave = rng_chance(s, 50) ? 0 : rng_range(s, 1, 8);
  cc->arc_bytes = NULL;
  if (rng_chance(s, 25)) {
    cc->arc_bytes = malloc(cc->T * sizeof *cc->arc_bytes);
    NEED(cc->arc_bytes != NULL);
    for (uint32_t t = 0; t < cc->T; t++)
      cc->arc_bytes[t] = rng_next(s) >> 34;
  }
}

/* Draws a case: the cluster, T, R, the levels and the throttle. */
static void draw_case(uint64_t *s, case_cfg *cc, model *m) {
  memset(m, 0, sizeof *m);
  uint32_t n = draw_size(s);
  m->zones = rng_range(s, 1, 12);
  m->zones = m->zones < n ? m->zones : n;
  m->racks = rng_range(s, 1, 4);
  cc->fd = rng_chance(s, 80) ? "zone" : "";
  cc->be = rng_chance(s, 35) ? "rack" : (*cc->fd == '\0' && rng_chance(s, 30)) ? "zone" : "";
  m->symmetric = rng_chance(s, 45);
  m->unit_weights = m->symmetric ? *cc->fd == '\0' || rng_chance(s, 40) : rng_chance(s, 30);
  if (m->symmetric)
    init_symmetric(m, s, n, m->unit_weights);
  else
    init_random(m, s, n);
  cc->T = draw_tokens(s);
  cc->R = rng_range(s, 1, 5);
  uint32_t domains = *cc->fd ? m->zones : m->n;
  if (cc->R > domains && rng_chance(s, 75)) /* keep most cases plannable */
    cc->R = rng_range(s, 1, domains < 5 ? domains : 5);
  draw_throttle(s, cc);
}

/* ---- symmetric changes: the same change in every zone */

static change sym_join(model *m, uint64_t *s) {
  double w = m->unit_weights ? 1.0 : rng_weight(s);
  ring_node_state st = rng_chance(s, 20) ? RING_NODE_JOINING : RING_NODE_ACTIVE;
  for (uint32_t z = 0; z < m->zones; z++)
    model_add(m, z, rng_below(s, m->racks), m->positions, w, st);
  m->positions++;
  return CH_JOIN;
}

/* A position whose nodes serve (the same in every zone while symmetric). */
static uint32_t serving_position(const model *m, uint64_t *s) {
  uint32_t i = pick_node(m, s, node_serves);
  return i == UINT32_MAX ? UINT32_MAX : m->node[i].pos;
}

static change sym_drain(model *m, uint64_t *s) {
  uint32_t p = serving_position(m, s);
  for (uint32_t i = 0; i < m->n; i++)
    if (m->node[i].pos == p)
      m->node[i].state = RING_NODE_DRAINING;
  return CH_DRAIN;
}

/* With no hard level every node is its own domain: equal domains means
 * equal node weights, so all of them change together. */
static change sym_weight(model *m, uint64_t *s, const case_cfg *cc) {
  uint32_t p = serving_position(m, s);
  double w = rng_weight(s);
  for (uint32_t i = 0; i < m->n; i++)
    if (m->node[i].pos == p || *cc->fd == '\0')
      m->node[i].weight = w;
  return CH_WEIGHT;
}

/* ---- one-off changes */

static change one_join(model *m, uint64_t *s) {
  for (uint32_t k = rng_range(s, 1, 4); k > 0; k--) {
    double w = m->unit_weights ? 1.0 : rng_weight(s);
    ring_node_state st = rng_chance(s, 20) ? RING_NODE_JOINING : RING_NODE_ACTIVE;
    uint32_t z = rng_below(s, m->zones);
    model_add(m, z, rng_below(s, m->racks), 0, w, st);
  }
  return CH_JOIN;
}

/* Sets up to `most` serving nodes to state st. */
static change set_state(model *m, uint64_t *s, uint32_t most, ring_node_state st, change c) {
  for (uint32_t k = rng_range(s, 1, most); k > 0; k--) {
    uint32_t i = pick_node(m, s, node_serves);
    if (i != UINT32_MAX)
      m->node[i].state = st;
  }
  return c;
}

static change one_weight(model *m, uint64_t *s) {
  for (uint32_t k = rng_range(s, 1, 3); k > 0; k--) {
    uint32_t i = pick_node(m, s, node_serves);
    if (i == UINT32_MAX)
      break;
    double w;
    while ((w = rng_weight(s)) == m->node[i].weight)
      ;
    m->node[i].weight = w;
  }
  return CH_WEIGHT;
}

static change new_zone(model *m, uint64_t *s) {
  uint32_t z = m->zones++, per = m->n / z;
  per = per < 1 ? 1 : per > 8 ? 8 : per;
  for (uint32_t k = rng_range(s, 1, per); k > 0; k--) {
    /* one draw per statement: argument order would differ between compilers */
    uint32_t rack = rng_below(s, m->racks);
    double w = m->unit_weights ? 1.0 : rng_weight(s);
    model_add(m, z, rack, 0, w, RING_NODE_ACTIVE);
  }
  return CH_ZONE;
}

/* Replace: A drains, B joins in A's zone and rack with A's weight. */
static change replace(model *m, uint64_t *s) {
  uint32_t a = pick_node(m, s, node_serves);
  if (a == UINT32_MAX)
    return one_join(m, s);
  m->node[a].state = RING_NODE_DRAINING;
  mnode x = m->node[a];
  model_add(m, x.zone, x.rack, x.pos, x.weight, RING_NODE_ACTIVE);
  return CH_REPLACE;
}

static change remove_nodes(model *m, uint64_t *s) {
  for (uint32_t k = rng_range(s, 1, 2); k > 0; k--) {
    uint32_t i = pick_node(m, s, rng_chance(s, 80) ? node_serves : node_present);
    if (i != UINT32_MAX)
      m->node[i].present = false;
  }
  return CH_REMOVE;
}

/* Applies a random change to the model and says which. */
static change apply_change(model *m, uint64_t *s, const case_cfg *cc) {
  if (m->symmetric && rng_chance(s, 70)) {
    uint32_t k = rng_below(s, 3);
    return k == 0 ? sym_join(m, s) : k == 1 ? sym_drain(m, s) : sym_weight(m, s, cc);
  }
  m->symmetric = false;
  switch ((change)rng_range(s, CH_JOIN, CH_REMOVE)) {
  case CH_JOIN:
    return one_join(m, s);
  case CH_DRAIN:
    return set_state(m, s, 3, RING_NODE_DRAINING, CH_DRAIN);
  case CH_DOWN:
    return set_state(m, s, 2, RING_NODE_DOWN, CH_DOWN);
  case CH_WEIGHT:
    return one_weight(m, s);
  case CH_ZONE:
    return new_zone(m, s);
  case CH_REPLACE:
    return replace(m, s);
  default:
    return remove_nodes(m, s);
  }
}

/* ------------------------------------------------ 3. independent checks */

/* One plan under test and where it came from, for the failure report. */
typedef struct step {
  worker *w;
  const case_cfg *cc;
  const model *m;
  const model *prev;      /* the membership st->base was planned for, or NULL */
  const ring_table *base; /* NULL: initial placement */
  change kind;
  uint32_t index; /* 0 = initial placement, then 1..3 */
} step;

static unsigned g_failures_shown = FAILURES_SHOWN;
static bool g_dump;  /* RING_PROPERTY_DUMP=1: print the memberships of a failure */
static bool g_trace; /* RING_PROPERTY_TRACE=1: one line per plan, to diff builds */
static atomic_uint g_shown;
static pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;

static void dump_model(const char *what, const model *m) {
  fprintf(stderr, "  %s:", what);
  for (uint32_t i = 0; i < m->n; i++) {
    const mnode *x = &m->node[i];
    if (x->present)
      fprintf(stderr, " n%u/z%u/r%u/%g/%s", i, x->zone, x->rack, x->weight,
              ring_node_state_name(x->state));
  }
  fputc('\n', stderr);
}

static void failf(const step *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(const step *st, const char *fmt, ...) {
  st->w->failures++;
  if (atomic_fetch_add(&g_shown, 1) >= g_failures_shown)
    return;
  const case_cfg *c = st->cc;
  uint32_t present = 0;
  for (uint32_t i = 0; i < st->m->n; i++)
    present += st->m->node[i].present;
  pthread_mutex_lock(&g_print_lock); /* one failure's lines stay together */
  if (c->name)
    fprintf(stderr, "FAIL %s\n", c->name);
  else
    fprintf(stderr,
            "FAIL case seed %#llx (replay: RING_PROPERTY_SEED=%#llx RING_PROPERTY_CASES=1)\n",
            (unsigned long long)c->seed, (unsigned long long)c->seed);
  fprintf(stderr,
          "  step %u (%s): T=%u R=%u failure_domain=\"%s\" best_effort=\"%s\" "
          "nodes=%u zones=%u limits node/domain/wave=%u/%u/%u\n  ",
          st->index, change_name[st->kind], c->T, c->R, c->fd, c->be, present, st->m->zones,
          c->per_node, c->per_domain, c->per_wave);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (g_dump && st->prev)
    dump_model("base membership", st->prev);
  if (g_dump)
    dump_model("membership", st->m);
  pthread_mutex_unlock(&g_print_lock);
}

/* Whether any plan can meet the hard rule: R serving nodes in R distinct
 * hard domains. Counted from the model, not the library. */
static bool model_feasible(const model *m, const case_cfg *cc) {
  bool seen[ZONES_MAX] = {false};
  uint32_t nodes = 0, zones = 0;
  for (uint32_t i = 0; i < m->n; i++) {
    if (!node_serves(&m->node[i]))
      continue;
    nodes++;
    zones += !seen[m->node[i].zone];
    seen[m->node[i].zone] = true;
  }
  return nodes >= cc->R && (*cc->fd ? zones : nodes) >= cc->R;
}

/* Whether every hard domain of serving nodes has the same total weight. */
static bool equal_domains(const model *m, const case_cfg *cc) {
  double w[ZONES_MAX] = {0}, first = -1;
  for (uint32_t i = 0; i < m->n; i++) {
    const mnode *x = &m->node[i];
    if (!node_serves(x))
      continue;
    if (*cc->fd)
      w[x->zone] += x->weight;
    else if (first < 0)
      first = x->weight;
    else if (x->weight != first)
      return false;
  }
  for (uint32_t z = 0; *cc->fd && z < m->zones; z++) {
    if (w[z] != 0 && first < 0)
      first = w[z];
    else if (w[z] != 0 && w[z] != first)
      return false;
  }
  return true;
}

/* The number in a label value "z<zone>" or "z<zone>-r<rack>". */
static uint32_t label_number(const ring_table *t, uint16_t i, const char *key) {
  const char *v = ring_table_node_label(t, i, key);
  NEED(v != NULL);
  char *end = NULL;
  uint32_t zone = (uint32_t)strtoul(v + 1, &end, 10);
  return *end == '-' ? zone * RACK_STRIDE + (uint32_t)strtoul(end + 2, NULL, 10) : zone;
}

/* Domain ids of t's nodes at a level: zone or rack numbers, or with no
 * level RACK_STRIDE*ZONES_MAX + the node's index (its own domain). */
static void domains_of(const ring_table *t, const char *key, uint32_t *out) {
  NEED(ring_table_node_count(t) <= MODEL_NODES_MAX);
  for (uint32_t i = 0; i < ring_table_node_count(t); i++)
    out[i] = *key ? label_number(t, (uint16_t)i, key) : RACK_STRIDE * ZONES_MAX + i;
}

/* Water-filling: which domains are capped at T, and the token-replicas
 * (`*left`) and weight (`*wsum`) the uncapped ones share. */
static void fill_domains(worker *w, uint32_t T, uint32_t R, double *left, double *wsum) {
  memset(w->capped, 0, sizeof w->capped);
  for (bool again = true; again;) {
    again = false;
    *left = (double)T * R, *wsum = 0;
    for (uint32_t d = 0; d < DOMAIN_IDS_MAX; d++) {
      if (w->capped[d])
        *left -= T;
      else
        *wsum += w->dw[d];
    }
    for (uint32_t d = 0; d < DOMAIN_IDS_MAX; d++)
      if (!w->capped[d] && w->dw[d] > 0 && *left * w->dw[d] / *wsum > T * (1 + 1e-12))
        w->capped[d] = again = true;
  }
}

/* Weighted targets straight from docs/DESIGN.md, not from the library, into
 * w->target: each domain's share of T*R by weight, a domain capped at T
 * with its excess shared by the others by weight, nodes by weight inside
 * their domain; 0 for nodes that do not serve. Needs w->dom. */
static void expected_targets(worker *w, const ring_table *t) {
  const uint32_t n = ring_table_node_count(t), T = ring_table_tokens(t);
  memset(w->dw, 0, sizeof w->dw);
  for (uint32_t i = 0; i < n; i++)
    if (is_eligible(ring_table_node_state(t, (uint16_t)i)))
      w->dw[w->dom[i]] += ring_table_node_weight(t, (uint16_t)i);
  double left, wsum;
  fill_domains(w, T, ring_table_replicas(t), &left, &wsum);
  for (uint32_t i = 0; i < n; i++) {
    const uint16_t k = (uint16_t)i;
    const uint32_t d = w->dom[i];
    double share = w->capped[d] ? T : left * w->dw[d] / wsum;
    w->target[i] = is_eligible(ring_table_node_state(t, k))
                       ? share * ring_table_node_weight(t, k) / w->dw[d]
                       : 0;
  }
}

/* Per-token checks of a table: R distinct owners in distinct hard domains
 * (plans are refused when too few domains exist, so a target always has
 * enough). Returns the tokens whose owners repeat a best-effort value. */
static uint32_t check_preference_lists(const step *st, const ring_table *t, bool soft) {
  const uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t);
  const uint32_t *dom = st->w->dom, *be = st->w->soft;
  const uint16_t *o = ring_table_view(t)->owners;
  uint32_t soft_clashes = 0, bad = 0;
  for (uint32_t tok = 0; tok < T; tok++, o += R) {
    bool clash = false;
    for (uint32_t r = 1; r < R; r++)
      for (uint32_t q = 0; q < r; q++) {
        if ((o[q] == o[r] || dom[o[q]] == dom[o[r]]) && bad++ == 0)
          failf(st, "token %u: slots %u and %u share a %s (%s, %s)", tok, q, r,
                o[q] == o[r] ? "node" : "hard domain", ring_table_node_id(t, o[q]),
                ring_table_node_id(t, o[r]));
        clash |= soft && be[o[q]] == be[o[r]];
      }
    soft_clashes += clash;
  }
  return soft_clashes;
}

/* Loads against the independent targets: every node within one token-
 * replica of its target, nodes that do not serve own nothing, and the
 * table's and the plan's own counts agree. Needs w->before. */
static void check_loads(const step *st, const ring_plan *p) {
  worker *w = st->w;
  const ring_table *t = ring_plan_target(p);
  const uint32_t n = ring_table_node_count(t), S = ring_table_tokens(t) * ring_table_replicas(t);
  expected_targets(w, t);
  memset(w->load, 0, sizeof w->load);
  for (uint32_t s = 0; s < S; s++)
    w->load[ring_table_view(t)->owners[s]]++;
  for (uint32_t i = 0; i < n; i++) {
    const uint16_t k = (uint16_t)i;
    const char *id = ring_table_node_id(t, k);
    ring_plan_load pl;
    NEED(ring_plan_node_load(p, k, &pl) == RING_OK);
    if (fabs(w->load[i] - w->target[i]) >= 1.0 - 1e-9)
      failf(st, "node %s (%s, weight %g) owns %u, expected target %.4f", id,
            ring_node_state_name(ring_table_node_state(t, k)), ring_table_node_weight(t, k),
            w->load[i], w->target[i]);
    if (pl.after != w->load[i] || ring_table_node_replicas(t, k) != w->load[i] ||
        pl.before != w->before[i])
      failf(st, "node %s: owns %u, table says %u, plan says before %u (counted %u) after %u", id,
            w->load[i], ring_table_node_replicas(t, k), pl.before, w->before[i], pl.after);
    if (fabs(pl.target - w->target[i]) > 1e-6)
      failf(st, "node %s: plan reports target %.6f, docs/DESIGN.md's is %.6f", id, pl.target,
            w->target[i]);
  }
}

/* ---- the moves, replayed wave by wave */

typedef struct replay {
  uint16_t *work; /* T*R owners, in target indexes */
  uint32_t *seen; /* per token: 1 + the last wave that moved it */
} replay;

/* Base owners in target indexes (nodes matched by id); counts w->before. */
static bool replay_init(const step *st, const ring_plan *p, replay *rp) {
  worker *w = st->w;
  const ring_table *t = ring_plan_target(p), *b = st->base;
  const uint32_t S = ring_table_tokens(t) * ring_table_replicas(t);
  rp->work = malloc(S * sizeof *rp->work);
  rp->seen = calloc(ring_table_tokens(t), sizeof *rp->seen);
  NEED(rp->work && rp->seen && ring_table_node_count(b) <= MODEL_NODES_MAX);
  for (uint32_t i = 0; i < ring_table_node_count(b); i++) {
    int k = ring_table_find_node(t, ring_table_node_id(b, (uint16_t)i));
    w->map[i] = k >= 0 ? (uint16_t)k : RING_NODE_NONE;
    if (k < 0 && ring_table_node_replicas(b, (uint16_t)i) > 0) {
      failf(st, "node %s owned replicas in the base but is gone from the target",
            ring_table_node_id(b, (uint16_t)i));
      return false;
    }
  }
  for (uint32_t s = 0; s < S; s++)
    w->before[rp->work[s] = w->map[ring_table_view(b)->owners[s]]]++;
  return true;
}

/* Applies one wave's moves; false on the first inconsistency. */
static bool apply_wave(const step *st, replay *rp, const ring_move *m, uint32_t n, uint32_t R) {
  for (uint32_t k = 0; k < n; k++) {
    size_t s = (size_t)m[k].token * R + m[k].slot;
    if (rp->seen[m[k].token] > m[k].wave || rp->work[s] != m[k].from || m[k].from == m[k].to) {
      failf(st,
            "wave %u: move of token %u slot %u from %u to %u does not follow the base "
            "(owner %u, token last moved in wave %d)",
            m[k].wave, m[k].token, m[k].slot, m[k].from, m[k].to, rp->work[s],
            (int)rp->seen[m[k].token] - 1);
      return false;
    }
    rp->seen[m[k].token] = m[k].wave + 1;
    rp->work[s] = m[k].to;
  }
  return true;
}

static bool stays(const ring_table *t, uint16_t i) {
  ring_node_state s = ring_table_node_state(t, i);
  return s == RING_NODE_ACTIVE || s == RING_NODE_JOINING;
}

/* After a wave: the tokens it touched keep R distinct owners, and the
 * owners that stay sit in distinct hard domains. A leaving owner (draining,
 * down, removed) may share a domain with the replica that replaces another
 * slot while its own move is in flight: it takes no new data and leaves. */
static bool check_wave_end(const step *st, const ring_table *t, const replay *rp,
                           const ring_move *m, uint32_t n, uint32_t R) {
  const uint32_t *dom = st->w->dom;
  for (uint32_t k = 0; k < n; k++) {
    const uint16_t *o = &rp->work[(size_t)m[k].token * R];
    for (uint32_t r = 1; r < R; r++)
      for (uint32_t q = 0; q < r; q++)
        if (o[q] == o[r] || (stays(t, o[q]) && stays(t, o[r]) && dom[o[q]] == dom[o[r]])) {
          failf(st, "after wave %u token %u: slots %u and %u share a %s", m[k].wave, m[k].token, q,
                r, o[q] == o[r] ? "node" : "hard domain");
          return false;
        }
  }
  return true;
}

static void check_replay(const step *st, const ring_plan *p) {
  const ring_table *t = ring_plan_target(p);
  const uint32_t R = ring_table_replicas(t), n = ring_plan_move_count(p);
  const ring_move *m = ring_plan_moves(p);
  replay rp = {NULL, NULL};
  bool ok = replay_init(st, p, &rp);
  for (uint32_t i = 0, start = 0; ok && i <= n; i++) {
    if (i < n && i > start && m[i].wave == m[start].wave)
      continue; /* [start, i) is one wave */
    if (i < n && i > 0 && m[i].wave < m[i - 1].wave) {
      failf(st, "moves are not in wave order at %u", i);
      ok = false;
    }
    ok = ok && apply_wave(st, &rp, m + start, i - start, R) &&
         check_wave_end(st, t, &rp, m + start, i - start, R);
    start = i;
  }
  const uint32_t S = ring_table_tokens(t) * R;
  if (ok && memcmp(rp.work, ring_table_view(t)->owners, S * sizeof *rp.work) != 0)
    failf(st, "the moves applied to the base do not give the target");
  free(rp.work);
  free(rp.seen);
}

/* Lower bound from docs/DESIGN.md alone: replicas on nodes that stop serving
 * must move, and a serving node keeps at most ceil(target) and ends with at
 * least floor(target). The planner's own bound uses exact quotas, so it
 * can only be higher. Needs w->target and w->before. */
static uint32_t independent_lower_bound(const worker *w, const ring_table *t) {
  uint32_t forced = 0, over = 0, under = 0;
  for (uint32_t i = 0; i < ring_table_node_count(t); i++) {
    if (!is_eligible(ring_table_node_state(t, (uint16_t)i))) {
      forced += w->before[i];
      continue;
    }
    double hi = ceil(w->target[i] - 1e-9), lo = floor(w->target[i] + 1e-9);
    over += w->before[i] > hi ? w->before[i] - (uint32_t)hi : 0;
    under += w->before[i] < lo ? (uint32_t)lo - w->before[i] : 0;
  }
  return forced + over > under ? forced + over : under;
}

/* The plan's own figures: versions, best-effort count, lost moves, bytes,
 * lower bound. Runs after check_loads (needs w->target). */
static void check_figures(const step *st, const ring_plan *p, uint32_t soft_clashes) {
  const ring_table *t = ring_plan_target(p);
  uint64_t base_v = st->base ? ring_table_version(st->base) : 0, bytes = 0;
  uint32_t lost = 0;
  if (ring_plan_base_version(p) != base_v || ring_table_version(t) != base_v + 1)
    failf(st, "versions: base %llu target %llu, expected %llu and %llu",
          (unsigned long long)ring_plan_base_version(p), (unsigned long long)ring_table_version(t),
          (unsigned long long)base_v, (unsigned long long)base_v + 1);
  if (*st->cc->be && ring_plan_best_effort_violations(p) != soft_clashes)
    failf(st, "best-effort violations: plan says %u, counted %u",
          ring_plan_best_effort_violations(p), soft_clashes);
  for (uint32_t k = 0; k < ring_plan_move_count(p); k++) {
    const ring_move *m = &ring_plan_moves(p)[k];
    lost += m->source == RING_NODE_NONE;
    bytes += st->cc->arc_bytes ? st->cc->arc_bytes[m->token] : 0;
  }
  if (lost != ring_plan_lost_moves(p) || bytes != ring_plan_bytes(p))
    failf(st, "lost moves %u (counted %u), bytes %llu (counted %llu)", ring_plan_lost_moves(p),
          lost, (unsigned long long)ring_plan_bytes(p), (unsigned long long)bytes);
  uint32_t lb = st->base ? independent_lower_bound(st->w, t) : 0;
  if (ring_plan_lower_bound(p) < lb)
    failf(st, "lower bound %u is below the independent bound %u", ring_plan_lower_bound(p), lb);
}

/* ------------------------------------------- 4. one plan, checked */

/* ring_plan_verify and ring_table_verify must both find nothing. */
static bool check_verifiers(const step *st, const ring_plan *p, const ring_plan_config *cfg) {
  char *report = NULL;
  int v = ring_plan_verify(st->base, p, cfg, &report);
  if (v != 0)
    failf(st, "ring_plan_verify: %d violations:\n%s", v, report ? report : "(no report)");
  free(report);
  report = NULL;
  int t = ring_table_verify(ring_plan_target(p), NULL, &report);
  if (t != 0)
    failf(st, "ring_table_verify: %d violations:\n%s", t, report ? report : "(no report)");
  free(report);
  return v == 0 && t == 0;
}

static bool same_moves(const ring_plan *a, const ring_plan *b) {
  if (ring_plan_move_count(a) != ring_plan_move_count(b) ||
      ring_plan_wave_count(a) != ring_plan_wave_count(b) ||
      ring_plan_lower_bound(a) != ring_plan_lower_bound(b))
    return false;
  for (uint32_t k = 0; k < ring_plan_move_count(a); k++) {
    const ring_move *x = &ring_plan_moves(a)[k], *y = &ring_plan_moves(b)[k];
    if (x->token != y->token || x->slot != y->slot || x->from != y->from || x->to != y->to ||
        x->source != y->source || x->wave != y->wave)
      return false;
  }
  return true;
}

/* Same input, same plan: the moves and the encoded target are identical. */
static void check_determinism(const step *st, const ring_plan *p, const ring_node_spec *nodes,
                              uint32_t n, const ring_plan_config *cfg) {
  ring_plan *again = NULL;
  ring_error err = {0};
  if (ring_plan_compute(st->base, nodes, n, cfg, &again, &err) != RING_OK) {
    failf(st, "the same input planned twice: second call fails: %s", err.message);
    return;
  }
  char *a = NULL, *b = NULL;
  size_t la = 0, lb = 0;
  NEED(ring_table_encode(ring_plan_target(p), &a, &la) == RING_OK);
  NEED(ring_table_encode(ring_plan_target(again), &b, &lb) == RING_OK);
  if (!same_moves(p, again) || la != lb || memcmp(a, b, la) != 0)
    failf(st, "the same input planned twice gives different %s",
          same_moves(p, again) ? "target tables" : "moves");
  free(a);
  free(b);
  ring_plan_free(again);
}

/* FNV-1a of the encoded target table. */
static uint64_t target_digest(const ring_plan *p) {
  char *json = NULL;
  size_t len = 0;
  NEED(ring_table_encode(ring_plan_target(p), &json, &len) == RING_OK);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)json[i]) * 0x100000001b3ull;
  free(json);
  return h;
}

/* One line per plan: builds (compilers, sanitizers) must print the same. */
static void trace(const step *st, int rc, const ring_plan *p) {
  pthread_mutex_lock(&g_print_lock);
  fprintf(stderr, "trace %#llx step %u %s rc %d moves %u lb %u waves %u target %016llx\n",
          (unsigned long long)st->cc->seed, st->index, change_name[st->kind], rc,
          ring_plan_move_count(p), ring_plan_lower_bound(p), ring_plan_wave_count(p),
          p ? (unsigned long long)target_digest(p) : 0ull);
  pthread_mutex_unlock(&g_print_lock);
}

/* Everything checked about a computed plan. */
static void check_plan(const step *st, const ring_plan *p, const ring_plan_config *cfg) {
  worker *w = st->w;
  const ring_table *t = ring_plan_target(p);
  domains_of(t, st->cc->fd, w->dom);
  domains_of(t, st->cc->be, w->soft);
  memset(w->before, 0, sizeof w->before);
  if (!check_verifiers(st, p, cfg))
    return; /* the rest would mostly repeat what the verifier said */
  uint32_t soft_clashes = check_preference_lists(st, t, *st->cc->be != '\0');
  if (st->base)
    check_replay(st, p);
  check_loads(st, p);
  check_figures(st, p, soft_clashes);
}

enum { STEP_OK, STEP_REFUSED, STEP_FAILED };

static void record_movement(const step *st, const ring_plan *p);

/* Plans the model's membership from st->base and checks the result. A
 * refusal must match the independent feasibility count. *out receives the
 * plan on STEP_OK. */
static int run_step(const step *st, const ring_plan_config *cfg, ring_plan **out) {
  test_cluster c = model_cluster(st->m);
  const bool feasible = model_feasible(st->m, st->cc);
  const unsigned failures = st->w->failures;
  ring_plan *p = NULL;
  ring_error err = {0};
  int rc = ring_plan_compute(st->base, c.specs, c.n, cfg, &p, &err);
  st->w->plans++;
  if (g_trace)
    trace(st, rc, p);
  if (rc == RING_EPLAN && !feasible)
    st->w->refused++;
  else if (rc == RING_EPLAN)
    failf(st, "refused although R serving nodes in R domains exist: %s", err.message);
  else if (rc != RING_OK)
    failf(st, "ring_plan_compute: %s: %s", ring_strerror(rc), err.message);
  else if (!feasible)
    failf(st, "planned although fewer than R serving nodes or domains exist");
  if (rc == RING_OK) {
    check_plan(st, p, cfg);
    check_determinism(st, p, c.specs, c.n, cfg);
    if (st->base)
      record_movement(st, p);
  }
  cluster_free(&c);
  if (rc == RING_OK && st->w->failures == failures) {
    *out = p;
    return STEP_OK;
  }
  ring_plan_free(p);
  return rc == RING_EPLAN && !feasible ? STEP_REFUSED : STEP_FAILED;
}

static ring_plan_config config_of(const case_cfg *cc) {
  return (ring_plan_config){"prop",
                            cc->T,
                            cc->R,
                            cc->seed & SEED_MASK,
                            cc->fd,
                            cc->be,
                            cc->per_node,
                            cc->per_domain,
                            cc->per_wave,
                            cc->arc_bytes,
                            RING_BALANCE_TOKENS,
                            NULL};
}

/* ------------------------------------------------ 5. movement statistics */

static uint32_t excess_bucket(uint32_t e) { return e <= 2 ? e : e <= 5 ? 3 : e <= 20 ? 4 : 5; }

/* Whether the bound, moves <= 1.01 x lower bound, applies: joins,
 * drains and weight changes when hard domains weigh the same. */
static bool bound_applies(change kind, bool equal) {
  return equal && (kind == CH_JOIN || kind == CH_DRAIN || kind == CH_WEIGHT);
}

static void stats_add(move_stats *ms, uint32_t moves, uint32_t lb, uint64_t seed) {
  const bool over = (uint64_t)moves * 100 > (uint64_t)lb * 101;
  const double ratio = lb ? (double)moves / lb : 1.0;
  ms->plans++;
  ms->moves += moves;
  ms->lb += lb;
  ms->over += over;
  ms->over_big += over && lb >= 100;
  ms->hist[excess_bucket(moves - lb)]++;
  if (ratio > ms->worst_ratio)
    ms->worst_ratio = ratio, ms->worst_ratio_moves = moves, ms->worst_ratio_lb = lb,
    ms->worst_ratio_seed = seed;
  if (moves - lb > ms->worst_excess || ms->plans == 1)
    ms->worst_excess = moves - lb, ms->worst_excess_lb = lb, ms->worst_excess_seed = seed;
}

/* Measured on every plan with a base; asserted where the bound applies and
 * the lower bound is >= 100 (below that 1% is less than one move). */
static void record_movement(const step *st, const ring_plan *p) {
  const uint32_t moves = ring_plan_move_count(p), lb = ring_plan_lower_bound(p);
  if (moves < lb)
    return; /* ring_plan_verify has reported it */
  const bool eq = equal_domains(st->m, st->cc);
  stats_add(&st->w->stats[st->kind][eq], moves, lb, st->cc->seed);
  if (bound_applies(st->kind, eq) && lb >= 100 && (uint64_t)moves * 100 > (uint64_t)lb * 101)
    failf(st, "%u moves > 1.01 x lower bound %u (equal-weight domains)", moves, lb);
}

/* Folds b into a; ties go to the lower seed, so the result does not
 * depend on how cases were spread over threads. */
static void stats_merge(move_stats *a, const move_stats *b) {
  if (b->plans == 0)
    return;
  if (b->worst_ratio > a->worst_ratio ||
      (b->worst_ratio == a->worst_ratio && b->worst_ratio_seed < a->worst_ratio_seed))
    a->worst_ratio = b->worst_ratio, a->worst_ratio_moves = b->worst_ratio_moves,
    a->worst_ratio_lb = b->worst_ratio_lb, a->worst_ratio_seed = b->worst_ratio_seed;
  if (a->plans == 0 || b->worst_excess > a->worst_excess ||
      (b->worst_excess == a->worst_excess && b->worst_excess_seed < a->worst_excess_seed))
    a->worst_excess = b->worst_excess, a->worst_excess_lb = b->worst_excess_lb,
    a->worst_excess_seed = b->worst_excess_seed;
  a->plans += b->plans;
  a->over += b->over;
  a->over_big += b->over_big;
  for (uint32_t k = 0; k < EXCESS_BUCKETS; k++)
    a->hist[k] += b->hist[k];
  a->moves += b->moves;
  a->lb += b->lb;
}

static void print_stats_row(change k, bool eq, const move_stats *s) {
  char hist[64], worst[64], excess[64];
  snprintf(hist, sizeof hist, "%u/%u/%u/%u/%u/%u", s->hist[0], s->hist[1], s->hist[2], s->hist[3],
           s->hist[4], s->hist[5]);
  snprintf(worst, sizeof worst, "%.4f %u/%u (%#llx)", s->worst_ratio, s->worst_ratio_moves,
           s->worst_ratio_lb, (unsigned long long)s->worst_ratio_seed);
  snprintf(excess, sizeof excess, "+%u on lb %u (%#llx)", s->worst_excess, s->worst_excess_lb,
           (unsigned long long)s->worst_excess_seed);
  printf("%-8s %-5s %6u %8u %10u  %-26s %-35s %-34s %.5f\n", change_name[k],
         eq ? (bound_applies(k, eq) ? "yes*" : "yes") : "no", s->plans, s->over, s->over_big, hist,
         worst, excess, s->lb ? (double)s->moves / (double)s->lb : 1.0);
}

static void print_stats(const move_stats (*stats)[2]) {
  printf("movement: moves against the plan's lower bound (lb) for every plan with a base, by\n"
         "change and by whether the hard domains of serving nodes weigh the same.\n"
         "yes* = the issue's bound (moves <= 1.01 x lb) applies; asserted where lb >= 100.\n"
         "%-8s %-5s %6s %8s %10s  %-26s %-35s %-34s %s\n",
         "change", "equal", "plans", ">1.01lb", ">1.01lb&lb", "moves-lb 0/1/2/3-5/6-20/>20",
         "worst moves/lb (case seed)", "worst moves-lb (case seed)", "sum moves/sum lb");
  printf("%-8s %-5s %6s %8s %10s\n", "", "", "", "", ">=100");
  for (uint32_t k = CH_JOIN; k < CH_COUNT; k++)
    for (uint32_t eq = 0; eq < 2; eq++)
      if (stats[k][eq].plans > 0)
        print_stats_row((change)k, eq, &stats[k][eq]);
}

/* ------------------------------------------------------- 6. random cases */

/* One case: an initial placement, then 1 to 3 changes, each planned from
 * the previous target. A refused change is undone and the next one tried. */
static void run_case(worker *w, uint64_t seed) {
  uint64_t s = seed;
  case_cfg cc = {.seed = seed};
  draw_case(&s, &cc, &w->m);
  const ring_plan_config cfg = config_of(&cc);
  ring_plan *prev = NULL;
  step st = {w, &cc, &w->m, NULL, NULL, CH_INITIAL, 0};
  int r = run_step(&st, &cfg, &prev);
  for (uint32_t k = 1, changes = rng_range(&s, 1, 3); r == STEP_OK && k <= changes; k++) {
    w->saved = w->m;
    change kind = apply_change(&w->m, &s, &cc);
    st = (step){w, &cc, &w->m, &w->saved, ring_plan_target(prev), kind, k};
    ring_plan *next = NULL;
    int rk = run_step(&st, &cfg, &next);
    if (rk == STEP_OK) {
      ring_plan_free(prev);
      prev = next;
    } else if (rk == STEP_REFUSED) {
      w->m = w->saved;
    } else {
      break;
    }
  }
  ring_plan_free(prev);
  free(cc.arc_bytes);
}

typedef struct shard {
  worker *w;
  uint64_t seed, cases;
  uint32_t index, count; /* this thread runs cases index, index+count, ... */
} shard;

static void *run_shard(void *arg) {
  shard *sh = arg;
  for (uint64_t i = sh->index; i < sh->cases; i += sh->count)
    run_case(sh->w, sh->seed + i);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t thread_count(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  uint64_t n = env_u64("RING_PROPERTY_THREADS", cpus > 0 ? (uint64_t)cpus : 1);
  return n < 1 ? 1 : n > PROPERTY_THREADS_MAX ? PROPERTY_THREADS_MAX : (uint32_t)n;
}

/* Runs the shards on their threads and folds their results into *total. */
static void run_shards(shard *sh, uint32_t n, worker *total) {
  pthread_t tid[PROPERTY_THREADS_MAX];
  for (uint32_t i = 0; i < n; i++)
    ck_assert_int_eq(pthread_create(&tid[i], NULL, run_shard, &sh[i]), 0);
  for (uint32_t i = 0; i < n; i++) {
    ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
    total->failures += sh[i].w->failures;
    total->plans += sh[i].w->plans;
    total->refused += sh[i].w->refused;
    for (uint32_t k = 0; k < CH_COUNT; k++)
      for (uint32_t eq = 0; eq < 2; eq++)
        stats_merge(&total->stats[k][eq], &sh[i].w->stats[k][eq]);
    free(sh[i].w);
  }
}

START_TEST(random_cases) {
  const uint64_t seed = env_u64("RING_PROPERTY_SEED", PROPERTY_SEED_DEFAULT);
  const uint64_t cases = env_u64("RING_PROPERTY_CASES", PROPERTY_CASES_DEFAULT);
  const uint32_t threads = thread_count();
  g_failures_shown = (unsigned)env_u64("RING_PROPERTY_SHOW", FAILURES_SHOWN);
  g_dump = env_u64("RING_PROPERTY_DUMP", 0) != 0;
  g_trace = env_u64("RING_PROPERTY_TRACE", 0) != 0;
  atomic_store(&g_shown, 0);
  printf("planner property: base seed %#llx (RING_PROPERTY_SEED), %llu cases "
         "(RING_PROPERTY_CASES), %u threads\n",
         (unsigned long long)seed, (unsigned long long)cases, threads);
  fflush(stdout);
  const double t0 = now_s();
  shard sh[PROPERTY_THREADS_MAX];
  for (uint32_t i = 0; i < threads; i++)
    sh[i] = (shard){worker_new(), seed, cases, i, threads};
  worker *total = worker_new();
  run_shards(sh, threads, total);
  printf("planner property: %llu cases, %u plans, %u refused as infeasible, %u failures, "
         "%.1f s\n",
         (unsigned long long)cases, total->plans, total->refused, total->failures, now_s() - t0);
  print_stats((const move_stats(*)[2])total->stats);
  fflush(stdout);
  const unsigned failures = total->failures;
  free(total);
  ck_assert_msg(failures == 0, "%u failures (the first %u are on stderr)", failures,
                g_failures_shown);
}
END_TEST

/* --------------------------------------------- 7. named regression cases */

/* A model of n nodes of weight 1, node i in zone i % zones. */
static void model_simple(model *m, uint32_t n, uint32_t zones) {
  memset(m, 0, sizeof *m);
  m->zones = zones;
  m->racks = 1;
  for (uint32_t i = 0; i < n; i++)
    model_add(m, i % zones, 0, i / zones, 1.0, RING_NODE_ACTIVE);
}

/* Max minus min load over serving nodes. */
static uint32_t load_spread(const ring_table *t) {
  uint32_t lo = UINT32_MAX, hi = 0;
  for (uint32_t i = 0; i < ring_table_node_count(t); i++) {
    if (!is_eligible(ring_table_node_state(t, (uint16_t)i)))
      continue;
    uint32_t l = ring_table_node_replicas(t, (uint16_t)i);
    lo = l < lo ? l : lo;
    hi = l > hi ? l : hi;
  }
  return hi - lo;
}

/* A named case: its worker and the plan its next step starts from. Steps
 * record failures instead of asserting, so a failing case still frees
 * everything (the ASan build checks leaks) before named_end asserts. */
typedef struct named {
  worker *w;
  case_cfg cc;
  ring_plan *plan; /* the last successful plan, NULL before the first */
  uint32_t steps;
  bool ok;
} named;

static named named_begin(const case_cfg *cc) {
  atomic_store(&g_shown, 0);
  g_failures_shown = FAILURES_SHOWN;
  g_dump = true; /* a named case is small: show its membership */
  named nc = {worker_new(), *cc, NULL, 0, true};
  return nc;
}

/* Plans nc->w->m from the last plan (none: initial placement) with every
 * check of the random cases and prints its figures. With `even`, serving
 * nodes' loads must also be within one of each other. A failure leaves
 * nc->ok false and later steps do nothing. */
static void named_step(named *nc, change kind, const char *what, bool even) {
  if (!nc->ok)
    return;
  const ring_plan_config cfg = config_of(&nc->cc);
  const ring_table *base = nc->plan ? ring_plan_target(nc->plan) : NULL;
  step st = {nc->w, &nc->cc, &nc->w->m, NULL, base, kind, nc->steps++};
  ring_plan *p = NULL;
  if (run_step(&st, &cfg, &p) != STEP_OK) {
    printf("  %-34s FAILED (see stderr)\n", what);
    nc->ok = false;
    return;
  }
  const uint32_t spread = load_spread(ring_plan_target(p));
  printf("  %-34s moves %4u  lower bound %4u  waves %3u  load spread %u\n", what,
         ring_plan_move_count(p), ring_plan_lower_bound(p), ring_plan_wave_count(p), spread);
  if (even && spread > 1) {
    failf(&st, "loads differ by %u (more than one) among nodes of equal weight", spread);
    nc->ok = false;
  }
  ring_plan_free(nc->plan);
  nc->plan = p;
}

static void named_end(named *nc) {
  const bool ok = nc->ok;
  const unsigned failures = nc->w->failures;
  ring_plan_free(nc->plan);
  free(nc->w);
  ck_assert_msg(ok, "%s: %u failures (on stderr)", nc->cc.name, failures);
}

/* Riak's claim on 64 partitions went from 4 to 5 nodes with loads far
 * apart and left preference lists with a node twice. Here every step of
 * growing from `from` to `to` nodes of weight 1, each in its own zone,
 * keeps loads within one of each other, and no preference list repeats a
 * node or domain after any wave. */
static void grow(const char *fd, uint32_t from, uint32_t to, uint32_t per_node) {
  const case_cfg cc = {0x8a3c, 64, 3, fd, "", per_node, 0, 0, NULL, "riak grow"};
  named nc = named_begin(&cc);
  model_simple(&nc.w->m, from, from);
  char what[64];
  printf("grow %u -> %u nodes, T=64 R=3 failure_domain=\"%s\" max_moves_per_node=%u\n", from, to,
         fd, per_node);
  snprintf(what, sizeof what, "initial, %u nodes", from);
  named_step(&nc, CH_INITIAL, what, true);
  for (uint32_t n = from + 1; n <= to; n++) {
    model_add(&nc.w->m, nc.w->m.zones++, 0, 0, 1.0, RING_NODE_ACTIVE);
    snprintf(what, sizeof what, "%u -> %u nodes", n - 1, n);
    named_step(&nc, CH_JOIN, what, true);
  }
  named_end(&nc);
}

START_TEST(riak_4_to_5_no_domain) { grow("", 4, 5, 0); }
END_TEST

START_TEST(riak_4_to_5_zones) { grow("zone", 4, 5, 0); }
END_TEST

START_TEST(riak_grow_3_to_16) {
  grow("", 3, 16, 1); /* one move per node per wave: many intermediate states */
  grow("zone", 3, 16, 2);
}
END_TEST

/* Shrinking by drains and removals keeps loads within one as well. */
START_TEST(riak_shrink_16_to_3) {
  const case_cfg cc = {0x51a7, 64, 3, "zone", "", 0, 0, 0, NULL, "riak shrink"};
  named nc = named_begin(&cc);
  model_simple(&nc.w->m, 16, 16);
  char what[64];
  printf("shrink 16 -> 3 nodes, T=64 R=3 failure_domain=\"zone\"\n");
  named_step(&nc, CH_INITIAL, "initial, 16 nodes", true);
  for (uint32_t n = 16; n > 3; n--) {
    bool drain = n % 2 == 0;
    if (drain)
      nc.w->m.node[n - 1].state = RING_NODE_DRAINING;
    else
      nc.w->m.node[n - 1].present = false;
    snprintf(what, sizeof what, "%u -> %u nodes (%s)", n, n - 1, drain ? "drain" : "remove");
    named_step(&nc, drain ? CH_DRAIN : CH_REMOVE, what, true);
  }
  named_end(&nc);
}
END_TEST

/* The refusals are exactly the impossible cases, and they say why. */
START_TEST(refused_when_impossible) {
  const struct {
    uint32_t nodes, zones;
    const char *fd;
  } cases[] = {{4, 2, "zone"}, {2, 2, ""}, {3, 1, "zone"}, {0, 1, ""}};
  model *m = malloc(sizeof *m);
  ck_assert_ptr_nonnull(m);
  for (uint32_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    model_simple(m, cases[k].nodes, cases[k].zones);
    test_cluster c = model_cluster(m);
    ring_plan_config cfg = {"prop", 64, 3, 1,    cases[k].fd,         "",
                            0,      0,  0, NULL, RING_BALANCE_TOKENS, NULL};
    ring_plan *p = NULL;
    ring_error err = {0};
    int rc = ring_plan_compute(NULL, c.specs, c.n, &cfg, &p, &err);
    printf("refused (%u nodes, %u zones, failure_domain \"%s\", R=3): %s\n", cases[k].nodes,
           cases[k].zones, cases[k].fd, err.message);
    cluster_free(&c);
    ring_plan_free(p);
    ck_assert_int_eq(rc, RING_EPLAN);
    ck_assert_ptr_null(p);
    ck_assert_int_gt((int)strlen(err.message), 0);
  }
  free(m);
}
END_TEST

/* ---- the smallest inputs found for the bugs the random cases met */

/* Plans the first `initial` nodes of the model, then all of them. */
static void initial_then_all(named *nc, uint32_t initial, change kind) {
  model all = nc->w->m;
  for (uint32_t i = initial; i < nc->w->m.n; i++)
    nc->w->m.node[i].present = false;
  printf("%s, T=%u R=%u failure_domain=\"%s\"\n", nc->cc.name, nc->cc.T, nc->cc.R, nc->cc.fd);
  named_step(nc, CH_INITIAL, "initial", false);
  nc->w->m = all;
  named_step(nc, kind, change_name[kind], false);
}

/* R=2: a (z1) and b (z3) own every token; c (z2) and d (z1) join. z1 keeps
 * T, z2 and z3 get T/2: d must take from a, c from b. A planner that lets c
 * take from a too strands b's excess (nothing else may take it). */
START_TEST(join_beside_a_full_zone) {
  const case_cfg cc = {0x10, 64, 2, "zone", "", 0, 0, 0, NULL, "join_beside_a_full_zone"};
  named nc = named_begin(&cc);
  model_simple(&nc.w->m, 0, 4);
  model_add(&nc.w->m, 1, 0, 0, 1, RING_NODE_ACTIVE);
  model_add(&nc.w->m, 3, 0, 0, 1, RING_NODE_ACTIVE);
  model_add(&nc.w->m, 2, 0, 0, 1, RING_NODE_ACTIVE);
  model_add(&nc.w->m, 1, 0, 0, 1, RING_NODE_ACTIVE);
  initial_then_all(&nc, 2, CH_JOIN);
  named_end(&nc);
}
END_TEST

/* Four equal zones of two nodes (weights 2.5 and 2); one node of weight
 * 3.875 joins each zone. Zone shares do not change, so every move can stay
 * inside its zone; the plan must succeed for every T, within 1.01 x the
 * lower bound. */
START_TEST(join_one_node_per_zone) {
  const double weight[3] = {2.5, 2, 3.875};
  bool ok = true;
  for (uint32_t T = 64; T <= 2048; T *= 2) {
    const case_cfg cc = {0x20, T, 3, "zone", "", 0, 0, 0, NULL, "join_one_node_per_zone"};
    named nc = named_begin(&cc);
    model_simple(&nc.w->m, 0, 4);
    for (uint32_t i = 0; i < 12; i++)
      model_add(&nc.w->m, i % 4, 0, i / 4, weight[i / 4], RING_NODE_ACTIVE);
    initial_then_all(&nc, 8, CH_JOIN);
    ok &= nc.ok;
    nc.ok = true; /* every T runs; the verdict is asserted below */
    named_end(&nc);
  }
  ck_assert_msg(ok, "join_one_node_per_zone failed for some T (on stderr)");
}
END_TEST

/* n1..n7 in zones 1, 2, 3, 0, 1, 2, 3, weight 1; n5 and n7 leave, so z0,
 * z1 and z3 keep one node each and z2 two. z2 (2 of 5) is capped at T;
 * the others share 2T. */
START_TEST(remove_beside_a_capped_zone) {
  bool ok = true;
  for (uint32_t T = 64; T <= 1024; T *= 2) {
    const case_cfg cc = {1, T, 3, "zone", "", 0, 0, 0, NULL, "remove_beside_a_capped_zone"};
    named nc = named_begin(&cc);
    model_simple(&nc.w->m, 1, 4);
    nc.w->m.node[0].present = false; /* ids start at n1 */
    for (uint32_t i = 1; i <= 7; i++)
      model_add(&nc.w->m, i % 4, 0, 0, 1, RING_NODE_ACTIVE);
    printf("%s, T=%u R=3 failure_domain=\"zone\"\n", cc.name, T);
    named_step(&nc, CH_INITIAL, "initial", false);
    nc.w->m.node[5].present = nc.w->m.node[7].present = false;
    named_step(&nc, CH_REMOVE, "remove n5 and n7", false);
    ok &= nc.ok;
    nc.ok = true;
    named_end(&nc);
  }
  ck_assert_msg(ok, "remove_beside_a_capped_zone failed for some T (on stderr)");
}
END_TEST

/* R=1: weights 2, 2.5, 4; then the third goes to 1.5. Targets 21.33,
 * 26.67 and exactly 16: the rounding-up unit must go to a node with a
 * fractional target, never to the one whose target is whole, even though
 * it holds more today. */
START_TEST(whole_target_not_rounded_up) {
  const case_cfg cc = {0x40, 64, 1, "", "", 0, 0, 0, NULL, "whole_target_not_rounded_up"};
  named nc = named_begin(&cc);
  model_simple(&nc.w->m, 3, 1);
  nc.w->m.node[0].weight = 2, nc.w->m.node[1].weight = 2.5, nc.w->m.node[2].weight = 4;
  printf("%s, T=64 R=1\n", cc.name);
  named_step(&nc, CH_INITIAL, "initial", false);
  nc.w->m.node[2].weight = 1.5;
  named_step(&nc, CH_WEIGHT, "weight 4 -> 1.5", false);
  named_end(&nc);
}
END_TEST

static Suite *plan_property_suite(void) {
  Suite *s = suite_create("plan_property");
  TCase *rnd = tcase_create("random");
  tcase_set_timeout(rnd, 1500); /* ASan builds take minutes */
  tcase_add_test(rnd, random_cases);
  suite_add_tcase(s, rnd);
  TCase *riak = tcase_create("riak");
  tcase_set_timeout(riak, 120);
  tcase_add_test(riak, riak_4_to_5_no_domain);
  tcase_add_test(riak, riak_4_to_5_zones);
  tcase_add_test(riak, riak_grow_3_to_16);
  tcase_add_test(riak, riak_shrink_16_to_3);
  tcase_add_test(riak, refused_when_impossible);
  suite_add_tcase(s, riak);
  TCase *found = tcase_create("found");
  tcase_set_timeout(found, 120);
  tcase_add_test(found, join_beside_a_full_zone);
  tcase_add_test(found, join_one_node_per_zone);
  tcase_add_test(found, remove_beside_a_capped_zone);
  tcase_add_test(found, whole_target_not_rounded_up);
  suite_add_tcase(s, found);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(plan_property_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
