/*
 * host_read.h: reading what hosts write under a cluster's prefixes
 * (alive/, acks/, progress/, clients/, missing/, recovery/), bounded and
 * tolerant (proto/etcd.md, "Reading host records"). Shared by the agent's
 * version barrier (barrier.h) and the coordinator's cluster reader
 * (coordinator/cluster/cluster.c), so neither daemon reaches into the
 * other's folder.
 *
 * Sections: the bounded read; one record's checks.
 */
#ifndef RING_DAEMON_HOST_READ_H
#define RING_DAEMON_HOST_READ_H

#include "records.h"
#include "ring.h"
#include "ring_etcd.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ----------------------------------------------------- the bounded read */

/* Pages of host-written prefixes: at most this many keys a request, so a
 * reply holds at most RD_HOST_PAGE_KEYS values of etcd's largest
 * (--max-request-bytes, 1.5 MiB by default; 2 MiB in the gateway's
 * base64): 64 MiB, under the client's 128 MiB reply cap. */
#define RD_HOST_PAGE_KEYS 32

/* Reads every key under prefix (plen bytes) at revision rev, bounded: the
 * keys alone first (keys_only), then their values in spans of at most
 * RD_HOST_PAGE_KEYS keys, each one prefix range at rev. (The client's
 * range has no "after this key", so a span is the set of keys sharing a
 * start.) A value over cap is dropped as it arrives (value NULL, value_len
 * kept), so memory holds one span of large values at most. *out is sorted
 * by key like a range's reply (ring_kvs_clear it); on failure it is
 * untouched and err says why (RING_EPROTO when the keys changed under a
 * fixed revision, else the client's error). rev 0 reads at the revision
 * the keys were listed at (out->revision says which). */
int rd_host_pages(ring_etcd *c, const char *prefix, size_t plen, int64_t rev, size_t cap,
                  ring_kvs *out, ring_error *err);

/* True when rc/err say etcd compacted the revision a read asked for: the
 * caller reads again at a new one. */
bool rd_host_compacted(int rc, const ring_error *err);

/* --------------------------------------------------- one record's checks */

/* The id after a prefix key ("/ringkeeper/c/alive/" + id) into id; false
 * if the rest is not a valid id (such keys are not ours). */
bool rd_host_key_id(const ring_kv *kv, size_t prefix_len, char id[RING_ID_MAX + 1]);

/* The rest of a key that names no id, for reports: at most 63 bytes,
 * anything outside [a-z0-9._-] shown as '?'. */
void rd_host_key_rest(const ring_kv *kv, size_t prefix_len, char out[RING_ID_MAX + 1]);

/* A host-written record's checks before its own decoder: the key names an
 * id (copied to id) and the value is there and within the kind's cap.
 * Returns 1 when both hold; 0 when the value does not (why says so; the
 * host still counts, its value unused); -1 when the key names no id (why
 * says so, id holds the key's rest as rd_host_key_rest shows it). why is
 * always written (size > 0). */
int rd_host_check(rk_host_kind kind, const ring_kv *kv, size_t prefix_len, char id[RING_ID_MAX + 1],
                  char *why, size_t size);

#endif /* RING_DAEMON_HOST_READ_H */
