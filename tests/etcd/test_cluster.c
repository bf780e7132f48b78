/*
 * test_cluster.c: the cluster reader (coordinator/cluster/cluster.c,
 * rk_state_read) and the version barrier over its state
 * (rk_barrier_laggard) against canned records in a real etcd: good and
 * malformed nodes/, alive/, acks/, progress/ and clients/ values, a value
 * over its cap, a key that names no id, a leader value that does not
 * parse. Host-written garbage is counted and named in the state's bad list
 * and never fails the read; a malformed node record (the control plane's)
 * does, naming its key; a prefix of many keys is read whole in pages.
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "check_main.h"
#include "test_tables.h"
#include "cluster.h"

#include <check.h>

static etcd_cluster one;

static void put(ring_etcd *c, const char *cluster, const char *what, const char *value,
                size_t len) {
  char key[RK_KEY_MAX];
  ck_assert_int_gt(rk_key(key, cluster, what), 0);
  ring_error err;
  ck_assert_msg(ring_etcd_put(c, key, strlen(key), value, len, 0, NULL, NULL, &err) == RING_OK,
                "%s: %s", what, err.message);
}

static void put_str(ring_etcd *c, const char *cluster, const char *what, const char *value) {
  put(c, cluster, what, value, strlen(value));
}

/* Puts a record encode() made (RING_OK asserted) and frees the encoding. */
#define PUT_ENCODED(c, cluster, what, encode, rec)                                                 \
  do {                                                                                             \
    char *json_ = NULL;                                                                            \
    size_t len_ = 0;                                                                               \
    ck_assert_int_eq(encode(rec, &json_, &len_), RING_OK);                                         \
    put(c, cluster, what, json_, len_);                                                            \
    free(json_);                                                                                   \
  } while (0)

static void put_node(ring_etcd *c, const char *cluster, const char *id) {
  rk_node n = {.weight = 1, .state = RING_NODE_ACTIVE, .desired = RK_WANT_ACTIVE};
  snprintf(n.id, sizeof n.id, "%s", id);
  snprintf(n.addr, sizeof n.addr, "127.0.0.1:7000");
  char what[RK_KEY_MAX];
  snprintf(what, sizeof what, "nodes/%s", id);
  PUT_ENCODED(c, cluster, what, rk_node_encode, &n);
}

static void put_alive(ring_etcd *c, const char *cluster, const char *id) {
  rk_alive a = {.weight = 1, .started_ms = 1};
  snprintf(a.id, sizeof a.id, "%s", id);
  snprintf(a.addr, sizeof a.addr, "127.0.0.1:7000");
  char what[RK_KEY_MAX];
  snprintf(what, sizeof what, "alive/%s", id);
  PUT_ENCODED(c, cluster, what, rk_alive_encode, &a);
}

/* The canned cluster "canned": nodes n0..n2 and the hosts' records, good
 * and bad (the comment on each says which). */
static void seed_canned(ring_etcd *c) {
  const char *cl = "canned";
  rk_config cfg;
  rk_config_defaults(&cfg);
  PUT_ENCODED(c, cl, "config", rk_config_encode, &cfg);
  for (int i = 0; i < 3; i++)
    put_node(c, cl, (const char[][3]){"n0", "n1", "n2"}[i]);
  put_alive(c, cl, "n0");                  /* good */
  put_str(c, cl, "alive/n1", "{not json"); /* malformed: n1 is alive all the same */
  put_str(c, cl, "alive/x y", "{}");       /* the key names no id */
  put_str(c, cl, "acks/n0", "5");          /* good */
  put_str(c, cl, "acks/n1", "05");         /* malformed: reads as 0 */
  char big_ack[41];                        /* over the 32-byte cap */
  memset(big_ack, '1', 40);
  big_ack[40] = '\0';
  put_str(c, cl, "acks/n2", big_ack);
  put_str(c, cl, "acks/kv-a", "5");
  uint32_t tokens[] = {1, 2};
  rk_progress p = {.version = 5, .n_tokens = 2, .tokens = tokens, .bytes = 10};
  PUT_ENCODED(c, cl, "progress/n0", rk_progress_encode, &p);
  put_str(c, cl, "progress/n1", "[]");     /* malformed */
  size_t huge = RK_PROGRESS_VALUE_MAX + 1; /* over its cap: dropped unread */
  char *h = malloc(huge);
  ck_assert_ptr_nonnull(h);
  memset(h, 'x', huge);
  put(c, cl, "progress/n2", h, huge);
  free(h);
  rk_client kv = {"kv"};
  PUT_ENCODED(c, cl, "clients/kv-a", rk_client_encode, &kv);
  put_str(c, cl, "clients/kv-b", "nope"); /* malformed: the name still counts */
  put_str(c, cl, "leader", "garbage");    /* the leader's, unparsable: noted, not fatal */
}

static void setup(void) {
  etcd_cluster_start(&one, 1, NULL);
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  seed_canned(c);
  ring_etcd_close(c);
}
static void teardown(void) { etcd_cluster_stop(&one); }

static void read_state(const char *cluster, unsigned what, rk_state *s) {
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  ring_error err;
  ck_assert_msg(rk_state_read(c, cluster, what, s, &err) == RING_OK, "%s", err.message);
  ring_etcd_close(c);
}

/* "kind/host: why" of s's bad record i. */
static const char *bad_text(const rk_state *s, uint32_t i, char buf[256]) {
  return rk_bad_text(&s->bad[i], buf, 256);
}

START_TEST(good_records_read_and_bad_ones_named) {
  rk_state s;
  read_state("canned", RK_READ_ALL, &s);
  ck_assert(s.has_config);
  ck_assert_uint_eq(s.n_nodes, 3);
  ck_assert_str_eq(s.nodes[2].id, "n2");
  /* alive: n0 valid, n1 alive with an unusable value; "x y" is no entry */
  ck_assert_uint_eq(s.n_alive, 2);
  ck_assert(rk_state_alive(&s, "n0")->valid);
  ck_assert(!rk_state_alive(&s, "n1")->valid);
  ck_assert_ptr_null(rk_state_alive(&s, "n2"));
  /* acks: bad values read as 0 */
  ck_assert_uint_eq(s.n_acks, 4);
  ck_assert_uint_eq(rk_state_ack(&s, "n0"), 5);
  ck_assert_uint_eq(rk_state_ack(&s, "n1"), 0);
  ck_assert_uint_eq(rk_state_ack(&s, "n2"), 0);
  ck_assert_uint_eq(rk_state_ack(&s, "kv-a"), 5);
  /* progress: bad values read as nothing reported */
  ck_assert_uint_eq(s.n_progress, 3);
  ck_assert_uint_eq(rk_state_progress(&s, "n0")->n_tokens, 2);
  ck_assert_uint_eq(rk_state_progress(&s, "n1")->n_tokens, 0);
  ck_assert_uint_eq(rk_state_progress(&s, "n2")->n_tokens, 0);
  ck_assert_uint_eq(s.n_clients, 2);
  ck_assert_str_eq(s.clients[1], "kv-b");
  ck_assert(!s.has_leader);
  /* the bad list: by kind, then host */
  static const struct {
    rk_bad_kind kind;
    const char *host, *why;
  } want[] = {
      {RK_BAD_ALIVE, "n1", ""},
      {RK_BAD_ALIVE, "x?y", "the key names no id"},
      {RK_BAD_ACKS, "n1", "not a version number"},
      {RK_BAD_ACKS, "n2", "40 bytes over the 32 cap"},
      {RK_BAD_PROGRESS, "n1", ""},
      {RK_BAD_PROGRESS, "n2", "over the 524288 cap"},
      {RK_BAD_CLIENTS, "kv-b", ""},
      {RK_BAD_LEADER, "", ""},
  };
  char buf[256];
  ck_assert_uint_eq(s.n_bad, sizeof want / sizeof *want);
  for (uint32_t i = 0; i < s.n_bad; i++) {
    ck_assert_msg(s.bad[i].kind == want[i].kind && strcmp(s.bad[i].host, want[i].host) == 0,
                  "bad[%u] is %s", i, bad_text(&s, i, buf));
    ck_assert_msg(strstr(s.bad[i].why, want[i].why) != NULL, "bad[%u] is %s", i,
                  bad_text(&s, i, buf));
    ck_assert_int_gt(s.bad[i].mod_revision, 0);
  }
  ck_assert_uint_eq(rk_bad_hosts(&s), 4); /* n1, x?y, n2, kv-b */
  ck_assert_str_eq(bad_text(&s, 3, buf), "acks/n2: 40 bytes over the 32 cap");
  rk_state_free(&s);
}
END_TEST

/* Bad records hold the barrier only for their own host, never open it. */
START_TEST(barrier_over_canned_records) {
  ring_table *t = test_table_rr(64, 1, 3, 1, NULL, 5);
  rk_state s;
  read_state("canned", RK_READ_ALIVE | RK_READ_ACKS | RK_READ_CLIENTS, &s);
  ck_assert_uint_eq(s.n_nodes, 0); /* only what was asked for */
  /* n1 is alive with a malformed ack: it holds the barrier */
  ck_assert_str_eq(rk_barrier_laggard(&s, t, 5), "n1");
  ck_assert_str_eq(rk_barrier_laggard(&s, t, 1), "n1");
  rk_state_free(&s);

  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  put_str(c, "canned", "acks/n1", "5");
  read_state("canned", RK_READ_ALIVE | RK_READ_ACKS | RK_READ_CLIENTS, &s);
  /* n2 has no alive/ key (its oversized ack does not matter); kv-b never acked */
  ck_assert_str_eq(rk_barrier_laggard(&s, t, 5), "kv-b");
  ck_assert_str_eq(rk_barrier_laggard(&s, NULL, 5), "kv-b");
  rk_state_free(&s);

  put_str(c, "canned", "acks/kv-b", "6");
  read_state("canned", RK_READ_ALIVE | RK_READ_ACKS | RK_READ_CLIENTS, &s);
  ck_assert_ptr_null(rk_barrier_laggard(&s, t, 5));
  ck_assert_str_eq(rk_barrier_laggard(&s, t, 6), "n0");
  rk_state_free(&s);
  put_str(c, "canned", "acks/n1", "05"); /* as seeded, for the other tests */
  char key[RK_KEY_MAX];
  int len = rk_key(key, "canned", "acks/kv-b");
  ring_error err;
  ck_assert_int_eq(ring_etcd_delete(c, key, (size_t)len, false, NULL, NULL, &err), RING_OK);
  ring_etcd_close(c);
  ring_table_free(t);
}
END_TEST

/* A malformed record the control plane wrote fails the read, naming it. */
START_TEST(malformed_node_record_fails_the_read) {
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  put_node(c, "strict", "n0");
  put_str(c, "strict", "nodes/n1", "{}");
  rk_state s = {.n_nodes = 77};
  ring_error err;
  int rc = rk_state_read(c, "strict", RK_READ_NODES, &s, &err);
  ck_assert_int_ne(rc, RING_OK);
  ck_assert_int_eq(err.code, rc);
  ck_assert_msg(strncmp(err.message, "nodes/n1: ", 10) == 0, "%s", err.message);
  ck_assert_uint_eq(s.n_nodes, 77); /* untouched */
  /* the name in the key and in the record must agree */
  put_node(c, "strict2", "n0");
  char key[RK_KEY_MAX];
  rk_key(key, "strict2", "nodes/n0");
  ring_kvs r;
  ck_assert_int_eq(ring_etcd_range(c, key, strlen(key), NULL, &r, &err), RING_OK);
  put(c, "strict2", "nodes/n9", (const char *)r.kvs[0].value, r.kvs[0].value_len);
  ring_kvs_clear(&r);
  ck_assert_int_eq(rk_state_read(c, "strict2", RK_READ_NODES, &s, &err), RING_ENODEID);
  ck_assert_msg(strncmp(err.message, "nodes/n9: ", 10) == 0, "%s", err.message);
  ring_etcd_close(c);
}
END_TEST

/* More hosts than a page: every one read, in order, at one revision. */
START_TEST(many_hosts_are_read_in_pages) {
  enum { HOSTS = 3 * RD_HOST_PAGE_KEYS + 5 };
  ring_etcd *c = test_client(one.endpoints, 5000, 0);
  for (int i = 0; i < HOSTS; i++) {
    char id[16], what[32], ack[16];
    snprintf(id, sizeof id, "h%03d", i);
    put_alive(c, "many", id);
    snprintf(what, sizeof what, "acks/%s", id);
    snprintf(ack, sizeof ack, "%d", i + 1);
    put_str(c, "many", what, ack);
  }
  put_str(c, "many", "acks/h", "7"); /* a key that is the others' shared start */
  ring_etcd_close(c);
  rk_state s;
  read_state("many", RK_READ_ALIVE | RK_READ_ACKS, &s);
  ck_assert_uint_eq(s.n_alive, HOSTS);
  ck_assert_uint_eq(s.n_acks, HOSTS + 1);
  ck_assert_uint_eq(s.n_bad, 0);
  for (int i = 0; i < HOSTS; i++) {
    char id[16];
    snprintf(id, sizeof id, "h%03d", i);
    ck_assert_str_eq(s.alive[i].a.id, id);
    ck_assert(s.alive[i].valid);
    ck_assert_uint_eq(rk_state_ack(&s, id), (uint64_t)i + 1);
  }
  ck_assert_uint_eq(rk_state_ack(&s, "h"), 7);
  rk_state_free(&s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cluster");
  TCase *tc = tcase_create("canned");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, good_records_read_and_bad_ones_named);
  tcase_add_test(tc, barrier_over_canned_records);
  tcase_add_test(tc, malformed_node_record_fails_the_read);
  tcase_add_test(tc, many_hosts_are_read_in_pages);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1); /* the fixture holds etcd */
}
