/*
 * test_state_cache.c: the watch-fed cluster state cache
 * (coordinator/cluster/state_cache.c) against a real etcd.
 *
 * - random puts and deletes of good, bad, oversized and misplaced records
 *   under a cluster's prefix, in batches: after each batch a look at the
 *   cache equals a fresh full read (rk_state_diff, the same comparison the
 *   cache's periodic check makes), and the looks were served from the
 *   watch, not by reading whole;
 * - a burst of events past the queue's bounds: dropped, read whole;
 * - the coordinator's own write: while the watch moves the caller is
 *   told to skip its looks until it is back (rk_cache_catching_up), and a
 *   look reads whole ("behind") when the watch never brings it;
 * - compaction past the watch's revision while its member is cut off: the
 *   cache notices, reads whole (counted as "compacted") and equals a read.
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "check_main.h"
#include "cluster.h"
#include "state_cache.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

static etcd_cluster one;

static int64_t put_rev(ring_etcd *c, const char *cluster, const char *what, const char *v,
                       size_t len) {
  char key[RK_KEY_MAX];
  ck_assert_int_gt(rk_key(key, cluster, what), 0);
  ring_error err = {0};
  int64_t rev = 0;
  for (int i = 0; i < 50; i++) {
    if (ring_etcd_put(c, key, strlen(key), v, len, 0, &rev, NULL, &err) == RING_OK)
      return rev;
    harness_sleep_ms(100); /* a member restarting: puts here are idempotent */
  }
  ck_abort_msg("%s: %s", what, err.message);
  return 0;
}

static int64_t del_rev(ring_etcd *c, const char *cluster, const char *what) {
  char key[RK_KEY_MAX];
  ck_assert_int_gt(rk_key(key, cluster, what), 0);
  ring_error err = {0};
  int64_t rev = 0; /* the delete's revision, or now when the key was absent */
  ck_assert_msg(ring_etcd_delete(c, key, strlen(key), false, NULL, &rev, &err) == RING_OK, "%s",
                err.message);
  return rev;
}

/* Puts what encode() made of rec; returns the put's revision. */
#define PUT_ENCODED(c, cl, what, encode, rec)                                                      \
  ({                                                                                               \
    char *j_ = NULL;                                                                               \
    size_t n_ = 0;                                                                                 \
    ck_assert_int_eq(encode(rec, &j_, &n_), RING_OK);                                              \
    int64_t r_ = put_rev(c, cl, what, j_, n_);                                                     \
    free(j_);                                                                                      \
    r_;                                                                                            \
  })

static const char *const ids[] = {"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"};
#define N_IDS 8

/* A good record of the prefix `dir` for host id. */
static int64_t put_good(ring_etcd *c, const char *cl, const char *dir, const char *id, unsigned r) {
  char what[RK_KEY_MAX];
  snprintf(what, sizeof what, "%s%s", dir, id);
  if (strcmp(dir, "nodes/") == 0) {
    rk_node n = {.weight = 1 + r % 3, .state = RING_NODE_ACTIVE};
    snprintf(n.id, sizeof n.id, "%s", id);
    snprintf(n.addr, sizeof n.addr, "127.0.0.1:%u", 7000 + r % 100);
    return PUT_ENCODED(c, cl, what, rk_node_encode, &n);
  }
  if (strcmp(dir, "alive/") == 0) {
    rk_alive a = {.weight = 1, .started_ms = r};
    snprintf(a.id, sizeof a.id, "%s", id);
    snprintf(a.addr, sizeof a.addr, "127.0.0.1:7000");
    return PUT_ENCODED(c, cl, what, rk_alive_encode, &a);
  }
  if (strcmp(dir, "progress/") == 0) {
    uint32_t tokens[2] = {r % 50, 50 + r % 50};
    rk_progress p = {.version = 1 + r % 9, .n_tokens = 2, .tokens = tokens, .bytes = r};
    return PUT_ENCODED(c, cl, what, rk_progress_encode, &p);
  }
  char v[64];
  snprintf(v, sizeof v, "%u", 1 + r % 1000);
  if (strcmp(dir, "clients/") == 0)
    snprintf(v, sizeof v, "{\"format\":\"ringkeeper.client.v1\",\"kind\":\"kv\"}");
  return put_rev(c, cl, what, v, strlen(v));
}

/* Host-written garbage: malformed, over the cap, or under a key naming no id. */
static int64_t put_bad(ring_etcd *c, const char *cl, const char *dir, const char *id, unsigned r) {
  char what[RK_KEY_MAX];
  static char big[600000];
  memset(big, '7', sizeof big);
  switch (r % 3) {
  case 0:
    snprintf(what, sizeof what, "%s%s", dir, id);
    return put_rev(c, cl, what, "{not json", 9);
  case 1:
    snprintf(what, sizeof what, "%s%s", dir, id);
    return put_rev(c, cl, what, big, sizeof big);
  default:
    snprintf(what, sizeof what, "%sX %s", dir, id);
    return put_rev(c, cl, what, "{}", 2);
  }
}

/* One random change under the prefix; returns its revision. */
static int64_t random_change(ring_etcd *c, const char *cl, unsigned r) {
  static const char *const host_dirs[] = {"alive/",   "acks/",    "progress/",
                                          "clients/", "missing/", "recovery/"};
  const char *id = ids[r % N_IDS];
  unsigned what = (r / N_IDS) % 10, how = (r / 80) % 4;
  if (what == 0) {
    char key[RK_KEY_MAX];
    snprintf(key, sizeof key, "nodes/%s", id);
    return how == 0 ? del_rev(c, cl, key) : put_good(c, cl, "nodes/", id, r);
  }
  if (what == 1)
    return how == 0 ? put_rev(c, cl, "leader", "{bad", 4) : del_rev(c, cl, "leader");
  if (what == 2)
    return how < 2 ? put_rev(c, cl, "stuck", "nope", 4) : del_rev(c, cl, "stuck");
  if (what == 3) {
    char v[24];
    snprintf(v, sizeof v, "%u", 1 + r % 50);
    return how == 0 ? put_rev(c, cl, "tables/9", "x", 1) : put_rev(c, cl, "version", v, strlen(v));
  }
  const char *dir = host_dirs[(what - 4) % 6];
  char key[RK_KEY_MAX];
  snprintf(key, sizeof key, "%s%s", dir, id);
  if (how == 0)
    return del_rev(c, cl, key);
  if (how == 1)
    return put_bad(c, cl, dir, id, r);
  return put_good(c, cl, dir, id, r);
}

static void seed(ring_etcd *c, const char *cl) {
  rk_config cfg;
  rk_config_defaults(&cfg);
  PUT_ENCODED(c, cl, "config", rk_config_encode, &cfg);
  for (int i = 0; i < N_IDS; i++)
    put_good(c, cl, "nodes/", ids[i], (unsigned)i);
}

/* The cache's look equals a fresh full read. */
static void assert_same(rk_cache *k, ring_etcd *c, const char *cl, int batch) {
  const rk_state *cached = NULL;
  rk_state fresh;
  ring_error err = {0};
  ck_assert_msg(rk_cache_look(k, c, &cached, &err) == RING_OK, "look: %s", err.message);
  ck_assert_msg(rk_state_read(c, cl, RK_READ_ALL, &fresh, &err) == RING_OK, "%s", err.message);
  char why[256] = "";
  bool same = rk_state_diff(cached, &fresh, why, sizeof why);
  ck_assert_msg(same, "batch %d: the cache differs from a full read: %s", batch, why);
  rk_state_free(&fresh);
}

START_TEST(random_changes_match_a_full_read) {
  const char *cl = "rnd";
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  seed(c, cl);
  rk_cache *k = NULL;
  ring_error err = {0};
  ck_assert_int_eq(rk_cache_new(cl, &k), RING_OK);
  ck_assert_msg(rk_cache_watch(k, c, NULL, NULL, &err) == RING_OK, "%s", err.message);
  assert_same(k, c, cl, -1); /* the first look reads whole */
  srand(18);
  for (int batch = 0; batch < 40; batch++) {
    int64_t last = 0;
    for (int i = 0; i < 1 + rand() % 12; i++)
      last = random_change(c, cl, (unsigned)rand());
    rk_cache_wrote(k, last); /* the look waits for the watch to bring it */
    if (batch % 10 == 9)
      rk_cache_check_soon(k); /* the periodic check: a full read compared with the cache */
    assert_same(k, c, cl, batch);
  }
  rk_cache_stats st;
  rk_cache_stats_get(k, &st);
  ck_assert_uint_eq(st.full[RK_RESYNC_START], 1);
  ck_assert_uint_eq(st.full[RK_RESYNC_PERIODIC], 4);
  for (int i = RK_RESYNC_DROPPED; i < RK_RESYNC_PERIODIC; i++)
    ck_assert_msg(st.full[i] == 0, "unexpected full reads: %s %llu",
                  rk_resync_why_name((rk_resync_why)i), (unsigned long long)st.full[i]);
  ck_assert_uint_eq(st.full[RK_RESYNC_DIVERGED], 0);
  ck_assert_uint_ge(st.incremental, 36);
  ck_assert_uint_gt(st.events, 40);
  rk_cache_free(k);
  ring_etcd_close(c);
}
END_TEST

/* How many full reads the cache made for why. */
static uint64_t full_reads(rk_cache *k, rk_resync_why why) {
  rk_cache_stats st;
  rk_cache_stats_get(k, &st);
  return st.full[why];
}

/* A cache of cluster cl, seeded, watching, past its first (full) look. */
static rk_cache *seeded_cache(ring_etcd *c, const char *cl) {
  seed(c, cl);
  rk_cache *k = NULL;
  ck_assert_int_eq(rk_cache_new(cl, &k), RING_OK);
  ck_assert_int_eq(rk_cache_watch(k, c, NULL, NULL, NULL), RING_OK);
  assert_same(k, c, cl, 0);
  return k;
}

START_TEST(dropped_cache_reads_whole) {
  const char *cl = "drop";
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  rk_cache *k = seeded_cache(c, cl);
  rk_cache_drop(k); /* leadership lost: the next term starts from a full read */
  rk_cache_wrote(k, put_good(c, cl, "acks/", "h1", 5));
  assert_same(k, c, cl, 1);
  ck_assert_uint_eq(full_reads(k, RK_RESYNC_DROPPED), 1);
  rk_cache_free(k);
  ring_etcd_close(c);
}
END_TEST

START_TEST(a_burst_past_the_queue_bounds_reads_whole) {
  const char *cl = "burst";
  ring_etcd *c = test_client(one.endpoints, 30000, 0);
  rk_cache *k = seeded_cache(c, cl);
  /* 48 progress values of 1.4 MB between two looks: past the 64 MiB bound
   * (a value over its cap counts its length, though it is not kept) */
  static char big[1468006];
  memset(big, '7', sizeof big);
  int64_t rev = 0;
  for (int i = 0; i < 48; i++)
    rev = put_rev(c, cl, "progress/h3", big, sizeof big);
  for (int i = 0; i < 600 && rk_cache_seen(k) < rev; i++)
    harness_sleep_ms(100); /* every event delivered (and the queue dropped) before the look */
  rk_cache_wrote(k, rev);
  assert_same(k, c, cl, 1);
  ck_assert_uint_eq(full_reads(k, RK_RESYNC_OVERFLOW), 1);
  rk_cache_wrote(k, put_good(c, cl, "progress/", "h3", 1)); /* and on from there */
  assert_same(k, c, cl, 2);
  rk_cache_free(k);
  ring_etcd_close(c);
}
END_TEST

START_TEST(own_write_the_watch_never_brings_reads_whole) {
  const char *cl = "own";
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  rk_cache *k = seeded_cache(c, cl);
  ring_error err = {0};
  int64_t rev = 0; /* outside the cluster's prefix: no event comes for it */
  ck_assert_msg(ring_etcd_put(c, "/elsewhere/x", 12, "1", 1, 0, &rev, NULL, &err) == RING_OK, "%s",
                err.message);
  rk_cache_wrote(k, rev);
  assert_same(k, c, cl, 1);
  ck_assert_uint_eq(full_reads(k, RK_RESYNC_BEHIND), 1);
  rk_cache_free(k);
  ring_etcd_close(c);
}
END_TEST

/* Puts PACED_PUTS acks 300 ms apart: a watch that lags but moves. */
#define PACED_PUTS 4
static void *paced_puts(void *arg) {
  ring_etcd *c = arg;
  for (unsigned i = 0; i < PACED_PUTS; i++) {
    harness_sleep_ms(300);
    put_good(c, "paced", "acks/", ids[i % N_IDS], 100 + i);
  }
  return NULL;
}

START_TEST(own_write_behind_a_moving_watch_is_waited_for) {
  const char *cl = "paced";
  ring_etcd *c = test_client(one.endpoints, 5000, 0), *w = test_client(one.endpoints, 5000, 0);
  rk_cache *k = seeded_cache(c, cl);
  /* The write the caller waits for lands 1.2 s from now, past a look's
   * own wait (RK_CACHE_WAIT_MS), and the watch passes a revision every
   * 300 ms: the caller is told to skip its looks until it is back, and no
   * look reads whole. */
  int64_t now = put_good(c, cl, "acks/", "h0", 99);
  rk_cache_wrote(k, now);
  assert_same(k, c, cl, 0);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, paced_puts, w), 0);
  rk_cache_wrote(k, now + PACED_PUTS);
  int skipped = 0;
  uint64_t behind_ms = 0, first_ms = 0;
  while (rk_cache_catching_up(k, &behind_ms) && skipped < 200)
    first_ms = skipped++ == 0 ? behind_ms : first_ms;
  ck_assert_int_ge(skipped, 1);
  ck_assert_int_lt(skipped, 200);
  /* it says how old the write it waits for is: each skip waited a look's wait */
  ck_assert_uint_ge(behind_ms, first_ms + (uint64_t)(skipped - 1) * (RK_CACHE_WAIT_MS - 50));
  ck_assert_uint_lt(behind_ms, 10000);
  const rk_state *cached = NULL;
  ck_assert_int_eq(rk_cache_look(k, c, &cached, NULL), RING_OK);
  ck_assert_int_ge(cached->revision, now + PACED_PUTS);
  pthread_join(t, NULL);
  assert_same(k, c, cl, 1);
  ck_assert_uint_eq(full_reads(k, RK_RESYNC_BEHIND), 0);
  ck_assert_uint_eq(full_reads(k, RK_RESYNC_START), 1);
  rk_cache_stats st;
  rk_cache_stats_get(k, &st);
  ck_assert_uint_eq(st.waits, (uint64_t)skipped);
  rk_cache_free(k);
  ring_etcd_close(w);
  ring_etcd_close(c);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

/* --------------------------------------------------------- compaction */

static etcd_cluster three;

START_TEST(compaction_past_the_watch_reads_whole) {
  const char *cl = "cmp";
  etcd_cluster_start(&three, 3, NULL);
  ring_etcd *wc = test_client(three.m[0].url, 3000, 500),
            *c = test_client(three.endpoints, 3000, 500);
  seed(c, cl);
  rk_cache *k = NULL;
  ck_assert_int_eq(rk_cache_new(cl, &k), RING_OK);
  ck_assert_int_eq(rk_cache_watch(k, wc, NULL, NULL, NULL), RING_OK);
  assert_same(k, wc, cl, 0);
  etcd_member_signal(&three, 0, SIGKILL); /* the cache's member is cut off */
  int64_t rev = 0;
  for (unsigned i = 0; i < 20; i++)
    rev = put_good(c, cl, "acks/", ids[i % N_IDS], i);
  ring_error err = {0};
  int rc = RING_OK;
  for (int i = 0; i < 20 && (rc = ring_etcd_compact(c, rev, &err)) != RING_OK; i++)
    harness_sleep_ms(100);
  ck_assert_msg(rc == RING_OK, "%s", err.message);
  ck_assert(etcd_member_restart(&three, 0));
  rk_cache_stats st = {0};
  for (int i = 0; i < 200 && st.full[RK_RESYNC_COMPACTED] == 0; i++) {
    const rk_state *s;
    rk_cache_look(k, wc, &s, NULL); /* may fail while the member comes back */
    rk_cache_stats_get(k, &st);
    harness_sleep_ms(100);
  }
  ck_assert_uint_eq(st.full[RK_RESYNC_COMPACTED], 1);
  ck_assert_uint_eq(st.full[RK_RESYNC_DIVERGED], 0); /* a dropped cache is not compared */
  rk_cache_wrote(k, put_good(c, cl, "acks/", "h2", 77));
  assert_same(k, wc, cl, 1);
  rk_cache_free(k);
  ring_etcd_close(wc);
  ring_etcd_close(c);
  etcd_cluster_stop(&three);
}
END_TEST

int main(void) {
  Suite *s = suite_create("state_cache");
  TCase *tc = tcase_create("one member");
  tcase_set_timeout(tc, 300);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, random_changes_match_a_full_read);
  tcase_add_test(tc, dropped_cache_reads_whole);
  tcase_add_test(tc, a_burst_past_the_queue_bounds_reads_whole);
  tcase_add_test(tc, own_write_the_watch_never_brings_reads_whole);
  tcase_add_test(tc, own_write_behind_a_moving_watch_is_waited_for);
  suite_add_tcase(s, tc);
  TCase *tc3 = tcase_create("three members");
  tcase_set_timeout(tc3, 300);
  tcase_add_test(tc3, compaction_past_the_watch_reads_whole);
  suite_add_tcase(s, tc3);
  return run_suite_as(s, 1);
}
