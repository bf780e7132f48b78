/*
 * plan_bytes.c: rebalancing by bytes held (ring_plan_config.balance =
 * RING_BALANCE_BYTES).
 *
 * A node's byte target is its weighted share of all bytes held (the same
 * water-filled shares as token balance, scaled from T token-replicas per
 * replica set to the bytes of one replica of every token). The rule is
 * that every serving node ends within L of its target, L being the largest
 * arc: no finer rule can hold for every input, as a node holds whole arcs.
 *
 * Like token balance, every slot moves at most once, and only slots that
 * must: (A) the forced ones (owner leaving, or a hard-domain clash), each
 * to the serving node that fits it with the most room; (B) from each node
 * above target + L, its largest arcs first until it is under, which is the
 * fewest it can shed; (C) into each node still below target - L, the
 * largest arc a donor can spare without dropping below its own target - L.
 * Receivers obey the same rule as token balance (ring__can_take), so the
 * waves keep owners and hard domains distinct at every step.
 *
 * The lower bound reported is the largest of three counts every plan
 * meeting the rule must reach: forced slots plus, per node above target +
 * L, the fewest of its own arcs that bring it there (the moves out); per
 * node below target - L, the fewest arcs of all that bring it there (the
 * moves in); and per capped domain, the tokens with no replica left there
 * (each needs a move in, but for those its nodes' slack can leave out). It is a bound, not always
 * reachable: the greedy meets it exactly in about two plans of three and the property tests
 * (tests/planner/test_plan_bytes.c) print how far it is over otherwise.
 */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

#define NONE RING_NODE_NONE
#define SIZE_MAX_ARC (1ull << 48)
#define ROUNDS_MAX 8

typedef struct bal {
  ring__planner *p;
  const uint64_t *size; /* per token */
  double *want;         /* per node: byte target, 0 if not serving */
  double *held;         /* per node: bytes in the working assignment */
  double limit;         /* L: the largest arc */
  uint32_t *start;      /* per node offsets into slots (CSR of kept base slots) */
  uint32_t *slots;      /* each node's kept base slots, largest arc first */
  uint32_t *forced;     /* slots that must move, largest arc first */
  uint32_t n_forced;
  struct keyed *order; /* scratch: serving nodes by surplus */
  struct keyed *cand;  /* scratch: one node's received slots */
  uint32_t *moved;     /* slots that have left their base owner, each once */
  bool *listed;        /* per slot: in moved */
  uint32_t n_moved;
  uint32_t *recv; /* per node: slots it holds that left their base owner */
  bool *capped;   /* per hard domain: its share is one replica of every token */
} bal;

static uint64_t tie(uint64_t a, uint64_t b) { return ring__mix64(a * 0x9e3779b97f4a7c15ull ^ b); }

static uint64_t slot_size(const bal *b, uint32_t s) { return b->size[s / b->p->R]; }

static bool moved(const bal *b, uint32_t s) { return b->p->target->owners[s] != b->p->orig[s]; }

/* ------------------------------------------------------------------ setup */

/* A sort entry: the largest key first, then the smaller id, so every sort
 * is total and plans are deterministic. qsort has no context argument and
 * the planner may run on many threads, hence keys copied next to ids. */
typedef struct keyed {
  double key;
  uint32_t id;
} keyed;

static int cmp_keyed(const void *x, const void *y) {
  const keyed *a = x, *c = y;
  if (a->key != c->key)
    return a->key > c->key ? -1 : 1;
  return (a->id > c->id) - (a->id < c->id);
}

/* Sorts n slots in place, the largest arc first; scratch holds n entries. */
static void sort_slots(const bal *b, uint32_t *slots, uint32_t n, keyed *scratch) {
  for (uint32_t k = 0; k < n; k++)
    scratch[k] = (keyed){(double)slot_size(b, slots[k]), slots[k]};
  qsort(scratch, n, sizeof *scratch, cmp_keyed);
  for (uint32_t k = 0; k < n; k++)
    slots[k] = scratch[k].id;
}

static int check_sizes(const bal *b, uint64_t *one_replica, ring_error *err) {
  uint64_t sum = 0, top = 0;
  for (uint32_t t = 0; t < b->p->T; t++) {
    if (b->size[t] >= SIZE_MAX_ARC)
      return ring__err(err, RING_EINVAL, "balance bytes: token %u's size %llu is 2^48 or more", t,
                       (unsigned long long)b->size[t]);
    sum += b->size[t];
    top = b->size[t] > top ? b->size[t] : top;
  }
  *one_replica = sum;
  return top ? RING_OK : ring__err(err, RING_EINVAL, "balance bytes: every arc is empty");
}

/* Frees the forced slots and indexes the kept ones per owner. */
static int split_slots(bal *b) {
  ring__planner *p = b->p;
  const uint32_t S = p->T * p->R;
  b->start = calloc(p->n + 1, sizeof *b->start);
  b->slots = malloc(S * sizeof *b->slots);
  b->forced = malloc(S * sizeof *b->forced);
  if (!b->start || !b->slots || !b->forced)
    return RING_ENOMEM;
  for (uint32_t s = 0; s < S; s++) {
    if (ring__slot_forced(p, s / p->R, s % p->R)) {
      b->forced[b->n_forced++] = s;
      p->target->owners[s] = NONE;
      continue;
    }
    b->start[p->orig[s] + 1]++;
    b->held[p->orig[s]] += (double)slot_size(b, s);
    p->load[p->orig[s]]++;
  }
  for (uint32_t i = 0; i < p->n; i++)
    b->start[i + 1] += b->start[i];
  uint32_t *fill = calloc(p->n + 1, sizeof *fill);
  if (fill == NULL)
    return RING_ENOMEM;
  for (uint32_t s = 0; s < S; s++)
    if (p->target->owners[s] != NONE)
      b->slots[b->start[p->orig[s]] + fill[p->orig[s]]++] = s;
  free(fill);
  keyed *scratch = malloc(S * sizeof *scratch);
  if (scratch == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < p->n; i++)
    sort_slots(b, b->slots + b->start[i], b->start[i + 1] - b->start[i], scratch);
  sort_slots(b, b->forced, b->n_forced, scratch);
  free(scratch);
  return RING_OK;
}

static int bal_init(bal *b, ring__planner *p, ring_error *err) {
  b->p = p;
  b->size = p->cfg->balance_sizes ? p->cfg->balance_sizes : p->cfg->arc_bytes;
  if (b->size == NULL)
    return ring__err(err, RING_EINVAL, "balance bytes: no arc sizes given");
  uint64_t one = 0;
  int rc = check_sizes(b, &one, err);
  if (rc != RING_OK)
    return rc;
  b->want = calloc(p->n + 1, sizeof *b->want);
  b->held = calloc(p->n + 1, sizeof *b->held);
  b->order = malloc((p->n + 1) * sizeof *b->order);
  b->recv = calloc(p->n + 1, sizeof *b->recv);
  b->cand = malloc((size_t)p->T * p->R * sizeof *b->cand);
  b->moved = malloc((size_t)p->T * p->R * sizeof *b->moved);
  b->listed = calloc((size_t)p->T * p->R, sizeof *b->listed);
  if (!b->want || !b->held || !b->order || !b->recv || !b->cand || !b->moved || !b->listed ||
      split_slots(b) != RING_OK)
    return ring__err(err, RING_ENOMEM, "planner: out of memory");
  for (uint32_t t = 0; t < p->T; t++)
    b->limit = (double)b->size[t] > b->limit ? (double)b->size[t] : b->limit;
  double *dom_want = calloc(p->sh.n_dom + 1, sizeof *dom_want);
  b->capped = calloc(p->sh.n_dom + 1, sizeof *b->capped);
  if (dom_want == NULL || b->capped == NULL) {
    free(dom_want);
    return ring__err(err, RING_ENOMEM, "planner: out of memory");
  }
  for (uint32_t i = 0; i < p->n; i++) {
    b->want[i] = p->sh.target[i] * (double)one / p->T;
    if (p->sh.eligible[i])
      dom_want[p->sh.dom[i]] += p->sh.target[i];
  }
  for (uint32_t d = 0; d < p->sh.n_dom; d++)
    b->capped[d] = dom_want[d] >= p->T * (1 - 1e-9);
  free(dom_want);
  return RING_OK;
}

static void bal_free(bal *b) {
  free(b->want);
  free(b->held);
  free(b->order);
  free(b->recv);
  free(b->cand);
  free(b->moved);
  free(b->listed);
  free(b->capped);
  free(b->start);
  free(b->slots);
  free(b->forced);
}

/* ------------------------------------------------------------------ bound */

static int cmp_u64_desc(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return (a < c) - (a > c);
}

/* The fewest of `sizes` (largest first, prefix sums in pre) that reach
 * `need` bytes. */
static uint32_t fewest(const double *pre, uint32_t n, double need) {
  uint32_t lo = 0, hi = n; /* smallest k with pre[k] >= need */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (pre[mid] >= need)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* Moves out: forced + each node's fewest own arcs to shed. */
static uint32_t bound_out(const bal *b) {
  uint32_t lb = b->n_forced;
  for (uint32_t i = 0; i < b->p->n; i++) {
    double over = b->held[i] - (b->want[i] + b->limit);
    for (uint32_t k = b->start[i]; k < b->start[i + 1] && over > 0; k++, lb++)
      over -= (double)slot_size(b, b->slots[k]);
  }
  return lb;
}

/* Moves in: per node below its target - L, the fewest arcs of all. */
static int bound_in(const bal *b, uint32_t *out) {
  const uint32_t T = b->p->T;
  uint64_t *sorted = malloc(T * sizeof *sorted);
  double *pre = malloc((T + 1) * sizeof *pre);
  if (sorted == NULL || pre == NULL) {
    free(sorted);
    free(pre);
    return RING_ENOMEM;
  }
  memcpy(sorted, b->size, T * sizeof *sorted);
  qsort(sorted, T, sizeof *sorted, cmp_u64_desc);
  pre[0] = 0;
  for (uint32_t k = 0; k < T; k++)
    pre[k + 1] = pre[k] + (double)sorted[k];
  uint32_t lb = 0;
  for (uint32_t i = 0; i < b->p->n; i++)
    if (b->p->sh.eligible[i] && b->held[i] < b->want[i] - b->limit)
      lb += fewest(pre, T + 1, b->want[i] - b->limit - b->held[i]);
  free(sorted);
  free(pre);
  *out = lb;
  return RING_OK;
}

static int cmp_u64_asc(const void *x, const void *y) { return -cmp_u64_desc(x, y); }

/* The tokens with no kept replica in domain d, as sizes, into out. */
static uint32_t missing_in(const bal *b, uint32_t d, uint64_t *out) {
  const ring__planner *p = b->p;
  uint32_t m = 0;
  for (uint32_t t = 0; t < p->T; t++) {
    bool has = false;
    for (uint32_t r = 0; r < p->R && !has; r++) {
      uint16_t o = p->target->owners[t * p->R + r]; /* NONE: forced, freed */
      has = o != NONE && p->sh.dom[o] == d;
    }
    if (!has)
      out[m++] = b->size[t];
  }
  return m;
}

/* Moves into capped domains. A capped domain ends with a replica of every
 * token but for what its nodes' slack (L each, below their targets) can
 * leave out: each token missing there needs a move in, except the most of
 * them (the smallest first) whose bytes fit that slack. Moves into
 * different domains are different moves. */
static int bound_capped(const bal *b, uint32_t *out) {
  const ring__planner *p = b->p;
  uint64_t *miss = malloc(p->T * sizeof *miss);
  uint32_t *nodes = calloc(p->sh.n_dom + 1, sizeof *nodes);
  if (miss == NULL || nodes == NULL) {
    free(miss);
    free(nodes);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < p->n; i++)
    nodes[p->sh.dom[i] < p->sh.n_dom ? p->sh.dom[i] : p->sh.n_dom] += p->sh.eligible[i];
  uint32_t lb = 0;
  for (uint32_t d = 0; d < p->sh.n_dom; d++) {
    if (!b->capped[d])
      continue;
    uint32_t m = missing_in(b, d, miss), k = 0;
    qsort(miss, m, sizeof *miss, cmp_u64_asc);
    for (double slack = nodes[d] * b->limit; k < m && (double)miss[k] <= slack; k++)
      slack -= (double)miss[k];
    lb += m - k;
  }
  free(miss);
  free(nodes);
  *out = lb;
  return RING_OK;
}

/* ----------------------------------------------------------------- moves */

/* Gives slot s to `to`, remembering it among the moved slots the first
 * time it leaves its base owner. */
static void give(bal *b, uint32_t s, uint16_t to) {
  ring__planner *p = b->p;
  uint16_t from = p->target->owners[s];
  double sz = (double)slot_size(b, s);
  if (!b->listed[s]) {
    b->listed[s] = true;
    b->moved[b->n_moved++] = s;
  }
  if (from != NONE) {
    b->held[from] -= sz;
    b->recv[from] -= moved(b, s);
    p->load[from]--;
  }
  b->recv[to] += to != p->orig[s];
  p->target->owners[s] = to;
  b->held[to] += sz;
  p->load[to]++;
}

/* Whether moving s to u keeps a capped domain whole. A capped domain (one
 * whose share is a replica of every token) must keep one of each: a slot
 * that leaves it for another domain cannot be replaced, as no token may
 * return to a domain it has just left (ring__can_take). */
static bool keeps_domains(const bal *b, uint16_t u, uint32_t s) {
  uint16_t home = b->p->target->owners[s] != NONE ? b->p->target->owners[s] : b->p->orig[s];
  uint32_t d = b->p->sh.dom[home];
  return d >= b->p->sh.n_dom || !b->capped[d] || b->p->sh.dom[u] == d;
}

/* Whether u may take slot s and still end within its target + L. */
static bool fits(const bal *b, uint16_t u, uint32_t s) {
  return b->p->sh.eligible[u] && b->held[u] + (double)slot_size(b, s) <= b->want[u] + b->limit &&
         keeps_domains(b, u, s) && ring__can_take(b->p, u, s / b->p->R, s % b->p->R);
}

/* The node to take slot s: it fits (when must_fit; else it keeps capped
 * domains whole when `whole`), then the fewest best-effort clashes, then
 * the most room. NONE if none may. */
static uint16_t receiver(const bal *b, uint32_t s, bool must_fit, bool whole) {
  const ring__planner *p = b->p;
  const uint32_t t = s / p->R, r = s % p->R;
  uint16_t best = NONE;
  uint32_t best_soft = 0;
  double best_room = 0;
  for (uint32_t i = 0; i < p->n; i++) {
    const uint16_t u = (uint16_t)i;
    if (!p->sh.eligible[i] || (must_fit ? !fits(b, u, s) : !ring__can_take(p, u, t, r)) ||
        (whole && !keeps_domains(b, u, s)))
      continue;
    uint32_t soft = ring__soft_conflicts(p, u, t, r);
    double room = b->want[i] - b->held[i];
    bool better = best == NONE || soft < best_soft ||
                  (soft == best_soft &&
                   (room > best_room || (room == best_room && tie(s, i) > tie(s, best))));
    if (better) {
      best = u;
      best_soft = soft;
      best_room = room;
    }
  }
  return best;
}

/* (A) every forced slot, largest first, where it fits best. */
static int place_forced(bal *b, ring_error *err) {
  for (uint32_t k = 0; k < b->n_forced; k++) {
    uint32_t s = b->forced[k];
    uint16_t u = receiver(b, s, true, true);
    if (u == NONE)
      u = receiver(b, s, false, true); /* over for now: (B) sheds from it */
    if (u == NONE)
      u = receiver(b, s, false, false); /* the final check says if it mattered */
    if (u == NONE)
      return ring__err(err, RING_EPLAN,
                       "token %u slot %u: no node can take it without breaking a hard rule",
                       s / b->p->R, s % b->p->R);
    give(b, s, u);
  }
  return RING_OK;
}

/* Serving nodes, the largest surplus over target first, into b->order. */
static uint32_t by_surplus(bal *b) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < b->p->n; i++)
    if (b->p->sh.eligible[i])
      b->order[m++] = (keyed){b->held[i] - b->want[i], i};
  qsort(b->order, m, sizeof *b->order, cmp_keyed);
  return m;
}

/* Slots d holds that left their base owner, largest first, into out: giving
 * one on costs no move (the slot moves once, base owner to final owner). */
static uint32_t received(const bal *b, uint32_t d, keyed *out) {
  if (b->recv[d] == 0)
    return 0;
  uint32_t m = 0;
  for (uint32_t k = 0; k < b->n_moved; k++) {
    uint32_t s = b->moved[k];
    if (b->p->target->owners[s] == d && moved(b, s))
      out[m++] = (keyed){(double)slot_size(b, s), s};
  }
  qsort(out, m, sizeof *out, cmp_keyed);
  return m;
}

/* Sheds one arc of i to a node it fits: a received one first (free), then
 * its largest kept one. Whether it could. */
static bool shed_one(bal *b, uint32_t i) {
  uint32_t m = received(b, i, b->cand);
  for (uint32_t k = 0; k < m; k++) {
    uint16_t u = receiver(b, b->cand[k].id, true, true);
    if (u != NONE && u != i) {
      give(b, b->cand[k].id, u);
      return true;
    }
  }
  for (uint32_t k = b->start[i]; k < b->start[i + 1]; k++) {
    uint32_t s = b->slots[k];
    uint16_t u = moved(b, s) ? NONE : receiver(b, s, true, true);
    if (u != NONE && u != i) {
      give(b, s, u);
      return true;
    }
  }
  return false;
}

/* (B) each node above target + L sheds its largest arcs until it is not.
 * Returns the arcs shed. */
static uint32_t shed(bal *b) {
  uint32_t m = by_surplus(b), done = 0;
  for (uint32_t j = 0; j < m; j++) {
    uint32_t i = b->order[j].id;
    while (b->held[i] > b->want[i] + b->limit && shed_one(b, i))
      done++;
  }
  return done;
}

/* A candidate pull: the slot, and whether it costs a move. */
typedef struct pull {
  uint32_t slot; /* UINT32_MAX: none */
  bool costs;
} pull;

/* The best arc donor d can spare to u with both ending within their
 * limits: a received one (free) first, then its largest kept one. */
static pull spare(const bal *b, uint32_t d, uint16_t u) {
  const double can_give = b->held[d] - (b->want[d] - b->limit);
  uint32_t m = received(b, d, b->cand);
  for (uint32_t k = 0; k < m; k++)
    if (b->cand[k].key <= can_give && fits(b, u, b->cand[k].id))
      return (pull){b->cand[k].id, false};
  for (uint32_t k = b->start[d]; k < b->start[d + 1]; k++) {
    uint32_t s = b->slots[k];
    if (!moved(b, s) && (double)slot_size(b, s) <= can_give && fits(b, u, s))
      return (pull){s, true};
  }
  return (pull){UINT32_MAX, true};
}

static bool better_pull(const bal *b, pull c, pull best) {
  if (c.slot == UINT32_MAX || best.slot == UINT32_MAX)
    return c.slot != UINT32_MAX;
  if (c.costs != best.costs)
    return !c.costs;
  return slot_size(b, c.slot) > slot_size(b, best.slot);
}

/* (C) each node below target - L pulls, free arcs first, then the largest
 * arc any donor can spare (the fewest pulls), the donor with most surplus
 * winning ties. */
static uint32_t fill(bal *b) {
  uint32_t done = 0;
  for (uint32_t i = 0; i < b->p->n; i++) {
    while (b->p->sh.eligible[i] && b->held[i] < b->want[i] - b->limit) {
      uint32_t m = by_surplus(b);
      pull best = {UINT32_MAX, true};
      for (uint32_t j = 0; j < m; j++) {
        pull c =
            b->order[j].id != i ? spare(b, b->order[j].id, (uint16_t)i) : (pull){UINT32_MAX, true};
        best = better_pull(b, c, best) ? c : best;
      }
      if (best.slot == UINT32_MAX)
        break; /* nothing can come now: a later round or the final check */
      give(b, best.slot, (uint16_t)i);
      done++;
    }
  }
  return done;
}

static int check_result(const bal *b, ring_error *err) {
  for (uint32_t i = 0; i < b->p->n; i++) {
    double off = b->held[i] - b->want[i];
    if (b->p->sh.eligible[i] && (off > b->limit || -off > b->limit))
      return ring__err(err, RING_EPLAN,
                       "balance bytes: node %s would hold %.0f bytes, its share is %.0f +- %.0f "
                       "(the largest arc)",
                       b->p->target->nodes[i].id, b->held[i], b->want[i], b->limit);
  }
  return RING_OK;
}

int ring__plan_assign_bytes(ring__planner *p, ring_error *err) {
  bal b = {0};
  int rc = bal_init(&b, p, err);
  uint32_t in = 0, capped = 0;
  if (rc == RING_OK && (bound_in(&b, &in) != RING_OK || bound_capped(&b, &capped) != RING_OK))
    rc = ring__err(err, RING_ENOMEM, "planner: out of memory");
  if (rc == RING_OK) {
    uint32_t out = bound_out(&b);
    p->lower_bound = out > in ? out : in;
    p->lower_bound = capped > p->lower_bound ? capped : p->lower_bound;
    rc = place_forced(&b, err);
  }
  /* A node can be over with no room anywhere until (C) has drawn from
   * others, so (B) and (C) alternate while they make progress; a slot
   * moved again is re-pointed, not moved twice, so rounds cost no moves
   * of their own. Bounded: rounds rarely pass two. */
  for (uint32_t round = 0; rc == RING_OK && round < ROUNDS_MAX; round++)
    if (shed(&b) + fill(&b) == 0)
      break;
  if (rc == RING_OK)
    rc = check_result(&b, err);
  bal_free(&b);
  return rc;
}
