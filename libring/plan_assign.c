/*
 * plan_assign.c: who owns each token-replica in the target.
 *
 * Initial placement fills tokens one by one: each takes the R hard domains
 * with the most quota left (a choice that can never strand quota, since no
 * domain's quota exceeds the tokens left), then in each domain the node with
 * the most left, preferring best-effort values the token lacks.
 *
 * Rebalancing starts from the base owners and moves only what it must
 * (the lower bound): replicas on nodes that give everything up (draining,
 * down, removed), one of two replicas sharing a hard domain, and each
 * node's excess over its quota. Each of those moves once, to a node below
 * its quota that may hold it. A receiver may hold a slot only if it is
 * neither an owner nor in the domain of an owner of the token's other
 * slots, before or after: so the token's moves can run in any order and
 * every intermediate table keeps owners and domains distinct. When that
 * leaves a unit stranded, a two-hop move through a balanced node places it
 * at the cost of one extra move.
 */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

#define NONE RING_NODE_NONE

typedef ring__planner planner;

static uint64_t tie(uint64_t a, uint64_t b) { return ring__mix64(a * 0x9e3779b97f4a7c15ull ^ b); }

/* --------------------------------------------------------- compatibility */

/* Whether u clashes with node x: the same node, or (x staying) its domain. */
static bool clashes(const planner *p, uint16_t u, uint16_t x) {
  return x == u || (p->sh.eligible[x] && p->sh.dom[x] == p->sh.dom[u]);
}

/* Whether node u may own slot (t, r): see the file comment. `relaxed` (the
 * last resort) also lets u clash with the base owner of another slot q
 * that has already moved away, provided q's new owner does not clash with
 * r's base owner: then the waves run q's move before r's (plan_waves.c),
 * and every intermediate table still keeps the rule. */
static bool can_take_as(const planner *p, uint16_t u, uint32_t t, uint32_t r, bool relaxed) {
  const uint16_t *w = &p->target->owners[(size_t)t * p->R];
  const uint16_t *o = p->orig ? &p->orig[(size_t)t * p->R] : NULL;
  const uint32_t du = p->sh.dom[u];
  for (uint32_t q = 0; q < p->R; q++) {
    if (q == r)
      continue;
    if (w[q] != NONE && (w[q] == u || p->sh.dom[w[q]] == du))
      return false;
    if (o && clashes(p, u, o[q]) &&
        !(relaxed && w[q] != o[q] && w[q] != NONE && !clashes(p, w[q], o[r])))
      return false;
  }
  return true;
}

bool ring__can_take(const planner *p, uint16_t u, uint32_t t, uint32_t r) {
  return can_take_as(p, u, t, r, false);
}

uint32_t ring__soft_conflicts(const planner *p, uint16_t u, uint32_t t, uint32_t r) {
  if (p->soft == NULL)
    return 0;
  const uint16_t *w = &p->target->owners[(size_t)t * p->R];
  uint32_t c = 0;
  for (uint32_t q = 0; q < p->R; q++)
    c += q != r && w[q] != NONE && p->soft[w[q]] == p->soft[u];
  return c;
}

static void assign(planner *p, uint32_t t, uint32_t r, uint16_t u) {
  p->target->owners[(size_t)t * p->R + r] = u;
  p->load[u]++;
}

/* ------------------------------------------------------ initial placement */

typedef struct pick {
  uint32_t id;   /* domain or node */
  uint32_t left; /* quota left */
  uint32_t soft; /* best-effort conflicts */
  uint64_t tie;  /* deterministic scatter among equals */
} pick;

/* a better than b: fewer soft conflicts, more left, then the tie hash. */
static bool better(const pick *a, const pick *b) {
  if (a->soft != b->soft)
    return a->soft < b->soft;
  if (a->left != b->left)
    return a->left > b->left;
  return a->tie > b->tie;
}

typedef struct groups {
  uint32_t *start; /* D+1 offsets into node */
  uint32_t *node;  /* eligible nodes grouped by domain */
  uint32_t *left;  /* per domain quota left */
} groups;

static int groups_build(const planner *p, groups *g) {
  const uint32_t D = p->sh.n_dom;
  g->start = calloc(D + 2, sizeof *g->start);
  g->node = malloc((p->n ? p->n : 1) * sizeof *g->node);
  g->left = calloc(D + 1, sizeof *g->left);
  if (!g->start || !g->node || !g->left)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < p->n; i++)
    if (p->sh.eligible[i]) {
      g->start[p->sh.dom[i] + 2]++;
      g->left[p->sh.dom[i]] += p->sh.quota[i];
    }
  for (uint32_t d = 0; d < D; d++)
    g->start[d + 2] += g->start[d + 1];
  for (uint32_t i = 0; i < p->n; i++)
    if (p->sh.eligible[i])
      g->node[g->start[p->sh.dom[i] + 1]++] = i;
  return RING_OK;
}

static void groups_free(groups *g) {
  free(g->start);
  free(g->node);
  free(g->left);
}

/* The node of domain d that token t's slot r should get. */
static uint16_t pick_in_domain(planner *p, const groups *g, uint32_t d, uint32_t t, uint32_t r) {
  pick best = {NONE, 0, UINT32_MAX, 0};
  for (uint32_t j = g->start[d]; j < g->start[d + 1]; j++) {
    uint32_t i = g->node[j];
    if (p->load[i] >= p->sh.quota[i])
      continue;
    pick c = {i, p->sh.quota[i] - p->load[i], ring__soft_conflicts(p, (uint16_t)i, t, r),
              tie(t, i)};
    if (best.id == NONE || better(&c, &best))
      best = c;
  }
  return (uint16_t)best.id;
}

/* The domain with the most quota left that token t does not use yet. */
static uint32_t pick_domain(const planner *p, const groups *g, const bool *used, uint32_t t) {
  pick best = {DOMAIN_NONE, 0, 0, 0};
  for (uint32_t d = 0; d < p->sh.n_dom; d++) {
    if (used[d] || g->left[d] == 0 || g->left[d] < best.left)
      continue;
    pick c = {d, g->left[d], 0, tie(t, d + 0x10000)};
    if (best.id == DOMAIN_NONE || better(&c, &best))
      best = c;
  }
  return best.id;
}

static int place_initial(planner *p, ring_error *err) {
  groups g = {0};
  bool *used = calloc(p->sh.n_dom + 1, sizeof *used);
  int rc = used ? groups_build(p, &g) : RING_ENOMEM;
  for (uint32_t t = 0; rc == RING_OK && t < p->T; t++) {
    uint32_t chosen[RING_REPLICAS_MAX];
    for (uint32_t r = 0; r < p->R; r++) {
      uint32_t d = pick_domain(p, &g, used, t);
      uint16_t u = d == DOMAIN_NONE ? NONE : pick_in_domain(p, &g, d, t, r);
      if (u == NONE) {
        rc = ring__err(err, RING_EPLAN, "initial placement stranded token %u slot %u", t, r);
        break;
      }
      used[d] = true;
      g.left[d]--;
      chosen[r] = d;
      assign(p, t, r, u);
    }
    for (uint32_t r = 0; r < p->R && rc == RING_OK; r++)
      used[chosen[r]] = false;
  }
  groups_free(&g);
  free(used);
  return rc == RING_ENOMEM ? ring__err(err, rc, "planner: out of memory") : rc;
}

/* ------------------------------------------------------------ rebalancing */

typedef struct rebalance {
  uint32_t *free_slots; /* slots with no owner yet (t*R+r) */
  uint32_t n_free;
  uint32_t *slot_start; /* per node offsets into slots (CSR of base ownership) */
  uint32_t *slots;
  uint32_t *moved; /* slots given a new owner so far, each once */
  uint32_t n_moved;
} rebalance;

static bool unmoved(const planner *p, uint32_t s) { return p->target->owners[s] == p->orig[s]; }

bool ring__slot_forced(const planner *p, uint32_t t, uint32_t r) {
  uint16_t o = p->orig[t * p->R + r];
  if (!p->sh.eligible[o])
    return true;
  for (uint32_t q = 0; q < r; q++) {
    uint16_t x = p->orig[t * p->R + q];
    if (p->sh.eligible[x] && p->sh.dom[x] == p->sh.dom[o])
      return true;
  }
  return false;
}

/* Frees the slots that must move whatever else happens. */
static int free_forced(planner *p, rebalance *rb) {
  rb->free_slots = malloc(((size_t)p->T * p->R) * sizeof *rb->free_slots);
  rb->moved = malloc(((size_t)p->T * p->R) * sizeof *rb->moved);
  if (rb->free_slots == NULL || rb->moved == NULL)
    return RING_ENOMEM;
  for (uint32_t t = 0; t < p->T; t++)
    for (uint32_t r = 0; r < p->R; r++) {
      uint32_t s = t * p->R + r;
      uint16_t o = p->orig[s];
      if (ring__slot_forced(p, t, r)) {
        rb->free_slots[rb->n_free++] = s;
        p->target->owners[s] = NONE;
      } else {
        p->load[o]++;
      }
    }
  return RING_OK;
}

/* Per-node list of the base slots it still holds (for shedding). */
static int index_slots(const planner *p, rebalance *rb) {
  rb->slot_start = calloc(p->n + 1, sizeof *rb->slot_start);
  rb->slots = malloc(((size_t)p->T * p->R) * sizeof *rb->slots);
  if (!rb->slot_start || !rb->slots)
    return RING_ENOMEM;
  const size_t S = (size_t)p->T * p->R;
  for (size_t s = 0; s < S; s++)
    if (p->target->owners[s] != NONE)
      rb->slot_start[p->target->owners[s] + 1]++;
  for (uint32_t i = 0; i < p->n; i++)
    rb->slot_start[i + 1] += rb->slot_start[i];
  uint32_t *fill = calloc(p->n + 1, sizeof *fill);
  if (fill == NULL)
    return RING_ENOMEM;
  for (size_t s = 0; s < S; s++) {
    uint16_t o = p->target->owners[s];
    if (o != NONE)
      rb->slots[rb->slot_start[o] + fill[o]++] = (uint32_t)s;
  }
  free(fill);
  return RING_OK;
}

static uint32_t deficit(const planner *p, uint32_t i) {
  return p->sh.eligible[i] && p->load[i] < p->sh.quota[i] ? p->sh.quota[i] - p->load[i] : 0;
}

static uint32_t excess(const planner *p, uint32_t i) {
  return p->load[i] > p->sh.quota[i] ? p->load[i] - p->sh.quota[i] : 0;
}

/* Gives slot s to `to`, remembering it among the moved slots the first
 * time it leaves its base owner. */
static void move_slot(planner *p, rebalance *rb, uint32_t s, uint16_t to) {
  uint16_t from = p->target->owners[s];
  if (from == p->orig[s] || from == NONE)
    rb->moved[rb->n_moved++] = s;
  if (from != NONE)
    p->load[from]--;
  assign(p, s / p->R, s % p->R, to);
}

/* The best receiver below quota for free slot s, or NONE. */
static uint16_t receiver_for(const planner *p, uint32_t s) {
  const uint32_t t = s / p->R, r = s % p->R;
  pick best = {NONE, 0, UINT32_MAX, 0};
  for (uint32_t i = 0; i < p->n; i++) {
    uint32_t left = deficit(p, i);
    if (left == 0 || !ring__can_take(p, (uint16_t)i, t, r))
      continue;
    pick c = {i, left, ring__soft_conflicts(p, (uint16_t)i, t, r), tie(s, i)};
    if (best.id == NONE || better(&c, &best))
      best = c;
  }
  return (uint16_t)best.id;
}

/* Phase A: every free slot to a compatible node below quota. Slots no one
 * can take stay free for the repair phase. */
static void fill_free(planner *p, rebalance *rb) {
  uint32_t kept = 0;
  for (uint32_t k = 0; k < rb->n_free; k++) {
    uint32_t s = rb->free_slots[k];
    uint16_t u = receiver_for(p, s);
    if (u == NONE)
      rb->free_slots[kept++] = s;
    else
      move_slot(p, rb, s, u);
  }
  rb->n_free = kept;
}

/* An unmoved slot of node o that u may take, with the fewest best-effort
 * conflicts among the first few found; UINT32_MAX if none. The scan starts
 * at a pseudo-random point so shed tokens spread over the ring. */
static uint32_t slot_for(const planner *p, const rebalance *rb, uint32_t o, uint16_t u) {
  const uint32_t a = rb->slot_start[o], len = rb->slot_start[o + 1] - a;
  uint32_t best = UINT32_MAX, best_soft = UINT32_MAX, found = 0;
  const uint32_t start = len ? (uint32_t)(tie(o, u) % len) : 0;
  for (uint32_t k = 0; k < len && found < 16 && best_soft > 0; k++) {
    uint32_t s = rb->slots[a + (start + k) % len];
    if (!unmoved(p, s) || !ring__can_take(p, u, s / p->R, s % p->R))
      continue;
    uint32_t c = ring__soft_conflicts(p, u, s / p->R, s % p->R);
    found++;
    if (c < best_soft)
      best = s, best_soft = c;
  }
  return best;
}

typedef struct donor {
  uint32_t node;
  uint32_t excess;
  bool same_domain; /* as the receiver: always compatible but for token overlap */
  uint64_t tie;
} donor;

static int cmp_donor(const void *a, const void *b) {
  const donor *x = a, *y = b;
  if (x->excess != y->excess)
    return x->excess > y->excess ? -1 : 1;
  if (x->same_domain != y->same_domain)
    return x->same_domain ? -1 : 1;
  return (x->tie < y->tie) - (x->tie > y->tie);
}

/* Receiver u pulls its deficit from nodes above quota, the most loaded
 * first, one unit from each in turn. Returns the units it could not get. */
static uint32_t pull_for(planner *p, rebalance *rb, uint16_t u, donor *buf) {
  uint32_t k = 0;
  for (uint32_t o = 0; o < p->n; o++)
    if (excess(p, o) > 0)
      buf[k++] = (donor){o, excess(p, o), p->sh.dom[o] == p->sh.dom[u], tie(o, u)};
  qsort(buf, k, sizeof *buf, cmp_donor);
  uint32_t need = deficit(p, u);
  for (bool progress = true; need > 0 && progress;) {
    progress = false;
    for (uint32_t j = 0; j < k && need > 0; j++) {
      if (excess(p, buf[j].node) == 0)
        continue;
      uint32_t s = slot_for(p, rb, buf[j].node, u);
      if (s == UINT32_MAX)
        continue;
      move_slot(p, rb, s, u);
      need--;
      progress = true;
    }
  }
  return need;
}

typedef struct by_deficit {
  uint32_t node;
  uint32_t deficit;
} by_deficit;

static int cmp_deficit(const void *a, const void *b) {
  const by_deficit *x = a, *y = b;
  if (x->deficit != y->deficit)
    return x->deficit > y->deficit ? -1 : 1;
  return (x->node > y->node) - (x->node < y->node);
}

/* Phase B: receivers, largest deficit first, pull from nodes above quota. */
static int pull_excess(planner *p, rebalance *rb) {
  by_deficit *order = malloc((p->n ? p->n : 1) * sizeof *order);
  donor *buf = malloc((p->n ? p->n : 1) * sizeof *buf);
  if (!order || !buf) {
    free(order);
    free(buf);
    return RING_ENOMEM;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < p->n; i++)
    if (deficit(p, i) > 0)
      order[k++] = (by_deficit){i, deficit(p, i)};
  qsort(order, k, sizeof *order, cmp_deficit);
  for (uint32_t j = 0; j < k; j++)
    pull_for(p, rb, (uint16_t)order[j].node, buf);
  free(order);
  free(buf);
  return RING_OK;
}

/* Places slot s1 on u by way of another node b that takes s1 and hands u
 * a slot b itself received in this plan: that slot still moves once (from
 * its base owner to u instead of to b), so this costs no extra move. */
static bool relay(planner *p, rebalance *rb, uint32_t s1, uint16_t u) {
  const uint32_t t1 = s1 / p->R, r1 = s1 % p->R;
  for (uint32_t k = 0; k < rb->n_moved; k++) {
    uint32_t s2 = rb->moved[k];
    uint16_t b = p->target->owners[s2];
    if (b == u || b == NONE || s2 / p->R == t1 || !ring__can_take(p, u, s2 / p->R, s2 % p->R))
      continue;
    const uint16_t owner = p->target->owners[s1];
    p->target->owners[s2] = u; /* tentatively, so b's check sees it */
    bool ok = b != owner && ring__can_take(p, b, t1, r1);
    p->target->owners[s2] = b;
    if (!ok)
      continue;
    move_slot(p, rb, s2, u);
    move_slot(p, rb, s1, b);
    return true;
  }
  return false;
}

/* Places slot s1 on u by way of a node b that takes s1 and gives u one of
 * its own unmoved slots: one move more than the direct route. */
static bool two_hop(planner *p, rebalance *rb, uint32_t s1, uint16_t u) {
  const uint32_t t1 = s1 / p->R, r1 = s1 % p->R;
  const uint16_t owner = p->target->owners[s1];
  for (uint32_t b = 0; b < p->n; b++) {
    if (!p->sh.eligible[b] || b == u || b == owner || !ring__can_take(p, (uint16_t)b, t1, r1))
      continue;
    p->target->owners[s1] = (uint16_t)b; /* tentatively, so u's check sees it */
    uint32_t s2 = slot_for(p, rb, b, u);
    p->target->owners[s1] = owner;
    if (s2 == UINT32_MAX || s2 / p->R == t1)
      continue;
    move_slot(p, rb, s1, (uint16_t)b);
    move_slot(p, rb, s2, u);
    return true;
  }
  return false;
}

/* A breadth-first search for a chain of hand-overs: the start (node o, or
 * the free slot s1 with no owner) gives a slot to n1, n1 one of its slots
 * to n2, ... until a node below quota is reached. Loads in between do not
 * change. Each hand-over of a slot that had not moved yet costs one move
 * beyond the lower bound, so this runs only where nothing cheaper did. */
typedef struct chain {
  uint16_t *from; /* per node: who handed it a slot in the search */
  uint32_t *slot; /* per node: which slot */
  uint16_t *queue;
  bool *seen;
} chain;

/* Tries every slot X holds (base slots still unmoved, and slots it
 * received) against every unseen node; returns a node below quota reached,
 * or NONE after queueing the rest. */
static uint16_t expand(planner *p, const rebalance *rb, chain *c, uint16_t x, uint32_t *tail,
                       bool free_only) {
  const uint32_t a = rb->slot_start[x], len = rb->slot_start[x + 1] - a;
  /* With free_only, beyond the start only slots that moved already hand
   * over: such a chain costs no move beyond the lower bound. */
  const uint32_t from = free_only && c->from[x] != x ? len : 0;
  for (uint32_t k = from; k < len + rb->n_moved; k++) {
    uint32_t s = k < len ? rb->slots[a + k] : rb->moved[k - len];
    if (p->target->owners[s] != x)
      continue;
    for (uint32_t y = 0; y < p->n; y++) {
      if (c->seen[y] || !p->sh.eligible[y] ||
          !can_take_as(p, (uint16_t)y, s / p->R, s % p->R, true))
        continue;
      c->seen[y] = true;
      c->from[y] = x;
      c->slot[y] = s;
      if (deficit(p, y) > 0)
        return (uint16_t)y;
      c->queue[(*tail)++] = (uint16_t)y;
    }
  }
  return NONE;
}

/* Applies the chain ending at u if its slots are of distinct tokens (then
 * each hand-over's check is independent of the others). */
static bool apply_chain(planner *p, rebalance *rb, const chain *c, uint16_t u, uint16_t start) {
  uint32_t tokens[64], n = 0;
  for (uint16_t y = u; y != start && n < 64; y = c->from[y]) {
    for (uint32_t i = 0; i < n; i++)
      if (tokens[i] == c->slot[y] / p->R)
        return false;
    tokens[n++] = c->slot[y] / p->R;
  }
  for (uint16_t y = u, x; y != start; y = x) {
    x = c->from[y];
    move_slot(p, rb, c->slot[y], y);
  }
  return true;
}

static bool augment(planner *p, rebalance *rb, uint16_t o, uint32_t s1, bool free_only) {
  chain c = {malloc(p->n * sizeof *c.from), malloc(p->n * sizeof *c.slot),
             malloc(p->n * sizeof *c.queue), calloc(p->n, sizeof *c.seen)};
  bool done = false;
  if (c.from && c.slot && c.queue && c.seen) {
    uint32_t head = 0, tail = 0;
    uint16_t start = o, found = NONE;
    if (s1 != UINT32_MAX) { /* a free slot: its first taker starts the chain */
      start = NONE;
      for (uint32_t y = 0; y < p->n && found == NONE; y++)
        if (p->sh.eligible[y] && can_take_as(p, (uint16_t)y, s1 / p->R, s1 % p->R, true)) {
          c.seen[y] = true, c.from[y] = NONE, c.slot[y] = s1;
          if (deficit(p, y) > 0)
            found = (uint16_t)y;
          else
            c.queue[tail++] = (uint16_t)y;
        }
    } else {
      c.seen[o] = true;
      c.from[o] = o; /* marks the start: its base slots may hand over */
      c.queue[tail++] = o;
    }
    while (found == NONE && head < tail)
      found = expand(p, rb, &c, c.queue[head++], &tail, free_only);
    done = found != NONE && apply_chain(p, rb, &c, found, start);
  }
  free(c.from);
  free(c.slot);
  free(c.queue);
  free(c.seen);
  return done;
}

/* Places s1 on some node below quota: directly, by a relay, by a two-hop
 * move, or by a longer chain, in that order of cost. */
static bool place_stranded(planner *p, rebalance *rb, uint32_t s1) {
  for (uint32_t i = 0; i < p->n; i++)
    if (deficit(p, i) > 0 && ring__can_take(p, (uint16_t)i, s1 / p->R, s1 % p->R)) {
      move_slot(p, rb, s1, (uint16_t)i);
      return true;
    }
  for (uint32_t i = 0; i < p->n; i++)
    if (deficit(p, i) > 0 && relay(p, rb, s1, (uint16_t)i))
      return true;
  uint16_t owner = p->target->owners[s1];
  if (augment(p, rb, owner, owner == NONE ? s1 : UINT32_MAX, true))
    return true;
  for (uint32_t i = 0; i < p->n; i++)
    if (deficit(p, i) > 0 && two_hop(p, rb, s1, (uint16_t)i))
      return true;
  return augment(p, rb, owner, owner == NONE ? s1 : UINT32_MAX, false);
}

/* Phase C: what phases A and B stranded. */
static int repair(planner *p, rebalance *rb, ring_error *err) {
  for (uint32_t k = 0; k < rb->n_free; k++)
    if (!place_stranded(p, rb, rb->free_slots[k]))
      return ring__err(err, RING_EPLAN,
                       "token %u slot %u: no node can take it without breaking a hard rule",
                       rb->free_slots[k] / p->R, rb->free_slots[k] % p->R);
  for (uint32_t o = 0; o < p->n; o++) {
    const uint32_t a = rb->slot_start[o], len = rb->slot_start[o + 1] - a;
    for (uint32_t j = 0; j < len && excess(p, o) > 0; j++)
      if (unmoved(p, rb->slots[a + j]))
        place_stranded(p, rb, rb->slots[a + j]);
    if (excess(p, o) > 0)
      return ring__err(err, RING_EPLAN, "node %s keeps %u token-replicas over its quota",
                       p->target->nodes[o].id, excess(p, o));
  }
  return RING_OK;
}

static uint32_t lower_bound(const planner *p, const rebalance *rb) {
  uint32_t lb = rb->n_free;
  for (uint32_t i = 0; i < p->n; i++)
    lb += excess(p, i);
  return lb;
}

static int place_rebalance(planner *p, ring_error *err) {
  rebalance rb = {0};
  int rc = free_forced(p, &rb);
  if (rc == RING_OK)
    rc = index_slots(p, &rb);
  if (rc == RING_OK) {
    p->lower_bound = lower_bound(p, &rb);
    fill_free(p, &rb);
    rc = pull_excess(p, &rb);
  }
  if (rc == RING_OK)
    rc = repair(p, &rb, err);
  else
    ring__err(err, rc, "planner: out of memory");
  free(rb.free_slots);
  free(rb.slot_start);
  free(rb.slots);
  free(rb.moved);
  return rc;
}

int ring__plan_assign(ring__planner *p, ring_error *err) {
  memset(p->load, 0, p->n * sizeof *p->load);
  if (p->orig == NULL) {
    p->lower_bound = 0;
    return place_initial(p, err);
  }
  memcpy(p->target->owners, p->orig, (size_t)p->T * p->R * sizeof *p->orig);
  if (p->cfg->balance == RING_BALANCE_BYTES)
    return ring__plan_assign_bytes(p, err);
  return place_rebalance(p, err);
}
