/*
 * render_input.c: what `ringctl render` draws (render.h, "what is drawn"):
 * per-node loads and flows from a plan or the live table, and the choice
 * of which nodes a bounded picture shows.
 */
#include "render.h"

#include <stdlib.h>
#include <string.h>

static int from_plan(const ring_plan *p, render_input *in) {
  for (uint32_t i = 0; i < in->n_nodes; i++) {
    ring_plan_load l = {0, 0, 0};
    if (ring_plan_node_load(p, (uint16_t)i, &l) != RING_OK)
      continue; /* cannot happen for an index of its target: drawn as 0 */
    in->nodes[i].before = l.before;
    in->nodes[i].after = l.after;
    in->nodes[i].target = l.target;
  }
  return rk_plan_flow(p, &in->pairs, &in->n_pairs);
}

static int from_table(const ring_table *t, render_input *in) {
  double *targets = calloc(in->n_nodes ? in->n_nodes : 1, sizeof *targets);
  if (targets == NULL)
    return RING_ENOMEM;
  rk_node_targets(t, targets);
  for (uint32_t i = 0; i < in->n_nodes; i++) {
    uint32_t owned = ring_table_node_replicas(t, (uint16_t)i);
    in->nodes[i].before = in->nodes[i].after = owned;
    in->nodes[i].target = targets[i];
  }
  free(targets);
  return RING_OK;
}

int render_input_from(const ring_table *t, const ring_plan *p, const char *level,
                      render_input *in) {
  memset(in, 0, sizeof *in);
  in->table = p != NULL ? ring_plan_target(p) : t;
  in->level = level != NULL ? level : "";
  in->has_plan = p != NULL;
  in->n_nodes = ring_table_node_count(in->table);
  in->nodes = calloc(in->n_nodes ? in->n_nodes : 1, sizeof *in->nodes);
  if (in->nodes == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < in->n_nodes; i++) {
    in->nodes[i].id = ring_table_node_id(in->table, (uint16_t)i);
    in->nodes[i].domain = rk_node_domain(in->table, (uint16_t)i, in->level);
  }
  int rc = p != NULL ? from_plan(p, in) : from_table(t, in);
  if (rc != RING_OK)
    render_input_free(in);
  return rc;
}

void render_input_free(render_input *in) {
  free(in->nodes);
  free(in->pairs);
  in->nodes = NULL;
  in->pairs = NULL;
  in->n_nodes = in->n_pairs = 0;
}

/* ------------------------------------------------------------ picking */

typedef struct pick {
  double score;
  uint32_t i;
  const char *domain;
} pick;

static int by_score(const void *pa, const void *pb) {
  const pick *a = pa, *b = pb;
  if (a->score != b->score)
    return a->score > b->score ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static int by_domain(const void *pa, const void *pb) {
  const pick *a = pa, *b = pb;
  int d = strcmp(a->domain, b->domain);
  return d != 0 ? d : by_score(pa, pb);
}

uint32_t render_pick(const render_node *nodes, const double *score, uint32_t n, uint32_t max,
                     uint32_t *out) {
  pick *all = malloc((n ? n : 1) * sizeof *all);
  if (all == NULL)
    return 0; /* out of memory: nothing drawn, and the picture says +n more */
  for (uint32_t i = 0; i < n; i++)
    all[i] = (pick){score[i], i, nodes[i].domain};
  qsort(all, n, sizeof *all, by_score);
  uint32_t k = n < max ? n : max;
  qsort(all, k, sizeof *all, by_domain);
  for (uint32_t i = 0; i < k; i++)
    out[i] = all[i].i;
  free(all);
  return k;
}
