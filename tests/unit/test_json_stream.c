/*
 * test_json_stream.c: the splitter for etcd's streamed replies
 * (libring/json_stream.c): several messages per chunk, one message over
 * many chunks (every split point), strings with braces and escapes,
 * nesting, garbage between objects, the size and depth caps, stopping
 * from the callback, and the buffer's memory.
 */
#include "json_stream.h"
#include "ring.h"
#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Collects messages as "msg1|msg2|..." (bounded). */
typedef struct sink {
  char out[1 << 16];
  size_t len;
  int count;
  int stop_after;                  /* return 1 from the callback after this many, 0: never */
  const char *chunk_lo, *chunk_hi; /* the current chunk, to see in-place handoff */
  int in_place;
} sink;

static int collect(void *ud, const char *msg, size_t len) {
  sink *s = ud;
  ck_assert_uint_gt(len, 1);
  ck_assert_int_eq(msg[0], '{');
  ck_assert(msg[len - 1] == '}' || msg[len - 1] == ']');
  ck_assert_uint_lt(s->len + len + 1, sizeof s->out);
  if (s->count++)
    s->out[s->len++] = '|';
  memcpy(s->out + s->len, msg, len);
  s->len += len;
  s->out[s->len] = '\0';
  if (msg >= s->chunk_lo && msg < s->chunk_hi)
    s->in_place++;
  return s->stop_after && s->count >= s->stop_after ? 1 : 0;
}

static int feed(ring__jstream *js, sink *s, const char *p, size_t n) {
  s->chunk_lo = p;
  s->chunk_hi = p + n;
  return ring__jstream_feed(js, p, n, collect, s);
}

/* Feeds text split at `cut` and checks the messages joined by '|'. */
static void expect_split(const char *text, size_t cut, const char *want) {
  ring__jstream js;
  ring__jstream_init(&js, 0, 0);
  sink *s = calloc(1, sizeof *s);
  size_t n = strlen(text);
  ck_assert_int_eq(feed(&js, s, text, cut), 0);
  ck_assert_int_eq(feed(&js, s, text + cut, n - cut), 0);
  ck_assert_msg(strcmp(s->out, want) == 0, "cut %zu: got %s", cut, s->out);
  ck_assert(!ring__jstream_partial(&js));
  ring__jstream_free(&js);
  free(s);
}

static const char tricky[] = "{\"a\":1}{\"b\":\"}{\"}\n"
                             "  {\"c\":\"say \\\"hi\\\" {\"}\r\n\t"
                             "{\"d\":\"\\\\\"}"
                             "{\"e\":{\"f\":[{\"g\":\"]\"},[]],\"h\":{}}}"
                             "{\"u\":\"\\u007b\\\\\\\"}\"}\n";
static const char tricky_want[] = "{\"a\":1}|{\"b\":\"}{\"}|{\"c\":\"say \\\"hi\\\" {\"}|"
                                  "{\"d\":\"\\\\\"}|{\"e\":{\"f\":[{\"g\":\"]\"},[]],\"h\":{}}}|"
                                  "{\"u\":\"\\u007b\\\\\\\"}\"}";

START_TEST(several_messages_per_chunk) {
  expect_split(tricky, strlen(tricky), tricky_want);
  ring__jstream js;
  ring__jstream_init(&js, 0, 0);
  sink s = {0};
  ck_assert_int_eq(feed(&js, &s, tricky, strlen(tricky)), 0);
  ck_assert_int_eq(s.count, 6);
  ck_assert_int_eq(s.in_place, 6); /* whole messages are handed over without a copy */
  ck_assert_ptr_null(js.buf);
  ring__jstream_free(&js);
}
END_TEST

START_TEST(every_split_point) {
  for (size_t cut = 0; cut <= strlen(tricky); cut++)
    expect_split(tricky, cut, tricky_want);
}
END_TEST

START_TEST(byte_at_a_time_and_every_pair_of_cuts) {
  size_t n = strlen(tricky);
  ring__jstream js;
  ring__jstream_init(&js, 0, 0);
  sink *s = calloc(1, sizeof *s);
  for (size_t i = 0; i < n; i++)
    ck_assert_int_eq(feed(&js, s, tricky + i, 1), 0);
  ck_assert_str_eq(s->out, tricky_want);
  ring__jstream_free(&js);
  for (size_t a = 0; a <= n; a += 3)
    for (size_t b = a; b <= n; b += 2) {
      memset(s, 0, sizeof *s);
      ring__jstream_init(&js, 0, 0);
      ck_assert_int_eq(feed(&js, s, tricky, a), 0);
      ck_assert_int_eq(feed(&js, s, tricky + a, b - a), 0);
      ck_assert_int_eq(feed(&js, s, tricky + b, n - b), 0);
      ck_assert_msg(strcmp(s->out, tricky_want) == 0, "cuts %zu %zu", a, b);
      ring__jstream_free(&js);
    }
  free(s);
}
END_TEST

START_TEST(partial_and_reset) {
  ring__jstream js;
  ring__jstream_init(&js, 0, 0);
  sink s = {0};
  ck_assert(!ring__jstream_partial(&js));
  ck_assert_int_eq(feed(&js, &s, "{\"a\":\"}", 7), 0);
  ck_assert(ring__jstream_partial(&js));
  ck_assert_int_eq(s.count, 0);
  ring__jstream_reset(&js); /* a new connection starts clean */
  ck_assert(!ring__jstream_partial(&js));
  ck_assert_int_eq(feed(&js, &s, "{}", 2), 0);
  ck_assert_str_eq(s.out, "{}");
  ring__jstream_free(&js);
}
END_TEST

START_TEST(garbage_between_objects) {
  static const char *bad[] = {"x", "{}x{}", "{} ,{}", "[1]", "\"s\"", "}", "{}}", "\0{}", "1"};
  static const int before[] = {0, 1, 1, 0, 0, 0, 1, 0, 0};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ring__jstream js;
    ring__jstream_init(&js, 0, 0);
    sink s = {0};
    size_t n = i == 7 ? 3 : strlen(bad[i]);
    ck_assert_int_eq(feed(&js, &s, bad[i], n), RING_EPROTO);
    ck_assert_msg(s.count == before[i], "case %zu", i);
    /* sticky: nothing more is accepted until a reset */
    ck_assert_int_eq(feed(&js, &s, "{}", 2), RING_EPROTO);
    ck_assert_int_eq(s.count, before[i]);
    ring__jstream_reset(&js);
    ck_assert_int_eq(feed(&js, &s, "{}", 2), 0);
    ring__jstream_free(&js);
  }
}
END_TEST

START_TEST(size_cap) {
  ring__jstream js;
  ring__jstream_init(&js, 16, 0);
  sink s = {0};
  const char *exact = "{\"a\":\"01234567\"}"; /* 16 bytes: allowed */
  ck_assert_uint_eq(strlen(exact), 16);
  ck_assert_int_eq(feed(&js, &s, exact, 16), 0);
  for (int i = 0; i < 16; i++) /* and over chunks */
    ck_assert_int_eq(feed(&js, &s, exact + i, 1), 0);
  ck_assert_int_eq(s.count, 2);
  ck_assert_int_eq(feed(&js, &s, "{\"a\":\"012345678\"}", 17), RING_ETOOBIG);
  ring__jstream_reset(&js);
  const char *over = "{\"a\":\"012345678\"}";
  for (int i = 0; i < 16; i++)
    ck_assert_int_eq(feed(&js, &s, &over[i], 1), 0);
  ck_assert_int_eq(feed(&js, &s, "}", 1), RING_ETOOBIG);
  ck_assert_uint_le(js.cap, 16); /* never grew past the cap */
  ring__jstream_free(&js);
}
END_TEST

START_TEST(endless_message_hits_the_cap) {
  /* '{"result":' forever: the depth cap stops it; an endless string: the size cap */
  ring__jstream js;
  ring__jstream_init(&js, 1 << 20, 0);
  sink s = {0};
  int rc = 0;
  for (int i = 0; i < 100000 && rc == 0; i++)
    rc = feed(&js, &s, "{\"result\":", 10);
  ck_assert_int_eq(rc, RING_EPROTO);
  ring__jstream_reset(&js);
  char chunk[4096];
  memset(chunk, 'x', sizeof chunk);
  rc = feed(&js, &s, "{\"s\":\"", 6);
  for (int i = 0; i < 100000 && rc == 0; i++)
    rc = feed(&js, &s, chunk, sizeof chunk);
  ck_assert_int_eq(rc, RING_ETOOBIG);
  ck_assert_uint_le(js.cap, 1 << 20);
  ck_assert_int_eq(s.count, 0);
  ring__jstream_free(&js);
}
END_TEST

START_TEST(depth_cap) {
  ring__jstream js;
  ring__jstream_init(&js, 0, 3);
  sink s = {0};
  ck_assert_int_eq(feed(&js, &s, "{\"a\":{\"b\":[1]}}", 15), 0);
  ck_assert_int_eq(feed(&js, &s, "{\"a\":{\"b\":[{}]}}", 16), RING_EPROTO);
  ck_assert_int_eq(s.count, 1);
  ring__jstream_free(&js);
}
END_TEST

START_TEST(callback_stops_the_feed) {
  ring__jstream js;
  ring__jstream_init(&js, 0, 0);
  sink s = {.stop_after = 2};
  ck_assert_int_eq(feed(&js, &s, "{}{\"a\":1}{\"b\":2}", 16), 1);
  ck_assert_str_eq(s.out, "{}|{\"a\":1}");
  ring__jstream_free(&js);
}
END_TEST

/* Counts messages and their total length (for messages too big to keep). */
typedef struct tally {
  int n;
  size_t bytes;
} tally;

static int count(void *ud, const char *msg, size_t len) {
  tally *t = ud;
  (void)msg;
  t->n++;
  t->bytes += len;
  return 0;
}

START_TEST(big_message_buffer_is_released) {
  size_t n = 3u << 20;
  char *big = malloc(n);
  memset(big, 'y', n);
  memcpy(big, "{\"v\":\"", 6);
  memcpy(big + n - 2, "\"}", 2);
  ring__jstream js;
  ring__jstream_init(&js, 0, 0);
  tally t = {0, 0};
  for (size_t off = 0; off < n; off += 65536) {
    size_t len = n - off < 65536 ? n - off : 65536;
    ck_assert_int_eq(ring__jstream_feed(&js, big + off, len, count, &t), 0);
    ck_assert_int_eq(t.n, off + len == n ? 1 : 0);
  }
  ck_assert_uint_eq(t.bytes, n);
  /* a 3 MiB buffer is not kept for the small messages that follow */
  ck_assert_ptr_null(js.buf);
  ck_assert_uint_eq(js.cap, 0);
  ck_assert_int_eq(ring__jstream_feed(&js, "{\"a\":", 5, count, &t), 0);
  ck_assert_uint_le(js.cap, 4096);
  ring__jstream_free(&js);
  free(big);
}
END_TEST

/* Random messages (strings full of braces, quotes and backslashes, nested
 * objects and arrays) printed by cJSON, joined with random whitespace, fed
 * in random chunks: the splitter gives back exactly the printed messages. */
static unsigned rnd(unsigned *state) {
  *state = *state * 1103515245u + 12345u;
  return (*state >> 16) & 0x7fff;
}

static void random_value(char *out, size_t *len, size_t cap, unsigned *st, int depth) {
  static const char alphabet[] = "{}[]\"\\ a:,/\n";
  unsigned kind = depth > 4 ? 0 : rnd(st) % 4;
  if (kind == 0) { /* a string */
    out[(*len)++] = '"';
    for (unsigned i = rnd(st) % 12; i > 0 && *len + 4 < cap; i--) {
      char ch = alphabet[rnd(st) % (sizeof alphabet - 1)];
      if (ch == '"' || ch == '\\')
        out[(*len)++] = '\\';
      if (ch == '\n') {
        out[(*len)++] = '\\';
        ch = 'n';
      }
      out[(*len)++] = ch;
    }
    out[(*len)++] = '"';
    return;
  }
  bool obj = kind != 3;
  out[(*len)++] = obj ? '{' : '[';
  for (unsigned i = rnd(st) % 4, first = 1; i > 0 && *len + 64 < cap; i--, first = 0) {
    if (!first)
      out[(*len)++] = ',';
    if (obj) {
      memcpy(out + *len, "\"k\":", 4);
      *len += 4;
    }
    random_value(out, len, cap, st, depth + 1);
  }
  out[(*len)++] = obj ? '}' : ']';
}

START_TEST(random_streams_round_trip) {
  unsigned st = 12345;
  static char text[1 << 15], want[1 << 15];
  sink *s = calloc(1, sizeof *s);
  for (int round = 0; round < 300; round++) {
    size_t tlen = 0, wlen = 0;
    int msgs = 1 + (int)(rnd(&st) % 8);
    for (int m = 0; m < msgs && tlen < sizeof text - 4096; m++) {
      for (unsigned ws = rnd(&st) % 3; ws > 0; ws--)
        text[tlen++] = " \n\r\t"[rnd(&st) % 4];
      size_t start = tlen;
      text[tlen++] = '{';
      memcpy(text + tlen, "\"m\":", 4);
      tlen += 4;
      random_value(text, &tlen, tlen + 2048, &st, 1); /* at most ~2 KiB a message */
      text[tlen++] = '}';
      if (m)
        want[wlen++] = '|';
      memcpy(want + wlen, text + start, tlen - start);
      wlen += tlen - start;
    }
    want[wlen] = '\0';
    ring__jstream js;
    ring__jstream_init(&js, 0, 0);
    memset(s, 0, sizeof *s);
    for (size_t off = 0; off < tlen;) {
      size_t len = 1 + rnd(&st) % 64;
      if (len > tlen - off)
        len = tlen - off;
      ck_assert_int_eq(feed(&js, s, text + off, len), 0);
      off += len;
    }
    ck_assert_msg(strcmp(s->out, want) == 0, "round %d", round);
    ck_assert(!ring__jstream_partial(&js));
    ring__jstream_free(&js);
  }
  free(s);
}
END_TEST

Suite *suite(void);
Suite *suite(void) {
  Suite *s = suite_create("json_stream");
  TCase *tc = tcase_create("split");
  tcase_add_test(tc, several_messages_per_chunk);
  tcase_add_test(tc, every_split_point);
  tcase_add_test(tc, byte_at_a_time_and_every_pair_of_cuts);
  tcase_add_test(tc, partial_and_reset);
  tcase_add_test(tc, garbage_between_objects);
  tcase_add_test(tc, size_cap);
  tcase_add_test(tc, endless_message_hits_the_cap);
  tcase_add_test(tc, depth_cap);
  tcase_add_test(tc, callback_stops_the_feed);
  tcase_add_test(tc, big_message_buffer_is_released);
  tcase_add_test(tc, random_streams_round_trip);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
