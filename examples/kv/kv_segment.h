/*
 * kv_segment.h: the byte format of ring-kv's segment files (PROTOCOL.md,
 * "Segment files"): a magic, records, an end marker. Pure functions over
 * memory, no I/O, so the fuzzer and the store share one parser.
 *
 * A record is a 24-byte little-endian header (XXH3-64 of the rest of the
 * record, hybrid timestamp, value length, key length, kind, a zero byte)
 * then the key and the value. The end marker is a record of kind END with
 * no key or value whose timestamp field holds the number of records before
 * it. A file without its end marker, or with a record whose checksum does
 * not match, is torn: the records before the damage still count.
 */
#ifndef RING_KV_SEGMENT_H
#define RING_KV_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_SEG_MAGIC "RKVSEG1\n"
#define KV_SEG_MAGIC_LEN 8u
#define KV_REC_HEADER 24u
#define KV_KEY_MAX 1024u
#ifndef KV_VALUE_MAX
#define KV_VALUE_MAX (1u << 20) /* an embedder may lower it */
#endif

typedef enum kv_kind { KV_KIND_VALUE = 0, KV_KIND_TOMBSTONE = 1, KV_KIND_END = 2 } kv_kind;

/* One parsed record. Pointers borrow the buffer it was parsed from. */
typedef struct kv_rec {
  const uint8_t *key;
  const uint8_t *value; /* NULL for tombstones and the end marker */
  uint32_t key_len;
  uint32_t value_len;
  uint64_t ts;   /* hybrid timestamp: wall ms << 16 | counter (END: record count) */
  uint64_t sum;  /* XXH3-64 of the record after its first 8 bytes */
  uint64_t off;  /* where the record starts in the file */
  uint32_t size; /* header + key + value */
  kv_kind kind;
} kv_rec;

/* Bytes a record with these lengths takes. */
size_t kv_rec_size(size_t key_len, size_t value_len);

/* Writes one record at buf (which holds kv_rec_size bytes) and returns its
 * size; 0 when the lengths are out of range (nothing written). A tombstone
 * takes no value. *sum (if not NULL) receives the record's checksum. */
size_t kv_rec_encode(uint8_t *buf, kv_kind kind, const void *key, size_t key_len, const void *value,
                     size_t value_len, uint64_t ts, uint64_t *sum);

/* Parse results. */
enum {
  KV_PARSE_OK = 0,   /* a key record: *out filled */
  KV_PARSE_END = 1,  /* the end marker: *out filled (ts = its count) */
  KV_PARSE_TORN = -1 /* too short, bad lengths or bad checksum: *out untouched */
};
/* Parses the record at buf[off..len). Never reads past len. */
int kv_rec_parse(const uint8_t *buf, size_t len, size_t off, kv_rec *out);

/* What a scan found. */
typedef struct kv_seg_info {
  uint64_t records;  /* good key records (those passed to the callback) */
  uint64_t good_end; /* offset just past the last good record */
  bool complete;     /* magic, records, an end marker counting them, nothing after */
} kv_seg_info;

/* Called for each good record in file order; non-zero stops the scan. */
typedef int (*kv_rec_fn)(void *ud, const kv_rec *r);

/* Scans a whole segment held in memory: checks the magic, then passes each
 * good record to fn until the end marker or the first damage. Returns 0,
 * or fn's non-zero result. info (if not NULL) says how far it got. */
int kv_seg_scan(const uint8_t *buf, size_t len, kv_rec_fn fn, void *ud, kv_seg_info *info);

/* Whether record (ts_a, sum_a) supersedes (ts_b, sum_b): the newer
 * timestamp wins, the larger checksum breaks a tie. Every node merging
 * the same records in any order keeps the same one. */
static inline bool kv_rec_newer(uint64_t ts_a, uint64_t sum_a, uint64_t ts_b, uint64_t sum_b) {
  return ts_a > ts_b || (ts_a == ts_b && sum_a > sum_b);
}

#endif /* RING_KV_SEGMENT_H */
