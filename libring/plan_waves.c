/*
 * plan_waves.c: from the base and target owners to moves: who streams each
 * moved replica, and which wave it runs in.
 *
 * Sources: the previous owner while it lives; otherwise the live replica of
 * the token that streams least so far (re-creating a dead node's replicas
 * spreads over the survivors). Waves: moves that restore redundancy (the
 * previous owner is down or removed) come first; each move goes to the
 * first wave that has room for it under the per-node (in + out),
 * per-domain and per-wave limits and holds no other move of its token, and
 * no earlier than its token's previous move.
 */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct wave_limits {
  uint32_t per_node, per_domain, per_wave; /* 0: none */
  uint32_t n;                              /* nodes = domain id bound */
  uint32_t cap;                            /* waves allocated */
  uint32_t used;                           /* waves in use */
  uint16_t *node_count;                    /* cap * n */
  uint16_t *dom_count;                     /* cap * n */
  uint32_t *total;                         /* cap */
} wave_limits;

static uint16_t pick_source(const ring__planner *p, uint32_t s, uint32_t *streams) {
  const ring_table *t = p->target;
  uint16_t from = p->orig[s];
  if (ring__alive(t->nodes[from].state))
    return from;
  const uint32_t base = s - s % p->R;
  uint16_t best = RING_NODE_NONE;
  for (uint32_t q = 0; q < p->R; q++) {
    uint16_t o = p->orig[base + q];
    if (base + q == s || !ring__alive(t->nodes[o].state))
      continue;
    if (best == RING_NODE_NONE || streams[o] < streams[best])
      best = o;
  }
  return best;
}

/* (wave, token, slot) order. Before waves are placed, `wave` holds the
 * order key: 2 * rank + (0 for moves that restore redundancy, 1 for the
 * rest), rank being how many of the token's other moves must run first. */
static int cmp_wave(const void *a, const void *b) {
  const ring_move *x = a, *y = b;
  if (x->wave != y->wave)
    return x->wave < y->wave ? -1 : 1;
  if (x->token != y->token)
    return x->token < y->token ? -1 : 1;
  return (x->slot > y->slot) - (x->slot < y->slot);
}

static int grow(wave_limits *w) {
  uint32_t cap = w->cap ? w->cap * 2 : 16;
  uint16_t *nc = realloc(w->node_count, (size_t)cap * w->n * sizeof *nc);
  if (nc)
    w->node_count = nc;
  uint16_t *dc = realloc(w->dom_count, (size_t)cap * w->n * sizeof *dc);
  if (dc)
    w->dom_count = dc;
  uint32_t *tt = realloc(w->total, cap * sizeof *tt);
  if (tt)
    w->total = tt;
  if (!nc || !dc || !tt)
    return RING_ENOMEM;
  memset(nc + (size_t)w->cap * w->n, 0, (size_t)(cap - w->cap) * w->n * sizeof *nc);
  memset(dc + (size_t)w->cap * w->n, 0, (size_t)(cap - w->cap) * w->n * sizeof *dc);
  memset(tt + w->cap, 0, (cap - w->cap) * sizeof *tt);
  w->cap = cap;
  return RING_OK;
}

/* The nodes and domains a move occupies: `to` and its source. */
static uint32_t parties(const ring__planner *p, const ring_move *m, uint16_t nodes[2],
                        uint32_t doms[2], uint32_t *n_doms) {
  uint32_t k = 0;
  nodes[k++] = m->to;
  if (m->source != RING_NODE_NONE)
    nodes[k++] = m->source;
  *n_doms = 0;
  for (uint32_t i = 0; i < k; i++) {
    uint32_t d = p->sh.dom[nodes[i]];
    if (*n_doms == 0 || doms[0] != d)
      doms[(*n_doms)++] = d;
  }
  return k;
}

static bool fits(const wave_limits *w, uint32_t wave, const uint16_t *nodes, uint32_t k,
                 const uint32_t *doms, uint32_t n_doms) {
  if (w->per_wave && w->total[wave] >= w->per_wave)
    return false;
  for (uint32_t i = 0; w->per_node && i < k; i++)
    if (w->node_count[(size_t)wave * w->n + nodes[i]] >= w->per_node)
      return false;
  for (uint32_t i = 0; w->per_domain && i < n_doms; i++)
    if (w->dom_count[(size_t)wave * w->n + doms[i]] >= w->per_domain)
      return false;
  return true;
}

static int place_in_wave(const ring__planner *p, wave_limits *w, ring_move *m,
                         uint32_t *token_next) {
  uint16_t nodes[2];
  uint32_t doms[2], n_doms;
  uint32_t k = parties(p, m, nodes, doms, &n_doms);
  uint32_t wave = token_next[m->token];
  for (;; wave++) {
    if (wave >= w->cap && grow(w) != RING_OK)
      return RING_ENOMEM;
    if (fits(w, wave, nodes, k, doms, n_doms))
      break;
  }
  for (uint32_t i = 0; i < k; i++)
    w->node_count[(size_t)wave * w->n + nodes[i]]++;
  for (uint32_t i = 0; i < n_doms; i++)
    w->dom_count[(size_t)wave * w->n + doms[i]]++;
  w->total[wave]++;
  m->wave = wave;
  token_next[m->token] = wave + 1;
  if (wave + 1 > w->used)
    w->used = wave + 1;
  return RING_OK;
}

/* Whether move a must wait for move b of the same token: a's new owner
 * clashes with b's base owner (the same node, or a staying node's domain). */
static bool waits_for(const ring__planner *p, const ring_move *a, const ring_move *b) {
  const ring__node *ob = &p->target->nodes[b->from];
  return a->to == b->from || (ring__eligible(ob->state) && p->sh.dom[a->to] == p->sh.dom[b->from]);
}

/* Ranks the moves of each token (contiguous in m) so dependencies run
 * first; R rounds settle any acyclic order. */
static void rank_moves(const ring__planner *p, ring_move *m, uint32_t n) {
  for (uint32_t i = 0, j; i < n; i = j) {
    for (j = i; j < n && m[j].token == m[i].token;)
      j++;
    uint32_t rank[RING_REPLICAS_MAX] = {0};
    for (uint32_t round = 0; round < p->R && j - i > 1; round++)
      for (uint32_t a = i; a < j; a++)
        for (uint32_t b = i; b < j; b++)
          if (a != b && waits_for(p, &m[a], &m[b]) && rank[a - i] <= rank[b - i])
            rank[a - i] = rank[b - i] + 1 < RING_REPLICAS_MAX ? rank[b - i] + 1 : rank[a - i];
    for (uint32_t a = i; a < j; a++)
      m[a].wave += 2 * rank[a - i];
  }
}

static int collect_moves(const ring__planner *p, ring_plan *plan) {
  const size_t S = (size_t)p->T * p->R;
  uint32_t n = 0;
  for (size_t s = 0; s < S; s++)
    n += p->target->owners[s] != p->orig[s];
  uint32_t *streams = calloc(p->n ? p->n : 1, sizeof *streams);
  plan->moves = calloc(n ? n : 1, sizeof *plan->moves); /* padding zeroed: plans compare bytewise */
  if (!streams || !plan->moves) {
    free(streams);
    return RING_ENOMEM;
  }
  for (size_t s = 0; s < S; s++) {
    if (p->target->owners[s] == p->orig[s])
      continue;
    ring_move *m = &plan->moves[plan->n_moves++];
    /* Field by field: assigning a compound literal may copy unspecified padding. */
    m->token = (uint32_t)(s / p->R);
    m->slot = (uint32_t)(s % p->R);
    m->from = p->orig[s];
    m->to = p->target->owners[s];
    m->source = pick_source(p, (uint32_t)s, streams);
    m->wave = ring__alive(p->target->nodes[p->orig[s]].state) ? 1u : 0u;
    if (m->source == RING_NODE_NONE)
      plan->lost++;
    else
      streams[m->source]++;
    if (p->cfg->arc_bytes)
      plan->bytes += p->cfg->arc_bytes[m->token];
  }
  free(streams);
  rank_moves(p, plan->moves, plan->n_moves);
  return RING_OK;
}

int ring__plan_waves(const ring__planner *p, ring_plan *plan) {
  plan->n_moves = plan->n_waves = plan->lost = 0;
  plan->bytes = 0;
  if (p->orig == NULL)
    return (plan->moves = malloc(sizeof *plan->moves)) ? RING_OK : RING_ENOMEM;
  int rc = collect_moves(p, plan);
  uint32_t *token_next = calloc(p->T, sizeof *token_next);
  wave_limits w = {p->cfg->max_moves_per_node,
                   p->cfg->max_moves_per_domain,
                   p->cfg->max_moves_per_wave,
                   p->n ? p->n : 1,
                   0,
                   0,
                   NULL,
                   NULL,
                   NULL};
  if (rc == RING_OK && token_next == NULL)
    rc = RING_ENOMEM;
  if (rc == RING_OK)
    qsort(plan->moves, plan->n_moves, sizeof *plan->moves, cmp_wave);
  for (uint32_t i = 0; rc == RING_OK && i < plan->n_moves; i++)
    rc = place_in_wave(p, &w, &plan->moves[i], token_next);
  if (rc == RING_OK) {
    qsort(plan->moves, plan->n_moves, sizeof *plan->moves, cmp_wave);
    plan->n_waves = w.used;
  }
  free(token_next);
  free(w.node_count);
  free(w.dom_count);
  free(w.total);
  return rc;
}
