/*
 * plan_bytes.c: rebalancing by bytes held (ring_plan_config.balance =
 * RING_BALANCE_BYTES).
 *
 * A node's byte target (share) is its weighted share of all bytes held (the
 * same water-filled shares as token balance, scaled from T token-replicas
 * per replica set to the bytes of one replica of every token), except that
 * a node whose largest arc passes its whole share + tol is pinned at that
 * arc and the others share the rest by weight (ring__bytes_targets, which
 * the verifier counts with too: at 1,000 hosts the largest arc can be past
 * a whole share, and the bytes it holds beyond would otherwise leave every
 * other node short).
 *
 * The objective: every serving node within tol = RING_BALANCE_TOLERANCE (10%,
 * never more than L, the largest arc) of its share; a node above that which
 * holds only arcs larger than its tol (it was given arcs it cannot split) is
 * excused, as such. A node outside its tol is brought to within its aim
 * (RING_BALANCE_AIM of tol), so one that must change does not stop on the edge
 * and drift out again; a node inside its tol is left alone. Receivers stay
 * within share + tol, donors within share - tol. Nodes the greedy cannot bring
 * within tol are counted in ring_plan_bytes_off_tolerance; the hard floor stays
 * every node within the largest arc L of its share (the old rule, always
 * reachable but for stranded slots), else the plan is refused. Empty arcs never
 * move for bytes: they weigh nothing.
 *
 * Like token balance, every slot moves at most once, and only slots that must:
 * (A) the forced ones (owner leaving, or a hard-domain clash), each to the
 * serving node it suits best; (B) from each node above share + tol but excused
 * ones (holding only arcs larger than tol: they shed nothing, see excused()),
 * arcs that fit elsewhere until it is within the aim, the fewest bytes first
 * (shed_one); (C) into each node below share - tol, an arc a donor can spare
 * without leaving its own reach (a node brought to its aim is not drained past
 * it again; received ones first: re-pointing them costs no move): the smallest
 * that brings it within its aim, else the largest that does not carry it past
 * its aim, until it is within the aim. An arc goes where it suits best (pairing
 * over and under nodes): to a node below its band that it leaves at most at the
 * near edge of its aim, the tightest such (each byte shed then counts toward
 * what the nodes below must receive, and they stop near that edge, the fewest
 * bytes: filled up to their shares, they took bytes others below then pulled
 * from nodes within their bands, moving them twice over), else to a node it
 * fits whole below its share, the tightest such, so small arcs fill what large
 * ones cannot, else where it lowers that node's distance from its share the
 * most. An arc larger than any node's room that lands its holder near its share
 * goes, in (B), to the node furthest below its band holding only arcs larger
 * than its tol (an empty joiner, say; up to twice its target), which the
 * objective then excuses: one move where filling it with arcs that fit took
 * many. Any other arc larger than every room goes to the node most below its
 * share whose own large arcs leave room for it, if it may then shed its small
 * ones. Targets follow the final owners (a node pinned at an arc it received
 * leaves less for the others), so nodes that end off tolerance against them get
 * rounds of their own. Should the floor still break, rounds under the floor (L)
 * place what they must, and rounds under the objective shed the small arcs from
 * where it landed. Receivers obey the same rule as token balance
 * (ring__can_take), so the waves keep owners and hard domains distinct at every
 * step.
 *
 * The lower bound, restated for this objective, is the largest of:
 *  - out: forced slots plus, per node above share + tol, the fewest of its
 *    own arcs that bring it to share + aim, or its count of arcs of at
 *    most tol if shedding those (leaving only arcs larger than tol) takes
 *    fewer;
 *  - in: per node below share - tol, the fewest arcs of all (largest first)
 *    that bring it to share - aim;
 *  - spare: forced slots plus the fewest moves that can cover the shortfall
 *    D (the sum over nodes below share - tol of the bytes up to share -
 *    aim) left after the forced arcs' bytes. A move of arc a from d
 *    lowers D by at most min(a, spare_d), spare_d = what d holds above its
 *    own share - tol (bytes beyond that reopen a shortfall at d), so each
 *    donor's possible moves are its own arcs largest first, each worth
 *    min(arc, spare left); the bound is the fewest of all donors' worths,
 *    largest first, that sum to D. A chain (e gives to d, d gives on) adds
 *    a move for what e could spare, so it cannot do better;
 *  - capped: per capped domain, the tokens with no replica left there but
 *    for the smallest its nodes' slack (tol each) can leave out.
 * Each holds for a plan meeting the objective with every node that had to
 * change at its aim, counted from the start; a plan leaving such a node
 * short of its aim reports the same counts to tol (no aim), and a plan with
 * nodes off tolerance the old bound (L in place of tol, no aim, no spare
 * count), which holds for every plan meeting the floor. These are argued,
 * not proven, and loose where arcs are large: they ignore where an arc can
 * land, so a node over its band by an arc larger than every node's room
 * counts one move though it sheds many small ones (at 1,000 hosts re-plans
 * of a token-balanced table make about 12x their bound this way).
 * ring_plan_verify checks every plan against its bound, and the
 * property tests (tests/planner/test_plan_bytes.c, test_plan_bytes_scale.c)
 * measure how far above it plans land.
 *
 * Movement by bytes has a bound that is proven, not argued, and tight
 * (ring_plan_bytes_bound): every byte a node ends with beyond its base arcs
 * came from another node and every byte it gives up went to one, each
 * moved byte is one arc moving once, and a node ends at most as far from
 * its final target as its class says (within its aim, within tol, or
 * within L). So any plan ending every node in the class this plan does
 * moves at least the forced arcs plus, per node above its band, its base
 * bytes past target + class (in whole arcs of its own: when its arcs
 * smaller than that fall short together, at least its smallest arc of that
 * size or more), and at least what the nodes receive: per node below, what
 * it lacks to target - class, and per node above, what its shed took it
 * past target - class. Plans land above it by how the arcs fall and by
 * bytes moved twice; test_plan_bytes_scale reports the ratio and
 * recomputes the bound from the tables alone.
 */
#include "plan_int.h"

#include <math.h>
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
  double *tol;          /* per node: RING_BALANCE_TOLERANCE of its target */
  double limit;         /* L: the largest arc, the floor */
  double one;           /* bytes of one replica of every token */
  bool loose;           /* the floor's rule (L, no aim), for the old bound */
  bool no_aim;          /* the bound for plans that only keep every node within tol */
  double *bigb;         /* per node: bytes in its arcs larger than its tol */
  bool *trig;           /* per node: outside its band at the start, so brought to its aim */
  uint32_t *start;      /* per node offsets into slots (CSR of kept base slots) */
  uint32_t *slots;      /* each node's kept base slots, largest arc first */
  uint32_t *forced;     /* slots that must move, largest arc first */
  uint32_t *by_size;    /* tokens, the largest arc first */
  double *pre;          /* prefix sums of the sizes in by_size order (T + 1) */
  uint32_t n_forced;
  struct keyed *order; /* scratch: serving nodes by surplus */
  struct keyed *cand;  /* scratch: one node's received slots */
  uint32_t *moved;     /* slots that have left their base owner, each once */
  bool *listed;        /* per slot: in moved */
  uint32_t n_moved;
  uint32_t *recv;  /* per node: slots it holds that left their base owner */
  bool *capped;    /* per hard domain: its share is one replica of every token */
  uint32_t *rhead; /* per node: head of its list of received slots (in rlist) */
  struct rent {
    uint32_t slot, next;
  } * rlist; /* every give to a node other than the base owner; stale entries skipped */
  uint32_t n_rlist, cap_rlist;
  double *small; /* per node, at the end: bytes in its arcs of at most its tol */
} bal;

#define NIL UINT32_MAX

/* How far node i may be from its target: tol, or L under the floor rule. */
static double band(const bal *b, uint32_t i) { return b->loose ? b->limit : b->tol[i]; }

/* How close a node that must change is brought: RING_BALANCE_AIM of its
 * tol, or L. */
static double aim(const bal *b, uint32_t i) {
  return b->loose ? b->limit : b->no_aim ? b->tol[i] : b->tol[i] * RING_BALANCE_AIM;
}

/* What node u lacks to its aim's near edge (target - aim): the fewest bytes
 * that bring it within its aim; 0 or less once it is there or above. */
static double to_aim(const bal *b, uint32_t u) { return b->want[u] - b->held[u] - aim(b, u); }

/* Whether node i is brought to its aim: it was outside its band. */
static bool triggered(const bal *b, uint32_t i) { return b->trig[i] && !b->loose; }

/* How far below its target node i may end: its aim once triggered (pushed
 * past it, it would have to be filled again), else its band. */
static double reach(const bal *b, uint32_t i) { return triggered(b, i) ? aim(b, i) : band(b, i); }

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

/* Targets (pinned ones included) from the base owners; scratch in small.
 * held is the kept slots' bytes, so it is saved around the count. */
static void start_targets(bal *b) {
  const ring__planner *p = b->p;
  double *kept = b->bigb; /* not in use yet */
  memcpy(kept, b->held, p->n * sizeof *kept);
  ring__bytes_targets(p->orig, p->T, p->R, &p->sh, b->size, b->want, b->tol, b->held, b->small);
  memcpy(b->held, kept, p->n * sizeof *kept);
  memset(kept, 0, p->n * sizeof *kept);
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

/* One stable pass of the radix sort: src into dst by the byte at `shift`
 * of each token's size, the largest byte first. False if that byte is the
 * same for every token (the pass would change nothing). */
static bool radix_pass(const uint64_t *size, const uint32_t *src, uint32_t *dst, uint32_t T,
                       unsigned shift) {
  uint32_t at[257] = {0};
  for (uint32_t k = 0; k < T; k++)
    at[256 - ((size[src[k]] >> shift) & 0xff)]++;
  for (uint32_t d = 0; d < 256; d++) {
    if (at[d + 1] == T)
      return false;
    at[d + 1] += at[d];
  }
  for (uint32_t k = 0; k < T; k++)
    dst[at[255 - ((size[src[k]] >> shift) & 0xff)]++] = src[k];
  return true;
}

/* Tokens by size, the largest first (then the smaller token), and the
 * prefix sums of their sizes in that order: sorted once per plan (a radix
 * sort: sizes are below 2^48), as every per-node list and the bound walk
 * arcs largest first. */
static int sort_tokens(bal *b) {
  const uint32_t T = b->p->T;
  uint32_t *tmp = malloc(T * sizeof *tmp);
  b->by_size = malloc(T * sizeof *b->by_size);
  b->pre = malloc((T + 1) * sizeof *b->pre);
  if (tmp == NULL || b->by_size == NULL || b->pre == NULL) {
    free(tmp);
    return RING_ENOMEM;
  }
  for (uint32_t t = 0; t < T; t++)
    b->by_size[t] = t;
  for (unsigned shift = 0; shift < 48; shift += 8)
    if (radix_pass(b->size, b->by_size, tmp, T, shift))
      memcpy(b->by_size, tmp, T * sizeof *tmp);
  free(tmp);
  b->pre[0] = 0;
  for (uint32_t k = 0; k < T; k++)
    b->pre[k + 1] = b->pre[k] + (double)b->size[b->by_size[k]];
  return RING_OK;
}

/* Frees the forced slots and indexes the kept ones per owner, each list
 * the largest arc first (then the smaller slot): walking the tokens by
 * size fills every list in order without a sort per node. */
static int split_slots(bal *b) {
  ring__planner *p = b->p;
  b->start = calloc(p->n + 1, sizeof *b->start);
  b->slots = malloc((size_t)p->T * p->R * sizeof *b->slots);
  b->forced = malloc((size_t)p->T * p->R * sizeof *b->forced);
  uint32_t *fill = calloc(p->n + 1, sizeof *fill);
  if (!b->start || !b->slots || !b->forced || !fill || sort_tokens(b) != RING_OK) {
    free(fill);
    return RING_ENOMEM;
  }
  for (uint32_t k = 0; k < p->T; k++)
    for (uint32_t t = b->by_size[k], r = 0; r < p->R; r++) {
      uint32_t s = t * p->R + r;
      if (ring__slot_forced(p, t, r)) {
        b->forced[b->n_forced++] = s;
        p->target->owners[s] = NONE;
        continue;
      }
      b->start[p->orig[s] + 1]++;
      b->held[p->orig[s]] += (double)b->size[t];
      p->load[p->orig[s]]++;
    }
  for (uint32_t i = 0; i < p->n; i++)
    b->start[i + 1] += b->start[i];
  for (uint32_t k = 0; k < p->T; k++)
    for (uint32_t t = b->by_size[k], r = 0; r < p->R; r++)
      if (p->target->owners[t * p->R + r] != NONE)
        b->slots[b->start[p->orig[t * p->R + r]] + fill[p->orig[t * p->R + r]]++] = t * p->R + r;
  free(fill);
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
  b->tol = calloc(p->n + 1, sizeof *b->tol);
  b->rhead = malloc((p->n + 1) * sizeof *b->rhead);
  b->small = calloc(p->n + 1, sizeof *b->small);
  b->trig = calloc(p->n + 1, sizeof *b->trig);
  b->bigb = calloc(p->n + 1, sizeof *b->bigb);
  b->held = calloc(p->n + 1, sizeof *b->held);
  b->order = malloc((p->n + 1) * sizeof *b->order);
  b->recv = calloc(p->n + 1, sizeof *b->recv);
  b->cand = malloc((size_t)p->T * p->R * sizeof *b->cand);
  b->moved = malloc((size_t)p->T * p->R * sizeof *b->moved);
  b->listed = calloc((size_t)p->T * p->R, sizeof *b->listed);
  if (!b->want || !b->tol || !b->rhead || !b->small || !b->trig || !b->bigb || !b->held ||
      !b->order || !b->recv || !b->cand || !b->moved || !b->listed || split_slots(b) != RING_OK)
    return ring__err(err, RING_ENOMEM, "planner: out of memory");
  for (uint32_t t = 0; t < p->T; t++)
    b->limit = (double)b->size[t] > b->limit ? (double)b->size[t] : b->limit;
  double *dom_want = calloc(p->sh.n_dom + 1, sizeof *dom_want);
  b->capped = calloc(p->sh.n_dom + 1, sizeof *b->capped);
  if (dom_want == NULL || b->capped == NULL) {
    free(dom_want);
    return ring__err(err, RING_ENOMEM, "planner: out of memory");
  }
  b->one = (double)one;
  for (uint32_t i = 0; i < p->n; i++) {
    b->rhead[i] = NIL;
    if (p->sh.eligible[i])
      dom_want[p->sh.dom[i]] += p->sh.target[i];
  }
  start_targets(b);
  for (uint32_t d = 0; d < p->sh.n_dom; d++)
    b->capped[d] = dom_want[d] >= p->T * (1 - 1e-9);
  free(dom_want);
  for (uint32_t i = 0; i < p->n; i++) {
    b->trig[i] = p->sh.eligible[i] && fabs(b->held[i] - b->want[i]) > b->tol[i];
    for (uint32_t k = b->start[i]; k < b->start[i + 1]; k++)
      b->bigb[i] +=
          (double)slot_size(b, b->slots[k]) > b->tol[i] ? (double)slot_size(b, b->slots[k]) : 0;
  }
  return RING_OK;
}

static void bal_free(bal *b) {
  free(b->want);
  free(b->tol);
  free(b->rhead);
  free(b->rlist);
  free(b->small);
  free(b->trig);
  free(b->bigb);
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
  free(b->by_size);
  free(b->pre);
}

/* ------------------------------------------------------------------ bound */

static int cmp_u64_desc(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return (a < c) - (a > c);
}

static int cmp_dbl_desc(const void *x, const void *y) {
  double a = *(const double *)x, c = *(const double *)y;
  return (a < c) - (a > c);
}

/* The fewest of the values (largest first, prefix sums in pre, n + 1 of
 * them) that reach `need`: n + 1 when even all of them fall short. */
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

/* Node i's arcs of more than 0 and at most its tol: shedding them all
 * leaves it holding only arcs it is excused for. */
static uint32_t small_arcs(const bal *b, uint32_t i) {
  uint32_t m = 0;
  for (uint32_t k = b->start[i]; k < b->start[i + 1]; k++) {
    uint64_t sz = slot_size(b, b->slots[k]);
    m += sz > 0 && (double)sz <= b->tol[i];
  }
  return m;
}

/* Moves out: forced + per node above target + band, the fewest own arcs
 * that bring it to target + aim (or its small arcs, when fewer). */
static uint32_t bound_out(const bal *b) {
  uint32_t lb = b->n_forced;
  for (uint32_t i = 0; i < b->p->n; i++) {
    if (b->held[i] <= b->want[i] + band(b, i))
      continue;
    double over = b->held[i] - (b->want[i] + aim(b, i));
    uint32_t k = 0;
    for (uint32_t j = b->start[i]; j < b->start[i + 1] && over > 0; j++, k++)
      over -= (double)slot_size(b, b->slots[j]);
    uint32_t small = b->loose ? k : small_arcs(b, i);
    lb += small < k ? small : k;
  }
  return lb;
}

/* Moves in: per node below target - band, the fewest arcs of all that
 * bring it to target - aim. */
static uint32_t bound_in(const bal *b) {
  uint32_t lb = 0;
  for (uint32_t i = 0; i < b->p->n; i++)
    if (b->p->sh.eligible[i] && b->held[i] < b->want[i] - band(b, i))
      lb += fewest(b->pre, b->p->T, b->want[i] - aim(b, i) - b->held[i]);
  return lb;
}

/* Each donor's possible moves, as what each can lower the shortfall by:
 * its arcs largest first, each worth min(arc, spare left). Into w; the
 * count. */
static uint32_t worths(const bal *b, double *w) {
  uint32_t m = 0;
  for (uint32_t d = 0; d < b->p->n; d++) {
    double rem = b->held[d] - (b->want[d] - band(b, d));
    for (uint32_t k = b->start[d]; k < b->start[d + 1] && rem > 0; k++) {
      double sz = (double)slot_size(b, b->slots[k]);
      if (sz <= 0)
        break;
      w[m++] = sz < rem ? sz : rem;
      rem -= w[m - 1];
    }
  }
  return m;
}

/* Moves by spare (the head comment): forced + the fewest donor moves that
 * cover the shortfall left after the forced arcs' bytes. */
static int bound_spare(const bal *b, uint32_t *out) {
  const ring__planner *p = b->p;
  double need = 0;
  for (uint32_t i = 0; i < p->n; i++)
    if (p->sh.eligible[i] && b->held[i] < b->want[i] - band(b, i))
      need += b->want[i] - aim(b, i) - b->held[i];
  for (uint32_t k = 0; k < b->n_forced; k++)
    need -= (double)slot_size(b, b->forced[k]);
  *out = b->n_forced;
  if (need <= 0)
    return RING_OK;
  double *w = malloc(((size_t)p->T * p->R + 1) * sizeof *w);
  if (w == NULL)
    return RING_ENOMEM;
  uint32_t m = worths(b, w);
  qsort(w, m, sizeof *w, cmp_dbl_desc);
  uint32_t k = 0;
  for (double got = 0; k < m && got < need; k++)
    got += w[k];
  free(w);
  *out += k;
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
 * token but for what its nodes' slack (their band each, below their
 * targets) can leave out: each token missing there needs a move in, except
 * the most of them (the smallest first) whose bytes fit that slack. Moves
 * into different domains are different moves. */
static int bound_capped(const bal *b, uint32_t *out) {
  const ring__planner *p = b->p;
  uint64_t *miss = malloc(p->T * sizeof *miss);
  double *slack = calloc(p->sh.n_dom + 1, sizeof *slack);
  if (miss == NULL || slack == NULL) {
    free(miss);
    free(slack);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < p->n; i++)
    if (p->sh.eligible[i])
      slack[p->sh.dom[i] < p->sh.n_dom ? p->sh.dom[i] : p->sh.n_dom] += band(b, i);
  uint32_t lb = 0;
  for (uint32_t d = 0; d < p->sh.n_dom; d++) {
    if (!b->capped[d])
      continue;
    uint32_t m = missing_in(b, d, miss), k = 0;
    qsort(miss, m, sizeof *miss, cmp_u64_asc);
    for (double room = slack[d]; k < m && (double)miss[k] <= room; k++)
      room -= (double)miss[k];
    lb += m - k;
  }
  free(miss);
  free(slack);
  *out = lb;
  return RING_OK;
}

/* The largest of the four counts, under the rule b->loose says. */
static int lower_bound(const bal *b, uint32_t *out) {
  uint32_t in = bound_in(b), capped = 0, spare = 0, lb = bound_out(b);
  if (bound_capped(b, &capped) != RING_OK || (!b->loose && bound_spare(b, &spare) != RING_OK))
    return RING_ENOMEM;
  lb = in > lb ? in : lb;
  lb = capped > lb ? capped : lb;
  *out = spare > lb ? spare : lb;
  return RING_OK;
}

/* ----------------------------------------------------------------- moves */

/* Notes that `to` now holds slot s away from its base owner. */
static bool note_received(bal *b, uint32_t s, uint16_t to) {
  if (b->n_rlist == b->cap_rlist) {
    uint32_t cap = b->cap_rlist ? 2 * b->cap_rlist : 1024;
    struct rent *grown = realloc(b->rlist, cap * sizeof *grown);
    if (grown == NULL)
      return false;
    b->rlist = grown;
    b->cap_rlist = cap;
  }
  b->rlist[b->n_rlist] = (struct rent){s, b->rhead[to]};
  b->rhead[to] = b->n_rlist++;
  return true;
}

/* Gives slot s to `to`, remembering it among the moved slots the first
 * time it leaves its base owner. False when out of memory. */
static bool give(bal *b, uint32_t s, uint16_t to) {
  ring__planner *p = b->p;
  uint16_t from = p->target->owners[s];
  double sz = (double)slot_size(b, s);
  if (to != p->orig[s] && !note_received(b, s, to))
    return false;
  if (!b->listed[s]) {
    b->listed[s] = true;
    b->moved[b->n_moved++] = s;
  }
  if (from != NONE) {
    b->bigb[from] -= sz > b->tol[from] ? sz : 0;
    b->held[from] -= sz;
    b->recv[from] -= moved(b, s);
    p->load[from]--;
  }
  b->recv[to] += to != p->orig[s];
  p->target->owners[s] = to;
  b->held[to] += sz;
  b->bigb[to] += sz > b->tol[to] ? sz : 0;
  p->load[to]++;
  return true;
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

/* Room node u has below target + band. */
static double room(const bal *b, uint32_t u) { return b->want[u] + band(b, u) - b->held[u]; }

/* Whether u may take slot s and still end within its target + band. */
static bool fits(const bal *b, uint16_t u, uint32_t s) {
  return b->p->sh.eligible[u] && (double)slot_size(b, s) <= room(b, u) && keeps_domains(b, u, s) &&
         ring__can_take(b->p, u, s / b->p->R, s % b->p->R);
}

/* How well arc size a suits node u, the lower the better: first whether
 * u is below its band and takes it whole short of its aim's near edge (what
 * such a node lacks to there the plan must send in any case; the head
 * comment says why they come first), then what it lowers u's distance from
 * its target by, negated (a node that can take it all below its target
 * gains the whole arc), then the tightest such fit (the smallest shortfall,
 * leaving larger shortfalls to larger arcs: small arcs fill what large
 * ones cannot). */
static void suits(const bal *b, uint32_t u, double a, double key[3]) {
  const double gap = b->want[u] - b->held[u], lack = to_aim(b, u);
  key[0] = triggered(b, u) && a <= lack ? 0 : 1;
  key[1] = gap >= a ? -a : fabs(gap - a) - fabs(gap);
  key[2] = key[0] == 0 ? lack - a : gap >= a ? gap - a : 0;
}

/* The node to take slot s: it fits (when must_fit; else it keeps capped
 * domains whole when `whole`), then the fewest best-effort clashes, then
 * the one it suits best. NONE if none may. */
static uint16_t receiver(const bal *b, uint32_t s, bool must_fit, bool whole) {
  const ring__planner *p = b->p;
  const uint32_t t = s / p->R, r = s % p->R;
  uint16_t best = NONE;
  uint32_t best_soft = 0;
  double best_key[3] = {0, 0, 0}, key[3];
  for (uint32_t i = 0; i < p->n; i++) {
    const uint16_t u = (uint16_t)i;
    if (!p->sh.eligible[i] || (must_fit ? !fits(b, u, s) : !ring__can_take(p, u, t, r)) ||
        (whole && !keeps_domains(b, u, s)))
      continue;
    uint32_t soft = ring__soft_conflicts(p, u, t, r);
    suits(b, i, (double)slot_size(b, s), key);
    int cmp = soft != best_soft ? (soft < best_soft ? -1 : 1) : 0;
    for (int k = 0; k < 3 && cmp == 0; k++)
      cmp = key[k] < best_key[k] ? -1 : key[k] > best_key[k];
    if (best == NONE || cmp < 0 || (cmp == 0 && tie(s, i) > tie(s, best))) {
      best = u;
      best_soft = soft;
      memcpy(best_key, key, sizeof key);
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
    if (!give(b, s, u))
      return ring__err(err, RING_ENOMEM, "planner: out of memory");
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
 * one on costs no move (the slot moves once, base owner to final owner).
 * Empty arcs are left out: they weigh nothing. */
static uint32_t received(const bal *b, uint32_t d, keyed *out) {
  if (b->recv[d] == 0)
    return 0;
  uint32_t m = 0;
  for (uint32_t e = b->rhead[d]; e != NIL; e = b->rlist[e].next) {
    uint32_t s = b->rlist[e].slot;
    if (b->p->target->owners[s] == d && moved(b, s) && slot_size(b, s) > 0)
      out[m++] = (keyed){(double)slot_size(b, s), s};
  }
  qsort(out, m, sizeof *out, cmp_keyed);
  uint32_t k = 0; /* a slot that left d and came back is listed twice: adjacent now */
  for (uint32_t j = 0; j < m; j++)
    if (k == 0 || out[k - 1].id != out[j].id)
      out[k++] = out[j];
  return k;
}

/* The most room any serving node has: no larger arc can be shed now. */
static double most_room(const bal *b) {
  double best = 0;
  for (uint32_t i = 0; i < b->p->n; i++)
    if (b->p->sh.eligible[i] && room(b, i) > best)
      best = room(b, i);
  return best;
}

/* Whether u may take slot s, an arc larger than its room, and come back
 * within its band by shedding its arcs of at most its tol. */
static bool takes_big(const bal *b, uint16_t u, uint32_t s) {
  double sz = (double)slot_size(b, s);
  return b->p->sh.eligible[u] && sz > b->tol[u] && b->bigb[u] + sz <= b->want[u] + b->tol[u] &&
         b->held[u] < b->want[u] && keeps_domains(b, u, s) &&
         ring__can_take(b->p, u, s / b->p->R, s % b->p->R);
}

/* The node most below its target that takes_big slot s, or NONE. */
static uint16_t big_receiver(const bal *b, uint32_t s) {
  uint16_t best = NONE;
  for (uint32_t i = 0; i < b->p->n; i++)
    if (takes_big(b, (uint16_t)i, s) &&
        (best == NONE || b->want[i] - b->held[i] > b->want[best] - b->held[best]))
      best = (uint16_t)i;
  return best;
}

/* An arc larger than every node's room: it goes where the arcs it lands
 * among are small enough to shed to make room (rounds shed them), if its
 * holder i stays within its band. 1 if moved, 0 if not, RING_ENOMEM. */
static int shed_big(bal *b, uint32_t i) {
  for (uint32_t k = b->start[i]; k < b->start[i + 1]; k++) {
    uint32_t s = b->slots[k];
    double sz = (double)slot_size(b, s);
    if (sz <= b->tol[i] || b->held[i] - sz < b->want[i] - b->tol[i])
      continue;
    uint16_t u = moved(b, s) ? NONE : big_receiver(b, s);
    if (u != NONE && u != i)
      return give(b, s, u) ? 1 : RING_ENOMEM;
  }
  return 0;
}

/* The first of n slots (largest first) of at most `most` bytes. */
static uint32_t first_within(const bal *b, const uint32_t *slots, uint32_t n, double most) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if ((double)slot_size(b, slots[mid]) <= most)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* Gives kept slot s of i to the node it suits best, if one fits: 1 if
 * given, 0 if not, RING_ENOMEM. */
static int shed_to(bal *b, uint32_t i, uint32_t s) {
  uint16_t u = moved(b, s) ? NONE : receiver(b, s, true, true);
  if (u == NONE || u == i)
    return 0;
  return give(b, s, u) ? 1 : RING_ENOMEM;
}

/* At most this many times its target may a node hold through
 * whole_receiver: an arc many shares large handed to a joiner pins it there
 * and lowers every other node's target (test_plan_bytes_scale: at 5,000
 * hosts joins took 11 moves with no cap, 3 with it; at 1,000 the same 7). */
#define WHOLE_MAX 2.0

/* A node below its band holding only arcs larger than its tol (an empty
 * joiner, say) that may take slot s, an arc larger than its tol and than
 * its room, up to WHOLE_MAX times its target: it then holds only arcs it
 * cannot split, as the objective excuses. The one furthest below its
 * target, or NONE. */
static uint16_t whole_receiver(const bal *b, uint32_t s) {
  const ring__planner *p = b->p;
  const double sz = (double)slot_size(b, s);
  uint16_t best = NONE;
  for (uint32_t j = 0; j < p->n; j++) {
    const uint16_t u = (uint16_t)j;
    if (!p->sh.eligible[j] || b->held[j] - b->bigb[j] > 0 || sz <= b->tol[j] ||
        b->held[j] >= b->want[j] - band(b, j) || sz <= room(b, j) ||
        b->held[j] + sz > WHOLE_MAX * b->want[j] || b->held[j] + sz - b->want[j] > b->limit ||
        !keeps_domains(b, u, s) || !ring__can_take(p, u, s / p->R, s % p->R))
      continue;
    if (best == NONE || b->want[j] - b->held[j] > b->want[best] - b->held[best])
      best = u;
  }
  return best;
}

/* The first of own (n arcs, largest first) smaller than `least`: the arcs
 * before it, walked backwards, are those of at least `least`, the smallest
 * first. */
static uint32_t first_below(const bal *b, const uint32_t *own, uint32_t n, double least) {
  uint32_t k = first_within(b, own, n, least);
  while (k < n && (double)slot_size(b, own[k]) >= least)
    k++;
  return k;
}

/* The kept arc of i (of at most `top`) whose leaving lands i within its
 * aim above and at most `past` below its target, given to where it suits
 * best: the smallest such that finds a taker, so i sheds the fewest bytes
 * that bring it within its aim (the bytes bound counts exactly those). */
static int shed_nearest(bal *b, uint32_t i, double top, double past) {
  const uint32_t *own = b->slots + b->start[i], n = b->start[i + 1] - b->start[i];
  const double over = b->held[i] - b->want[i], lo = over - aim(b, i), hi = over + past;
  const uint32_t first = first_within(b, own, n, top);
  for (uint32_t k = first_below(b, own, n, lo);
       k-- > first && (double)slot_size(b, own[k]) <= hi;) {
    int got = slot_size(b, own[k]) > 0 ? shed_to(b, i, own[k]) : 0;
    if (got != 0)
      return got;
  }
  /* an arc that fits nowhere but lands i within its aim: to a node it
   * leaves holding only arcs it cannot split */
  for (uint32_t k = first_within(b, own, n, hi); k < first && (double)slot_size(b, own[k]) >= lo;
       k++) {
    uint16_t u = moved(b, own[k]) ? NONE : whole_receiver(b, own[k]);
    if (u != NONE && u != i)
      return give(b, own[k], u) ? 1 : RING_ENOMEM;
  }
  return 0;
}

/* Gives i's largest kept arc of at most `most` that finds a taker: 1 if
 * given, 0 if none, RING_ENOMEM. */
static int shed_largest(bal *b, uint32_t i, double most) {
  const uint32_t *own = b->slots + b->start[i], n = b->start[i + 1] - b->start[i];
  for (uint32_t k = first_within(b, own, n, most); k < n && slot_size(b, own[k]) > 0; k++) {
    int got = shed_to(b, i, own[k]);
    if (got != 0)
      return got;
  }
  return 0;
}

/* Sheds one arc of i to a node it fits, the fewest bytes first: a received
 * one (free); the smallest kept one that lands i within its aim without
 * passing its target; its largest kept one that leaves it above its aim
 * (it sheds on: one arc that would pass the target far moves bytes that
 * smaller ones need not); the smallest that lands it within its aim at
 * all; its largest that leaves it within its reach below (an arc past that
 * would be refilled: bytes moved twice); its largest. 1 if it could, 0 if
 * not, RING_ENOMEM. */
static int shed_one(bal *b, uint32_t i) {
  const double top = most_room(b);
  uint32_t m = received(b, i, b->cand);
  for (uint32_t k = 0; k < m; k++) {
    uint16_t u = b->cand[k].key <= top ? receiver(b, b->cand[k].id, true, true) : NONE;
    if (u != NONE && u != i)
      return give(b, b->cand[k].id, u) ? 1 : RING_ENOMEM;
  }
  if (b->loose)
    return shed_largest(b, i, top);
  const double need = b->held[i] - b->want[i] - aim(b, i);
  const double keep = b->held[i] - (b->want[i] - reach(b, i));
  int got = shed_nearest(b, i, top, 0);
  got = got == 0 ? shed_largest(b, i, fmin(top, need)) : got;
  got = got == 0 ? shed_nearest(b, i, top, reach(b, i)) : got;
  got = got == 0 && keep < top ? shed_largest(b, i, keep) : got;
  got = got == 0 ? shed_largest(b, i, top) : got;
  return got != 0 ? got : shed_big(b, i);
}

/* Whether node i is above its band holding only arcs larger than its tol,
 * which the objective excuses. Under the objective (not the floor) it
 * sheds nothing: an arc it gave would leave it to be refilled, or push the
 * node that took it out of its own band (at 5,000 hosts a join's shrinking
 * shares turned such nodes over by a hair, and chains of their arcs moved
 * up to twice the bytes the join needed). */
static bool excused(const bal *b, uint32_t i) {
  return !b->loose && b->held[i] > b->want[i] + band(b, i) && b->held[i] - b->bigb[i] <= 0;
}

/* (B) each node above target + band sheds its largest arcs that fit
 * elsewhere until it is within its aim. Returns the arcs shed, or
 * RING_ENOMEM. */
static int64_t shed(bal *b) {
  uint32_t m = by_surplus(b);
  int64_t done = 0;
  for (uint32_t j = 0; j < m; j++) {
    uint32_t i = b->order[j].id;
    if ((!triggered(b, i) && b->held[i] <= b->want[i] + band(b, i)) || excused(b, i))
      continue;
    int got = 1;
    while (b->held[i] > b->want[i] + aim(b, i) && (got = shed_one(b, i)) == 1)
      done++;
    if (got < 0)
      return got;
  }
  return done;
}

/* A candidate pull: the slot, and whether it costs a move. */
typedef struct pull {
  uint32_t slot; /* UINT32_MAX: none */
  bool costs;
} pull;

/* Whether arc size a leaves u at most at the far edge of its aim. */
static bool within_aim(const bal *b, uint16_t u, double a) {
  return a <= b->want[u] - b->held[u] + aim(b, u);
}

/* How far past the near edge of its aim (target - aim: the fewest bytes
 * that bring it within) arc size a takes u, if it brings u within its aim
 * (not past its far edge either); -1 if it does not. */
static double lands(const bal *b, uint16_t u, double a) {
  const double lack = to_aim(b, u);
  return a >= lack && within_aim(b, u, a) ? a - lack : -1;
}

/* Among own[lo..n) (largest first), the smallest kept arc that fits u and
 * brings it within its aim, not past it (the fewest bytes that do);
 * UINT32_MAX if none does. */
static uint32_t nearest(const bal *b, const uint32_t *own, uint32_t lo, uint32_t n, uint16_t u) {
  const double least = to_aim(b, u);
  for (uint32_t k = first_below(b, own, n, least);
       k-- > lo && within_aim(b, u, (double)slot_size(b, own[k]));)
    if (slot_size(b, own[k]) > 0 && !moved(b, own[k]) && fits(b, u, own[k]))
      return own[k];
  return UINT32_MAX;
}

/* The best arc donor d can spare to u with both ending within their
 * bands: a received one (free) first, then the smallest kept one that
 * brings u within its aim, else its largest kept one that does not carry u
 * past its aim (u takes a smaller one after it: an arc landing u between
 * its aim and its band moves bytes past what u lacked), else the smallest
 * that fits (the least past its aim). */
static pull spare(const bal *b, uint32_t d, uint16_t u) {
  const double can_give = b->held[d] - (b->want[d] - reach(b, d));
  uint32_t m = received(b, d, b->cand);
  for (uint32_t k = 0; k < m; k++)
    if (b->cand[k].key <= can_give && fits(b, u, b->cand[k].id))
      return (pull){b->cand[k].id, false};
  const uint32_t *own = b->slots + b->start[d], n = b->start[d + 1] - b->start[d];
  const uint32_t lo = first_within(b, own, n, can_give);
  if (lo < n && (double)slot_size(b, own[lo]) >= to_aim(b, u)) {
    uint32_t s = nearest(b, own, lo, n, u);
    if (s != UINT32_MAX)
      return (pull){s, true};
  }
  uint32_t past = UINT32_MAX; /* the smallest yet that fits but passes u's aim */
  for (uint32_t k = lo; k < n; k++) {
    uint32_t s = own[k];
    if (slot_size(b, s) == 0)
      break;
    if (!moved(b, s) && fits(b, u, s)) {
      if (within_aim(b, u, (double)slot_size(b, s)))
        return (pull){s, true};
      past = s;
    }
  }
  return (pull){past, true};
}

/* Free first; then one that brings u within its aim, nearest its aim's
 * near edge; then one that leaves u short of its aim, the larger; else the
 * smaller. */
static bool better_pull(const bal *b, uint16_t u, pull c, pull best) {
  if (c.slot == UINT32_MAX || best.slot == UINT32_MAX)
    return c.slot != UINT32_MAX;
  if (c.costs != best.costs)
    return !c.costs;
  double fc = lands(b, u, (double)slot_size(b, c.slot)),
         fb = lands(b, u, (double)slot_size(b, best.slot));
  if (fc >= 0 || fb >= 0)
    return fc >= 0 && (fb < 0 || fc < fb);
  const double sc = (double)slot_size(b, c.slot), sb = (double)slot_size(b, best.slot);
  if (within_aim(b, u, sc) != within_aim(b, u, sb))
    return within_aim(b, u, sc);
  return within_aim(b, u, sc) ? sc > sb : sc < sb;
}

/* The best pull into i over the donors in b->order (m of them, by spare
 * when the round began: an upper bound on their spare now, as donors only
 * give during (C), so the scan stops once no donor can beat the best: a
 * donor whose spare is below the best arc has only smaller ones, which
 * win only if free, or if the best overshoots the target). */
static pull best_pull(const bal *b, uint32_t m, uint16_t i) {
  pull best = {UINT32_MAX, true};
  for (uint32_t j = 0; j < m; j++) {
    uint32_t d = b->order[j].id;
    if (b->order[j].key <= 0)
      break;
    double top = best.slot != UINT32_MAX ? (double)slot_size(b, best.slot) : 0;
    if (best.slot != UINT32_MAX && b->order[j].key <= top && (b->recv[d] == 0 || !best.costs) &&
        top <= b->want[i] - b->held[i])
      continue;
    pull c = d != i ? spare(b, d, i) : (pull){UINT32_MAX, true};
    best = better_pull(b, i, c, best) ? c : best;
  }
  return best;
}

/* Serving nodes by spare (bytes above target - reach: a node brought to
 * its aim is not drained past it again), the most first. */
static uint32_t by_spare(bal *b) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < b->p->n; i++)
    if (b->p->sh.eligible[i])
      b->order[m++] = (keyed){b->held[i] - (b->want[i] - reach(b, i)), i};
  qsort(b->order, m, sizeof *b->order, cmp_keyed);
  return m;
}

/* (C) each node below target - band pulls, free arcs first, then the
 * largest arc any donor can spare (the fewest pulls), until it is within
 * its aim. Returns the pulls, or RING_ENOMEM. */
static int64_t fill(bal *b) {
  uint32_t m = by_spare(b);
  int64_t done = 0;
  for (uint32_t i = 0; i < b->p->n; i++) {
    if (!b->p->sh.eligible[i] || (!triggered(b, i) && b->held[i] >= b->want[i] - band(b, i)))
      continue;
    while (b->held[i] < b->want[i] - aim(b, i)) {
      pull best = best_pull(b, m, (uint16_t)i);
      if (best.slot == UINT32_MAX)
        break; /* nothing can come now: a later round or the final check */
      if (!give(b, best.slot, (uint16_t)i))
        return RING_ENOMEM;
      done++;
    }
  }
  return done;
}

/* Each node's bytes held and bytes in arcs within its tol, recounted from
 * the final owners by the verifier's own count. */
static void bytes_small(bal *b) {
  ring__bytes_targets(b->p->target->owners, b->p->T, b->p->R, &b->p->sh, b->size, b->want, b->tol,
                      b->held, b->small);
}

/* Serving nodes outside the objective (plan_int.h), after the floor. */
static uint32_t off_tolerance(const bal *b) {
  uint32_t off = 0;
  for (uint32_t i = 0; i < b->p->n; i++)
    off += b->p->sh.eligible[i] && ring__bytes_off(b->want[i], b->tol[i], b->held[i], b->small[i]);
  return off;
}

static int check_result(const bal *b, ring_error *err) {
  for (uint32_t i = 0; i < b->p->n; i++) {
    double want = b->want[i], off = b->held[i] - want;
    if (b->p->sh.eligible[i] && (off > b->limit || -off > b->limit))
      return ring__err(err, RING_EPLAN,
                       "balance bytes: node %s would hold %.0f bytes, its target is %.0f +- %.0f "
                       "(the largest arc)",
                       b->p->target->nodes[i].id, b->held[i], want, b->limit);
  }
  return RING_OK;
}

/* (B) and (C) in rounds. A node can be over with no room anywhere until
 * (C) has drawn from others, so they alternate while they make progress; a
 * slot moved again is re-pointed, not moved twice, so rounds cost no moves
 * of their own. Bounded: rounds rarely pass two. */
static int rounds(bal *b, ring_error *err) {
  for (uint32_t round = 0; round < ROUNDS_MAX; round++) {
    int64_t out = shed(b), in = out < 0 ? 0 : fill(b);
    if (out < 0 || in < 0)
      return ring__err(err, RING_ENOMEM, "planner: out of memory");
    if (out + in == 0)
      break;
  }
  return RING_OK;
}

/* (A), then rounds under the objective. An arc larger than every node's
 * room under it (it can be past a whole share) may leave a node beyond
 * the floor: rounds under the floor place such arcs, and rounds under the
 * objective again shed the small arcs from where they land. */
static int rebalance(bal *b, ring_error *err) {
  int rc = place_forced(b, err);
  rc = rc == RING_OK ? rounds(b, err) : rc;
  if (rc == RING_OK && check_result(b, NULL) != RING_OK) {
    b->loose = true;
    rc = rounds(b, err);
    b->loose = false;
    rc = rc == RING_OK ? rounds(b, err) : rc;
  }
  return rc;
}

/* Targets follow the final owners (a node pinned at an arc it received
 * leaves less for the others to share), so a node the rounds left within
 * its band can end outside it: rounds again against the final targets,
 * bringing such nodes to their aim, and count again. */
static int retarget(bal *b, ring_error *err) {
  const ring__planner *p = b->p;
  memset(b->bigb, 0, p->n * sizeof *b->bigb);
  for (uint32_t s = 0; s < p->T * p->R; s++) {
    const uint16_t o = p->target->owners[s];
    const double sz = (double)slot_size(b, s);
    b->bigb[o] += sz > b->tol[o] ? sz : 0;
  }
  for (uint32_t i = 0; i < p->n; i++)
    b->trig[i] = b->trig[i] || (p->sh.eligible[i] &&
                                ring__bytes_off(b->want[i], b->tol[i], b->held[i], b->small[i]));
  int rc = rounds(b, err);
  bytes_small(b);
  return rc;
}

/* Triggered nodes left short of their aim. */
static uint32_t short_of_aim(const bal *b) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < b->p->n; i++)
    m += b->trig[i] && b->p->sh.eligible[i] && fabs(b->held[i] - b->want[i]) > aim(b, i) &&
         !(b->held[i] > b->want[i] && b->small[i] <= 0);
  return m;
}

/* The three bounds (the head comment), from the start: at their aims,
 * within tol only, the floor's. */
static int bounds(bal *b, uint32_t lb[3]) {
  int rc = lower_bound(b, &lb[0]);
  b->no_aim = true;
  rc = rc == RING_OK ? lower_bound(b, &lb[1]) : rc;
  b->no_aim = false;
  b->loose = true;
  rc = rc == RING_OK ? lower_bound(b, &lb[2]) : rc;
  b->loose = false;
  return rc;
}

/* How far from its final target the plan leaves node i, as a class:
 * within its aim, within tol, or within the floor (L; an excused
 * node too). */
static double ends_within(const bal *b, uint32_t i) {
  const double off = fabs(b->held[i] - b->want[i]), a = aim(b, i), tol = b->tol[i];
  return off <= a ? a : off <= tol ? tol : b->limit;
}

/* The fewest bytes node i's kept base arcs can shed that reach `need`: at
 * least need, and when its arcs smaller than need cannot reach it together,
 * at least its smallest arc of need or more (a subset reaching need holds
 * one). */
static double least_shed(const bal *b, uint32_t i, double need) {
  double below = 0, smallest_above = -1;
  for (uint32_t k = b->start[i]; k < b->start[i + 1]; k++) {
    const double sz = (double)slot_size(b, b->slots[k]);
    if (sz < need)
      below += sz;
    else
      smallest_above = sz;
  }
  return below >= need || smallest_above < 0 ? need : smallest_above;
}

/* The bytes bound (the head comment): every byte a node ends with beyond
 * its base arcs came from another node, every byte it gives up went to
 * one, and a moved byte is an arc moving once. So a plan that ends every
 * node in the class this plan does moves at least the forced arcs plus
 * what each node above its band sheds to get there (whole arcs: see
 * least_shed), and at least what the nodes receive: each node below its
 * band what it lacks, each node above what it shed past its class below
 * its target. */
static double bytes_bound(const bal *b) {
  double out = 0, in = 0;
  for (uint32_t k = 0; k < b->n_forced; k++)
    out += (double)slot_size(b, b->forced[k]);
  for (uint32_t i = 0; i < b->p->n; i++) {
    if (!b->p->sh.eligible[i])
      continue;
    double held0 = 0; /* its kept base arcs */
    for (uint32_t k = b->start[i]; k < b->start[i + 1]; k++)
      held0 += (double)slot_size(b, b->slots[k]);
    const double want = b->want[i], tol = b->tol[i], c = ends_within(b, i);
    if (held0 > want + tol && held0 - want > c) {
      const double need = held0 - want - c, shed = least_shed(b, i, need);
      out += shed;
      in += fmax(0, shed - need - 2 * c);
    } else if (held0 < want - tol) {
      in += fmax(0, want - c - held0);
    }
  }
  return fmax(out, in);
}

int ring__plan_assign_bytes(ring__planner *p, ring_error *err) {
  bal b = {0};
  uint32_t lb[3] = {0};
  int rc = bal_init(&b, p, err);
  if (rc == RING_OK && bounds(&b, lb) != RING_OK)
    rc = ring__err(err, RING_ENOMEM, "planner: out of memory");
  if (rc == RING_OK)
    rc = rebalance(&b, err);
  if (rc == RING_OK) {
    bytes_small(&b); /* the final targets, as the verifier counts them */
    if (off_tolerance(&b) > 0)
      rc = retarget(&b, err);
  }
  if (rc == RING_OK)
    rc = check_result(&b, err);
  if (rc == RING_OK) {
    p->off_tolerance = off_tolerance(&b);
    p->bytes_bound = (uint64_t)bytes_bound(&b); /* floored: a bound stays a bound */
    p->lower_bound = p->off_tolerance ? lb[2] : short_of_aim(&b) ? lb[1] : lb[0];
    p->byte_target = b.want; /* the plan reports it per node */
    b.want = NULL;
  }
  bal_free(&b);
  return rc;
}
