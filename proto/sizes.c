/*
 * sizes.c: sizes/<id> values (sizes.h, proto/etcd.md).
 */
#include "sizes.h"

#include "proto_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIZES_FORMAT "ringkeeper.sizes.v1"

/* `bytes`: exactly n integers in [0, RK_SIZE_SATURATED]. */
static int decode_bytes(const cJSON *root, uint32_t n, uint64_t **out, ring_error *err) {
  const cJSON *arr = ring__json_array(root, "bytes", err);
  if (arr == NULL)
    return RING_EFIELD;
  if (cJSON_GetArraySize(arr) != (int)n)
    return ring__err(err, RING_EFIELD, "bytes: %d entries, tokens has %u", cJSON_GetArraySize(arr),
                     n);
  uint64_t *b = *out = malloc((size_t)n * sizeof *b);
  if (b == NULL)
    return ring__err(err, RING_ENOMEM, "bytes: out of memory");
  uint32_t i = 0;
  for (const cJSON *e = arr->child; e != NULL; e = e->next, i++)
    if (!ring__json_as_uint(e, RK_SIZE_SATURATED, &b[i]))
      return ring__err(err, RING_EFIELD, "bytes[%u]: must be an integer in [0, 2^40-1]", i);
  return RING_OK;
}

int rk_sizes_decode(const char *json, size_t len, rk_sizes *out, ring_error *err) {
  static const char *const keys[] = {"format", "version", "tokens", "bytes"};
  cJSON *root = NULL;
  rk_sizes s = {0};
  int rc =
      ring__record_parse(json, len, SIZES_FORMAT, keys, sizeof keys / sizeof *keys, &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", 1, RING_VERSION_MAX, RING_EVERSION, &s.version, err);
  if (rc == RING_OK)
    rc = rk__token_list_decode(root, "tokens", 1, &s.tokens, &s.n, err);
  if (rc == RING_OK)
    rc = decode_bytes(root, s.n, &s.bytes, err);
  cJSON_Delete(root);
  if (rc != RING_OK || out == NULL) {
    rk_sizes_free(&s);
    return rc;
  }
  *out = s;
  return RING_OK;
}

int rk_sizes_encode(const rk_sizes *s, char **json, size_t *len) {
  if (s == NULL || json == NULL || s->version == 0 || s->version > RING_VERSION_MAX ||
      !rk__token_list_valid(s->tokens, s->n, 1) || s->bytes == NULL)
    return RING_EINVAL;
  for (uint32_t i = 0; i < s->n; i++)
    if (s->bytes[i] > RK_SIZE_SATURATED)
      return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b, "{\"format\":\"" SIZES_FORMAT "\",\"version\":%" PRIu64 ",", s->version);
  rk__token_list_encode(&b, "tokens", s->tokens, s->n);
  ring__sb_puts(&b, ",\"bytes\":[");
  for (uint32_t i = 0; i < s->n; i++)
    ring__sb_printf(&b, "%s%" PRIu64, i ? "," : "", s->bytes[i]);
  ring__sb_puts(&b, "]}");
  return ring__sb_finish(&b, json, len);
}

void rk_sizes_free(rk_sizes *s) {
  if (s == NULL)
    return;
  free(s->tokens);
  free(s->bytes);
  memset(s, 0, sizeof *s);
}

int64_t rk_sizes_of(const rk_sizes *s, uint32_t token) {
  uint32_t lo = 0, hi = s ? s->n : 0;
  while (lo < hi) { /* tokens are strictly ascending */
    uint32_t mid = lo + (hi - lo) / 2;
    if (s->tokens[mid] == token)
      return (int64_t)s->bytes[mid];
    if (s->tokens[mid] < token)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/* ------------------------------------------- sizes a plan document keeps */

/* round(2^16 * 2^(k/16)), k = 0..15: the mantissas of rk_size_weight. */
static const uint32_t weight_mantissa[16] = {65536,  68438,  71468,  74632, 77936,  81386,
                                             84990,  88752,  92682,  96785, 101070, 105545,
                                             110218, 115098, 120194, 125515};

uint64_t rk_size_weight(uint8_t q) {
  return q == 0 ? 0 : (uint64_t)weight_mantissa[q % 16] << (q / 16);
}

/* The q whose weight is nearest v (v > 0, in weight units). */
static uint8_t nearest(double v) {
  double e = 16.0 * log2(v / 65536.0); /* q for a weight of exactly v */
  long q = lround(e);
  q = q < 1 ? 1 : q > 255 ? 255 : q;
  uint8_t best = (uint8_t)q;
  for (long c = q - 1; c <= q + 1; c++) /* lround of a log may land one off */
    if (c >= 1 && c <= 255 &&
        fabs((double)rk_size_weight((uint8_t)c) - v) < fabs((double)rk_size_weight(best) - v))
      best = (uint8_t)c;
  return best;
}

void rk_sizes_quantize(const uint64_t *bytes, uint32_t n, uint8_t *q) {
  double sum = 0;
  uint32_t nonzero = 0;
  for (uint32_t i = 0; i < n; i++) {
    sum += (double)bytes[i];
    nonzero += bytes[i] > 0;
  }
  double mean = nonzero ? sum / n : 1; /* over every token: the mean arc maps to q = 128 */
  for (uint32_t i = 0; i < n; i++)
    q[i] = bytes[i] == 0 ? 0 : nearest((double)bytes[i] / mean * (double)rk_size_weight(128));
}
