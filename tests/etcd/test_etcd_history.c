/*
 * test_etcd_history.c: the client's history marks (ring_etcd.h, "History";
 * libring/etcd_history.c) against real etcd:
 *   concurrent_replies   replies to requests that ran at once may cross:
 *                        never taken for a restore
 *   version_back         the version key below the mark, read later, is;
 *                        one read earlier that crossed is not
 *   seeded_marks         marks from a previous run (an agent's data dir):
 *                        a store behind them, or another cluster id
 *   settle_rules         only a `recovered` above every version seen, with
 *                        the version key there, settles (and resume reads it)
 *   watcher_restored     a real snapshot restore under a live watcher: it
 *                        reports it, installs and acks nothing from the
 *                        restored store, keeps its table, and follows again
 *                        once a `recovered` record settles it
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "ring_etcd.h"
#include "test_tables.h"
#include "check_main.h"

#include <check.h>
#include <pthread.h>

#define PREFIX "/ringkeeper/test/"

static etcd_cluster one;

static ring_etcd *client(void) { return test_client(one.endpoints, 3000, 0); }

static int64_t put(ring_etcd *c, const char *k, const char *v) {
  int64_t rev = 0;
  ring_error err;
  ck_assert_msg(ring_etcd_put(c, k, strlen(k), v, strlen(v), 0, &rev, NULL, &err) == RING_OK, "%s",
                err.message);
  return rev;
}

static ring_etcd_history marks(ring_etcd *c) {
  ring_etcd_history h;
  ring_etcd_history_get(c, &h);
  return h;
}

/* ------------------------------------------------------ the client alone */

static void *hammer(void *arg) {
  ring_etcd *c = arg;
  char key[32];
  snprintf(key, sizeof key, "/h/%lu", (unsigned long)pthread_self() % 1000);
  for (int i = 0; i < 150; i++) {
    ring_kvs r;
    put(c, key, "x");
    if (ring_etcd_range(c, "/h/", 3, &(ring_range_opts){.prefix = true}, &r, NULL) == RING_OK)
      ring_kvs_clear(&r);
  }
  return NULL;
}

START_TEST(concurrent_replies) {
  ring_etcd *c = client();
  pthread_t t[6];
  for (int i = 0; i < 6; i++)
    pthread_create(&t[i], NULL, hammer, c);
  for (int i = 0; i < 6; i++)
    pthread_join(t[i], NULL);
  int64_t last = put(c, "/h/last", "x");
  ring_etcd_history h = marks(c);
  ck_assert(!h.went_back);
  ck_assert_int_eq(h.revision, last);
  ck_assert_uint_ne(h.cluster_id, 0);
  ring_etcd_close(c);
}
END_TEST

START_TEST(version_back) {
  ring_etcd *c = client();
  int64_t r5 = put(c, PREFIX "v", "5");
  ck_assert(!ring_etcd_note_version(c, 5, r5));
  ck_assert(!ring_etcd_note_version(c, 4, r5 - 1)); /* a reply that crossed: older revision */
  ck_assert(!marks(c).went_back);
  ck_assert(ring_etcd_note_version(c, 3, r5 + 2)); /* lower, read later: back */
  ring_etcd_history h = marks(c);
  ck_assert(h.went_back);
  ck_assert_uint_eq(h.version, 5);
  ck_assert_uint_eq(h.back_version, 3);
  char why[RING_HISTORY_WHY_MAX];
  ck_assert_str_eq(ring_etcd_history_text(&h, why, sizeof why),
                   "etcd history went back: version 5 -> 3");
  ring_etcd_close(c);
}
END_TEST

START_TEST(seeded_marks) {
  ring_etcd *c = client();
  int64_t now = put(c, "/s/a", "1");
  ring_etcd_close(c);

  c = client(); /* a previous run saw far more of the store's history */
  ring_etcd_history_seed(c, &(ring_etcd_history){.revision = now + 1000, .version = 7});
  put(c, "/s/a", "2");
  ring_etcd_history h = marks(c);
  ck_assert(h.went_back);
  ck_assert_int_eq(h.revision, now + 1000);
  ck_assert_int_eq(h.back_revision, now + 1);
  ring_etcd_close(c);

  c = client(); /* or another cluster answers on the same address */
  ring_etcd_history_seed(c, &(ring_etcd_history){.cluster_id = 12345});
  put(c, "/s/a", "3");
  h = marks(c);
  ck_assert(h.went_back);
  ck_assert_uint_eq(h.cluster_id, 12345);
  ck_assert_uint_ne(h.back_cluster_id, 0);
  char why[RING_HISTORY_WHY_MAX];
  ck_assert_ptr_nonnull(strstr(ring_etcd_history_text(&h, why, sizeof why), "cluster id 3039 ->"));
  ring_etcd_close(c);

  c = client(); /* a latched state carries over as it was */
  ring_etcd_history_seed(c,
                         &(ring_etcd_history){.went_back = true, .version = 9, .back_version = 2});
  ck_assert(marks(c).went_back);
  ring_etcd_close(c);
}
END_TEST

START_TEST(settle_rules) {
  ring_etcd *c = client();
  ck_assert(!ring_etcd_history_settle(c, 10, 10)); /* nothing went back: nothing to settle */
  ring_etcd_history_seed(c,
                         &(ring_etcd_history){.went_back = true, .version = 9, .back_version = 2});
  ck_assert(!ring_etcd_history_settle(c, 9, 9));  /* not above every version seen */
  ck_assert(!ring_etcd_history_settle(c, 10, 2)); /* the version key is not there yet */
  ck_assert(marks(c).went_back);
  bool settled = true;
  ck_assert_int_eq(ring_etcd_history_resume(c, "test", &settled, NULL), RING_OK);
  ck_assert(!settled); /* no record */
  put(c, PREFIX "recovered",
      "{\"format\":\"ringkeeper.recovered.v1\",\"version\":10,\"seen_version\":9,\"by\":\"test\","
      "\"at_ms\":0}");
  put(c, PREFIX "version", "10");
  ck_assert_int_eq(ring_etcd_history_resume(c, "test", &settled, NULL), RING_OK);
  ck_assert(settled);
  ring_etcd_history h = marks(c);
  ck_assert(!h.went_back);
  ck_assert_uint_eq(h.version, 10);
  ck_assert(!ring_etcd_note_version(c, 10, h.revision)); /* the new history goes on */
  ck_assert_int_eq(ring_etcd_delete(c, PREFIX, strlen(PREFIX), true, NULL, NULL, NULL), RING_OK);
  ring_etcd_close(c);
}
END_TEST

/* ------------------------------------------------------ a live watcher */

static void publish(ring_etcd *c, uint64_t v) {
  ring_table *t = test_table_rr(64, 2, 3, 3, NULL, v);
  char *json = NULL, key[64], val[24];
  size_t len = 0;
  ck_assert_int_eq(ring_table_encode(t, &json, &len), RING_OK);
  snprintf(key, sizeof key, PREFIX "tables/%llu", (unsigned long long)v);
  snprintf(val, sizeof val, "%llu", (unsigned long long)v);
  ring_op ops[2] = {
      {RING_OP_PUT, key, strlen(key), json, len, 0, false},
      {RING_OP_PUT, PREFIX "version", strlen(PREFIX "version"), val, strlen(val), 0, false}};
  ring_error err;
  ck_assert_msg(ring_etcd_txn(c, NULL, 0, ops, 2, NULL, 0, NULL, &err) == RING_OK, "%s",
                err.message);
  free(json);
  ring_table_free(t);
}

static uint64_t ack_of(ring_etcd *c) {
  ring_kvs r;
  ck_assert_int_eq(ring_etcd_range(c, PREFIX "acks/w1", strlen(PREFIX "acks/w1"), NULL, &r, NULL),
                   RING_OK);
  uint64_t v = r.n ? strtoull((const char *)r.kvs[0].value, NULL, 10) : 0;
  ring_kvs_clear(&r);
  return v;
}

static bool wait_for(bool (*cond)(void *), void *ud, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (!cond(ud) && harness_now() < end)
    harness_sleep_ms(50);
  return cond(ud);
}

static bool restored(void *w) { return ring_watcher_restored(w, NULL); }
static bool not_restored(void *w) { return !ring_watcher_restored(w, NULL); }

START_TEST(watcher_restored) {
  ring_etcd *pub = client(), *c = client();
  char snap[320];
  snprintf(snap, sizeof snap, "%s/history.db", one.base);
  publish(pub, 1);
  ck_assert_int_eq(etcd_snapshot_save(&one, 0, snap), 0);
  publish(pub, 2);
  publish(pub, 3);
  ring_live *live;
  ck_assert_int_eq(ring_live_new(&live), RING_OK);
  ring_watcher *w;
  ring_error err;
  ring_watcher_opts o = {.cluster = "test", .ack_id = "w1"};
  ck_assert_msg(ring_watcher_start(c, &o, live, &w, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(ring_live_version(live), 3);
  ck_assert(!ring_watcher_restored(w, NULL));

  ck_assert(etcd_member_restore(&one, 0, snap));
  ck_assert_msg(wait_for(restored, w, 15), "the watcher did not notice the restore");
  publish(pub, 4); /* the restored store goes on: nothing of it is followed */
  ck_assert(HARNESS_HOLDS(ring_live_version(live) == 3 && ack_of(pub) == 0, 1.5));

  put(pub, PREFIX "recovered",
      "{\"format\":\"ringkeeper.recovered.v1\",\"version\":5,\"seen_version\":3,\"by\":\"test\","
      "\"at_ms\":0}");
  publish(pub, 5);
  ck_assert_msg(wait_for(not_restored, w, 15), "the recovered record did not settle it");
  double end = harness_now() + 10;
  while (ring_live_version(live) != 5 && harness_now() < end)
    harness_sleep_ms(50);
  ck_assert_uint_eq(ring_live_version(live), 5);
  ring_watcher_stop(w);
  ring_live_free(live);
  ring_etcd_close(c);
  ring_etcd_close(pub);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("etcd_history");
  TCase *tc = tcase_create("history");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, concurrent_replies);
  tcase_add_test(tc, version_back);
  tcase_add_test(tc, seeded_marks);
  tcase_add_test(tc, settle_rules);
  tcase_add_test(tc, watcher_restored);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1); /* the fixture holds etcd */
}
