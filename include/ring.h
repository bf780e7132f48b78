/*
 * ring.h: the public interface of libring, Ringkeeper's embeddable library.
 *
 * Sections:
 *   1. versions, export macro, errors
 *   2. the fixed-token table: decode, encode, build, inspect
 *   3. key lookup: token, owners, write set, read replica (rendezvous)
 *   4. bounded-load routing (consistent hashing with bounded loads)
 *   5. the live holder: lock-free readers, atomic swaps
 *   6. the planner and the verifiers
 *   7. deltas between table versions
 * The etcd client and the live ring watcher are in ring_etcd.h.
 *
 * Ownership, stated once: a function that returns a pointer through `**out`
 * hands the caller an object it must release with the matching *_free();
 * pointers returned directly (const char *, const ring_table *) are borrowed
 * and live as long as the object they came from. Output parameters are
 * written only on success. Every *_free(NULL) is a no-op. A struct the
 * caller owns (ring_kvs, ring_kv, ring_txn_result, ring_leadership) is
 * filled in place; its *_clear() frees what it holds, not the struct, and
 * leaves it empty (clearing twice is safe).
 *
 * Errors: functions return RING_OK (0) or a negative ring_errno value. Where
 * detail helps (decoding, validation) they also fill a caller-supplied
 * ring_error, which may be NULL.
 */
#ifndef RING_H
#define RING_H

#include "ring_version.h" /* RING_VERSION_*, generated from the build's project() */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RING_BUILDING) && defined(__GNUC__)
#define RING_EXTERN __attribute__((visibility("default")))
#else
#define RING_EXTERN /* nothing */
#endif

/* ---------------------------------------------------------------- 1. errors */

/* XX(name, number, message). Numbers are stable: they appear in logs. */
#define RING_ERRNO_MAP(XX)                                                                         \
  XX(EINVAL, 1, "invalid argument")                                                                \
  XX(ENOMEM, 2, "out of memory")                                                                   \
  XX(ETOOBIG, 3, "input too large")                                                                \
  XX(EJSON, 4, "malformed JSON")                                                                   \
  XX(EFORMAT, 5, "unknown table format")                                                           \
  XX(EFIELD, 6, "missing, unknown or mistyped field")                                              \
  XX(ETOKENS, 7, "token count is not a power of two in [64, 65536]")                               \
  XX(EREPLICAS, 8, "replica count out of range")                                                   \
  XX(EHASH, 9, "unsupported hash")                                                                 \
  XX(ENODEID, 10, "malformed node id")                                                             \
  XX(EDUPNODE, 11, "duplicate node id")                                                            \
  XX(ENODE, 12, "malformed node record")                                                           \
  XX(EOWNERS, 13, "malformed owners array")                                                        \
  XX(EINDEX, 14, "node index out of range")                                                        \
  XX(EDUPOWNER, 15, "a token's owners are not distinct")                                           \
  XX(ECHECKSUM, 16, "checksum mismatch")                                                           \
  XX(EPENDING, 17, "malformed pending entry")                                                      \
  XX(EVERSION, 18, "version out of range")                                                         \
  XX(ESTALE, 19, "version is not newer than the current one")                                      \
  XX(ERANGE, 20, "output buffer too small")                                                        \
  XX(ENOTFOUND, 21, "not found")                                                                   \
  XX(EUNAVAIL, 22, "no eligible node")                                                             \
  XX(EBUSY, 23, "busy: held elsewhere, or called inside a read section")                           \
  XX(EPLAN, 24, "no plan can meet the placement rules")                                            \
  XX(EUNKNOWN, 25, "outcome unknown: re-read before acting")                                       \
  XX(EAUTH, 26, "authentication failed")                                                           \
  XX(ENOTLEADER, 27, "leadership lost")                                                            \
  XX(ECONFLICT, 28, "a compare did not hold")                                                      \
  XX(ECONNECT, 29, "no etcd endpoint reachable")                                                   \
  XX(ETIMEDOUT, 30, "timed out")                                                                   \
  XX(EPROTO, 31, "malformed response")                                                             \
  XX(ESERVER, 32, "etcd returned an error")                                                        \
  XX(EIO, 33, "I/O error")                                                                         \
  XX(EEXIST, 34, "already exists")                                                                 \
  XX(ENOSPC, 35, "no space left on device")

typedef enum ring_errno {
  RING_OK = 0,
#define RING_ERRNO_ENUM(name, num, msg) RING_##name = -(num),
  RING_ERRNO_MAP(RING_ERRNO_ENUM)
#undef RING_ERRNO_ENUM
} ring_errno;

/* Part of the ABI (the size of ring_error, which the library fills): not
 * an embedder's to change. */
#define RING_ERROR_MESSAGE_MAX 256

/* Detail for a failed call: the code it returned and a message that names
 * the offending field and value, e.g. `nodes[2].id: duplicate id "n1"`. */
typedef struct ring_error {
  int code;                             /* a ring_errno, RING_OK if none */
  char message[RING_ERROR_MESSAGE_MAX]; /* NUL-terminated, never empty on error */
} ring_error;

/* Returns a static string for a ring_errno code ("unknown error" otherwise). */
RING_EXTERN const char *ring_strerror(int code);

/* The version of the library the program runs against, e.g. "0.2.0"
 * (static). Compare with RING_VERSION_STRING, the headers' version: while
 * libring is 0.x, a different minor version is a different ABI (the
 * SONAME is libring.so.0.<minor>). */
RING_EXTERN const char *ring_version(void);

/* -------------------------------------------------------------- 2. tables */

/* Limits. They are the library's, fixed when it was built: sizes of
 * public structs and the formats depend on them, so none is overridable. */
#define RING_TOKENS_MIN 64u
#define RING_TOKENS_MAX 65536u
#define RING_REPLICAS_MAX 7
#define RING_NODES_MAX 65535u /* indexes are uint16; 0xFFFF means "none" */
#define RING_NODE_NONE 0xFFFFu
#define RING_ID_MAX 63 /* node ids and cluster names: [a-z0-9._-]{1,63} */
#define RING_ADDR_MAX 255
#define RING_LABELS_MAX 16
#define RING_VERSION_MAX 9007199254740991ull /* 2^53-1: exact in every JSON reader */
#define RING_TABLE_JSON_MAX (64u << 20)      /* the largest table the decoder reads */

/* 1 when s is a valid node id or cluster name, [a-z0-9._-]{1,63}; 0
 * otherwise (NULL too). The one home of that rule: the codecs, the daemons'
 * flags and ringctl's arguments all ask here. */
RING_EXTERN int ring_id_valid(const char *s);

typedef enum ring_node_state {
  RING_NODE_JOINING = 0,
  RING_NODE_ACTIVE,
  RING_NODE_DRAINING,
  RING_NODE_DOWN,
  RING_NODE_REMOVED
} ring_node_state;

/* An immutable, versioned placement: T tokens x R replica slots. */
typedef struct ring_table ring_table;

/* Read-only view of the fields a lookup needs, for the inline fast path in
 * ring_inline.h. Valid as long as the table.
 * Its layout is part of the ABI: ring_inline.h's functions are compiled
 * into the embedder and read these fields directly, so a change to the
 * struct is a new SONAME (a new minor version while 0.x), never a patch. */
typedef struct ring_view {
  const uint16_t *owners; /* T*R node indexes, token-major: owners[t*R+r] */
  uint64_t seed;          /* XXH3 seed */
  uint32_t tokens;        /* T */
  uint32_t shift;         /* 64 - log2(T) */
  uint32_t replicas;      /* R */
} ring_view;

/* Parses and validates a table in the ringkeeper.table.v1 encoding
 * (proto/table.md). On success *out owns a new table (ring_table_free it).
 * On failure returns a negative ring_errno, fills err (if not NULL) with
 * the offending field, and leaves *out untouched. Never reads past len. */
RING_EXTERN int ring_table_decode(const char *json, size_t len, ring_table **out, ring_error *err);

/* Encodes a table canonically. *json receives a malloc()'ed, NUL-terminated
 * string that MUST be free()d; *len its length without the NUL. Decoding the
 * result and encoding again gives the same bytes. */
RING_EXTERN int ring_table_encode(const ring_table *t, char **json, size_t *len);

/* Releases a table the caller was given. A sealed table never changes, so
 * libring may hand one table to several holders (the watchers of one
 * process that follow the same table share the one built from a delta);
 * it is freed when the last of them frees it. Each holder frees it once,
 * as always. */
RING_EXTERN void ring_table_free(ring_table *t);

/* Parameters of a new, empty table. Strings are copied. */
typedef struct ring_table_params {
  const char *cluster;        /* [a-z0-9._-]{1,63} */
  const char *failure_domain; /* a label key, e.g. "zone"; NULL or "" for none */
  uint64_t version;           /* 1 .. RING_VERSION_MAX */
  uint64_t seed;              /* XXH3 seed, 0 .. RING_VERSION_MAX */
  uint32_t tokens;            /* power of two in [64, 65536] */
  uint32_t replicas;          /* 1 .. 7 */
} ring_table_params;

/* One node as the builder takes it. Strings are copied. */
typedef struct ring_node_spec {
  const char *id;                /* [a-z0-9._-]{1,63} */
  const char *addr;              /* host:port of its arc server */
  const char *const *label_keys; /* n_labels keys, e.g. "zone" */
  const char *const *label_values;
  uint32_t n_labels;
  double weight; /* > 0, <= 1e6 */
  ring_node_state state;
} ring_node_spec;

/* Building a table: ring_table_new, ring_table_add_node for each node, then
 * ring_table_set_owner / ring_table_add_pending, then ring_table_seal. A
 * table is mutable until sealed; decoded and cloned-then-sealed tables are
 * sealed. Lookups and encoding need a sealed table. */
RING_EXTERN int ring_table_new(const ring_table_params *p, ring_table **out, ring_error *err);
/* Appends a node; its index (0, 1, ...) is written to *index if not NULL. */
RING_EXTERN int ring_table_add_node(ring_table *t, const ring_node_spec *n, uint16_t *index,
                                    ring_error *err);
RING_EXTERN int ring_table_set_owner(ring_table *t, uint32_t token, uint32_t slot, uint16_t node);
/* Marks `node` as the pending owner of (token, slot). */
RING_EXTERN int ring_table_add_pending(ring_table *t, uint32_t token, uint32_t slot, uint16_t node);
/* Drops every pending entry (a cutover clone starts from this). */
RING_EXTERN void ring_table_clear_pending(ring_table *t);
/* Validates everything ring_table_decode validates and freezes the table.
 * On failure the table stays unsealed and err names the problem. */
RING_EXTERN int ring_table_seal(ring_table *t, ring_error *err);
/* Copies a table into a new unsealed one with the given version (nodes,
 * owners and pending entries copied), for building the next version. */
RING_EXTERN int ring_table_clone(const ring_table *t, uint64_t version, ring_table **out);
/* Changes a node's state or weight in an unsealed table. */
RING_EXTERN int ring_table_set_node(ring_table *t, uint16_t index, ring_node_state state,
                                    double weight);

/* Accessors. Out-of-range arguments give 0, NULL or RING_NODE_NONE. */
RING_EXTERN uint64_t ring_table_version(const ring_table *t);
RING_EXTERN const char *ring_table_cluster(const ring_table *t);
RING_EXTERN const char *ring_table_failure_domain(const ring_table *t); /* "" if none */
RING_EXTERN uint64_t ring_table_seed(const ring_table *t);
RING_EXTERN uint32_t ring_table_tokens(const ring_table *t);
RING_EXTERN uint32_t ring_table_replicas(const ring_table *t);
RING_EXTERN uint32_t ring_table_node_count(const ring_table *t);
RING_EXTERN const ring_view *ring_table_view(const ring_table *t);
RING_EXTERN const char *ring_table_node_id(const ring_table *t, uint16_t index);
RING_EXTERN const char *ring_table_node_addr(const ring_table *t, uint16_t index);
RING_EXTERN double ring_table_node_weight(const ring_table *t, uint16_t index);
RING_EXTERN ring_node_state ring_table_node_state(const ring_table *t, uint16_t index);
/* The value of label `key` on a node, NULL if the node has no such label. */
RING_EXTERN const char *ring_table_node_label(const ring_table *t, uint16_t index, const char *key);
/* How many labels a node has, and the k-th one in stored order (RING_OK,
 * or RING_EINVAL when out of range; *key and *value untouched then). */
RING_EXTERN uint32_t ring_table_node_label_count(const ring_table *t, uint16_t index);
RING_EXTERN int ring_table_node_label_at(const ring_table *t, uint16_t index, uint32_t k,
                                         const char **key, const char **value);
/* Token-replicas the node owns in a sealed table. */
RING_EXTERN uint32_t ring_table_node_replicas(const ring_table *t, uint16_t index);
/* Index of the node with this id, or RING_ENOTFOUND. */
RING_EXTERN int ring_table_find_node(const ring_table *t, const char *id);
RING_EXTERN uint16_t ring_table_owner(const ring_table *t, uint32_t token, uint32_t slot);
/* Pending owner of (token, slot), RING_NODE_NONE when the slot is settled. */
RING_EXTERN uint16_t ring_table_pending(const ring_table *t, uint32_t token, uint32_t slot);
RING_EXTERN uint32_t ring_table_pending_count(const ring_table *t);
/* The i-th pending entry in (token, slot) order. */
RING_EXTERN int ring_table_pending_at(const ring_table *t, uint32_t i, uint32_t *token,
                                      uint32_t *slot, uint16_t *node);
RING_EXTERN const char *ring_node_state_name(ring_node_state s);
/* Parses a state name; returns the state or RING_EINVAL. */
RING_EXTERN int ring_node_state_parse(const char *name);

/* ------------------------------------------------------------- 3. lookup */

/* The token owning a key: the top log2(T) bits of XXH3_64(key, seed). */
RING_EXTERN uint32_t ring_table_token(const ring_table *t, const void *key, size_t len);

/* The token owning a 64-bit hash: its top log2(T) bits. Token i is the arc
 * [i*2^64/T, (i+1)*2^64/T). */
RING_EXTERN uint32_t ring_table_token_of_hash(const ring_table *t, uint64_t hash);

/* Writes the key's token's owners, in slot order, to owners[0..max) and
 * returns how many were written: min(R, max). A caller wanting only the
 * primary passes max = 1. RING_EINVAL for a NULL table/key or max < 1. */
RING_EXTERN int ring_lookup(const ring_table *t, const void *key, size_t len, uint16_t *owners,
                            int max);

/* The write set of a token: its R owners in slot order, then the pending
 * owners of its slots. Returns the count, RING_ERANGE if max cannot hold the
 * whole set (a partial write set would lose writes), RING_EINVAL otherwise. */
RING_EXTERN int ring_write_set(const ring_table *t, uint32_t token, uint16_t *nodes, int max);

/* Picks the replica that serves reads of a key: among the token's owners
 * that are not down or removed, the one with the highest weighted
 * rendezvous score -w/ln(u), u = hash(key, node) in (0,1). Reads of one key
 * always go to one replica; across keys, a node gets reads in proportion to
 * its weight. Returns RING_OK and writes *node, or RING_EUNAVAIL when every
 * owner is down. */
RING_EXTERN int ring_read_replica(const ring_table *t, const void *key, size_t len, uint16_t *node);

/* The weighted rendezvous pick among `n` candidate nodes of `t`. Returns the
 * position in `candidates` of the winner, or RING_EINVAL if n < 1. */
RING_EXTERN int ring_rendezvous_pick(const ring_table *t, uint64_t key_hash,
                                     const uint16_t *candidates, int n);

/* ---------------------------------------------------- 4. bounded loads */

/* Routing with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018): a key
 * goes to the first node in its preference order (its token's owners in slot
 * order, then the owners of the following tokens clockwise) whose load is
 * under cap = ceil(c * (total + 1) / n), n the nodes that own tokens and are
 * not down. A node that reaches the cap is skipped until its load falls to
 * cap * (1 - margin) (hysteresis, so a node near the cap does not flap), and
 * a key placed away from its first choice sticks to that node for ttl while
 * it stays eligible (a bounded map; the oldest entries give way). One router
 * per thread, or lock it: routing updates its state. */
typedef struct ring_bounded ring_bounded;

typedef struct ring_bounded_opts {
  double c;                 /* load factor >= 1, e.g. 1.25 */
  double margin;            /* hysteresis in [0, 1), e.g. 0.05 */
  uint32_t sticky_capacity; /* entries in the sticky map; 0 disables it */
  uint64_t sticky_ttl_ms;   /* how long a placed key stays put after last use */
} ring_bounded_opts;

RING_EXTERN int ring_bounded_new(const ring_bounded_opts *o, ring_bounded **out);
RING_EXTERN void ring_bounded_free(ring_bounded *b);

/* Routes a key. loads[i] is the caller's current load of node i (one entry
 * per node of t); total is their sum. now_ms is the caller's monotonic clock.
 * Writes the chosen node to *node and, if first_choice is not NULL, whether
 * it is the key's first choice. Returns RING_OK, RING_EUNAVAIL if no serving
 * node is under the cap, RING_EINVAL on bad arguments, RING_ENOMEM if the
 * per-node state cannot grow to a larger table (the router is unchanged).
 * The caller updates loads. */
RING_EXTERN int ring_bounded_route(ring_bounded *b, const ring_table *t, const void *key,
                                   size_t len, const uint64_t *loads, uint64_t total,
                                   uint64_t now_ms, uint16_t *node, int *first_choice);

/* ------------------------------------------------------- 5. live holder */

/* Holds the current table for any number of reader threads. Readers enter a
 * read section, look up in the table they got, and exit; they take no lock
 * and write no shared cache line (each thread writes only its own epoch
 * slot). A writer swaps in a newer table atomically and frees the old one
 * once every reader that could see it has exited. */
typedef struct ring_live ring_live;

RING_EXTERN int ring_live_new(ring_live **out);
/* Frees the holder and its current table. No reader may be inside. */
RING_EXTERN void ring_live_free(ring_live *l);

/* Begins a read section and returns the current table (NULL before the
 * first swap). The table stays valid until ring_live_exit. Sections nest;
 * keep them short: a writer waits for them. */
RING_EXTERN const ring_table *ring_live_enter(ring_live *l);
RING_EXTERN void ring_live_exit(ring_live *l);

/* Installs a sealed table whose version is newer than the current one and
 * frees the previous table after a grace period. Takes ownership of t on
 * success only. RING_ESTALE if t is not newer (t stays the caller's),
 * RING_EBUSY if called inside a read section (it would wait for itself).
 * The grace period is process-wide: reader threads register once in one
 * registry shared by every holder, and a swap waits until each thread
 * inside a read section on *any* holder has left it (or moved to a newer
 * epoch). So a long read section on one holder delays swaps on all of
 * them; keep sections to the lookup itself. */
RING_EXTERN int ring_live_swap(ring_live *l, ring_table *t);

/* The current version, 0 before the first swap. */
RING_EXTERN uint64_t ring_live_version(ring_live *l);

/* ------------------------------------------------------------ 6. planner */

/* The planner turns (current table, desired nodes, config) into a target
 * table and the moves that reach it, grouped into throttled waves. It
 * keeps the invariants of docs/DESIGN.md: distinct owners; distinct hard failure
 * domains (else it refuses and names the violations); every node within
 * one token-replica of its weighted target; minimal movement (every plan
 * reports its moves next to the lower bound); at most one replica of a
 * token per wave; no throttle limit exceeded. Same input, same plan. */
typedef struct ring_plan ring_plan;

/* What "balanced" counts. Tokens: every node within one token-replica of
 * its weighted target. Bytes (needs a current table and per-token sizes):
 * every serving node's bytes held within RING_BALANCE_TOLERANCE of its
 * target (but never looser than the largest arc): its weighted share of
 * all bytes held (a token whose arc is 10x the mean counts 10x), except
 * that a node whose largest arc passes its whole share + tolerance is
 * pinned at that arc and the others share the rest by weight. A node above
 * its band that holds only arcs larger than its tolerance is excused (it
 * cannot split them); a node that must change is brought within
 * RING_BALANCE_AIM of the tolerance (its aim). Nodes the planner cannot
 * bring there are stated (ring_plan_bytes_off_tolerance); the floor every
 * plan keeps is each node within the largest arc of its target. */
#define RING_BALANCE_TOLERANCE 0.10
/* The aim, as a fraction of a node's tolerance: well inside it, so a node
 * that had to change does not stop on the edge and drift out again, and so
 * the nodes a re-plan brings in (they stop near the aim's edge: the fewest
 * bytes) keep the mean deviation well under half the tolerance
 * (test_plan_bytes_scale: at 1,000 hosts 3.6% of a share; 4.1% with half
 * the tolerance for the aim). */
#define RING_BALANCE_AIM 0.4
typedef enum ring_balance { RING_BALANCE_TOKENS = 0, RING_BALANCE_BYTES = 1 } ring_balance;

typedef struct ring_plan_config {
  const char *cluster;         /* used when there is no current table */
  uint32_t tokens;             /* T, when there is no current table */
  uint32_t replicas;           /* R, when there is no current table */
  uint64_t seed;               /* hash seed, when there is no current table */
  const char *failure_domain;  /* hard level: a label key, NULL or "" for none */
  const char *best_effort;     /* soft level: a label key, NULL or "" for none */
  uint32_t max_moves_per_node; /* concurrent moves a node takes part in (in + out); 0 = no limit */
  uint32_t max_moves_per_domain; /* concurrent moves touching one hard domain; 0 = no limit */
  uint32_t max_moves_per_wave;   /* moves in one wave; 0 = no limit */
  const uint64_t *arc_bytes;     /* bytes held per token (T entries), or NULL */
  ring_balance balance;          /* RING_BALANCE_TOKENS (0) unless asked */
  /* Bytes balance: the per-token sizes it weighs (T entries, each below
   * 2^48); NULL means arc_bytes. A plan that must be recomputed exactly
   * (proto/plan.md) passes the quantised sizes it stored here. */
  const uint64_t *balance_sizes;
} ring_plan_config;

/* One token-replica changing hands. Node indexes are the target table's. */
typedef struct ring_move {
  uint32_t token;
  uint32_t slot;
  uint16_t from;   /* the owner in the current table */
  uint16_t to;     /* the new owner */
  uint16_t source; /* the node to stream from: from, or a live replica when from is down;
                      RING_NODE_NONE when no live replica is left (data lost) */
  uint32_t wave;   /* 0-based */
} ring_move;

/* Computes a plan. `current` may be NULL (initial placement). `nodes` is the
 * desired membership: a node of `current` missing from it counts as removed;
 * nodes in state active or joining receive replicas by weight, draining,
 * down and removed nodes give all theirs up. The target table's version is
 * current's + 1 (1 without a current table); its node indexes keep
 * current's, new nodes are appended, and removed nodes that owned nothing
 * are dropped. On success *out owns the plan (ring_plan_free). When a hard
 * rule cannot be met the plan is refused: RING_EPLAN, err naming the first
 * violation, and ring_plan_* are not available (*out untouched). */
RING_EXTERN int ring_plan_compute(const ring_table *current, const ring_node_spec *nodes,
                                  uint32_t n_nodes, const ring_plan_config *cfg, ring_plan **out,
                                  ring_error *err);
RING_EXTERN void ring_plan_free(ring_plan *p);

/* The target table (sealed, borrowed from the plan, no pending entries). */
RING_EXTERN const ring_table *ring_plan_target(const ring_plan *p);
/* Current-table version the plan starts from (0 without a current table). */
RING_EXTERN uint64_t ring_plan_base_version(const ring_plan *p);
RING_EXTERN uint32_t ring_plan_move_count(const ring_plan *p);
/* Moves in (wave, token, slot) order. */
RING_EXTERN const ring_move *ring_plan_moves(const ring_plan *p);
RING_EXTERN uint32_t ring_plan_wave_count(const ring_plan *p);
/* The fewest moves any plan for this input could make. Tokens balance:
 * token-replicas on nodes that must give them up, plus each node's excess
 * over its quota. Bytes balance (tol: RING_BALANCE_TOLERANCE of a node's
 * share; the aim: RING_BALANCE_AIM of tol): the largest of (the replicas
 * that must move, plus for each node above its share + tol, the fewest of
 * its arcs whose bytes bring it to its share + aim, or its arcs of at most
 * tol when fewer) and (for each node below its share - tol, the fewest of
 * all arcs whose bytes bring it up to its share - aim) and (the replicas
 * that must move plus the fewest donor moves, each worth min(arc, what its
 * donor holds above its own share - tol), that cover those shortfalls past
 * the forced arcs' bytes) and (per hard domain whose share is a replica of
 * every token, the tokens with no replica there, but for the smallest that
 * its nodes' tol each can leave out). A plan with nodes off tolerance
 * reports the same counts with the largest arc for tol and aim and no donor
 * count (libring/plan_bytes.c says why each holds). */
RING_EXTERN uint32_t ring_plan_lower_bound(const ring_plan *p);
/* Tokens whose owners repeat a best-effort domain value in the target. */
RING_EXTERN uint32_t ring_plan_best_effort_violations(const ring_plan *p);
/* Bytes balance: serving nodes the plan could not bring within the
 * tolerance (and not excused for holding only arcs larger than it); 0
 * under token balance. ring_plan_verify recounts it. */
RING_EXTERN uint32_t ring_plan_bytes_off_tolerance(const ring_plan *p);
/* Sum of arc_bytes over the moves (0 without arc sizes). */
RING_EXTERN uint64_t ring_plan_bytes(const ring_plan *p);
/* Bytes balance: the fewest bytes any plan could move (in the sizes the
 * plan weighed) that ends every node as close to its target as this one
 * does (within its aim, within the tolerance, or within the floor): the
 * forced arcs plus what each node above its band must shed to get there
 * in whole arcs of its own, or what the nodes must receive (each node
 * below its band what it lacks, each node above what its shed took it past
 * its class below the target), whichever is more. Plans land above it by
 * how the arcs fall and by bytes moved twice; the ratio says how far.
 * ring_plan_verify checks no plan moves fewer. 0 under token balance. */
RING_EXTERN uint64_t ring_plan_bytes_bound(const ring_plan *p);
/* Moves whose every replica is down: their data cannot be streamed. */
RING_EXTERN uint32_t ring_plan_lost_moves(const ring_plan *p);

/* Per-node load before and after, against the weighted target. Index is the
 * target table's. before counts the current table (0 for new nodes). */
typedef struct ring_plan_load {
  uint32_t before;
  uint32_t after;
  double target; /* fractional weighted target, domain caps applied */
} ring_plan_load;
RING_EXTERN int ring_plan_node_load(const ring_plan *p, uint16_t index, ring_plan_load *out);

/* Bytes balance: a node's bytes held before (0 for new nodes) and after,
 * and its target (its weighted share, or the arc it is pinned at, as
 * RING_BALANCE_TOLERANCE's comment says), under the sizes the plan weighed.
 * RING_EINVAL for a plan balanced by tokens. Index is the target table's. */
typedef struct ring_plan_bytes_load {
  double before;
  double after;
  double target;
} ring_plan_bytes_load;
RING_EXTERN int ring_plan_node_bytes(const ring_plan *p, uint16_t index, ring_plan_bytes_load *out);

/* Verification, for tests and `ringctl verify`. Each checker appends one
 * line per violation to `report` (a malloc()'ed, NUL-terminated string the
 * caller free()s; NULL when clean or when report is NULL) and returns the
 * number of violations found (lines beyond the first 100 are counted but
 * not written), or a negative ring_errno. */

/* Checks a sealed table: distinct hard failure domains per token when the
 * table has at least R of them among serving nodes; every node within one
 * token-replica of its weighted target (domain caps applied); nodes that
 * are draining, down or removed own nothing. `failure_domain` NULL means the
 * table's own. */
RING_EXTERN int ring_table_verify(const ring_table *t, const char *failure_domain, char **report);

/* ring_table_verify without the balance rule: hard domains and leavers
 * only (a table balanced by bytes, checked where sizes are not at hand). */
RING_EXTERN int ring_table_verify_rules(const ring_table *t, const char *failure_domain,
                                        char **report);

/* ring_table_verify with bytes balance: each serving node's bytes held
 * (sizes: T entries, each below 2^48) within the largest arc of its
 * weighted share of all bytes held, instead of the token-replica rule. */
RING_EXTERN int ring_table_verify_bytes(const ring_table *t, const char *failure_domain,
                                        const uint64_t *sizes, char **report);

/* Checks a plan against its base and config: the target passes
 * ring_table_verify; applying the moves to the base gives the target;
 * every move's from/source are right; at most one move per token per wave,
 * and after every wave the intermediate table keeps owners distinct and
 * hard domains distinct (where the base did); no throttle limit exceeded;
 * the move count is at least the lower bound; under bytes balance, the
 * nodes off tolerance are the count the plan states. How close a plan comes to
 * the bound is the property tests' business, not a rule of every plan. */
RING_EXTERN int ring_plan_verify(const ring_table *base, const ring_plan *p,
                                 const ring_plan_config *cfg, char **report);

/* ------------------------------------------------------------- 7. deltas */

/* A delta (ringkeeper.delta.v1, proto/delta.md) is what changed from one
 * table to a newer one of the same cluster: changed and appended node
 * records, dropped nodes, moved owner slots, the new pending list, and the
 * owners checksums of both tables. A client one version behind applies
 * deltas/<v> instead of reading tables/<v>. */

/* Encodes the delta from `from` to `to`, two sealed tables of one cluster
 * with the same T, R, seed and failure domain, `to` of any newer version.
 * Dropped and reordered nodes are expressed too, so every such pair has a
 * delta. *json receives a malloc()'ed, NUL-terminated string that MUST be
 * free()d; *len (if not NULL) its length without the NUL. Returns RING_OK;
 * RING_EINVAL for NULL or unsealed tables, RING_EFIELD when the clusters
 * or failure domains differ, RING_ETOKENS / RING_EREPLICAS / RING_EHASH
 * when T, R or the seed differ, RING_ESTALE when `to` is not newer,
 * RING_ENOMEM; on failure *json and *len are untouched. */
RING_EXTERN int ring_delta_encode(const ring_table *from, const ring_table *to, char **json,
                                  size_t *len);

/* Applies a delta to `base` (sealed). On success *out owns a new sealed
 * table (ring_table_free it) equal to the table the delta was made from:
 * both encode to the same bytes. On failure returns a negative ring_errno
 * (RING_EVERSION or RING_ECHECKSUM when `base` is not the delta's base),
 * fills err (if not NULL) naming the offending field, and leaves *out
 * untouched; base is never modified. Never reads past len. */
RING_EXTERN int ring_delta_apply(const ring_table *base, const char *json, size_t len,
                                 ring_table **out, ring_error *err);

#ifdef __cplusplus
}
#endif
#endif /* RING_H */
