/*
 * records.h: codecs of the small etcd values (proto/etcd.md): config,
 * nodes/<id>, alive/<id>, progress/<id>, missing/<id>, leader, loss, stuck, and the key
 * names.
 * Internal to Ringkeeper: part of the ringproto library (proto/CMakeLists.txt),
 * which the daemons and ringctl link; never part of libring.
 *
 * Sections: keys; config; node records; alive; progress; missing; leader; loss;
 * stuck; host records (their size caps, acks/ and clients/).
 *
 * Decoders validate everything (proto/etcd.md), name the offending field
 * in err, never read past len, and leave *out untouched on failure.
 * Encoders write canonical compact JSON into a malloc()'ed, NUL-terminated
 * string the caller free()s (*len without the NUL).
 */
#ifndef RING_PROTO_RECORDS_H
#define RING_PROTO_RECORDS_H

#include "ring.h"
#include "ringx.h" /* the `recovered` record */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- keys */

#define RK_KEY_MAX 192 /* "/ringkeeper/" + cluster + "/plan/history/" + id, with room */

/* Writes "/ringkeeper/<cluster>/<what>" (e.g. what = "nodes/n1") to key;
 * returns its length, or RING_EINVAL when it does not fit. */
int rk_key(char key[RK_KEY_MAX], const char *cluster, const char *what);
/* The same with a suffix: "/ringkeeper/<cluster>/<dir><name>". */
int rk_key2(char key[RK_KEY_MAX], const char *cluster, const char *dir, const char *name);
/* "/ringkeeper/<cluster>/<dir><v>" with v in decimal (tables/, deltas/). */
int rk_key_version(char key[RK_KEY_MAX], const char *cluster, const char *dir, uint64_t v);

/* ------------------------------------------------------------- config */

typedef enum rk_migration { RK_MIGRATE_STREAM = 0, RK_MIGRATE_NONE } rk_migration;

/* Which proposed plans the coordinator approves itself (proto/etcd.md,
 * config.auto_apply): none; repairs only (every move takes a replica off a
 * down node and has a live source); or all. */
typedef enum rk_auto_apply { RK_AUTO_NONE = 0, RK_AUTO_REPAIR, RK_AUTO_ALL } rk_auto_apply;

typedef struct rk_throttle {
  uint32_t moves_per_node;   /* 0 = no limit */
  uint32_t moves_per_domain; /* 0 = no limit */
  uint32_t moves_per_wave;   /* 0 = no limit */
  uint64_t bytes_per_sec;    /* per agent, incoming; 0 = no limit */
} rk_throttle;

typedef struct rk_config {
  uint32_t tokens;
  uint32_t replicas;
  uint64_t seed;
  char failure_domain[RING_ID_MAX + 1]; /* "" for none */
  char best_effort[RING_ID_MAX + 1];    /* "" for none */
  rk_migration migration;
  uint64_t down_after_ms;
  rk_auto_apply auto_apply;
  rk_throttle throttle;
  uint32_t keep_versions; /* retention.versions, >= 2 */
  uint32_t keep_plans;    /* retention.plans, >= 1 */
  ring_balance balance;   /* what the coordinator's plans balance; optional, tokens */
} rk_config;

/* T 16384, R 3, seed 0, no domains, stream, down_after 60 s, auto-apply repairs,
 * throttle 4 per node / none per domain / 256 per wave / no byte limit,
 * keep 16 versions and 32 plans. */
void rk_config_defaults(rk_config *c);
/* Checks every rule of proto/etcd.md on a config built in memory. */
int rk_config_validate(const rk_config *c, ring_error *err);
int rk_config_decode(const char *json, size_t len, rk_config *out, ring_error *err);
int rk_config_encode(const rk_config *c, char **json, size_t *len);
const char *rk_migration_name(rk_migration m);
const char *rk_auto_apply_name(rk_auto_apply a); /* "none", "repair", "all" */
/* Parses one of those names; returns the value or RING_EINVAL. */
int rk_auto_apply_parse(const char *s);

/* ------------------------------------------------------- node records */

typedef struct rk_labels {
  uint32_t n;
  char key[RING_LABELS_MAX][RING_ID_MAX + 1];
  char value[RING_LABELS_MAX][RING_ID_MAX + 1];
} rk_labels;

/* The value of label `key`, NULL if absent. */
const char *rk_labels_get(const rk_labels *l, const char *key);
/* Adds or replaces a label (key and value validated as in table.md). */
int rk_labels_set(rk_labels *l, const char *key, const char *value, ring_error *err);
/* Removes label `key`; false when it was absent. Order of the rest kept. */
bool rk_labels_del(rk_labels *l, const char *key);
/* Same keys with the same values, in any order. */
bool rk_labels_equal(const rk_labels *a, const rk_labels *b);

typedef enum rk_desired { RK_WANT_ACTIVE = 0, RK_WANT_DRAINED, RK_WANT_REMOVED } rk_desired;

/* A node's arc signing key (Ed25519 public key) as 64 lowercase hex
 * digits; "" when a record has none (proto/etcd.md, "Node keys"). */
#define RK_KEY_HEX 64
/* Whether s is such a key. */
bool rk_key_hex_valid(const char *s);
/* Whether a record's key fields hold valid keys or nothing. */
bool rk_keys_valid(const char *key, const char *next_key);
struct rk_node;
/* Whether the key an agent publishes (alive/) differs from both keys
 * pinned for its node: its peers refuse what it signs, and it is reported.
 * False when either side has no key (nothing pinned yet: pinned next). */
bool rk_key_untrusted(const struct rk_node *n, const char *published);

typedef struct rk_node {
  char id[RING_ID_MAX + 1];
  char addr[RING_ADDR_MAX + 1];
  rk_labels labels;
  double weight;
  ring_node_state state;
  rk_desired desired;
  uint64_t lost_ms;              /* when alive/<id> was first seen gone; 0 while present */
  uint64_t since_ms;             /* when state last changed */
  char key[RK_KEY_HEX + 1];      /* the key pinned for the node at its first join; "" none yet */
  char next_key[RK_KEY_HEX + 1]; /* a rotation's next key, trusted too (ringctl trust); "" */
} rk_node;

int rk_node_decode(const char *json, size_t len, rk_node *out, ring_error *err);
int rk_node_encode(const rk_node *n, char **json, size_t *len);
const char *rk_desired_name(rk_desired d);
/* Parses "active" / "drained" / "removed"; returns the value or RING_EINVAL. */
int rk_desired_parse(const char *name);

/* A builder spec borrowing n's strings; keys/values hold RING_LABELS_MAX
 * entries and must outlive the spec. State and weight are copied as is. */
void rk_node_spec(const rk_node *n, const char **keys, const char **values, ring_node_spec *s);

/* --------------------------------------------------------------- alive */

typedef struct rk_alive {
  char id[RING_ID_MAX + 1];
  char addr[RING_ADDR_MAX + 1];
  rk_labels labels;
  double weight;
  uint64_t started_ms;
  uint64_t capacity_bytes;       /* size of the data dir's file system; 0: not reported */
  uint64_t free_bytes;           /* free bytes there when the key was written; 0: not reported */
  char key[RK_KEY_HEX + 1];      /* the key the agent signs with; "" not reported */
  char next_key[RK_KEY_HEX + 1]; /* the key it will sign with after a rotation; "" none */
} rk_alive;

int rk_alive_decode(const char *json, size_t len, rk_alive *out, ring_error *err);
int rk_alive_encode(const rk_alive *a, char **json, size_t *len);

/* ------------------------------------------------------------ progress */

#define RK_FAILING_MAX 64     /* entries of progress/<id>'s `failing` */
#define RK_FAIL_ERROR_MAX 160 /* bytes of one entry's error */

/* A pending token of the progress's version that the agent could not fetch
 * yet: how many attempts failed and the last one's error. */
typedef struct rk_failing {
  uint32_t token;
  uint32_t attempts; /* 1 .. 2^32-1 */
  char error[RK_FAIL_ERROR_MAX + 1];
} rk_failing;

typedef struct rk_progress {
  uint64_t version;
  uint32_t n_tokens;
  uint32_t *tokens; /* ascending, malloc()'ed (NULL when n_tokens is 0) */
  uint64_t bytes;
  uint32_t n_failing;  /* 0 .. RK_FAILING_MAX; 0: the field is not written */
  rk_failing *failing; /* ascending tokens, none in tokens; malloc()'ed (NULL when 0) */
} rk_progress;

/* Tokens must be strictly ascending and below RING_TOKENS_MAX; so must the
 * tokens of `failing`, which hold none of `tokens`. */
int rk_progress_decode(const char *json, size_t len, rk_progress *out, ring_error *err);
int rk_progress_encode(const rk_progress *p, char **json, size_t *len);
void rk_progress_free(rk_progress *p); /* frees the contents (tokens, failing), not p */
/* The failing entry of `token`, NULL when there is none. */
const rk_failing *rk_progress_failing(const rk_progress *p, uint32_t token);
/* True when p covers every token of want[0..n) (want ascending). */
bool rk_progress_covers(const rk_progress *p, const uint32_t *want, uint32_t n);

/* ------------------------------------------------------------- missing */

/* missing/<id>: owned tokens of table version `version`, not pending, that
 * the host holds no arc for (a wiped or replaced data dir), and why their
 * refill has not succeeded yet. Written by the agent when the set changes,
 * deleted when it is empty (proto/etcd.md). */
typedef struct rk_missing {
  uint64_t version;    /* the table in service when written: 1 .. 2^53-1 */
  uint32_t n_tokens;   /* 1 .. RING_TOKENS_MAX */
  uint32_t *tokens;    /* strictly ascending, < RING_TOKENS_MAX; malloc()'ed */
  uint32_t n_failing;  /* 0 .. RK_FAILING_MAX; 0: the field is not written */
  rk_failing *failing; /* ascending tokens, each one of tokens; malloc()'ed (NULL when 0) */
} rk_missing;

int rk_missing_decode(const char *json, size_t len, rk_missing *out, ring_error *err);
int rk_missing_encode(const rk_missing *m, char **json, size_t *len);
void rk_missing_free(rk_missing *m); /* frees the contents, not m; m is zeroed */
/* True when m lists token. */
bool rk_missing_has(const rk_missing *m, uint32_t token);

/* -------------------------------------------------------------- leader */

typedef struct rk_leader {
  char id[RING_ID_MAX + 1];
  char addr[RING_ADDR_MAX + 1]; /* its /metrics listener, "" if none */
  int64_t pid;
} rk_leader;

int rk_leader_decode(const char *json, size_t len, rk_leader *out, ring_error *err);
int rk_leader_encode(const rk_leader *l, char **json, size_t *len);

/* ---------------------------------------------------------------- loss */

/* The operator's accepted losses (`ringctl accept-loss`): pending tokens of
 * table version `version` whose receivers may install them empty. */
typedef struct rk_loss {
  uint64_t version;         /* 1 .. 2^53-1 */
  uint32_t n_tokens;        /* 1 .. RING_TOKENS_MAX */
  uint32_t *tokens;         /* strictly ascending, < RING_TOKENS_MAX; malloc()'ed */
  char by[RING_ID_MAX + 1]; /* who accepted: [a-z0-9._-]{1,63} */
  uint64_t at_ms;           /* when (Unix ms) */
} rk_loss;

int rk_loss_decode(const char *json, size_t len, rk_loss *out, ring_error *err);
int rk_loss_encode(const rk_loss *l, char **json, size_t *len);
void rk_loss_free(rk_loss *l); /* frees the contents, not l */
/* True when l is for `version` and lists `token`. */
bool rk_loss_covers(const rk_loss *l, uint64_t version, uint32_t token);

/* --------------------------------------------------------------- stuck */

#define RK_STUCK_MAX 256       /* moves listed in `stuck`; `more` counts the rest */
#define RK_STUCK_ERROR_MAX 200 /* bytes of one move's reason */

/* One in-flight move whose receiver has made no progress for the
 * coordinator's stuck-after. */
typedef struct rk_stuck_move {
  uint32_t token;
  uint32_t slot;
  char from[RING_ID_MAX + 1];         /* the owner it replaces, "" for none */
  char to[RING_ID_MAX + 1];           /* the receiver */
  char error[RK_STUCK_ERROR_MAX + 1]; /* why, one line */
  uint64_t for_ms;                    /* how long without progress, when written */
} rk_stuck_move;

typedef struct rk_stuck {
  uint64_t version;           /* the table version whose pending moves these are */
  char plan[RING_ID_MAX + 1]; /* the run's plan id (16 hex digits) */
  uint32_t n_moves;           /* 0 .. RK_STUCK_MAX */
  rk_stuck_move *moves;       /* ascending (token, slot); malloc()'ed (NULL when 0) */
  uint32_t more;              /* stuck moves not listed (only when n_moves is the cap) */
} rk_stuck;

int rk_stuck_decode(const char *json, size_t len, rk_stuck *out, ring_error *err);
int rk_stuck_encode(const rk_stuck *s, char **json, size_t *len);
void rk_stuck_free(rk_stuck *s); /* frees the contents, not s */

/* ------------------------------------------------------- host records */

/* The values hosts write (agents, data-plane clients) and the coordinator
 * reads: each has a size cap (proto/etcd.md, "Reading host records"); a
 * value over it is refused before it is parsed. */
typedef enum rk_host_kind {
  RK_HOST_ALIVE = 0, /* alive/<id> */
  RK_HOST_ACK,       /* acks/<id> */
  RK_HOST_PROGRESS,  /* progress/<id> */
  RK_HOST_CLIENT,    /* clients/<name> */
  RK_HOST_MISSING,   /* missing/<id> */
  RK_HOST_RECOVERY,  /* recovery/<id> (a restored etcd) */
  RK_HOST_SIZES,     /* sizes/<id> (sizes.h) */
  RK_HOST_KINDS
} rk_host_kind;

#define RK_ALIVE_VALUE_MAX 4096u           /* a full alive/ value is under 3 KiB */
#define RK_NODE_VALUE_MAX 8192u            /* nodes/<id>: an alive value's fields, state, keys */
#define RK_ACK_VALUE_MAX 32u               /* a version has at most 16 digits */
#define RK_PROGRESS_VALUE_MAX (512u << 10) /* 65536 tokens and 64 failing fit */
#define RK_CLIENT_VALUE_MAX 1024u
#define RK_MISSING_VALUE_MAX (512u << 10)  /* 65536 tokens and 64 failing fit, as progress */
#define RK_RECOVERY_VALUE_MAX (512u << 10) /* 65536 held tokens fit (proto/etcd.md) */

/* "alive", "acks", "progress", "clients", "missing": the key's directory without the
 * slash (metric labels, `ringctl status`); "?" out of range. */
const char *rk_host_kind_name(rk_host_kind k);
/* The kind's directory under the cluster prefix ("alive/", ...). */
const char *rk_host_kind_dir(rk_host_kind k);
/* The cap of the kind's values, in bytes (0 out of range). */
size_t rk_host_value_max(rk_host_kind k);
/* RING_OK when len is within the kind's cap, else RING_ETOOBIG with err
 * saying "N bytes over the CAP cap". */
int rk_host_size_check(rk_host_kind k, size_t len, ring_error *err);

/* acks/<id>: a decimal version in 1 .. 2^53-1 (no sign, no leading zero,
 * nothing else). *version is written only on success. */
int rk_ack_decode(const char *value, size_t len, uint64_t *version, ring_error *err);

/* clients/<name>'s value: {"format":"ringkeeper.client.v1","kind":K}. */
typedef struct rk_client {
  char kind[RING_ID_MAX + 1]; /* what the process is, [a-z0-9._-]{1,63} */
} rk_client;

int rk_client_decode(const char *json, size_t len, rk_client *out, ring_error *err);
int rk_client_encode(const rk_client *c, char **json, size_t *len);

/* ------------------------------------------- a restored etcd (recovery) */

/* recovery/<id>: what an agent that saw etcd's history go back reports
 * (proto/etcd.md, "A restored etcd"): the marks it saw and what it holds. */
typedef struct rk_recovery {
  uint64_t seen_version;  /* the highest `version` the host saw: 1 .. 2^53-1 */
  uint64_t seen_revision; /* the highest etcd revision it saw: 0 .. 2^53-1 */
  uint64_t table_version; /* the table it had in service (0: none) */
  uint32_t n_tokens;      /* 0 .. RING_TOKENS_MAX */
  uint32_t *tokens;       /* held arcs: strictly ascending, < RING_TOKENS_MAX; malloc()'ed */
  uint64_t at_ms;         /* when written (Unix ms, display only) */
} rk_recovery;

int rk_recovery_decode(const char *json, size_t len, rk_recovery *out, ring_error *err);
int rk_recovery_encode(const rk_recovery *r, char **json, size_t *len);
void rk_recovery_free(rk_recovery *r); /* frees the contents, not r */

/* `recovered`: its codec is ringx's (util/ringx.h), shared with libring, which follows it. */

#endif /* RING_PROTO_RECORDS_H */
