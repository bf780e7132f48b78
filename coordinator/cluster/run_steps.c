/*
 * run_steps.c: which moves of a run go next (proto/plan.md, "How a run
 * advances"): the wave's moves not yet done, one per receiver in turn (each
 * receiver's in plan order), under the limits read from config at each
 * step. In turn, because a step ends when its last move does: a set filled
 * in plan order can give one receiver most of it while another idles, and
 * the step lasts as long as the busiest receiver's share.
 *
 * The limits a pending set obeys are moves_per_wave and moves_per_domain.
 * Not moves_per_node: a version may name many pending moves for one node
 * while its agent fetches at most that many at once, and each source
 * serves at most that many (agent_fetchers.c, arc_server.c). So a join's
 * versions do not grow with moves / limit, and a raised limit speeds up
 * the current set at once. The first move of a step always goes, so no
 * limit (a per-domain cap below what one move needs) stalls a run.
 */
#include "cluster.h"

#include <stdlib.h>
#include <string.h>

#define DOMAINS_MAX 256

/* What a step's set has taken so far, per limit. */
typedef struct budget {
  const rk_throttle *th;
  const ring_table *t; /* the target: node ids and domains */
  const char *level;   /* hard failure-domain label, "" for none */
  const char *dom[DOMAINS_MAX];
  uint32_t per_dom[DOMAINS_MAX];
  uint32_t n_dom, total;
} budget;

/* The counter of a node's hard domain, NULL when domains are not limited. */
static uint32_t *domain_slot(budget *b, uint16_t node) {
  const char *v =
      b->level[0] && node != RING_NODE_NONE ? ring_table_node_label(b->t, node, b->level) : NULL;
  if (v == NULL || b->th->moves_per_domain == 0)
    return NULL;
  for (uint32_t i = 0; i < b->n_dom; i++)
    if (strcmp(b->dom[i], v) == 0)
      return &b->per_dom[i];
  if (b->n_dom == DOMAINS_MAX)
    return &b->per_dom[DOMAINS_MAX - 1]; /* more domains than slots: share the last, stricter */
  b->dom[b->n_dom] = v;
  return &b->per_dom[b->n_dom++];
}

/* Takes a move, counted once in each hard domain it touches (a move
 * inside one domain is one move there), when every limit allows it or
 * when `anyway` (the step's first move). */
static bool take(budget *b, const ring_move *m, bool anyway) {
  uint32_t *df = domain_slot(b, m->from), *dt = domain_slot(b, m->to);
  if (dt == df)
    dt = NULL;
  uint32_t lim = b->th->moves_per_domain;
  if (!anyway && ((b->th->moves_per_wave && b->total >= b->th->moves_per_wave) ||
                  (df && *df >= lim) || (dt && *dt >= lim)))
    return false;
  b->total++; /* the first move is counted too: what it uses is not free for the next */
  if (df)
    (*df)++;
  if (dt)
    (*dt)++;
  return true;
}

/* Greedy in plan order: the fallback when the receivers' lists cannot be
 * made (out of memory). */
static uint32_t choose_in_order(const ring_plan *p, const uint8_t *done, budget *b, uint32_t wave,
                                uint8_t *pick) {
  const ring_move *m = ring_plan_moves(p);
  uint32_t n = 0;
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++)
    if (m[i].wave == wave && !rk_bit(done, i) && take(b, &m[i], n == 0)) {
      rk_bit_set(pick, i, true); /* the first always goes: limits never stall a run */
      n++;
    }
  return n;
}

/* The wave's moves not done, grouped by receiver in plan order: order[]
 * holds move indices, receiver r's from start[r] to start[r + 1]. */
static void group_by_receiver(const ring_plan *p, const uint8_t *done, uint32_t wave,
                              uint32_t nodes, uint32_t *start, uint32_t *order) {
  const ring_move *m = ring_plan_moves(p);
  uint32_t moves = ring_plan_move_count(p);
  for (uint32_t i = 0; i < moves; i++)
    if (m[i].wave == wave && !rk_bit(done, i))
      start[(m[i].to < nodes ? m[i].to : nodes) + 1]++;
  for (uint32_t r = 0; r <= nodes; r++)
    start[r + 1] += start[r];
  for (uint32_t i = 0; i < moves; i++)
    if (m[i].wave == wave && !rk_bit(done, i))
      order[start[m[i].to < nodes ? m[i].to : nodes]++] = i;
  for (uint32_t r = nodes + 1; r > 0; r--) /* the fill moved each start to the next's */
    start[r] = start[r - 1];
  start[0] = 0;
}

uint32_t rk_run_choose(const ring_plan *p, const uint8_t *done, const rk_throttle *th,
                       uint32_t wave, uint8_t *pick) {
  const ring_table *t = ring_plan_target(p);
  budget b = {.th = th, .t = t, .level = ring_table_failure_domain(t)};
  uint32_t nodes = ring_table_node_count(t), moves = ring_plan_move_count(p), n = 0;
  uint32_t *start = calloc(nodes + 2u, sizeof *start), *next = malloc((nodes + 1u) * sizeof *next);
  uint32_t *order = malloc((moves + 1u) * sizeof *order);
  if (start == NULL || next == NULL || order == NULL) {
    free(start), free(next), free(order);
    return choose_in_order(p, done, &b, wave, pick);
  }
  group_by_receiver(p, done, wave, nodes, start, order);
  memcpy(next, start, (nodes + 1u) * sizeof *next);
  const ring_move *m = ring_plan_moves(p);
  for (bool took = true; took;) { /* one move per receiver a round, while any fits */
    took = false;
    for (uint32_t r = 0; r <= nodes; r++)
      while (next[r] < start[r + 1]) {
        uint32_t i = order[next[r]++];
        if (take(&b, &m[i], n == 0)) { /* the first always goes: limits never stall a run */
          rk_bit_set(pick, i, true);
          n++, took = true;
          break;
        }
      }
  }
  free(start), free(next), free(order);
  return n;
}

uint32_t rk_run_next_wave(const ring_plan *p, const uint8_t *done, uint32_t wave) {
  const ring_move *m = ring_plan_moves(p);
  uint32_t best = ring_plan_wave_count(p);
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++)
    if (!rk_bit(done, i) && m[i].wave >= wave && m[i].wave < best)
      best = m[i].wave;
  return best;
}
