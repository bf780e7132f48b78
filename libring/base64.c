/*
 * base64.c: strict RFC 4648 base64 with padding, for the table's owners.
 * The decoder accepts exactly what the encoder writes: no whitespace, no
 * missing or extra padding, no non-zero bits in the last group's slack.
 */
#include "ring_int.h"

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

/* 0..63 for an alphabet character, -1 otherwise. */
static int sextet(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

long ring__base64_decode(const char *in, size_t n, uint8_t *out, size_t out_cap) {
  if (n % 4 != 0)
    return -1;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    int pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
    if (pad > 0 && i + 4 != n)
      return -1; /* padding only in the last group */
    int s[4];
    for (int k = 0; k < 4 - pad; k++)
      if ((s[k] = sextet(in[i + (size_t)k])) < 0)
        return -1;
    for (int k = 4 - pad; k < 4; k++)
      s[k] = 0;
    uint32_t v = (uint32_t)s[0] << 18 | (uint32_t)s[1] << 12 | (uint32_t)s[2] << 6 | (uint32_t)s[3];
    if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
      return -1; /* non-canonical slack bits */
    size_t bytes = 3 - (size_t)pad;
    if (o + bytes > out_cap)
      return -1;
    out[o++] = (uint8_t)(v >> 16);
    if (bytes > 1)
      out[o++] = (uint8_t)(v >> 8);
    if (bytes > 2)
      out[o++] = (uint8_t)v;
  }
  return (long)o;
}
