/*
 * test_arc_manifest.c: the arc manifest codec (proto/arc.md): round trips
 * byte for byte, and one check per refusal, each naming the field.
 */
#include "arc_int.h"
#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char good[] =
    "{\"format\":\"ringkeeper.arc-manifest.v1\",\"token\":17,\"bytes\":12,\"files\":["
    "{\"name\":\"a.dat\",\"size\":5,\"checksum\":\"xxh3-64:0123456789abcdef\"},"
    "{\"name\":\"b_1-x\",\"size\":7,\"checksum\":\"xxh3-64:fedcba9876543210\"}]}";

START_TEST(round_trip_byte_for_byte) {
  arc_manifest m;
  ring_error err;
  ck_assert_msg(arc_manifest_decode(good, strlen(good), &m, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(m.token, 17);
  ck_assert_uint_eq(m.n_files, 2);
  ck_assert_uint_eq(m.bytes, 12);
  ck_assert_str_eq(m.files[1].name, "b_1-x");
  ck_assert_uint_eq(m.files[0].xxh3, 0x0123456789abcdefull);
  char *json;
  size_t len;
  ck_assert_int_eq(arc_manifest_encode(&m, &json, &len), RING_OK);
  ck_assert_uint_eq(len, strlen(json));
  ck_assert_str_eq(json, good);
  free(json);
  arc_manifest_free(&m);
  arc_manifest_free(&m); /* twice is harmless */
}
END_TEST

START_TEST(empty_arc) {
  arc_manifest m = {.token = 0}, back;
  char *json;
  size_t len;
  ck_assert_int_eq(arc_manifest_encode(&m, &json, &len), RING_OK);
  ck_assert_int_eq(arc_manifest_decode(json, len, &back, NULL), RING_OK);
  ck_assert_uint_eq(back.n_files, 0);
  ck_assert_ptr_null(back.files);
  free(json);
}
END_TEST

/* good with `from` replaced by `to` must fail with code, naming `field`. */
static void refused(const char *from, const char *to, int code, const char *field) {
  const char *at = strstr(good, from);
  ck_assert_ptr_nonnull(at);
  char doc[1024];
  snprintf(doc, sizeof doc, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
  arc_manifest m = {.token = 99};
  ring_error err = {0};
  int rc = arc_manifest_decode(doc, strlen(doc), &m, &err);
  ck_assert_msg(rc == code, "%s: got %d (%s), want %d", doc, rc, err.message, code);
  ck_assert_int_eq(err.code, code);
  ck_assert_msg(strstr(err.message, field) != NULL, "\"%s\" does not name %s", err.message, field);
  ck_assert_uint_eq(m.token, 99); /* untouched */
}

START_TEST(refusals) {
  refused("arc-manifest.v1", "arc-manifest.v2", RING_EFORMAT, "format");
  refused("\"token\":17", "\"token\":65536", RING_EFIELD, "token");
  refused("\"token\":17", "\"token\":-1", RING_EFIELD, "token");
  refused("\"token\":17", "\"token\":\"17\"", RING_EFIELD, "token");
  refused("\"bytes\":12", "\"bytes\":13", RING_EFIELD, "bytes");
  refused("\"bytes\":12", "\"bytes\":1.5", RING_EFIELD, "bytes");
  refused("\"a.dat\"", "\"..\"", RING_EFIELD, "files[0].name");
  refused("\"a.dat\"", "\".hidden\"", RING_EFIELD, "files[0].name");
  refused("\"a.dat\"", "\"a/b\"", RING_EFIELD, "files[0].name");
  refused("\"a.dat\"", "\"\"", RING_EFIELD, "files[0].name");
  refused("\"a.dat\"", "\"a\\u0000b\"", RING_EFIELD, "u0000");
  refused("\"b_1-x\"", "\"a.dat\"", RING_EFIELD, "files[1].name"); /* duplicate */
  refused("\"b_1-x\"", "\"A\"", RING_EFIELD, "files[1].name");     /* unsorted */
  refused("\"size\":5", "\"size\":9007199254740992", RING_EFIELD, "files[0].size");
  refused("0123456789abcdef", "0123456789ABCDEF", RING_ECHECKSUM, "files[0].checksum");
  refused("xxh3-64:0123", "md5:0123", RING_ECHECKSUM, "files[0].checksum");
  refused(",\"checksum\":\"xxh3-64:fedcba9876543210\"", "", RING_EFIELD, "checksum");
  refused("\"size\":7", "\"size\":7,\"mode\":1", RING_EFIELD, "mode");
  refused("\"files\":[", "\"extra\":1,\"files\":[", RING_EFIELD, "extra");
  refused("{\"name\":\"a.dat\"", "[{\"name\":\"a.dat\"", RING_EJSON, "JSON");
  refused("]}", "]} x", RING_EJSON, "JSON");
  refused("]}", "],\"token\":3}", RING_EFIELD, "token");
}
END_TEST

START_TEST(never_reads_past_len) {
  /* every prefix fails cleanly (ASan would see a read past the end) */
  for (size_t n = 0; n < sizeof good - 1; n++) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, good, n);
    arc_manifest m;
    ring_error err = {0};
    ck_assert_int_ne(arc_manifest_decode(copy, n, &m, &err), RING_OK);
    ck_assert(err.message[0] != '\0');
    free(copy);
  }
}
END_TEST

START_TEST(names_and_tokens) {
  char longest[ARC_NAME_MAX + 2];
  memset(longest, 'x', sizeof longest);
  longest[ARC_NAME_MAX] = '\0';
  ck_assert(arc__valid_name(longest));
  longest[ARC_NAME_MAX] = 'x';
  longest[ARC_NAME_MAX + 1] = '\0';
  ck_assert(!arc__valid_name(longest));
  ck_assert(arc__valid_name("a..b"));
  ck_assert(!arc__valid_name("a b"));
  ck_assert(!arc__valid_name("a%2e"));
  uint32_t t = 7;
  ck_assert(arc__parse_token("0", 1, &t) && t == 0);
  ck_assert(arc__parse_token("65535", 5, &t) && t == 65535);
  ck_assert(!arc__parse_token("65536", 5, &t));
  ck_assert(!arc__parse_token("007", 3, &t));
  ck_assert(!arc__parse_token("", 0, &t));
  ck_assert(!arc__parse_token("1a", 2, &t));
  ck_assert(!arc__parse_token("+1", 2, &t));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("arc_manifest");
  TCase *tc = tcase_create("codec");
  tcase_add_test(tc, round_trip_byte_for_byte);
  tcase_add_test(tc, empty_arc);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, never_reads_past_len);
  tcase_add_test(tc, names_and_tokens);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
