/*
 * cluster_int.h: what the full cluster read (cluster.c) shares with the
 * watch-fed cache (state_cache.c) and the state comparison (state_diff.c),
 * so that one parser judges every record however it arrived. Internal to
 * ringcluster.
 */
#ifndef RING_COORD_CLUSTER_INT_H
#define RING_COORD_CLUSTER_INT_H

#include "cluster.h"

/* One part of the state: which bit asks for it, its key relative to the
 * cluster's prefix, whether that key is a prefix, and for a prefix hosts
 * write, their kind (else -1): those are read in bounded spans
 * (rd_host_pages), the rest in one txn. */
typedef struct rk_part {
  unsigned bit;
  const char *what;
  bool prefix;
  int host;
} rk_part;

#define RK_N_PARTS 15
extern const rk_part rk__parts[RK_N_PARTS];

/* The part of rk__parts that key (len bytes) belongs to among those
 * RK_READ_ALL reads, given the cluster's prefix ("/ringkeeper/<c>/", plen
 * bytes); -1 for a key none of them reads (tables/, journal/, sizes/...). */
int rk__part_of(const uint8_t *key, size_t len, size_t plen);

/* Parses r (the keys of part `part`, sorted, values over the kind's cap
 * already dropped) into s exactly as the full read does: appends to s's
 * arrays for that part (allocating them; s's arrays for the part must be
 * empty) and to s->bad. prefix_len: bytes of the part's key with the
 * cluster's prefix. Returns the parser's error (a control-plane record that
 * does not parse, err naming its key) or RING_OK. */
int rk__part_parse(rk_state *s, size_t part, const ring_kvs *r, size_t prefix_len, ring_error *err);

/* Applies one watch event of part `part` to s (state_apply.c), as a full
 * read of the store after it would have read it: the key's entry and bad
 * record replaced (a put, parsed by rk__part_parse) or removed (a delete),
 * s->revision raised to the event's. plen: the cluster prefix's bytes. On
 * failure (a control-plane record the full read refuses, memory) s is
 * still a valid state to free, but not the store's: drop it. */
int rk__state_apply(rk_state *s, int part, size_t plen, const ring_event *ev, ring_error *err);

/* The order of a state's bad list: kind, host, then mod revision and
 * reason (a total order, so equal states list them alike). */
int rk__bad_cmp(const void *a, const void *b);

#endif /* RING_COORD_CLUSTER_INT_H */
