/*
 * test_table_codec.c: the ringkeeper.table.v1 codec (libring/table_codec.c):
 * round trips byte for byte, and one test per validation error, each
 * checking the code and that the message names the offending field.
 */
#include "ring.h"
#include "ringx.h"
#include "test_tables.h"
#include "json_edit.h"
#include "check_main.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* A small table with labels, odd weights and pending entries. */
static ring_table *sample(void) {
  ring_table_params p = {"demo", "zone", 7, 42, 64, 3};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  static const double w[] = {1.0, 1.5, 0.1, 3.0, 1e6};
  for (int i = 0; i < 5; i++) {
    char id[16], addr[32], zone[16], rack[16];
    snprintf(id, sizeof id, "n%d", i);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 7101 + i);
    snprintf(zone, sizeof zone, "z%d", i % 3);
    snprintf(rack, sizeof rack, "r%d", i);
    const char *k[] = {"zone", "rack"}, *v[] = {zone, rack};
    ring_node_spec s = {id, addr, k, v, 2, w[i], (ring_node_state)(i % 5)};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  }
  for (uint32_t tok = 0; tok < 64; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(t, tok, r, (uint16_t)((tok + r) % 4));
  /* node 4 owns nothing yet: pending on two slots of different tokens */
  ck_assert_int_eq(ring_table_add_pending(t, 9, 2, 4), RING_OK);
  ck_assert_int_eq(ring_table_add_pending(t, 3, 1, 4), RING_OK);
  ring_error err;
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

static char *sample_json(void) {
  ring_table *t = sample();
  char *json;
  size_t len;
  ck_assert_int_eq(ring_table_encode(t, &json, &len), RING_OK);
  ck_assert_uint_eq(strlen(json), len);
  ring_table_free(t);
  return json;
}

START_TEST(round_trip_byte_for_byte) {
  char *a = sample_json();
  ring_table *t;
  ring_error err;
  ck_assert_msg(ring_table_decode(a, strlen(a), &t, &err) == RING_OK, "%s", err.message);
  char *b;
  size_t blen;
  ck_assert_int_eq(ring_table_encode(t, &b, &blen), RING_OK);
  ck_assert_str_eq(a, b);
  ck_assert_uint_eq(ring_table_version(t), 7);
  ck_assert_uint_eq(ring_table_seed(t), 42);
  ck_assert_str_eq(ring_table_cluster(t), "demo");
  ck_assert_str_eq(ring_table_failure_domain(t), "zone");
  ck_assert_str_eq(ring_table_node_label(t, 2, "rack"), "r2");
  ck_assert(ring_table_node_weight(t, 2) == 0.1);
  ck_assert_int_eq(ring_table_node_state(t, 3), RING_NODE_DOWN);
  ck_assert_uint_eq(ring_table_pending(t, 3, 1), 4);
  ck_assert_uint_eq(ring_table_pending(t, 3, 0), RING_NODE_NONE);
  ck_assert_uint_eq(ring_table_pending_count(t), 2);
  free(a);
  free(b);
  ring_table_free(t);
}
END_TEST

START_TEST(encoding_shape) {
  char *a = sample_json();
  ck_assert_ptr_nonnull(strstr(a, "{\"format\":\"ringkeeper.table.v1\",\"cluster\":\"demo\","
                                  "\"version\":7,\"tokens\":64,\"replicas\":3,\"hash\":{\"name\":"
                                  "\"xxh3-64\",\"seed\":42},\"failure_domain\":\"zone\","));
  ck_assert_ptr_nonnull(strstr(a, "{\"id\":\"n0\",\"addr\":\"127.0.0.1:7101\",\"labels\":"
                                  "{\"zone\":\"z0\",\"rack\":\"r0\"},\"weight\":1.0,"
                                  "\"state\":\"joining\"}"));
  ck_assert_ptr_nonnull(strstr(a, "\"weight\":1.5,"));
  ck_assert_ptr_nonnull(strstr(a, "\"weight\":0.1,"));
  ck_assert_ptr_nonnull(strstr(a, "\"pending\":[[3,1,4],[9,2,4]]"));
  /* the checksum is XXH3_64bits over the little-endian owner bytes */
  uint16_t raw[64 * 3];
  for (int tok = 0; tok < 64; tok++)
    for (int r = 0; r < 3; r++)
      raw[tok * 3 + r] = (uint16_t)((tok + r) % 4); /* test host is little-endian */
  char want[64];
  snprintf(want, sizeof want, "\"checksum\":\"xxh3-64:%016llx\"}",
           (unsigned long long)XXH3_64bits(raw, sizeof raw));
  ck_assert_ptr_nonnull(strstr(a, want));
  free(a);
}
END_TEST

START_TEST(round_trip_large) {
  ring_table *t = test_table_rr(65536, 7, 300, 12, NULL, 123456789);
  char *a, *b;
  size_t alen, blen;
  ck_assert_int_eq(ring_table_encode(t, &a, &alen), RING_OK);
  ring_table *u;
  ring_error err;
  ck_assert_msg(ring_table_decode(a, alen, &u, &err) == RING_OK, "%s", err.message);
  ck_assert_int_eq(ring_table_encode(u, &b, &blen), RING_OK);
  ck_assert_uint_eq(alen, blen);
  ck_assert(memcmp(a, b, alen) == 0);
  ck_assert(memcmp(ring_table_view(t)->owners, ring_table_view(u)->owners, 65536 * 7 * 2) == 0);
  free(a);
  free(b);
  ring_table_free(t);
  ring_table_free(u);
}
END_TEST

/* ------------------------------------------------------------ error cases */

/* Decodes text and checks the code and a fragment of the message. */
static void expect(const char *text, int code, const char *fragment) {
  ring_table *t = (ring_table *)0x1; /* must stay untouched on failure */
  ring_error err = {0};
  int rc = ring_table_decode(text, strlen(text), &t, &err);
  ck_assert_msg(rc == code, "want %s, got %s (%s) for %.200s", ring_strerror(code),
                ring_strerror(rc), err.message, text);
  ck_assert_int_eq(err.code, code);
  ck_assert_ptr_eq(t, (ring_table *)0x1);
  ck_assert_msg(strstr(err.message, fragment) != NULL, "message \"%s\" lacks \"%s\"", err.message,
                fragment);
}

/* The sample's JSON with one top-level field replaced (value NULL: removed). */
static char *with_field(const char *name, const char *value) {
  return json_with_field(sample_json(), name, value);
}

static void expect_field(const char *name, const char *value, int code, const char *frag) {
  char *text = with_field(name, value);
  expect(text, code, frag);
  free(text);
}

/* The sample with node i's field replaced. */
static void expect_node_field(int i, const char *name, const char *value, int code,
                              const char *frag) {
  char *json = sample_json();
  cJSON *root = cJSON_Parse(json);
  free(json);
  cJSON *node = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "nodes"), i);
  json_set_raw(node, name, value);
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  expect(text, code, frag);
  free(text);
}

/* The sample with owners replaced by raw (64*3 entries) and a matching checksum. */
static void expect_owners(const uint16_t *raw, int code, const char *frag) {
  char b64[520], sum[64], quoted[600];
  ring__base64_encode((const uint8_t *)raw, 64 * 3 * 2, b64);
  snprintf(quoted, sizeof quoted, "\"%s\"", b64);
  char *json = with_field("owners", quoted);
  cJSON *root = cJSON_Parse(json);
  free(json);
  snprintf(sum, sizeof sum, "xxh3-64:%016llx", (unsigned long long)XXH3_64bits(raw, 384));
  cJSON_ReplaceItemInObjectCaseSensitive(root, "checksum", cJSON_CreateString(sum));
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  expect(text, code, frag);
  free(text);
}

static void sample_owners(uint16_t *raw) {
  for (int tok = 0; tok < 64; tok++)
    for (int r = 0; r < 3; r++)
      raw[tok * 3 + r] = (uint16_t)((tok + r) % 4);
}

START_TEST(err_json) {
  expect("", RING_EJSON, "malformed JSON");
  expect("not json", RING_EJSON, "malformed JSON");
  expect("[1,2]", RING_EJSON, "top level must be an object");
  char *json = sample_json();
  json[strlen(json) / 2] = '\0'; /* truncated */
  expect(json, RING_EJSON, "malformed JSON");
  free(json);
  json = sample_json();
  char *trailing = malloc(strlen(json) + 8);
  sprintf(trailing, "%s {}", json);
  expect(trailing, RING_EJSON, "malformed JSON");
  free(json);
  free(trailing);
}
END_TEST

START_TEST(err_too_big) {
  ring_error err;
  ring_table *t;
  /* the length is checked before a byte is read */
  ck_assert_int_eq(ring_table_decode("{}", (size_t)RING_TABLE_JSON_MAX + 1, &t, &err),
                   RING_ETOOBIG);
  ck_assert_int_eq(ring_table_decode(NULL, 0, &t, &err), RING_EINVAL);
}
END_TEST

START_TEST(err_format) {
  expect_field("format", "\"ringkeeper.table.v2\"", RING_EFORMAT, "format");
  expect_field("format", "1", RING_EFIELD, "format: must be a string");
}
END_TEST

START_TEST(err_fields) {
  expect_field("owners", NULL, RING_EFIELD, "owners: missing");
  expect_field("cluster", NULL, RING_EFIELD, "cluster: missing");
  expect_field("extra", "1", RING_EFIELD, "unknown field \"extra\"");
  expect_field("version", "\"7\"", RING_EFIELD, "version");
  expect_field("nodes", "{}", RING_EFIELD, "nodes: must be an array");
  expect_field("pending", "null", RING_EFIELD, "pending: must be an array");
  expect_field("cluster", "\"Demo!\"", RING_EFIELD, "cluster");
  char *json = sample_json();
  char *dup = malloc(strlen(json) + 32);
  sprintf(dup, "{\"version\":8,%s", json + 1);
  expect(dup, RING_EFIELD, "field \"version\" given twice");
  free(json);
  free(dup);
}
END_TEST

START_TEST(err_version) {
  expect_field("version", "0", RING_EVERSION, "version");
  expect_field("version", "9007199254740992", RING_EVERSION, "version");
  expect_field("version", "1.5", RING_EVERSION, "version");
  expect_field("version", "-3", RING_EVERSION, "version");
}
END_TEST

START_TEST(err_tokens) {
  expect_field("tokens", "100", RING_ETOKENS, "tokens: 100");
  expect_field("tokens", "32", RING_ETOKENS, "tokens: 32");
  expect_field("tokens", "131072", RING_ETOKENS, "tokens");
  expect_field("tokens", "1e400", RING_ETOKENS, "tokens");
}
END_TEST

START_TEST(err_replicas) {
  expect_field("replicas", "0", RING_EREPLICAS, "replicas: 0");
  expect_field("replicas", "8", RING_EREPLICAS, "replicas");
  /* 5 nodes, R = 6 would exceed them: the owners length is checked first,
   * so build a table whose owners fit and whose node list is too short */
  ring_table_params p = {"demo", "zone", 1, 0, 64, 3};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  const char *k[] = {"zone"}, *v[] = {"z1"};
  ring_node_spec s = {"a", "h:1", k, v, 1, 1.0, RING_NODE_ACTIVE};
  ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  ring_error err;
  ck_assert_int_eq(ring_table_seal(t, &err), RING_EREPLICAS);
  ck_assert_ptr_nonnull(strstr(err.message, "exceeds the 1 nodes"));
  ring_table_free(t);
  expect_field("nodes", "[]", RING_EREPLICAS, "exceeds the 0 nodes");
}
END_TEST

START_TEST(err_hash) {
  expect_field("hash", "{\"name\":\"murmur3\",\"seed\":0}", RING_EHASH, "murmur3");
  expect_field("hash", "{\"name\":\"xxh3-64\",\"seed\":-1}", RING_EHASH, "hash.seed");
  expect_field("hash", "{\"name\":\"xxh3-64\"}", RING_EHASH, "hash.seed");
  expect_field("hash", "{\"name\":\"xxh3-64\",\"seed\":0,\"x\":1}", RING_EFIELD, "hash: unknown");
  expect_field("hash", "\"xxh3-64\"", RING_EFIELD, "hash: must be an object");
}
END_TEST

START_TEST(err_node_id) {
  expect_node_field(1, "id", "\"N1\"", RING_ENODEID, "nodes[1]: id \"N1\"");
  expect_node_field(1, "id", "\"\"", RING_ENODEID, "nodes[1]");
  expect_node_field(1, "id", "\"a123456789012345678901234567890123456789012345678901234567890123\"",
                    RING_ENODEID, "nodes[1]");
  expect_node_field(1, "id", NULL, RING_ENODEID, "nodes[1]: id: missing");
  expect_node_field(1, "id", "\"n0\"", RING_EDUPNODE, "nodes[1]: duplicate id \"n0\"");
}
END_TEST

START_TEST(err_node_record) {
  expect_node_field(2, "addr", "\"nohost\"", RING_ENODE, "nodes[2]: node n2: addr");
  expect_node_field(2, "addr", "\"h:70000\"", RING_ENODE, "addr");
  expect_node_field(2, "addr", "\"h:0\"", RING_ENODE, "addr");
  expect_node_field(2, "weight", "0", RING_ENODE, "weight");
  expect_node_field(2, "weight", "-1", RING_ENODE, "weight");
  expect_node_field(2, "weight", "\"1\"", RING_ENODE, "weight");
  expect_node_field(2, "state", "\"zombie\"", RING_ENODE, "state: \"zombie\"");
  expect_node_field(2, "labels", "[]", RING_ENODE, "labels: must be an object");
  expect_node_field(2, "labels", "{\"zone\":\"bad value\"}", RING_ENODE, "label zone");
  expect_node_field(2, "labels", "{\"zone\":1}", RING_ENODE, "labels.zone");
  expect_node_field(2, "extra", "1", RING_EFIELD, "nodes[2]: unknown field");
  expect_field("nodes", "[1]", RING_ENODE, "nodes[0]: must be an object");
}
END_TEST

START_TEST(err_owners) {
  expect_field("owners", "\"AAAA\"", RING_EOWNERS, "owners: 4 base64 characters");
  expect_field("owners", "7", RING_EFIELD, "owners: must be a string");
  char *json = sample_json();
  char *p = strstr(json, "\"owners\":\"") + 10;
  p[5] = '#';
  expect(json, RING_EOWNERS, "not canonical base64");
  free(json);
}
END_TEST

START_TEST(err_index) {
  uint16_t raw[192];
  sample_owners(raw);
  raw[50] = 5; /* 5 nodes: 0..4 */
  expect_owners(raw, RING_EINDEX, "owners[16][2]: node index 5");
  raw[50] = 0xffff;
  expect_owners(raw, RING_EINDEX, "node index 65535");
}
END_TEST

START_TEST(err_dup_owner) {
  uint16_t raw[192];
  sample_owners(raw);
  raw[3 * 10 + 2] = raw[3 * 10];
  expect_owners(raw, RING_EDUPOWNER, "token 10: slots 0 and 2");
}
END_TEST

START_TEST(err_checksum) {
  expect_field("checksum", "\"xxh3-64:0000000000000000\"", RING_ECHECKSUM, "owners hash to");
  expect_field("checksum", "\"xxh3-64:ABCDEF0000000000\"", RING_ECHECKSUM, "lowercase");
  expect_field("checksum", "\"crc32:00000000\"", RING_ECHECKSUM, "checksum");
  /* one flipped owner byte (still valid base64) is caught by the checksum */
  char *json = sample_json();
  char *p = strstr(json, "\"owners\":\"") + 10;
  p[0] = p[0] == 'A' ? 'B' : 'A';
  expect(json, RING_ECHECKSUM, "owners hash to");
  free(json);
}
END_TEST

START_TEST(err_pending) {
  expect_field("pending", "[[9,2,4],[3,1,4]]", RING_EPENDING, "ascending");
  expect_field("pending", "[[3,1,4],[3,1,4]]", RING_EPENDING, "ascending");
  expect_field("pending", "[[3,1]]", RING_EPENDING, "pending[0]: must be");
  expect_field("pending", "[[3,1,4,0]]", RING_EPENDING, "pending[0]: must be");
  expect_field("pending", "[[64,1,4]]", RING_EPENDING, "out of range");
  expect_field("pending", "[[3,3,4]]", RING_EPENDING, "out of range");
  expect_field("pending", "[[3,1,5]]", RING_EPENDING, "node index 5");
  expect_field("pending", "[[3,1,-1]]", RING_EPENDING, "pending[0][2]");
  expect_field("pending", "[[3,1,3]]", RING_EPENDING, "already owns token 3");
  expect_field("pending", "[[3,0,4],[3,1,4]]", RING_EPENDING, "pending twice on token 3");
  expect_field("pending", "[7]", RING_EPENDING, "pending[0]");
}
END_TEST

START_TEST(encode_rejects_unsealed) {
  ring_table_params p = {"demo", "", 1, 0, 64, 1};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  char *json = NULL;
  size_t len;
  ck_assert_int_eq(ring_table_encode(t, &json, &len), RING_EINVAL);
  ck_assert_ptr_null(json);
  ring_table_free(t);
  ring_table_free(NULL);
}
END_TEST

START_TEST(base64_strict) {
  uint8_t out[8];
  ck_assert_int_eq(ring__base64_decode("AAE=", 4, out, sizeof out), 2);
  ck_assert_int_eq(ring__base64_decode("AAF=", 4, out, sizeof out), -1); /* slack bits */
  ck_assert_int_eq(ring__base64_decode("AA==AAAA", 8, out, sizeof out), -1);
  ck_assert_int_eq(ring__base64_decode("AAA", 3, out, sizeof out), -1);
  ck_assert_int_eq(ring__base64_decode("AAAAAAAA", 8, out, 5), -1); /* capacity */
  ck_assert_int_eq(ring__base64_decode("A A=", 4, out, sizeof out), -1);
  ck_assert_int_eq(ring__base64_decode("A=AA", 4, out, sizeof out), -1); /* '=' inside */
  ck_assert_int_eq(ring__base64_decode("AA=A", 4, out, sizeof out), -1);
  ck_assert_int_eq(ring__base64_decode("A===", 4, out, sizeof out), -1);
  ck_assert_int_eq(ring__base64_decode("AA\xc1"
                                       "A",
                                       4, out, sizeof out),
                   -1); /* high bit */
  ck_assert_int_eq(ring__base64_decode("AAA=", 4, out, 1), -1);
  /* every alphabet character in every position of a group decodes as the encoder wrote it */
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; i++) {
    char g[5] = {al[i], al[(i + 1) % 64], al[(i + 7) % 64], al[(i + 13) % 64], '\0'};
    char back[5];
    ck_assert_int_eq(ring__base64_decode(g, 4, out, sizeof out), 3);
    ring__base64_encode(out, 3, back);
    ck_assert_str_eq(back, g);
  }
  const uint8_t in[] = {0xff, 0x00, 0x7f, 0x80, 0x01};
  char enc[16];
  for (size_t n = 0; n <= sizeof in; n++) {
    ring__base64_encode(in, n, enc);
    ck_assert_uint_eq(strlen(enc), ring__base64_encoded_len(n));
    ck_assert_int_eq(ring__base64_decode(enc, strlen(enc), out, sizeof out), (long)n);
    ck_assert(memcmp(in, out, n) == 0);
  }
}
END_TEST

START_TEST(strerror_names_every_code) {
#define CHECK_CODE(name, num, msg) ck_assert_str_eq(ring_strerror(RING_##name), msg);
  RING_ERRNO_MAP(CHECK_CODE)
#undef CHECK_CODE
  ck_assert_str_eq(ring_strerror(RING_OK), "success");
  ck_assert_str_eq(ring_strerror(-9999), "unknown error");
}
END_TEST

static Suite *codec_suite(void) {
  Suite *s = suite_create("codec");
  TCase *tc = tcase_create("codec");
  tcase_add_test(tc, round_trip_byte_for_byte);
  tcase_add_test(tc, encoding_shape);
  tcase_add_test(tc, round_trip_large);
  tcase_add_test(tc, err_json);
  tcase_add_test(tc, err_too_big);
  tcase_add_test(tc, err_format);
  tcase_add_test(tc, err_fields);
  tcase_add_test(tc, err_version);
  tcase_add_test(tc, err_tokens);
  tcase_add_test(tc, err_replicas);
  tcase_add_test(tc, err_hash);
  tcase_add_test(tc, err_node_id);
  tcase_add_test(tc, err_node_record);
  tcase_add_test(tc, err_owners);
  tcase_add_test(tc, err_index);
  tcase_add_test(tc, err_dup_owner);
  tcase_add_test(tc, err_checksum);
  tcase_add_test(tc, err_pending);
  tcase_add_test(tc, encode_rejects_unsealed);
  tcase_add_test(tc, base64_strict);
  tcase_add_test(tc, strerror_names_every_code);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(codec_suite()); }
