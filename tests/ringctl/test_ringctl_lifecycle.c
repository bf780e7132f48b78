/*
 * test_ringctl_lifecycle.c: a node's life after it joined, against real
 * etcd: `remove` (and each refusal), `label` (set, remove, bad values),
 * labels a host reports that differ from its record (status and verify),
 * `diff` between two versions, and the journal entry each change leaves
 * (`history --json`, with --as and without).
 */
#include "ringctl_fixture.h"

/* Rewrites nodes/<id> with state and desired. */
static void set_node(const char *cluster, const char *id, ring_node_state state,
                     rk_desired desired) {
  rk_node n = fx_node(cluster, id);
  n.state = state;
  n.desired = desired;
  char *json, what[80];
  size_t len;
  ck_assert_int_eq(rk_node_encode(&n, &json, &len), RING_OK);
  snprintf(what, sizeof what, "nodes/%s", id);
  fx_put_owned(cluster, what, json, len);
}

/* The journal entry (history --json) of kind `what`, NULL if none. */
static cJSON *journal_entry(cJSON *history, const char *what) {
  const cJSON *e;
  cJSON_ArrayForEach(e, fx_get(history, "journal")) if (strcmp(fx_str(e, "what"), what) ==
                                                        0) return (cJSON *)e;
  return NULL;
}

/* ------------------------------------------------------------------ remove */

START_TEST(remove_only_what_owns_nothing) {
  fx_seed_cluster("l-rm");
  FX_EXPECT_IN(1, err, "unknown node", "l-rm", "remove n9");
  FX_EXPECT(2, "l-rm", "remove N0");
  FX_EXPECT(2, "l-rm", "remove");
  FX_EXPECT_IN(1, err, "drain it first", "l-rm", "remove n0"); /* active */
  set_node("l-rm", "n0", RING_NODE_DRAINING, RK_WANT_DRAINED);
  FX_EXPECT_IN(1, err, "still owns", "l-rm", "remove n0"); /* drained, not yet moved */
  ck_assert_int_eq(fx_node("l-rm", "n0").desired, RK_WANT_DRAINED);

  /* a down node that owns nothing (not in the table) */
  char *json, what[] = "nodes/n7";
  size_t len;
  rk_node n = fx_node("l-rm", "n1");
  snprintf(n.id, sizeof n.id, "n7");
  n.state = RING_NODE_DOWN;
  ck_assert_int_eq(rk_node_encode(&n, &json, &len), RING_OK);
  fx_put_owned("l-rm", what, json, len);
  cJSON *j = fx_json(0, "l-rm", "remove n7 --as alice");
  ck_assert_str_eq(fx_str(j, "node"), "n7");
  ck_assert_str_eq(fx_str(j, "desired"), "removed");
  ck_assert_str_eq(fx_str(j, "state"), "down");
  ck_assert(cJSON_IsTrue(fx_get(j, "changed")));
  cJSON_Delete(j);
  ck_assert_int_eq(fx_node("l-rm", "n7").desired, RK_WANT_REMOVED);
  FX_EXPECT_IN(0, out, "already removed", "l-rm", "remove n7");

  cJSON *h = fx_json(0, "l-rm", "history");
  cJSON *e = journal_entry(h, "node.remove");
  ck_assert_msg(e != NULL, "no node.remove entry in the journal");
  ck_assert_str_eq(fx_str(e, "node"), "n7");
  ck_assert_str_eq(fx_str(e, "by"), "alice");
  ck_assert_ptr_nonnull(strstr(fx_str(e, "detail"), "was down"));
  int entries = cJSON_GetArraySize(fx_get(h, "journal"));
  ck_assert_int_eq(entries, 1); /* refusals and the no-op left no entry */
  cJSON_Delete(h);
  FX_EXPECT(2, "l-rm", "remove n7 --as ''");
}
END_TEST

/* ------------------------------------------------------------------- label */

START_TEST(label_set_remove_and_refuse) {
  fx_seed_cluster("l-lab");
  cJSON *j = fx_json(0, "l-lab", "label n0 zone=z9 rack=r1");
  ck_assert_str_eq(fx_str(fx_get(j, "labels"), "zone"), "z9");
  ck_assert_str_eq(fx_str(fx_get(j, "labels"), "rack"), "r1");
  ck_assert_str_eq(fx_str(fx_get(j, "previous"), "zone"), "z0");
  cJSON_Delete(j);
  rk_node n = fx_node("l-lab", "n0");
  ck_assert_str_eq(rk_labels_get(&n.labels, "zone"), "z9");
  FX_EXPECT(0, "l-lab", "label n0 rack-");
  n = fx_node("l-lab", "n0");
  ck_assert_ptr_null(rk_labels_get(&n.labels, "rack"));
  ck_assert_uint_eq(n.labels.n, 1);

  const char *bad[] = {"label n0",         "label n0 zone",     "label N0 zone=z1", "label",
                       "label n0 Zone=z1", "label n0 zone=z/1", "label n0 =z1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    fx_run r = fx_ringctl("l-lab", "%s", bad[i]);
    ck_assert_msg(r.code == 2, "%s: exit %d (%s)", bad[i], r.code, r.err);
    fx_free(&r);
  }
  FX_EXPECT_IN(1, err, "unknown node", "l-lab", "label n9 zone=z1");
  n = fx_node("l-lab", "n0"); /* nothing written by the refusals */
  ck_assert_str_eq(rk_labels_get(&n.labels, "zone"), "z9");
  ck_assert_uint_eq(n.labels.n, 1);

  cJSON *h = fx_json(0, "l-lab", "history");
  cJSON *e = journal_entry(h, "node.label");
  ck_assert_msg(e != NULL, "no node.label entry");
  ck_assert_ptr_nonnull(strchr(fx_str(e, "by"), '@')); /* login@host without --as */
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(h, "journal")), 2);
  cJSON_Delete(h);
}
END_TEST

/* A host restarted with another zone: named by status and verify until the
 * record is relabelled. */
START_TEST(label_mismatch_is_loud) {
  fx_seed_cluster("l-mis");
  rk_alive a = {.weight = 1.0, .started_ms = 1796000000000ull};
  snprintf(a.id, sizeof a.id, "n1");
  snprintf(a.addr, sizeof a.addr, "127.0.0.1:7001");
  ck_assert_int_eq(rk_labels_set(&a.labels, "zone", "z7", NULL), RING_OK);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_alive_encode(&a, &json, &len), RING_OK);
  fx_put_owned("l-mis", "alive/n1", json, len);

  cJSON *s = fx_json(0, "l-mis", "status");
  const cJSON *m = cJSON_GetArrayItem(fx_get(s, "label_mismatch"), 0);
  ck_assert_msg(m != NULL, "status --json has no label_mismatch");
  ck_assert_str_eq(fx_str(m, "node"), "n1");
  ck_assert_str_eq(fx_str(fx_get(m, "record"), "zone"), "z1");
  ck_assert_str_eq(fx_str(fx_get(m, "host"), "zone"), "z7");
  cJSON_Delete(s);
  FX_EXPECT_IN(0, out, "its host says zone=z7", "l-mis", "status");
  FX_EXPECT_IN(1, out, "node n1: labels in its record zone=z1", "l-mis", "verify");

  FX_EXPECT(0, "l-mis", "label n1 zone=z7");
  s = fx_json(0, "l-mis", "status");
  ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(s, "label_mismatch"));
  cJSON_Delete(s);
}
END_TEST

/* -------------------------------------------------------------------- diff */

START_TEST(diff_two_versions) {
  fx_seed_cluster("l-diff");
  ring_table *t = fx_table("l-diff", FX_TOKENS, FX_REPLICAS, FX_NODES, FX_ZONES, 2);
  uint16_t o0 = ring_table_owner(t, 0, 0), o1 = ring_table_owner(t, 0, 1), to = 0;
  while (to == o0 || to == o1)
    to++;
  ring_table_set_owner(t, 0, 0, to);
  ring_error err = {0};
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  fx_seed_table("l-diff", t);
  char from_id[64], to_id[64];
  snprintf(from_id, sizeof from_id, "%s", ring_table_node_id(t, o0));
  snprintf(to_id, sizeof to_id, "%s", ring_table_node_id(t, to));
  ring_table_free(t);

  cJSON *d = fx_json(0, "l-diff", "diff 1 2");
  ck_assert_double_eq(fx_num(d, "moves_total"), 1);
  const cJSON *mv = cJSON_GetArrayItem(fx_get(d, "moves"), 0);
  ck_assert_double_eq(fx_num(mv, "token"), 0);
  ck_assert_double_eq(fx_num(mv, "slot"), 0);
  ck_assert_str_eq(fx_str(mv, "from"), from_id);
  ck_assert_str_eq(fx_str(mv, "to"), to_id);
  const cJSON *n;
  double gained = 0, lost = 0;
  cJSON_ArrayForEach(n, fx_get(d, "nodes")) {
    gained += fx_num(n, "gained");
    lost += fx_num(n, "lost");
    if (strcmp(fx_str(n, "id"), to_id) == 0)
      ck_assert_double_eq(fx_num(n, "after"), fx_num(n, "before") + 1);
  }
  ck_assert_double_eq(gained, 1);
  ck_assert_double_eq(lost, 1);
  cJSON_Delete(d);
  FX_EXPECT_IN(0, out, "1 token-replicas changed owner", "l-diff", "diff 1 2");
  FX_EXPECT_IN(0, out, "0 token-replicas changed owner", "l-diff", "diff 2 2");
  FX_EXPECT_IN(1, err, "version 5", "l-diff", "diff 1 5");
  FX_EXPECT(2, "l-diff", "diff 1");
  FX_EXPECT(2, "l-diff", "diff 1 x");
  FX_EXPECT(2, "l-diff", "diff 0 1");
  FX_EXPECT(2, "l-diff", "diff 1 2 3");
  FX_EXPECT_IN(2, err, "\"abc\" is not a version", "l-diff", "diff abc 2"); /* not --version */
  fx_run r = fx_ringctl("l-diff", "diff abc 2");
  ck_assert_msg(strstr(r.err, "--version") == NULL, "%s", r.err);
  fx_free(&r);
  /* nodes listed by id (n2 before n10), moves by token */
  d = fx_json(0, "l-diff", "diff 1 2");
  const char *prev = "";
  cJSON_ArrayForEach(n, fx_get(d, "nodes")) {
    ck_assert_msg(strverscmp(prev, fx_str(n, "id")) < 0, "%s after %s", fx_str(n, "id"), prev);
    prev = fx_str(n, "id");
  }
  cJSON_Delete(d);
}
END_TEST

/* ------------------------------------------------------------------- audit */

/* Every operator change leaves one journal entry, in the txn of the change. */
START_TEST(changes_are_journaled) {
  fx_seed_cluster("l-aud");
  FX_EXPECT(0, "l-aud", "throttle --moves-per-node 9 --as bob");
  FX_EXPECT(0, "l-aud", "auto-apply all --as bob");
  FX_EXPECT(0, "l-aud", "drain n2 --as bob");
  FX_EXPECT(0, "l-aud", "undrain n2 --as bob");
  FX_EXPECT(0, "l-aud", "weight n3 2 --as bob");
  FX_EXPECT(2, "l-aud", "auto-apply sometimes --as bob");
  FX_EXPECT(0, "l-aud", "throttle"); /* a read: no entry */
  cJSON *h = fx_json(0, "l-aud", "history");
  const char *want[] = {"config.throttle", "config.auto_apply", "node.drain", "node.undrain",
                        "node.weight"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    cJSON *e = journal_entry(h, want[i]);
    ck_assert_msg(e != NULL, "no %s entry", want[i]);
    ck_assert_str_eq(fx_str(e, "by"), "bob");
  }
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(h, "journal")), 5);
  ck_assert_ptr_nonnull(
      strstr(fx_str(journal_entry(h, "config.throttle"), "detail"), "moves-per-node=9"));
  ck_assert_str_eq(fx_str(journal_entry(h, "node.weight"), "node"), "n3");
  cJSON_Delete(h);
}
END_TEST

int main(void) {
  const TTest *const tests[] = {remove_only_what_owns_nothing, label_set_remove_and_refuse,
                                label_mismatch_is_loud, diff_two_versions, changes_are_journaled};
  return fx_main("ringctl_lifecycle", tests, sizeof tests / sizeof tests[0]);
}
