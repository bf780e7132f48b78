/*
 * simulate.c: `ringctl simulate`'s run: the schemes over the key set, the
 * bounded-load runs on the fixed-token table (plain, then sticky with
 * hysteresis), and weighted rendezvous.
 *
 * Sections: tallies; sim_measure; building the schemes; sim_run.
 */
#include "simulate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

/* ----------------------------------------------------------------- tallies */

/* One scheme's counts while the keys stream past. */
typedef struct tally {
  uint64_t moved_join, moved_leave;
  uint64_t *per_node; /* keys per node with N nodes */
} tally;

static void tally_key(tally *t, const sim_scheme *s, const sim_key *k) {
  uint32_t o[SIM_MEMBERSHIPS] = {0, 0, 0};
  s->owners(s, k, o);
  t->moved_join += o[SIM_JOIN] != o[SIM_BASE];
  t->moved_leave += s->nodes >= 2 && o[SIM_LEAVE] != o[SIM_BASE];
  t->per_node[o[SIM_BASE]]++;
}

static sim_result tally_result(const tally *t, const sim_scheme *s, uint64_t keys) {
  uint64_t max = 0, min = UINT64_MAX;
  for (uint32_t i = 0; i < s->nodes; i++) {
    max = t->per_node[i] > max ? t->per_node[i] : max;
    min = t->per_node[i] < min ? t->per_node[i] : min;
  }
  const double k = (double)keys, mean = k / s->nodes;
  return (sim_result){s->name,
                      s->vnodes,
                      (double)t->moved_join / k,
                      s->nodes >= 2 ? (double)t->moved_leave / k : NAN,
                      (double)max / mean,
                      (double)min / mean};
}

/* ------------------------------------------------------------ sim_measure */

/* Keys are made one at a time and run through every scheme, so memory does
 * not grow with K (up to 10^8 keys). */
int sim_measure(const sim_scheme *schemes, size_t n, uint64_t keys, sim_result *out) {
  tally *t = calloc(n ? n : 1, sizeof *t);
  int rc = t == NULL ? RING_ENOMEM : RING_OK;
  for (size_t i = 0; rc == RING_OK && i < n; i++)
    if ((t[i].per_node = calloc(schemes[i].nodes, sizeof *t[i].per_node)) == NULL)
      rc = RING_ENOMEM;
  for (uint64_t key = 0; rc == RING_OK && key < keys; key++) {
    char buf[32];
    int len = snprintf(buf, sizeof buf, "session-%" PRIu64, key);
    const sim_key k = {buf, (size_t)len, XXH3_64bits(buf, (size_t)len)};
    for (size_t i = 0; i < n; i++)
      tally_key(&t[i], &schemes[i], &k);
  }
  for (size_t i = 0; rc == RING_OK && i < n; i++)
    out[i] = tally_result(&t[i], &schemes[i], keys);
  for (size_t i = 0; t != NULL && i < n; i++)
    free(t[i].per_node);
  free(t);
  return rc;
}

/* ------------------------------------------------- building the schemes */

/* Virtual nodes per node on the rings compared (the seeds' 1, 10, 100, 500). */
static const uint32_t ring_vnodes[] = {1, 10, 100, 500};
#define N_RINGS (sizeof ring_vnodes / sizeof ring_vnodes[0])

/* Fills s[0..SIM_SYSTEMS_MAX) in report order, fixed tokens last. On
 * failure some are initialised: sim_scheme_destroy all of them. */
static int build_schemes(const sim_params *p, sim_scheme *s, ring_error *err) {
  size_t i = 0;
  int rc = sim_modulo_init(&s[i++], p->nodes);
  for (size_t v = 0; rc == RING_OK && v < N_RINGS; v++)
    rc = sim_ring_init(&s[i++], p->nodes, ring_vnodes[v]);
  if (rc == RING_OK)
    rc = sim_rendezvous_init(&s[i++], p->nodes);
  if (rc == RING_OK)
    rc = sim_jump_init(&s[i++], p->nodes);
  if (rc == RING_OK)
    rc = sim_maglev_init(&s[i++], p->nodes);
  if (rc == RING_OK)
    rc = sim_tokens_init(&s[i++], p->nodes, p->tokens, err);
  return rc;
}

/* ------------------------------------------------------------------ sim_run */

/* The caps the bounded runs use; 0 is the uncapped baseline. The sticky
 * runs repeat the capped ones with hysteresis and the sticky map. */
static const double caps[SIM_CAPS_MAX] = {0, 1.05, 1.25};
static const double sticky_caps[SIM_STICKY_MAX] = {1.05, 1.25};

static int run_bounded(const ring_table *t, sim_report *r) {
  r->stream = sim_stream_for(r->p.nodes);
  for (size_t i = 0; i < SIM_CAPS_MAX; i++) {
    const ring_bounded_opts o = {caps[i], 0, 0, 0};
    int rc = sim_bounded_run(t, &r->stream, r->p.keys, &o, &r->bounded[i]);
    if (rc != RING_OK)
      return rc;
  }
  r->n_bounded = SIM_CAPS_MAX;
  for (size_t i = 0; i < SIM_STICKY_MAX; i++) {
    const ring_bounded_opts o = sim_sticky_opts(&r->stream, sticky_caps[i]);
    int rc = sim_bounded_run(t, &r->stream, r->p.keys, &o, &r->sticky[i]);
    if (rc != RING_OK)
      return rc;
  }
  r->n_sticky = SIM_STICKY_MAX;
  return RING_OK;
}

static int run_hrw(sim_report *r, ring_error *err) {
  const sim_hrw_case *c = sim_hrw_cases();
  for (size_t i = 0; i < SIM_HRW_CASES; i++) {
    int rc = sim_hrw_run(&c[i], r->p.keys, &r->hrw[i], err);
    if (rc != RING_OK)
      return rc;
  }
  r->n_hrw = SIM_HRW_CASES;
  return RING_OK;
}

int sim_run(const sim_params *p, sim_report *r, ring_error *err) {
  sim_scheme s[SIM_SYSTEMS_MAX] = {{0}};
  *r = (sim_report){.p = *p,
                    .ideal_join = 1.0 / (p->nodes + 1.0),
                    .ideal_leave = p->nodes >= 2 ? 1.0 / p->nodes : NAN};
  int rc = build_schemes(p, s, err);
  if (rc == RING_OK)
    rc = sim_measure(s, SIM_SYSTEMS_MAX, p->keys, r->systems);
  if (rc == RING_OK) {
    r->n_systems = SIM_SYSTEMS_MAX;
    const sim_scheme *tokens = &s[SIM_SYSTEMS_MAX - 1];
    sim_tokens_plan_stats(tokens, &r->plans);
    rc = run_bounded(sim_tokens_table(tokens), r);
  }
  if (rc == RING_OK)
    rc = run_hrw(r, err);
  for (size_t i = 0; i < SIM_SYSTEMS_MAX; i++)
    sim_scheme_destroy(&s[i]);
  return rc;
}
