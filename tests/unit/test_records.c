/*
 * test_records.c: the etcd value codecs of proto/etcd.md (records.h): key
 * names; config, node, alive, progress and leader records: the documented
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
    "\"down_after_ms\":60000,\"auto_apply\":false,"
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
  c.auto_apply = true;
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

  rk_progress e = {7, 0, NULL, 0};
  ck_assert_int_eq(rk_progress_encode(&e, &json, &len), RING_OK);
  ck_assert_str_eq(json, "{\"format\":\"ringkeeper.progress.v1\",\"version\":7,\"tokens\":[],"
                         "\"bytes\":0}");
  ck_assert_int_eq(rk_progress_decode(json, len, &p, &err), RING_OK);
  ck_assert_uint_eq(p.n_tokens, 0);
  ck_assert_ptr_null(p.tokens);
  ck_assert(!rk_progress_covers(&p, want3, 1));
  free(json);
  uint32_t unsorted[] = {5, 3};
  rk_progress u = {1, 2, unsorted, 0};
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

/* A record cut anywhere is refused, and nothing past len is read. */
START_TEST(every_prefix_refused) {
  const char *docs[] = {config_doc, node_doc, alive_doc, progress_doc, leader_doc};
  decode_fn fns[] = {dec_config, dec_node, dec_alive, dec_progress, dec_leader};
  for (int d = 0; d < 5; d++) {
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

static Suite *records_suite(void) {
  Suite *s = suite_create("records");
  TCase *tc = tcase_create("records");
  tcase_add_test(tc, keys);
  tcase_add_test(tc, config_example_and_defaults);
  tcase_add_test(tc, config_round_trip);
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
  tcase_add_test(tc, progress_round_trip);
  tcase_add_test(tc, progress_errors);
  tcase_add_test(tc, leader_round_trip);
  tcase_add_test(tc, leader_errors);
  tcase_add_test(tc, every_prefix_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(records_suite()); }
