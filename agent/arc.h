/*
 * arc.h: arcs on a host and moving them between hosts (docs/DESIGN.md, "Arcs on
 * a host"; proto/arc.md, the transfer protocol). Internal to
 * ring-agent; static library `ringarc`.
 *
 * Sections: the store; authentication; the server; the fetcher; the rate
 * limiter.
 *
 * An arc is the directory <data-dir>/arcs/<token>/ (decimal token). Its
 * regular files are immutable once in place. A receiver builds an arc in
 * <data-dir>/tmp/<token>.<version>/, verifies every file's XXH3-64 against
 * the source's manifest, fsyncs files and the directory, and renames it to
 * arcs/<token>/: after a crash an arc is there whole or not at all. Only
 * then is it reported.
 */
#ifndef RING_AGENT_ARC_H
#define RING_AGENT_ARC_H

#include "ring.h"

#include "arc_manifest.h" /* proto/: the manifest codec */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------- the store */

typedef struct arc_store arc_store;

/* Opens (creating arcs/ and tmp/ if needed) the store at data_dir. Leftover
 * temporary directories from a crash are kept for resumption by the
 * fetcher (same token and version) and removed by arc_store_sweep_tmp. */
int arc_store_open(const char *data_dir, arc_store **out, struct ring_error *err);
void arc_store_close(arc_store *s);
const char *arc_store_dir(const arc_store *s);

/* Whether arcs/<token>/ exists (installed). */
bool arc_store_has(arc_store *s, uint32_t token);
/* Builds the manifest of an installed arc, hashing its files (cached by
 * (name, size, mtime) so a hot source does not rehash on every request). */
int arc_store_manifest(arc_store *s, uint32_t token, arc_manifest *out, struct ring_error *err);
/* Tokens installed, ascending; *tokens malloc()'ed. */
int arc_store_list(arc_store *s, uint32_t **tokens, uint32_t *n);
/* Removes arcs/<token>/ (renamed to tmp first, so a crash leaves it
 * either installed or gone). */
int arc_store_remove(arc_store *s, uint32_t token);
/* Takes arcs/<token>/ out of service as the leftover of a fetch: renamed
 * to tmp/<token>.<version>/, where arc_fetch checks every file against the
 * source's manifest and fetches only what differs. When a partial copy is
 * there already, the arc is removed instead and the partial one resumed.
 * RING_ENOTFOUND when no such arc is installed. */
int arc_store_recheck(arc_store *s, uint32_t token, uint64_t version);
/* Installs an empty arcs/<token>/ (through tmp/<token>.<version>/, fsynced,
 * renamed): what a receiver holds when no owner has any data for the
 * token. RING_EEXIST when the arc is already installed. */
int arc_store_install_empty(arc_store *s, uint32_t token, uint64_t version, struct ring_error *err);
/* Creates arcs/<token>/ empty for each of tokens[0..n) not there yet, then
 * fsyncs arcs/ once: what an owner holds for a token it was given with
 * nothing to copy (a first placement, migration "none"). *made counts the
 * directories made. On failure the ones made stay (empty, as owned). */
int arc_store_adopt_empty(arc_store *s, const uint32_t *tokens, uint32_t n, uint32_t *made,
                          struct ring_error *err);
/* Whether arcs/ and tmp/ are there as directories (a data disk that is not
 * mounted, or a wiped dir, leaves them missing). */
bool arc_store_usable(arc_store *s);
/* Removes tmp/ entries not in keep (token.version names). */
void arc_store_sweep_tmp(arc_store *s, const char *const *keep, uint32_t n_keep);
/* Free bytes, and the size, of the store's file system (statvfs); 0 if
 * it cannot be read. */
uint64_t arc_store_free_bytes(arc_store *s);
/* Names in arcs/<token>/ refused since the store opened because they are
 * not regular files (a FIFO, socket, device, directory or symbolic link:
 * never listed in a manifest nor served); the last one as
 * "<token>/<name>" into last[cap] when last is not NULL ("" if none). */
uint64_t arc_store_refused(arc_store *s, char *last, size_t cap);
uint64_t arc_store_capacity_bytes(arc_store *s);

/* --------------------------------------------------------- authentication */

/* Requests and the answers a receiver acts on carry an HMAC-SHA-256 keyed
 * by the cluster secret (membership) and an Ed25519 signature by the
 * signing node's own key, checked against the key pinned for that node
 * (identity); proto/arc.md, "Authentication". Neither secret is sent. */
#define ARC_KEYS_MAX 2         /* secrets accepted at once: a rotation's old and new */
#define ARC_MAC_LEN 32         /* HMAC-SHA-256 */
#define ARC_NONCE_LEN 16       /* random bytes per request */
#define ARC_PK_LEN 32          /* an Ed25519 public key */
#define ARC_SIG_LEN 64         /* an Ed25519 signature */
#define ARC_DIGEST_LEN 32      /* BLAKE2b-256 of the signed fields: what Ed25519 signs */
#define ARC_PINS_MAX 2         /* keys pinned for one node at once: a rotation's old and new */
#define ARC_SECRET_MIN 32      /* bytes of a secret in a secret file, at least */
#define ARC_AUTH_VALUE_MAX 512 /* bytes of an X-Ring-Auth or X-Ring-Sig value */
#define ARC_AUTH_HEADER "X-Ring-Auth"
#define ARC_SIG_HEADER "X-Ring-Sig"
#define ARC_SKEW_MS_DEFAULT 30000 /* a request's time may differ from the server's by this */
#define ARC_NO_TOKEN UINT32_MAX   /* the token signed into an answer to a path naming none */

/* The MAC keys derived from one or two secrets (the first signs, each
 * verifies), this node's Ed25519 key pair, and where the keys pinned for
 * other nodes come from. Set up before it is shared, then immutable but
 * for a cache of pair keys under its own lock: any
 * thread may use it. */
typedef struct arc_keyring arc_keyring;
/* The keys pinned for `node` (at most ARC_PINS_MAX, into pk); how many.
 * 0: none, and nothing signed as that node verifies. pk NULL: a member's
 * signature as `node` did not verify under the keys given (the pins may
 * be stale: an operator approved a new key). Called from server and
 * fetching threads at once: must be thread-safe. */
typedef uint32_t (*arc_pins_fn)(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]);
/* From secrets[0..n), n 1 or 2, each non-empty and the two distinct, with
 * a fresh random node key (arc_keyring_node_key replaces it) and no pins.
 * RING_OK and *out (arc_keyring_free), or RING_EINVAL / RING_ENOMEM. */
int arc_keyring_new(const char *const *secrets, uint32_t n, arc_keyring **out,
                    struct ring_error *err);
/* From a secret file: one secret per line (blank lines skipped), at most
 * two (during a rotation the first signs), each at least ARC_SECRET_MIN
 * bytes; the file readable by its owner only. Same returns (RING_EINVAL
 * naming the mode or length); RING_EIO when the file cannot be read. */
int arc_keyring_load(const char *path, arc_keyring **out, struct ring_error *err);
/* This node's key from its key file (the Ed25519 seed, 64 hex digits),
 * made (mode 0600, fsynced) when absent. A file group or others may read,
 * or not in that form, is RING_EINVAL naming it; RING_EIO when it cannot
 * be read or made. */
int arc_keyring_node_key(arc_keyring *k, const char *path, struct ring_error *err);
void arc_keyring_public(const arc_keyring *k, unsigned char pk[ARC_PK_LEN]);
/* The public half of the key file at path (made when absent, checked as
 * arc_keyring_node_key does): a rotation's next key, published before the
 * agent signs with it. */
int arc_node_key_public(const char *path, unsigned char pk[ARC_PK_LEN], struct ring_error *err);
/* Where the keys pinned for other nodes come from (NULL: nobody). */
void arc_keyring_set_pins(arc_keyring *k, arc_pins_fn fn, void *ctx);
void arc_keyring_free(arc_keyring *k); /* zeroes the keys; NULL is a no-op */
uint32_t arc_keyring_count(const arc_keyring *k);

/* An X-Ring-Auth (request) or X-Ring-Sig (answer) value, parsed. */
typedef struct arc_auth {
  uint32_t kid;                       /* which key signed */
  char node[RING_ID_MAX + 1];         /* the signer: requester, or answering server */
  char to[RING_ID_MAX + 1];           /* requests: the server asked */
  int64_t ts_ms;                      /* requests: the requester's wall clock, Unix ms */
  unsigned char nonce[ARC_NONCE_LEN]; /* requests: fresh; answers: the request's */
  unsigned char mac[ARC_MAC_LEN];
  unsigned char sig[ARC_SIG_LEN];                /* answers: the server's Ed25519 signature */
  unsigned char pmac[ARC_PINS_MAX][ARC_MAC_LEN]; /* requests: MACs by pair key, one per */
  uint32_t n_pmac;                               /* key pinned for the server: 1 or 2 */
  bool has_request_fields;                       /* to, ts and nonce all present */
  bool has_nonce;
} arc_auth;

/* Parses value[0..len) (a request: "v1 kid=.. node=.. to=.. ts=.. nonce=.. mac=..
 * pmac=..[,..]"; an answer: "v1 kid=.. node=.. [nonce=..] mac=.. sig=..",
 * one space between fields, lowercase hex). RING_OK, or RING_EAUTH for
 * anything malformed, repeated or unknown; *out written only on success. */
int arc_auth_parse(const char *value, size_t len, arc_auth *out);
/* Writes the X-Ring-Auth value of a request from self to server `to`, at
 * now_ms, with a fresh random nonce (also to nonce_out, unless NULL: the
 * answer must carry it), MACed under the first cluster key and under the
 * pair key shared with each key pinned for `to`. range is the Range
 * header's value or "" / NULL. RING_OK; RING_ENODEID when no key is pinned
 * for `to` (nothing it would take from us); RING_EINVAL. */
int arc_auth_sign_request(const arc_keyring *k, const char *self, const char *to,
                          const char *method, const char *path, const char *range, int64_t now_ms,
                          unsigned char nonce_out[ARC_NONCE_LEN], char *value, size_t cap);
/* RING_OK when a (parsed) is a request to self with a MAC that verifies
 * under one of k's keys and a pair MAC under the key this node shares with
 * a key pinned for a->node; RING_ENODEID when only the pair MAC fails (a
 * member speaking as another node, or a key not pinned); else RING_EAUTH.
 * Time and replay are the caller's checks. */
int arc_auth_verify_request(const arc_keyring *k, const arc_auth *a, const char *self,
                            const char *method, const char *path, const char *range);
/* Writes the X-Ring-Sig value of an answer by server `self` to req (may
 * be NULL: an answer to a request whose own header did not parse). */
int arc_auth_sign_answer(const arc_keyring *k, const char *self, const arc_auth *req,
                         unsigned status, uint32_t token, const void *body, size_t len, char *value,
                         size_t cap);
/* RING_OK when value is an answer signed by node (a MAC under a cluster
 * key, a signature by a key pinned for node), to the request that carried
 * nonce, with this status, token and body; RING_ENODEID when only the
 * signature fails; else RING_EAUTH. */
int arc_auth_verify_answer(const arc_keyring *k, const char *value, size_t value_len,
                           const char *node, const unsigned char nonce[ARC_NONCE_LEN],
                           unsigned status, uint32_t token, const void *body, size_t len);

/* The nonces a server has accepted, each kept until its request's time is
 * out of the window: a second request with one of them is a replay.
 * Bounded (slots, a power of two >= 32). Thread-safe. The table is not
 * kept across restarts: a request timed before floor_ms (the server's
 * start) counts as seen, since a process before it may have accepted it. */
typedef struct arc_replay arc_replay;
enum { ARC_REPLAY_NEW, ARC_REPLAY_SEEN, ARC_REPLAY_FULL };
int arc_replay_new(uint32_t slots, int64_t window_ms, int64_t floor_ms, arc_replay **out);
void arc_replay_free(arc_replay *r);
/* ARC_REPLAY_NEW (now recorded), ARC_REPLAY_SEEN (a replay, or older than
 * the floor) or ARC_REPLAY_FULL (no room: refuse the request as busy).
 * now_ms 0: the wall clock, read under the table's lock. */
int arc_replay_check(arc_replay *r, const unsigned char nonce[ARC_NONCE_LEN], int64_t ts_ms,
                     int64_t now_ms);

/* ------------------------------------------------------------ the server */

typedef struct arc_server arc_server;

typedef struct arc_server_opts {
  const char *listen;      /* HOST:PORT; port 0 picks one */
  const arc_keyring *keys; /* verify requests, sign answers; borrowed, outlives the server */
  const char *node_id;     /* this host's id: requests must be to it; answers are signed by it */
  uint32_t skew_ms;        /* a request's time may be this far from ours; 0: ARC_SKEW_MS_DEFAULT */
  uint32_t replay_slots;   /* nonces remembered (power of two); 0: 131072 */
  const char *tls_cert;    /* PEM files for HTTPS, or NULL for HTTP */
  const char *tls_key;
  uint32_t max_connections;      /* open at once; 0: 1024 (RD_ADMIT_TOTAL) */
  uint32_t max_per_address;      /* from one client address; 0: 64 */
  uint32_t header_deadline_ms;   /* a request's line and headers, in total; 0: 5000 */
  const char *const *allow_from; /* client addresses always admitted besides the table's */
  uint32_t n_allow_from;
  bool open_to_all;   /* admit any address (tests, benchmarks); else the table's hosts
                         (arc_server_allow) and allow_from only */
  uint32_t timeout_s; /* idle connection timeout, behind the header deadline; 0: 10 */
} arc_server_opts;

/* Serves GET /v1/arcs/<token>/manifest and GET /v1/arcs/<token>/files/<name>
 * (with Range) from the store, zero-copy from the file descriptor; 401
 * for a request not signed for this node, out of the time window or
 * replayed, 400 for a bad token or name, 404 for an arc or file it does
 * not hold, 503 when arcs/ itself is gone, 416 for an absurd range.
 * Answers other than file bytes carry X-Ring-Sig. */
int arc_server_start(arc_store *s, const arc_server_opts *o, arc_server **out,
                     struct ring_error *err);
uint16_t arc_server_port(const arc_server *srv);
/* Replaces the client addresses admitted besides allow_from: the hosts of
 * the table in service ("IP", "HOST:PORT", ...; names resolved). Returns
 * how many entries were skipped (malformed, unresolved), or < 0 on no
 * memory. Connections already open stay. */
int arc_server_allow(arc_server *srv, const char *const *addrs, uint32_t n);
/* At most n arc files streamed at once (throttle.moves_per_node; 0: no
 * limit); a request past it is answered 503 "busy", signed, and counted
 * (stats.serve_busy). Takes effect for the next request. */
void arc_server_limit(arc_server *srv, uint32_t n);
/* The server's admission counters as Prometheus lines named prefix_... */
struct ring__sbuf; /* rd_text (daemon.h) */
void arc_server_admit_metrics(arc_server *srv, const char *prefix, struct ring__sbuf *t);
void arc_server_stop(arc_server *srv);

typedef struct arc_server_stats {
  uint64_t bytes_out;
  uint64_t requests;
  uint64_t unauthorized;  /* every 401, of which: */
  uint64_t bad_signer;    /* a member's MAC, not signed by the key pinned for its node= */
  uint64_t skewed;        /* the request's time out of the window */
  uint64_t replayed;      /* a nonce seen before */
  uint64_t busy;          /* 503: the replay cache had no room */
  uint64_t not_held;      /* 404 for a manifest: an arc this host does not hold */
  uint64_t store_missing; /* 503: arcs/ is not there (a data disk not mounted?) */
  uint64_t serve_busy;    /* 503: already streaming throttle.moves_per_node arc files */
  uint64_t serving;       /* arc files being streamed now */
  uint64_t bad_requests;
  uint64_t connections; /* accepted */
} arc_server_stats;
void arc_server_stats_get(arc_server *srv, arc_server_stats *out);
/* The node= of the last request refused as bad_signer ("" if none). */
void arc_server_last_bad_signer(arc_server *srv, char out[RING_ID_MAX + 1]);

/* ---------------------------------------------------------- the limiter */

/* One token bucket shared by every transfer of an agent. The rate can
 * change at any time (live config); 0 means unlimited. Thread-safe. */
typedef struct arc_limiter arc_limiter;
int arc_limiter_new(uint64_t bytes_per_sec, arc_limiter **out);
void arc_limiter_free(arc_limiter *l);
void arc_limiter_set_rate(arc_limiter *l, uint64_t bytes_per_sec);
/* Blocks until n bytes may pass (never longer than needed; wakes early on
 * a rate change); returns false if stop became true meanwhile. */
bool arc_limiter_take(arc_limiter *l, uint64_t n, const atomic_bool *stop);

/* ----------------------------------------------------------- the fetcher */

/* What one fetching thread keeps from one arc to the next: its curl handle
 * (so the connection to a source is reused rather than opened per arc),
 * receive and staging buffers and hash state, allocated once. Used by one
 * thread at a time. */
typedef struct arc_fetcher arc_fetcher;
/* NULL when out of memory. */
arc_fetcher *arc_fetcher_new(void);
void arc_fetcher_free(arc_fetcher *fx);

typedef struct arc_fetch_opts {
  const arc_keyring *keys; /* signs requests, verifies answers */
  const char *self_id;     /* this host's node id, in every request */
  const char *source_id;   /* the node expected at the source: answers must be signed by it */
  arc_fetcher *fetcher;    /* the calling thread's, kept between calls; NULL: one for this call */
  const char *ca_file;     /* for https sources, or NULL */
  arc_limiter *limiter;    /* shared; NULL: unlimited */
  uint32_t timeout_ms;     /* connect + low-speed timeout per request; 0: 10000 */
  uint32_t max_retries;    /* per file, on checksum mismatch or broken transfer; 0: 3 */
  const atomic_bool *stop; /* set (by another thread) to abandon; the temp dir stays */
} arc_fetch_opts;

typedef struct arc_fetch_result {
  uint64_t bytes;             /* bytes received in this call */
  uint32_t checksum_failures; /* files refetched after a mismatch */
  uint32_t resumed_files;     /* files continued from a partial temp file */
  uint32_t stale_files;       /* leftover files whole but not the source's: fetched anew */
  uint64_t reused_bytes;      /* leftover bytes verified and kept: not sent again */
  bool not_held;              /* the source answered, signed, that it holds no such arc (a
                                 file vanishing mid-copy is not this); never means "empty" */
  bool empty;                 /* installed from a signed manifest that lists no files */
  bool bad_signature;         /* an answer the receiver would act on was not signed by the
                                 expected node for this request: refused */
  bool busy;                  /* the source answered 503 busy: it streams as many arcs as
                                 throttle.moves_per_node allows. Only a pause: even unsigned,
                                 it can delay a fetch, never change what is installed */
} arc_fetch_result;

/* Fetches arc `token` from the arc server at `source` (host:port, or a
 * URL base "https://host:port") into tmp/<token>.<version>/, resuming what
 * a previous attempt left there, verifies every file against the
 * manifest, fsyncs and installs it as arcs/<token>/ (replacing nothing:
 * RING_EEXIST if it is already installed). On failure nothing is
 * installed and err says why (RING_ECONNECT / RING_ETIMEDOUT for a dead
 * source, RING_ECHECKSUM after max_retries mismatches, RING_EAUTH for a
 * 401, RING_ENOSPC for a full disk, RING_EIO for other local I/O errors). */
int arc_fetch(arc_store *s, const char *source, uint32_t token, uint64_t version,
              const arc_fetch_opts *o, arc_fetch_result *res, struct ring_error *err);

#endif /* RING_AGENT_ARC_H */
