/*
 * base64.c: strict RFC 4648 base64 with padding, for the table's owners.
 * The decoder accepts exactly what the encoder writes: no whitespace, no
 * missing or extra padding, no non-zero bits in the last group's slack.
 */
#include "ringx.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t ring__base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

void ring__base64_encode(const uint8_t *in, size_t n, char *out) {
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    *out++ = alphabet[v >> 18];
    *out++ = alphabet[(v >> 12) & 63];
    *out++ = alphabet[(v >> 6) & 63];
    *out++ = alphabet[v & 63];
  }
  if (i < n) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
    *out++ = alphabet[v >> 18];
    *out++ = alphabet[(v >> 12) & 63];
    *out++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
    *out++ = '=';
  }
  *out = '\0';
}

/* 0..63 for an alphabet character, 0xff otherwise: a table, because the
 * coordinator decodes every host record etcd returns at each look (hundreds
 * of megabytes at a large or hostile fleet) and a branch per character
 * costs several times more. */
static const uint8_t sextets[256] = {
#define X 0xff
#define ROW16 X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X
    ROW16, ROW16, /* 0x00-0x1f */
    X,     X,     X,     X,     X,     X,     X,     X,
    X,     X,     X,     62,    X,     X,     X,     63, /* 0x20-0x2f */
    52,    53,    54,    55,    56,    57,    58,    59,
    60,    61,    X,     X,     X,     X,     X,     X, /* 0x30-0x3f */
    X,     0,     1,     2,     3,     4,     5,     6,
    7,     8,     9,     10,    11,    12,    13,    14, /* 0x40-0x4f */
    15,    16,    17,    18,    19,    20,    21,    22,
    23,    24,    25,    X,     X,     X,     X,     X, /* 0x50-0x5f */
    X,     26,    27,    28,    29,    30,    31,    32,
    33,    34,    35,    36,    37,    38,    39,    40, /* 0x60-0x6f */
    41,    42,    43,    44,    45,    46,    47,    48,
    49,    50,    51,    X,     X,     X,     X,     X,     /* 0x70-0x7f */
    ROW16, ROW16, ROW16, ROW16, ROW16, ROW16, ROW16, ROW16, /* 0x80-0xff */
#undef ROW16
#undef X
};

/* The 24 bits of one four-character group without padding; bit 31 set
 * when a character is outside the alphabet. */
static uint32_t group(const char *in) {
  uint32_t a = sextets[(uint8_t)in[0]], b = sextets[(uint8_t)in[1]];
  uint32_t c = sextets[(uint8_t)in[2]], d = sextets[(uint8_t)in[3]];
  return a << 18 | b << 12 | c << 6 | d | ((a | b | c | d) & 0x80) << 24;
}

long ring__base64_decode(const char *in, size_t n, uint8_t *out, size_t out_cap) {
  if (n % 4 != 0)
    return -1;
  size_t full = n == 0 || in[n - 1] != '=' ? n : n - 4; /* groups without padding */
  if (full / 4 * 3 > out_cap)
    return -1;
  size_t o = 0;
  for (size_t i = 0; i < full; i += 4) {
    uint32_t v = group(in + i);
    if (v >> 31)
      return -1;
    out[o++] = (uint8_t)(v >> 16);
    out[o++] = (uint8_t)(v >> 8);
    out[o++] = (uint8_t)v;
  }
  if (full == n)
    return (long)o;
  /* the last group: "xx==" or "xxx=", slack bits zero */
  const char *g = in + full;
  int pad = g[2] == '=' ? 2 : 1;
  char last[4] = {g[0], g[1], pad == 2 ? 'A' : g[2], 'A'};
  uint32_t v = group(last);
  if (v >> 31)
    return -1;
  if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
    return -1; /* non-canonical slack bits */
  size_t bytes = 3 - (size_t)pad;
  if (o + bytes > out_cap)
    return -1;
  out[o++] = (uint8_t)(v >> 16);
  if (bytes > 1)
    out[o++] = (uint8_t)(v >> 8);
  return (long)o;
}
