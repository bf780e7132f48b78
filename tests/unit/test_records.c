/*
 * test_records.c: the etcd value codecs of proto/etcd.md (records.h): key
 * names; config, node, alive, progress (with failing fetches), leader,
 * loss and stuck records: the documented
 * examples decode, encoding is canonical (decode + encode gives the same
 * bytes), and every validation error has its code, names its field and
 * leaves the output untouched.
 */
#include "records.h"
#include "json_edit.h"
#include "check_main.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* A decoder run through a poisoned output that must survive a failure. */
typedef int (*decode_fn)(const char *json, size_t len, ring_error *err);

#define CHECKED_DECODER(name, type, decode, release)                                               \
  static int name(const char *json, size_t len, ring_error *err) {                                 \
    type v, before;                                                                                \
    memset(&v, 0xa5, sizeof v);                                                                    \
    memcpy(&before, &v, sizeof v);                                                                 \
    int rc = decode(json, len, &v, err);                                                           \
    if (rc != RING_OK)                                                                             \
      ck_assert_msg(memcmp(&v, &before, sizeof v) == 0, "output written on failure");              \
    else                                                                                           \
      release;                                                                                     \
    return rc;                                                                                     \
  }

CHECKED_DECODER(dec_config, rk_config, rk_config_decode, (void)0)
CHECKED_DECODER(dec_node, rk_node, rk_node_decode, (void)0)
CHECKED_DECODER(dec_alive, rk_alive, rk_alive_decode, (void)0)
CHECKED_DECODER(dec_progress, rk_progress, rk_progress_decode, rk_progress_free(&v))
CHECKED_DECODER(dec_leader, rk_leader, rk_leader_decode, (void)0)
CHECKED_DECODER(dec_loss, rk_loss, rk_loss_decode, rk_loss_free(&v))
CHECKED_DECODER(dec_stuck, rk_stuck, rk_stuck_decode, rk_stuck_free(&v))
CHECKED_DECODER(dec_missing, rk_missing, rk_missing_decode, rk_missing_free(&v))

/* Decodes text from an exact-size copy (no NUL after it: ASan sees any
 * read past len) and checks the code and a fragment of the message. */
static void expect(decode_fn fn, const char *text, int code, const char *fragment) {
  size_t n = strlen(text);
  char *copy = malloc(n ? n : 1);
  memcpy(copy, text, n);
  ring_error err = {0};
  int rc = fn(copy, n, &err);
  free(copy);
  ck_assert_msg(rc == code, "want %s, got %s (%s) for %.300s", ring_strerror(code),
                ring_strerror(rc), err.message, text);
  if (code == RING_OK)
    return;
  ck_assert_int_eq(err.code, code);
  ck_assert_msg(strstr(err.message, fragment) != NULL, "message \"%s\" lacks \"%s\"", err.message,
                fragment);
}

/* good with the field at `path` ("a" or "a.b") set to raw (NULL: removed). */
static void expect_edit(decode_fn fn, const char *good, const char *path, const char *raw, int code,
                        const char *fragment) {
  cJSON *root = cJSON_Parse(good);
  ck_assert_ptr_nonnull(root);
  cJSON *obj = root;
  char name[64];
  snprintf(name, sizeof name, "%s", path);
  char *dot = strchr(name, '.');
  if (dot) {
    *dot = '\0';
    obj = cJSON_GetObjectItemCaseSensitive(root, name);
    ck_assert_ptr_nonnull(obj);
    memmove(name, dot + 1, strlen(dot + 1) + 1);
  }
  json_set_raw(obj, name, raw);
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  expect(fn, text, code, fragment);
  free(text);
}

static char *copy_of(const char *s) {
  char *c = malloc(strlen(s) + 1);
  strcpy(c, s);
  return c;
}

/* ------------------------------------------------------------------- keys */

START_TEST(keys) {
  char key[RK_KEY_MAX];
  ck_assert_int_eq(rk_key(key, "demo", "version"), (int)strlen("/ringkeeper/demo/version"));
  ck_assert_str_eq(key, "/ringkeeper/demo/version");
  ck_assert_int_gt(rk_key2(key, "demo", "nodes/", "n1"), 0);
  ck_assert_str_eq(key, "/ringkeeper/demo/nodes/n1");
  ck_assert_int_gt(rk_key_version(key, "demo", "tables/", 9007199254740991ull), 0);
  ck_assert_str_eq(key, "/ringkeeper/demo/tables/9007199254740991");
  char id[64];
  memset(id, 'a', 63);
  id[63] = '\0';
  ck_assert_int_gt(rk_key2(key, id, "plan/history/", id), 0); /* the longest real key fits */
  char big[200];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ck_assert_int_eq(rk_key(key, "demo", big), RING_EINVAL);
  ck_assert_int_eq(rk_key(key, NULL, "version"), RING_EINVAL);
}
END_TEST

/* ----------------------------------------------------------------- config */

/* Field by field: structs have padding that memcmp would see. */
static void config_eq(const rk_config *a, const rk_config *b) {
  ck_assert_uint_eq(a->tokens, b->tokens);
  ck_assert_uint_eq(a->replicas, b->replicas);
  ck_assert_uint_eq(a->seed, b->seed);
  ck_assert_str_eq(a->failure_domain, b->failure_domain);
  ck_assert_str_eq(a->best_effort, b->best_effort);
  ck_assert_int_eq(a->migration, b->migration);
  ck_assert_uint_eq(a->down_after_ms, b->down_after_ms);
  ck_assert_int_eq(a->auto_apply, b->auto_apply);
  ck_assert_uint_eq(a->throttle.moves_per_node, b->throttle.moves_per_node);
  ck_assert_uint_eq(a->throttle.moves_per_domain, b->throttle.moves_per_domain);
  ck_assert_uint_eq(a->throttle.moves_per_wave, b->throttle.moves_per_wave);
  ck_assert_uint_eq(a->throttle.bytes_per_sec, b->throttle.bytes_per_sec);
  ck_assert_uint_eq(a->keep_versions, b->keep_versions);
  ck_assert_uint_eq(a->keep_plans, b->keep_plans);
}

static const char config_doc[] =
    "{\"format\":\"ringkeeper.config.v1\",\"tokens\":16384,\"replicas\":3,\"seed\":0,"
    "\"failure_domain\":\"zone\",\"best_effort\":\"rack\",\"migration\":\"stream\","
    "\"down_after_ms\":60000,\"auto_apply\":\"repair\","
    "\"throttle\":{\"moves_per_node\":4,\"moves_per_domain\":0,\"moves_per_wave\":256,"
    "\"bytes_per_sec\":0},"
    "\"retention\":{\"versions\":16,\"plans\":32}}";

START_TEST(config_example_and_defaults) {
  rk_config c, d;
  ring_error err;
  ck_assert_msg(rk_config_decode(config_doc, strlen(config_doc), &c, &err) == RING_OK, "%s",
                err.message);
  rk_config_defaults(&d);
  ck_assert_int_eq(rk_config_validate(&d, &err), RING_OK);
  snprintf(d.failure_domain, sizeof d.failure_domain, "zone");
  snprintf(d.best_effort, sizeof d.best_effort, "rack");
  config_eq(&c, &d); /* the example is the defaults plus domains */
  char *json;
  size_t len;
  ck_assert_int_eq(rk_config_encode(&d, &json, &len), RING_OK);
  ck_assert_str_eq(json, config_doc);
  ck_assert_uint_eq(len, strlen(config_doc));
  free(json);
}
END_TEST

START_TEST(config_round_trip) {
  rk_config c;
  rk_config_defaults(&c);
  c.tokens = 64;
  c.replicas = 7;
  c.seed = 9007199254740991ull;
  c.migration = RK_MIGRATE_NONE;
  c.down_after_ms = 86400000;
  c.auto_apply = RK_AUTO_ALL;
  c.throttle = (rk_throttle){1, 2, 0, 9007199254740991ull};
  c.keep_versions = 2;
  c.keep_plans = 1;
  char *a, *b;
  size_t alen, blen;
  ck_assert_int_eq(rk_config_encode(&c, &a, &alen), RING_OK);
  rk_config d;
  ring_error err;
  ck_assert_msg(rk_config_decode(a, alen, &d, &err) == RING_OK, "%s", err.message);
  config_eq(&c, &d);
  ck_assert_int_eq(rk_config_encode(&d, &b, &blen), RING_OK);
  ck_assert_str_eq(a, b);
  ck_assert_ptr_nonnull(strstr(a, "\"migration\":\"none\""));
  ck_assert_ptr_nonnull(strstr(a, "\"auto_apply\":true"));
  ck_assert_str_eq(rk_migration_name(RK_MIGRATE_STREAM), "stream");
  free(a);
  free(b);
}
END_TEST

/* The policy's three values: none and all keep the field's first (boolean)
 * form, so older readers read them unchanged; repair is a string. */
START_TEST(config_auto_apply_policy) {
  static const char *const want[] = {"\"auto_apply\":false", "\"auto_apply\":\"repair\"",
                                     "\"auto_apply\":true"};
  for (int p = RK_AUTO_NONE; p <= RK_AUTO_ALL; p++) {
    rk_config c, d;
    rk_config_defaults(&c);
    c.auto_apply = (rk_auto_apply)p;
    char *a;
    size_t alen;
    ck_assert_int_eq(rk_config_encode(&c, &a, &alen), RING_OK);
    ck_assert_msg(strstr(a, want[p]) != NULL, "%s lacks %s", a, want[p]);
    ck_assert_int_eq(rk_config_decode(a, alen, &d, NULL), RING_OK);
    ck_assert_int_eq(d.auto_apply, p);
    ck_assert_int_eq(rk_auto_apply_parse(rk_auto_apply_name((rk_auto_apply)p)), p);
    free(a);
  }
  rk_config c;
  rk_config_defaults(&c);
  ck_assert_int_eq(c.auto_apply, RK_AUTO_REPAIR); /* ringctl init's default */
  c.auto_apply = (rk_auto_apply)3;
  ck_assert_int_eq(rk_config_validate(&c, NULL), RING_EFIELD);
  ck_assert_int_eq(rk_auto_apply_parse("some"), RING_EINVAL);
}
END_TEST

START_TEST(config_errors) {
  decode_fn f = dec_config;
  expect(f, config_doc, RING_OK, "");
  expect(f, "", RING_EJSON, "malformed JSON");
  expect(f, "[]", RING_EJSON, "top level");
  expect(f, "{\"format\":\"ringkeeper.config.v1\"} x", RING_EJSON, "malformed");
  expect_edit(f, config_doc, "format", "\"ringkeeper.config.v2\"", RING_EFORMAT, "format");
  expect_edit(f, config_doc, "format", NULL, RING_EFIELD, "format: missing");
  expect_edit(f, config_doc, "extra", "1", RING_EFIELD, "unknown field \"extra\"");
  expect_edit(f, config_doc, "tokens", "100", RING_ETOKENS, "tokens");
  expect_edit(f, config_doc, "tokens", "131072", RING_ETOKENS, "tokens");
  expect_edit(f, config_doc, "tokens", "\"64\"", RING_EFIELD, "tokens");
  expect_edit(f, config_doc, "replicas", "0", RING_EREPLICAS, "replicas");
  expect_edit(f, config_doc, "replicas", "8", RING_EREPLICAS, "replicas");
  expect_edit(f, config_doc, "seed", "-1", RING_EFIELD, "seed");
  expect_edit(f, config_doc, "seed", "9007199254740992", RING_EFIELD, "seed");
  expect_edit(f, config_doc, "failure_domain", "\"Zone\"", RING_EFIELD, "failure_domain");
  expect_edit(f, config_doc, "failure_domain", "7", RING_EFIELD, "failure_domain");
  expect_edit(f, config_doc, "best_effort", "\"zone\"", RING_EFIELD, "best_effort");
  expect_edit(f, config_doc, "migration", "\"copy\"", RING_EFIELD, "migration");
  expect_edit(f, config_doc, "down_after_ms", "999", RING_EFIELD, "down_after_ms");
  expect_edit(f, config_doc, "down_after_ms", "86400001", RING_EFIELD, "down_after_ms");
  expect_edit(f, config_doc, "auto_apply", "\"yes\"", RING_EFIELD, "auto_apply");
  expect_edit(f, config_doc, "auto_apply", "0", RING_EFIELD, "auto_apply");
  expect_edit(f, config_doc, "auto_apply", "\"none\"", RING_EFIELD, "auto_apply");
  expect_edit(f, config_doc, "auto_apply", "\"Repair\"", RING_EFIELD, "auto_apply");
  expect_edit(f, config_doc, "auto_apply", NULL, RING_EFIELD, "auto_apply: missing");
  expect_edit(f, config_doc, "throttle", NULL, RING_EFIELD, "throttle: missing");
  expect_edit(f, config_doc, "throttle", "[]", RING_EFIELD, "throttle");
  expect_edit(f, config_doc, "throttle.burst", "1", RING_EFIELD, "throttle: unknown field");
  expect_edit(f, config_doc, "throttle.moves_per_node", "-1", RING_EFIELD,
              "throttle.moves_per_node");
  expect_edit(f, config_doc, "throttle.moves_per_domain", "4294967296", RING_EFIELD,
              "throttle.moves_per_domain");
  expect_edit(f, config_doc, "throttle.moves_per_wave", NULL, RING_EFIELD,
              "throttle.moves_per_wave: missing");
  expect_edit(f, config_doc, "throttle.bytes_per_sec", "1.5", RING_EFIELD,
              "throttle.bytes_per_sec");
  expect_edit(f, config_doc, "retention.versions", "1", RING_EFIELD, "retention.versions");
  expect_edit(f, config_doc, "retention.plans", "0", RING_EFIELD, "retention.plans");
  expect(f,
         "{\"format\":\"ringkeeper.config.v1\",\"format\":\"ringkeeper.config.v1\","
         "\"tokens\":64}",
         RING_EFIELD, "given twice");
}
END_TEST

START_TEST(config_validate) {
  rk_config c;
  rk_config_defaults(&c);
  ring_error err;
  char *json = NULL;
  c.tokens = 96;
  ck_assert_int_eq(rk_config_validate(&c, &err), RING_ETOKENS);
  ck_assert_int_eq(rk_config_encode(&c, &json, NULL), RING_EINVAL);
  ck_assert_ptr_null(json);
  rk_config_defaults(&c);
  c.migration = (rk_migration)5;
  ck_assert_int_eq(rk_config_validate(&c, &err), RING_EFIELD);
  ck_assert_ptr_nonnull(strstr(err.message, "migration"));
  rk_config_defaults(&c);
  memset(c.failure_domain, 'a', sizeof c.failure_domain); /* no NUL */
  ck_assert_int_eq(rk_config_validate(&c, &err), RING_EFIELD);
  ck_assert_int_eq(rk_config_validate(NULL, &err), RING_EINVAL);
}
END_TEST

/* ------------------------------------------------------------ node records */

static const char node_doc[] =
    "{\"format\":\"ringkeeper.node.v1\",\"id\":\"n1\",\"addr\":\"127.0.0.1:7101\","
    "\"labels\":{\"zone\":\"z1\",\"rack\":\"r1\"},\"weight\":1.0,\"state\":\"active\","
    "\"desired\":\"active\",\"lost_ms\":0,\"since_ms\":1796000000000}";

START_TEST(node_example_round_trip) {
  rk_node n;
  ring_error err;
  ck_assert_msg(rk_node_decode(node_doc, strlen(node_doc), &n, &err) == RING_OK, "%s", err.message);
  ck_assert_str_eq(n.id, "n1");
  ck_assert_str_eq(n.addr, "127.0.0.1:7101");
  ck_assert_uint_eq(n.labels.n, 2);
  ck_assert_str_eq(rk_labels_get(&n.labels, "rack"), "r1");
  ck_assert_ptr_null(rk_labels_get(&n.labels, "host"));
  ck_assert(n.weight == 1.0);
  ck_assert_int_eq(n.state, RING_NODE_ACTIVE);
  ck_assert_int_eq(n.desired, RK_WANT_ACTIVE);
  ck_assert_uint_eq(n.since_ms, 1796000000000ull);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_node_encode(&n, &json, &len), RING_OK);
  ck_assert_str_eq(json, node_doc);
  free(json);
  /* other states, desired values and an odd weight come back as they were */
  n.state = RING_NODE_DRAINING;
  n.desired = RK_WANT_REMOVED;
  n.weight = 0.1;
  n.lost_ms = 5;
  ck_assert_int_eq(rk_node_encode(&n, &json, &len), RING_OK);
  rk_node m;
  ck_assert_int_eq(rk_node_decode(json, len, &m, &err), RING_OK);
  ck_assert_str_eq(m.id, "n1");
  ck_assert(m.weight == 0.1);
  ck_assert_int_eq(m.state, RING_NODE_DRAINING);
  ck_assert_int_eq(m.desired, RK_WANT_REMOVED);
  ck_assert_uint_eq(m.lost_ms, 5);
  ck_assert_ptr_nonnull(strstr(json, "\"weight\":0.1,\"state\":\"draining\",\"desired\":"
                                     "\"removed\""));
  free(json);
}
END_TEST

START_TEST(node_canonical) {
  /* a weight written as an integer decodes, and encodes as the canonical 1.0 */
  char *text = json_with_field(copy_of(node_doc), "weight", "1");
  rk_node n;
  ck_assert_int_eq(rk_node_decode(text, strlen(text), &n, NULL), RING_OK);
  char *json;
  ck_assert_int_eq(rk_node_encode(&n, &json, NULL), RING_OK);
  ck_assert_str_eq(json, node_doc);
  free(json);
  free(text);
}
END_TEST

START_TEST(node_errors) {
  decode_fn f = dec_node;
  expect_edit(f, node_doc, "format", "\"ringkeeper.alive.v1\"", RING_EFORMAT, "format");
  expect_edit(f, node_doc, "id", "\"N1\"", RING_ENODEID, "id");
  expect_edit(f, node_doc, "id", NULL, RING_ENODEID, "id");
  expect_edit(f, node_doc, "addr", "\"nohost\"", RING_ENODE, "addr");
  expect_edit(f, node_doc, "addr", "5", RING_EFIELD, "addr");
  expect_edit(f, node_doc, "labels", "[]", RING_ENODE, "labels");
  expect_edit(f, node_doc, "labels", "{\"zone\":\"z 1\"}", RING_ENODE, "label zone");
  expect_edit(f, node_doc, "labels", "{\"Zone\":\"z1\"}", RING_ENODE, "label key");
  expect_edit(f, node_doc, "labels", "{\"zone\":1}", RING_ENODE, "labels.zone");
  expect_edit(f, node_doc, "labels", "{\"zone\":\"a\",\"zone\":\"b\"}", RING_ENODE, "twice");
  expect_edit(f, node_doc, "weight", "0", RING_ENODE, "weight");
  expect_edit(f, node_doc, "weight", "1000001", RING_ENODE, "weight");
  expect_edit(f, node_doc, "weight", "\"1\"", RING_ENODE, "weight");
  expect_edit(f, node_doc, "state", "\"sleeping\"", RING_ENODE, "state");
  expect_edit(f, node_doc, "desired", "\"gone\"", RING_EFIELD, "desired");
  expect_edit(f, node_doc, "desired", NULL, RING_EFIELD, "desired: missing");
  expect_edit(f, node_doc, "lost_ms", "-1", RING_EFIELD, "lost_ms");
  expect_edit(f, node_doc, "since_ms", "\"0\"", RING_EFIELD, "since_ms");
  expect_edit(f, node_doc, "started_ms", "0", RING_EFIELD, "unknown field \"started_ms\"");
}
END_TEST

START_TEST(labels_and_names) {
  rk_labels l = {0};
  ring_error err;
  ck_assert_int_eq(rk_labels_set(&l, "zone", "z1", &err), RING_OK);
  ck_assert_int_eq(rk_labels_set(&l, "zone", "z2", &err), RING_OK);
  ck_assert_uint_eq(l.n, 1);
  ck_assert_str_eq(rk_labels_get(&l, "zone"), "z2");
  ck_assert_int_eq(rk_labels_set(&l, "Zone", "z1", &err), RING_ENODE);
  ck_assert_int_eq(rk_labels_set(&l, "rack", "r 1", &err), RING_ENODE);
  ck_assert_ptr_nonnull(strstr(err.message, "rack"));
  for (int i = 1; i < RING_LABELS_MAX; i++) {
    char k[16];
    snprintf(k, sizeof k, "k%d", i);
    ck_assert_int_eq(rk_labels_set(&l, k, "v", &err), RING_OK);
  }
  ck_assert_int_eq(rk_labels_set(&l, "one-more", "v", &err), RING_ENODE);
  ck_assert_int_eq(rk_labels_set(&l, "k3", "w", &err), RING_OK); /* replacing still works */
  ck_assert_uint_eq(l.n, RING_LABELS_MAX);
  ck_assert_int_eq(rk_desired_parse("drained"), RK_WANT_DRAINED);
  ck_assert_int_eq(rk_desired_parse("nope"), RING_EINVAL);
  ck_assert_str_eq(rk_desired_name(RK_WANT_REMOVED), "removed");
}
END_TEST

START_TEST(node_spec_builds) {
  rk_node n;
  ck_assert_int_eq(rk_node_decode(node_doc, strlen(node_doc), &n, NULL), RING_OK);
  n.state = RING_NODE_JOINING;
  n.weight = 2.5;
  const char *k[RING_LABELS_MAX], *v[RING_LABELS_MAX];
  ring_node_spec s;
  rk_node_spec(&n, k, v, &s);
  ck_assert_ptr_eq(s.id, n.id);
  ck_assert_uint_eq(s.n_labels, 2);
  ck_assert_str_eq(s.label_values[1], "r1");
  ring_table_params p = {"demo", "zone", 1, 0, 64, 1};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  ck_assert_int_eq(ring_table_node_state(t, 0), RING_NODE_JOINING);
  ck_assert(ring_table_node_weight(t, 0) == 2.5);
  ring_table_free(t);
}
END_TEST

START_TEST(node_encode_refuses_invalid) {
  rk_node n;
  ck_assert_int_eq(rk_node_decode(node_doc, strlen(node_doc), &n, NULL), RING_OK);
  char *json = NULL;
  rk_node bad = n;
  snprintf(bad.id, sizeof bad.id, "has \"quote\"");
  ck_assert_int_eq(rk_node_encode(&bad, &json, NULL), RING_EINVAL);
  bad = n;
  bad.weight = 0;
  ck_assert_int_eq(rk_node_encode(&bad, &json, NULL), RING_EINVAL);
  bad = n;
  bad.desired = (rk_desired)7;
  ck_assert_int_eq(rk_node_encode(&bad, &json, NULL), RING_EINVAL);
  ck_assert_ptr_null(json);
}
END_TEST

/* ------------------------------------------------------------------- alive */

static const char alive_doc[] =
    "{\"format\":\"ringkeeper.alive.v1\",\"id\":\"n1\",\"addr\":\"127.0.0.1:7101\","
    "\"labels\":{\"zone\":\"z1\"},\"weight\":1.0,\"started_ms\":1796000000000,"
    "\"capacity_bytes\":536870912000,\"free_bytes\":402653184000}";

/* A writer from before the capacity fields: still read, capacity 0. */
static const char alive_old[] =
    "{\"format\":\"ringkeeper.alive.v1\",\"id\":\"n1\",\"addr\":\"127.0.0.1:7101\","
    "\"labels\":{},\"weight\":1.0,\"started_ms\":5}";

START_TEST(alive_round_trip) {
  rk_alive a;
  ring_error err;
  ck_assert_msg(rk_alive_decode(alive_doc, strlen(alive_doc), &a, &err) == RING_OK, "%s",
                err.message);
  ck_assert_str_eq(a.id, "n1");
  ck_assert_str_eq(rk_labels_get(&a.labels, "zone"), "z1");
  ck_assert_uint_eq(a.started_ms, 1796000000000ull);
  ck_assert_uint_eq(a.capacity_bytes, 536870912000ull);
  ck_assert_uint_eq(a.free_bytes, 402653184000ull);
  rk_alive old;
  ck_assert_int_eq(rk_alive_decode(alive_old, strlen(alive_old), &old, &err), RING_OK);
  ck_assert_uint_eq(old.capacity_bytes, 0);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_alive_encode(&a, &json, &len), RING_OK);
  ck_assert_str_eq(json, alive_doc);
  free(json);
  a.labels.n = 0;
  snprintf(a.addr, sizeof a.addr, "[::1]:7000");
  a.weight = 1e6;
  ck_assert_int_eq(rk_alive_encode(&a, &json, &len), RING_OK);
  rk_alive b;
  ck_assert_int_eq(rk_alive_decode(json, len, &b, &err), RING_OK);
  ck_assert_str_eq(b.addr, "[::1]:7000");
  ck_assert_uint_eq(b.labels.n, 0);
  ck_assert(b.weight == 1e6);
  free(json);
}
END_TEST

START_TEST(alive_errors) {
  decode_fn f = dec_alive;
  expect_edit(f, alive_doc, "state", "\"active\"", RING_EFIELD, "unknown field \"state\"");
  expect_edit(f, alive_doc, "started_ms", NULL, RING_EFIELD, "started_ms: missing");
  expect_edit(f, alive_doc, "started_ms", "1e300", RING_EFIELD, "started_ms");
  expect_edit(f, alive_doc, "free_bytes", "-1", RING_EFIELD, "free_bytes");
  expect_edit(f, alive_doc, "capacity_bytes", "\"big\"", RING_EFIELD, "capacity_bytes");
  expect_edit(f, alive_doc, "id", "\"\"", RING_ENODEID, "id");
  expect_edit(f, alive_doc, "addr", "\"host:0\"", RING_ENODE, "addr");
  expect_edit(f, alive_doc, "format", "\"ringkeeper.node.v1\"", RING_EFORMAT, "format");
}
END_TEST

/* A node key (alive/ and nodes/): 64 lowercase hex digits or nothing; it
 * round-trips, and anything else makes the record invalid. */
#define KEY_HEX "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"
#define OTHER_HEX "5b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"

START_TEST(node_keys) {
  rk_alive a;
  rk_node n;
  ring_error err;
  ck_assert_int_eq(rk_alive_decode(alive_doc, strlen(alive_doc), &a, &err), RING_OK);
  ck_assert_str_eq(a.key, ""); /* absent: none */
  memcpy(a.key, KEY_HEX, sizeof a.key);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_alive_encode(&a, &json, &len), RING_OK);
  ck_assert_ptr_nonnull(strstr(json, "\"key\":\"" KEY_HEX "\""));
  rk_alive b;
  ck_assert_int_eq(rk_alive_decode(json, len, &b, &err), RING_OK);
  ck_assert_str_eq(b.key, KEY_HEX);
  ck_assert_str_eq(b.next_key, "");
  free(json);
  memcpy(a.next_key, KEY_HEX, sizeof a.next_key); /* a rotation's next key, the same rules */
  a.next_key[0] = '4';
  ck_assert_int_eq(rk_alive_encode(&a, &json, &len), RING_OK);
  ck_assert_int_eq(rk_alive_decode(json, len, &b, &err), RING_OK);
  ck_assert_str_eq(b.next_key, a.next_key);
  free(json);
  ck_assert_int_eq(rk_node_decode(node_doc, strlen(node_doc), &n, &err), RING_OK);
  memcpy(n.key, KEY_HEX, sizeof n.key);
  ck_assert_int_eq(rk_node_encode(&n, &json, &len), RING_OK);
  rk_node m;
  ck_assert_int_eq(rk_node_decode(json, len, &m, &err), RING_OK);
  ck_assert_str_eq(m.key, KEY_HEX);
  free(json);
  n.key[0] = 'X'; /* the encoder refuses what the decoder would */
  ck_assert_int_eq(rk_node_encode(&n, &json, &len), RING_EINVAL);
  /* untrusted: published differs from both pins; nothing pinned: not yet */
  memcpy(n.key, KEY_HEX, sizeof n.key);
  memcpy(n.next_key, a.next_key, sizeof n.next_key);
  ck_assert(!rk_key_untrusted(&n, KEY_HEX));
  ck_assert(!rk_key_untrusted(&n, a.next_key));
  ck_assert(rk_key_untrusted(&n, OTHER_HEX));
  n.key[0] = '\0';
  ck_assert(!rk_key_untrusted(&n, OTHER_HEX));
  const decode_fn fs[] = {dec_alive, dec_node};
  const char *docs[] = {alive_doc, node_doc};
  for (int i = 0; i < 2; i++) {
    expect_edit(fs[i], docs[i], "key", "\"" KEY_HEX "0\"", RING_EFIELD, "key");
    expect_edit(fs[i], docs[i], "key",
                "\"3B6A27BCCEB6A42D62A3A8D02A6F0D73653215771DE243A63AC048A18B59DA29\"", RING_EFIELD,
                "key");
    expect_edit(fs[i], docs[i], "key", "\"\"", RING_EFIELD, "key");
    expect_edit(fs[i], docs[i], "key", "7", RING_EFIELD, "key");
    expect_edit(fs[i], docs[i], "next_key", "\"" KEY_HEX "0\"", RING_EFIELD, "next_key");
  }
}
END_TEST

/* ---------------------------------------------------------------- progress */

static const char progress_doc[] =
    "{\"format\":\"ringkeeper.progress.v1\",\"version\":42,\"tokens\":[17,905,4410],"
    "\"bytes\":73400320}";

START_TEST(progress_round_trip) {
  rk_progress p;
  ring_error err;
  ck_assert_msg(rk_progress_decode(progress_doc, strlen(progress_doc), &p, &err) == RING_OK, "%s",
                err.message);
  ck_assert_uint_eq(p.version, 42);
  ck_assert_uint_eq(p.n_tokens, 3);
  ck_assert_uint_eq(p.tokens[2], 4410);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_OK);
  ck_assert_str_eq(json, progress_doc);
  free(json);
  static const uint32_t want1[] = {17, 4410}, want2[] = {17, 18}, want3[] = {4411};
  ck_assert(rk_progress_covers(&p, want1, 2));
  ck_assert(rk_progress_covers(&p, NULL, 0));
  ck_assert(!rk_progress_covers(&p, want2, 2));
  ck_assert(!rk_progress_covers(&p, want3, 1));
  rk_progress_free(&p);
  ck_assert_ptr_null(p.tokens);
  rk_progress_free(NULL);

  rk_progress e = {.version = 7};
  ck_assert_int_eq(rk_progress_encode(&e, &json, &len), RING_OK);
  ck_assert_str_eq(json, "{\"format\":\"ringkeeper.progress.v1\",\"version\":7,\"tokens\":[],"
                         "\"bytes\":0}");
  ck_assert_int_eq(rk_progress_decode(json, len, &p, &err), RING_OK);
  ck_assert_uint_eq(p.n_tokens, 0);
  ck_assert_ptr_null(p.tokens);
  ck_assert(!rk_progress_covers(&p, want3, 1));
  free(json);
  uint32_t unsorted[] = {5, 3};
  rk_progress u = {.version = 1, .n_tokens = 2, .tokens = unsorted};
  ck_assert_int_eq(rk_progress_encode(&u, &json, &len), RING_EINVAL);
}
END_TEST

START_TEST(progress_errors) {
  decode_fn f = dec_progress;
  expect_edit(f, progress_doc, "tokens", "[17,17]", RING_EFIELD, "tokens[1]");
  expect_edit(f, progress_doc, "tokens", "[905,17]", RING_EFIELD, "tokens[1]");
  expect_edit(f, progress_doc, "tokens", "[65536]", RING_EFIELD, "tokens[0]");
  expect_edit(f, progress_doc, "tokens", "[1,\"2\"]", RING_EFIELD, "tokens[1]");
  expect_edit(f, progress_doc, "tokens", "{}", RING_EFIELD, "tokens");
  expect_edit(f, progress_doc, "version", "-3", RING_EVERSION, "version");
  expect_edit(f, progress_doc, "bytes", NULL, RING_EFIELD, "bytes: missing");
  expect_edit(f, progress_doc, "format", "1", RING_EFIELD, "format");
}
END_TEST

/* ----------------------------------------------------- progress: failing */

static const char failing_doc[] =
    "{\"format\":\"ringkeeper.progress.v1\",\"version\":42,\"tokens\":[905],\"bytes\":4096,"
    "\"failing\":[{\"token\":17,\"attempts\":4,\"error\":\"owner n3 does not hold token 17\"},"
    "{\"token\":4410,\"attempts\":1,\"error\":\"n4: connection refused \\\"x\\\"\"}]}";

/* failing_doc with its failing array replaced by `arr`. */
static void expect_failing(const char *arr, int code, const char *fragment) {
  expect_edit(dec_progress, failing_doc, "failing", arr, code, fragment);
}

START_TEST(progress_failing_round_trip) {
  rk_progress p;
  ring_error err;
  ck_assert_msg(rk_progress_decode(failing_doc, strlen(failing_doc), &p, &err) == RING_OK, "%s",
                err.message);
  ck_assert_uint_eq(p.n_failing, 2);
  ck_assert_uint_eq(p.failing[0].token, 17);
  ck_assert_uint_eq(p.failing[0].attempts, 4);
  ck_assert_str_eq(p.failing[0].error, "owner n3 does not hold token 17");
  ck_assert_str_eq(p.failing[1].error, "n4: connection refused \"x\"");
  ck_assert_ptr_eq(rk_progress_failing(&p, 4410), &p.failing[1]);
  ck_assert_ptr_null(rk_progress_failing(&p, 905));
  ck_assert_ptr_null(rk_progress_failing(NULL, 17));
  char *json;
  size_t len;
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_OK);
  ck_assert_str_eq(json, failing_doc);
  free(json);
  /* the encoder refuses what the decoder would */
  p.failing[1].attempts = 0;
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_EINVAL);
  p.failing[1].attempts = 1;
  p.failing[1].token = 17;
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_EINVAL);
  p.failing[1].token = 905; /* held */
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_EINVAL);
  p.failing[1].token = 4410;
  memset(p.failing[1].error, 'e', sizeof p.failing[1].error); /* no NUL */
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_EINVAL);
  p.failing[1].error[RK_FAIL_ERROR_MAX] = '\0'; /* exactly the cap */
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_OK);
  rk_progress q;
  ck_assert_int_eq(rk_progress_decode(json, len, &q, &err), RING_OK);
  ck_assert_uint_eq(strlen(q.failing[1].error), RK_FAIL_ERROR_MAX);
  rk_progress_free(&q);
  free(json);
  p.n_failing = RK_FAILING_MAX + 1;
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_EINVAL);
  /* no failures: the field is not written, the bytes are today's */
  p.n_failing = 0;
  ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_OK);
  ck_assert_str_eq(json, "{\"format\":\"ringkeeper.progress.v1\",\"version\":42,"
                         "\"tokens\":[905],\"bytes\":4096}");
  free(json);
  p.n_failing = 2;
  rk_progress_free(&p);
  ck_assert_ptr_null(p.failing);
  ck_assert_uint_eq(p.n_failing, 0);
}
END_TEST

START_TEST(progress_failing_errors) {
  expect_failing("{}", RING_EFIELD, "failing: must be an array");
  expect_failing("[1]", RING_EFIELD, "failing[0]: must be an object");
  expect_failing("[{\"token\":1,\"attempts\":1}]", RING_EFIELD, "failing[0].error: missing");
  expect_failing("[{\"token\":1,\"attempts\":1,\"error\":\"x\",\"why\":1}]", RING_EFIELD,
                 "failing[0]: unknown field");
  expect_failing("[{\"token\":1,\"attempts\":0,\"error\":\"x\"}]", RING_EFIELD,
                 "failing[0].attempts");
  expect_failing("[{\"token\":1,\"attempts\":4294967296,\"error\":\"x\"}]", RING_EFIELD,
                 "failing[0].attempts");
  expect_failing("[{\"token\":1,\"attempts\":1.5,\"error\":\"x\"}]", RING_EFIELD,
                 "failing[0].attempts");
  expect_failing("[{\"token\":65536,\"attempts\":1,\"error\":\"x\"}]", RING_EFIELD,
                 "failing[0].token");
  expect_failing("[{\"token\":9,\"attempts\":1,\"error\":\"x\"},"
                 "{\"token\":9,\"attempts\":1,\"error\":\"x\"}]",
                 RING_EFIELD, "failing[1].token: 9 not above 9");
  expect_failing("[{\"token\":9,\"attempts\":1,\"error\":\"x\"},"
                 "{\"token\":3,\"attempts\":1,\"error\":\"x\"}]",
                 RING_EFIELD, "failing[1].token");
  expect_failing("[{\"token\":905,\"attempts\":1,\"error\":\"x\"}]", RING_EFIELD,
                 "failing[0].token: 905 is also in tokens");
  expect_failing("[{\"token\":1,\"attempts\":1,\"error\":7}]", RING_EFIELD,
                 "failing[0].error: must be a string");
  /* the error's cap, in decoded bytes */
  char arr[512], err[RK_FAIL_ERROR_MAX + 2];
  memset(err, 'e', RK_FAIL_ERROR_MAX + 1);
  err[RK_FAIL_ERROR_MAX + 1] = '\0';
  snprintf(arr, sizeof arr, "[{\"token\":1,\"attempts\":1,\"error\":\"%s\"}]", err);
  expect_failing(arr, RING_EFIELD, "failing[0].error: 161 bytes, at most 160");
  err[RK_FAIL_ERROR_MAX] = '\0';
  snprintf(arr, sizeof arr, "[{\"token\":1,\"attempts\":1,\"error\":\"%s\"}]", err);
  expect_failing(arr, RING_OK, "");
  /* the entries' cap */
  char *big = malloc(64 * 1024), *p = big;
  p += sprintf(p, "[");
  for (int i = 0; i <= RK_FAILING_MAX; i++)
    p += sprintf(p, "%s{\"token\":%d,\"attempts\":1,\"error\":\"x\"}", i ? "," : "", 1000 + i);
  sprintf(p, "]");
  expect_failing(big, RING_EFIELD, "failing: 65 entries, at most 64");
  free(big);
  expect_failing("[]", RING_OK, "");
}
END_TEST

/* ------------------------------------------------------------------ leader */

static const char leader_doc[] =
    "{\"format\":\"ringkeeper.leader.v1\",\"id\":\"coord-a\",\"addr\":\"127.0.0.1:9100\","
    "\"pid\":4242}";

START_TEST(leader_round_trip) {
  rk_leader l;
  ring_error err;
  ck_assert_msg(rk_leader_decode(leader_doc, strlen(leader_doc), &l, &err) == RING_OK, "%s",
                err.message);
  ck_assert_str_eq(l.id, "coord-a");
  ck_assert_int_eq(l.pid, 4242);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_leader_encode(&l, &json, &len), RING_OK);
  ck_assert_str_eq(json, leader_doc);
  free(json);
  l.addr[0] = '\0';
  ck_assert_int_eq(rk_leader_encode(&l, &json, &len), RING_OK);
  ck_assert_int_eq(rk_leader_decode(json, len, &l, &err), RING_OK);
  ck_assert_str_eq(l.addr, "");
  free(json);
  l.pid = -1;
  ck_assert_int_eq(rk_leader_encode(&l, &json, &len), RING_EINVAL);
}
END_TEST

START_TEST(leader_errors) {
  decode_fn f = dec_leader;
  expect_edit(f, leader_doc, "id", "\"Coord\"", RING_ENODEID, "id");
  expect_edit(f, leader_doc, "addr", "\"x\"", RING_EFIELD, "addr");
  expect_edit(f, leader_doc, "pid", "-1", RING_EFIELD, "pid");
  expect_edit(f, leader_doc, "pid", NULL, RING_EFIELD, "pid: missing");
  expect_edit(f, leader_doc, "term", "1", RING_EFIELD, "unknown field");
  expect_edit(f, leader_doc, "format", "\"ringkeeper.leader.v2\"", RING_EFORMAT, "format");
}
END_TEST

/* -------------------------------------------------------------------- loss */

static const char loss_doc[] =
    "{\"format\":\"ringkeeper.loss.v1\",\"version\":42,\"tokens\":[3,17],\"by\":\"ringctl\","
    "\"at_ms\":1796000000000}";

START_TEST(loss_round_trip) {
  rk_loss l;
  ring_error err;
  ck_assert_msg(rk_loss_decode(loss_doc, strlen(loss_doc), &l, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(l.version, 42);
  ck_assert_uint_eq(l.n_tokens, 2);
  ck_assert_uint_eq(l.tokens[1], 17);
  ck_assert_str_eq(l.by, "ringctl");
  ck_assert_uint_eq(l.at_ms, 1796000000000ull);
  ck_assert(rk_loss_covers(&l, 42, 17));
  ck_assert(!rk_loss_covers(&l, 41, 17)); /* another version: never */
  ck_assert(!rk_loss_covers(&l, 42, 4));
  ck_assert(!rk_loss_covers(NULL, 42, 17));
  char *json;
  size_t len;
  ck_assert_int_eq(rk_loss_encode(&l, &json, &len), RING_OK);
  ck_assert_str_eq(json, loss_doc);
  free(json);
  l.tokens[1] = 3;
  ck_assert_int_eq(rk_loss_encode(&l, &json, &len), RING_EINVAL);
  l.tokens[1] = 17;
  l.n_tokens = 0;
  ck_assert_int_eq(rk_loss_encode(&l, &json, &len), RING_EINVAL);
  l.n_tokens = 2;
  l.version = 0;
  ck_assert_int_eq(rk_loss_encode(&l, &json, &len), RING_EINVAL);
  l.version = 42;
  strcpy(l.by, "Ops Team");
  ck_assert_int_eq(rk_loss_encode(&l, &json, &len), RING_EINVAL);
  rk_loss_free(&l);
  ck_assert_ptr_null(l.tokens);
  rk_loss_free(NULL);
}
END_TEST

START_TEST(loss_errors) {
  decode_fn f = dec_loss;
  expect_edit(f, loss_doc, "version", "0", RING_EVERSION, "version");
  expect_edit(f, loss_doc, "version", "9007199254740992", RING_EVERSION, "version");
  expect_edit(f, loss_doc, "tokens", "[]", RING_EFIELD, "tokens: empty");
  expect_edit(f, loss_doc, "tokens", "[17,3]", RING_EFIELD, "tokens[1]");
  expect_edit(f, loss_doc, "tokens", "[65536]", RING_EFIELD, "tokens[0]");
  expect_edit(f, loss_doc, "by", "\"Ops\"", RING_EFIELD, "by");
  expect_edit(f, loss_doc, "by", "\"\"", RING_EFIELD, "by");
  expect_edit(f, loss_doc, "by", NULL, RING_EFIELD, "by: missing");
  expect_edit(f, loss_doc, "at_ms", "-1", RING_EFIELD, "at_ms");
  expect_edit(f, loss_doc, "plan", "\"x\"", RING_EFIELD, "unknown field");
  expect_edit(f, loss_doc, "format", "\"ringkeeper.loss.v2\"", RING_EFORMAT, "format");
  char by[80];
  snprintf(by, sizeof by, "\"%064d\"", 0); /* 64 characters of an id */
  expect_edit(f, loss_doc, "by", by, RING_EFIELD, "by: 64 bytes, at most 63");
}
END_TEST

/* ------------------------------------------------------------------- stuck */

static const char stuck_doc[] =
    "{\"format\":\"ringkeeper.stuck.v1\",\"version\":42,\"plan\":\"0123456789abcdef\","
    "\"moves\":[{\"token\":17,\"slot\":0,\"from\":\"\",\"to\":\"n2\","
    "\"error\":\"no progress reported by n2\",\"for_ms\":600000},"
    "{\"token\":17,\"slot\":2,\"from\":\"n3\",\"to\":\"n5\","
    "\"error\":\"owner n3 does not hold token 17 (4 attempts)\",\"for_ms\":612000}],"
    "\"more\":0}";

START_TEST(stuck_round_trip) {
  rk_stuck k;
  ring_error err;
  ck_assert_msg(rk_stuck_decode(stuck_doc, strlen(stuck_doc), &k, &err) == RING_OK, "%s",
                err.message);
  ck_assert_uint_eq(k.version, 42);
  ck_assert_str_eq(k.plan, "0123456789abcdef");
  ck_assert_uint_eq(k.n_moves, 2);
  ck_assert_str_eq(k.moves[0].from, "");
  ck_assert_str_eq(k.moves[1].to, "n5");
  ck_assert_uint_eq(k.moves[1].slot, 2);
  ck_assert_uint_eq(k.moves[1].for_ms, 612000);
  char *json;
  size_t len;
  ck_assert_int_eq(rk_stuck_encode(&k, &json, &len), RING_OK);
  ck_assert_str_eq(json, stuck_doc);
  free(json);
  /* the encoder refuses what the decoder would */
  strcpy(k.moves[1].to, "N5");
  ck_assert_int_eq(rk_stuck_encode(&k, &json, &len), RING_EINVAL);
  strcpy(k.moves[1].to, "n5");
  k.moves[1].slot = 0;
  ck_assert_int_eq(rk_stuck_encode(&k, &json, &len), RING_EINVAL);
  k.moves[1].slot = 2;
  k.more = 3; /* only with the cap listed */
  ck_assert_int_eq(rk_stuck_encode(&k, &json, &len), RING_EINVAL);
  k.more = 0;
  memset(k.moves[0].error, 'x', sizeof k.moves[0].error);
  ck_assert_int_eq(rk_stuck_encode(&k, &json, &len), RING_EINVAL);
  strcpy(k.moves[0].error, "x");
  strcpy(k.plan, "refused");
  ck_assert_int_eq(rk_stuck_encode(&k, &json, &len), RING_EINVAL);
  rk_stuck_free(&k);
  ck_assert_ptr_null(k.moves);
  /* nothing listed: an empty report */
  rk_stuck e = {.version = 3, .plan = "fedcba9876543210"};
  ck_assert_int_eq(rk_stuck_encode(&e, &json, &len), RING_OK);
  ck_assert_int_eq(rk_stuck_decode(json, len, &k, &err), RING_OK);
  ck_assert_uint_eq(k.n_moves, 0);
  ck_assert_ptr_null(k.moves);
  free(json);
}
END_TEST

/* stuck_doc with its moves replaced by `arr`. */
static void expect_moves(const char *arr, int code, const char *fragment) {
  expect_edit(dec_stuck, stuck_doc, "moves", arr, code, fragment);
}

#define MOVE(tok, slot, from, to, error)                                                           \
  "{\"token\":" #tok ",\"slot\":" #slot ",\"from\":\"" from "\",\"to\":\"" to                      \
  "\",\"error\":\"" error "\",\"for_ms\":1}"

START_TEST(stuck_errors) {
  decode_fn f = dec_stuck;
  expect_edit(f, stuck_doc, "version", "0", RING_EVERSION, "version");
  expect_edit(f, stuck_doc, "plan", "\"0123456789ABCDEF\"", RING_EFIELD, "plan");
  expect_edit(f, stuck_doc, "plan", "\"0123\"", RING_EFIELD, "plan");
  expect_edit(f, stuck_doc, "more", "1", RING_EFIELD, "more: 1 with only 2 moves");
  expect_edit(f, stuck_doc, "more", "-1", RING_EFIELD, "more");
  expect_edit(f, stuck_doc, "more", NULL, RING_EFIELD, "more: missing");
  expect_edit(f, stuck_doc, "format", "\"ringkeeper.stuck.v9\"", RING_EFORMAT, "format");
  expect_moves("{}", RING_EFIELD, "moves: must be an array");
  expect_moves("[" MOVE(1, 0, "", "n2", "x") "," MOVE(1, 0, "", "n3", "x") "]", RING_EFIELD,
               "moves[1].token");
  expect_moves("[" MOVE(2, 0, "", "n2", "x") "," MOVE(1, 1, "", "n3", "x") "]", RING_EFIELD,
               "moves[1].token");
  expect_moves("[" MOVE(1, 7, "", "n2", "x") "]", RING_EFIELD, "moves[0].slot");
  expect_moves("[" MOVE(65536, 0, "", "n2", "x") "]", RING_EFIELD, "moves[0].token");
  expect_moves("[" MOVE(1, 0, "", "", "x") "]", RING_ENODEID, "moves[0].to");
  expect_moves("[" MOVE(1, 0, "N1", "n2", "x") "]", RING_ENODEID, "moves[0].from");
  expect_moves("[{\"token\":1,\"slot\":0,\"from\":\"\",\"to\":\"n2\",\"error\":\"x\"}]",
               RING_EFIELD, "moves[0].for_ms: missing");
  expect_moves("[" MOVE(1, 0, "", "n2", "x") ",3]", RING_EFIELD, "moves[1]: must be an object");
  char arr[512], err[RK_STUCK_ERROR_MAX + 2];
  memset(err, 'e', RK_STUCK_ERROR_MAX + 1);
  err[RK_STUCK_ERROR_MAX + 1] = '\0';
  snprintf(arr, sizeof arr,
           "[{\"token\":1,\"slot\":0,\"from\":\"\",\"to\":\"n2\",\"error\":\"%s\",\"for_ms\":1}]",
           err);
  expect_moves(arr, RING_EFIELD, "moves[0].error: 201 bytes, at most 200");
  /* the cap: 256 listed, the rest counted in more */
  char *big = malloc(128 * 1024), *p = big;
  p += sprintf(p, "[");
  for (int i = 0; i <= RK_STUCK_MAX; i++)
    p += sprintf(p,
                 "%s{\"token\":%d,\"slot\":0,\"from\":\"n1\",\"to\":\"n2\",\"error\":\"x\","
                 "\"for_ms\":1}",
                 i ? "," : "", i);
  sprintf(p, "]");
  expect_moves(big, RING_EFIELD, "moves: 257 entries, at most 256");
  char *last = strrchr(big, '{');
  strcpy(last - 1, "]"); /* 256 moves */
  cJSON *root = cJSON_Parse(stuck_doc);
  json_set_raw(root, "moves", big);
  json_set_raw(root, "more", "9");
  char *text = cJSON_PrintUnformatted(root);
  expect(f, text, RING_OK, "");
  free(text);
  cJSON_Delete(root);
  free(big);
}
END_TEST

/* A record cut anywhere is refused, and nothing past len is read. */
START_TEST(every_prefix_refused) {
  const char *docs[] = {config_doc, node_doc,    alive_doc, progress_doc,
                        leader_doc, failing_doc, loss_doc,  stuck_doc};
  decode_fn fns[] = {dec_config, dec_node,     dec_alive, dec_progress,
                     dec_leader, dec_progress, dec_loss,  dec_stuck};
  for (int d = 0; d < 8; d++) {
    size_t n = strlen(docs[d]);
    for (size_t cut = 0; cut < n; cut++) {
      char *copy = malloc(cut ? cut : 1);
      memcpy(copy, docs[d], cut);
      ring_error err = {0};
      ck_assert_int_eq(fns[d](copy, cut, &err), RING_EJSON);
      free(copy);
    }
  }
}
END_TEST

/* ----------------------------------------------------------------- missing */

static const char missing_doc[] =
    "{\"format\":\"ringkeeper.missing.v1\",\"version\":42,\"tokens\":[17,905,4410],"
    "\"failing\":[{\"token\":905,\"attempts\":3,\"error\":\"n3 does not hold token 905\"}]}";

START_TEST(missing_round_trip) {
  rk_missing m;
  ring_error err = {0};
  ck_assert_msg(rk_missing_decode(missing_doc, strlen(missing_doc), &m, &err) == RING_OK, "%s",
                err.message);
  ck_assert_uint_eq(m.version, 42);
  ck_assert_uint_eq(m.n_tokens, 3);
  ck_assert_uint_eq(m.n_failing, 1);
  ck_assert_str_eq(m.failing[0].error, "n3 does not hold token 905");
  ck_assert(rk_missing_has(&m, 905) && !rk_missing_has(&m, 18) && !rk_missing_has(NULL, 17));
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_missing_encode(&m, &json, &len), RING_OK);
  ck_assert_str_eq(json, missing_doc);
  free(json);
  m.n_failing = 0; /* without reasons the field is not written */
  ck_assert_int_eq(rk_missing_encode(&m, &json, &len), RING_OK);
  ck_assert_str_eq(json, "{\"format\":\"ringkeeper.missing.v1\",\"version\":42,"
                         "\"tokens\":[17,905,4410]}");
  free(json);
  m.n_failing = 1;
  m.failing[0].token = 18; /* a reason for a token not listed: refused, as decoded */
  ck_assert_int_eq(rk_missing_encode(&m, &json, &len), RING_EINVAL);
  m.failing[0].token = 905;
  m.version = 0;
  ck_assert_int_eq(rk_missing_encode(&m, &json, &len), RING_EINVAL);
  m.version = 42;
  uint32_t n = m.n_tokens;
  m.n_tokens = 0; /* an empty set is deleted, never written */
  ck_assert_int_eq(rk_missing_encode(&m, &json, &len), RING_EINVAL);
  m.n_tokens = n;
  rk_missing_free(&m);
  rk_missing_free(NULL);
}
END_TEST

START_TEST(missing_errors) {
  decode_fn f = dec_missing;
  expect_edit(f, missing_doc, "tokens", "[]", RING_EFIELD, "tokens: empty");
  expect_edit(f, missing_doc, "tokens", "[17,17]", RING_EFIELD, "tokens[1]");
  expect_edit(f, missing_doc, "tokens", "[65536]", RING_EFIELD, "tokens[0]");
  expect_edit(f, missing_doc, "version", "0", RING_EVERSION, "version");
  expect_edit(f, missing_doc, "version", NULL, RING_EFIELD, "version: missing");
  expect_edit(f, missing_doc, "format", "\"ringkeeper.missing.v2\"", RING_EFORMAT, "format");
  expect_edit(f, missing_doc, "bytes", "1", RING_EFIELD, "bytes");
  expect_edit(f, missing_doc, "failing", "[{\"token\":18,\"attempts\":1,\"error\":\"x\"}]",
              RING_EFIELD, "failing[0].token: 18 is not in tokens");
  expect_edit(f, missing_doc, "failing", "[{\"token\":17,\"attempts\":0,\"error\":\"x\"}]",
              RING_EFIELD, "failing[0].attempts");
  expect_edit(f, missing_doc, "failing", "{}", RING_EFIELD, "failing");
  /* the size cap is the host-record reader's, checked before parsing */
  ck_assert_int_eq(rk_host_size_check(RK_HOST_MISSING, RK_MISSING_VALUE_MAX + 1, NULL),
                   RING_ETOOBIG);
  ck_assert_str_eq(rk_host_kind_name(RK_HOST_MISSING), "missing");
  ck_assert_str_eq(rk_host_kind_dir(RK_HOST_MISSING), "missing/");
}
END_TEST

/* The largest value (every token missing, 64 reasons of the longest
 * errors, every byte escaped) is under the cap. */
START_TEST(missing_largest_under_cap) {
  rk_missing m = {
      .version = RING_VERSION_MAX, .n_tokens = RING_TOKENS_MAX, .n_failing = RK_FAILING_MAX};
  m.tokens = calloc(RING_TOKENS_MAX, sizeof *m.tokens);
  m.failing = calloc(RK_FAILING_MAX, sizeof *m.failing);
  ck_assert(m.tokens != NULL && m.failing != NULL);
  for (uint32_t t = 0; t < RING_TOKENS_MAX; t++)
    m.tokens[t] = t;
  for (uint32_t i = 0; i < RK_FAILING_MAX; i++) {
    m.failing[i].token = 60000 + i;
    m.failing[i].attempts = UINT32_MAX;
    memset(m.failing[i].error, 'e', RK_FAIL_ERROR_MAX);
  }
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_missing_encode(&m, &json, &len), RING_OK);
  size_t worst = len + (size_t)RK_FAILING_MAX * RK_FAIL_ERROR_MAX * 5; /* 6-byte escapes */
  fprintf(stderr, "largest missing: %zu bytes (with every error byte escaped: %zu)\n", len, worst);
  ck_assert_uint_le(worst, RK_MISSING_VALUE_MAX);
  free(json);
  rk_missing_free(&m);
}
END_TEST

/* ------------------------------------------------------------ host records */

START_TEST(host_caps_hold_the_largest_values) {
  /* progress: every token below 65536 is either held or failing; the
   * largest value lists the 64 failing entries with the longest errors
   * (every byte a control character: 6 bytes escaped) and the rest held */
  rk_progress p = {.version = RING_VERSION_MAX, .bytes = RING_VERSION_MAX};
  p.n_failing = RK_FAILING_MAX;
  p.failing = calloc(RK_FAILING_MAX, sizeof *p.failing);
  p.tokens = calloc(RING_TOKENS_MAX, sizeof *p.tokens);
  ck_assert(p.failing != NULL && p.tokens != NULL);
  for (uint32_t i = 0; i < RK_FAILING_MAX; i++) {
    p.failing[i].token = 10000 + i;
    p.failing[i].attempts = UINT32_MAX;
    memset(p.failing[i].error, '"', RK_FAIL_ERROR_MAX);
  }
  for (uint32_t t = 0; t < RING_TOKENS_MAX; t++)
    if (t < 10000 || t >= 10000 + RK_FAILING_MAX)
      p.tokens[p.n_tokens++] = t;
  char *json = NULL;
  size_t len = 0;
  if (rk_progress_encode(&p, &json, &len) != RING_OK) { /* quotes refused: plain bytes */
    for (uint32_t i = 0; i < RK_FAILING_MAX; i++)
      memset(p.failing[i].error, 'e', RK_FAIL_ERROR_MAX);
    ck_assert_int_eq(rk_progress_encode(&p, &json, &len), RING_OK);
  }
  size_t worst = len + (size_t)RK_FAILING_MAX * RK_FAIL_ERROR_MAX * 5; /* 6-byte escapes */
  fprintf(stderr, "largest progress: %zu bytes (with every error byte escaped: %zu)\n", len, worst);
  ck_assert_uint_le(worst, RK_PROGRESS_VALUE_MAX);
  ck_assert_int_eq(rk_host_size_check(RK_HOST_PROGRESS, len, NULL), RING_OK);
  free(json);
  rk_progress_free(&p);

  /* alive: the longest id, address and 16 labels of 63-byte keys and values */
  rk_alive a = {.weight = 1e300,
                .started_ms = RING_VERSION_MAX,
                .capacity_bytes = RING_VERSION_MAX,
                .free_bytes = RING_VERSION_MAX};
  memset(a.id, 'i', RING_ID_MAX);
  snprintf(
      a.addr, sizeof a.addr, "%.249s:65535",
      "h.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbb"
      "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.cccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
      "ccccccc.dddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
  for (uint32_t i = 0; i < RING_LABELS_MAX; i++) {
    char key[RING_ID_MAX + 1];
    memset(key, 'k', RING_ID_MAX);
    key[RING_ID_MAX] = '\0';
    key[0] = (char)('a' + i);
    memset(a.labels.value[i], 'v', RING_ID_MAX);
    memcpy(a.labels.key[i], key, sizeof key);
  }
  a.labels.n = RING_LABELS_MAX;
  if (rk_alive_encode(&a, &json, &len) != RING_OK) {
    a.weight = 1000000; /* the table's largest weight, whatever it is */
    snprintf(a.addr, sizeof a.addr, "127.0.0.1:65535");
    ck_assert_int_eq(rk_alive_encode(&a, &json, &len), RING_OK);
  }
  fprintf(stderr, "largest alive: %zu bytes\n", len);
  ck_assert_uint_le(len + 2 * RING_ADDR_MAX, RK_ALIVE_VALUE_MAX);
  free(json);

  /* acks and clients */
  ck_assert_int_eq(rk_host_size_check(RK_HOST_ACK, 16, NULL), RING_OK);
  rk_client c = {{0}};
  memset(c.kind, 'k', RING_ID_MAX);
  ck_assert_int_eq(rk_client_encode(&c, &json, &len), RING_OK);
  ck_assert_uint_le(len, RK_CLIENT_VALUE_MAX);
  free(json);
}
END_TEST

START_TEST(host_size_check_names_the_cap) {
  ring_error err = {RING_OK, ""};
  ck_assert_int_eq(rk_host_size_check(RK_HOST_PROGRESS, RK_PROGRESS_VALUE_MAX, &err), RING_OK);
  ck_assert_int_eq(rk_host_size_check(RK_HOST_PROGRESS, 1468006, &err), RING_ETOOBIG);
  ck_assert_str_eq(err.message, "1468006 bytes over the 524288 cap");
  ck_assert_int_eq(rk_host_size_check(RK_HOST_ALIVE, 4097, &err), RING_ETOOBIG);
  ck_assert_str_eq(err.message, "4097 bytes over the 4096 cap");
  ck_assert_int_eq(rk_host_size_check(RK_HOST_ACK, 33, &err), RING_ETOOBIG);
  ck_assert_int_eq(rk_host_size_check(RK_HOST_CLIENT, 1025, &err), RING_ETOOBIG);
  ck_assert_str_eq(rk_host_kind_name(RK_HOST_ACK), "acks");
  ck_assert_str_eq(rk_host_kind_dir(RK_HOST_CLIENT), "clients/");
  ck_assert_str_eq(rk_host_kind_name(RK_HOST_KINDS), "?");
  ck_assert_uint_eq(rk_host_value_max(RK_HOST_KINDS), 0);
}
END_TEST

START_TEST(ack_decode) {
  uint64_t v = 99;
  ring_error err;
  ck_assert_int_eq(rk_ack_decode("42", 2, &v, &err), RING_OK);
  ck_assert_uint_eq(v, 42);
  ck_assert_int_eq(rk_ack_decode("9007199254740991", 16, &v, &err), RING_OK);
  ck_assert_uint_eq(v, RING_VERSION_MAX);
  const char *bad[] = {"",   "0", "042", "-1", "4 2", "v7", "9007199254740992", "12345678901234567",
                       "1.5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 7;
    ck_assert_msg(rk_ack_decode(bad[i], strlen(bad[i]), &v, &err) == RING_EVERSION, "%s", bad[i]);
    ck_assert_uint_eq(v, 7); /* untouched */
  }
  ck_assert_int_eq(rk_ack_decode("421", 2, &v, &err), RING_OK); /* never past len */
  ck_assert_uint_eq(v, 42);
}
END_TEST

START_TEST(client_round_trip_and_errors) {
  const char *kv = "{\"format\":\"ringkeeper.client.v1\",\"kind\":\"ring-kv\"}";
  rk_client c;
  ring_error err;
  ck_assert_int_eq(rk_client_decode(kv, strlen(kv), &c, &err), RING_OK);
  ck_assert_str_eq(c.kind, "ring-kv");
  char *json;
  size_t len;
  ck_assert_int_eq(rk_client_encode(&c, &json, &len), RING_OK);
  ck_assert_str_eq(json, kv);
  ck_assert_uint_eq(len, strlen(kv));
  free(json);
  struct {
    const char *json;
    int rc;
  } bad[] = {
      {"{\"format\":\"ringkeeper.client.v1\"", RING_EJSON},
      {"{\"format\":\"ringkeeper.client.v2\",\"kind\":\"ring-kv\"}", RING_EFORMAT},
      {"{\"format\":\"ringkeeper.client.v1\"}", RING_EFIELD},
      {"{\"format\":\"ringkeeper.client.v1\",\"kind\":\"Ring KV\"}", RING_EFIELD},
      {"{\"format\":\"ringkeeper.client.v1\",\"kind\":7}", RING_EFIELD},
      {"{\"format\":\"ringkeeper.client.v1\",\"kind\":\"kv\",\"x\":1}", RING_EFIELD},
      {"[]", RING_EFIELD},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = rk_client_decode(bad[i].json, strlen(bad[i].json), &c, &err);
    ck_assert_msg(rc != RING_OK, "%s: accepted", bad[i].json);
    if (rc != bad[i].rc)
      fprintf(stderr, "%s: %s (%d)\n", bad[i].json, err.message, rc);
  }
  rk_client none = {{0}};
  ck_assert_int_eq(rk_client_encode(&none, &json, &len), RING_EINVAL);
}
END_TEST

static Suite *records_suite(void) {
  Suite *s = suite_create("records");
  TCase *tc = tcase_create("records");
  tcase_add_test(tc, keys);
  tcase_add_test(tc, config_example_and_defaults);
  tcase_add_test(tc, config_round_trip);
  tcase_add_test(tc, config_auto_apply_policy);
  tcase_add_test(tc, config_errors);
  tcase_add_test(tc, config_validate);
  tcase_add_test(tc, node_example_round_trip);
  tcase_add_test(tc, node_canonical);
  tcase_add_test(tc, node_errors);
  tcase_add_test(tc, labels_and_names);
  tcase_add_test(tc, node_spec_builds);
  tcase_add_test(tc, node_encode_refuses_invalid);
  tcase_add_test(tc, alive_round_trip);
  tcase_add_test(tc, alive_errors);
  tcase_add_test(tc, node_keys);
  tcase_add_test(tc, progress_round_trip);
  tcase_add_test(tc, progress_errors);
  tcase_add_test(tc, progress_failing_round_trip);
  tcase_add_test(tc, progress_failing_errors);
  tcase_add_test(tc, loss_round_trip);
  tcase_add_test(tc, loss_errors);
  tcase_add_test(tc, stuck_round_trip);
  tcase_add_test(tc, stuck_errors);
  tcase_add_test(tc, leader_round_trip);
  tcase_add_test(tc, leader_errors);
  tcase_add_test(tc, every_prefix_refused);
  tcase_add_test(tc, host_caps_hold_the_largest_values);
  tcase_add_test(tc, host_size_check_names_the_cap);
  tcase_add_test(tc, ack_decode);
  tcase_add_test(tc, client_round_trip_and_errors);
  tcase_add_test(tc, missing_round_trip);
  tcase_add_test(tc, missing_errors);
  tcase_add_test(tc, missing_largest_under_cap);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(records_suite()); }
