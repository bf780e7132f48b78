/*
 * plan_sizes.c: how much data a plan moves (plan_eta.c: how long it takes), from
 * the arc sizes hosts report (sizes/<id>, proto/etcd.md).
 *
 * A token's size is its first owner's report (slot order): the owners'
 * copies are replicas of one arc, and an old owner still holding a copy in
 * its drop grace may hold an older one. Failing that, any host's report.
 * A token no one reports counts 0 and is left out of `known`, so a caller
 * can say the estimate is partial.
 */
#include "cluster.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rk_node_bytes(const rk_state *s, const char *id, bool *reported) {
  const rk_sizes *z = rk_state_sizes(s, id);
  uint64_t sum = 0;
  for (uint32_t k = 0; z != NULL && k < z->n; k++)
    sum += z->bytes[k];
  *reported = z != NULL;
  return sum;
}

/* Every host's reports, the first found per token: the fallback. */
static void any_reports(const rk_state *s, uint32_t T, uint64_t *b, uint8_t *got) {
  for (uint32_t i = 0; i < s->n_sizes; i++) {
    const rk_sizes *z = &s->sizes[i].z;
    for (uint32_t k = 0; k < z->n; k++)
      if (z->tokens[k] < T && !got[z->tokens[k]]) {
        b[z->tokens[k]] = z->bytes[k];
        got[z->tokens[k]] = 1;
      }
  }
}

int rk_arc_bytes(const rk_state *s, const ring_table *t, uint64_t **out, uint32_t *known) {
  *out = NULL;
  *known = 0;
  if (s->n_sizes == 0 || t == NULL)
    return RING_OK;
  uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t);
  uint64_t *b = calloc(T, sizeof *b);
  uint8_t *got = calloc(T, 1);
  if (b == NULL || got == NULL) {
    free(b);
    free(got);
    return RING_ENOMEM;
  }
  any_reports(s, T, b, got);
  for (uint32_t tok = 0; tok < T; tok++) {
    int64_t v = -1; /* the first owner's report wins over the fallback */
    for (uint32_t slot = 0; slot < R && v < 0; slot++) {
      uint16_t o = ring_table_owner(t, tok, slot);
      v = o == RING_NODE_NONE ? -1 : rk_sizes_of(rk_state_sizes(s, ring_table_node_id(t, o)), tok);
    }
    if (v >= 0)
      b[tok] = (uint64_t)v, got[tok] = 1;
    *known += got[tok];
  }
  free(got);
  *out = b;
  return RING_OK;
}

uint64_t rk_plan_bytes_in(const ring_plan *p, const uint64_t *arc_bytes, uint64_t *in) {
  const ring_move *m = ring_plan_moves(p);
  uint32_t nodes = ring_table_node_count(ring_plan_target(p));
  uint64_t total = 0;
  if (in != NULL)
    memset(in, 0, nodes * sizeof *in);
  for (uint32_t i = 0; arc_bytes != NULL && i < ring_plan_move_count(p); i++) {
    total += arc_bytes[m[i].token];
    if (in != NULL && m[i].to < nodes)
      in[m[i].to] += arc_bytes[m[i].token];
  }
  return total;
}

/* Why in cannot be weighed: into why (cap bytes). */
static void say_why(const ring_table *t, uint32_t known, char *why, size_t cap) {
  if (t == NULL)
    snprintf(why, cap, "balance bytes: no table yet; planned by tokens");
  else if (known < ring_table_tokens(t))
    snprintf(why, cap, "balance bytes: sizes known for %u of %u tokens; planned by tokens", known,
             ring_table_tokens(t));
  else
    snprintf(why, cap, "balance bytes: every arc is empty; planned by tokens");
}

int rk_input_weigh(const rk_state *s, const ring_table *t, rk_plan_input *in, char *why,
                   size_t cap) {
  why[0] = '\0';
  if (in->balance != RING_BALANCE_BYTES)
    return RING_OK;
  uint64_t *arc = NULL;
  uint32_t known = 0;
  int rc = rk_arc_bytes(s, t, &arc, &known);
  if (rc == RING_OK)
    rc = t != NULL && known == ring_table_tokens(t) ? rk_plan_input_weigh(in, arc) : RING_EINVAL;
  free(arc);
  if (rc == RING_EINVAL) { /* a plan is never weighed by guesses: tokens, and say so */
    free(in->arc_q);
    free(in->arc_w);
    in->arc_q = NULL;
    in->arc_w = NULL;
    in->balance = RING_BALANCE_TOKENS;
    say_why(t, known, why, cap);
    rc = RING_OK;
  }
  return rc;
}

cJSON *rk_plan_bytes_balance_json(const ring_plan *p) {
  const ring_table *t = ring_plan_target(p);
  ring_plan_bytes_load b;
  if (ring_plan_node_bytes(p, 0, &b) != RING_OK)
    return NULL;
  cJSON *o = cJSON_CreateObject();
  for (uint32_t i = 0; o != NULL && i < ring_table_node_count(t); i++) {
    cJSON *n = cJSON_CreateObject();
    ring_plan_node_bytes(p, (uint16_t)i, &b);
    cJSON_AddNumberToObject(n, "before", round(b.before));
    cJSON_AddNumberToObject(n, "after", round(b.after));
    cJSON_AddNumberToObject(n, "target", round(b.target));
    cJSON_AddItemToObject(o, ring_table_node_id(t, (uint16_t)i), n);
  }
  return o;
}
