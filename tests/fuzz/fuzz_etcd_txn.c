/*
 * fuzz_etcd_txn.c: libFuzzer target for the etcd txn reply, through what
 * ring_etcd_txn runs on a reply body: ring__etcd_parse_reply, then
 * ring__txn_parse against the ops the txn sent.
 *
 * Input: one byte of op counts (bits 0-2: success ops, 3-5: failure ops),
 * four bytes of op types (two bits an op, success ops first; 3 reads as a
 * RANGE), then the reply body. A refusal is named and leaves the result
 * untouched; an accepted reply has one result per op of the branch that
 * ran, key-values only for RANGE ops, keys NUL-terminated.
 */
#include "../../libring/etcd_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEAD 5

static void check(const ring_txn_result *r, const ring_op *ops, uint32_t n_ops) {
  if (r->n_ranges != n_ops || r->ranges == NULL)
    abort();
  for (uint32_t i = 0; i < n_ops; i++) {
    const ring_kvs *k = &r->ranges[i];
    if (ops[i].type != RING_OP_RANGE && (k->n != 0 || k->kvs != NULL))
      abort(); /* only a RANGE carries key-values */
    for (uint32_t j = 0; j < k->n; j++) {
      const ring_kv *kv = &k->kvs[j];
      if (kv->key == NULL || kv->key[kv->key_len] != '\0' ||
          (kv->value && kv->value[kv->value_len] != '\0'))
        abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < HEAD)
    return 0;
  uint32_t n_success = data[0] & 7u, n_failure = (data[0] >> 3) & 7u;
  uint32_t types = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 |
                   (uint32_t)data[4] << 24;
  ring_op ops[14];
  memset(ops, 0, sizeof ops);
  for (uint32_t i = 0; i < n_success + n_failure; i++) {
    uint32_t t = (types >> (2 * i)) & 3u;
    ops[i].type = t == 3 ? RING_OP_RANGE : (ring_op_type)t;
  }
  cJSON *resp = NULL;
  bool transient;
  ring_error err = {0};
  int rc =
      ring__etcd_parse_reply((const char *)data + HEAD, size - HEAD, 200, &resp, &transient, &err);
  if (rc != RING_OK) {
    if (err.code != rc || err.message[0] == '\0' || resp != NULL)
      abort();
    return 0;
  }
  ring_txn_result r;
  memset(&r, 0x5a, sizeof r);
  rc = ring__txn_parse(resp, ops, n_success, ops + n_success, n_failure, &r, &err);
  if (rc != RING_OK) {
    const uint8_t *p = (const uint8_t *)&r;
    for (size_t i = 0; i < sizeof r; i++)
      if (p[i] != 0x5a)
        abort(); /* a refusal writes nothing */
    if (err.code != rc || err.message[0] == '\0')
      abort(); /* and is named */
  } else {
    check(&r, r.succeeded ? ops : ops + n_success, r.succeeded ? n_success : n_failure);
    ring_txn_result_clear(&r);
  }
  cJSON_Delete(resp);
  return 0;
}
