/*
 * kv_segment.c: encoding and parsing segment records (kv_segment.h).
 */
#include "kv_segment.h"

#include <string.h>
#include <xxhash.h>

static void put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

size_t kv_rec_size(size_t key_len, size_t value_len) { return KV_REC_HEADER + key_len + value_len; }

size_t kv_rec_encode(uint8_t *buf, kv_kind kind, const void *key, size_t key_len, const void *value,
                     size_t value_len, uint64_t ts, uint64_t *sum) {
  bool end = kind == KV_KIND_END;
  if (key_len > KV_KEY_MAX || value_len > KV_VALUE_MAX || (end && key_len != 0) ||
      (!end && key_len == 0) || (kind != KV_KIND_VALUE && value_len != 0) || kind > KV_KIND_END)
    return 0;
  put_u64(buf + 8, ts);
  put_u32(buf + 16, (uint32_t)value_len);
  put_u16(buf + 20, (uint16_t)key_len);
  buf[22] = (uint8_t)kind;
  buf[23] = 0;
  if (key_len)
    memcpy(buf + KV_REC_HEADER, key, key_len);
  if (value_len)
    memcpy(buf + KV_REC_HEADER + key_len, value, value_len);
  size_t size = kv_rec_size(key_len, value_len);
  uint64_t h = XXH3_64bits(buf + 8, size - 8);
  put_u64(buf, h);
  if (sum)
    *sum = h;
  return size;
}

int kv_rec_parse(const uint8_t *buf, size_t len, size_t off, kv_rec *out) {
  if (off > len || len - off < KV_REC_HEADER)
    return KV_PARSE_TORN;
  const uint8_t *p = buf + off;
  uint64_t vlen = get_le(p + 16, 4), klen = get_le(p + 20, 2);
  unsigned kind = p[22];
  if (kind > KV_KIND_END || p[23] != 0 || klen > KV_KEY_MAX || vlen > KV_VALUE_MAX ||
      (kind == KV_KIND_END) != (klen == 0) || (kind != KV_KIND_VALUE && vlen != 0))
    return KV_PARSE_TORN;
  size_t size = kv_rec_size((size_t)klen, (size_t)vlen);
  if (len - off < size)
    return KV_PARSE_TORN;
  uint64_t sum = get_le(p, 8);
  if (XXH3_64bits(p + 8, size - 8) != sum)
    return KV_PARSE_TORN;
  out->key = klen ? p + KV_REC_HEADER : NULL;
  out->value = kind == KV_KIND_VALUE ? p + KV_REC_HEADER + klen : NULL;
  out->key_len = (uint32_t)klen;
  out->value_len = (uint32_t)vlen;
  out->ts = get_le(p + 8, 8);
  out->sum = sum;
  out->off = off;
  out->size = (uint32_t)size;
  out->kind = (kv_kind)kind;
  return kind == KV_KIND_END ? KV_PARSE_END : KV_PARSE_OK;
}

int kv_seg_scan(const uint8_t *buf, size_t len, kv_rec_fn fn, void *ud, kv_seg_info *info) {
  kv_seg_info in = {0, 0, false};
  int rc = 0;
  if (len >= KV_SEG_MAGIC_LEN && memcmp(buf, KV_SEG_MAGIC, KV_SEG_MAGIC_LEN) == 0) {
    size_t off = KV_SEG_MAGIC_LEN;
    in.good_end = off;
    for (;;) {
      kv_rec r;
      int p = kv_rec_parse(buf, len, off, &r);
      if (p == KV_PARSE_TORN)
        break;
      off += r.size;
      in.good_end = off;
      if (p == KV_PARSE_END) {
        in.complete = r.ts == in.records && off == len;
        break;
      }
      in.records++;
      if (fn && (rc = fn(ud, &r)) != 0)
        break;
    }
  }
  if (info)
    *info = in;
  return rc;
}
