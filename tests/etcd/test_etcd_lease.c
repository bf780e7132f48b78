/*
 * test_etcd_lease.c: leases and the keeper against real etcd: grant, ttl,
 * refresh, revoke; a key that goes with its lease; a keeper that keeps a
 * short lease alive, reports its loss promptly (revoked behind its back,
 * etcd frozen with SIGSTOP), stops at once, and rides out the kill of the
 * member it talks to in a three-member cluster.
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "ring_etcd.h"
#include "check_main.h"

#include <check.h>
#include <stdatomic.h>

static etcd_cluster one;

static ring_etcd *client(const char *endpoints) { return test_client(endpoints, 3000, 0); }

static int64_t grant(ring_etcd *c, int64_t ttl) {
  int64_t lease = 0;
  ring_error err;
  ck_assert_msg(ring_etcd_lease_grant(c, ttl, &lease, &err) == RING_OK, "%s", err.message);
  ck_assert_int_ne(lease, 0);
  return lease;
}

/* What a keeper's lost callback saw. */
typedef struct loss {
  _Atomic int calls;
  _Atomic int64_t lease;
  _Atomic double at; /* harness_now() of the first call */
} loss;

static void on_lost(void *ud, int64_t lease) {
  loss *l = ud;
  if (atomic_fetch_add(&l->calls, 1) == 0) {
    atomic_store(&l->at, harness_now());
    atomic_store(&l->lease, lease);
  }
}

/* Waits (bounded) until the callback ran; returns when it did, or -1. */
static double wait_lost(loss *l, double timeout_s) {
  for (double end = harness_now() + timeout_s; harness_now() < end; harness_sleep_ms(10))
    if (atomic_load(&l->calls) > 0)
      return atomic_load(&l->at);
  return -1;
}

static bool key_exists(ring_etcd *c, const char *k) {
  ring_kvs kv;
  ring_error err;
  ck_assert_msg(ring_etcd_range(c, k, strlen(k), NULL, &kv, &err) == RING_OK, "%s", err.message);
  bool there = kv.n == 1;
  ring_kvs_clear(&kv);
  return there;
}

static void put_leased(ring_etcd *c, const char *k, int64_t lease) {
  ring_error err;
  ck_assert_msg(ring_etcd_put(c, k, strlen(k), "v", 1, lease, NULL, NULL, &err) == RING_OK, "%s",
                err.message);
}

START_TEST(grant_ttl_refresh_revoke) {
  ring_etcd *c = client(one.endpoints);
  int64_t lease = grant(c, 10), ttl = 0;
  ring_error err;
  ck_assert_int_eq(ring_etcd_lease_ttl(c, lease, &ttl, &err), RING_OK);
  ck_assert_int_gt(ttl, 7);
  ck_assert_int_le(ttl, 10);
  ttl = 0;
  ck_assert_int_eq(ring_etcd_lease_refresh(c, lease, &ttl, &err), RING_OK);
  ck_assert_int_eq(ttl, 10);
  ck_assert_int_eq(ring_etcd_lease_revoke(c, lease, &err), RING_OK);
  ck_assert_int_eq(ring_etcd_lease_ttl(c, lease, &ttl, &err), RING_ENOTFOUND);
  ck_assert_int_eq(ring_etcd_lease_refresh(c, lease, &ttl, &err), RING_ENOTFOUND);
  ck_assert_int_eq(ring_etcd_lease_revoke(c, lease, &err), RING_ENOTFOUND);
  ck_assert_int_eq(ring_etcd_lease_grant(c, 0, &lease, &err), RING_EINVAL);
  /* a key under a revoked lease is refused */
  ck_assert_int_ne(ring_etcd_put(c, "/l/x", 4, "v", 1, lease, NULL, NULL, &err), RING_OK);
  ring_etcd_close(c);
}
END_TEST

START_TEST(key_goes_with_its_lease) {
  ring_etcd *c = client(one.endpoints);
  int64_t lease = grant(c, 1);
  put_leased(c, "/l/short", lease);
  ck_assert(key_exists(c, "/l/short"));
  double t0 = harness_now();
  while (key_exists(c, "/l/short") && harness_now() - t0 < 6)
    harness_sleep_ms(100);
  ck_assert(!key_exists(c, "/l/short"));
  int64_t ttl;
  ck_assert_int_eq(ring_etcd_lease_ttl(c, lease, &ttl, NULL), RING_ENOTFOUND);
  ring_etcd_close(c);
}
END_TEST

START_TEST(keeper_keeps_a_short_lease) {
  ring_etcd *c = client(one.endpoints);
  int64_t lease = grant(c, 2);
  put_leased(c, "/l/kept", lease);
  loss l = {0};
  ring_keeper *k = NULL;
  ring_error err;
  ck_assert_msg(ring_etcd_keep_alive(c, lease, 2, on_lost, &l, &k, &err) == RING_OK, "%s",
                err.message);
  /* kept for more than three TTLs: no loss, the key stays throughout */
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 0 && key_exists(c, "/l/kept"), 6.5));
  int64_t ttl = 0;
  ck_assert_int_eq(ring_etcd_lease_ttl(c, lease, &ttl, &err), RING_OK);
  ck_assert_int_ge(ttl, 1);
  double t0 = harness_now();
  ring_keeper_stop(k); /* prompt: the thread waits on a condition, not in a sleep */
  ck_assert_double_lt(harness_now() - t0, 0.2);
  ck_assert_int_eq(atomic_load(&l.calls), 0);
  ck_assert_int_eq(ring_etcd_lease_revoke(c, lease, &err), RING_OK);
  ck_assert(!key_exists(c, "/l/kept"));
  /* a lease that is already gone is an error at once, not a callback */
  ck_assert_int_eq(ring_etcd_keep_alive(c, lease, 2, on_lost, &l, &k, &err), RING_ENOTFOUND);
  ring_keeper_stop(NULL);
  ring_etcd_close(c);
}
END_TEST

START_TEST(keeper_reports_a_revoked_lease) {
  ring_etcd *c = client(one.endpoints);
  int64_t lease = grant(c, 2);
  loss l = {0};
  ring_keeper *k = NULL;
  ck_assert_int_eq(ring_etcd_keep_alive(c, lease, 2, on_lost, &l, &k, NULL), RING_OK);
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 0, 0.3)); /* kept a while, no loss */
  double t0 = harness_now();
  ck_assert_int_eq(ring_etcd_lease_revoke(c, lease, NULL), RING_OK);
  double at = wait_lost(&l, 4);
  ck_assert_msg(at > 0, "lost was not reported");
  fprintf(stderr, "revoked: lost reported %.3f s later\n", at - t0);
  ck_assert_double_le(at - t0, 1.0); /* the next refresh, a third of the TTL later */
  ck_assert_int_eq(atomic_load(&l.lease), lease);
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 1, 0.5)); /* exactly once */
  ring_keeper_stop(k);
  ck_assert_int_eq(atomic_load(&l.calls), 1);
  ring_etcd_close(c);
}
END_TEST

START_TEST(keeper_reports_a_frozen_etcd_at_the_deadline) {
  ring_etcd *c = client(one.endpoints);
  int64_t lease = grant(c, 2);
  loss l = {0};
  ring_keeper *k = NULL;
  ck_assert_int_eq(ring_etcd_keep_alive(c, lease, 2, on_lost, &l, &k, NULL), RING_OK);
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 0, 1.0)); /* kept, refreshing */
  double t0 = harness_now();
  etcd_member_signal(&one, 0, SIGSTOP);
  double at = wait_lost(&l, 5);
  etcd_member_signal(&one, 0, SIGCONT);
  ck_assert_msg(at > 0, "lost was not reported");
  fprintf(stderr, "frozen: lost reported %.3f s after SIGSTOP\n", at - t0);
  /* the deadline is the last refresh sent (at most a third of the TTL
   * before the stop) plus the TTL: within 2 s of the stop, hardly earlier
   * than 2 - 2/3 s; a little slack for scheduling */
  ck_assert_msg(at - t0 <= 2.15, "lost %.3f s after the stop", at - t0);
  ck_assert_msg(at - t0 >= 1.2, "lost %.3f s after the stop", at - t0);
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 1, 0.3)); /* once */
  ring_keeper_stop(k);
  ck_assert(harness_wait(&one, 0, 10)); /* etcd serves again */
  ring_etcd_close(c);
}
END_TEST

START_TEST(stop_interrupts_a_refresh_in_flight) {
  ring_etcd *c = client(one.endpoints);
  int64_t lease = grant(c, 3);
  loss l = {0};
  ring_keeper *k = NULL;
  ck_assert_int_eq(ring_etcd_keep_alive(c, lease, 3, on_lost, &l, &k, NULL), RING_OK);
  etcd_member_signal(&one, 0, SIGSTOP);
  /* until the refresh at 1 s waits for the frozen etcd: no loss before
   * the 3 s deadline */
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 0, 1.4));
  double t0 = harness_now();
  ring_keeper_stop(k);
  double took = harness_now() - t0;
  etcd_member_signal(&one, 0, SIGCONT);
  ck_assert_msg(took < 0.1, "stop took %.3f s", took);
  ck_assert_int_eq(atomic_load(&l.calls), 0); /* stopped before the deadline */
  ck_assert(harness_wait(&one, 0, 10));
  ck_assert_int_eq(ring_etcd_lease_revoke(c, lease, NULL), RING_OK);
  ring_etcd_close(c);
}
END_TEST

START_TEST(keeper_survives_a_killed_member) {
  etcd_cluster three;
  etcd_cluster_start(&three, 3, NULL);
  ring_etcd *c = client(three.endpoints);
  int64_t lease = grant(c, 3);
  put_leased(c, "/l/cluster", lease);
  loss l = {0};
  ring_keeper *k = NULL;
  ck_assert_int_eq(ring_etcd_keep_alive(c, lease, 3, on_lost, &l, &k, NULL), RING_OK);
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 0 && key_exists(c, "/l/cluster"), 1.5));
  const char *first = ring_etcd_endpoint(c);
  int victim = -1;
  for (int i = 0; i < 3; i++)
    if (strcmp(three.m[i].url, first) == 0)
      victim = i;
  ck_assert_int_ge(victim, 0);
  etcd_member_signal(&three, victim, SIGKILL);
  ck_assert(HARNESS_HOLDS(atomic_load(&l.calls) == 0, 7.0)); /* more than two TTLs */
  ck_assert_str_ne(ring_etcd_endpoint(c), first);
  ck_assert(key_exists(c, "/l/cluster"));
  int64_t ttl = 0;
  ck_assert_int_eq(ring_etcd_lease_ttl(c, lease, &ttl, NULL), RING_OK);
  ck_assert_int_ge(ttl, 1);
  ring_keeper_stop(k);
  ck_assert_int_eq(atomic_load(&l.calls), 0);
  ring_etcd_close(c);
  etcd_cluster_stop(&three);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("etcd_lease");
  TCase *tc = tcase_create("single");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, grant_ttl_refresh_revoke);
  tcase_add_test(tc, key_goes_with_its_lease);
  tcase_add_test(tc, keeper_keeps_a_short_lease);
  tcase_add_test(tc, keeper_reports_a_revoked_lease);
  tcase_add_test(tc, keeper_reports_a_frozen_etcd_at_the_deadline);
  tcase_add_test(tc, stop_interrupts_a_refresh_in_flight);
  suite_add_tcase(s, tc);
  TCase *tc3 = tcase_create("cluster");
  tcase_set_timeout(tc3, 180);
  tcase_add_test(tc3, keeper_survives_a_killed_member);
  suite_add_tcase(s, tc3);
  return run_suite_as(s, 1); /* fixtures hold processes */
}
