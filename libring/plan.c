/*
 * plan.c: ring_plan_compute and the plan's accessors.
 *
 * Sections: the target node list (current nodes keep their indexes, new
 * ones are appended, finished removals are dropped); the pipeline
 * (shares -> assignment -> seal -> waves -> report); accessors.
 */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ target node list */

static int add_record(ring_table *t, const ring__node *n, ring_node_state state, ring_error *err) {
  const char *k[RING_LABELS_MAX], *v[RING_LABELS_MAX];
  ring_node_spec s = ring__node_spec(n, state, k, v);
  return ring_table_add_node(t, &s, NULL, err);
}

/* The desired nodes as a table, for validation and lookup by id. */
static int desired_table(const ring_node_spec *nodes, uint32_t n, ring_table **out,
                         ring_error *err) {
  ring_table_params p = {"desired", "", 1, 0, RING_TOKENS_MIN, 1};
  int rc = ring_table_new(&p, out, err);
  for (uint32_t i = 0; rc == RING_OK && i < n; i++) {
    ring_error inner;
    if ((rc = ring_table_add_node(*out, &nodes[i], NULL, &inner)) != RING_OK)
      ring__err(err, rc, "nodes[%u]: %s", i, inner.message);
  }
  return rc;
}

/* Adds current's nodes to target (desired record wins), then new ones.
 * map[i] receives current node i's target index, RING_NODE_NONE if dropped. */
static int build_nodes(ring_table *target, const ring_table *cur, const ring_table *want,
                       uint16_t *map, ring_error *err) {
  int rc = RING_OK;
  for (uint32_t i = 0; cur && rc == RING_OK && i < cur->n_nodes; i++) {
    const ring__node *old = &cur->nodes[i];
    int w = ring_table_find_node(want, old->id);
    const ring__node *rec = w >= 0 ? &want->nodes[w] : old;
    bool gone = w < 0 || rec->state == RING_NODE_REMOVED;
    map[i] = RING_NODE_NONE;
    if (gone && old->replicas == 0)
      continue; /* its removal is complete: drop it */
    map[i] = (uint16_t)target->n_nodes;
    rc = add_record(target, rec, gone ? RING_NODE_REMOVED : rec->state, err);
  }
  for (uint32_t i = 0; rc == RING_OK && i < want->n_nodes; i++) {
    const ring__node *n = &want->nodes[i];
    if (n->state != RING_NODE_REMOVED && (cur == NULL || ring_table_find_node(cur, n->id) < 0))
      rc = add_record(target, n, n->state, err);
  }
  return rc;
}

static int new_target(const ring_table *cur, const ring_plan_config *cfg, ring_table **out,
                      ring_error *err) {
  const char *fd = cfg->failure_domain ? cfg->failure_domain : cur ? cur->failure_domain : "";
  if (cur && cfg->tokens && cfg->tokens != cur->view.tokens)
    return ring__err(err, RING_EINVAL, "tokens: %u fixed at creation, config says %u",
                     cur->view.tokens, cfg->tokens);
  if (cur && cfg->replicas && cfg->replicas != cur->view.replicas)
    return ring__err(err, RING_EINVAL, "replicas: changing R (%u -> %u) is not supported",
                     cur->view.replicas, cfg->replicas);
  ring_table_params p = {
      cur ? cur->cluster : cfg->cluster,    fd,
      cur ? cur->version + 1 : 1,           cur ? cur->view.seed : cfg->seed,
      cur ? cur->view.tokens : cfg->tokens, cur ? cur->view.replicas : cfg->replicas};
  if (p.cluster == NULL)
    return ring__err(err, RING_EINVAL, "cluster: missing");
  return ring_table_new(&p, out, err);
}

/* ---------------------------------------------------------------- pipeline */

static void planner_free(ring__planner *p) {
  free(p->orig);
  free(p->soft);
  free(p->load);
  free(p->byte_target);
  ring__shares_free(&p->sh);
}

static int planner_init(ring__planner *p, const ring_table *cur, const uint16_t *map,
                        ring_error *err) {
  ring_table *t = p->target;
  p->T = t->view.tokens;
  p->R = t->view.replicas;
  p->n = t->n_nodes;
  const size_t S = (size_t)p->T * p->R;
  p->load = calloc(p->n ? p->n : 1, sizeof *p->load);
  if (p->load == NULL || (cur && (p->orig = malloc(S * sizeof *p->orig)) == NULL))
    return ring__err(err, RING_ENOMEM, "planner: out of memory");
  for (size_t s = 0; cur && s < S; s++) {
    p->orig[s] = map[cur->owners[s]];
    p->load[p->orig[s]]++;
  }
  int rc = ring__shares_compute(t, t->failure_domain, p->load, &p->sh, err);
  const char *be = p->cfg->best_effort;
  if (rc == RING_OK && be && *be) {
    p->soft = malloc((p->n ? p->n : 1) * sizeof *p->soft);
    if (p->soft == NULL || ring__label_ids(t, be, p->soft) < 0)
      rc = ring__err(err, RING_ENOMEM, "planner: out of memory");
  }
  return rc;
}

/* Bytes balance: each node's bytes before and after, and its target. */
static void report_bytes(const ring__planner *p, ring_plan *plan) {
  const uint64_t *size = p->cfg->balance_sizes ? p->cfg->balance_sizes : p->cfg->arc_bytes;
  const size_t S = (size_t)p->T * p->R;
  for (uint32_t i = 0; i < p->n; i++)
    plan->byte_loads[i] = (ring_plan_bytes_load){0, 0, p->byte_target[i]};
  for (size_t s = 0; s < S; s++) {
    plan->byte_loads[p->orig[s]].before += (double)size[s / p->R];
    plan->byte_loads[p->target->owners[s]].after += (double)size[s / p->R];
  }
}

static void report(const ring__planner *p, ring_plan *plan) {
  for (uint32_t i = 0; i < p->n; i++)
    plan->loads[i] = (ring_plan_load){0, p->target->nodes[i].replicas, p->sh.target[i]};
  const size_t S = (size_t)p->T * p->R;
  for (size_t s = 0; p->orig && s < S; s++)
    plan->loads[p->orig[s]].before++;
  plan->lower_bound = p->lower_bound;
  plan->off_tolerance = p->off_tolerance;
  plan->bytes_bound = p->bytes_bound;
  for (uint32_t t = 0; p->soft && t < p->T; t++) {
    const uint16_t *o = &p->target->owners[(size_t)t * p->R];
    bool clash = false;
    for (uint32_t r = 1; r < p->R && !clash; r++)
      for (uint32_t q = 0; q < r && !clash; q++)
        clash = p->soft[o[q]] == p->soft[o[r]];
    plan->soft_violations += clash;
  }
}

static int run(ring__planner *p, const ring_table *cur, const uint16_t *map, ring_plan *plan,
               ring_error *err) {
  int rc = planner_init(p, cur, map, err);
  if (rc == RING_OK)
    rc = ring__plan_assign(p, err);
  if (rc == RING_OK)
    rc = ring_table_seal(p->target, err);
  if (rc == RING_OK && (rc = ring__plan_waves(p, plan)) != RING_OK)
    ring__err(err, rc, "planner: out of memory");
  if (rc == RING_OK && (plan->loads = calloc(p->n ? p->n : 1, sizeof *plan->loads)) == NULL)
    rc = ring__err(err, RING_ENOMEM, "planner: out of memory");
  if (rc == RING_OK && p->byte_target &&
      (plan->byte_loads = calloc(p->n ? p->n : 1, sizeof *plan->byte_loads)) == NULL)
    rc = ring__err(err, RING_ENOMEM, "planner: out of memory");
  if (rc == RING_OK)
    report(p, plan);
  if (rc == RING_OK && p->byte_target)
    report_bytes(p, plan);
  return rc;
}

int ring_plan_compute(const ring_table *cur, const ring_node_spec *nodes, uint32_t n_nodes,
                      const ring_plan_config *cfg, ring_plan **out, ring_error *err) {
  if (cfg == NULL || out == NULL || (nodes == NULL && n_nodes > 0) || (cur && !cur->sealed))
    return ring__err(err, RING_EINVAL, "ring_plan_compute: bad argument");
  if (cfg->balance != RING_BALANCE_TOKENS && (cfg->balance != RING_BALANCE_BYTES || cur == NULL))
    return ring__err(err, RING_EINVAL,
                     cur ? "balance: unknown mode"
                         : "balance bytes: a first placement has no data to weigh");
  ring_table *want = NULL;
  ring__planner p = {.cfg = cfg};
  ring_plan *plan = calloc(1, sizeof *plan);
  uint16_t *map = malloc((cur && cur->n_nodes ? cur->n_nodes : 1) * sizeof *map);
  int rc = plan && map ? RING_OK : ring__err(err, RING_ENOMEM, "planner: out of memory");
  if (rc == RING_OK)
    rc = desired_table(nodes, n_nodes, &want, err);
  if (rc == RING_OK)
    rc = new_target(cur, cfg, &p.target, err);
  if (rc == RING_OK)
    rc = build_nodes(p.target, cur, want, map, err);
  if (rc == RING_OK)
    rc = run(&p, cur, map, plan, err);
  ring_table_free(want);
  free(map);
  planner_free(&p);
  if (rc != RING_OK) {
    ring_table_free(p.target);
    p.target = NULL;
    if (plan)
      plan->target = NULL;
    ring_plan_free(plan);
    return rc;
  }
  plan->target = p.target;
  plan->base_version = cur ? cur->version : 0;
  *out = plan;
  return RING_OK;
}

/* --------------------------------------------------------------- accessors */

void ring_plan_free(ring_plan *p) {
  if (p == NULL)
    return;
  ring_table_free(p->target);
  free(p->moves);
  free(p->loads);
  free(p->byte_loads);
  free(p);
}

const ring_table *ring_plan_target(const ring_plan *p) { return p ? p->target : NULL; }
uint64_t ring_plan_base_version(const ring_plan *p) { return p ? p->base_version : 0; }
uint32_t ring_plan_move_count(const ring_plan *p) { return p ? p->n_moves : 0; }
const ring_move *ring_plan_moves(const ring_plan *p) { return p ? p->moves : NULL; }
uint32_t ring_plan_wave_count(const ring_plan *p) { return p ? p->n_waves : 0; }
uint32_t ring_plan_lower_bound(const ring_plan *p) { return p ? p->lower_bound : 0; }
uint32_t ring_plan_best_effort_violations(const ring_plan *p) { return p ? p->soft_violations : 0; }
uint32_t ring_plan_bytes_off_tolerance(const ring_plan *p) { return p ? p->off_tolerance : 0; }
uint64_t ring_plan_bytes(const ring_plan *p) { return p ? p->bytes : 0; }
uint32_t ring_plan_lost_moves(const ring_plan *p) { return p ? p->lost : 0; }
uint64_t ring_plan_bytes_bound(const ring_plan *p) { return p ? p->bytes_bound : 0; }

int ring_plan_node_bytes(const ring_plan *p, uint16_t index, ring_plan_bytes_load *out) {
  if (p == NULL || out == NULL || p->byte_loads == NULL || index >= p->target->n_nodes)
    return RING_EINVAL;
  *out = p->byte_loads[index];
  return RING_OK;
}

int ring_plan_node_load(const ring_plan *p, uint16_t index, ring_plan_load *out) {
  if (p == NULL || out == NULL || index >= p->target->n_nodes)
    return RING_EINVAL;
  *out = p->loads[index];
  return RING_OK;
}
