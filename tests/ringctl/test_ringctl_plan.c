/*
 * test_ringctl_plan.c: plans through ringctl against real etcd: plan
 * (--json, -o), apply (the proposed plan, by ID, from a FILE; stale, raced,
 * tampered), --what-if, pause/resume/cancel, history and apply --wait.
 *
 * Sections: helpers; plan; apply; what-if; runs; history and --wait.
 *
 * A coordinator is played by the test: it proposes plans (rk_plan_doc_make),
 * moves the version on, and ends runs.
 */
#include "ringctl_fixture.h"

#include <math.h>
#include <pthread.h>

/* ----------------------------------------------------------------- helpers */

/* A path for a plan file of this test. */
static void plan_path(char *out, size_t size, const char *name) {
  snprintf(out, size, "%s/%s.json", fx_etcd.base, name);
}

static rk_run read_active(const char *cluster) {
  char *v = fx_value(cluster, "plan/active");
  rk_run r;
  ring_error err = {0};
  ck_assert_msg(rk_run_decode(v, strlen(v), &r, &err) == RING_OK, "%s: %s", err.message, v);
  free(v);
  return r;
}

static void delete_key(const char *cluster, const char *what) {
  char key[RK_KEY_MAX];
  rk_key(key, cluster, what);
  ck_assert_int_eq(ring_etcd_delete(fx_client, key, strlen(key), false, NULL, NULL, NULL), RING_OK);
}

/* Marks the first n moves of r done. */
static void set_done(rk_run *r, uint32_t n) {
  for (uint32_t i = 0; i < r->plan.moves_total; i++)
    rk_bit_set(r->cursor.done, i, i < n);
  r->cursor.moves_done = n;
}

/* Writes r under plan/history/<id> and deletes plan/active: the run ended. */
static void finish_run(const char *cluster, rk_run *r, rk_run_state state, const char *reason) {
  r->state = state;
  r->finished_ms = r->updated_ms = 1796000009000ull;
  set_done(r, state == RK_RUN_DONE ? r->plan.moves_total : r->cursor.moves_done);
  snprintf(r->reason, sizeof r->reason, "%s", reason);
  char *json, what[64];
  size_t len;
  ck_assert_int_eq(rk_run_encode(r, &json, &len), RING_OK);
  snprintf(what, sizeof what, "plan/history/%s", r->plan.id);
  fx_put_owned(cluster, what, json, len);
  delete_key(cluster, "plan/active");
}

/* Seeds `cluster`, proposes adding n6 in zone and saves the plan with
 * `ringctl plan -o` to a file of the test (path). */
static void save_proposal(const char *cluster, const char *zone, char id[RK_PLAN_ID_LEN + 1],
                          char *path, size_t size) {
  fx_seed_cluster(cluster);
  fx_propose_add(cluster, "n6", zone, id);
  plan_path(path, size, cluster);
  FX_EXPECT(0, cluster, "plan -o %s", path);
}

/* -------------------------------------------------------------------- plan */

START_TEST(plan_nothing_proposed) {
  fx_seed_cluster("p-none");
  cJSON *j = fx_json(0, "p-none", "plan");
  ck_assert_int_eq(cJSON_GetArraySize(j), 1);
  ck_assert(cJSON_IsNull(fx_get(j, "id")));
  cJSON_Delete(j);
  char path[400];
  plan_path(path, sizeof path, "none");
  FX_EXPECT(1, "p-none", "plan -o %s", path);
  ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

/* Arc t's size in seed_sizes_as: n0's arcs 40x the others, so a table
 * balanced by tokens is not balanced by bytes. */
static uint64_t skewed(const ring_table *t, uint32_t tok) {
  return ring_table_owner(t, tok, 0) == 0 ? 40000 : 1000;
}

static uint64_t linear(const ring_table *t, uint32_t tok) {
  (void)t;
  return 1000u * (tok + 1);
}

/* Writes sizes/<id> for every node: arc t weighs 1000 * (t + 1) bytes. */
static void seed_sizes_as(const char *cluster, uint64_t (*size)(const ring_table *, uint32_t));
static void seed_sizes(const char *cluster) { seed_sizes_as(cluster, linear); }

static void seed_sizes_as(const char *cluster, uint64_t (*size)(const ring_table *, uint32_t)) {
  ring_table *t = fx_table(cluster, FX_TOKENS, FX_REPLICAS, FX_NODES, FX_ZONES, 1);
  for (uint32_t n = 0; n < FX_NODES; n++) {
    rk_sizes z = {.version = 1};
    z.tokens = calloc(FX_TOKENS, sizeof *z.tokens);
    z.bytes = calloc(FX_TOKENS, sizeof *z.bytes);
    for (uint32_t tok = 0; tok < FX_TOKENS; tok++)
      for (uint32_t s = 0; s < FX_REPLICAS; s++)
        if (ring_table_owner(t, tok, s) == n) {
          z.tokens[z.n] = tok;
          z.bytes[z.n++] = size(t, tok);
        }
    char *json, what[32];
    size_t len;
    ck_assert_int_eq(rk_sizes_encode(&z, &json, &len), RING_OK);
    snprintf(what, sizeof what, "sizes/n%u", n);
    fx_put_owned(cluster, what, json, len);
    rk_sizes_free(&z);
  }
  ring_table_free(t);
}

/* With sizes/ reported, plan says the bytes each receiver gets (the sum of
 * its moves' arcs) and the time at the byte rate: no less than the busiest
 * receiver's bytes over it (eta_ideal_s), naming the node that bounds it. */
START_TEST(plan_bytes_and_eta) {
  fx_seed_cluster("p-bytes");
  seed_sizes("p-bytes");
  FX_EXPECT(0, "p-bytes", "throttle --bytes-per-sec 1000");
  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("p-bytes", "n6", "z0", id);
  cJSON *j = fx_json(0, "p-bytes", "plan");
  double want = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, fx_get(j, "moves")) want += 1000.0 * (fx_num(m, "token") + 1);
  ck_assert_double_gt(want, 0);
  ck_assert_double_eq(fx_num(j, "bytes_now"), want);
  double sum = 0, most = 0;
  const cJSON *in;
  cJSON_ArrayForEach(in, fx_get(j, "bytes_in")) {
    sum += in->valuedouble;
    most = in->valuedouble > most ? in->valuedouble : most;
  }
  ck_assert_double_eq(sum, want);
  ck_assert_double_gt(fx_num(fx_get(j, "bytes_in"), "n6"), 0);
  ck_assert_double_eq(fx_num(j, "eta_ideal_s"), most / 1000.0);
  ck_assert_double_ge(fx_num(j, "eta_s"), fx_num(j, "eta_ideal_s")); /* steps only add time */
  ck_assert_ptr_nonnull(strstr(cJSON_GetStringValue(fx_get(j, "eta_bound")), "bounded by n"));
  cJSON_Delete(j);
  fx_run r = fx_ringctl("p-bytes", "plan");
  ck_assert_int_eq(r.code, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "receivers"));
  ck_assert_ptr_nonnull(strstr(r.out, "bounded by n"));
  ck_assert_ptr_null(strstr(r.out, "tokens reported")); /* every token's size is known */
  fx_free(&r);

  /* n0 and n1 report nothing: tokens only they own have no size, and the
   * plan says the bytes are partial rather than passing them off as whole */
  for (int i = 0; i < 2; i++) {
    char key[RK_KEY_MAX];
    snprintf(key, sizeof key, "/ringkeeper/p-bytes/sizes/n%d", i);
    ck_assert_int_eq(ring_etcd_delete(fx_client, key, strlen(key), false, NULL, NULL, NULL),
                     RING_OK);
  }
  r = fx_ringctl("p-bytes", "plan");
  ck_assert_int_eq(r.code, 0);
  ck_assert_msg(strstr(r.out, "sizes:    ") && strstr(r.out, "tokens reported"), "%s", r.out);
  fx_free(&r);
}
END_TEST

/* --balance bytes: an offline rebalance of the live membership by the
 * hosts' sizes, saved and approved like any plan; refused while a size is
 * unknown. Under config balance bytes, verify checks bytes. */
START_TEST(plan_balance_bytes) {
  fx_seed_cluster("p-bal");
  seed_sizes_as("p-bal", skewed);
  cJSON *j = fx_json(0, "p-bal", "plan --balance tokens");
  ck_assert_int_eq((int)fx_num(j, "moves_total"), 0); /* balanced by tokens already */
  cJSON_Delete(j);
  j = fx_json(0, "p-bal", "plan --balance bytes");
  int moves = (int)fx_num(j, "moves_total");
  ck_assert_int_gt(moves, 0);
  ck_assert_int_ge(moves, (int)fx_num(j, "lower_bound"));
  const cJSON *m;
  int from_n0 = 0, to_n0 = 0;
  cJSON_ArrayForEach(m, fx_get(j, "moves")) {
    from_n0 += strcmp(fx_str(m, "from"), "n0") == 0;
    to_n0 += strcmp(fx_str(m, "to"), "n0") == 0;
  }
  ck_assert_int_gt(from_n0, 0); /* the node with the big arcs gives some up */
  ck_assert_int_eq(to_n0, 0);
  /* each node's bytes before, after and target: n0 comes down toward its
   * target, and no byte is made or lost */
  const cJSON *bb = fx_get(j, "bytes_balance"), *n0 = fx_get(bb, "n0"), *nb;
  ck_assert_double_gt(fx_num(n0, "before"), fx_num(n0, "target"));
  ck_assert_double_lt(fabs(fx_num(n0, "after") - fx_num(n0, "target")),
                      fabs(fx_num(n0, "before") - fx_num(n0, "target")));
  double before = 0, after = 0;
  int nodes = 0;
  cJSON_ArrayForEach(nb, bb) {
    before += fx_num(nb, "before");
    after += fx_num(nb, "after");
    nodes++;
  }
  ck_assert_int_eq(nodes, FX_NODES);
  ck_assert_double_eq_tol(before, after, FX_NODES);
  /* n0 must shed bytes: the bound says how many at least (ring_plan_verify
   * and the planner's property tests hold the moves to it) */
  ck_assert_double_gt(fx_num(j, "bytes_bound"), 0);
  ck_assert_double_le(fx_num(j, "bytes_bound"), before);
  cJSON_Delete(j);
  j = fx_json(0, "p-bal", "plan --balance tokens"); /* only plans by bytes carry them */
  ck_assert_ptr_null(cJSON_GetObjectItem(j, "bytes_balance"));
  cJSON_Delete(j);
  FX_EXPECT_IN(0, out, "BYTES TARGET", "p-bal", "plan --balance bytes");
  FX_EXPECT_IN(0, out, "furthest from byte target", "p-bal", "plan --balance bytes");
  FX_EXPECT_IN(0, out, "no plan ending as close moves under", "p-bal", "plan --balance bytes");
  fx_run tok = fx_ringctl("p-bal", "plan --balance tokens");
  ck_assert_int_eq(tok.code, 0);
  ck_assert_ptr_null(strstr(tok.out, "BYTES TARGET"));
  fx_free(&tok);
  FX_EXPECT_IN(0, out, "the config balances tokens", "p-bal", "plan --balance bytes");
  char path[400];
  plan_path(path, sizeof path, "bal");
  FX_EXPECT(0, "p-bal", "plan --balance bytes -o %s", path);
  FX_EXPECT(0, "p-bal", "apply %s", path);
  char *active = fx_value("p-bal", "plan/active");
  ck_assert_ptr_nonnull(strstr(active, "\"balance\":\"bytes\",\"arc_sizes\":"));
  free(active);
  FX_EXPECT_IN(2, err, "not tokens or bytes", "p-bal", "plan --balance weight");

  /* under config balance bytes, verify weighs the live table: n0 holds 40x */
  FX_EXPECT_IN(0, out, "balance: tokens", "p-bal", "balance");
  FX_EXPECT_IN(0, out, "balance: bytes", "p-bal", "balance bytes");
  fx_run r = fx_ringctl("p-bal", "verify");
  ck_assert_int_eq(r.code, 1);
  ck_assert_msg(strstr(r.out, "node n0 holds") != NULL, "%s", r.out);
  fx_free(&r);
  char *config = fx_value("p-bal", "config");
  ck_assert_ptr_nonnull(strstr(config, "\"balance\":\"bytes\""));
  free(config);

  /* n0 and n1 report nothing: the tokens only they own have no size */
  for (int i = 0; i < 2; i++) {
    char key[RK_KEY_MAX];
    snprintf(key, sizeof key, "/ringkeeper/p-bal/sizes/n%d", i);
    ck_assert_int_eq(ring_etcd_delete(fx_client, key, strlen(key), false, NULL, NULL, NULL),
                     RING_OK);
  }
  FX_EXPECT_IN(1, err, "sizes known for", "p-bal", "plan --balance bytes");
  FX_EXPECT_IN(0, out, "bytes balance not checked", "p-bal", "verify");
}
END_TEST

START_TEST(plan_json_and_text) {
  fx_seed_cluster("p-json");
  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("p-json", "n6", "z0", id);
  cJSON *j = fx_json(0, "p-json", "plan");
  ck_assert_str_eq(fx_str(j, "id"), id);
  ck_assert_int_eq((int)fx_num(j, "base_version"), 1);
  int total = (int)fx_num(j, "moves_total");
  ck_assert_int_gt(total, 0);
  ck_assert_int_le((int)fx_num(j, "lower_bound"), total);
  ck_assert_int_ge((int)fx_num(j, "waves"), 1);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "violations")), 0);
  const cJSON *moves = fx_get(j, "moves"), *m;
  ck_assert_int_eq(cJSON_GetArraySize(moves), total);
  int to_new = 0;
  cJSON_ArrayForEach(m, moves) {
    ck_assert_int_lt((int)fx_num(m, "token"), FX_TOKENS);
    ck_assert_int_lt((int)fx_num(m, "slot"), FX_REPLICAS);
    to_new += strcmp(fx_str(m, "to"), "n6") == 0;
    ck_assert_str_ne(fx_str(m, "from"), "n6"); /* the new node only gains */
    ck_assert_ptr_nonnull(fx_str(m, "source"));
  }
  ck_assert_int_ge(to_new, FX_TOKENS * FX_REPLICAS / (FX_NODES + 1));
  cJSON_Delete(j);
  fx_run r = fx_ringctl("p-json", "plan");
  ck_assert_int_eq(r.code, 0);
  ck_assert_ptr_nonnull(strstr(r.out, id));
  ck_assert_ptr_nonnull(strstr(r.out, "lower bound"));
  ck_assert_ptr_nonnull(strstr(r.out, "unknown (no arc sizes"));
  ck_assert_ptr_nonnull(strstr(r.out, "n6"));
  fx_free(&r);
}
END_TEST

/* ------------------------------------------------------------------- apply */

START_TEST(apply_file_then_stale) {
  char id[RK_PLAN_ID_LEN + 1], path[400];
  save_proposal("p-file", "z1", id, path, sizeof path);
  char *saved = fx_slurp_file(path);
  cJSON *doc = cJSON_Parse(saved);
  ck_assert_ptr_nonnull(doc);
  ck_assert_str_eq(fx_str(doc, "id"), id);
  ck_assert_int_eq((int)fx_num(doc, "base_version"), 1);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(doc, "moves")), (int)fx_num(doc, "moves_total"));
  ck_assert_int_eq(strncmp(fx_str(doc, "digest"), "xxh3-128:", 9), 0);
  cJSON_Delete(doc);
  free(saved);

  fx_run r = fx_ringctl("p-file", "apply %s", path);
  ck_assert_msg(r.code == 0, "%s", r.err);
  ck_assert_ptr_nonnull(strstr(r.out, id));
  fx_free(&r);
  rk_run run = read_active("p-file");
  ck_assert_str_eq(run.plan.id, id);
  ck_assert_int_eq(run.state, RK_RUN_ACTIVE);
  ck_assert_uint_eq(run.cursor.moves_done, 0);
  rk_run_free(&run);
  FX_EXPECT_IN(3, err, "already active", "p-file", "apply %s", path); /* one at a time */
  FX_EXPECT_IN(3, err, "ringctl wait", "p-file", "apply %s", path);   /* the same plan */

  delete_key("p-file", "plan/active"); /* the coordinator ran it: version 2 */
  fx_bump_version("p-file", 2);
  FX_EXPECT_IN(3, err, "plan base version 1, cluster is at version 2", "p-file", "apply %s", path);
  fx_assert_absent("p-file", "plan/active");
}
END_TEST

/* Rewrites the plan file at path through edit. */
static void edit_plan_file(const char *path, void (*edit)(cJSON *doc)) {
  char *text = fx_slurp_file(path);
  cJSON *doc = cJSON_Parse(text);
  free(text);
  ck_assert_ptr_nonnull(doc);
  edit(doc);
  char *out = cJSON_PrintUnformatted(doc);
  FILE *f = fopen(path, "w");
  fputs(out, f);
  fclose(f);
  free(out);
  cJSON_Delete(doc);
}

/* input.nodes[0].weight = 2: the input changed, so the digest fails. */
static void heavier_first_node(cJSON *doc) {
  cJSON *node =
      cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "input"), "nodes"), 0);
  cJSON_ReplaceItemInObject(node, "weight", cJSON_CreateNumber(2.0));
}

static void tamper(const char *path) { edit_plan_file(path, heavier_first_node); }

/* moves[0] goes to another node: input and digest intact. */
static void move_elsewhere(cJSON *doc) {
  cJSON *move = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "moves"), 0);
  ck_assert_ptr_nonnull(move);
  cJSON *to = cJSON_GetObjectItem(move, "to");
  ck_assert_msg(cJSON_IsString(to), "a move names its receiver by id");
  cJSON_SetValuestring(to, strcmp(to->valuestring, "n0") == 0 ? "n1" : "n0");
}

START_TEST(apply_tampered_or_garbage_file) {
  char id[RK_PLAN_ID_LEN + 1], path[400];
  save_proposal("p-tamper", "z2", id, path, sizeof path);
  tamper(path);
  FX_EXPECT_IN(1, err, "digest", "p-tamper", "apply %s", path);
  FILE *f = fopen(path, "w");
  fputs("{\"format\":\"something.else\"}", f);
  fclose(f);
  FX_EXPECT_IN(1, err, "is not a plan", "p-tamper", "apply %s", path);
  fx_assert_absent("p-tamper", "plan/active");
}
END_TEST

/* A plan file whose moves were edited (its input and digest intact) is
 * refused, not run with the recomputed moves in silence. */
START_TEST(apply_edited_moves_refused) {
  char id[RK_PLAN_ID_LEN + 1], path[400];
  save_proposal("p-moves", "z1", id, path, sizeof path);
  edit_plan_file(path, move_elsewhere);
  FX_EXPECT_IN(1, err, "\"moves\" are not the moves plan", "p-moves", "apply %s", path);
  fx_assert_absent("p-moves", "plan/active");
}
END_TEST

START_TEST(apply_by_id) {
  fx_seed_cluster("p-id");
  FX_EXPECT(1, "p-id", "apply"); /* nothing proposed */
  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("p-id", "n6", "z0", id);
  FX_EXPECT_IN(3, err, "not the proposed plan", "p-id", "apply 0123456789abcdef");
  FX_EXPECT(1, "p-id", "apply no-such-file.json");
  FX_EXPECT(0, "p-id", "apply %s", id);
  rk_run run = read_active("p-id");
  ck_assert_str_eq(run.plan.id, id);
  rk_run_free(&run);
  FX_EXPECT(3, "p-id", "apply %s", id);
}
END_TEST

START_TEST(apply_stale_proposal) {
  fx_seed_cluster("p-stale");
  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("p-stale", "n6", "z0", id);
  fx_bump_version("p-stale", 2); /* the table moved on before the new proposal */
  FX_EXPECT_IN(3, err, "plan base version 1, cluster is at version 2", "p-stale", "apply");
}
END_TEST

/* ----------------------------------------------------------------- what-if */

START_TEST(what_if_add_and_remove) {
  fx_seed_cluster("p-whatif");
  cJSON *j = fx_json(0, "p-whatif", "plan --what-if add=n9,zone=z1,rack=r1,weight=2");
  ck_assert_int_gt((int)fx_num(j, "moves_total"), 0);
  const cJSON *m;
  int to_new = 0;
  cJSON_ArrayForEach(m, fx_get(j, "moves")) to_new += strcmp(fx_str(m, "to"), "n9") == 0;
  ck_assert_int_gt(to_new, 0);
  cJSON_Delete(j);
  j = fx_json(0, "p-whatif", "plan --what-if remove=n0");
  int total = (int)fx_num(j, "moves_total");
  int from_n0 = 0;
  cJSON_ArrayForEach(m, fx_get(j, "moves")) {
    from_n0 += strcmp(fx_str(m, "from"), "n0") == 0;
    ck_assert_str_ne(fx_str(m, "to"), "n0");
  }
  ck_assert_int_ge(from_n0, FX_TOKENS * FX_REPLICAS / FX_NODES); /* all of n0's share */
  ck_assert_int_ge(total, from_n0);
  cJSON_Delete(j);
  FX_EXPECT_IN(1, err, "unknown node nx", "p-whatif", "plan --what-if remove=nx");
  FX_EXPECT(1, "p-whatif", "plan --what-if add=n1,zone=z0"); /* exists */
  FX_EXPECT_IN(0, out, "what-if", "p-whatif", "plan --what-if add=n9,zone=z1 --what-if remove=n0");
  fx_assert_absent("p-whatif", "plan/proposed"); /* nothing written */
}
END_TEST

START_TEST(what_if_fail_zone) {
  fx_seed_cluster("p-fail");
  cJSON *j = fx_json(0, "p-fail", "plan --what-if fail=zone:z0");
  const cJSON *w = fx_get(j, "what_if");
  /* test_table_rr: token t's owners are nodes 2t%6 and (2t+1)%6; z0 holds
   * n0 and n3, so tokens t%3 == 0 (n0 primary) and t%3 == 1 (n3) degrade. */
  int want = 0;
  for (int t = 0; t < FX_TOKENS; t++)
    want += t % 3 != 2;
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(w, "degraded")), want);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(w, "lost")), 0);
  ck_assert_int_eq((int)cJSON_GetArrayItem(fx_get(w, "degraded"), 1)->valuedouble, 1);
  const cJSON *m;
  cJSON_ArrayForEach(m, fx_get(j, "moves")) {
    const char *from = fx_str(m, "from");
    ck_assert(strcmp(from, "n0") == 0 || strcmp(from, "n3") == 0);
  }
  cJSON_Delete(j);
  fx_run r = fx_ringctl("p-fail", "plan --what-if fail=zone:z0");
  ck_assert_int_eq(r.code, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "would lose a replica"));
  ck_assert_ptr_nonnull(strstr(r.out, "0-1, 3-4"));
  fx_free(&r);
  FX_EXPECT(1, "p-fail", "plan --what-if fail=zone:z9"); /* no such zone */
}
END_TEST

/* -------------------------------------------------------------------- runs */

START_TEST(pause_resume_cancel) {
  fx_seed_cluster("p-run");
  FX_EXPECT_IN(1, err, "no plan is active", "p-run", "pause");
  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("p-run", "n6", "z0", id);
  FX_EXPECT(0, "p-run", "apply");
  FX_EXPECT(0, "p-run", "pause");
  rk_run run = read_active("p-run");
  ck_assert_int_eq(run.state, RK_RUN_PAUSED);
  rk_run_free(&run);
  FX_EXPECT_IN(0, out, "already paused", "p-run", "pause");
  cJSON *j = fx_json(0, "p-run", "status");
  ck_assert_str_eq(fx_str(fx_get(j, "plan"), "state"), "paused");
  cJSON_Delete(j);
  FX_EXPECT(0, "p-run", "resume");
  run = read_active("p-run");
  ck_assert_int_eq(run.state, RK_RUN_ACTIVE);
  rk_run_free(&run);
  FX_EXPECT(0, "p-run", "cancel");
  run = read_active("p-run");
  ck_assert_int_eq(run.state, RK_RUN_CANCELLING);
  ck_assert_str_eq(run.plan.id, id);
  rk_run_free(&run);
  FX_EXPECT(1, "p-run", "resume"); /* a cancelling run stays cancelling */
  FX_EXPECT(1, "p-run", "pause");
  FX_EXPECT(0, "p-run", "cancel");
}
END_TEST

/* ------------------------------------------------------ history and --wait */

START_TEST(history_lists_finished_runs) {
  fx_seed_cluster("p-hist");
  cJSON *j = fx_json(0, "p-hist", "history");
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "plans")), 0);
  cJSON_Delete(j);
  char id[RK_PLAN_ID_LEN + 1];
  fx_propose_add("p-hist", "n6", "z0", id);
  FX_EXPECT(0, "p-hist", "apply");
  delete_key("p-hist", "plan/proposed");
  rk_run run = read_active("p-hist");
  finish_run("p-hist", &run, RK_RUN_CANCELLED, "cancelled by the operator");
  rk_run_free(&run);
  j = fx_json(0, "p-hist", "history");
  const cJSON *p = cJSON_GetArrayItem(fx_get(j, "plans"), 0);
  ck_assert_str_eq(fx_str(p, "id"), id);
  ck_assert_str_eq(fx_str(p, "state"), "cancelled");
  ck_assert_str_eq(fx_str(p, "reason"), "cancelled by the operator");
  ck_assert_int_eq((int)fx_num(p, "base_version"), 1);
  cJSON_Delete(j);
  j = fx_json(0, "p-hist", "status"); /* nothing active or proposed: the last run */
  ck_assert_str_eq(fx_str(fx_get(j, "plan"), "state"), "cancelled");
  cJSON_Delete(j);
  FX_EXPECT_IN(0, out, id, "p-hist", "history");
}
END_TEST

/* Plays the coordinator for --wait: half the moves done, then the end. */
typedef struct ender {
  const char *cluster;
  rk_run_state end;
  bool pause; /* paused while half done */
} ender;

static char last_id[RK_PLAN_ID_LEN + 1]; /* apply_and_wait's plan */

/* Whether <cluster>/<what> holds a value. */
static bool has_value(const char *cluster, const char *what) {
  char *v = fx_value(cluster, what);
  bool there = v[0] != '\0';
  free(v);
  return there;
}

static void *end_run(void *ud) {
  const ender *e = ud;
  ck_assert_msg(HARNESS_WAIT(has_value(e->cluster, "plan/active"), 15),
                "ringctl apply started no run");
  rk_run run = read_active(e->cluster);
  set_done(&run, run.plan.moves_total / 2);
  if (e->pause)
    run.state = RK_RUN_PAUSED;
  char *json;
  size_t len;
  ck_assert_int_eq(rk_run_encode(&run, &json, &len), RING_OK);
  fx_put_owned(e->cluster, "plan/active", json, len);
  /* pacing the part it plays: a run half done for a while, as a real one
   * is, so that --wait has a progress line to print (its output is only
   * read once it exits) */
  harness_sleep_ms(700);
  run.state = RK_RUN_ACTIVE;
  finish_run(e->cluster, &run, e->end, e->end == RK_RUN_DONE ? "" : "receiver n6 went down");
  rk_run_free(&run);
  return NULL;
}

static fx_run apply_and_wait_paused(const char *cluster, rk_run_state end, bool tty, bool pause) {
  fx_seed_cluster(cluster);
  char *id = last_id;
  fx_propose_add(cluster, "n6", "z0", id);
  ender e = {cluster, end, pause};
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, end_run, &e), 0);
  char args[64];
  snprintf(args, sizeof args, "apply %s --wait", id);
  fx_run r = tty ? fx_ringctl_tty(cluster, args) : fx_ringctl(cluster, "%s", args);
  pthread_join(th, NULL);
  return r;
}

static fx_run apply_and_wait(const char *cluster, rk_run_state end, bool tty) {
  return apply_and_wait_paused(cluster, end, tty, false);
}

START_TEST(apply_wait_done) {
  fx_run r = apply_and_wait("p-wait", RK_RUN_DONE, false);
  ck_assert_msg(r.code == 0, "%s %s", r.out, r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "done"));
  ck_assert_ptr_nonnull(strstr(r.out, "moves")); /* progress lines: not a terminal */
  ck_assert_ptr_null(strstr(r.out, "\r"));
  fx_free(&r);
}
END_TEST

/* A paused run shows no ETA; bytes in one unit; `ringctl wait ID` reads
 * how a run that ended elsewhere ended. */
START_TEST(apply_wait_paused_then_wait) {
  fx_run r = apply_and_wait_paused("p-wait-pause", RK_RUN_DONE, false, true);
  ck_assert_msg(r.code == 0, "%s %s", r.out, r.err);
  ck_assert_msg(strstr(r.out, "paused, wave") && strstr(r.out, "no ETA while paused"), "%s", r.out);
  ck_assert_msg(strstr(r.out, "iB/") == NULL && strstr(r.out, " B/") == NULL, "two units: %s",
                r.out);
  ck_assert_msg(strstr(r.out, "1 move in") || strstr(r.out, "moves in"), "%s", r.out);
  ck_assert_msg(strstr(r.out, " 1 waves") == NULL, "%s", r.out);
  fx_free(&r);
  FX_EXPECT_IN(0, out, " done: ", "p-wait-pause", "wait %s", last_id);
  FX_EXPECT_IN(1, err, "no plan is active", "p-wait-pause", "wait");
  FX_EXPECT_IN(2, err, "not a plan id", "p-wait-pause", "wait 12");
}
END_TEST

START_TEST(apply_wait_failed) {
  fx_run r = apply_and_wait("p-wait-fail", RK_RUN_FAILED, false);
  ck_assert_int_eq(r.code, 1);
  ck_assert_ptr_nonnull(strstr(r.out, "failed"));
  ck_assert_ptr_nonnull(strstr(r.out, "receiver n6 went down"));
  fx_free(&r);
}
END_TEST

START_TEST(apply_wait_progress_bar) {
  if (system("command -v script >/dev/null 2>&1") != 0)
    return; /* no util-linux script: no pseudo-terminal to draw on */
  fx_run r = apply_and_wait("p-wait-tty", RK_RUN_DONE, true);
  ck_assert_msg(r.code == 0, "%s %s", r.out, r.err);
  ck_assert_ptr_nonnull(strstr(r.out, "\r\033[K[")); /* redrawn in place */
  ck_assert_ptr_nonnull(strstr(r.out, "moves"));
  ck_assert_ptr_nonnull(strstr(r.out, "ETA"));
  ck_assert_ptr_nonnull(strstr(r.out, "done"));
  fx_free(&r);
}
END_TEST

int main(void) {
  const TTest *const tests[] = {plan_nothing_proposed,       plan_json_and_text,
                                apply_file_then_stale,       apply_tampered_or_garbage_file,
                                apply_edited_moves_refused,  apply_by_id,
                                apply_stale_proposal,        what_if_add_and_remove,
                                what_if_fail_zone,           pause_resume_cancel,
                                history_lists_finished_runs, apply_wait_done,
                                apply_wait_failed,           apply_wait_paused_then_wait,
                                apply_wait_progress_bar,     plan_bytes_and_eta,
                                plan_balance_bytes};
  return fx_main("ringctl_plan", tests, sizeof tests / sizeof tests[0]);
}
