/*
 * etcd_int.h: internals of the etcd client shared by etcd*.c and watcher.c.
 */
#ifndef RING_ETCD_INT_H
#define RING_ETCD_INT_H

#include "ring_etcd.h"
#include "ring_int.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define ETCD_POOL_MAX 8 /* idle connections kept for reuse */
#ifndef RING_ETCD_RESPONSE_MAX
#define RING_ETCD_RESPONSE_MAX (128u << 20) /* a reply larger than this is refused */
#endif

struct ring_etcd {
  char **endpoints; /* n_endpoints base URLs, no trailing '/' */
  uint32_t n_endpoints;
  _Atomic uint32_t current; /* index of the endpoint requests go to */
  char *user, *password;    /* NULL without auth */
  char *ca_file, *cert_file, *key_file;
  long timeout_ms, connect_timeout_ms;
  pthread_mutex_t lock;      /* guards token, token_gen and pool */
  char *token;               /* auth token, NULL before authenticating */
  uint64_t token_gen;        /* bumps on each re-authentication */
  CURL *pool[ETCD_POOL_MAX]; /* idle easy handles (their connections stay open) */
  uint32_t n_pool;
  _Atomic uint64_t requests;   /* HTTP requests sent */
  pthread_mutex_t hist_lock;   /* guards hist */
  ring_etcd_history hist;      /* high-water marks of what etcd said (etcd_history.c) */
  atomic_bool hist_back;       /* hist.went_back, mirrored at each unlock: read without the lock */
  _Atomic int64_t deadline_ms; /* ring_etcd_set_deadline: CLOCK_MONOTONIC ms; 0: none */
};

/* How a request may be retried on another endpoint. */
typedef enum ring__retry {
  RING__READ, /* idempotent: retry on any transport failure */
  RING__WRITE /* retry only when it certainly never reached a server */
} ring__retry;

/* A growable byte buffer with a hard cap, for response bodies. */
typedef struct ring__buf {
  char *p;
  size_t len, cap, max;
  bool overflow;
} ring__buf;

size_t ring__buf_write(char *data, size_t size, size_t n, void *ud); /* curl write callback */

/* Sends a JSON body to /v3/<path> and parses the reply. On RING_OK *resp
 * owns the parsed object (cJSON_Delete it). Maps gateway errors to
 * ring_errno (RING_ESERVER with etcd's message, RING_EAUTH, ...), fails
 * over between endpoints per `retry`, re-authenticates once on an
 * expired token. */
int ring__etcd_call(ring_etcd *c, const char *path, cJSON *body, ring__retry retry, cJSON **resp,
                    ring_error *err);
/* Turns one reply body (body[0..len), not NUL-terminated) with its HTTP
 * status into *resp (RING_OK: a JSON object from a 200 without "error"; the
 * caller cJSON_Deletes it) or the error it states: RING_EPROTO for a body
 * that is not a JSON object, else the gateway's error (ring__etcd_error).
 * *transient: a read may retry on another member. *resp is written only
 * on success. */
int ring__etcd_parse_reply(const char *body, size_t len, long status, cJSON **resp, bool *transient,
                           ring_error *err);

/* The one rule for an error etcd states, whatever the call (unary reply,
 * watch stream, keep-alive); grpc_code 0 when none was given:
 *   RING_EAUTH     gRPC Unauthenticated (16) or PermissionDenied (7), or a
 *                  message naming auth ("auth", "permission denied", "user
 *                  name is empty"): a new token or other credentials may help;
 *   RING_ENOTFOUND gRPC NotFound (5): the lease or key is gone;
 *   RING_EUNKNOWN  gRPC Unavailable (14) or DeadlineExceeded (4), or HTTP
 *                  503: the member cannot serve now and a write may or may
 *                  not have applied;
 *   RING_ESERVER   anything else.
 * *transient (when not NULL): the member was busy (the RING_EUNKNOWN
 * cases), so a read may retry on another one. */
int ring__etcd_errno(double grpc_code, long status, const char *msg, bool *transient);
/* The error object j states, in either of the gateway's shapes (a whole
 * reply {"error":"..","message":"..","code":N}, or inside a stream
 * {"error":{"grpc_code":N,"http_code":H,"message":".."}}), mapped by
 * ring__etcd_errno into err as "<what>: <message> (HTTP <status>)". A
 * status of 0 takes the stream's http_code. Returns the ring_errno. */
int ring__etcd_error(const cJSON *j, long status, const char *what, bool *transient,
                     ring_error *err);

/* A curl handle set up for c's endpoint `ep` and path, with auth and TLS;
 * the caller adds body and callbacks. Returns NULL on ENOMEM. The headers
 * list (freed by the caller) is returned through *headers. */
CURL *ring__etcd_handle(ring_etcd *c, uint32_t ep, const char *path, bool with_token,
                        struct curl_slist **headers);
void ring__etcd_release(ring_etcd *c, CURL *h); /* back to the pool */
/* The same, set up on a new handle rather than a pooled one, for a
 * transfer run in a curl multi of its own (a watch's stream, the lease
 * keeper's refreshes): a multi keeps connections in its own cache, so a
 * pooled handle there would open a second connection while its own sat
 * idle, two descriptors at etcd per watcher. curl_easy_cleanup it after
 * removing it from the multi; the multi's cache keeps the connection for
 * the next transfer. */
CURL *ring__etcd_handle_new(ring_etcd *c, uint32_t ep, const char *path, bool with_token,
                            struct curl_slist **headers);
/* Moves c to the endpoint after `from` (unless another thread already did). */
void ring__etcd_failover(ring_etcd *c, uint32_t from);
/* Authenticates again (after the token expired); RING_EAUTH on refusal. */
int ring__etcd_reauth(ring_etcd *c, uint64_t seen_gen, ring_error *err);

/* CLOCK_MONOTONIC now + ms: the deadline for a pthread_cond_timedwait on a
 * condition variable set to the monotonic clock (waits that a stop wakes). */
struct timespec ring__deadline_ms(long ms);

/* JSON helpers for the gateway's encoding: bytes as base64 strings, int64
 * as decimal strings (or numbers). */
int ring__json_add_bytes(cJSON *o, const char *name, const void *p, size_t n);
int ring__json_add_i64(cJSON *o, const char *name, int64_t v);
bool ring__json_i64(const cJSON *o, const char *name, int64_t *out); /* absent: 0, true */
/* Decodes a base64 field into a malloc()'ed NUL-terminated buffer. */
int ring__json_bytes(const cJSON *o, const char *name, uint8_t **out, size_t *len);
/* The reply parsers of the KV calls, on the reply object that
 * ring__etcd_parse_reply handed out; the fuzz targets in tests/fuzz/ call
 * these very functions. Each returns RING_OK, RING_EPROTO for any shape it
 * does not expect, or RING_ENOMEM; on failure the output holds nothing
 * that needs freeing.
 * ring__kv_parse: one key-value object into *kv (ring_kv_clear it).
 * ring__kvs_parse: a range reply (header, kvs array, count, more) into
 * *out (ring_kvs_clear it). */
int ring__kv_parse(const cJSON *o, ring_kv *kv);
int ring__kvs_parse(const cJSON *resp, ring_kvs *out);
/* A put reply: *revision from the header and, when prev is not NULL, the
 * prev_kv into *prev (zeroed when absent; ring_kv_clear it). Writes
 * *revision only on success. */
int ring__put_reply_parse(const cJSON *resp, int64_t *revision, ring_kv *prev);
/* A delete reply: the count deleted (>= 0) and the header's revision,
 * both written only on success. */
int ring__delete_reply_parse(const cJSON *resp, int64_t *deleted, int64_t *revision);
/* A txn reply for a txn that sent success[n_success] and failure[n_failure]:
 * the branch that ran (`succeeded`, a boolean or absent) must have exactly
 * one response per op, in order, each an object holding only the response
 * of that op's kind. Anything else (responses not an array, a count other
 * than the branch's, a wrong kind, a malformed range) is RING_EPROTO with
 * err naming the field; RING_EINVAL for an op of unknown type; RING_ENOMEM.
 * Writes *out only on success (ring_txn_result_clear it). */
int ring__txn_parse(const cJSON *resp, const ring_op *success, uint32_t n_success,
                    const ring_op *failure, uint32_t n_failure, ring_txn_result *out,
                    ring_error *err);
/* etcd_history.c: the revision mark before a request leaves (its reply is
 * judged against it), then one linearizable reply's header (revision,
 * cluster_id) fed to c's marks; a reply without a header changes nothing. */
int64_t ring__history_floor(ring_etcd *c);
void ring__history_header(ring_etcd *c, const cJSON *resp, int64_t floor);
/* A watch stream's header: only its cluster id is judged (a member behind
 * the others may send an older revision on a watch). */
void ring__history_watch_header(ring_etcd *c, uint64_t cluster_id);
/* Whether etcd's history went back, without the lock: the watcher asks at
 * every version heard, and the answer is almost always no. */
bool ring__history_back(ring_etcd *c);
/* The "cluster_id" of a header object (a decimal string or a number), 0
 * when absent or malformed. */
uint64_t ring__header_cluster_id(const cJSON *header);

/* Adds "key" (base64) to o and, for a prefix, the "range_end" that covers
 * every key starting with it. */
int ring__json_add_key(cJSON *o, const void *key, size_t len, bool prefix);
/* Sends a body that was built (rc says whether building worked: anything
 * but RING_OK, or body NULL, is RING_ENOMEM) and frees it; as
 * ring__etcd_call otherwise. */
int ring__etcd_run(ring_etcd *c, const char *path, cJSON *body, int rc, ring__retry retry,
                   cJSON **resp, ring_error *err);

/* The first key after every key with this prefix (etcd's range_end). */
int ring__prefix_end(const void *key, size_t len, uint8_t **out, size_t *out_len);

#endif /* RING_ETCD_INT_H */
