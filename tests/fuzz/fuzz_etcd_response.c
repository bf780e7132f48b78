/*
 * fuzz_etcd_response.c: libFuzzer target for the etcd client's KV replies,
 * through the functions the client runs on every reply body: the reply
 * parser (ring__etcd_parse_reply, for a 200 and for a 503), then the range,
 * put and delete reply parsers (ring__kvs_parse, ring__put_reply_parse,
 * ring__delete_reply_parse), the key-value parser itself, and the watch
 * message parser on the same bytes. The txn reply has its own target
 * (fuzz_etcd_txn.c). A failure is named and leaves nothing to free; a
 * success has keys and values NUL-terminated at their lengths. The JSON
 * helpers also round-trip: bytes through base64, an int64 through its
 * decimal string.
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

static void range(const cJSON *o) {
  ring_kvs r;
  int rc = ring__kvs_parse(o, &r);
  if (rc != RING_OK) {
    if (r.kvs != NULL || r.n != 0)
      abort();
    return;
  }
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "kvs");
  if ((arr != NULL && !cJSON_IsArray(arr)) || r.n != (uint32_t)cJSON_GetArraySize(arr))
    abort(); /* only an array's elements are key-values, all of them */
  for (uint32_t i = 0; i < r.n; i++)
    check_kv(&r.kvs[i]);
  ring_kvs_clear(&r);
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
  ring_kv_clear(&k);
}

static void put_and_delete(const cJSON *o) {
  int64_t rev = -7, n = -7;
  ring_kv prev = {0};
  int rc = ring__put_reply_parse(o, &rev, &prev);
  if (rc == RING_OK) {
    if (prev.key != NULL)
      check_kv(&prev);
    ring_kv_clear(&prev);
  } else if (rev != -7 || prev.key != NULL || prev.value != NULL) {
    abort(); /* output written only on success */
  }
  if (rc == RING_OK && ring__put_reply_parse(o, &rev, NULL) != RING_OK)
    abort(); /* without prev, prev_kv goes unread */
  rev = -7;
  rc = ring__delete_reply_parse(o, &n, &rev);
  if (rc == RING_OK ? n < 0 : (n != -7 || rev != -7))
    abort();
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

/* The reply parser: a failure is named and hands nothing out. */
static cJSON *reply(const uint8_t *data, size_t size, long status) {
  cJSON *j = (cJSON *)0x1;
  bool transient;
  ring_error err = {0};
  int rc = ring__etcd_parse_reply((const char *)data, size, status, &j, &transient, &err);
  if (rc != RING_OK) {
    if (err.code != rc || err.message[0] == '\0' || j != (cJSON *)0x1)
      abort();
    return NULL;
  }
  if (status != 200 || !cJSON_IsObject(j))
    abort(); /* only a 200 carries a reply */
  return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cJSON *j = reply(data, size, 200);
  if (j != NULL) {
    range(j);
    kv(j);
    put_and_delete(j);
    helpers(j, data, size);
    cJSON_Delete(j);
  }
  if (reply(data, size, 503) != NULL)
    abort();
  ring__watch_resp r;
  ring_error err = {0};
  int rc = ring__watch_parse((const char *)data, size, &r, &err);
  if (rc == RING_OK)
    ring__watch_resp_free(&r);
  else if (err.code != rc || err.message[0] == '\0')
    abort();
  return 0;
}
