/*
 * plan_flow.c: a plan's moves as flows between nodes (cluster.h, "plan
 * flows"): who gives how many token-replicas to whom. `ringctl render`
 * and the coordinator's status page both draw them, so the counting lives
 * here, once.
 *
 * A plan makes at most T*R moves, so sorting their (from, to) keys is
 * bounded by the plan itself; no table of n*n pairs is ever made.
 */
#include "cluster.h"

#include <stdlib.h>
#include <string.h>

static int by_key(const void *pa, const void *pb) {
  uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  return a < b ? -1 : a > b;
}

/* Most moves first; then by giver and receiver, so the order is stable
 * from one build to the next. */
static int by_count(const void *pa, const void *pb) {
  const rk_flow_pair *a = pa, *b = pb;
  if (a->count != b->count)
    return a->count > b->count ? -1 : 1;
  if (a->from != b->from)
    return a->from < b->from ? -1 : 1;
  return a->to < b->to ? -1 : a->to > b->to;
}

int rk_plan_flow(const ring_plan *p, rk_flow_pair **pairs, uint32_t *n) {
  *pairs = NULL;
  *n = 0;
  uint32_t m = ring_plan_move_count(p);
  const ring_move *mv = ring_plan_moves(p);
  if (m == 0)
    return RING_OK;
  uint32_t *keys = malloc(m * sizeof *keys);
  rk_flow_pair *out = malloc(m * sizeof *out);
  if (keys == NULL || out == NULL) {
    free(keys);
    free(out);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < m; i++)
    keys[i] = (uint32_t)mv[i].from << 16 | mv[i].to;
  qsort(keys, m, sizeof *keys, by_key);
  uint32_t k = 0;
  for (uint32_t i = 0; i < m; i++) {
    if (k > 0 && ((uint32_t)out[k - 1].from << 16 | out[k - 1].to) == keys[i]) {
      out[k - 1].count++;
      continue;
    }
    out[k++] = (rk_flow_pair){(uint16_t)(keys[i] >> 16), (uint16_t)(keys[i] & 0xffffu), 1};
  }
  free(keys);
  qsort(out, k, sizeof *out, by_count);
  *pairs = out;
  *n = k;
  return RING_OK;
}

const char *rk_node_domain(const ring_table *t, uint16_t i, const char *level) {
  if (level == NULL || level[0] == '\0' || i >= ring_table_node_count(t))
    return "";
  const char *v = ring_table_node_label(t, i, level);
  return v != NULL ? v : "";
}
