/*
 * test_journal.c: the journal's records (proto/journal.h): the documented
 * example decodes and re-encodes to the same bytes, every rule refuses
 * with its field named and the output untouched, rk_event_make turns any
 * text into a valid event, and entry names are what proto/etcd.md says.
 */
#include "journal.h"
#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char example[] =
    "{\"format\":\"ringkeeper.event.v1\",\"at_ms\":1796000000000,\"by\":\"coordinator/coord-a\","
    "\"what\":\"node.addr\",\"node\":\"n1\","
    "\"detail\":\"address 127.0.0.1:7101 -> 127.0.0.1:7201 (followed its alive/ key)\"}";

START_TEST(example_round_trip) {
  rk_event e;
  ring_error err = {0};
  ck_assert_int_eq(rk_event_decode(example, strlen(example), &e, &err), RING_OK);
  ck_assert_str_eq(e.by, "coordinator/coord-a");
  ck_assert_str_eq(e.what, "node.addr");
  ck_assert_str_eq(e.node, "n1");
  ck_assert_uint_eq(e.at_ms, 1796000000000u);
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_event_encode(&e, &json, &len), RING_OK);
  ck_assert_str_eq(json, example);
  ck_assert_uint_eq(len, strlen(example));
  free(json);
}
END_TEST

/* Each input must be refused with `code`, naming `field`, output untouched. */
static void refused(const char *json, int code, const char *field) {
  rk_event e, before;
  memset(&e, 0xa5, sizeof e);
  memcpy(&before, &e, sizeof e);
  ring_error err = {0};
  ck_assert_int_eq(rk_event_decode(json, strlen(json), &e, &err), code);
  ck_assert_msg(strstr(err.message, field) != NULL, "\"%s\" does not name %s", err.message, field);
  ck_assert_msg(memcmp(&e, &before, sizeof e) == 0, "output written on failure");
}

#define EV(by, what, node, detail)                                                                 \
  "{\"format\":\"ringkeeper.event.v1\",\"at_ms\":1,\"by\":" by ",\"what\":" what ",\"node\":" node \
  ",\"detail\":" detail "}"

START_TEST(rules_refuse) {
  refused(EV("\"\"", "\"node.addr\"", "\"n1\"", "\"x\""), RING_EFIELD, "by");
  refused(EV("\"a\\u001bb\"", "\"node.addr\"", "\"n1\"", "\"x\""), RING_EFIELD, "by");
  refused(EV("\"ops\"", "\"Node\"", "\"n1\"", "\"x\""), RING_EFIELD, "what");
  refused(EV("\"ops\"", "\"node.addr\"", "\"N 1\"", "\"x\""), RING_EFIELD, "node");
  refused(EV("\"ops\"", "\"node.addr\"", "\"n1\"", "\"line\\nbreak\""), RING_EFIELD, "detail");
  refused(EV("\"ops\"", "\"node.addr\"", "\"n1\"", "7"), RING_EFIELD, "detail");
  refused("{\"format\":\"ringkeeper.event.v2\"}", RING_EFORMAT, "format");
  refused("{\"format\":\"ringkeeper.event.v1\",\"at_ms\":1,\"by\":\"a\",\"what\":\"b\","
          "\"node\":\"\",\"detail\":\"\",\"extra\":1}",
          RING_EFIELD, "extra");
  char big[RK_EVENT_VALUE_MAX + 2];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  big[0] = '{';
  refused(big, RING_ETOOBIG, "cap");
  /* an empty node is allowed: an event need not be about one node */
  rk_event e;
  const char *ok = EV("\"alice@ops-1\"", "\"config.throttle\"", "\"\"", "\"\"");
  ck_assert_int_eq(rk_event_decode(ok, strlen(ok), &e, NULL), RING_OK);
}
END_TEST

START_TEST(make_cleans_any_text) {
  rk_event e;
  char detail[600];
  memset(detail, 'd', sizeof detail - 1);
  detail[sizeof detail - 1] = '\0';
  detail[3] = '\n';
  detail[4] = '\x1b';
  ck_assert_int_eq(rk_event_make(&e, 5, "coordinator/\x01x", "node.addr", "n1", detail), RING_OK);
  ck_assert_str_eq(e.by, "coordinator/?x");
  ck_assert_uint_eq(strlen(e.detail), RK_EVENT_DETAIL_MAX);
  ck_assert_int_eq(e.detail[3], '?');
  char *json = NULL;
  ck_assert_int_eq(rk_event_encode(&e, &json, NULL), RING_OK);
  free(json);
  ck_assert_int_eq(rk_event_make(&e, 5, NULL, "node.addr", NULL, NULL), RING_OK);
  ck_assert_str_eq(e.by, "?");
  ck_assert_int_eq(rk_event_make(&e, 5, "x", "Bad What", "n1", ""), RING_EINVAL);
  ck_assert_int_eq(rk_event_make(&e, 5, "x", "node.addr", "N1", ""), RING_EINVAL);
}
END_TEST

START_TEST(key_names) {
  char key[RK_KEY_MAX];
  int n = rk_journal_key(key, "demo", 1796000000000u, 0xabcu);
  ck_assert_int_gt(n, 0);
  ck_assert_str_eq(key, "/ringkeeper/demo/journal/1796000000000-0000000000000abc");
  ck_assert_uint_eq(strlen(strrchr(key, '/') + 1), RK_JOURNAL_NAME_LEN);
}
END_TEST

static Suite *journal_suite(void) {
  Suite *s = suite_create("journal");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, example_round_trip);
  tcase_add_test(tc, rules_refuse);
  tcase_add_test(tc, make_cleans_any_text);
  tcase_add_test(tc, key_names);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(journal_suite()); }
