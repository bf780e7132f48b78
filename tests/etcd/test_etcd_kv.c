/*
 * test_etcd_kv.c: key-value calls against real etcd: one member, then a
 * three-member cluster whose member the client talks to is killed, and a
 * dead etcd.
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "ring_etcd.h"
#include "check_main.h"

#include <check.h>

static etcd_cluster one;

static ring_etcd *client(const char *endpoints) { return test_client(endpoints, 3000, 0); }

static void put(ring_etcd *c, const char *k, const char *v, int64_t *rev) {
  ring_error err;
  ck_assert_msg(ring_etcd_put(c, k, strlen(k), v, strlen(v), 0, rev, NULL, &err) == RING_OK, "%s",
                err.message);
}

static void get_one(ring_etcd *c, const char *k, ring_kvs *out) {
  ring_error err;
  ck_assert_msg(ring_etcd_range(c, k, strlen(k), NULL, out, &err) == RING_OK, "%s", err.message);
}

START_TEST(put_get_delete) {
  ring_etcd *c = client(one.endpoints);
  int64_t r1, r2;
  put(c, "/t/a", "1", &r1);
  put(c, "/t/a", "2", &r2);
  ck_assert_int_gt(r2, r1);
  ring_kvs kv;
  get_one(c, "/t/a", &kv);
  ck_assert_uint_eq(kv.n, 1);
  ck_assert_str_eq((char *)kv.kvs[0].value, "2");
  ck_assert_int_eq(kv.kvs[0].version, 2);
  ck_assert_int_eq(kv.kvs[0].mod_revision, r2);
  ck_assert_int_eq(kv.kvs[0].create_revision, r1);
  ck_assert_int_ge(kv.revision, r2);
  ring_kvs_clear(&kv);
  /* prev_kv, and a read at an older revision */
  ring_kv prev;
  ring_error err;
  ck_assert_int_eq(ring_etcd_put(c, "/t/a", 4, "3", 1, 0, NULL, &prev, &err), RING_OK);
  ck_assert_str_eq((char *)prev.value, "2");
  ring_kv_clear(&prev);
  ring_range_opts at = {.revision = r1};
  ck_assert_int_eq(ring_etcd_range(c, "/t/a", 4, &at, &kv, &err), RING_OK);
  ck_assert_str_eq((char *)kv.kvs[0].value, "1");
  ring_kvs_clear(&kv);
  int64_t deleted;
  ck_assert_int_eq(ring_etcd_delete(c, "/t/a", 4, false, &deleted, NULL, &err), RING_OK);
  ck_assert_int_eq(deleted, 1);
  get_one(c, "/t/a", &kv);
  ck_assert_uint_eq(kv.n, 0);
  ring_kvs_clear(&kv);
  ring_etcd_close(c);
}
END_TEST

START_TEST(binary_keys_and_prefixes) {
  ring_etcd *c = client(one.endpoints);
  const uint8_t key[] = {'/', 'b', 0, 0xff, 1}, val[] = {0, 1, 2, 0xfe};
  ring_error err;
  ck_assert_int_eq(ring_etcd_put(c, key, sizeof key, val, sizeof val, 0, NULL, NULL, &err),
                   RING_OK);
  ring_kvs kv;
  ck_assert_int_eq(ring_etcd_range(c, key, sizeof key, NULL, &kv, &err), RING_OK);
  ck_assert_uint_eq(kv.n, 1);
  ck_assert_uint_eq(kv.kvs[0].value_len, sizeof val);
  ck_assert(memcmp(kv.kvs[0].value, val, sizeof val) == 0);
  ring_kvs_clear(&kv);
  for (int i = 0; i < 10; i++) {
    char k[32];
    snprintf(k, sizeof k, "/p/%02d", i);
    put(c, k, "x", NULL);
  }
  put(c, "/q", "outside", NULL);
  ring_range_opts pre = {.prefix = true};
  ck_assert_int_eq(ring_etcd_range(c, "/p/", 3, &pre, &kv, &err), RING_OK);
  ck_assert_uint_eq(kv.n, 10);
  ck_assert_str_eq((char *)kv.kvs[9].key, "/p/09");
  ring_kvs_clear(&kv);
  ring_range_opts lim = {.prefix = true, .limit = 3, .keys_only = true};
  ck_assert_int_eq(ring_etcd_range(c, "/p/", 3, &lim, &kv, &err), RING_OK);
  ck_assert_uint_eq(kv.n, 3);
  ck_assert(kv.more);
  ck_assert_int_eq(kv.count, 10);
  ck_assert_ptr_null(kv.kvs[0].value);
  ring_kvs_clear(&kv);
  ring_range_opts cnt = {.prefix = true, .count_only = true};
  ck_assert_int_eq(ring_etcd_range(c, "/p/", 3, &cnt, &kv, &err), RING_OK);
  ck_assert_uint_eq(kv.n, 0);
  ck_assert_int_eq(kv.count, 10);
  ring_kvs_clear(&kv);
  int64_t deleted;
  ck_assert_int_eq(ring_etcd_delete(c, "/p/", 3, true, &deleted, NULL, &err), RING_OK);
  ck_assert_int_eq(deleted, 10);
  ring_etcd_close(c);
}
END_TEST

START_TEST(txn_compares_and_branches) {
  ring_etcd *c = client(one.endpoints);
  int64_t rev;
  put(c, "/x/k", "v1", &rev);
  ring_op then_put = {RING_OP_PUT, "/x/k", 4, "v2", 2, 0, false};
  ring_op else_get = {RING_OP_RANGE, "/x/k", 4, NULL, 0, 0, false};
  struct {
    ring_cmp cmp;
    bool holds;
  } cases[] = {
      {{"/x/k", 4, RING_CMP_VERSION, RING_CMP_EQ, 1, NULL, 0}, true},
      {{"/x/k", 4, RING_CMP_VERSION, RING_CMP_NE, 1, NULL, 0}, false},
      {{"/x/k", 4, RING_CMP_MOD, RING_CMP_LT, rev + 1, NULL, 0}, true},
      {{"/x/k", 4, RING_CMP_MOD, RING_CMP_GT, rev, NULL, 0}, false},
      {{"/x/k", 4, RING_CMP_CREATE, RING_CMP_EQ, rev, NULL, 0}, true},
      {{"/x/none", 7, RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0}, true},
      {{"/x/k", 4, RING_CMP_VALUE, RING_CMP_EQ, 0, "v1", 2}, true},
      {{"/x/k", 4, RING_CMP_VALUE, RING_CMP_NE, 0, "v1", 2}, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ring_txn_result r;
    ring_error err;
    /* a range in the success branch too, so the value seen is returned */
    ring_op succ[] = {else_get};
    ck_assert_int_eq(ring_etcd_txn(c, &cases[i].cmp, 1, succ, 1, &else_get, 1, &r, &err), RING_OK);
    ck_assert_msg(r.succeeded == cases[i].holds, "case %zu", i);
    ck_assert_uint_eq(r.n_ranges, 1);
    ck_assert_str_eq((char *)r.ranges[0].kvs[0].value, "v1");
    ring_txn_result_clear(&r);
  }
  ring_cmp guard = {"/x/k", 4, RING_CMP_MOD, RING_CMP_EQ, rev, NULL, 0};
  ring_txn_result r;
  ck_assert_int_eq(ring_etcd_txn(c, &guard, 1, &then_put, 1, NULL, 0, &r, NULL), RING_OK);
  ck_assert(r.succeeded);
  ck_assert_int_gt(r.revision, rev);
  ring_txn_result_clear(&r);
  ck_assert_int_eq(ring_etcd_txn(c, &guard, 1, &then_put, 1, NULL, 0, &r, NULL), RING_OK);
  ck_assert(!r.succeeded); /* mod revision moved on */
  ring_txn_result_clear(&r);
  ring_etcd_close(c);
}
END_TEST

/* A dead etcd: a clear error at once, or at a deadline when one is set. */
START_TEST(dead_etcd_is_a_clear_error) {
  char ep[64];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", harness_free_port());
  ring_etcd *c = client(ep);
  ring_kvs kv;
  ring_error err;
  double t0 = harness_now();
  ck_assert_int_eq(ring_etcd_range(c, "k", 1, NULL, &kv, &err), RING_ECONNECT);
  ck_assert_ptr_nonnull(strstr(err.message, "Couldn't connect"));
  /* refused before sending: a write is safe to report as not applied */
  ck_assert_int_eq(ring_etcd_put(c, "k", 1, "v", 1, 0, NULL, NULL, &err), RING_ECONNECT);
  ck_assert(harness_now() - t0 < 10);

  /* ring_etcd_set_deadline: retried until the deadline, not a fixed number
   * of times; the last error kept; past it nothing is sent */
  t0 = harness_now();
  uint64_t before = ring_etcd_requests(c);
  ring_etcd_set_deadline(c, (int64_t)(t0 * 1000) + 1500);
  ck_assert_int_eq(ring_etcd_range(c, "k", 1, NULL, &kv, &err), RING_ECONNECT);
  double took = harness_now() - t0;
  ck_assert_msg(took >= 1.3 && took < 2.5, "took %.2f s", took);
  ck_assert_ptr_nonnull(strstr(err.message, "Couldn't connect"));
  uint64_t sent = ring_etcd_requests(c);
  ck_assert_uint_gt(sent - before, 3); /* more than the fixed 2n+1 tries */
  ck_assert_int_eq(ring_etcd_range(c, "k", 1, NULL, &kv, &err), RING_ETIMEDOUT);
  ck_assert_uint_eq(ring_etcd_requests(c), sent);
  ring_etcd_close(c);
  ring_etcd_opts bad = {.endpoints = "ftp://x"};
  ck_assert_int_eq(ring_etcd_open(&bad, &c, &err), RING_EINVAL);
  bad.endpoints = " , ";
  ck_assert_int_eq(ring_etcd_open(&bad, &c, &err), RING_EINVAL);
}
END_TEST

/* host:port is http://host:port, as etcdctl takes it. */
START_TEST(endpoint_without_scheme) {
  const char *bare = strncmp(one.endpoints, "http://", 7) == 0 ? one.endpoints + 7 : one.endpoints;
  ring_etcd *c = client(bare);
  put(c, "bare", "yes", NULL);
  ring_kvs kv;
  get_one(c, "bare", &kv);
  ck_assert_uint_eq(kv.n, 1);
  ring_kvs_clear(&kv);
  ring_etcd_close(c);
}
END_TEST

START_TEST(three_members_survive_a_kill) {
  etcd_cluster three;
  etcd_cluster_start(&three, 3, NULL);
  ring_etcd *c = client(three.endpoints);
  put(c, "/k", "before", NULL);
  const char *first = ring_etcd_endpoint(c);
  int victim = -1;
  for (int i = 0; i < 3; i++)
    if (strcmp(three.m[i].url, first) == 0)
      victim = i;
  ck_assert_int_ge(victim, 0);
  etcd_member_signal(&three, victim, SIGKILL);
  ring_kvs kv; /* the read fails over to a live member */
  get_one(c, "/k", &kv);
  ck_assert_str_eq((char *)kv.kvs[0].value, "before");
  ring_kvs_clear(&kv);
  ck_assert_str_ne(ring_etcd_endpoint(c), first);
  for (int i = 0; i < 50; i++) { /* and writes carry on */
    char v[16];
    snprintf(v, sizeof v, "after-%d", i);
    put(c, "/k", v, NULL);
  }
  get_one(c, "/k", &kv);
  ck_assert_str_eq((char *)kv.kvs[0].value, "after-49");
  ring_kvs_clear(&kv);
  /* every other operation on the surviving members too */
  ring_error err;
  ring_cmp cmp = {"/k", 2, RING_CMP_VALUE, RING_CMP_EQ, 0, "after-49", 8};
  ring_op op = {RING_OP_PUT, "/k", 2, "txn", 3, 0, false};
  ring_txn_result r;
  ck_assert_msg(ring_etcd_txn(c, &cmp, 1, &op, 1, NULL, 0, &r, &err) == RING_OK, "%s", err.message);
  ck_assert(r.succeeded);
  ring_txn_result_clear(&r);
  int64_t lease = 0, ttl = 0, deleted = 0;
  ck_assert_msg(ring_etcd_lease_grant(c, 10, &lease, &err) == RING_OK, "%s", err.message);
  ck_assert_int_eq(ring_etcd_lease_refresh(c, lease, &ttl, &err), RING_OK);
  ck_assert_int_gt(ttl, 0);
  ring_leadership lead;
  ck_assert_msg(ring_etcd_campaign(c, "/leader", "me", 2, lease, &lead, NULL, &err) == RING_OK,
                "%s", err.message);
  ring_op fenced = {RING_OP_PUT, "/fenced", 7, "ok", 2, 0, false};
  ck_assert_int_eq(ring_etcd_fenced_txn(c, &lead, NULL, 0, &fenced, 1, NULL, 0, NULL, &err),
                   RING_OK);
  ck_assert_int_eq(ring_etcd_resign(c, &lead, &err), RING_OK);
  ring_leadership_clear(&lead);
  ck_assert_int_eq(ring_etcd_lease_revoke(c, lease, &err), RING_OK);
  ck_assert_int_eq(ring_etcd_delete(c, "/fenced", 7, false, &deleted, NULL, &err), RING_OK);
  ck_assert_int_eq(deleted, 1);
  ck_assert(etcd_member_restart(&three, victim));
  ring_etcd_close(c);
  etcd_cluster_stop(&three);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("etcd_kv");
  TCase *tc = tcase_create("single");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, put_get_delete);
  tcase_add_test(tc, binary_keys_and_prefixes);
  tcase_add_test(tc, txn_compares_and_branches);
  tcase_add_test(tc, dead_etcd_is_a_clear_error);
  tcase_add_test(tc, endpoint_without_scheme);
  suite_add_tcase(s, tc);
  TCase *tc3 = tcase_create("cluster");
  tcase_set_timeout(tc3, 180);
  tcase_add_test(tc3, three_members_survive_a_kill);
  suite_add_tcase(s, tc3);
  return run_suite_as(s, 1); /* fixtures hold processes */
}
