/*
 * test_etcd_auth.c: etcd with authentication enabled (simple tokens with a
 * one-second TTL): the right password works for reads, writes, txns,
 * leases and elections; a wrong one fails at open with a clear message; a
 * client with no user gets RING_EAUTH; an expired token is renewed once,
 * transparently.
 */
#include "etcd_harness.h"
#include "ring_etcd.h"
#include "check_main.h"

#include <check.h>

#define TOKEN_TTL_S 1

static etcd_cluster one;

static int open_as(const char *user, const char *password, ring_etcd **c, ring_error *err) {
  ring_etcd_opts o = {
      .endpoints = one.endpoints, .user = user, .password = password, .timeout_ms = 3000};
  return ring_etcd_open(&o, c, err);
}

static ring_etcd *root(void) {
  ring_etcd *c = NULL;
  ring_error err;
  ck_assert_msg(open_as("root", "rootpw", &c, &err) == RING_OK, "%s", err.message);
  return c;
}

static void put(ring_etcd *c, const char *k, const char *v) {
  ring_error err;
  ck_assert_msg(ring_etcd_put(c, k, strlen(k), v, strlen(v), 0, NULL, NULL, &err) == RING_OK, "%s",
                err.message);
}

static void expect_value(ring_etcd *c, const char *k, const char *v) {
  ring_kvs kv;
  ring_error err;
  ck_assert_msg(ring_etcd_range(c, k, strlen(k), NULL, &kv, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(kv.n, 1);
  ck_assert_str_eq((char *)kv.kvs[0].value, v);
  ring_kvs_clear(&kv);
}

START_TEST(right_password_works) {
  ring_etcd *c = root();
  put(c, "/a/k", "v1");
  expect_value(c, "/a/k", "v1");
  ring_cmp is_v1 = {"/a/k", 4, RING_CMP_VALUE, RING_CMP_EQ, 0, "v1", 2};
  ring_op put_v2 = {RING_OP_PUT, "/a/k", 4, "v2", 2, 0, false};
  ring_txn_result r;
  ring_error err;
  ck_assert_msg(ring_etcd_txn(c, &is_v1, 1, &put_v2, 1, NULL, 0, &r, &err) == RING_OK, "%s",
                err.message);
  ck_assert(r.succeeded);
  ring_txn_result_clear(&r);
  expect_value(c, "/a/k", "v2");
  int64_t lease;
  ck_assert_int_eq(ring_etcd_lease_grant(c, 10, &lease, &err), RING_OK);
  ring_leadership l;
  ck_assert_msg(ring_etcd_campaign(c, "/a/leader", "me", 2, lease, &l, NULL, &err) == RING_OK, "%s",
                err.message);
  ring_op put_v3 = {RING_OP_PUT, "/a/k", 4, "v3", 2, 0, false};
  ck_assert_int_eq(ring_etcd_fenced_txn(c, &l, NULL, 0, &put_v3, 1, NULL, 0, NULL, &err), RING_OK);
  expect_value(c, "/a/k", "v3");
  ck_assert_int_eq(ring_etcd_resign(c, &l, &err), RING_OK);
  ring_leadership_clear(&l);
  ck_assert_int_eq(ring_etcd_lease_revoke(c, lease, &err), RING_OK);
  int64_t deleted;
  ck_assert_int_eq(ring_etcd_delete(c, "/a/k", 4, false, &deleted, NULL, &err), RING_OK);
  ck_assert_int_eq(deleted, 1);
  ring_etcd_close(c);
}
END_TEST

START_TEST(wrong_password_fails_at_open) {
  ring_etcd *c = NULL;
  ring_error err;
  ck_assert_int_eq(open_as("root", "nope", &c, &err), RING_EAUTH);
  ck_assert_ptr_null(c);
  ck_assert_int_eq(err.code, RING_EAUTH);
  ck_assert_msg(strstr(err.message, "etcd auth as root") != NULL &&
                    strstr(err.message, "authentication failed") != NULL,
                "unclear: %s", err.message);
  ck_assert_int_eq(open_as("nobody", "x", &c, &err), RING_EAUTH);
  ck_assert_ptr_nonnull(strstr(err.message, "nobody"));
}
END_TEST

START_TEST(no_user_gets_eauth) {
  ring_etcd *c = NULL;
  ring_error err;
  ck_assert_int_eq(open_as(NULL, NULL, &c, &err), RING_OK); /* lazy: nothing sent yet */
  ring_kvs kv;
  ck_assert_int_eq(ring_etcd_range(c, "/a/k", 4, NULL, &kv, &err), RING_EAUTH);
  ck_assert_msg(strstr(err.message, "requires authentication") != NULL, "unclear: %s", err.message);
  ck_assert_int_eq(ring_etcd_put(c, "/a/k", 4, "v", 1, 0, NULL, NULL, &err), RING_EAUTH);
  ck_assert_int_eq(ring_etcd_range(c, "/a/k", 4, NULL, &kv, NULL), RING_EAUTH); /* err NULL */
  ring_etcd_close(c);
}
END_TEST

START_TEST(expired_token_is_renewed_once) {
  ring_etcd *c = root();
  put(c, "/a/t", "before");
  for (int round = 0; round < 2; round++) {
    /* etcd drops idle simple tokens after the TTL, checking once a second */
    harness_sleep_ms(TOKEN_TTL_S * 1000 + 2000);
    uint64_t before = ring_etcd_requests(c);
    expect_value(c, "/a/t", round == 0 ? "before" : "written");
    /* refused, authenticate, the same request again */
    ck_assert_uint_eq(ring_etcd_requests(c) - before, 3);
    before = ring_etcd_requests(c);
    expect_value(c, "/a/t", round == 0 ? "before" : "written"); /* the new token serves */
    ck_assert_uint_eq(ring_etcd_requests(c) - before, 1);
    if (round == 0) { /* a write after expiry is re-sent too: refused means not applied */
      harness_sleep_ms(TOKEN_TTL_S * 1000 + 2000);
      before = ring_etcd_requests(c);
      put(c, "/a/t", "written");
      ck_assert_uint_eq(ring_etcd_requests(c) - before, 3);
    }
  }
  ring_etcd_close(c);
}
END_TEST

static void setup(void) {
  char extra[64];
  snprintf(extra, sizeof extra, "--auth-token simple --auth-token-ttl %d", TOKEN_TTL_S);
  etcd_cluster_start(&one, 1, extra);
  etcd_cluster_auth_on(&one, "rootpw");
}
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("etcd_auth");
  TCase *tc = tcase_create("auth");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, right_password_works);
  tcase_add_test(tc, wrong_password_fails_at_open);
  tcase_add_test(tc, no_user_gets_eauth);
  tcase_add_test(tc, expired_token_is_renewed_once);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1); /* fixtures hold processes */
}
