/*
 * ring_int.h: libring internals shared across its files (ring__ names).
 * Not installed; embedders see only include/ring.h.
 */
#ifndef RING_INT_H
#define RING_INT_H

#include "ring.h"
#include "ringx.h" /* the helpers libring shares with the daemons */

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>

/* A label: offsets of its key ([a-z0-9._-]{1,63}) and value
 * ([A-Za-z0-9._:-]{1,63}) in the node's strings. */
typedef struct ring__label {
  uint16_t key, value;
} ring__label;

/* A node keeps its address and labels in one block of its own, sized to
 * them (a few dozen bytes, where fixed arrays for the longest address and
 * 16 labels took 2.4 KB a node); offsets rather than pointers, so a clone
 * copies the block as it is. */
typedef struct ring__node {
  char id[RING_ID_MAX + 1]; /* unique within the table */
  char *strings;            /* malloc()'ed: the addr (arc server host:port), then each
                               label's key and value, every one NUL-terminated */
  uint32_t strings_len;
  ring__label labels[RING_LABELS_MAX];
  uint32_t n_labels;
  double weight; /* capacity, > 0 */
  ring_node_state state;
  uint64_t id_hash;  /* XXH3(id): rendezvous and sticky identity */
  uint32_t replicas; /* token-replicas owned; set by seal */
} ring__node;

typedef struct ring__pending {
  uint32_t token;
  uint16_t slot;
  uint16_t node;
} ring__pending;

/* The view comes first so that ring_table_view is a cast in spirit and the
 * fields a lookup touches share one cache line.
 *
 * References: a sealed table never changes, so one table may serve several
 * holders (the watchers of one process that follow the same table share
 * the one built from a delta, delta_cache.c). Each holder owns a reference;
 * ring_table_free drops one and frees the table with the last. A new table
 * has one, its builder's; ring__table_ref adds one to a sealed table. */
struct ring_table {
  ring_view view;   /* owners, seed, T, shift, R */
  uint16_t *owners; /* T*R, writable alias of view.owners */
  uint64_t version; /* 1 .. RING_VERSION_MAX */
  char cluster[RING_ID_MAX + 1];
  char failure_domain[RING_ID_MAX + 1]; /* "" if none */
  ring__node *nodes;                    /* n_nodes entries */
  uint32_t n_nodes;
  uint32_t cap_nodes;
  ring__pending *pending; /* sorted by (token, slot), unique */
  uint32_t n_pending;
  uint32_t cap_pending;
  uint32_t *index;       /* id hash -> node index + 1, open addressing */
  uint32_t cap_index;    /* power of two, >= 2 * n_nodes, or 0 */
  uint32_t n_serving;    /* nodes owning a token, not down/removed; set by seal */
  uint64_t owners_sum;   /* ring__owners_checksum's value, when sum_known */
  bool sum_known;        /* owners_sum is the owners' checksum: set by seal (or by a decoder
                            that verified it just before sealing), cleared by an owner change */
  bool sealed;           /* validated and frozen */
  _Atomic uint32_t refs; /* holders; the table is freed when the last one frees it */
};

static inline const char *ring__node_addr(const ring__node *n) { return n->strings; }
static inline const char *ring__label_key(const ring__node *n, uint32_t i) {
  return n->strings + n->labels[i].key;
}
static inline const char *ring__label_value(const ring__node *n, uint32_t i) {
  return n->strings + n->labels[i].value;
}

/* A node record as a builder spec with the given state; the strings stay
 * the record's. keys/values hold RING_LABELS_MAX entries. */
ring_node_spec ring__node_spec(const ring__node *n, ring_node_state state, const char **keys,
                               const char **values);

/* Full validation of a table's contents (what seal and decode check). */
int ring__table_validate(const ring_table *t, ring_error *err);
/* Seals t when it is known valid outside the listed tokens: what
 * ring_table_seal does, in O(n_tokens*R^2 + pending) instead of O(T*R^2).
 * For the delta codec, whose result is a sealed base with some slots
 * changed. The caller vouches that (a) every token not in tokens[] (sorted
 * ascending, each once) has valid owners: in range and distinct; (b) each
 * node's `replicas` already counts its slots; (c) the pending entries are
 * sorted by (token, slot). What it checks then is exactly what
 * ring__table_validate would find wrong, with the same code and message:
 * R against the node count, the listed tokens' owners, every pending
 * entry. On RING_OK t is sealed; on failure t is unchanged. */
int ring__table_seal_tokens(ring_table *t, const uint32_t *tokens, uint32_t n_tokens,
                            ring_error *err);
/* Adds a holder to a sealed table (ring_table_free drops it); returns t. */
ring_table *ring__table_ref(const ring_table *t);
/* Whether two tables hold the same contents: version, cluster, failure
 * domain, seed, T, R, every node record, owner and pending entry. Exact
 * (no hash decides it); O(1) when a == b, O(T*R) at worst. */
bool ring__table_same(const ring_table *a, const ring_table *b);
/* Whether two node records are the same: id, addr, labels, weight, state. */
bool ring__node_same(const ring__node *a, const ring__node *b);
/* Whether a node takes traffic: it owns a token and is not down or removed. */
static inline bool ring__node_serves(const ring__node *n) {
  return n->replicas > 0 && n->state != RING_NODE_DOWN && n->state != RING_NODE_REMOVED;
}

/* Recomputes per-node replica counts and n_serving; marks sealed. */
void ring__table_freeze(ring_table *t);

/* XXH3 over the owners as little-endian bytes, whatever the host order.
 * O(1) for a sealed table (seal keeps it), O(T*R) otherwise. */
uint64_t ring__owners_checksum(const ring_table *t);

/* A 64-bit finalizer (from SplitMix64/Stafford): spreads combined hashes. */
static inline uint64_t ring__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

uint64_t ring__hash(const void *key, size_t len, uint64_t seed);

/* Index of the first pending entry of a token (n_pending if none). */
uint32_t ring__pending_first(const ring_table *t, uint32_t token);

#endif /* RING_INT_H */
