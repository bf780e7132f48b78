/*
 * test_sizes.c: sizes/<id> values (proto/sizes.h): the documented example
 * round-trips, every rule refuses with its field named and the output
 * untouched, the largest value fits its cap, and rk_sizes_of finds sizes.
 */
#include "sizes.h"
#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char example[] = "{\"format\":\"ringkeeper.sizes.v1\",\"version\":12,"
                              "\"tokens\":[3,17,40],\"bytes\":[0,1048576,734003200]}";

START_TEST(example_round_trip) {
  rk_sizes s;
  ring_error err = {0};
  ck_assert_msg(rk_sizes_decode(example, strlen(example), &s, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(s.version, 12);
  ck_assert_uint_eq(s.n, 3);
  ck_assert_int_eq(rk_sizes_of(&s, 17), 1048576);
  ck_assert_int_eq(rk_sizes_of(&s, 3), 0);
  ck_assert_int_eq(rk_sizes_of(&s, 40), 734003200);
  ck_assert_int_eq(rk_sizes_of(&s, 4), -1);
  ck_assert_int_eq(rk_sizes_of(NULL, 4), -1);
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_sizes_encode(&s, &json, &len), RING_OK);
  ck_assert_str_eq(json, example);
  free(json);
  rk_sizes_free(&s);
}
END_TEST

static void refused(const char *json, int code, const char *field) {
  rk_sizes s, before;
  memset(&s, 0xa5, sizeof s);
  memcpy(&before, &s, sizeof s);
  ring_error err = {0};
  int rc = rk_sizes_decode(json, strlen(json), &s, &err);
  ck_assert_msg(rc == code, "%s: %d, want %d (%s)", json, rc, code, err.message);
  ck_assert_msg(strstr(err.message, field) != NULL, "%s: \"%s\" does not name %s", json,
                err.message, field);
  ck_assert(memcmp(&s, &before, sizeof s) == 0);
}

START_TEST(rules) {
  refused("{\"format\":\"ringkeeper.sizes.v2\",\"version\":1,\"tokens\":[1],\"bytes\":[1]}",
          RING_EFORMAT, "format");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":0,\"tokens\":[1],\"bytes\":[1]}",
          RING_EVERSION, "version");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[],\"bytes\":[]}",
          RING_EFIELD, "tokens");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[2,1],\"bytes\":[1,1]}",
          RING_EFIELD, "tokens[1]");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[65536],\"bytes\":[1]}",
          RING_EFIELD, "tokens[0]");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[1,2],\"bytes\":[1]}",
          RING_EFIELD, "bytes");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[1],"
          "\"bytes\":[1099511627776]}",
          RING_EFIELD, "bytes[0]");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[1],\"bytes\":[-1]}",
          RING_EFIELD, "bytes[0]");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[1],\"bytes\":[1],"
          "\"x\":1}",
          RING_EFIELD, "x");
  refused("{\"format\":\"ringkeeper.sizes.v1\",\"version\":1,\"tokens\":[1]}", RING_EFIELD,
          "bytes");
  rk_sizes bad = {.version = 1,
                  .n = 1,
                  .tokens = (uint32_t[]){1},
                  .bytes = (uint64_t[]){RK_SIZE_SATURATED + 1}};
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_sizes_encode(&bad, &json, &len), RING_EINVAL);
}
END_TEST

/* Every token with the largest size: under RK_SIZES_VALUE_MAX. */
START_TEST(largest_fits_the_cap) {
  rk_sizes s = {.version = RING_VERSION_MAX, .n = RING_TOKENS_MAX};
  s.tokens = malloc(RING_TOKENS_MAX * sizeof *s.tokens);
  s.bytes = malloc(RING_TOKENS_MAX * sizeof *s.bytes);
  for (uint32_t i = 0; i < RING_TOKENS_MAX; i++)
    s.tokens[i] = i, s.bytes[i] = RK_SIZE_SATURATED;
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_sizes_encode(&s, &json, &len), RING_OK);
  printf("largest sizes: %zu bytes (cap %u)\n", len, RK_SIZES_VALUE_MAX);
  ck_assert_uint_le(len, RK_SIZES_VALUE_MAX);
  rk_sizes d;
  ck_assert_int_eq(rk_sizes_decode(json, len, &d, NULL), RING_OK);
  ck_assert_uint_eq(d.n, RING_TOKENS_MAX);
  rk_sizes_free(&d);
  free(json);
  rk_sizes_free(&s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("sizes");
  TCase *tc = tcase_create("sizes");
  tcase_add_test(tc, example_round_trip);
  tcase_add_test(tc, rules);
  tcase_add_test(tc, largest_fits_the_cap);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
