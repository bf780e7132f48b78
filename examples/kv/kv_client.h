/*
 * kv_client.h: the client library of ring-kv (PROTOCOL.md, "Clients").
 *
 * A client follows the ring itself (its own libring watcher, no ack) and
 * the servers' addresses (services/kv/ in etcd), and sends each request
 * where the ring says:
 *   - PUT and DELETE go to the whole write set of the key's token (owners
 *     and pending owners, ring_write_set) at once, with one hybrid
 *     timestamp, and succeed when every member that is alive (not down or
 *     removed in the table, and registered) acknowledged, at least one of
 *     them an owner;
 *   - GET goes to the rendezvous read replica (ring_read_replica), then on
 *     failure or a miss ("no record") to the other owners in slot order,
 *     then to the pending owners.
 * Every request carries the client's ring version. A server on a newer
 * version answers 409: the client refreshes its table and retries, as
 * does a server that answers 421 or cannot be reached, until the
 * operation's deadline.
 *
 * Threads: a client may be used from any number of threads at once; each
 * operation borrows one of a pool of connection sets (libcurl multi
 * handles), so connections to the servers are reused.
 *
 * Errors are ring_errno values: RING_OK, RING_ENOTFOUND (GET: no value),
 * RING_EINVAL, RING_ENOMEM, RING_EUNAVAIL (no table, or no live owner),
 * RING_ETIMEDOUT (the deadline passed with servers failing or refusing).
 */
#ifndef RING_KV_CLIENT_H
#define RING_KV_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kv_client kv_client;

struct ring_etcd;

typedef struct kv_client_opts {
  const char *endpoints;  /* etcd client URLs, when etcd is NULL */
  struct ring_etcd *etcd; /* an open client to use instead (its user, TLS): borrowed, closed by
                             the caller after kv_client_close; NULL: one of endpoints */
  const char *cluster;
  uint32_t timeout_ms;         /* per operation, retries included; 0: 10000 */
  uint32_t request_timeout_ms; /* per HTTP request; 0: 3000 */
  bool no_follow;              /* read the table only at open and when a server says it is
                                  stale (409), instead of watching it */
} kv_client_opts;

/* Opens a client: reads the table and the servers' addresses and starts
 * following them. On failure msg says why and *out is untouched. */
int kv_client_open(const kv_client_opts *o, kv_client **out, char *msg, size_t cap);
void kv_client_close(kv_client *c);

int kv_client_put(kv_client *c, const void *key, size_t klen, const void *value, size_t vlen);
int kv_client_delete(kv_client *c, const void *key, size_t klen);
/* On RING_OK *value receives a malloc()'ed copy (free() it) and *vlen its
 * length; RING_ENOTFOUND when the key has no value. */
int kv_client_get(kv_client *c, const void *key, size_t klen, uint8_t **value, size_t *vlen);

/* The ring version the client routes by (0 before a table exists). */
uint64_t kv_client_version(kv_client *c);

typedef struct kv_client_stats {
  uint64_t stale;       /* 409 answers: the client's table was older */
  uint64_t refreshes;   /* tables re-read on demand (no_follow) */
  uint64_t misdirected; /* 421 answers */
  uint64_t fallbacks;   /* GETs that went past their first replica */
  uint64_t retries;     /* operation attempts after the first */
} kv_client_stats;
void kv_client_stats_get(kv_client *c, kv_client_stats *out);

#endif /* RING_KV_CLIENT_H */
