/*
 * bounded.c: routing with bounded loads (Mirrokni, Thorup, Zadimoghaddam
 * 2018) over a fixed-token table, with hysteresis and a sticky map.
 *
 * Sections: the router; the cap and the hot flags; the sticky map; the
 * preference walk; ring_bounded_route.
 *
 * A key's preference order is its token's owners in slot order, then the
 * owners of the following tokens clockwise. It goes to the first node in
 * that order whose load is under the cap. The cap bounds every node's load
 * to about c times the mean; the hysteresis and the sticky map only choose
 * among nodes under the cap, so they never weaken that bound.
 *
 * Memory is fixed at ring_bounded_new, except the hot flags, which grow to
 * the node count of the largest table routed over (at most RING_NODES_MAX).
 * A router is not thread-safe (ring.h: one per thread, or lock it).
 */
#include "ring_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- the router */

/* Slots a sticky lookup or insert examines. A fixed window keeps a route
 * O(1) however full the map is; eviction within it approximates LRU. */
#define STICKY_WINDOW 8u
/* Largest sticky capacity: rounded up to a power of two it fits a uint32. */
#define STICKY_CAPACITY_MAX (1u << 31)

typedef struct sticky_entry {
  uint64_t key_hash;  /* ring__hash(key, table seed): under a new seed no
                         old entry matches, and the old ones age out */
  uint64_t node_hash; /* id_hash of the node: a reused index does not match */
  uint64_t last_use;  /* now_ms of the placement or the latest hit */
  uint16_t node;      /* node index in the table the key was placed with */
  bool used;          /* false: a free slot */
} sticky_entry;

struct ring_bounded {
  double c;             /* load factor, >= 1 */
  double margin;        /* hysteresis, in [0, 1) */
  uint64_t ttl_ms;      /* a sticky entry lives this long after its last use */
  sticky_entry *sticky; /* sticky_cap entries, NULL when disabled */
  uint32_t sticky_cap;  /* a power of two, or 0 when disabled */
  uint64_t *hot;        /* per node index: hot_tag(node) while hot, else 0 */
  uint32_t cap_hot;     /* entries in hot */
};

static bool valid_opts(const ring_bounded_opts *o) {
  return o->c >= 1 && isfinite(o->c) && o->margin >= 0 && o->margin < 1 &&
         o->sticky_capacity <= STICKY_CAPACITY_MAX;
}

static uint32_t pow2_at_least(uint32_t x) {
  uint32_t p = 1;
  while (p < x)
    p <<= 1;
  return p;
}

/* Returns RING_OK and a new router in *out, RING_EINVAL for bad options
 * (c < 1 or not finite, margin outside [0, 1), capacity above 2^31),
 * RING_ENOMEM; on failure *out is untouched and nothing is allocated. */
int ring_bounded_new(const ring_bounded_opts *o, ring_bounded **out) {
  if (o == NULL || out == NULL || !valid_opts(o))
    return RING_EINVAL;
  ring_bounded *b = calloc(1, sizeof *b);
  if (b == NULL)
    return RING_ENOMEM;
  b->c = o->c;
  b->margin = o->margin;
  b->ttl_ms = o->sticky_ttl_ms;
  if (o->sticky_capacity > 0) {
    b->sticky_cap = pow2_at_least(o->sticky_capacity);
    b->sticky = calloc(b->sticky_cap, sizeof *b->sticky);
    if (b->sticky == NULL) {
      free(b);
      return RING_ENOMEM;
    }
  }
  *out = b;
  return RING_OK;
}

void ring_bounded_free(ring_bounded *b) {
  if (b == NULL)
    return;
  free(b->sticky);
  free(b->hot);
  free(b);
}

/* ------------------------------------------------ the cap and hot flags */

/* What one route knows about the loads: computed once, read per node. */
typedef struct route {
  const ring_table *t;
  const uint64_t *loads; /* the caller's, one per node of t */
  uint64_t cap;          /* a node at or above it takes nothing */
  uint64_t cool;         /* a hot node is eligible again at or below it */
} route;

/* A non-negative double as a uint64, saturating: converting one past
 * 2^64 - 1 is undefined behaviour, and a huge c or total gets there. */
static uint64_t saturate(double x) { return x >= 0x1p64 ? UINT64_MAX : (uint64_t)x; }

/* ceil(c * (total + 1) / n): the paper's bound, which leaves some serving
 * node under the cap whenever total covers their loads. */
static uint64_t load_cap(double c, uint64_t total, uint32_t n) {
  return saturate(ceil(c * ((double)total + 1.0) / n));
}

/* Sizes the hot flags for t's nodes. Growth is geometric and stops at
 * RING_NODES_MAX; on RING_ENOMEM the flags are as they were. */
static int hot_reserve(ring_bounded *b, uint32_t n_nodes) {
  if (n_nodes <= b->cap_hot)
    return RING_OK;
  uint32_t cap = b->cap_hot ? b->cap_hot : 16;
  while (cap < n_nodes)
    cap *= 2;
  if (cap > RING_NODES_MAX)
    cap = RING_NODES_MAX;
  uint64_t *hot = realloc(b->hot, cap * sizeof *hot);
  if (hot == NULL)
    return RING_ENOMEM;
  memset(hot + b->cap_hot, 0, (cap - b->cap_hot) * sizeof *hot);
  b->hot = hot;
  b->cap_hot = cap;
  return RING_OK;
}

/* Fills r for this call: RING_EUNAVAIL if no node serves. */
static int route_init(ring_bounded *b, const ring_table *t, const uint64_t *loads, uint64_t total,
                      route *r) {
  /* n counts nodes that own a token (so they are in every key's preference
   * order) and are not down or removed; the table counted them when sealed. */
  const uint32_t n = t->n_serving;
  if (n == 0)
    return RING_EUNAVAIL;
  int rc = hot_reserve(b, t->n_nodes);
  if (rc != RING_OK)
    return rc;
  r->t = t;
  r->loads = loads;
  r->cap = load_cap(b->c, total, n);
  /* load <= cap * (1 - margin) is load <= floor(...) for integer loads. */
  r->cool = saturate(floor((double)r->cap * (1 - b->margin)));
  return RING_OK;
}

/* The tag a hot flag holds is the node's identity, never 0 (not hot): a
 * flag left at an index that a newer table gives another node is ignored. */
static uint64_t hot_tag(const ring__node *n) { return n->id_hash | 1; }

typedef enum fit {
  FIT_NO,  /* down, without tokens, or at the cap */
  FIT_HOT, /* under the cap but hot: only if nothing else fits */
  FIT_YES  /* eligible */
} fit;

/* Whether node i may take a key now. Updates its hot flag on the way: set
 * when its load reaches the cap, cleared once it falls to `cool`. */
static fit node_fit(ring_bounded *b, const route *r, uint16_t i) {
  const ring__node *n = &r->t->nodes[i];
  if (!ring__node_serves(n))
    return FIT_NO;
  const uint64_t load = r->loads[i], tag = hot_tag(n);
  if (load >= r->cap) {
    b->hot[i] = tag;
    return FIT_NO;
  }
  if (b->hot[i] == tag && load <= r->cool)
    b->hot[i] = 0;
  return b->hot[i] == tag ? FIT_HOT : FIT_YES;
}

/* ----------------------------------------------------------- sticky map */

/* Open addressing without tombstones: every lookup scans its whole window,
 * so freeing a slot never hides an entry behind it. */
static sticky_entry *sticky_at(const ring_bounded *b, uint64_t key_hash, uint32_t i) {
  return &b->sticky[((uint32_t)key_hash + i) & (b->sticky_cap - 1)];
}

static uint32_t sticky_window(const ring_bounded *b) {
  return b->sticky_cap < STICKY_WINDOW ? b->sticky_cap : STICKY_WINDOW;
}

/* A clock that steps back (a monotonic one should not) reads as age 0
 * rather than as an ancient entry. */
static bool alive(const ring_bounded *b, const sticky_entry *e, uint64_t now) {
  return now <= e->last_use || now - e->last_use < b->ttl_ms;
}

/* The key's entry, live or not; NULL if none (or the map is disabled). */
static sticky_entry *sticky_find(const ring_bounded *b, uint64_t key_hash) {
  for (uint32_t i = 0; i < sticky_window(b); i++) {
    sticky_entry *e = sticky_at(b, key_hash, i);
    if (e->used && e->key_hash == key_hash)
      return e;
  }
  return NULL;
}

/* The slot a new key takes: a free one in its window, else the least
 * recently used (the oldest gives way; the map never grows). An expired
 * entry, if the window holds one, is older than any live one, so it is
 * the one replaced. */
static sticky_entry *sticky_victim(const ring_bounded *b, uint64_t key_hash) {
  sticky_entry *lru = NULL;
  for (uint32_t i = 0; i < sticky_window(b); i++) {
    sticky_entry *e = sticky_at(b, key_hash, i);
    if (!e->used)
      return e;
    if (lru == NULL || e->last_use < lru->last_use)
      lru = e;
  }
  return lru;
}

/* The node a live entry holds the key on, if that node (still the same
 * node, by id) may take it now; RING_NODE_NONE otherwise. */
static uint16_t sticky_node(ring_bounded *b, const route *r, const sticky_entry *e, uint64_t now) {
  if (e == NULL || !alive(b, e, now) || e->node >= r->t->n_nodes ||
      r->t->nodes[e->node].id_hash != e->node_hash)
    return RING_NODE_NONE;
  return node_fit(b, r, e->node) == FIT_YES ? e->node : RING_NODE_NONE;
}

/* Records a fresh placement: a key away from its first choice keeps (or
 * takes) an entry; a key back on its first choice needs none. */
static void sticky_record(ring_bounded *b, const ring_table *t, sticky_entry *e, uint64_t key_hash,
                          uint16_t node, bool first, uint64_t now) {
  if (b->sticky == NULL)
    return;
  if (first) {
    if (e != NULL)
      e->used = false;
    return;
  }
  if (e == NULL)
    e = sticky_victim(b, key_hash);
  *e = (sticky_entry){key_hash, t->nodes[node].id_hash, now, node, true};
}

/* ------------------------------------------------------ preference walk */

/* The first eligible node in the preference order starting at `token`,
 * over at most T tokens (by then every serving node has been seen). If
 * every node under the cap is hot, the first of those: the cap is the
 * guarantee and the hysteresis only a preference, so it must not refuse a
 * key some node can take. RING_NODE_NONE if no node is under the cap. */
static uint16_t walk(ring_bounded *b, const route *r, uint32_t token) {
  const ring_table *t = r->t;
  const uint32_t T = t->view.tokens, R = t->view.replicas;
  uint16_t fallback = RING_NODE_NONE;
  for (uint32_t k = 0; k < T; k++) {
    const uint16_t *o = &t->owners[(size_t)((token + k) & (T - 1)) * R];
    for (uint32_t s = 0; s < R; s++) {
      fit f = node_fit(b, r, o[s]);
      if (f == FIT_YES)
        return o[s];
      if (f == FIT_HOT && fallback == RING_NODE_NONE)
        fallback = o[s];
    }
  }
  return fallback;
}

/* --------------------------------------------------- ring_bounded_route */

/* A live sticky entry wins while its node is eligible (the point of the
 * map: a moved key stays where its state now is); otherwise the walk
 * places the key. On any failure nothing is written and the sticky map is
 * unchanged (hot flags may have been updated: they track loads, not keys). */
int ring_bounded_route(ring_bounded *b, const ring_table *t, const void *key, size_t len,
                       const uint64_t *loads, uint64_t total, uint64_t now_ms, uint16_t *node,
                       int *first_choice) {
  if (b == NULL || t == NULL || (key == NULL && len > 0) || loads == NULL || node == NULL ||
      !t->sealed)
    return RING_EINVAL;
  route r;
  int rc = route_init(b, t, loads, total, &r);
  if (rc != RING_OK)
    return rc;
  const uint64_t h = ring__hash(key, len, t->view.seed);
  const uint32_t token = (uint32_t)(h >> t->view.shift);
  const uint16_t first = t->owners[(size_t)token * t->view.replicas];
  sticky_entry *e = sticky_find(b, h);
  uint16_t pick = sticky_node(b, &r, e, now_ms);
  if (pick != RING_NODE_NONE) {
    e->last_use = now_ms;
  } else {
    pick = walk(b, &r, token);
    if (pick == RING_NODE_NONE)
      return RING_EUNAVAIL;
    sticky_record(b, t, e, h, pick, pick == first, now_ms);
  }
  *node = pick;
  if (first_choice != NULL)
    *first_choice = pick == first;
  return RING_OK;
}
