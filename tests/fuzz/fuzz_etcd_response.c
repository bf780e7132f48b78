/*
 * fuzz_etcd_response.c: libFuzzer target for the parsers of etcd's KV
 * replies (ring__kvs_parse, ring__kv_parse, the txn responses' ranges, the
 * int64 and base64 field helpers) and the watch message parser, on
 * arbitrary JSON. A failure leaves nothing to free; a success has keys and
 * values NUL-terminated at their lengths. The helpers also round-trip:
 * bytes through base64 and an int64 through its decimal string.
 */
#include "../../libring/etcd_watch_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_kv(const ring_kv *kv) {
  if (kv->key == NULL || kv->key[kv->key_len] != '\0')
    abort();
  if (kv->value && kv->value[kv->value_len] != '\0')
    abort();
}

static void kvs(const cJSON *o) {
  ring_kvs r;
  int rc = ring__kvs_parse(o, &r);
  if (rc != RING_OK) {
    if (r.kvs != NULL || r.n != 0)
      abort();
    return;
  }
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "kvs");
  if (r.n != (uint32_t)cJSON_GetArraySize(arr))
    abort();
  for (uint32_t i = 0; i < r.n; i++)
    check_kv(&r.kvs[i]);
  ring_kvs_free(&r);
}

static void kv(const cJSON *o) {
  ring_kv k;
  int rc = ring__kv_parse(o, &k);
  if (rc != RING_OK) {
    if (k.key != NULL || k.value != NULL)
      abort();
    return;
  }
  check_kv(&k);
  ring_kv_free(&k);
}

/* What the txn parser does with each response. */
static void txn(const cJSON *resp) {
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(resp, "responses");
  for (const cJSON *r = cJSON_IsArray(rs) ? rs->child : NULL; r; r = r->next) {
    const cJSON *range = cJSON_GetObjectItemCaseSensitive(r, "response_range");
    if (range)
      kvs(range);
  }
}

static void helpers(const cJSON *o, const uint8_t *data, size_t size) {
  int64_t v;
  (void)ring__json_i64(o, "revision", &v);
  uint8_t *b = NULL;
  size_t blen = 0;
  if (ring__json_bytes(o, "key", &b, &blen) == RING_OK) {
    if (b[blen] != '\0')
      abort();
    free(b);
  }
  /* round trips through a fresh object */
  cJSON *t = cJSON_CreateObject();
  if (t == NULL)
    return;
  int64_t num = 0;
  memcpy(&num, data, size < sizeof num ? size : sizeof num);
  if (ring__json_add_bytes(t, "b", data, size) == RING_OK &&
      ring__json_bytes(t, "b", &b, &blen) == RING_OK) {
    if (blen != size || (size && memcmp(b, data, size) != 0))
      abort();
    free(b);
  }
  int64_t back = 0;
  if (ring__json_add_i64(t, "n", num) == RING_OK && (!ring__json_i64(t, "n", &back) || back != num))
    abort();
  cJSON_Delete(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cJSON *j = cJSON_ParseWithLength((const char *)data, size);
  if (j != NULL) {
    kvs(j);
    kv(j);
    txn(j);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prev_kv");
    if (p)
      kv(p);
    helpers(j, data, size);
    cJSON_Delete(j);
  }
  ring__watch_resp r;
  ring_error err = {0};
  int rc = ring__watch_parse((const char *)data, size, &r, &err);
  if (rc == RING_OK)
    ring__watch_resp_free(&r);
  else if (err.code != rc || err.message[0] == '\0')
    abort();
  return 0;
}
