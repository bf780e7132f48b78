/*
 * barrier.h: the version barrier (proto/etcd.md, "The version barrier"):
 * fetches of a new version wait until every host of the table that has an
 * alive/ key and every registered client (clients/) has acked it. The one
 * rule (rd_barrier_laggard) serves the coordinator, which checks it over
 * its cluster read (coordinator/cluster/cluster.c), and the agent, which
 * reads just the three prefixes it needs (rd_barrier_read).
 *
 * Sections: acks; the rule; the agent's read.
 */
#ifndef RING_DAEMON_BARRIER_H
#define RING_DAEMON_BARRIER_H

#include "host_read.h"

/* ------------------------------------------------------------------ acks */

/* A host's or client's ack (acks/<id>). */
typedef struct rd_ack {
  char id[RING_ID_MAX + 1];
  uint64_t version; /* 0 when the value is malformed or over its cap */
} rd_ack;

/* Reads one acks/ record into *a: rd_host_check's verdict (1 ok; 0 the
 * value is bad: a->version 0, why says so; -1 the key names no id: skip
 * it, why says so), with a value that does not decode as an ack counting
 * as bad. why is always written. */
int rd_ack_parse(const ring_kv *kv, size_t prefix_len, rd_ack *a, char *why, size_t size);

/* -------------------------------------------------------------- the rule */

/* What the barrier looks at, borrowed from whoever read it. */
typedef struct rd_barrier_view {
  const void *alive; /* n_alive entries of alive_size bytes, each starting with its id
                        (a string), sorted by id: the hosts with an alive/ key */
  size_t alive_size;
  uint32_t n_alive;
  const rd_ack *acks; /* sorted by id */
  uint32_t n_acks;
  const char (*clients)[RING_ID_MAX + 1]; /* the names under clients/ */
  uint32_t n_clients;
} rd_barrier_view;

/* NULL when the barrier holds for `version`: every node of t (NULL: none)
 * that has an alive/ key and every client has acked at least `version`;
 * else the id of one that has not (for logs), borrowed from t or v. */
const char *rd_barrier_laggard(const rd_barrier_view *v, const ring_table *t, uint64_t version);

/* ------------------------------------------------------- the agent's read */

/* alive/, acks/ and clients/ of one cluster at one store revision. */
typedef struct rd_barrier {
  int64_t revision;
  char (*alive)[RING_ID_MAX + 1]; /* ids with an alive/ key, sorted */
  uint32_t n_alive;
  rd_ack *acks; /* sorted by id */
  uint32_t n_acks;
  char (*clients)[RING_ID_MAX + 1]; /* names under clients/, sorted */
  uint32_t n_clients;
  uint32_t n_bad; /* records whose key names no id (left out) or whose value is over its cap,
                     missing or (acks/) malformed (the host still counts, at version 0):
                     a bad value never opens the barrier */
} rd_barrier;

/* Reads them with rd_host_pages at one revision (a revision compacted
 * meanwhile starts the read again, at most 3 times). Alive and client
 * values are not decoded: the keys are what count. RING_OK with *out
 * (rd_barrier_free it); on failure *out is untouched. */
int rd_barrier_read(ring_etcd *c, const char *cluster, rd_barrier *out, ring_error *err);
void rd_barrier_free(rd_barrier *b); /* frees the contents, not b; NULL is a no-op */

/* A view of b (borrowing it) for rd_barrier_laggard. */
rd_barrier_view rd_barrier_view_of(const rd_barrier *b);

#endif /* RING_DAEMON_BARRIER_H */
