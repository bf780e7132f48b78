/*
 * test_fake_agent.c: the coordinator tests' stand-in agent against real
 * etcd, with versions published by hand: alive/<id> under a kept lease,
 * acks after each swap, progress naming exactly the pending tokens of the
 * table (at once, or when released), a flap that drops alive/<id> and puts
 * it back, and a kill that removes it at once and stops the acks.
 */
#include "etcd_harness.h"
#include "check_main.h"
#include "etcd_client.h"
#include "fake_agent.h"
#include "ring_etcd.h"
#include "test_cluster.h"

#include <check.h>
#include <cjson/cJSON.h>

#define CLUSTER "fa"

static etcd_cluster one;

/* ------------------------------------------------------------ publishing */

/* Version 1: 4 nodes a0..a3 in 2 zones, T 64, R 2, placed by the planner. */
static ring_table *first_table(void) {
  test_cluster c = {0};
  for (int i = 0; i < 4; i++) {
    char id[8], zone[8];
    snprintf(id, sizeof id, "a%d", i);
    snprintf(zone, sizeof zone, "z%d", i % 2);
    cluster_add(&c, id, zone, "r0", 1.0, RING_NODE_ACTIVE);
  }
  ring_plan_config cfg = {CLUSTER, 64, 2, 0, "zone", NULL, 0, 0, 0, NULL, RING_BALANCE_TOKENS,
                          NULL};
  ring_plan *p;
  ring_error err;
  ck_assert_msg(ring_plan_compute(NULL, c.specs, c.n, &cfg, &p, &err) == RING_OK, "%s",
                err.message);
  ring_table *t;
  ck_assert_int_eq(ring_table_clone(ring_plan_target(p), 1, &t), RING_OK);
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  ring_plan_free(p);
  cluster_free(&c);
  return t;
}

/* The next version of prev: node `to` pending on the first slot of each
 * of `tokens` (slots it does not own; n may be 0). */
static ring_table *next_table(const ring_table *prev, const char *to, const uint32_t *tokens,
                              uint32_t n) {
  ring_table *t;
  ck_assert_int_eq(ring_table_clone(prev, ring_table_version(prev) + 1, &t), RING_OK);
  ring_table_clear_pending(t);
  int node = ring_table_find_node(prev, to);
  ck_assert_int_ge(node, 0);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t slot = 0;
    if (ring_table_owner(prev, tokens[i], 0) == node ||
        ring_table_owner(prev, tokens[i], 1) == node)
      continue; /* the caller picks tokens it does not own */
    ck_assert_int_eq(ring_table_add_pending(t, tokens[i], slot, (uint16_t)node), RING_OK);
  }
  ring_error err;
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

/* Puts tables/<v> and version in one txn. */
static void publish(ring_etcd *c, const ring_table *t) {
  char tkey[96], vval[24];
  const char *vkey = "/ringkeeper/" CLUSTER "/version";
  snprintf(tkey, sizeof tkey, "/ringkeeper/" CLUSTER "/tables/%llu",
           (unsigned long long)ring_table_version(t));
  snprintf(vval, sizeof vval, "%llu", (unsigned long long)ring_table_version(t));
  char *tj;
  size_t tl;
  ck_assert_int_eq(ring_table_encode(t, &tj, &tl), RING_OK);
  ring_op ops[2] = {{RING_OP_PUT, tkey, strlen(tkey), tj, tl, 0, false},
                    {RING_OP_PUT, vkey, strlen(vkey), vval, strlen(vval), 0, false}};
  ring_error err;
  ck_assert_msg(ring_etcd_txn(c, NULL, 0, ops, 2, NULL, 0, NULL, &err) == RING_OK, "%s",
                err.message);
  free(tj);
}

/* Tokens of t the node does not own, the first n of them. */
static uint32_t not_owned(const ring_table *t, const char *id, uint32_t *out, uint32_t n) {
  int node = ring_table_find_node(t, id);
  uint32_t k = 0;
  for (uint32_t tok = 0; tok < ring_table_tokens(t) && k < n; tok++)
    if (ring_table_owner(t, tok, 0) != node && ring_table_owner(t, tok, 1) != node)
      out[k++] = tok;
  return k;
}

/* ---------------------------------------------------------------- reading */

/* The value of a cluster key (malloc()'ed) and its lease, NULL if absent. */
static char *get(ring_etcd *c, const char *what, int64_t *lease) {
  char key[128];
  snprintf(key, sizeof key, "/ringkeeper/" CLUSTER "/%s", what);
  ring_kvs kv;
  ring_error err;
  ck_assert_msg(ring_etcd_range(c, key, strlen(key), NULL, &kv, &err) == RING_OK, "%s",
                err.message);
  char *v = kv.n ? strdup((char *)kv.kvs[0].value) : NULL;
  if (lease)
    *lease = kv.n ? kv.kvs[0].lease : 0;
  ring_kvs_clear(&kv);
  return v;
}

/* Whether key `what` has value `want` (NULL: absent). */
static bool value_is(ring_etcd *c, const char *what, const char *want) {
  char *v = get(c, what, NULL);
  bool ok = want ? v && strcmp(v, want) == 0 : v == NULL;
  free(v);
  return ok;
}

/* Waits until key `what` has value `want` (NULL: absent); false after 5 s. */
static bool wait_value(ring_etcd *c, const char *what, const char *want) {
  return HARNESS_WAIT(value_is(c, what, want), 5);
}

/* progress/<id> as "<version>:<t1>,<t2>,..." for easy comparison. */
static void progress_text(ring_etcd *c, const char *id, char *out, size_t cap) {
  char what[64];
  snprintf(what, sizeof what, "progress/%s", id);
  char *v = get(c, what, NULL);
  out[0] = '\0';
  if (v == NULL)
    return;
  cJSON *o = cJSON_Parse(v);
  ck_assert_ptr_nonnull(o);
  ck_assert_str_eq(cJSON_GetObjectItem(o, "format")->valuestring, "ringkeeper.progress.v1");
  size_t off = (size_t)snprintf(out, cap, "%.0f:", cJSON_GetObjectItem(o, "version")->valuedouble);
  const cJSON *tok;
  int i = 0;
  cJSON_ArrayForEach(tok, cJSON_GetObjectItem(o, "tokens")) off +=
      (size_t)snprintf(out + off, cap - off, "%s%.0f", i++ ? "," : "", tok->valuedouble);
  ck_assert_double_eq(cJSON_GetObjectItem(o, "bytes")->valuedouble, 4096.0 * i);
  cJSON_Delete(o);
  free(v);
}

static bool wait_progress(ring_etcd *c, const char *id, const char *want) {
  char got[512];
  double end = harness_now() + 5;
  do {
    progress_text(c, id, got, sizeof got);
    if (strcmp(got, want) == 0)
      return true;
    harness_sleep_ms(10);
  } while (harness_now() < end);
  fprintf(stderr, "progress/%s: want %s, have %s\n", id, want, got);
  return false;
}

/* "v:t1,t2" of a version and tokens. */
static void want_text(uint64_t v, const uint32_t *tokens, uint32_t n, char *out, size_t cap) {
  size_t off = (size_t)snprintf(out, cap, "%llu:", (unsigned long long)v);
  for (uint32_t i = 0; i < n; i++)
    off += (size_t)snprintf(out + off, cap - off, "%s%u", i ? "," : "", tokens[i]);
}

/* ---------------------------------------------------------------- tests */

START_TEST(alive_acks_progress_hold_flap_kill) {
  ring_etcd *c = test_client(one.endpoints, 3000, 0);
  fake_agent a;
  fake_agent_opts o = {.cluster = CLUSTER, .id = "a1", .zone = "z1", .rack = "r2", .ttl_s = 2};
  ring_error err;
  ck_assert_msg(fake_agent_start(&a, c, &o, &err) == RING_OK, "%s", err.message);

  /* alive/a1 under a lease, as proto/etcd.md spells it */
  int64_t lease;
  char *alive = get(c, "alive/a1", &lease);
  ck_assert_ptr_nonnull(alive);
  ck_assert_int_ne(lease, 0);
  cJSON *j = cJSON_Parse(alive);
  ck_assert_ptr_nonnull(j);
  ck_assert_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, "ringkeeper.alive.v1");
  ck_assert_str_eq(cJSON_GetObjectItem(j, "id")->valuestring, "a1");
  ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(j, "addr")->valuestring, "127.0.0.1:"));
  cJSON *labels = cJSON_GetObjectItem(j, "labels");
  ck_assert_str_eq(cJSON_GetObjectItem(labels, "zone")->valuestring, "z1");
  ck_assert_str_eq(cJSON_GetObjectItem(labels, "rack")->valuestring, "r2");
  ck_assert_double_eq(cJSON_GetObjectItem(j, "weight")->valuedouble, 1.0);
  ck_assert_double_gt(cJSON_GetObjectItem(j, "started_ms")->valuedouble, 1.6e12);
  cJSON_Delete(j);
  free(alive);

  /* v1 has no pending entries: an ack, no progress */
  ring_table *t1 = first_table();
  publish(c, t1);
  ck_assert(wait_value(c, "acks/a1", "1"));
  char *p = get(c, "progress/a1", NULL);
  ck_assert_ptr_null(p);

  /* v2: a1 pending on three tokens: ack 2 and progress naming them */
  uint32_t toks[3];
  ck_assert_uint_eq(not_owned(t1, "a1", toks, 3), 3);
  ring_table *t2 = next_table(t1, "a1", toks, 3);
  publish(c, t2);
  ck_assert(wait_value(c, "acks/a1", "2"));
  char text[256];
  want_text(2, toks, 3, text, sizeof text);
  ck_assert(wait_progress(c, "a1", text));

  /* held: v3's progress waits for the release; the ack does not */
  ck_assert_int_eq(fake_agent_hold(&a, true), RING_OK);
  ring_table *t3 = next_table(t2, "a1", toks + 1, 2);
  publish(c, t3);
  ck_assert(wait_value(c, "acks/a1", "3"));
  ck_assert(HARNESS_WAIT(fake_agent_withheld(&a), 5));
  ck_assert(wait_progress(c, "a1", text)); /* still v2 */
  ck_assert_int_eq(fake_agent_hold(&a, false), RING_OK);
  want_text(3, toks + 1, 2, text, sizeof text);
  ck_assert(wait_progress(c, "a1", text));
  ck_assert(!fake_agent_withheld(&a));
  ck_assert_uint_eq(fake_agent_progress_version(&a), 3);

  /* v4 pends other nodes only: progress stays at v3 */
  ring_table *t4 = next_table(t3, "a2", NULL, 0);
  publish(c, t4);
  ck_assert(wait_value(c, "acks/a1", "4"));
  ck_assert(wait_progress(c, "a1", text));

  /* a flap: alive/a1 goes, and comes back under another lease */
  ck_assert_msg(fake_agent_flap(&a, 200, &err) == RING_OK, "%s", err.message);
  int64_t lease2;
  alive = get(c, "alive/a1", &lease2);
  ck_assert_ptr_nonnull(alive);
  ck_assert_int_ne(lease2, lease);
  free(alive);

  /* the lease is kept past its TTL: alive/a1 stays throughout */
  ck_assert(HARNESS_HOLDS(!value_is(c, "alive/a1", NULL) && !atomic_load(&a.lost), 3.0));

  /* killed: alive/a1 gone at once, no more acks */
  ck_assert_int_eq(fake_agent_kill(&a), RING_OK);
  alive = get(c, "alive/a1", NULL);
  ck_assert_ptr_null(alive);
  ring_table *t5 = next_table(t4, "a1", toks, 1);
  publish(c, t5);
  ck_assert(HARNESS_HOLDS(value_is(c, "acks/a1", "4"), 1.0));
  ck_assert_uint_eq(atomic_load(&a.errors), 0);
  fake_agent_free(&a);
  fake_agent_free(&a); /* twice is fine */
  ring_table_free(t1);
  ring_table_free(t2);
  ring_table_free(t3);
  ring_table_free(t4);
  ring_table_free(t5);
  ring_etcd_close(c);
}
END_TEST

START_TEST(abandoned_lease_lapses) {
  ring_etcd *c = test_client(one.endpoints, 3000, 0);
  fake_agent a;
  fake_agent_opts o = {.cluster = CLUSTER, .id = "a9", .zone = "z0", .weight = 2.5, .ttl_s = 1};
  ring_error err;
  ck_assert_msg(fake_agent_start(&a, c, &o, &err) == RING_OK, "%s", err.message);
  char *alive = get(c, "alive/a9", NULL);
  ck_assert_ptr_nonnull(strstr(alive, "\"weight\":2.5"));
  free(alive);
  fake_agent_abandon(&a);
  alive = get(c, "alive/a9", NULL);
  ck_assert_ptr_nonnull(alive); /* still there until the TTL runs out */
  free(alive);
  double t0 = harness_now();
  ck_assert(wait_value(c, "alive/a9", NULL));
  ck_assert_double_lt(harness_now() - t0, 4.0);
  fake_agent_free(&a);
  ring_etcd_close(c);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("fake_agent");
  TCase *tc = tcase_create("single");
  tcase_set_timeout(tc, 60);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, alive_acks_progress_hold_flap_kill);
  tcase_add_test(tc, abandoned_lease_lapses);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1); /* fixtures hold processes */
}
