/*
 * test_kv_live.c: ring-kv end to end against real etcd. A table is
 * published by hand through libring (no coordinator, no agents); three
 * ring-kv processes serve it, a fourth waits outside the ring. A client
 * loads keys and reads every one back; a node answers 421 for a key it
 * does not hold. Then a version with the fourth node pending for a
 * quarter of the tokens: a server answers a stale request 409 with its
 * version; a client that does not follow the ring refreshes on that 409
 * and its writes reach the pending owner (in its staging directory, not
 * in the arc the agent will install). Then the cutover: the new owner
 * moves its staged segments into arcs/<token>/, and every key still reads
 * back (a miss on the new owner falls back to the other owner).
 */
#define _GNU_SOURCE
#include "check_main.h"
#include "etcd_client.h"
#include "etcd_harness.h"
#include "kv_client.h"
#include "proc_harness.h"
#include "ring_etcd.h"

#include <check.h>
#include <dirent.h>
#include <inttypes.h>

#define CLUSTER "kvtest"
#define T 256
#define NKEYS 2000

static etcd_cluster ec;
static ring_etcd *etcd;
static char root[64];
static proc kv[4];
static int ports[4];

/* ------------------------------------------------------------- the ring */

static ring_table *table_v1(void) {
  ring_table_params p = {CLUSTER, "zone", 1, 7, T, 2};
  ring_table *t;
  ring_error err;
  ck_assert_msg(ring_table_new(&p, &t, &err) == RING_OK, "%s", err.message);
  for (int i = 0; i < 3; i++) {
    char id[8], addr[32], zone[8];
    snprintf(id, sizeof id, "n%d", i);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ports[i]);
    snprintf(zone, sizeof zone, "z%d", i);
    const char *k[] = {"zone"}, *v[] = {zone};
    ring_node_spec s = {id, addr, k, v, 1, 1.0, RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, &err), RING_OK);
  }
  for (uint32_t tok = 0; tok < T; tok++)
    for (uint32_t r = 0; r < 2; r++)
      ring_table_set_owner(t, tok, r, (uint16_t)((tok + r) % 3));
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

/* v2: n3 joins, pending for slot 0 of every token t % 4 == 0. */
static ring_table *table_v2(const ring_table *v1) {
  ring_table *t;
  ring_error err;
  ck_assert_int_eq(ring_table_clone(v1, 2, &t), RING_OK);
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", ports[3]);
  const char *k[] = {"zone"}, *v[] = {"z3"};
  ring_node_spec s = {"n3", addr, k, v, 1, 1.0, RING_NODE_JOINING};
  uint16_t n3;
  ck_assert_int_eq(ring_table_add_node(t, &s, &n3, &err), RING_OK);
  for (uint32_t tok = 0; tok < T; tok += 4)
    ck_assert_int_eq(ring_table_add_pending(t, tok, 0, n3), RING_OK);
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

/* v3: the cutover: n3 owns what it was pending for. */
static ring_table *table_v3(const ring_table *v2) {
  ring_table *t;
  ck_assert_int_eq(ring_table_clone(v2, 3, &t), RING_OK);
  for (uint32_t tok = 0; tok < T; tok += 4)
    ring_table_set_owner(t, tok, 0, 3);
  ring_table_clear_pending(t);
  ring_table_set_node(t, 3, RING_NODE_ACTIVE, 1.0);
  ring_error err;
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

/* tables/<v> and version in one txn, as the coordinator does. */
static void publish(const ring_table *t) {
  char tkey[96], vkey[96], vval[24], *json;
  size_t len;
  uint64_t v = ring_table_version(t);
  snprintf(tkey, sizeof tkey, "/ringkeeper/" CLUSTER "/tables/%" PRIu64, v);
  snprintf(vkey, sizeof vkey, "/ringkeeper/" CLUSTER "/version");
  snprintf(vval, sizeof vval, "%" PRIu64, v);
  ck_assert_int_eq(ring_table_encode(t, &json, &len), RING_OK);
  ring_op ops[2] = {{RING_OP_PUT, tkey, strlen(tkey), json, len, 0, false},
                    {RING_OP_PUT, vkey, strlen(vkey), vval, strlen(vval), 0, false}};
  ring_error err;
  ck_assert_msg(ring_etcd_txn(etcd, NULL, 0, ops, 2, NULL, 0, NULL, &err) == RING_OK, "%s",
                err.message);
  free(json);
}

/* ------------------------------------------------------------ processes */

static void spawn(int i) {
  char id[8], listen[32], dir[128], log[160];
  snprintf(id, sizeof id, "n%d", i);
  snprintf(listen, sizeof listen, "127.0.0.1:%d", ports[i]);
  snprintf(dir, sizeof dir, "%s/n%d", root, i);
  snprintf(log, sizeof log, "%s/n%d.log", root, i);
  char *argv[] = {
      RING_KV_BIN, "--endpoints",       ec.endpoints, "--cluster",  CLUSTER, "--id",
      id,          "--listen",          listen,       "--data-dir", dir,     "--lease-ttl",
      "3s",        "--rescan-interval", "100ms",      NULL};
  ck_assert_int_eq(proc_spawn(&kv[i], log, argv), 0);
}

/* Waits until n<i> is registered under services/kv/. */
static void wait_registered(int i) {
  char key[96];
  snprintf(key, sizeof key, "/ringkeeper/" CLUSTER "/services/kv/n%d", i);
  for (int tries = 0; tries < 200; tries++) {
    ring_kvs r;
    if (ring_etcd_range(etcd, key, strlen(key), NULL, &r, NULL) == RING_OK) {
      uint32_t n = r.n;
      ring_kvs_clear(&r);
      if (n == 1)
        return;
    }
    harness_sleep_ms(50);
  }
  file_tail(kv[i].log, 30);
  ck_abort_msg("n%d did not register", i);
}

static void setup(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  etcd_cluster_start(&ec, 1, NULL);
  etcd = test_client(ec.endpoints, 3000, 0);
  snprintf(root, sizeof root, "/tmp/ringkv-live-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(root));
  for (int i = 0; i < 4; i++)
    ports[i] = harness_free_port();
}

static void teardown(void) {
  for (int i = 0; i < 4; i++)
    if (proc_running(&kv[i])) {
      int rc = proc_term(&kv[i], 10);
      if (rc != 0)
        file_tail(kv[i].log, 40);
      ck_assert_int_eq(rc, 0); /* a clean stop, no sanitizer report */
    }
  ring_etcd_close(etcd);
  etcd_cluster_stop(&ec);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  ck_assert_int_eq(system(cmd), 0);
  curl_global_cleanup();
}

/* ------------------------------------------------------------- requests */

/* A raw request to n<i> with X-Ring-Version: version. Returns the status;
 * *srv (if not NULL) receives the answer's X-Ring-Version. */
static long raw(int i, const char *method, const char *key, uint64_t version, uint64_t *srv,
                char **body) {
  char url[128], hdr[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/kv/%s", ports[i], key);
  snprintf(hdr, sizeof hdr, "X-Ring-Version: %" PRIu64, version);
  CURL *h = curl_easy_init();
  proc_buf b = {0}, hb = {0};
  struct curl_slist *l = curl_slist_append(NULL, hdr);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (strcmp(method, "PUT") == 0)
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "raw-value");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, proc_buf_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, proc_buf_write);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &hb);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
  long status = 0;
  if (curl_easy_perform(h) == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  const char *v = hb.data ? strcasestr(hb.data, "X-Ring-Version: ") : NULL;
  if (srv)
    *srv = v ? strtoull(v + 16, NULL, 10) : 0;
  if (body)
    *body = b.data;
  else
    free(b.data);
  free(hb.data);
  curl_slist_free_all(l);
  curl_easy_cleanup(h);
  return status;
}

/* Waits (up to 5 s) until n<i> answers at version v or later: a client
 * that follows the ring can see a version before a given server does. A
 * GET changes nothing, and every answer carries the server's version. */
static void wait_server_version(int i, uint64_t v) {
  uint64_t srv = 0;
  for (int k = 0; k < 500 && srv < v; k++) {
    raw(i, "GET", "version-probe", v, &srv, NULL);
    if (srv < v)
      harness_sleep_ms(10);
  }
  ck_assert_msg(srv >= v, "n%d still at version %" PRIu64 ", not %" PRIu64, i, srv, v);
}

static void value_of(const char *key, char *buf, size_t cap) {
  snprintf(buf, cap, "value-of-%s-%08x", key, (unsigned)strlen(key) * 2654435761u);
}

static void put_keys(kv_client *c, const char *prefix, int n) {
  for (int i = 0; i < n; i++) {
    char key[32], val[64];
    snprintf(key, sizeof key, "%s%d", prefix, i);
    value_of(key, val, sizeof val);
    int rc = kv_client_put(c, key, strlen(key), val, strlen(val));
    ck_assert_msg(rc == RING_OK, "put %s: %s", key, ring_strerror(rc));
  }
}

static void verify_keys(kv_client *c, const char *prefix, int n) {
  for (int i = 0; i < n; i++) {
    char key[32], val[64];
    snprintf(key, sizeof key, "%s%d", prefix, i);
    value_of(key, val, sizeof val);
    uint8_t *got = NULL;
    size_t len = 0;
    int rc = kv_client_get(c, key, strlen(key), &got, &len);
    ck_assert_msg(rc == RING_OK, "get %s: %s", key, ring_strerror(rc));
    ck_assert_msg(len == strlen(val) && memcmp(got, val, len) == 0, "%s: wrong value", key);
    free(got);
  }
}

static kv_client *client(bool no_follow) {
  kv_client_opts o = {.endpoints = ec.endpoints, .cluster = CLUSTER, .no_follow = no_follow};
  kv_client *c = NULL;
  char msg[256];
  ck_assert_msg(kv_client_open(&o, &c, msg, sizeof msg) == RING_OK, "%s", msg);
  return c;
}

/* Segment files in root/n<i>/<sub>/<token>. */
static int segments(int i, const char *sub, uint32_t token) {
  char path[256];
  snprintf(path, sizeof path, "%s/n%d/%s/%u", root, i, sub, token);
  DIR *d = opendir(path);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    n += strncmp(e->d_name, "seg-", 4) == 0;
  if (d)
    closedir(d);
  return n;
}

/* ------------------------------------------------------------------ test */

START_TEST(load_verify_join_cutover) {
  ring_table *v1 = table_v1();
  publish(v1);
  for (int i = 0; i < 4; i++)
    spawn(i);
  for (int i = 0; i < 4; i++)
    wait_registered(i);
  kv_client *a = client(false);
  ck_assert_uint_eq(kv_client_version(a), 1);
  put_keys(a, "k", NKEYS);
  verify_keys(a, "k", NKEYS);

  /* A node that neither owns nor is pending for a key says so. */
  const char *stray = NULL;
  char key[32];
  for (int i = 0; stray == NULL; i++) {
    snprintf(key, sizeof key, "k%d", i);
    uint16_t o[2];
    ring_lookup(v1, key, strlen(key), o, 2);
    if (o[0] != 0 && o[1] != 0)
      stray = key;
  }
  ck_assert_int_eq(raw(0, "GET", stray, 1, NULL, NULL), 421);
  ck_assert_int_eq(raw(3, "GET", stray, 1, NULL, NULL), 421); /* not in the ring at all */
  /* An owner with no record of a key says 404 and stays up (a GET of an
   * absent key once freed an uninitialised value). */
  uint16_t own[1];
  ring_lookup(v1, "never-written", strlen("never-written"), own, 1);
  ck_assert_int_eq(raw(own[0], "GET", "never-written", 1, NULL, NULL), 404);
  ck_assert_int_eq(raw(own[0], "GET", "never-written", 1, NULL, NULL), 404);

  /* v2: n3 joins as pending owner of a quarter of the tokens. */
  kv_client *b = client(true); /* stays at v1 until a server says otherwise */
  ring_table *v2 = table_v2(v1);
  publish(v2);
  for (int i = 0; i < 200 && kv_client_version(a) < 2; i++)
    harness_sleep_ms(10);
  ck_assert_uint_eq(kv_client_version(a), 2);
  ck_assert_uint_eq(kv_client_version(b), 1);
  wait_server_version(1, 2);
  uint64_t srv = 0;
  ck_assert_int_eq(raw(1, "PUT", "k1", 1, &srv, NULL), 409); /* stale sender */
  ck_assert_uint_eq(srv, 2);
  /* A stale sender's read: served by an owner at v2 (it holds every write),
   * refused by a node that is only pending for the key. */
  uint16_t k1_owner[1];
  ring_lookup(v2, "k1", 2, k1_owner, 1);
  char *k1_body = NULL, k1_want[64];
  ck_assert_int_eq(raw(k1_owner[0], "GET", "k1", 2, NULL, NULL), 200); /* the server at v2 */
  srv = 0;
  ck_assert_int_eq(raw(k1_owner[0], "GET", "k1", 1, &srv, &k1_body), 200);
  ck_assert_uint_eq(srv, 2);
  value_of("k1", k1_want, sizeof k1_want);
  ck_assert_str_eq(k1_body, k1_want);
  free(k1_body);
  for (int i = 0;; i++) {
    snprintf(key, sizeof key, "k%d", i);
    if (ring_table_token(v2, key, strlen(key)) % 4 == 0) { /* n3 pending for it */
      wait_server_version(3, 2);
      ck_assert_int_eq(raw(3, "GET", key, 1, NULL, NULL), 409);
      break;
    }
  }

  put_keys(b, "new", 200); /* a 409, a refresh, then the whole write set */
  kv_client_stats st;
  kv_client_stats_get(b, &st);
  ck_assert_uint_ge(st.stale, 1);
  ck_assert_uint_ge(st.refreshes, 1);
  ck_assert_uint_eq(kv_client_version(b), 2);
  int on_n3 = 0;
  for (int i = 0; i < 200; i++) {
    snprintf(key, sizeof key, "new%d", i);
    uint32_t tok = ring_table_token(v2, key, strlen(key));
    if (tok % 4)
      continue;
    char *body = NULL, want[64];
    ck_assert_int_eq(raw(3, "GET", key, 2, NULL, &body), 200);
    value_of(key, want, sizeof want);
    ck_assert_str_eq(body, want);
    free(body);
    ck_assert_int_gt(segments(3, "kv/staging", tok), 0);
    ck_assert_int_eq(segments(3, "arcs", tok), 0); /* the agent's to install */
    on_n3++;
  }
  ck_assert_int_gt(on_n3, 20);
  verify_keys(a, "k", NKEYS);
  verify_keys(b, "new", 200);

  /* v3: the cutover. n3 adopts what it staged. */
  ring_table *v3 = table_v3(v2);
  publish(v3);
  uint32_t tok0 = ring_table_token(v3, "new0", 4);
  for (uint32_t tok = 0; tok < T; tok += 4)
    for (int i = 0; i < 300 && segments(3, "kv/staging", tok) > 0; i++)
      harness_sleep_ms(10);
  for (uint32_t tok = 0; tok < T; tok += 4)
    ck_assert_int_eq(segments(3, "kv/staging", tok), 0);
  if (tok0 % 4 == 0)
    ck_assert_int_gt(segments(3, "arcs", tok0), 0);
  verify_keys(a, "new", 200);
  verify_keys(a, "k", NKEYS); /* old keys of n3's tokens: fallback to the other owner */
  kv_client_stats_get(a, &st);
  ck_assert_uint_gt(st.fallbacks, 0);
  ck_assert_uint_eq(kv_client_version(a), 3);

  kv_client_close(a);
  kv_client_close(b);
  ring_table_free(v1);
  ring_table_free(v2);
  ring_table_free(v3);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("kv_live");
  TCase *tc = tcase_create("live");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, load_verify_join_cutover);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite_as(suite(), 1); }
