/*
 * cluster.h: a cluster's state as read from etcd, shared by ring-coordinator
 * and ringctl. One read is one etcd txn of range ops for what the control
 * plane writes, then the prefixes hosts write (alive/, acks/, progress/,
 * clients/, missing/) in bounded pages at that txn's revision, so everything in an
 * rk_state comes from one store revision and no reply grows with what
 * every host wrote (proto/etcd.md, "Reading host records").
 *
 * Sections: the snapshot; reading it; tables and their targets; the
 * planner's input.
 */
#ifndef RING_COORD_CLUSTER_H
#define RING_COORD_CLUSTER_H

#include "barrier.h"
#include "host_read.h"
#include "plan_doc.h"
#include "records.h"
#include "ring.h"
#include "sizes.h"
#include "ring_etcd.h"

/* --------------------------------------------------------- the snapshot */

/* What to read: a bit set. */
enum {
  RK_READ_CONFIG = 1u << 0,
  RK_READ_VERSION = 1u << 1, /* the version key (not the table) */
  RK_READ_NODES = 1u << 2,
  RK_READ_ALIVE = 1u << 3,
  RK_READ_PLANS = 1u << 4, /* plan/proposed and plan/active */
  RK_READ_ACKS = 1u << 5,
  RK_READ_PROGRESS = 1u << 6,
  RK_READ_LEADER = 1u << 7,
  RK_READ_CLIENTS = 1u << 8,   /* clients/: data-plane processes in the version barrier */
  RK_READ_STUCK = 1u << 9,     /* the coordinator's report of stuck moves */
  RK_READ_MISSING = 1u << 10,  /* missing/: owned arcs hosts report they lack */
  RK_READ_RECOVERY = 1u << 11, /* recovery/ (hosts' reports of a restored etcd) and recovered */
  RK_READ_ALL = 0xFFFu,        /* everything a step or a status needs; not sizes/: */
  RK_READ_SIZES = 1u << 12     /* sizes/ (arc sizes), read only where a plan is sized */
};

typedef struct rk_agent_progress {
  char id[RING_ID_MAX + 1];
  rk_progress p; /* version 0 and no tokens when malformed */
} rk_agent_progress;

typedef struct rk_agent_missing {
  char id[RING_ID_MAX + 1];
  rk_missing m; /* version 0 and no tokens when malformed */
} rk_agent_missing;
typedef struct rk_agent_sizes {
  char id[RING_ID_MAX + 1];
  rk_sizes z; /* version 0 and no tokens when malformed */
} rk_agent_sizes;

typedef struct rk_agent_recovery {
  char id[RING_ID_MAX + 1];
  rk_recovery r; /* seen_version 0 and no tokens when malformed */
} rk_agent_recovery;

typedef struct rk_alive_entry {
  rk_alive a; /* id set from the key; the rest zero when malformed */
  bool valid; /* the value parsed */
  int64_t lease;
} rk_alive_entry;

/* A record the read ignored: a host value over its cap or malformed (its
 * content is not used; the key's existence still counts, see below), or a
 * leader or stuck value that does not parse. */
typedef enum rk_bad_kind {
  RK_BAD_ALIVE = RK_HOST_ALIVE,
  RK_BAD_ACKS = RK_HOST_ACK,
  RK_BAD_PROGRESS = RK_HOST_PROGRESS,
  RK_BAD_CLIENTS = RK_HOST_CLIENT,
  RK_BAD_MISSING = RK_HOST_MISSING,
  RK_BAD_RECOVERY = RK_HOST_RECOVERY,
  RK_BAD_SIZES = RK_HOST_SIZES,
  RK_BAD_LEADER = RK_HOST_KINDS,
  RK_BAD_STUCK,
  RK_BAD_KINDS
} rk_bad_kind;

#define RK_BAD_WHY_MAX 160

typedef struct rk_bad_record {
  rk_bad_kind kind;
  char host[RING_ID_MAX + 1]; /* the key's id; "" for leader and stuck; a key
                                 whose rest is no id: that rest, cut to 63
                                 bytes, anything but [a-z0-9._-] as '?' */
  int64_t mod_revision;       /* of the value judged */
  uint64_t key_hash;          /* XXH3 of the whole key: which key it came from, so the
                                 watch-fed cache (state_cache.c) replaces it when the
                                 key changes */
  char why[RK_BAD_WHY_MAX];   /* e.g. "1468006 bytes over the 524288 cap" */
} rk_bad_record;

/* "alive", "acks", "progress", "clients", "missing", "leader", "stuck". */
const char *rk_bad_kind_name(rk_bad_kind k);
/* "progress/n3: 1468006 bytes over the 524288 cap" into buf; returns buf. */
const char *rk_bad_text(const rk_bad_record *b, char *buf, size_t size);

typedef struct rk_state {
  int64_t revision; /* the store revision of the read */
  uint64_t stamp;   /* 0 from rk_state_read; a cache's look (state_cache.h) sets a
                       number that changes whenever the content may have changed, so
                       equal nonzero stamps of one cache mean equal content */

  bool has_config;
  rk_config config;
  int64_t config_mod; /* mod revision, for compare-and-swap */

  uint64_t version;    /* 0: no table published yet */
  int64_t version_mod; /* 0 when the key is absent */

  rk_node *nodes; /* sorted by id */
  int64_t *node_mod;
  uint32_t n_nodes;

  rk_alive_entry *alive; /* sorted by id */
  uint32_t n_alive;

  bool has_proposed;
  rk_plan_doc proposed;
  int64_t proposed_mod;
  bool has_active;
  rk_run active;
  int64_t active_mod;

  rd_ack *acks; /* sorted by id (daemon/barrier.h) */
  uint32_t n_acks;
  rk_agent_progress *progress; /* sorted by id */
  uint32_t n_progress;

  bool has_leader;
  rk_leader leader;

  char (*clients)[RING_ID_MAX + 1]; /* names under clients/, sorted */
  uint32_t n_clients;

  rk_agent_missing *missing; /* sorted by id; hosts reporting owned arcs they lack */
  uint32_t n_missing;
  rk_agent_sizes *sizes; /* sorted by id; RK_READ_SIZES only */
  uint32_t n_sizes;

  bool has_stuck; /* the key is there and parsed */
  rk_stuck stuck;
  int64_t stuck_mod; /* its mod revision (also when malformed); 0 when absent */

  rk_agent_recovery *recovery; /* recovery/<id>, sorted by id (restore.c) */
  uint32_t n_recovery;
  bool has_recovered; /* the `recovered` key is there and parsed */
  ring__recovered recovered;

  /* Ignored records, by kind then key. Host values over their cap or
   * malformed: an alive/ key still makes its host alive (valid false: its
   * content is not used to make a node record), an acks/ value reads as
   * version 0, progress/ as no tokens, a clients/ name still takes part in
   * the version barrier; so a bad value never speeds anything up, and
   * liveness never depends on a value's bytes. A leader or stuck value that
   * does not parse counts here too (its writer, the leader, rewrites it; it
   * must not stop the leader's reads). malloc()'ed. */
  rk_bad_record *bad;
  uint32_t n_bad;
} rk_state;

void rk_state_free(rk_state *s); /* frees the contents, not s */

/* Distinct hosts among s's bad host records (alive, acks, progress,
 * clients): the gauge of hosts with a bad record now. */
uint32_t rk_bad_hosts(const rk_state *s);
/* [{"kind","host","why"}] of s's first `max` bad records, as `ringctl status
 * --json` and the status page show them: a new cJSON array the caller
 * deletes, NULL when out of memory. */
struct cJSON *rk_bad_json(const rk_state *s, uint32_t max);

/* ------------------------------------------------------------ reading it */

/* Reads `what` of the cluster: one txn for the control plane's keys, then
 * each host-written prefix asked for in pages at the txn's revision
 * (rd_host_pages, daemon/host_read.h: RD_HOST_PAGE_KEYS keys a request; a
 * revision compacted meanwhile starts the read again, at most 3 times). A
 * malformed config, node record or plan fails the read (RING_EFORMAT /
 * RING_EFIELD / ..., err naming the key): the caller must not act on a
 * state it cannot read whole. Host-written values are tolerated as
 * described above: over its cap a value is dropped as its page arrives,
 * never parsed. RING_OK with has_config false when the cluster was never
 * initialised. On failure *out is untouched. */
int rk_state_read(ring_etcd *c, const char *cluster, unsigned what, rk_state *out, ring_error *err);

/* Whether a and b hold the same records (state_diff.c): the same keys,
 * mod revisions where the state keeps them, records that encode alike,
 * the same bad list. Not compared: revision (a cache and a read of one
 * store revision may name different revisions of the same content). When
 * they differ, why (cap bytes) names the first difference. */
bool rk_state_diff(const rk_state *a, const rk_state *b, char *why, size_t cap);

/* Lookups in a read state; NULL when absent. */
rk_node *rk_state_node(const rk_state *s, const char *id);
const rk_alive_entry *rk_state_alive(const rk_state *s, const char *id);
uint64_t rk_state_ack(const rk_state *s, const char *id); /* 0 when absent */
const rk_progress *rk_state_progress(const rk_state *s, const char *id);
const rk_missing *rk_state_missing(const rk_state *s, const char *id);

/* The version barrier (proto/etcd.md) over a read state: rd_barrier_laggard
 * (daemon/barrier.c, the one rule) on s's alive, acks and clients. Returns
 * NULL when it holds, else the id of one that has not (for logs). */
const char *rk_barrier_laggard(const rk_state *s, const ring_table *t, uint64_t version);

/* ----------------------------------------------------------------- tables */

/* Reads and decodes tables/<version>. RING_ENOTFOUND when the key is gone
 * (retention, or a version that never existed), else the decoder's error. */
int rk_table_read(ring_etcd *c, const char *cluster, uint64_t version, ring_table **out,
                  ring_error *err);

/* The weighted target of each of t's nodes into targets[] (one per node
 * index, ring_table_node_count(t) entries): the planner's own figure for
 * t's membership (a no-change plan's ring_plan_node_load, so failure-domain
 * caps apply), or the plain share T*R*w/sum(w) where the planner refuses
 * (too few domains) or memory runs out. Nodes that do not serve (draining,
 * down, removed) get 0. `ringctl status` and the coordinator's status page
 * show these. */
void rk_node_targets(const ring_table *t, double *targets);

/* ---------------------------------------------------- the planner's input */

/* The planner's input for the desired membership: the config's settings and
 * one entry per node record that is not removed-and-empty: state `down` for
 * down nodes, `draining` for desired drained or removed, `active` for
 * joining and active ones. Nodes appear in the order of `table`'s node
 * indexes (so plans keep indexes stable), then new ones by id. `table` may be
 * NULL. in->nodes is malloc()'ed (rk_plan_input_free). */
int rk_desired_input(const rk_state *s, const ring_table *table, rk_plan_input *in,
                     ring_error *err);

/* True when the table already is what the input asks for: the same nodes
 * (ids, addrs, labels, weights, serving or not) and no planner move needed
 * (under bytes balance: the hard rules hold, whatever the sizes now).
 * Used to decide whether a plan must be proposed at all. */
bool rk_input_matches_table(const rk_plan_input *in, const ring_table *table);

/* ------------------------------------------------------ a run's tables */

/* The table a run is at (run_table.c): the plan target's nodes; base's
 * owners with every move in `done` applied; a pending owner for every move
 * in `pending` (NULL for none). base NULL is a first placement (the target
 * itself). Sealed, at `version`; *out owned by the caller. */
int rk_run_table(const ring_table *base, const ring_plan *p, const uint8_t *done,
                 const uint8_t *pending, uint64_t version, ring_table **out, ring_error *err);

/* ------------------------------------------------------ missing replicas */

/* What hosts report under missing/ (cluster_missing.c), against the table
 * in service: a token-replica is missing when its owner lists the token and
 * the table still makes it an owner; a token is lost when every owner the
 * table names for it reports it missing. `ringctl status`, `verify` and the
 * coordinator's gauges, /healthz and status page show this one view. */
typedef struct rk_missing_host {
  char id[RING_ID_MAX + 1];
  uint32_t n;          /* token-replicas of this host reported missing */
  uint32_t *tokens;    /* those tokens, ascending; malloc()'ed */
  const rk_missing *m; /* the record (borrowed from the state) for its failing reasons */
} rk_missing_host;

typedef struct rk_missing_view {
  uint32_t replicas;      /* token-replicas reported missing, all hosts */
  rk_missing_host *hosts; /* those with at least one, by id; malloc()'ed */
  uint32_t n_hosts;
  uint32_t *lost; /* tokens every owner reports missing, ascending; malloc()'ed */
  uint32_t n_lost;
} rk_missing_view;

#define RK_MISSING_SHOWN 16 /* tokens a host's entry lists in status (the count says the rest) */

/* Builds the view from s's missing records and t (NULL: an empty view). It
 * borrows s: free the view before s. RING_OK or RING_ENOMEM (*out empty). */
int rk_missing_view_make(const rk_state *s, const ring_table *t, rk_missing_view *out);
void rk_missing_view_free(rk_missing_view *v);
/* {"replicas":N,"hosts":[{"host","count","tokens":[first RK_MISSING_SHOWN],
 * "failing":[{"token","attempts","error"}]}],"lost":[...]}: a new cJSON
 * object the caller deletes. */
struct cJSON *rk_missing_json(const rk_missing_view *v);
/* "17 token-replicas missing (n2: 17, 40, ...; lost: 3)" into buf. */
const char *rk_missing_text(const rk_missing_view *v, char *buf, size_t size);
/* ------------------------------------------------------ a restored etcd */

/* The highest seen_version among s's recovery/<id> reports (0: none). */
uint64_t rk_state_seen_version(const rk_state *s);
/* Feeds a state read with RK_READ_VERSION | RK_READ_RECOVERY to c's
 * history marks (restore_state.c): the version key's value, the hosts'
 * reported versions above it, and the `recovered` record (which settles a
 * restore it covers). Returns whether c's history went back: the caller
 * then acts on nothing in s. */
bool rk_state_history(ring_etcd *c, const rk_state *s);

/* ------------------------------------------------- run steps (run_steps.c) */

/* Marks in pick the moves of `wave` not done (bit i of done) that fit the
 * limits th (moves_per_wave, moves_per_domain; moves_per_node is the
 * agents'), one per receiver in turn; returns how many: at least one while
 * any is left, whatever the limits. */
uint32_t rk_run_choose(const ring_plan *p, const uint8_t *done, const rk_throttle *th,
                       uint32_t wave, uint8_t *pick);
/* The first wave at or after `wave` with a move not done; the plan's wave
 * count when none is left. */
uint32_t rk_run_next_wave(const ring_plan *p, const uint8_t *done, uint32_t wave);

/* ------------------------------------------------- health (cluster_health.c) */

/* What a cluster's state says is wrong beyond stuck moves and missing
 * replicas' own lines: the reasons the coordinator's /healthz is degraded
 * for and `ringctl status` names, computed from one state and the table in
 * service by both, so the two never disagree. */
typedef enum rk_health_kind {
  RK_HEALTH_BELOW_R,      /* token-replicas the table gives to down nodes */
  RK_HEALTH_REFUSED,      /* plan/proposed is a refusal: every plan is (1) */
  RK_HEALTH_REFILL_WAITS, /* missing replicas nobody refills: policy none */
  RK_HEALTH_LABELS,       /* nodes whose host reports other labels than the record */
  RK_HEALTH_KINDS
} rk_health_kind;

#define RK_HEALTH_TEXT 400

typedef struct rk_health_view {
  uint64_t count[RK_HEALTH_KINDS];            /* per kind; 0: nothing wrong */
  char text[RK_HEALTH_KINDS][RK_HEALTH_TEXT]; /* the reason, "" when count is 0 */
} rk_health_view;

/* "below_r", "plan_refused", "refill_waits", "label_mismatch". */
const char *rk_health_kind_name(rk_health_kind k);
/* The view of s against t (NULL: no table), with missing_replicas the
 * count of rk_missing_view_make's view. RING_OK or RING_ENOMEM. */
int rk_health_make(const rk_state *s, const ring_table *t, uint64_t missing_replicas,
                   rk_health_view *out);
/* Token-replicas of t whose owner's record in s is down, into *held; the
 * first such owner's id into first (may be NULL). RING_OK or RING_ENOMEM. */
int rk_down_replicas(const rk_state *s, const ring_table *t, uint64_t *held,
                     char first[RING_ID_MAX + 1]);
/* The host's labels when its alive/ key says other ones than n's record
 * (a removed node's never count); NULL when they agree. */
const rk_labels *rk_label_mismatch(const rk_state *s, const rk_node *n);
/* Whether n was removed and its agent still holds alive/<id>: the record
 * stays removed (never re-joined) and status says so. */
bool rk_removed_alive(const rk_state *s, const rk_node *n);
/* Whether n is drained: draining, asked to drain, owning and pending
 * nothing in t, with no run active; status shows it as "drained". */
bool rk_node_drained(const rk_state *s, const ring_table *t, const rk_node *n);
/* The state to show for n: "drained" (rk_node_drained), else its record's
 * state name. */
const char *rk_node_state_shown(const rk_state *s, const ring_table *t, const rk_node *n);

/* ----------------------------------------------------- sizes (plan_sizes.c) */

/* Host id's arc sizes (RK_READ_SIZES), NULL when it reported none. */
const rk_sizes *rk_state_sizes(const rk_state *s, const char *id);
/* The bytes host id holds: the sum of its own sizes/ report (RK_READ_SIZES);
 * 0 with *reported false when it wrote none (unknown, not empty). */
uint64_t rk_node_bytes(const rk_state *s, const char *id, bool *reported);

/* The bytes of each of t's tokens (T entries, malloc()'ed into *out): the
 * size its first owner (in slot order) reports in sizes/, else any host's
 * report of it, else 0. *known counts the tokens some report covered; *out
 * is NULL when s holds no sizes at all (read with RK_READ_SIZES). */
int rk_arc_bytes(const rk_state *s, const ring_table *t, uint64_t **out, uint32_t *known);

/* Makes in (balance bytes) weigh t's tokens by the sizes hosts report, when
 * every token's size is known; else, or when every arc is empty, in falls
 * back to token balance and why[] (cap bytes) says so ("" when weighed).
 * A plan is never weighed by guesses. RING_OK or RING_ENOMEM. */
int rk_input_weigh(const rk_state *s, const ring_table *t, rk_plan_input *in, char *why,
                   size_t cap);

/* The bytes p's moves carry: into in[] (one entry per node of the plan's
 * target, may be NULL) what each receives; returns the total. */
uint64_t rk_plan_bytes_in(const ring_plan *p, const uint64_t *arc_bytes, uint64_t *in);

/* A plan balanced by bytes: {node: {"before","after","target"}}, each
 * node's bytes held before and after and its byte target
 * (ring_plan_node_bytes), as a new cJSON object; NULL for a plan balanced
 * by tokens (or out of memory). `ringctl plan --json` and the status page
 * show it. */
struct cJSON *rk_plan_bytes_balance_json(const ring_plan *p);

/* ------------------------------------------------ the estimate (plan_eta.c) */

/* How long a plan's data takes under a throttle (deploy/PRODUCTION.md,
 * "How long a plan takes"). */
typedef struct rk_eta {
  uint64_t ms;       /* the estimate; 0 when no rate is set or no sizes are known */
  uint64_t ideal_ms; /* the busiest receiver's bytes over the rate: every byte at once */
  uint32_t steps;    /* the run's steps (sets of moves in flight) */
  uint16_t bound;    /* the node whose transfers take the most of ms; RING_NODE_NONE: none */
  bool bound_sends;  /* it bounds as a source (else as a receiver) */
} rk_eta;

/* p's run simulated step by step with the run's chooser under th, each
 * step as long as its slowest receiver (bytes over bytes_per_sec) or
 * source (bytes over min(moves_per_node, its receivers) times the rate).
 * RING_OK or RING_ENOMEM. */
int rk_plan_eta(const ring_plan *p, const uint64_t *arc_bytes, const rk_throttle *th, rk_eta *out);
/* "12 steps; bounded by n2, receiving" into buf. Returns buf. */
const char *rk_eta_text(const ring_plan *p, const rk_eta *e, char *buf, size_t cap);

/* The table `ringctl recover` publishes (recover_build.c): newest's nodes
 * and slots, each slot given to a host whose report holds the token. */
typedef struct rk_recover_slot {
  uint32_t token, slot;
  uint16_t owner; /* the named owner, which lacks the arc */
} rk_recover_slot;

typedef struct rk_recover {
  ring_table *table;        /* sealed, at the version asked for */
  rk_recover_slot *missing; /* n_missing slots no holder could fill (malloc()'ed) */
  uint32_t n_missing;
  uint32_t *lost; /* n_lost tokens no host holds, ascending (malloc()'ed) */
  uint32_t n_lost;
  uint32_t n_moved; /* slots whose owner differs from newest's */
} rk_recover;

/* Builds it from newest (the newest table hosts reported in service) and
 * the hosts' recovery/<id> reports; nodes listed in `without` count as
 * holding nothing. RING_ENOTFOUND (err naming them) while an owner of
 * newest sent no report and is not listed; else RING_OK with *out
 * (rk_recover_free it), or the table builder's error. */
int rk_recover_build(const ring_table *newest, const rk_agent_recovery *reps, uint32_t n_reps,
                     const char *const *without, uint32_t n_without, uint64_t version,
                     rk_recover *out, ring_error *err);
void rk_recover_free(rk_recover *r);

/* ------------------------------------------------- plan flows (plan_flow.c) */

/* One (giver, receiver) pair of a plan's moves: `ringctl render --what
 * flow` and the status page draw these. */
typedef struct rk_flow_pair {
  uint16_t from;  /* giver: node index of the plan's target table; RING_NODE_NONE for new
                     replicas (a first placement, lost tokens) */
  uint16_t to;    /* receiver: node index of the target table */
  uint32_t count; /* moves from -> to */
} rk_flow_pair;

/* The moves of p aggregated by (from, to), most moves first (ties by from,
 * then to). *pairs is malloc()'ed (free() it; NULL when p moves nothing)
 * and holds *n entries, one per distinct pair: at most the move count.
 * Returns RING_OK, or RING_ENOMEM with *pairs NULL and *n 0. */
int rk_plan_flow(const ring_plan *p, rk_flow_pair **pairs, uint32_t *n);

/* The value of the failure-domain level `level` for node i of t, "" when
 * there is no level, no such node or no label: what pictures group by. */
const char *rk_node_domain(const ring_table *t, uint16_t i, const char *level);

/* The pictures' palette (node_colour.c): rk_colour(i) its i-th colour
 * (mod its size), rk_node_colour(id) the colour of node `id` in every
 * picture and on the status page, fixed by the id alone. "#rrggbb". */
const char *rk_colour(uint32_t i);
const char *rk_node_colour(const char *id);

#endif /* RING_COORD_CLUSTER_H */
