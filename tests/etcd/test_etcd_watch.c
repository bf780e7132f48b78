/*
 * test_etcd_watch.c: ring_etcd_watch against real etcd: events in order for
 * a key and a prefix, history replay, progress notifications on a quiet
 * key, prompt cancel, the callback stopping the watch, compaction (at the
 * start and while the watch is cut off), 100 watches in one process, and a
 * three-member cluster whose member the watch uses is killed while a
 * writer publishes 1,000 versions.
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "ring_etcd.h"
#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>

/* ------------------------------------------------------------ recorder */

#define LOG_MAX 2048

typedef struct logged {
  ring_event_type type;
  char key[48];
  char value[24];
  int64_t rev;
} logged;

/* What a watch's callback saw. Checked on the test thread: the callback
 * only records (a failed ck_assert must not run on the watch thread). */
typedef struct rec {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  logged log[LOG_MAX];
  int n; /* events (all logged while n < LOG_MAX) */
  int batches, progress, compactions;
  int64_t last;         /* revision of the last event or progress */
  int64_t compact_rev;  /* the last compacted callback's revision */
  int64_t progress_rev; /* the last progress callback's revision */
  int violations;       /* a revision went backwards, or an event repeated one */
  char why[160];
  int stop_after;             /* return non-zero at this batch; 0: never */
  _Atomic(ring_watch *) self; /* cancel this from the callback at the first batch */
  long last_value;            /* numeric value of the last event (writer test) */
  int value_gaps;             /* events whose value was not the previous + 1 */
} rec;

static rec *rec_new(void) {
  rec *r = calloc(1, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  return r;
}

static void rec_free(rec *r) {
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

static void violation(rec *r, const char *what, int64_t rev) {
  if (r->violations++ == 0)
    snprintf(r->why, sizeof r->why, "%s: revision %lld after %lld", what, (long long)rev,
             (long long)r->last);
}

static int on_watch(void *ud, const ring_event *ev, uint32_t n, int64_t rev, bool compacted) {
  rec *r = ud;
  pthread_mutex_lock(&r->mu);
  if (compacted) {
    r->compactions++;
    r->compact_rev = rev;
    if (rev <= r->last)
      violation(r, "compaction", rev);
  } else if (n == 0) {
    r->progress++;
    r->progress_rev = rev;
    if (rev < r->last)
      violation(r, "progress", rev);
    r->last = rev;
  } else {
    r->batches++;
    if (rev != ev[n - 1].kv.mod_revision)
      violation(r, "batch revision", rev);
  }
  for (uint32_t i = 0; i < n; i++) {
    const ring_kv *kv = &ev[i].kv;
    if (kv->mod_revision <= r->last) /* one put per revision in these tests */
      violation(r, "event", kv->mod_revision);
    r->last = kv->mod_revision;
    long v = ev[i].type == RING_EVENT_PUT && kv->value ? strtol((char *)kv->value, NULL, 10) : 0;
    if (r->last_value && v != r->last_value + 1)
      r->value_gaps++;
    r->last_value = v;
    if (r->n < LOG_MAX) {
      logged *l = &r->log[r->n];
      l->type = ev[i].type;
      snprintf(l->key, sizeof l->key, "%s", (char *)kv->key);
      snprintf(l->value, sizeof l->value, "%s", kv->value ? (char *)kv->value : "");
      l->rev = kv->mod_revision;
    }
    r->n++;
  }
  int stop = r->stop_after && r->batches >= r->stop_after;
  ring_watch *self = atomic_exchange(&r->self, NULL);
  if (self && n > 0)
    ring_watch_cancel(self); /* misuse the header warns of: must still be safe */
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return stop;
}

/* Waits until *field >= want (read under the lock); false after timeout_s. */
static bool wait_count(rec *r, const int *field, int want, double timeout_s) {
  double end = harness_now() + timeout_s;
  pthread_mutex_lock(&r->mu);
  while (*field < want && harness_now() < end) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
  }
  bool ok = *field >= want;
  pthread_mutex_unlock(&r->mu);
  return ok;
}

/* Waits until the last event's value is v. */
static bool wait_value(rec *r, long v, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (harness_now() < end) {
    pthread_mutex_lock(&r->mu);
    bool done = r->last_value >= v;
    pthread_mutex_unlock(&r->mu);
    if (done)
      return true;
    harness_sleep_ms(20);
  }
  return false;
}

static int snapshot(rec *r, const int *field) {
  pthread_mutex_lock(&r->mu);
  int v = *field;
  pthread_mutex_unlock(&r->mu);
  return v;
}

/* ------------------------------------------------------------- helpers */

static etcd_cluster one;

static ring_etcd *client(const char *endpoints) { return test_client(endpoints, 3000, 500); }

static int64_t put(ring_etcd *c, const char *k, const char *v) {
  ring_error err;
  int64_t rev = 0;
  ck_assert_msg(ring_etcd_put(c, k, strlen(k), v, strlen(v), 0, &rev, NULL, &err) == RING_OK, "%s",
                err.message);
  return rev;
}

/* A put that rides out a leader election: an unknown outcome is re-read,
 * and the put tried again only if it did not land. Returns its revision. */
static int64_t put_surely(ring_etcd *c, const char *k, const char *v) {
  ring_error err = {0};
  for (int i = 0; i < 50; i++) {
    int64_t rev = 0;
    if (ring_etcd_put(c, k, strlen(k), v, strlen(v), 0, &rev, NULL, &err) == RING_OK)
      return rev;
    ring_kvs kv;
    if (ring_etcd_range(c, k, strlen(k), NULL, &kv, &err) == RING_OK) {
      rev = kv.n == 1 && strcmp((char *)kv.kvs[0].value, v) == 0 ? kv.kvs[0].mod_revision : 0;
      ring_kvs_clear(&kv);
      if (rev)
        return rev;
    }
    harness_sleep_ms(100);
  }
  ck_abort_msg("put %s: %s", k, err.message);
  return 0;
}

static ring_watch *watch(ring_etcd *c, const char *key, bool prefix, int64_t start, rec *r) {
  ring_watch *w = NULL;
  ring_error err;
  ck_assert_msg(ring_etcd_watch(c, key, strlen(key), prefix, start, on_watch, r, &w, &err) ==
                    RING_OK,
                "%s", err.message);
  ck_assert_ptr_nonnull(w);
  return w;
}

static void no_violations(rec *r) {
  pthread_mutex_lock(&r->mu);
  int v = r->violations;
  pthread_mutex_unlock(&r->mu);
  ck_assert_msg(v == 0, "%d violations, first: %s", v, r->why);
}

/* --------------------------------------------------------------- tests */

START_TEST(events_in_order_for_a_key) {
  ring_etcd *c = client(one.endpoints);
  rec *r = rec_new();
  ring_watch *w = watch(c, "/w/k", false, 0, r);
  put(c, "/w/kk", "other key"); /* not the key: never seen */
  int64_t first = 0;
  for (int i = 1; i <= 20; i++) {
    char v[16];
    snprintf(v, sizeof v, "%d", i);
    int64_t rev = put(c, "/w/k", v);
    if (i == 1)
      first = rev;
  }
  ring_error err;
  int64_t del_rev;
  ck_assert_int_eq(ring_etcd_delete(c, "/w/k", 4, false, NULL, &del_rev, &err), RING_OK);
  ck_assert(wait_count(r, &r->n, 21, 10));
  ring_watch_cancel(w);
  no_violations(r);
  ck_assert_int_eq(r->n, 21);
  for (int i = 0; i < 20; i++) {
    char v[16];
    snprintf(v, sizeof v, "%d", i + 1);
    ck_assert_str_eq(r->log[i].key, "/w/k");
    ck_assert_str_eq(r->log[i].value, v);
    ck_assert_int_eq(r->log[i].type, RING_EVENT_PUT);
    ck_assert_int_eq(r->log[i].rev, first + i);
  }
  ck_assert_int_eq(r->log[20].type, RING_EVENT_DELETE);
  ck_assert_int_eq(r->log[20].rev, del_rev);
  ck_assert_str_eq(r->log[20].value, "");
  rec_free(r);
  ring_etcd_close(c);
}
END_TEST

START_TEST(events_in_order_for_a_prefix) {
  ring_etcd *c = client(one.endpoints);
  rec *r = rec_new();
  ring_watch *w = watch(c, "/p/", true, 0, r);
  put(c, "/p/a", "1");
  put(c, "/q", "outside");
  put(c, "/p", "outside too");
  put(c, "/p/b", "2");
  put(c, "/p/a/deeper", "3");
  ring_error err;
  ck_assert_int_eq(ring_etcd_delete(c, "/p/a", 4, false, NULL, NULL, &err), RING_OK);
  ck_assert(wait_count(r, &r->n, 4, 10));
  ck_assert(HARNESS_HOLDS(snapshot(r, &r->n) == 4, 0.2)); /* nothing more arrives */
  ring_watch_cancel(w);
  no_violations(r);
  ck_assert_int_eq(r->n, 4);
  ck_assert_str_eq(r->log[0].key, "/p/a");
  ck_assert_str_eq(r->log[1].key, "/p/b");
  ck_assert_str_eq(r->log[2].key, "/p/a/deeper");
  ck_assert_str_eq(r->log[3].key, "/p/a");
  ck_assert_int_eq(r->log[3].type, RING_EVENT_DELETE);
  rec_free(r);
  ring_etcd_close(c);
}
END_TEST

START_TEST(past_start_revision_replays_history) {
  ring_etcd *c = client(one.endpoints);
  int64_t revs[6];
  for (int i = 1; i <= 5; i++) {
    char v[16];
    snprintf(v, sizeof v, "h%d", i);
    revs[i] = put(c, "/h/x", v);
  }
  rec *r = rec_new();
  ring_watch *w = watch(c, "/h/x", false, revs[2], r);
  ck_assert(wait_count(r, &r->n, 4, 10));
  put(c, "/h/x", "h6");
  ck_assert(wait_count(r, &r->n, 5, 10));
  ring_watch_cancel(w);
  no_violations(r);
  ck_assert_int_eq(r->n, 5);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(r->log[i].rev, revs[i + 2]);
  ck_assert_str_eq(r->log[0].value, "h2");
  ck_assert_str_eq(r->log[4].value, "h6");
  /* a prefix watch from the first revision sees every key's history */
  rec *all = rec_new();
  w = watch(c, "/h/", true, 1, all);
  ck_assert(wait_count(all, &all->n, 6, 10));
  ring_watch_cancel(w);
  no_violations(all);
  rec_free(all);
  rec_free(r);
  ring_etcd_close(c);
}
END_TEST

START_TEST(quiet_key_gets_progress_notifications) {
  ring_etcd *c = client(one.endpoints);
  int64_t now = put(c, "/quiet/other", "x");
  rec *r = rec_new();
  ring_watch *w = watch(c, "/quiet/k", false, 0, r);
  /* the fixture's etcd sends progress every 500 ms */
  ck_assert(wait_count(r, &r->progress, 2, 10));
  put(c, "/quiet/other", "y"); /* another key: moves the store, not this watch */
  int seen = snapshot(r, &r->progress);
  ck_assert(wait_count(r, &r->progress, seen + 2, 10));
  ring_watch_cancel(w);
  no_violations(r);
  ck_assert_int_eq(r->n, 0);
  ck_assert_int_gt(r->progress_rev, now); /* progress reports the store's revision */
  rec_free(r);
  ring_etcd_close(c);
}
END_TEST

START_TEST(cancel_returns_promptly) {
  ring_etcd *c = client(one.endpoints);
  for (int round = 0; round < 5; round++) {
    rec *r = rec_new();
    ring_watch *w = watch(c, "/cancel/k", false, 0, r);
    if (round % 2)
      put(c, "/cancel/k", "v");
    harness_sleep_ms(100);
    double t0 = harness_now();
    ring_watch_cancel(w);
    double took = harness_now() - t0;
    ck_assert_msg(took < 0.5, "cancel took %.3f s", took);
    rec_free(r);
  }
  ring_watch_cancel(NULL);
  ring_etcd_close(c);
}
END_TEST

START_TEST(cancel_while_reconnecting) {
  /* a member that dies under the watch: the thread backs off; cancel still ends it at once */
  etcd_cluster solo;
  etcd_cluster_start(&solo, 1, NULL);
  ring_etcd *c = client(solo.endpoints);
  rec *r = rec_new();
  ring_watch *w = watch(c, "/k", false, 0, r);
  etcd_member_signal(&solo, 0, SIGKILL);
  /* a fixed time is the point: the backoff grows with every failed
   * reconnect, so after 1.5 s the thread waits up to 2 s, and nothing
   * outside it shows where it is */
  harness_sleep_ms(1500);
  double t0 = harness_now();
  ring_watch_cancel(w);
  ck_assert_double_lt(harness_now() - t0, 0.5);
  rec_free(r);
  ring_etcd_close(c);
  etcd_cluster_stop(&solo);
}
END_TEST

START_TEST(callback_stops_the_watch) {
  ring_etcd *c = client(one.endpoints);
  rec *r = rec_new();
  r->stop_after = 1;
  ring_watch *w = watch(c, "/stop/k", false, 0, r);
  put(c, "/stop/k", "1");
  ck_assert(wait_count(r, &r->batches, 1, 10));
  put(c, "/stop/k", "2");
  put(c, "/stop/k", "3");
  /* past a progress notification: none comes either */
  ck_assert(HARNESS_HOLDS(snapshot(r, &r->batches) == 1 && snapshot(r, &r->progress) == 0, 1.2));
  ring_watch_cancel(w);
  rec_free(r);
  ring_etcd_close(c);
}
END_TEST

START_TEST(cancel_from_the_callback) {
  ring_etcd *c = client(one.endpoints);
  rec *r = rec_new();
  ring_watch *w = watch(c, "/self/k", false, 0, r);
  atomic_store(&r->self, w);
  put(c, "/self/k", "1");
  ck_assert(wait_count(r, &r->batches, 1, 10));
  put(c, "/self/k", "2");
  /* no event, no progress after the cancel */
  ck_assert(HARNESS_HOLDS(snapshot(r, &r->batches) == 1 && snapshot(r, &r->progress) == 0, 1.2));
  rec_free(r); /* the watch freed itself (ASan would see a leak) */
  ring_etcd_close(c);
}
END_TEST

START_TEST(bad_arguments_and_dead_etcd) {
  ring_etcd *c = client(one.endpoints);
  ring_watch *w = NULL;
  rec *r = rec_new();
  ring_error err;
  ck_assert_int_eq(ring_etcd_watch(c, "", 0, false, 0, on_watch, r, &w, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_watch(c, "k", 1, false, -1, on_watch, r, &w, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_watch(c, "k", 1, false, 0, NULL, r, &w, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_watch(NULL, "k", 1, false, 0, on_watch, r, &w, &err), RING_EINVAL);
  ck_assert_ptr_null(w);
  ring_etcd_close(c);
  char ep[64];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", harness_free_port());
  c = client(ep);
  double t0 = harness_now();
  ck_assert_int_eq(ring_etcd_watch(c, "k", 1, false, 0, on_watch, r, &w, &err), RING_ECONNECT);
  ck_assert_ptr_nonnull(strstr(err.message, "onnect"));
  ck_assert_ptr_null(w);
  ck_assert_double_lt(harness_now() - t0, 5);
  ring_etcd_close(c);
  rec_free(r);
}
END_TEST

START_TEST(start_at_a_compacted_revision) {
  ring_etcd *c = client(one.endpoints);
  int64_t revs[6];
  for (int i = 1; i <= 5; i++) {
    char v[16];
    snprintf(v, sizeof v, "%d", i);
    revs[i] = put(c, "/cs/k", v);
  }
  ring_error err;
  ck_assert_int_eq(ring_etcd_compact(c, revs[4], &err), RING_OK);
  rec *r = rec_new();
  ring_watch *w = watch(c, "/cs/k", false, revs[1], r);
  ck_assert(wait_count(r, &r->compactions, 1, 10));
  ck_assert_int_eq(r->compact_rev, revs[4]);
  /* the watcher re-reads and finds the latest value */
  ring_kvs kv;
  ck_assert_int_eq(ring_etcd_range(c, "/cs/k", 5, NULL, &kv, &err), RING_OK);
  ck_assert_str_eq((char *)kv.kvs[0].value, "5");
  ring_kvs_clear(&kv);
  /* and the watch goes on from the compact revision */
  put(c, "/cs/k", "6");
  ck_assert(wait_value(r, 6, 10));
  ring_watch_cancel(w);
  no_violations(r);
  ck_assert_int_eq(r->compactions, 1);
  for (int i = 0; i < r->n; i++)
    ck_assert_int_ge(r->log[i].rev, revs[4]);
  rec_free(r);
  ring_etcd_close(c);
}
END_TEST

START_TEST(hundred_watches_in_one_process) {
  ring_etcd *c = client(one.endpoints);
  enum { N = 100 };
  rec **r = calloc(N, sizeof *r);
  ring_watch **w = calloc(N, sizeof *w);
  for (int i = 0; i < N; i++) {
    r[i] = rec_new();
    w[i] = watch(c, "/many/version", false, 0, r[i]);
  }
  put(c, "/many/version", "1");
  put(c, "/many/version", "2");
  for (int i = 0; i < N; i++)
    ck_assert_msg(wait_value(r[i], 2, 10), "watch %d", i);
  for (int i = 0; i < N; i++) {
    ring_watch_cancel(w[i]);
    no_violations(r[i]);
    ck_assert_int_eq(r[i]->n, 2);
    rec_free(r[i]);
  }
  free(r);
  free(w);
  ring_etcd_close(c);
}
END_TEST

/* ------------------------------------------------ three-member cluster */

static etcd_cluster three;

static int member_of(const etcd_cluster *cl, const char *url) {
  for (int i = 0; i < cl->n; i++)
    if (strcmp(cl->m[i].url, url) == 0)
      return i;
  return -1;
}

START_TEST(compaction_while_cut_off) {
  /* the watch talks to m0 only; m0 dies; the others move on and compact */
  ring_etcd *wc = client(three.m[0].url), *c = client(three.endpoints);
  rec *r = rec_new();
  ring_watch *w = watch(wc, "/cd/k", false, 0, r);
  put(c, "/cd/k", "1");
  ck_assert(wait_value(r, 1, 10));
  etcd_member_signal(&three, 0, SIGKILL);
  int64_t rev = 0;
  for (int i = 2; i <= 5; i++) {
    char v[16];
    snprintf(v, sizeof v, "%d", i);
    rev = put_surely(c, "/cd/k", v);
  }
  ring_error err;
  int rc = RING_OK;
  for (int i = 0; i < 20 && (rc = ring_etcd_compact(c, rev, &err)) != RING_OK; i++)
    harness_sleep_ms(100); /* compaction is idempotent: safe to repeat */
  ck_assert_msg(rc == RING_OK, "%s", err.message);
  ck_assert(etcd_member_restart(&three, 0));
  ck_assert(wait_count(r, &r->compactions, 1, 20));
  ck_assert_int_eq(r->compact_rev, rev);
  ring_kvs kv; /* re-reading gives the latest value */
  ck_assert_int_eq(ring_etcd_range(wc, "/cd/k", 5, NULL, &kv, &err), RING_OK);
  ck_assert_str_eq((char *)kv.kvs[0].value, "5");
  ring_kvs_clear(&kv);
  put_surely(c, "/cd/k", "6");
  ck_assert(wait_value(r, 6, 10));
  ring_watch_cancel(w);
  no_violations(r);
  rec_free(r);
  ring_etcd_close(wc);
  ring_etcd_close(c);
}
END_TEST

typedef struct writer {
  ring_etcd *c;
  _Atomic long done;  /* versions published */
  _Atomic int failed; /* a write failed for good */
  char why[256];
} writer;

/* Publishes "1".."1000", each only over the one before (a compare on the
 * value), so a write whose outcome was unknown is re-read, never applied
 * twice. */
static void *write_versions(void *arg) {
  writer *wr = arg;
  const char *key = "/kill/version";
  for (long v = 1; v <= 1000; v++) {
    char prev[16], cur[16];
    snprintf(prev, sizeof prev, "%ld", v - 1);
    snprintf(cur, sizeof cur, "%ld", v);
    ring_cmp cmp = {key, strlen(key), RING_CMP_VALUE, RING_CMP_EQ, 0, prev, strlen(prev)};
    ring_cmp absent = {key, strlen(key), RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0};
    ring_op op = {RING_OP_PUT, key, strlen(key), cur, strlen(cur), 0, false};
    int tries = 0;
    for (;;) {
      ring_txn_result res;
      ring_error err;
      int rc = ring_etcd_txn(wr->c, v == 1 ? &absent : &cmp, 1, &op, 1, NULL, 0, &res, &err);
      if (rc == RING_OK && res.succeeded) {
        ring_txn_result_clear(&res);
        break;
      }
      if (rc == RING_OK)
        ring_txn_result_clear(&res);
      ring_kvs kv; /* unknown outcome or compare failed: did it land? */
      bool landed = false;
      if (ring_etcd_range(wr->c, key, strlen(key), NULL, &kv, &err) == RING_OK) {
        landed = kv.n == 1 && strcmp((char *)kv.kvs[0].value, cur) == 0;
        ring_kvs_clear(&kv);
      }
      if (landed)
        break;
      if (++tries > 200) {
        snprintf(wr->why, sizeof wr->why, "version %ld: %.200s", v, err.message);
        atomic_store(&wr->failed, 1);
        return NULL;
      }
      harness_sleep_ms(50);
    }
    atomic_store(&wr->done, v);
  }
  return NULL;
}

START_TEST(killed_member_under_a_writer) {
  ring_etcd *wc = client(three.endpoints), *c = client(three.endpoints);
  rec *r = rec_new();
  ring_watch *w = watch(wc, "/kill/version", false, 0, r);
  writer wr = {.c = c};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, write_versions, &wr), 0);
  int kills = 0;
  double end = harness_now() + 45;
  for (long at = 150; at <= 750 && harness_now() < end; at += 200) {
    while (atomic_load(&wr.done) < at && !atomic_load(&wr.failed) && harness_now() < end)
      harness_sleep_ms(5);
    int victim = member_of(&three, ring_etcd_endpoint(wc)); /* the watch's member */
    ck_assert_int_ge(victim, 0);
    etcd_member_signal(&three, victim, SIGKILL);
    kills++;
    harness_sleep_ms(300);
    ck_assert(etcd_member_restart(&three, victim));
  }
  pthread_join(t, NULL);
  ck_assert_msg(!atomic_load(&wr.failed), "writer: %s", wr.why);
  ck_assert_int_eq(atomic_load(&wr.done), 1000);
  ck_assert_int_ge(kills, 3);
  ck_assert_msg(wait_value(r, 1000, 20), "watcher stopped at %ld", r->last_value);
  ck_assert_uint_gt(ring_etcd_requests(wc), (uint64_t)kills); /* a new stream after each kill */
  ring_watch_cancel(w);
  no_violations(r);                   /* never backwards, never a repeat */
  ck_assert_int_eq(r->value_gaps, 0); /* and here, with no compaction, nothing missed */
  ck_assert_int_eq(r->n, 1000);
  ck_assert_int_eq(r->compactions, 0);
  rec_free(r);
  ring_etcd_close(wc);
  ring_etcd_close(c);
}
END_TEST

static void setup(void) {
  etcd_cluster_start(&one, 1, "--experimental-watch-progress-notify-interval 500ms");
}
static void teardown(void) { etcd_cluster_stop(&one); }
static void setup3(void) { etcd_cluster_start(&three, 3, NULL); }
static void teardown3(void) { etcd_cluster_stop(&three); }

int main(void) {
  Suite *s = suite_create("etcd_watch");
  TCase *tc = tcase_create("single");
  tcase_set_timeout(tc, 60);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, events_in_order_for_a_key);
  tcase_add_test(tc, events_in_order_for_a_prefix);
  tcase_add_test(tc, past_start_revision_replays_history);
  tcase_add_test(tc, quiet_key_gets_progress_notifications);
  tcase_add_test(tc, cancel_returns_promptly);
  tcase_add_test(tc, cancel_while_reconnecting);
  tcase_add_test(tc, callback_stops_the_watch);
  tcase_add_test(tc, cancel_from_the_callback);
  tcase_add_test(tc, bad_arguments_and_dead_etcd);
  tcase_add_test(tc, start_at_a_compacted_revision);
  tcase_add_test(tc, hundred_watches_in_one_process);
  suite_add_tcase(s, tc);
  TCase *tc3 = tcase_create("cluster");
  tcase_set_timeout(tc3, 90);
  tcase_add_unchecked_fixture(tc3, setup3, teardown3);
  tcase_add_test(tc3, compaction_while_cut_off);
  tcase_add_test(tc3, killed_member_under_a_writer);
  suite_add_tcase(s, tc3);
  return run_suite_as(s, 1); /* fixtures hold processes */
}
