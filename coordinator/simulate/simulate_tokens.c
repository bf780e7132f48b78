/*
 * simulate_tokens.c: Ringkeeper's own scheme in `ringctl simulate`: fixed
 * tokens placed by the planner, looked up with ring_lookup.
 *
 * Sections: node specs; plans; owners; init and accessors.
 *
 * Three plans, as the coordinator would make them: the initial placement
 * of N nodes, the join of node N onto that table, and the drain of node
 * N-1 from it. Only the public API is used, as a data-plane client would.
 */
#include "simulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ node specs */

/* The nodes "node-0".."node-<N>", equal weights, no labels. */
typedef struct node_list {
  ring_node_spec *spec; /* N+1 entries */
  char (*id)[16];       /* spec[i].id points here */
  char (*addr)[24];     /* spec[i].addr points here */
} node_list;

static void node_list_free(node_list *l) {
  free(l->spec);
  free(l->id);
  free(l->addr);
}

static int node_list_init(node_list *l, uint32_t count) {
  l->spec = calloc(count, sizeof *l->spec);
  l->id = calloc(count, sizeof *l->id);
  l->addr = calloc(count, sizeof *l->addr);
  if (l->spec == NULL || l->id == NULL || l->addr == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < count; i++) {
    snprintf(l->id[i], sizeof l->id[i], "node-%u", i);
    /* Arc servers are never contacted: any distinct host:port will do. */
    snprintf(l->addr[i], sizeof l->addr[i], "127.0.0.1:%u", 10000 + i);
    l->spec[i] = (ring_node_spec){l->id[i], l->addr[i], NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
  }
  return RING_OK;
}

/* ------------------------------------------------------------------ plans */

/* The plans and, per plan's table, node index -> node number ("node-<i>"
 * -> i), so owners compare across tables whatever indexes a plan keeps. */
typedef struct tokens_state {
  ring_plan *plan[SIM_MEMBERSHIPS]; /* [SIM_LEAVE] NULL when N = 1 */
  uint32_t *number[SIM_MEMBERSHIPS];
} tokens_state;

/* Every id is "node-<i>" (node_list_init made them), so the number is
 * what follows the prefix. */
static int number_nodes(const ring_table *t, uint32_t **out) {
  const uint32_t n = ring_table_node_count(t);
  uint32_t *num = malloc((n ? n : 1) * sizeof *num);
  if (num == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < n; i++)
    num[i] = (uint32_t)strtoul(ring_table_node_id(t, (uint16_t)i) + strlen("node-"), NULL, 10);
  *out = num;
  return RING_OK;
}

/* Plans `count` nodes of l onto `current` (NULL: initial placement) and
 * numbers the target's nodes. On failure st->plan[m] stays NULL. */
static int plan_one(tokens_state *st, int m, const ring_table *current, const node_list *l,
                    uint32_t count, const ring_plan_config *cfg, ring_error *err) {
  int rc = ring_plan_compute(current, l->spec, count, cfg, &st->plan[m], err);
  if (rc != RING_OK)
    return rc;
  return number_nodes(ring_plan_target(st->plan[m]), &st->number[m]);
}

static int plan_all(tokens_state *st, uint32_t n, uint32_t tokens, ring_error *err) {
  const ring_plan_config cfg = {.cluster = "simulate", .tokens = tokens, .replicas = 1, .seed = 0};
  node_list l = {NULL, NULL, NULL};
  int rc = node_list_init(&l, n + 1);
  if (rc == RING_OK)
    rc = plan_one(st, SIM_BASE, NULL, &l, n, &cfg, err);
  const ring_table *base = rc == RING_OK ? ring_plan_target(st->plan[SIM_BASE]) : NULL;
  if (rc == RING_OK)
    rc = plan_one(st, SIM_JOIN, base, &l, n + 1, &cfg, err);
  if (rc == RING_OK && n >= 2) {
    l.spec[n - 1].state = RING_NODE_DRAINING;
    rc = plan_one(st, SIM_LEAVE, base, &l, n, &cfg, err);
  }
  node_list_free(&l);
  return rc;
}

/* ------------------------------------------------------------------ owners */

static uint32_t owner_in(const tokens_state *st, int m, const sim_key *k) {
  uint16_t idx = RING_NODE_NONE;
  /* A sealed table with R = 1 always answers one owner. */
  ring_lookup(ring_plan_target(st->plan[m]), k->s, k->len, &idx, 1);
  return st->number[m][idx];
}

static void tokens_owners(const sim_scheme *s, const sim_key *k, uint32_t out[SIM_MEMBERSHIPS]) {
  const tokens_state *st = s->state;
  out[SIM_BASE] = owner_in(st, SIM_BASE, k);
  out[SIM_JOIN] = owner_in(st, SIM_JOIN, k);
  if (st->plan[SIM_LEAVE] != NULL)
    out[SIM_LEAVE] = owner_in(st, SIM_LEAVE, k);
}

/* -------------------------------------------------- init and accessors */

static void tokens_destroy(sim_scheme *s) {
  tokens_state *st = s->state;
  for (int m = 0; st != NULL && m < SIM_MEMBERSHIPS; m++) {
    ring_plan_free(st->plan[m]);
    free(st->number[m]);
  }
  free(st);
  s->state = NULL;
}

int sim_tokens_init(sim_scheme *s, uint32_t n, uint32_t tokens, ring_error *err) {
  *s = (sim_scheme){
      .name = "fixed-tokens", .nodes = n, .owners = tokens_owners, .destroy = tokens_destroy};
  tokens_state *st = calloc(1, sizeof *st);
  if (st == NULL)
    return RING_ENOMEM;
  s->state = st;
  return plan_all(st, n, tokens, err);
}

const ring_table *sim_tokens_table(const sim_scheme *s) {
  const tokens_state *st = s->state;
  return ring_plan_target(st->plan[SIM_BASE]);
}

void sim_tokens_plan_stats(const sim_scheme *s, sim_plan_stats *out) {
  const tokens_state *st = s->state;
  const ring_plan *join = st->plan[SIM_JOIN], *leave = st->plan[SIM_LEAVE];
  *out = (sim_plan_stats){ring_plan_move_count(join), ring_plan_lower_bound(join),
                          leave ? ring_plan_move_count(leave) : 0,
                          leave ? ring_plan_lower_bound(leave) : 0};
}
