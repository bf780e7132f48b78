/*
 * test_barrier.c: the version barrier as the agent uses it
 * (daemon/barrier.c: rd_barrier_read, rd_barrier_laggard, rd_ack_parse)
 * and a host record's checks (daemon/host_read.c, rd_host_check): one
 * record at a time in memory, then canned alive/, acks/ and clients/
 * records, good and bad, in a real etcd. Bad records are counted, leave
 * their host in the barrier at version 0 and never open it.
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "check_main.h"
#include "test_tables.h"
#include "barrier.h"

#include <check.h>

static etcd_cluster one;

/* A ring_kv for key/value (both NUL-terminated strings, borrowed). */
static ring_kv kv_of(const char *key, const char *value) {
  return (ring_kv){.key = (uint8_t *)key,
                   .key_len = strlen(key),
                   .value = (uint8_t *)value,
                   .value_len = value ? strlen(value) : 0};
}

#define ACKS "/ringkeeper/c/acks/"

START_TEST(one_ack_record) {
  rd_ack a;
  char why[128];
  ring_kv kv = kv_of(ACKS "n1", "42");
  ck_assert_int_eq(rd_ack_parse(&kv, strlen(ACKS), &a, why, sizeof why), 1);
  ck_assert_str_eq(a.id, "n1");
  ck_assert_uint_eq(a.version, 42);
  ck_assert_str_eq(why, "");
  kv = kv_of(ACKS "n2", "042");
  ck_assert_int_eq(rd_ack_parse(&kv, strlen(ACKS), &a, why, sizeof why), 0);
  ck_assert_str_eq(a.id, "n2");
  ck_assert_uint_eq(a.version, 0);
  ck_assert_ptr_nonnull(strstr(why, "not a version number"));
  kv = kv_of(ACKS "n3", "123456789012345678901234567890123");
  ck_assert_int_eq(rd_ack_parse(&kv, strlen(ACKS), &a, why, sizeof why), 0);
  ck_assert_str_eq(why, "33 bytes over the 32 cap");
  kv = kv_of(ACKS "n4", NULL); /* dropped by the bounded read */
  ck_assert_int_eq(rd_ack_parse(&kv, strlen(ACKS), &a, why, sizeof why), 0);
  ck_assert_str_eq(why, "no value");
  kv = kv_of(ACKS "N/5", "1");
  ck_assert_int_eq(rd_ack_parse(&kv, strlen(ACKS), &a, why, sizeof why), -1);
  ck_assert_str_eq(a.id, "??5"); /* the key's rest as reports show it */
  ck_assert_str_eq(why, "the key names no id");
  kv = kv_of(ACKS, "1");
  ck_assert_int_eq(rd_ack_parse(&kv, strlen(ACKS), &a, why, sizeof why), -1);
}
END_TEST

/* The rule on a view built by hand: alive hosts of the table, then clients. */
START_TEST(the_rule) {
  ring_table *t = test_table_rr(64, 1, 3, 1, NULL, 9);
  char alive[][RING_ID_MAX + 1] = {"n0", "n2", "zz"};
  rd_ack acks[] = {{"c1", 9}, {"n0", 9}, {"n2", 8}};
  char clients[][RING_ID_MAX + 1] = {"c1", "c2"};
  rd_barrier_view v = {alive, sizeof *alive, 3, acks, 3, clients, 1};
  ck_assert_str_eq(rd_barrier_laggard(&v, t, 9), "n2"); /* n1 is not alive: no wait */
  ck_assert_ptr_null(rd_barrier_laggard(&v, t, 8));
  v.n_clients = 2;
  ck_assert_str_eq(rd_barrier_laggard(&v, t, 8), "c2");
  ck_assert_str_eq(rd_barrier_laggard(&v, NULL, 8), "c2");
  v.n_alive = 0;
  v.n_clients = 0;
  ck_assert_ptr_null(rd_barrier_laggard(&v, t, 100)); /* nobody to wait for */
  ring_table_free(t);
}
END_TEST

static void put(ring_etcd *c, const char *what, const char *value) {
  char key[RK_KEY_MAX];
  ck_assert_int_gt(rk_key(key, "bar", what), 0);
  ring_error err;
  ck_assert_msg(ring_etcd_put(c, key, strlen(key), value, strlen(value), 0, NULL, NULL, &err) ==
                    RING_OK,
                "%s: %s", what, err.message);
}

static void read_barrier(ring_etcd *c, rd_barrier *b) {
  ring_error err;
  ck_assert_msg(rd_barrier_read(c, "bar", b, &err) == RING_OK, "%s", err.message);
}

START_TEST(read_canned_records) {
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  ring_table *t = test_table_rr(64, 1, 3, 1, NULL, 3);
  put(c, "alive/n0", "{}"); /* values are not decoded: the key counts */
  put(c, "alive/n1", "{garbage");
  put(c, "alive/BAD", "{}"); /* names no id: left out, counted */
  put(c, "acks/n0", "3");
  put(c, "acks/n1", "three");   /* malformed: n1 stays at 0 */
  put(c, "clients/kv", "nope"); /* the name counts, whatever the value */
  put(c, "progress/n0", "[]");  /* not the barrier's business */
  rd_barrier b;
  read_barrier(c, &b);
  ck_assert_int_gt(b.revision, 0);
  ck_assert_uint_eq(b.n_alive, 2);
  ck_assert_str_eq(b.alive[1], "n1");
  ck_assert_uint_eq(b.n_acks, 2);
  ck_assert_uint_eq(b.acks[1].version, 0);
  ck_assert_uint_eq(b.n_clients, 1);
  ck_assert_uint_eq(b.n_bad, 2); /* alive/BAD, acks/n1 */
  rd_barrier_view v = rd_barrier_view_of(&b);
  ck_assert_str_eq(rd_barrier_laggard(&v, t, 3), "n1");
  rd_barrier_free(&b);

  put(c, "acks/n1", "3");
  read_barrier(c, &b);
  v = rd_barrier_view_of(&b);
  ck_assert_uint_eq(b.n_bad, 1);
  ck_assert_str_eq(rd_barrier_laggard(&v, t, 3), "kv");
  rd_barrier_free(&b);

  put(c, "acks/kv", "4");
  read_barrier(c, &b);
  v = rd_barrier_view_of(&b);
  ck_assert_ptr_null(rd_barrier_laggard(&v, t, 3));
  ck_assert_str_eq(rd_barrier_laggard(&v, t, 4), "n0");
  rd_barrier_free(&b);
  rd_barrier_free(NULL);

  char long_name[RK_KEY_MAX + 1]; /* no key fits */
  memset(long_name, 'a', RK_KEY_MAX);
  long_name[RK_KEY_MAX] = '\0';
  ring_error err;
  ck_assert_int_eq(rd_barrier_read(c, long_name, &b, &err), RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "is not valid"));
  ring_table_free(t);
  ring_etcd_close(c);
}
END_TEST

START_TEST(an_empty_cluster_holds_nothing) {
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  rd_barrier b;
  ring_error err;
  ck_assert_msg(rd_barrier_read(c, "empty", &b, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(b.n_alive + b.n_acks + b.n_clients + b.n_bad, 0);
  rd_barrier_view v = rd_barrier_view_of(&b);
  ck_assert_ptr_null(rd_barrier_laggard(&v, NULL, 1));
  rd_barrier_free(&b);
  ring_etcd_close(c);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("barrier");
  TCase *mem = tcase_create("memory");
  tcase_add_test(mem, one_ack_record);
  tcase_add_test(mem, the_rule);
  suite_add_tcase(s, mem);
  TCase *tc = tcase_create("etcd");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, read_canned_records);
  tcase_add_test(tc, an_empty_cluster_holds_nothing);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1); /* the fixture holds etcd */
}
