/*
 * test_etcd_elect.c: election and fencing against real etcd: two
 * campaigners, exactly one wins; resign and lease expiry hand over; the
 * fenced txn writes while its leader leads and never after (a deposed
 * leader, a paused one); a campaign whose reply is lost decides from a
 * re-read whether it won (a loopback proxy forwards the txn to etcd and
 * drops the answer).
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "ring_etcd.h"
#include "check_main.h"

#include <check.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

static etcd_cluster one;

static ring_etcd *client(const char *endpoints) { return test_client(endpoints, 2000, 0); }

static int64_t grant(ring_etcd *c, int64_t ttl) {
  int64_t lease = 0;
  ring_error err;
  ck_assert_msg(ring_etcd_lease_grant(c, ttl, &lease, &err) == RING_OK, "%s", err.message);
  return lease;
}

static int campaign(ring_etcd *c, const char *key, const char *value, int64_t lease,
                    ring_leadership *l, ring_kv *current) {
  ring_error err = {0};
  int rc = ring_etcd_campaign(c, key, value, strlen(value), lease, l, current, &err);
  ck_assert_msg(rc == RING_OK || rc == RING_EBUSY, "campaign: %s", err.message);
  return rc;
}

/* The value of k, or "" when absent (static buffer). */
/* The remaining TTL of lease in whole seconds (0 in its last second; -1:
 * gone). */
static int64_t lease_ttl(ring_etcd *c, int64_t lease) {
  int64_t ttl = 0;
  return ring_etcd_lease_ttl(c, lease, &ttl, NULL) == RING_OK ? ttl : -1;
}

static const char *value_of(ring_etcd *c, const char *k) {
  static char v[256];
  ring_kvs kv;
  ring_error err;
  ck_assert_msg(ring_etcd_range(c, k, strlen(k), NULL, &kv, &err) == RING_OK, "%s", err.message);
  snprintf(v, sizeof v, "%s", kv.n ? (char *)kv.kvs[0].value : "");
  ring_kvs_clear(&kv);
  return v;
}

static int fenced_put(ring_etcd *c, const ring_leadership *l, const char *k, const char *v) {
  ring_op put = {RING_OP_PUT, k, strlen(k), v, strlen(v), 0, false};
  ring_txn_result r;
  ring_error err = {0};
  int rc = ring_etcd_fenced_txn(c, l, NULL, 0, &put, 1, NULL, 0, &r, &err);
  if (rc == RING_OK) {
    ck_assert(r.succeeded);
    ring_txn_result_clear(&r);
  }
  return rc;
}

/* ------------------------------------------------------------ the race */

typedef struct racer {
  ring_etcd *c;
  const char *key, *value;
  int64_t lease;
  pthread_barrier_t *go;
  int rc;
  ring_leadership l;
  ring_kv current;
} racer;

static void *race(void *arg) {
  racer *r = arg;
  pthread_barrier_wait(r->go);
  r->rc = ring_etcd_campaign(r->c, r->key, r->value, strlen(r->value), r->lease, &r->l, &r->current,
                             NULL);
  return NULL;
}

START_TEST(exactly_one_of_two_wins) {
  ring_etcd *ca = client(one.endpoints), *cb = client(one.endpoints);
  int64_t la = grant(ca, 30), lb = grant(cb, 30);
  for (int round = 0; round < 10; round++) {
    char key[32];
    snprintf(key, sizeof key, "/e/race/%d", round);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    racer a = {ca, key, "A", la, &go, 0, {0}, {0}}, b = {cb, key, "B", lb, &go, 0, {0}, {0}};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race, &a);
    pthread_create(&tb, NULL, race, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&go);
    ck_assert_msg((a.rc == RING_OK) != (b.rc == RING_OK), "round %d: %d %d", round, a.rc, b.rc);
    racer *won = a.rc == RING_OK ? &a : &b, *lost = a.rc == RING_OK ? &b : &a;
    ck_assert_int_eq(lost->rc, RING_EBUSY);
    ck_assert_str_eq((char *)lost->current.value, won->value);
    ck_assert_int_eq(lost->current.create_revision, won->l.create_revision);
    ck_assert_int_eq(lost->current.lease, won->lease);
    ck_assert_str_eq(won->l.key, key);
    ring_kv seen;
    ck_assert_int_eq(ring_etcd_leader(ca, key, &seen, NULL), RING_OK);
    ck_assert_str_eq((char *)seen.value, won->value);
    ck_assert_int_eq(seen.create_revision, won->l.create_revision);
    ring_kv_clear(&seen);
    ring_kv_clear(&lost->current);
    ring_leadership_clear(&won->l);
  }
  ring_etcd_lease_revoke(ca, la, NULL);
  ring_etcd_lease_revoke(cb, lb, NULL);
  ring_etcd_close(ca);
  ring_etcd_close(cb);
}
END_TEST

START_TEST(resign_hands_over) {
  ring_etcd *c = client(one.endpoints);
  int64_t la = grant(c, 30), lb = grant(c, 30);
  ring_leadership a, b;
  ring_kv cur, seen;
  ck_assert_int_eq(ring_etcd_leader(c, "/e/r", &seen, NULL), RING_ENOTFOUND);
  ck_assert_int_eq(campaign(c, "/e/r", "A", la, &a, NULL), RING_OK);
  ck_assert_int_eq(campaign(c, "/e/r", "B", lb, &b, &cur), RING_EBUSY);
  ck_assert_str_eq((char *)cur.value, "A");
  ring_kv_clear(&cur);
  /* campaigning again while leading is refused too: the key exists */
  ck_assert_int_eq(campaign(c, "/e/r", "A", la, &b, NULL), RING_EBUSY);
  ck_assert_int_eq(ring_etcd_resign(c, &a, NULL), RING_OK);
  ck_assert_int_eq(ring_etcd_leader(c, "/e/r", &seen, NULL), RING_ENOTFOUND);
  ck_assert_int_eq(campaign(c, "/e/r", "B", lb, &b, NULL), RING_OK);
  ck_assert_int_gt(b.create_revision, a.create_revision);
  /* a stale resign leaves the new leader alone */
  ck_assert_int_eq(ring_etcd_resign(c, &a, NULL), RING_ENOTLEADER);
  ck_assert_int_eq(ring_etcd_leader(c, "/e/r", &seen, NULL), RING_OK);
  ck_assert_str_eq((char *)seen.value, "B");
  ring_kv_clear(&seen);
  ck_assert_int_eq(ring_etcd_resign(c, &b, NULL), RING_OK);
  ring_leadership_clear(&a);
  ring_leadership_clear(&b);
  ring_leadership_clear(NULL);
  ring_etcd_lease_revoke(c, la, NULL);
  ring_etcd_lease_revoke(c, lb, NULL);
  ring_etcd_close(c);
}
END_TEST

START_TEST(lease_expiry_hands_over) {
  ring_etcd *c = client(one.endpoints);
  int64_t la = grant(c, 1), lb = grant(c, 30);
  ring_leadership a, b;
  ck_assert_int_eq(campaign(c, "/e/x", "A", la, &a, NULL), RING_OK);
  int rc = RING_EBUSY;
  double t0 = harness_now();
  while (rc == RING_EBUSY && harness_now() - t0 < 6) {
    ring_kv cur;
    if ((rc = campaign(c, "/e/x", "B", lb, &b, &cur)) == RING_EBUSY) {
      ck_assert_str_eq((char *)cur.value, "A");
      ring_kv_clear(&cur);
      harness_sleep_ms(100);
    }
  }
  ck_assert_int_eq(rc, RING_OK);
  ck_assert_int_eq(fenced_put(c, &a, "/e/x-data", "A"), RING_ENOTLEADER);
  ck_assert_int_eq(fenced_put(c, &b, "/e/x-data", "B"), RING_OK);
  ck_assert_str_eq(value_of(c, "/e/x-data"), "B");
  /* a campaign under a lease that is gone fails plainly */
  ring_error err;
  ck_assert_int_eq(ring_etcd_campaign(c, "/e/x2", "A", 1, la, &a, NULL, &err), RING_ENOTFOUND);
  ring_leadership_clear(&a);
  ring_leadership_clear(&b);
  ring_etcd_lease_revoke(c, lb, NULL);
  ring_etcd_close(c);
}
END_TEST

/* ------------------------------------------------------------- fencing */

START_TEST(fenced_txn_writes_only_while_leading) {
  ring_etcd *ca = client(one.endpoints), *cb = client(one.endpoints);
  int64_t la = grant(ca, 30), lb = grant(cb, 30);
  ring_leadership a, b;
  ck_assert_int_eq(campaign(ca, "/e/f", "A", la, &a, NULL), RING_OK);
  ck_assert_int_eq(fenced_put(ca, &a, "/e/f-data", "A1"), RING_OK);
  ck_assert_str_eq(value_of(cb, "/e/f-data"), "A1");

  /* the caller's compares: held -> success ops; not held -> failure ops */
  ring_cmp is_a1 = {"/e/f-data", 9, RING_CMP_VALUE, RING_CMP_EQ, 0, "A1", 2};
  ring_cmp is_zz = {"/e/f-data", 9, RING_CMP_VALUE, RING_CMP_EQ, 0, "zz", 2};
  ring_op put_a2 = {RING_OP_PUT, "/e/f-data", 9, "A2", 2, 0, false};
  ring_op get = {RING_OP_RANGE, "/e/f-data", 9, NULL, 0, 0, false};
  ring_op mark = {RING_OP_PUT, "/e/f-mark", 9, "A", 1, 0, false};
  ring_op on_fail[] = {get, mark};
  ring_txn_result r;
  ring_error err;
  ck_assert_int_eq(ring_etcd_fenced_txn(ca, &a, &is_a1, 1, &put_a2, 1, on_fail, 2, &r, &err),
                   RING_OK);
  ck_assert(r.succeeded);
  ring_txn_result_clear(&r);
  ck_assert_str_eq(value_of(cb, "/e/f-data"), "A2");
  ck_assert_int_eq(ring_etcd_fenced_txn(ca, &a, &is_zz, 1, &put_a2, 1, on_fail, 2, &r, &err),
                   RING_ECONFLICT);
  ck_assert(!r.succeeded);
  ck_assert_uint_eq(r.n_ranges, 2);
  ck_assert_str_eq((char *)r.ranges[0].kvs[0].value, "A2"); /* the failure branch's range */
  ring_txn_result_clear(&r);
  ck_assert_str_eq(value_of(cb, "/e/f-mark"), "A"); /* and its put ran */
  /* no failure ops: a plain conflict */
  ck_assert_int_eq(ring_etcd_fenced_txn(ca, &a, &is_zz, 1, &put_a2, 1, NULL, 0, &r, &err),
                   RING_ECONFLICT);
  ck_assert_uint_eq(r.n_ranges, 0);
  ring_txn_result_clear(&r);
  /* an absent compared key counts as unchanged between the two txns */
  ring_cmp absent = {"/e/f-none", 9, RING_CMP_VALUE, RING_CMP_EQ, 0, "x", 1};
  ck_assert_int_eq(ring_etcd_fenced_txn(ca, &a, &absent, 1, &put_a2, 1, on_fail, 2, NULL, &err),
                   RING_ECONFLICT);

  /* A's lease is revoked behind its back; B takes over */
  ck_assert_int_eq(ring_etcd_lease_revoke(cb, la, NULL), RING_OK);
  ck_assert_int_eq(campaign(cb, "/e/f", "B", lb, &b, NULL), RING_OK);
  ck_assert_int_eq(fenced_put(cb, &b, "/e/f-data", "B1"), RING_OK);
  ck_assert_int_eq(ring_etcd_delete(cb, "/e/f-mark", 9, false, NULL, NULL, NULL), RING_OK);

  /* A, deposed, writes nothing: neither branch runs */
  ck_assert_int_eq(fenced_put(ca, &a, "/e/f-data", "A3"), RING_ENOTLEADER);
  ring_cmp is_b1 = {"/e/f-data", 9, RING_CMP_VALUE, RING_CMP_EQ, 0, "B1", 2};
  ck_assert_int_eq(ring_etcd_fenced_txn(ca, &a, &is_b1, 1, &put_a2, 1, on_fail, 2, &r, &err),
                   RING_ENOTLEADER);
  ck_assert_ptr_nonnull(strstr(err.message, "/e/f"));
  ck_assert_int_eq(ring_etcd_fenced_txn(ca, &a, &is_zz, 1, &put_a2, 1, on_fail, 2, &r, &err),
                   RING_ENOTLEADER);
  ck_assert_str_eq(value_of(cb, "/e/f-data"), "B1");
  ck_assert_str_eq(value_of(cb, "/e/f-mark"), "");
  ck_assert_int_eq(ring_etcd_resign(ca, &a, NULL), RING_ENOTLEADER);
  ck_assert_str_eq(value_of(cb, "/e/f"), "B");

  /* the key deleted outright (not by lease): A's token no longer matches
   * even after A campaigns again and wins a new term */
  ck_assert_int_eq(ring_etcd_delete(cb, "/e/f", 4, false, NULL, NULL, NULL), RING_OK);
  ck_assert_int_eq(fenced_put(cb, &b, "/e/f-data", "B2"), RING_ENOTLEADER);
  int64_t la2 = grant(ca, 30);
  ring_leadership a2;
  ck_assert_int_eq(campaign(ca, "/e/f", "A", la2, &a2, NULL), RING_OK);
  ck_assert_int_eq(fenced_put(ca, &a, "/e/f-data", "A-old"), RING_ENOTLEADER);
  ck_assert_int_eq(fenced_put(ca, &a2, "/e/f-data", "A-new"), RING_OK);
  ck_assert_str_eq(value_of(cb, "/e/f-data"), "A-new");
  ck_assert_int_eq(ring_etcd_resign(ca, &a2, NULL), RING_OK);
  ring_leadership_clear(&a);
  ring_leadership_clear(&a2);
  ring_leadership_clear(&b);
  ring_etcd_lease_revoke(ca, la2, NULL);
  ring_etcd_lease_revoke(cb, lb, NULL);
  ring_etcd_close(ca);
  ring_etcd_close(cb);
}
END_TEST

/* A keeps its lease with a keeper, then "pauses" (its keeper stops, as a
 * frozen process would stop refreshing); the lease expires, B wins; A
 * wakes up with its old leadership and tries to write. */
static void never(void *ud, int64_t lease) {
  (void)ud;
  (void)lease;
}

START_TEST(paused_ex_leader_is_refused) {
  ring_etcd *ca = client(one.endpoints), *cb = client(one.endpoints);
  int64_t la = grant(ca, 1), lb = grant(cb, 30);
  ring_keeper *k;
  ck_assert_int_eq(ring_etcd_keep_alive(ca, la, 1, never, NULL, &k, NULL), RING_OK);
  ring_leadership a, b;
  ck_assert_int_eq(campaign(ca, "/e/p", "A", la, &a, NULL), RING_OK);
  ck_assert_int_eq(fenced_put(ca, &a, "/e/p-data", "A1"), RING_OK);
  /* the keeper holds the 1 s lease for more than two TTLs */
  ck_assert_msg(HARNESS_HOLDS(lease_ttl(ca, la) >= 0, 2.5), "the keeper lost the 1 s lease");
  ck_assert_int_eq(fenced_put(ca, &a, "/e/p-data", "A2"), RING_OK);
  ring_keeper_stop(k); /* A pauses */
  int rc = RING_EBUSY;
  for (double t0 = harness_now(); rc == RING_EBUSY && harness_now() - t0 < 6;)
    if ((rc = campaign(cb, "/e/p", "B", lb, &b, NULL)) == RING_EBUSY)
      harness_sleep_ms(100);
  ck_assert_int_eq(rc, RING_OK);
  ck_assert_int_eq(fenced_put(cb, &b, "/e/p-data", "B1"), RING_OK);
  /* A wakes up */
  ck_assert_int_eq(fenced_put(ca, &a, "/e/p-data", "A3"), RING_ENOTLEADER);
  ck_assert_str_eq(value_of(ca, "/e/p-data"), "B1");
  ring_leadership_clear(&a);
  ring_leadership_clear(&b);
  ring_etcd_lease_revoke(cb, lb, NULL);
  ring_etcd_close(ca);
  ring_etcd_close(cb);
}
END_TEST

/* --------------------------------------- campaigns with unknown outcome */

/* A loopback endpoint that takes one HTTP request per connection and
 * answers nothing: it closes the connection, after forwarding the request
 * to etcd (forward) or not. The client sees "empty reply" after sending:
 * a write's outcome is unknown. */
typedef struct dropper {
  int lfd, port;
  int target_port;
  bool forward;
  _Atomic bool stop;
  _Atomic int served;
  pthread_t thread;
} dropper;

static void set_timeout(int fd, long ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* Reads one request (headers + Content-Length body) into buf; its length. */
static size_t read_request(int fd, char *buf, size_t cap) {
  size_t len = 0;
  for (int i = 0; i < 1000 && len < cap - 1; i++) {
    ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
    if (n <= 0)
      break;
    len += (size_t)n;
    buf[len] = '\0';
    char *end = strstr(buf, "\r\n\r\n");
    char *cl = strcasestr(buf, "Content-Length:");
    if (end && cl && len >= (size_t)(end + 4 - buf) + strtoul(cl + 15, NULL, 10))
      break;
  }
  return len;
}

static void forward(const dropper *d, const char *req, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)d->target_port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && send(fd, req, len, 0) == (ssize_t)len) {
    char reply[512];
    set_timeout(fd, 2000);
    (void)recv(fd, reply, sizeof reply, 0); /* etcd has answered: the txn is done */
  }
  close(fd);
}

static void *dropper_main(void *arg) {
  dropper *d = arg;
  static char req[16384];
  while (!atomic_load(&d->stop)) {
    struct pollfd p = {d->lfd, POLLIN, 0};
    if (poll(&p, 1, 50) != 1)
      continue;
    int fd = accept(d->lfd, NULL, NULL);
    if (fd < 0)
      continue;
    set_timeout(fd, 2000);
    size_t len = read_request(fd, req, sizeof req);
    if (d->forward && len > 0)
      forward(d, req, len);
    atomic_fetch_add(&d->served, 1); /* before the close the client sees */
    close(fd);
  }
  return NULL;
}

static void dropper_start(dropper *d, bool fwd) {
  memset(d, 0, sizeof *d);
  d->forward = fwd;
  d->target_port = one.m[0].client_port;
  d->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  ck_assert_int_eq(bind(d->lfd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(d->lfd, 8), 0);
  getsockname(d->lfd, (struct sockaddr *)&a, &alen);
  d->port = ntohs(a.sin_port);
  pthread_create(&d->thread, NULL, dropper_main, d);
}

static void dropper_stop(dropper *d) {
  atomic_store(&d->stop, true);
  pthread_join(d->thread, NULL);
  close(d->lfd);
}

/* A client whose first endpoint is the dropper, the second real etcd. */
static ring_etcd *client_via(const dropper *d) {
  char eps[160];
  snprintf(eps, sizeof eps, "http://127.0.0.1:%d,%s", d->port, one.m[0].url);
  return client(eps);
}

START_TEST(campaign_with_a_lost_reply_rereads) {
  ring_etcd *plain = client(one.endpoints);
  int64_t lease = grant(plain, 30), other = grant(plain, 30);
  dropper d;
  ring_leadership l;
  ring_kv seen, cur;

  /* forwarded, reply lost: the re-read finds our key, so we won */
  dropper_start(&d, true);
  ring_etcd *c = client_via(&d);
  ck_assert_int_eq(campaign(c, "/e/u1", "me", lease, &l, NULL), RING_OK);
  ck_assert_int_eq(atomic_load(&d.served), 1);
  ck_assert_int_eq(ring_etcd_leader(plain, "/e/u1", &seen, NULL), RING_OK);
  ck_assert_int_eq(l.create_revision, seen.create_revision);
  ck_assert_int_eq(seen.version, 1); /* written once */
  ring_kv_clear(&seen);
  ck_assert_int_eq(fenced_put(plain, &l, "/e/u1-data", "ok"), RING_OK);
  ring_leadership_clear(&l);
  ring_etcd_close(c);

  /* forwarded, somebody else leads: the re-read says busy */
  ck_assert_int_eq(campaign(plain, "/e/u2", "them", other, &l, NULL), RING_OK);
  ring_leadership_clear(&l);
  c = client_via(&d);
  ck_assert_int_eq(campaign(c, "/e/u2", "me", lease, &l, &cur), RING_EBUSY);
  ck_assert_str_eq((char *)cur.value, "them");
  ring_kv_clear(&cur);
  ck_assert_int_eq(atomic_load(&d.served), 2);
  ring_etcd_close(c);
  dropper_stop(&d);

  /* never forwarded: the key is absent, so the txn is sent again (to etcd) */
  dropper_start(&d, false);
  c = client_via(&d);
  ck_assert_int_eq(campaign(c, "/e/u3", "me", lease, &l, NULL), RING_OK);
  ck_assert_int_eq(atomic_load(&d.served), 1);
  ck_assert_int_eq(ring_etcd_leader(plain, "/e/u3", &seen, NULL), RING_OK);
  ck_assert_int_eq(l.create_revision, seen.create_revision);
  ring_kv_clear(&seen);
  ring_leadership_clear(&l);
  ring_etcd_close(c);
  dropper_stop(&d);

  ring_etcd_lease_revoke(plain, lease, NULL);
  ring_etcd_lease_revoke(plain, other, NULL);
  ring_etcd_close(plain);
}
END_TEST

START_TEST(bad_arguments) {
  ring_etcd *c = client(one.endpoints);
  ring_leadership l = {0};
  ring_error err;
  ck_assert_int_eq(ring_etcd_campaign(c, "", "v", 1, 1, &l, NULL, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_campaign(c, "/k", "v", 1, 0, &l, NULL, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_campaign(NULL, "/k", "v", 1, 1, &l, NULL, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_resign(c, &l, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_fenced_txn(c, &l, NULL, 0, NULL, 0, NULL, 0, NULL, &err), RING_EINVAL);
  ck_assert_int_eq(ring_etcd_leader(c, NULL, NULL, &err), RING_EINVAL);
  ring_etcd_close(c);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("etcd_elect");
  TCase *tc = tcase_create("single");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, exactly_one_of_two_wins);
  tcase_add_test(tc, resign_hands_over);
  tcase_add_test(tc, lease_expiry_hands_over);
  tcase_add_test(tc, fenced_txn_writes_only_while_leading);
  tcase_add_test(tc, paused_ex_leader_is_refused);
  tcase_add_test(tc, campaign_with_a_lost_reply_rereads);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1); /* fixtures hold processes */
}
