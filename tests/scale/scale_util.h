/*
 * scale_util.h: what the scale drivers (test_scale_join.c, fleet_run.c)
 * read of a cluster and of Prometheus text. Keys are relative to a
 * cluster's prefix "/ringkeeper/<cluster>/". Reads that fail read as
 * absent (NULL, 0): a driver polls again, with its own deadline.
 */
#ifndef RING_SCALE_UTIL_H
#define RING_SCALE_UTIL_H

#include "etcd_harness.h"
#include "ring_etcd.h"

#include <stdbool.h>
#include <stdint.h>

/* The value at <prefix><what>, malloc()'ed (the caller frees), or NULL. */
char *scale_get(ring_etcd *c, const char *prefix, const char *what);
/* That value as a decimal; 0 when absent. */
uint64_t scale_get_u64(ring_etcd *c, const char *prefix, const char *what);
/* How many keys start with <prefix><what>. */
uint32_t scale_count(ring_etcd *c, const char *prefix, const char *what);
/* Whether plan/proposed is a plan for `nodes` nodes: then its id in
 * id[24] and its moves_total in *moves. */
bool scale_proposed(ring_etcd *c, const char *prefix, int nodes, char id[24], uint32_t *moves);
/* Sum of every sample of `name` (all label sets) in Prometheus text. */
double scale_metric_sum(const char *text, const char *name);

/* The /metrics text of an etcd member (malloc()'ed), or NULL. */
char *scale_etcd_metrics(const etcd_member *m);
/* The KV operations etcd executed, from its /metrics text: the sum of
 * etcd_mvcc_{range,put,txn,delete}_total. A txn of 100 puts counts 101
 * here: this is the store's work, not the requests. Lease keep-alives are
 * no KV operation. */
double scale_etcd_kv_ops(const char *text);
/* The KV requests etcd answered, from grpc_server_handled_total of the
 * service etcdserverpb.KV (the JSON gateway's requests pass through it):
 * *reads the Range calls, *writes the Put, Txn and DeleteRange calls. */
void scale_etcd_kv_requests(const char *text, double *reads, double *writes);

#endif /* RING_SCALE_UTIL_H */
