/*
 * fuzz_kv_segment.c: libFuzzer target for ring-kv's segment parser
 * (examples/kv/kv_segment.h). Any input must scan without reading past
 * its end; every record the scan accepts must re-encode to the same
 * bytes, and a segment rebuilt from the accepted records must scan back
 * complete with the same count.
 */
#include "kv_segment.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct ctx {
  const uint8_t *data;
  uint8_t *out; /* the records re-encoded, after a magic */
  size_t len;
} ctx;

static int check(void *ud, const kv_rec *r) {
  ctx *c = ud;
  size_t n = kv_rec_encode(c->out + c->len, r->kind, r->key, r->key_len, r->value, r->value_len,
                           r->ts, NULL);
  if (n != r->size || memcmp(c->out + c->len, c->data + r->off, n) != 0)
    abort(); /* an accepted record is canonical */
  c->len += n;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ctx c = {data, malloc(size + KV_REC_HEADER + KV_SEG_MAGIC_LEN), KV_SEG_MAGIC_LEN};
  if (c.out == NULL)
    return 0;
  memcpy(c.out, KV_SEG_MAGIC, KV_SEG_MAGIC_LEN);
  kv_seg_info info;
  kv_seg_scan(data, size, check, &c, &info);
  if (info.good_end > size)
    abort();
  c.len += kv_rec_encode(c.out + c.len, KV_KIND_END, NULL, 0, NULL, 0, info.records, NULL);
  kv_seg_info again;
  kv_seg_scan(c.out, c.len, NULL, NULL, &again);
  if (!again.complete || again.records != info.records || again.good_end != c.len)
    abort();
  free(c.out);
  return 0;
}
