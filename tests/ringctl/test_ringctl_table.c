/*
 * test_ringctl_table.c: ringctl commands that read the live table, against
 * real etcd: lookup (owners and pending owners), verify (a good and a bad
 * table, a table that disagrees with the version key), render --svg (a
 * well-formed picture).
 *
 * Sections: helpers; lookup; verify; render.
 */
#include "ringctl_fixture.h"

/* ----------------------------------------------------------------- helpers */

/* The seeded table at version v with a change: token `token` slot `slot`
 * owned by (or, pending, moving to) node `node`. Published as live. */
static void publish_changed(const char *cluster, uint64_t v, uint32_t token, uint32_t slot,
                            uint16_t node, bool pending) {
  ring_table *t = fx_table(cluster, FX_TOKENS, FX_REPLICAS, FX_NODES, FX_ZONES, v);
  if (pending)
    ck_assert_int_eq(ring_table_add_pending(t, token, slot, node), RING_OK);
  else
    ck_assert_int_eq(ring_table_set_owner(t, token, slot, node), RING_OK);
  ring_error err = {0};
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  fx_seed_table(cluster, t);
  ring_table_free(t);
}

/* ------------------------------------------------------------------ lookup */

START_TEST(lookup_owners_and_pending) {
  fx_seed_config("t-lookup", FX_TOKENS, FX_REPLICAS);
  FX_EXPECT(1, "t-lookup", "lookup user-42"); /* no table yet */
  fx_seed_cluster("t-lookup");
  ring_table *t = fx_table("t-lookup", FX_TOKENS, FX_REPLICAS, FX_NODES, FX_ZONES, 1);
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  uint32_t token = ring_table_token(t, "user-42", 7);
  cJSON *j = fx_json(0, "t-lookup", "lookup user-42");
  static const char *const fields[] = {"key", "token", "version", "owners", "pending"};
  fx_fields(j, fields, 5);
  ck_assert_str_eq(fx_str(j, "key"), "user-42");
  ck_assert_uint_eq((uint32_t)fx_num(j, "token"), token);
  ck_assert_int_eq((int)fx_num(j, "version"), 1);
  const cJSON *owners = fx_get(j, "owners");
  ck_assert_int_eq(cJSON_GetArraySize(owners), FX_REPLICAS);
  for (uint32_t r = 0; r < FX_REPLICAS; r++)
    ck_assert_str_eq(cJSON_GetArrayItem(owners, (int)r)->valuestring,
                     ring_table_node_id(t, ring_table_owner(t, token, r)));
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "pending")), 0);
  cJSON_Delete(j);

  /* Version 2 moves slot 1 of that token to a node that does not own it. */
  uint16_t to = 0;
  while (to == ring_table_owner(t, token, 0) || to == ring_table_owner(t, token, 1) ||
         strcmp(ring_table_node_label(t, to, "zone"),
                ring_table_node_label(t, ring_table_owner(t, token, 0), "zone")) == 0)
    to++;
  publish_changed("t-lookup", 2, token, 1, to, true);
  j = fx_json(0, "t-lookup", "lookup user-42");
  ck_assert_int_eq((int)fx_num(j, "version"), 2);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "pending")), 1);
  ck_assert_str_eq(cJSON_GetArrayItem(fx_get(j, "pending"), 0)->valuestring,
                   ring_table_node_id(t, to));
  cJSON_Delete(j);
  fx_run r = fx_ringctl("t-lookup", "lookup user-42");
  ck_assert_int_eq(r.code, 0);
  ck_assert_ptr_nonnull(strstr(r.out, "pending:"));
  ck_assert_ptr_nonnull(strstr(r.out, ring_table_node_id(t, to)));
  fx_free(&r);
  ring_table_free(t);
}
END_TEST

/* ------------------------------------------------------------------ verify */

/* verify's exit code, text and JSON agree: ok, or violations listed. */
static void expect_verify(const char *cluster, bool ok) {
  FX_EXPECT_IN(ok ? 0 : 1, out, ok ? "every invariant holds" : "violation:", cluster, "verify");
  cJSON *j = fx_json(ok ? 0 : 1, cluster, "verify");
  ck_assert(cJSON_IsBool(fx_get(j, "ok")) && cJSON_IsTrue(fx_get(j, "ok")) == ok);
  ck_assert_int_eq(cJSON_GetArraySize(fx_get(j, "violations")) == 0, ok);
  cJSON_Delete(j);
}

START_TEST(verify_good_table) {
  fx_seed_cluster("t-good");
  expect_verify("t-good", true);
}
END_TEST

START_TEST(verify_bad_table) {
  fx_seed_cluster("t-bad");
  /* Token 0 is n0 (z0) and n1 (z1); make slot 1 n3, also in z0. */
  publish_changed("t-bad", 2, 0, 1, 3, false);
  expect_verify("t-bad", false);
}
END_TEST

START_TEST(verify_table_disagrees_with_config) {
  fx_seed_cluster("t-disagree");
  fx_seed_config("t-disagree", FX_TOKENS * 2, FX_REPLICAS); /* T changed under the table */
  FX_EXPECT_IN(1, out, "tokens", "t-disagree", "verify");
}
END_TEST

/* ------------------------------------------------------------------ render */

/* A strict well-formedness check of the subset of XML render writes: every
 * tag closes in order, quotes balance inside tags, one root element. */
static void check_xml(const char *s) {
  const char *stack[64];
  int depth = 0, roots = 0;
  for (const char *p = strchr(s, '<'); p != NULL; p = strchr(p, '<')) {
    const char *end = strchr(p, '>');
    ck_assert_msg(end != NULL, "unclosed tag at %.40s", p);
    int quotes = 0;
    for (const char *q = p; q < end; q++)
      quotes += *q == '"';
    ck_assert_msg(quotes % 2 == 0, "unbalanced quotes in %.60s", p);
    if (p[1] == '?') {
      ck_assert_msg(end[-1] == '?', "bad declaration");
    } else if (p[1] == '/') {
      ck_assert_msg(depth > 0, "stray %.40s", p);
      size_t n = strcspn(p + 2, " >");
      ck_assert_msg(strncmp(stack[--depth], p + 2, n) == 0 && stack[depth][n] == '\0',
                    "</%.*s> closes <%s>", (int)n, p + 2, stack[depth]);
    } else if (end[-1] != '/') {
      ck_assert_int_lt(depth, 64);
      static char names[64][32];
      size_t n = strcspn(p + 1, " >/");
      ck_assert_uint_lt(n, 32);
      memcpy(names[depth], p + 1, n);
      names[depth][n] = '\0';
      roots += depth == 0;
      stack[depth] = names[depth];
      depth++;
    } else {
      roots += depth == 0;
    }
    p = end + 1;
  }
  ck_assert_int_eq(depth, 0);
  ck_assert_int_eq(roots, 1);
}

START_TEST(render_svg_well_formed) {
  fx_seed_config("t-render", FX_TOKENS, FX_REPLICAS);
  char path[400];
  snprintf(path, sizeof path, "%s/ring.svg", fx_etcd.base);
  FX_EXPECT(1, "t-render", "render --svg %s", path); /* no table yet */
  fx_seed_cluster("t-render");
  publish_changed("t-render", 2, 5, 0, 0, true); /* n4 -> n0 */
  FX_EXPECT(0, "t-render", "render --svg %s", path);
  char *svg = fx_slurp_file(path);
  check_xml(svg);
  ck_assert_ptr_nonnull(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  ck_assert_ptr_nonnull(strstr(svg, "<path d=\"M"));
  ck_assert_ptr_nonnull(strstr(svg, ">n5 (z2) "));                      /* the legend */
  ck_assert_ptr_nonnull(strstr(svg, "<title>1 pending moves</title>")); /* the mark */
  ck_assert_uint_lt(strlen(svg), 64 * 1024); /* 64 sectors, not T*R slices */
  free(svg);
  if (system("command -v xmllint >/dev/null 2>&1") == 0) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
  }
  /* load of the live table, --json says where and how much */
  snprintf(path, sizeof path, "%s/load.svg", fx_etcd.base);
  cJSON *j = fx_json(0, "t-render", "render --what load --svg %s --json", path);
  ck_assert_str_eq(cJSON_GetObjectItem(j, "file")->valuestring, path);
  ck_assert_str_eq(cJSON_GetObjectItem(j, "what")->valuestring, "load");
  svg = fx_slurp_file(path);
  ck_assert_double_eq(cJSON_GetObjectItem(j, "bytes")->valuedouble, (double)strlen(svg));
  ck_assert_ptr_nonnull(strstr(svg, ">n5<"));
  cJSON_Delete(j);
  free(svg);
  FX_EXPECT_IN(1, err, "no plan is proposed", "t-render", "render --what flow --svg %s", path);
  FX_EXPECT_IN(2, err, "--what", "t-render", "render --what pie");
  FX_EXPECT_IN(2, err, "not both", "t-render", "render --plan x.json --proposed");
  FX_EXPECT_IN(1, err, "cannot read plan file", "t-render", "render --plan /nonexistent.json");
  FX_EXPECT(1, "t-render", "render --svg /nonexistent-dir/ring.svg");
}
END_TEST

int main(void) {
  const TTest *const tests[] = {lookup_owners_and_pending, verify_good_table, verify_bad_table,
                                verify_table_disagrees_with_config, render_svg_well_formed};
  return fx_main("ringctl_table", tests, sizeof tests / sizeof tests[0]);
}
