/*
 * sizes.h: sizes/<id> (proto/etcd.md): the bytes of each arc a host owns
 * and holds, so that plans say how much data they move and how long that
 * takes. Internal to Ringkeeper: part of the ringproto library.
 *
 * The decoder validates every rule, names the offending field in err,
 * never reads past len and leaves *out untouched on failure; the encoder
 * refuses (RING_EINVAL) what its decoder refuses.
 */
#ifndef RING_PROTO_SIZES_H
#define RING_PROTO_SIZES_H

#include "ring.h"

#include <stddef.h>
#include <stdint.h>

/* 65536 tokens (at most 6 bytes each) and 65536 sizes (at most 14) with
 * the rest: under 1.32 MB, so the cap (checked before parsing) is 1408 KiB,
 * below etcd's default 1.5 MiB request limit. */
#define RK_SIZES_VALUE_MAX (1408u << 10)
/* An arc of this many bytes or more is reported as this: 13 digits. */
#define RK_SIZE_SATURATED ((UINT64_C(1) << 40) - 1)

typedef struct rk_sizes {
  uint64_t version; /* the table in service when measured: 1 .. 2^53-1 */
  uint32_t n;       /* 1 .. RING_TOKENS_MAX */
  uint32_t *tokens; /* owned tokens whose arc is held, strictly ascending; malloc()'ed */
  uint64_t *bytes;  /* bytes[i]: arc tokens[i]'s size, 0 .. RK_SIZE_SATURATED; malloc()'ed */
} rk_sizes;

int rk_sizes_decode(const char *json, size_t len, rk_sizes *out, ring_error *err);
int rk_sizes_encode(const rk_sizes *s, char **json, size_t *len);
void rk_sizes_free(rk_sizes *s); /* frees the contents, not s; s is zeroed */
/* The size reported for token, or -1 when s does not list it. */
int64_t rk_sizes_of(const rk_sizes *s, uint32_t token);

/* ------------------------------------------- sizes a plan document keeps */

/* A plan balanced by bytes must be recomputed exactly from its document
 * (proto/plan.md), so the document keeps the sizes it was made with: one
 * byte per token on a log scale around the mean arc (proto/plan.md,
 * "arc_sizes"). 0 is an empty arc; q in 1..255 stands for
 * rk_size_weight(q) = m[q % 16] << (q / 16), m[k] = round(2^16 * 2^(k/16)),
 * an integer the planner weighs exactly, the same on every host; q = 128
 * is the mean. Steps are 4.4%; arcs below 1/256 of the mean read as that,
 * above 240x as that. */
void rk_sizes_quantize(const uint64_t *bytes, uint32_t n, uint8_t *q);
uint64_t rk_size_weight(uint8_t q);

#endif /* RING_PROTO_SIZES_H */
