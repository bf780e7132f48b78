/*
 * kv_fanout.h: HTTP requests to several ring-kv servers at once over one
 * libcurl multi handle, whose connection cache keeps the connections for
 * the next operation. Internal to the client library.
 */
#ifndef RING_KV_FANOUT_H
#define RING_KV_FANOUT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_FANOUT_MAX 16 /* owners and pending owners of one token: 2 * RING_REPLICAS_MAX fits */

typedef struct kv_call {
  /* in */
  const char *addr;   /* HOST:PORT */
  const char *method; /* "GET", "PUT", "DELETE" */
  const char *path;   /* "/v1/kv/<escaped key>" */
  const void *body;   /* PUT */
  size_t body_len;
  uint64_t version; /* X-Ring-Version */
  uint64_t ts;      /* X-Ring-Timestamp, 0: none */
  /* out */
  long status;          /* 0: no answer (connection failed or timed out) */
  uint64_t srv_version; /* the answer's X-Ring-Version, 0 when absent */
  bool tombstone;       /* X-Ring-Miss: tombstone */
  uint8_t *resp;        /* the answer's body, malloc()'ed (free it) */
  size_t resp_len, resp_cap;
} kv_call;

/* A set of connections for one thread at a time. */
typedef struct kv_fanout {
  CURLM *multi;
  CURL *easy[KV_FANOUT_MAX];
  struct kv_fanout *next; /* the client's free list */
} kv_fanout;

kv_fanout *kv_fanout_new(void);
void kv_fanout_free(kv_fanout *f);
/* Runs calls[0..n) concurrently (n <= KV_FANOUT_MAX), each bounded by
 * timeout_ms, and fills their out fields. */
void kv_fanout_run(kv_fanout *f, kv_call *calls, int n, uint32_t timeout_ms);

#endif /* RING_KV_FANOUT_H */
