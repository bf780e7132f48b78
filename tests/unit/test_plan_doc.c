/*
 * test_plan_doc.c: plan documents and runs (proto/plan.md, plan_doc.h):
 * make -> encode -> decode -> compute gives the same plan; tampered
 * documents are refused; refused plans and first placements as documents;
 * the digest as specified; canonical encodings; every decoder error with
 * its code and field; runs and their cursors.
 */
#include "plan_doc.h"
#include "sizes.h"
#include "ringx.h"
#include "json_edit.h"
#include "check_main.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---------------------------------------------------------------- fixtures */

/* n nodes "n<i>" in zones z<i % zones>, racks r<i>, weight 1, active;
 * T=256, R=3, zone hard, rack best effort. */
static rk_plan_input input_make(uint32_t n, uint32_t zones) {
  rk_plan_input in = {.tokens = 256,
                      .replicas = 3,
                      .seed = 7,
                      .moves_per_node = 4,
                      .moves_per_wave = 64,
                      .n_nodes = n};
  snprintf(in.failure_domain, sizeof in.failure_domain, "zone");
  snprintf(in.best_effort, sizeof in.best_effort, "rack");
  in.nodes = calloc(n, sizeof *in.nodes);
  for (uint32_t i = 0; i < n; i++) {
    rk_node *nd = &in.nodes[i];
    char zone[16], rack[16];
    snprintf(nd->id, sizeof nd->id, "n%u", i);
    snprintf(nd->addr, sizeof nd->addr, "127.0.0.1:%u", 7100 + i);
    snprintf(zone, sizeof zone, "z%u", i % zones);
    snprintf(rack, sizeof rack, "r%u", i);
    ck_assert_int_eq(rk_labels_set(&nd->labels, "zone", zone, NULL), RING_OK);
    ck_assert_int_eq(rk_labels_set(&nd->labels, "rack", rack, NULL), RING_OK);
    nd->weight = 1.0;
    nd->state = RING_NODE_ACTIVE;
  }
  return in;
}

/* A doc that must make a plan. */
static ring_plan *make_ok(const ring_table *base, const rk_plan_input *in, rk_plan_doc *d) {
  ring_plan *p = NULL;
  ring_error err = {0};
  int rc = rk_plan_doc_make(base, base ? NULL : "demo", in, 1796000000000ull, d, &p, &err);
  ck_assert_msg(rc == RING_OK, "%s", err.message);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq(d->n_violations, 0);
  return p;
}

static char *encode(const rk_plan_doc *d, const ring_plan *p) {
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_plan_doc_encode(d, p, &json, &len), RING_OK);
  ck_assert_uint_eq(strlen(json), len);
  return json;
}

static void decode_ok(const char *json, rk_plan_doc *d) {
  ring_error err = {0};
  ck_assert_msg(rk_plan_doc_decode(json, strlen(json), d, &err) == RING_OK, "%s", err.message);
}

static void same_moves(const ring_plan *a, const ring_plan *b) {
  ck_assert_uint_eq(ring_plan_move_count(a), ring_plan_move_count(b));
  const ring_move *x = ring_plan_moves(a), *y = ring_plan_moves(b);
  for (uint32_t i = 0; i < ring_plan_move_count(a); i++) {
    ck_assert_uint_eq(x[i].token, y[i].token);
    ck_assert_uint_eq(x[i].slot, y[i].slot);
    ck_assert_uint_eq(x[i].from, y[i].from);
    ck_assert_uint_eq(x[i].to, y[i].to);
    ck_assert_uint_eq(x[i].source, y[i].source);
    ck_assert_uint_eq(x[i].wave, y[i].wave);
  }
}

/* The document's JSON recomputes to p: decode, compute against base. */
static void recomputes(const char *json, const ring_table *base, const ring_plan *p) {
  rk_plan_doc d;
  decode_ok(json, &d);
  ring_plan *q = NULL;
  ring_error err = {0};
  ck_assert_msg(rk_plan_doc_compute(&d, base, &q, &err) == RING_OK, "%s", err.message);
  char a[RK_DIGEST_LEN + 1], b[RK_DIGEST_LEN + 1];
  ck_assert_int_eq(rk_plan_digest(p, a), RING_OK);
  ck_assert_int_eq(rk_plan_digest(q, b), RING_OK);
  ck_assert_str_eq(a, b);
  ck_assert_str_eq(d.digest, a);
  same_moves(p, q);
  ring_plan_free(q);
  rk_plan_doc_free(&d);
}

/* ------------------------------------------------------------- documents */

START_TEST(first_placement) {
  rk_plan_input in = input_make(6, 3);
  rk_plan_doc d;
  ring_plan *p = make_ok(NULL, &in, &d);
  ck_assert_uint_eq(d.base_version, 0);
  ck_assert_str_eq(d.cluster, "demo");
  ck_assert_uint_eq(d.created_ms, 1796000000000ull);
  /* the planner places every slot in the target at once: no moves, no waves */
  ck_assert_uint_eq(d.moves_total, 0);
  ck_assert_uint_eq(ring_plan_move_count(p), 0);
  ck_assert_uint_eq(d.waves, 0);
  ck_assert_uint_eq(ring_table_version(ring_plan_target(p)), 1);
  ck_assert_uint_eq(strlen(d.digest), RK_DIGEST_LEN);
  ck_assert(strncmp(d.digest, "xxh3-128:", 9) == 0);
  ck_assert_uint_eq(strlen(d.id), RK_PLAN_ID_LEN);
  ck_assert(strncmp(d.id, d.digest + 9, RK_PLAN_ID_LEN) == 0);
  ck_assert_ptr_ne(d.input.nodes, in.nodes); /* a copy */
  ck_assert_str_eq(d.input.nodes[5].id, "n5");
  char *json = encode(&d, p);
  ck_assert_ptr_nonnull(strstr(json, "\"base_version\":0,"));
  ck_assert_ptr_nonnull(strstr(json, "\"digest\":\"xxh3-128:"));
  ck_assert_ptr_nonnull(strstr(json, "\"moves\":[]}"));
  recomputes(json, NULL, p);
  free(json);
  ring_plan_free(p);
  rk_plan_doc_free(&d);
  rk_plan_input_free(&in);
}
END_TEST

START_TEST(rebalance_recomputes) {
  rk_plan_input in = input_make(6, 3);
  rk_plan_doc first, d;
  ring_plan *p0 = make_ok(NULL, &in, &first);
  const ring_table *base = ring_plan_target(p0);
  rk_plan_input_free(&in);
  in = input_make(8, 3); /* two nodes join */
  in.nodes[2].weight = 2.5;
  ring_plan *p = make_ok(base, &in, &d);
  ck_assert_uint_eq(d.base_version, 1);
  ck_assert_uint_gt(d.moves_total, 0);
  ck_assert_uint_ge(d.moves_total, d.lower_bound);
  ck_assert_str_ne(d.id, first.id);
  char *json = encode(&d, p);
  ck_assert_ptr_nonnull(strstr(json, "\"from\":\"n"));
  ck_assert_ptr_nonnull(strstr(json, "\"source\":\"n"));
  recomputes(json, base, p);
  /* same input, same document (but for created_ms) */
  rk_plan_doc again;
  ring_plan *p2 = make_ok(base, &in, &again);
  ck_assert_str_eq(again.digest, d.digest);
  ring_plan_free(p2);
  rk_plan_doc_free(&again);
  /* the wrong base */
  ring_plan *q = (ring_plan *)0x1;
  ring_error err;
  ck_assert_int_eq(rk_plan_doc_compute(&d, NULL, &q, &err), RING_EVERSION);
  ck_assert_ptr_nonnull(strstr(err.message, "base_version"));
  ck_assert_int_eq(rk_plan_doc_compute(&d, ring_plan_target(p), &q, &err), RING_EVERSION);
  ck_assert_int_eq(rk_plan_doc_compute(&first, base, &q, &err), RING_EVERSION);
  ck_assert_ptr_eq(q, (ring_plan *)0x1);
  free(json);
  ring_plan_free(p);
  ring_plan_free(p0);
  rk_plan_doc_free(&d);
  rk_plan_doc_free(&first);
  rk_plan_input_free(&in);
}
END_TEST

/* A plan balanced by bytes keeps its sizes (quantised) in the document and
 * recomputes from them exactly; the sizes are checked on decode. */
START_TEST(bytes_balance_recomputes) {
  rk_plan_input in = input_make(6, 3);
  rk_plan_doc first, d;
  ring_plan *p0 = make_ok(NULL, &in, &first);
  const ring_table *base = ring_plan_target(p0);
  uint64_t bytes[256];
  for (uint32_t t = 0; t < 256; t++)
    bytes[t] = t % 16 == 0 ? 40000 : 1000 + 37 * t; /* a few arcs 10-40x the rest */
  ck_assert_int_eq(rk_plan_input_weigh(&in, bytes), RING_OK);
  ck_assert_int_eq(in.balance, RING_BALANCE_BYTES);
  ring_plan *p = make_ok(base, &in, &d);
  ck_assert_uint_gt(d.moves_total, 0); /* token-balanced, but not by bytes */
  char *json = encode(&d, p);
  ck_assert_ptr_nonnull(strstr(json, "\"balance\":\"bytes\",\"arc_sizes\":\""));
  recomputes(json, base, p);
  rk_plan_doc back;
  decode_ok(json, &back);
  ck_assert_int_eq(back.input.balance, RING_BALANCE_BYTES);
  ck_assert_mem_eq(back.input.arc_q, in.arc_q, 256);
  rk_plan_input copy;
  ck_assert_int_eq(rk_plan_input_copy(&back.input, &copy), RING_OK);
  ck_assert_mem_eq(copy.arc_w, back.input.arc_w, 256 * sizeof *copy.arc_w);
  rk_plan_input_free(&copy);
  rk_plan_doc_free(&back);
  /* sizes that are not T bytes, or balance without sizes, are refused */
  char *cut = strstr(json, "\"arc_sizes\":\"") + 13;
  cut[0] = cut[0] == 'A' ? 'B' : 'A'; /* still 256 bytes: another plan's sizes */
  rk_plan_doc other;
  ring_error err;
  ck_assert_int_eq(rk_plan_doc_decode(json, strlen(json), &other, &err), RING_OK);
  ring_plan *q = NULL;
  ck_assert_int_eq(rk_plan_doc_compute(&other, base, &q, &err), RING_ECHECKSUM);
  rk_plan_doc_free(&other);
  char *bad = strstr(json, "\"arc_sizes\":\"") + 13;
  memmove(bad, bad + 4, strlen(bad + 4) + 1); /* 3 bytes short */
  ck_assert_int_eq(rk_plan_doc_decode(json, strlen(json), &other, &err), RING_EFIELD);
  ck_assert_ptr_nonnull(strstr(err.message, "arc_sizes"));
  /* quantisation: the mean is 128, steps are exact integers, 0 is empty */
  uint8_t q8[4];
  uint64_t four[4] = {0, 100, 100, 100};
  rk_sizes_quantize(four, 4, q8);
  ck_assert_uint_eq(q8[0], 0);
  ck_assert_uint_eq(rk_size_weight(0), 0);
  ck_assert_uint_eq(rk_size_weight(128), 1u << 24);
  for (unsigned k = 1; k < 255; k++)
    ck_assert_uint_lt(rk_size_weight((uint8_t)k), rk_size_weight((uint8_t)(k + 1)));
  ck_assert_uint_eq(q8[1], q8[2]);
  free(json);
  ring_plan_free(p);
  ring_plan_free(p0);
  rk_plan_doc_free(&d);
  rk_plan_doc_free(&first);
  rk_plan_input_free(&in);
}
END_TEST

START_TEST(canonical_encoding) {
  rk_plan_input in = input_make(5, 5);
  in.nodes[1].weight = 0.1;
  in.nodes[3].state = RING_NODE_DRAINING;
  rk_plan_doc d, e;
  ring_plan *p = make_ok(NULL, &in, &d);
  char *bare = encode(&d, NULL), *full = encode(&d, p);
  ck_assert_ptr_null(strstr(bare, "\"moves\""));
  ck_assert(strncmp(bare, full, strlen(bare) - 1) == 0); /* moves come last */
  decode_ok(full, &e);                                   /* moves are skipped */
  char *again = encode(&e, NULL);
  ck_assert_str_eq(bare, again);
  ck_assert_ptr_nonnull(strstr(bare, "{\"format\":\"ringkeeper.plan.v1\",\"id\":\""));
  ck_assert_ptr_nonnull(strstr(bare, "\"input\":{\"tokens\":256,\"replicas\":3,\"seed\":7,"
                                     "\"failure_domain\":\"zone\",\"best_effort\":\"rack\","
                                     "\"moves_per_node\":4,\"moves_per_domain\":0,"
                                     "\"moves_per_wave\":64,\"nodes\":[{\"id\":\"n0\","
                                     "\"addr\":\"127.0.0.1:7100\",\"labels\":{\"zone\":\"z0\","
                                     "\"rack\":\"r0\"},\"weight\":1.0,\"state\":\"active\"}"));
  ck_assert_ptr_nonnull(strstr(bare, "\"weight\":0.1,\"state\":\"active\""));
  ck_assert_ptr_nonnull(strstr(bare, "\"state\":\"draining\""));
  ck_assert_ptr_nonnull(strstr(bare, "\"violations\":[],\"digest\":\"xxh3-128:"));
  free(bare);
  free(full);
  free(again);
  ring_plan_free(p);
  rk_plan_doc_free(&d);
  rk_plan_doc_free(&e);
  rk_plan_input_free(&in);
}
END_TEST

/* XXH3-128 over the target's table encoding, then 15 bytes per move. */
START_TEST(digest_as_specified) {
  rk_plan_input in = input_make(4, 4);
  rk_plan_doc d;
  ring_plan *p = make_ok(NULL, &in, &d);
  char *table;
  size_t tlen;
  ck_assert_int_eq(ring_table_encode(ring_plan_target(p), &table, &tlen), RING_OK);
  const uint32_t n = ring_plan_move_count(p);
  const ring_move *m = ring_plan_moves(p);
  uint8_t *buf = malloc(tlen + 15 * (size_t)n), *o = buf + tlen;
  memcpy(buf, table, tlen);
  for (uint32_t i = 0; i < n; i++, o += 15) {
    uint32_t f[6] = {m[i].token, m[i].slot, m[i].from, m[i].to, m[i].source, m[i].wave};
    int width[6] = {4, 1, 2, 2, 2, 4}, at = 0;
    for (int k = 0; k < 6; k++)
      for (int b = 0; b < width[k]; b++)
        o[at++] = (uint8_t)(f[k] >> (8 * b));
  }
  XXH128_hash_t h = XXH3_128bits(buf, tlen + 15 * (size_t)n);
  char want[RK_DIGEST_LEN + 1];
  snprintf(want, sizeof want, "xxh3-128:%016llx%016llx", (unsigned long long)h.high64,
           (unsigned long long)h.low64);
  ck_assert_str_eq(d.digest, want);
  free(buf);
  free(table);
  ring_plan_free(p);
  rk_plan_doc_free(&d);
  rk_plan_input_free(&in);
}
END_TEST

/* ------------------------------------------------------------- tampering */

/* The doc's JSON with the field at `path` ("a.b", "a.nodes[2].c") set to raw
 * (NULL removes it); the result is malloc()'ed. */
static char *edit(const char *json, const char *path, const char *raw) {
  cJSON *root = cJSON_Parse(json);
  ck_assert_ptr_nonnull(root);
  cJSON *obj = root;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", path);
  char *seg = buf, *dot;
  while ((dot = strchr(seg, '.')) != NULL) {
    *dot = '\0';
    char *br = strchr(seg, '[');
    if (br)
      *br = '\0';
    obj = cJSON_GetObjectItemCaseSensitive(obj, seg);
    if (br)
      obj = cJSON_GetArrayItem(obj, atoi(br + 1));
    ck_assert_msg(obj != NULL, "no %s in the document", path);
    seg = dot + 1;
  }
  json_set_raw(obj, seg, raw);
  char *out = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return out;
}

static void expect_tampered(const char *json, const ring_table *base, const char *path,
                            const char *raw, const char *fragment) {
  char *text = edit(json, path, raw);
  rk_plan_doc d;
  decode_ok(text, &d);
  ring_plan *p = (ring_plan *)0x1;
  ring_error err = {0};
  ck_assert_int_eq(rk_plan_doc_compute(&d, base, &p, &err), RING_ECHECKSUM);
  ck_assert_ptr_eq(p, (ring_plan *)0x1);
  ck_assert_msg(strstr(err.message, fragment) != NULL, "message \"%s\" lacks \"%s\"", err.message,
                fragment);
  rk_plan_doc_free(&d);
  free(text);
}

START_TEST(tampered_documents_refused) {
  rk_plan_input in = input_make(6, 3);
  rk_plan_doc first, d;
  ring_plan *p0 = make_ok(NULL, &in, &first);
  const ring_table *base = ring_plan_target(p0);
  rk_plan_input_free(&in);
  in = input_make(8, 3);
  ring_plan *p = make_ok(base, &in, &d);
  char *json = encode(&d, NULL);
  expect_tampered(json, base, "input.nodes[0].weight", "2.0", "digest");
  expect_tampered(json, base, "input.nodes[7].state", "\"draining\"", "digest");
  expect_tampered(json, base, "input.moves_per_wave", "3", "digest");
  expect_tampered(json, base, "moves_total", "5", "moves_total");
  expect_tampered(json, base, "waves", "99", "waves");
  expect_tampered(json, base, "lower_bound", "1", "lower_bound");
  /* a first placement's digest covers its target table */
  char *fj = encode(&first, NULL);
  expect_tampered(fj, NULL, "input.nodes[0].weight", "2.0", "digest");
  expect_tampered(fj, NULL, "input.seed", "8", "digest");
  expect_tampered(fj, NULL, "cluster", "\"other\"", "digest");
  free(fj);
  /* a digest edited along with its id still has to match the plan */
  char digest[64], id[32];
  snprintf(digest, sizeof digest, "\"xxh3-128:%s\"", "00000000000000000000000000000000");
  snprintf(id, sizeof id, "\"%s\"", "0000000000000000");
  char *step = edit(json, "digest", digest);
  expect_tampered(step, base, "id", id, "digest");
  free(step);
  /* an input the planner refuses does not match a digest either */
  expect_tampered(json, base, "input.nodes[0].labels", "{\"rack\":\"r0\"}", "no longer plans");
  free(json);
  ring_plan_free(p);
  ring_plan_free(p0);
  rk_plan_doc_free(&d);
  rk_plan_doc_free(&first);
  rk_plan_input_free(&in);
}
END_TEST

/* ------------------------------------------------------------ refusals */

START_TEST(refused_plan_is_a_document) {
  rk_plan_input in = input_make(6, 2); /* two zones cannot hold three replicas */
  rk_plan_doc d, e;
  ring_plan *p = (ring_plan *)0x1;
  ring_error err = {0};
  ck_assert_int_eq(rk_plan_doc_make(NULL, "demo", &in, 5, &d, &p, &err), RING_OK);
  ck_assert_ptr_null(p);
  ck_assert_uint_eq(d.n_violations, 1);
  ck_assert_ptr_nonnull(strstr(d.violations[0], "only 2 distinct \"zone\" values"));
  ck_assert_str_eq(d.digest, "");
  ck_assert_str_eq(d.id, "");
  ck_assert_uint_eq(d.moves_total, 0);
  char *json = encode(&d, NULL);
  ck_assert_ptr_nonnull(strstr(json, "\"id\":\"\","));
  ck_assert_ptr_nonnull(strstr(json, "\"violations\":[\"only 2 distinct \\\"zone\\\" values"));
  ck_assert_ptr_nonnull(strstr(json, "\"digest\":\"\"}"));
  decode_ok(json, &e);
  ck_assert_str_eq(e.violations[0], d.violations[0]);
  char *again = encode(&e, NULL);
  ck_assert_str_eq(json, again);
  ck_assert_int_eq(rk_plan_doc_compute(&e, NULL, &p, &err), RING_EPLAN);
  ck_assert_ptr_nonnull(strstr(err.message, "only 2 distinct"));
  rk_run r;
  ck_assert_int_eq(rk_run_start(&e, 1, &r), RING_EINVAL);
  free(json);
  free(again);
  rk_plan_doc_free(&d);
  rk_plan_doc_free(&e);
  rk_plan_input_free(&in);
}
END_TEST

START_TEST(make_errors) {
  rk_plan_input in = input_make(6, 3);
  rk_plan_doc d;
  memset(&d, 0xa5, sizeof d);
  const rk_plan_doc before = d;
  ring_plan *p = (ring_plan *)0x1;
  ring_error err = {0};
  snprintf(in.nodes[3].id, sizeof in.nodes[3].id, "n1"); /* bad input is an error, not a refusal */
  ck_assert_int_eq(rk_plan_doc_make(NULL, "demo", &in, 5, &d, &p, &err), RING_EDUPNODE);
  ck_assert_ptr_nonnull(strstr(err.message, "nodes[3]"));
  snprintf(in.nodes[3].id, sizeof in.nodes[3].id, "n3");
  in.tokens = 100;
  ck_assert_int_eq(rk_plan_doc_make(NULL, "demo", &in, 5, &d, &p, &err), RING_ETOKENS);
  ck_assert_ptr_nonnull(strstr(err.message, "input.tokens"));
  in.tokens = 256;
  ck_assert_int_eq(rk_plan_doc_make(NULL, NULL, &in, 5, &d, &p, &err), RING_EINVAL);
  ck_assert_int_eq(rk_plan_doc_make(NULL, "Demo", &in, 5, &d, &p, &err), RING_EINVAL);
  ck_assert(memcmp(&d, &before, sizeof d) == 0);
  ck_assert_ptr_eq(p, (ring_plan *)0x1);
  /* a base of another cluster */
  rk_plan_doc first;
  ring_plan *p0 = make_ok(NULL, &in, &first);
  ck_assert_int_eq(rk_plan_doc_make(ring_plan_target(p0), "other", &in, 5, &d, &p, &err),
                   RING_EINVAL);
  ring_plan_free(p0);
  rk_plan_doc_free(&first);
  rk_plan_input_free(&in);
}
END_TEST

START_TEST(input_helpers) {
  rk_plan_input in = input_make(3, 3), copy;
  ck_assert_int_eq(rk_plan_input_copy(&in, &copy), RING_OK);
  ck_assert_ptr_ne(copy.nodes, in.nodes);
  ck_assert(memcmp(copy.nodes, in.nodes, 3 * sizeof *in.nodes) == 0);
  ring_node_spec *specs;
  const char **labels;
  ck_assert_int_eq(rk_plan_input_specs(&in, &specs, &labels), RING_OK);
  ck_assert_ptr_eq(specs[2].id, in.nodes[2].id);
  ck_assert_uint_eq(specs[2].n_labels, 2);
  ck_assert_str_eq(specs[2].label_values[1], "r2");
  ck_assert_str_eq(specs[1].label_keys[0], "zone");
  ring_plan_config cfg;
  rk_plan_input_config(&in, "demo", &cfg);
  ck_assert_str_eq(cfg.cluster, "demo");
  ck_assert_uint_eq(cfg.tokens, 256);
  ck_assert_str_eq(cfg.best_effort, "rack");
  ck_assert_uint_eq(cfg.max_moves_per_wave, 64);
  ck_assert_ptr_null(cfg.arc_bytes);
  free(specs);
  free(labels);
  rk_plan_input empty = {0};
  ck_assert_int_eq(rk_plan_input_specs(&empty, &specs, &labels), RING_OK);
  free(specs);
  free(labels);
  rk_plan_input_free(&copy);
  ck_assert_ptr_null(copy.nodes);
  rk_plan_input_free(&in);
  rk_plan_input_free(NULL);
  rk_plan_doc_free(NULL);
}
END_TEST

/* ------------------------------------------------------- decoder errors */

typedef int (*decode_fn)(const char *json, size_t len, ring_error *err);

/* A decoder run through a poisoned output that must survive a failure. */
#define CHECKED_DECODER(name, type, decode, release)                                               \
  static int name(const char *json, size_t len, ring_error *err) {                                 \
    type *v = malloc(sizeof *v), *before = malloc(sizeof *v);                                      \
    memset(v, 0xa5, sizeof *v);                                                                    \
    memcpy(before, v, sizeof *v);                                                                  \
    int rc = decode(json, len, v, err);                                                            \
    if (rc != RING_OK)                                                                             \
      ck_assert_msg(memcmp(v, before, sizeof *v) == 0, "output written on failure");               \
    else                                                                                           \
      release(v);                                                                                  \
    free(v);                                                                                       \
    free(before);                                                                                  \
    return rc;                                                                                     \
  }

CHECKED_DECODER(dec_doc, rk_plan_doc, rk_plan_doc_decode, rk_plan_doc_free)
CHECKED_DECODER(dec_run, rk_run, rk_run_decode, rk_run_free)

/* Decodes good with one edit from an exact-size buffer; checks the code and
 * that the message names the field. */
static void expect(decode_fn fn, const char *good, const char *path, const char *raw, int code,
                   const char *fragment) {
  char *text = path ? edit(good, path, raw) : NULL;
  const char *t = text ? text : good;
  size_t n = strlen(t);
  char *copy = malloc(n ? n : 1);
  memcpy(copy, t, n);
  ring_error err = {0};
  int rc = fn(copy, n, &err);
  ck_assert_msg(rc == code, "want %s, got %s (%s) at %s", ring_strerror(code), ring_strerror(rc),
                err.message, path ? path : "(whole)");
  if (code != RING_OK) {
    ck_assert_int_eq(err.code, code);
    ck_assert_msg(strstr(err.message, fragment) != NULL, "message \"%s\" lacks \"%s\"", err.message,
                  fragment);
  }
  free(copy);
  free(text);
}

static char *sample_doc(void) {
  rk_plan_input in = input_make(4, 4);
  rk_plan_doc d;
  ring_plan *p = make_ok(NULL, &in, &d);
  char *json = encode(&d, NULL);
  ring_plan_free(p);
  rk_plan_doc_free(&d);
  rk_plan_input_free(&in);
  return json;
}

START_TEST(doc_decode_errors) {
  char *g = sample_doc();
  decode_fn f = dec_doc;
  expect(f, g, NULL, NULL, RING_OK, "");
  expect(f, g, "moves", "[1,\"anything\"]", RING_OK, ""); /* ignored by readers */
  expect(f, "{", NULL, NULL, RING_EJSON, "malformed");
  expect(f, g, "format", "\"ringkeeper.plan.v2\"", RING_EFORMAT, "format");
  expect(f, g, "format", NULL, RING_EFIELD, "format: missing");
  expect(f, g, "extra", "0", RING_EFIELD, "unknown field \"extra\"");
  expect(f, g, "id", "\"0123456789abcdef\"", RING_ECHECKSUM, "id");
  expect(f, g, "id", NULL, RING_EFIELD, "id: missing");
  expect(f, g, "digest", "\"xxh3-128:0123\"", RING_ECHECKSUM, "digest");
  expect(f, g, "digest", "\"xxh3-64:0123456789abcdef0123456789abcdef\"", RING_ECHECKSUM, "digest");
  expect(f, g, "violations", "[\"no\"]", RING_EFIELD, "must be \"\" for a refused plan");
  expect(f, g, "violations", "[1]", RING_EFIELD, "violations[0]");
  expect(f, g, "violations", "[\"\"]", RING_EFIELD, "violations[0]");
  expect(f, g, "violations", "{}", RING_EFIELD, "violations");
  expect(f, g, "cluster", "\"De mo\"", RING_EFIELD, "cluster");
  expect(f, g, "base_version", "-1", RING_EVERSION, "base_version");
  expect(f, g, "created_ms", "1.5", RING_EFIELD, "created_ms");
  expect(f, g, "moves_total", "4294967296", RING_EFIELD, "moves_total");
  expect(f, g, "bytes", "\"0\"", RING_EFIELD, "bytes");
  expect(f, g, "best_effort_violations", NULL, RING_EFIELD, "best_effort_violations");
  expect(f, g, "input", NULL, RING_EFIELD, "input: missing");
  expect(f, g, "input.x", "1", RING_EFIELD, "input: unknown field");
  expect(f, g, "input.tokens", "100", RING_ETOKENS, "input.tokens");
  expect(f, g, "input.replicas", "8", RING_EREPLICAS, "input.replicas");
  expect(f, g, "input.seed", "-5", RING_EFIELD, "input.seed");
  expect(f, g, "input.failure_domain", "\"ZONE\"", RING_EFIELD, "input.failure_domain");
  expect(f, g, "input.best_effort", "\"zone\"", RING_EFIELD, "input.best_effort");
  expect(f, g, "input.moves_per_wave", "-1", RING_EFIELD, "input.moves_per_wave");
  expect(f, g, "input.nodes", "{}", RING_EFIELD, "input.nodes");
  expect(f, g, "input.nodes[1].id", "\"n0\"", RING_EDUPNODE, "input.nodes[1]");
  expect(f, g, "input.nodes[2].addr", "\"x\"", RING_ENODE, "input.nodes[2]: node n2: addr");
  expect(f, g, "input.nodes[0].weight", "-1", RING_ENODE, "weight");
  expect(f, g, "input.nodes[0].state", "\"up\"", RING_ENODE, "input.nodes[0]: state");
  expect(f, g, "input.nodes[3].desired", "\"active\"", RING_EFIELD, "input.nodes[3]: unknown");
  char many[2048] = "[";
  for (int i = 0; i <= RK_VIOLATIONS_MAX; i++)
    strcat(many, i ? ",\"v\"" : "\"v\"");
  strcat(many, "]");
  expect(f, g, "violations", many, RING_EFIELD, "more than 16");
  char longest[RK_REASON_MAX + 8];
  memset(longest, 'x', sizeof longest);
  longest[0] = '[', longest[1] = '"';
  snprintf(longest + RK_REASON_MAX + 2, 6, "\"]");
  expect(f, g, "violations", longest, RING_EFIELD, "violations[0]");
  free(g);
}
END_TEST

START_TEST(doc_prefixes_refused) {
  char *g = sample_doc();
  size_t n = strlen(g);
  for (size_t cut = 0; cut < n; cut += 7) {
    char *copy = malloc(cut ? cut : 1);
    memcpy(copy, g, cut);
    ck_assert_int_eq(dec_doc(copy, cut, NULL), RING_EJSON);
    free(copy);
  }
  free(g);
}
END_TEST

/* ------------------------------------------------------------------ runs */

static char *encode_run(const rk_run *r) {
  char *json = NULL;
  size_t len = 0;
  ck_assert_int_eq(rk_run_encode(r, &json, &len), RING_OK);
  ck_assert_uint_eq(strlen(json), len);
  return json;
}

/* A run of a 20-move plan (a rebalance) with moves 0, 3 and 9 done, 4 and 17
 * in flight, pending at version 3. */
static void sample_run(rk_run *r, ring_plan **base_plan) {
  rk_plan_input in = input_make(6, 3);
  rk_plan_doc first;
  *base_plan = make_ok(NULL, &in, &first);
  rk_plan_doc_free(&first);
  rk_plan_input_free(&in);
  in = input_make(7, 3);
  rk_plan_doc d;
  ring_plan *p = make_ok(ring_plan_target(*base_plan), &in, &d);
  ck_assert_uint_gt(d.moves_total, 17);
  ck_assert_int_eq(rk_run_start(&d, 1000, r), RING_OK);
  ring_plan_free(p);
  rk_plan_doc_free(&d);
  rk_plan_input_free(&in);
  rk_bit_set(r->cursor.done, 0, true);
  rk_bit_set(r->cursor.done, 3, true);
  rk_bit_set(r->cursor.done, 9, true);
  rk_bit_set(r->cursor.inflight, 4, true);
  rk_bit_set(r->cursor.inflight, 17, true);
  r->cursor.moves_done = 3;
  r->cursor.pending = true;
  r->cursor.version = 3;
  r->cursor.wave = 1;
  r->cursor.bytes_done = 12345;
  r->updated_ms = 2000;
}

START_TEST(run_start_and_round_trip) {
  ring_plan *base;
  rk_run r, s;
  sample_run(&r, &base);
  ck_assert_int_eq(r.state, RK_RUN_ACTIVE);
  ck_assert_uint_eq(r.approved_ms, 1000);
  ck_assert_uint_eq(r.finished_ms, 0);
  ck_assert_str_eq(r.reason, "");
  char *a = encode_run(&r);
  ck_assert_ptr_nonnull(strstr(a, "{\"format\":\"ringkeeper.run.v1\",\"plan\":{\"format\":"
                                  "\"ringkeeper.plan.v1\""));
  ck_assert_ptr_nonnull(strstr(a, "\"state\":\"active\",\"approved_ms\":1000,\"updated_ms\":2000,"
                                  "\"finished_ms\":0,\"cursor\":{\"wave\":1,\"phase\":\"pending\","
                                  "\"version\":3,\"done\":\"CQI"));
  ck_assert_ptr_nonnull(strstr(a, "\"moves_done\":3,\"bytes_done\":12345},\"reason\":\"\"}"));
  ck_assert_ptr_null(strstr(a, "\"moves\""));
  ring_error err = {0};
  ck_assert_msg(rk_run_decode(a, strlen(a), &s, &err) == RING_OK, "%s", err.message);
  ck_assert(rk_bit(s.cursor.done, 9));
  ck_assert(!rk_bit(s.cursor.done, 4));
  ck_assert(rk_bit(s.cursor.inflight, 17));
  ck_assert_str_eq(s.plan.digest, r.plan.digest);
  char *b = encode_run(&s);
  ck_assert_str_eq(a, b);
  /* the plan inside the run still recomputes */
  ring_plan *q = NULL;
  ck_assert_int_eq(rk_plan_doc_compute(&s.plan, ring_plan_target(base), &q, &err), RING_OK);
  ring_plan_free(q);
  /* a finished run, with a reason that needs escaping */
  s.state = RK_RUN_FAILED;
  s.finished_ms = 3000;
  s.cursor.pending = false;
  memset(s.cursor.inflight, 0, (s.plan.moves_total + 7) / 8);
  snprintf(s.reason, sizeof s.reason, "receiver \"n6\" down\n");
  char *c = encode_run(&s);
  ck_assert_ptr_nonnull(strstr(c, "\"reason\":\"receiver \\\"n6\\\" down\\u000a\"}"));
  rk_run t;
  ck_assert_msg(rk_run_decode(c, strlen(c), &t, &err) == RING_OK, "%s", err.message);
  ck_assert_str_eq(t.reason, s.reason);
  ck_assert_int_eq(t.state, RK_RUN_FAILED);
  free(a);
  free(b);
  free(c);
  rk_run_free(&r);
  rk_run_free(&s);
  rk_run_free(&t);
  rk_run_free(NULL);
  ring_plan_free(base);
}
END_TEST

START_TEST(run_of_no_moves) {
  rk_plan_input in = input_make(6, 3);
  rk_plan_doc first, d;
  ring_plan *p0 = make_ok(NULL, &in, &first);
  ring_plan *p = make_ok(ring_plan_target(p0), &in, &d); /* nothing to do */
  ck_assert_uint_eq(d.moves_total, 0);
  rk_run r, s;
  ck_assert_int_eq(rk_run_start(&d, 1, &r), RING_OK);
  ck_assert_ptr_null(r.cursor.done);
  ck_assert_uint_eq(r.cursor.version, 1);
  char *a = encode_run(&r);
  ck_assert_ptr_nonnull(strstr(a, "\"done\":\"\",\"inflight\":\"\""));
  ck_assert_int_eq(rk_run_decode(a, strlen(a), &s, NULL), RING_OK);
  ck_assert_ptr_null(s.cursor.inflight);
  free(a);
  rk_run_free(&r);
  rk_run_free(&s);
  ring_plan_free(p);
  ring_plan_free(p0);
  rk_plan_doc_free(&d);
  rk_plan_doc_free(&first);
  rk_plan_input_free(&in);
}
END_TEST

START_TEST(run_states) {
  static const char *names[] = {"active", "paused", "cancelling", "done", "failed", "cancelled"};
  for (int i = 0; i < 6; i++) {
    ck_assert_str_eq(rk_run_state_name((rk_run_state)i), names[i]);
    ck_assert_int_eq(rk_run_state_parse(names[i]), i);
  }
  ck_assert_int_eq(rk_run_state_parse("running"), RING_EINVAL);
}
END_TEST

START_TEST(run_decode_errors) {
  ring_plan *base;
  rk_run r;
  sample_run(&r, &base);
  char *g = encode_run(&r);
  const uint32_t moves = r.plan.moves_total;
  decode_fn f = dec_run;
  expect(f, g, NULL, NULL, RING_OK, "");
  expect(f, g, "format", "\"ringkeeper.plan.v1\"", RING_EFORMAT, "format");
  expect(f, g, "state", "\"running\"", RING_EFIELD, "state");
  expect(f, g, "finished_ms", NULL, RING_EFIELD, "finished_ms: missing");
  expect(f, g, "approved_ms", "-1", RING_EFIELD, "approved_ms");
  expect(f, g, "reason", "7", RING_EFIELD, "reason");
  expect(f, g, "plan", "[]", RING_EFIELD, "plan");
  expect(f, g, "plan.input.tokens", "3", RING_ETOKENS, "plan.input.tokens");
  expect(f, g, "plan.moves", "[]", RING_OK, "");
  expect(f, g, "plan.violations", "[\"no\"]", RING_EFIELD, "plan.digest");
  expect(f, g, "cursor", NULL, RING_EFIELD, "cursor: missing");
  expect(f, g, "cursor.extra", "0", RING_EFIELD, "cursor: unknown field");
  expect(f, g, "cursor.phase", "\"cutover\"", RING_EFIELD, "cursor.phase");
  expect(f, g, "cursor.phase", "\"settled\"", RING_EFIELD, "in flight while settled");
  expect(f, g, "cursor.wave", "1000", RING_EFIELD, "cursor.wave");
  expect(f, g, "cursor.version", "-1", RING_EVERSION, "cursor.version");
  expect(f, g, "cursor.moves_done", "2", RING_EFIELD, "cursor.moves_done");
  expect(f, g, "cursor.done", "\"AAAA\"", RING_EFIELD, "cursor.done");
  expect(f, g, "cursor.bytes_done", NULL, RING_EFIELD, "cursor.bytes_done");
  /* bitmaps of the right length but wrong content */
  uint8_t bits[64] = {0};
  char b64[128], quoted[140];
  const size_t nb = (moves + 7) / 8;
  bits[0] = 1 << 4; /* move 4 is in flight: done as well is a contradiction */
  bits[0] |= 1 | 1 << 3, bits[1] = 1 << 1;
  ring__base64_encode(bits, nb, b64);
  snprintf(quoted, sizeof quoted, "\"%s\"", b64);
  char *step = edit(g, "cursor.moves_done", "4");
  expect(f, step, "cursor.done", quoted, RING_EFIELD, "move 4 is already done");
  free(step);
  memset(bits, 0, sizeof bits);
  if (moves % 8 != 0) { /* a bit past the last move */
    bits[nb - 1] = 0x80;
    ring__base64_encode(bits, nb, b64);
    snprintf(quoted, sizeof quoted, "\"%s\"", b64);
    expect(f, g, "cursor.inflight", quoted, RING_EFIELD, "past move");
  }
  ring__base64_encode(bits, nb, b64);
  b64[strlen(b64) - 2] = '!';
  snprintf(quoted, sizeof quoted, "\"%s\"", b64);
  expect(f, g, "cursor.inflight", quoted, RING_EFIELD, "not canonical base64");
  free(g);
  /* a refused plan cannot run */
  rk_plan_input in = input_make(6, 2);
  rk_plan_doc d;
  ring_plan *none;
  ck_assert_int_eq(rk_plan_doc_make(NULL, "demo", &in, 5, &d, &none, NULL), RING_OK);
  char *refused = encode(&d, NULL);
  cJSON *root = cJSON_Parse(refused);
  cJSON *run = cJSON_Parse("{\"format\":\"ringkeeper.run.v1\",\"state\":\"active\","
                           "\"approved_ms\":1,\"updated_ms\":1,\"finished_ms\":0,"
                           "\"cursor\":{\"wave\":0,\"phase\":\"settled\",\"version\":0,"
                           "\"done\":\"\",\"inflight\":\"\",\"moves_done\":0,\"bytes_done\":0},"
                           "\"reason\":\"\"}");
  cJSON_AddItemToObject(run, "plan", root);
  char *text = cJSON_PrintUnformatted(run);
  expect(f, text, NULL, NULL, RING_EPLAN, "plan.violations");
  cJSON_Delete(run);
  free(text);
  free(refused);
  rk_plan_doc_free(&d);
  rk_plan_input_free(&in);
  rk_run_free(&r);
  ring_plan_free(base);
}
END_TEST

START_TEST(run_encode_refuses_invalid) {
  ring_plan *base;
  rk_run r;
  sample_run(&r, &base);
  char *json = NULL;
  rk_run bad = r;
  bad.state = (rk_run_state)9;
  ck_assert_int_eq(rk_run_encode(&bad, &json, NULL), RING_EINVAL);
  bad = r;
  bad.cursor.done = NULL;
  ck_assert_int_eq(rk_run_encode(&bad, &json, NULL), RING_EINVAL);
  ck_assert_ptr_null(json);
  rk_run_free(&r);
  ring_plan_free(base);
}
END_TEST

static Suite *plan_doc_suite(void) {
  Suite *s = suite_create("plan_doc");
  TCase *tc = tcase_create("plan_doc");
  tcase_add_test(tc, first_placement);
  tcase_add_test(tc, rebalance_recomputes);
  tcase_add_test(tc, bytes_balance_recomputes);
  tcase_add_test(tc, canonical_encoding);
  tcase_add_test(tc, digest_as_specified);
  tcase_add_test(tc, tampered_documents_refused);
  tcase_add_test(tc, refused_plan_is_a_document);
  tcase_add_test(tc, make_errors);
  tcase_add_test(tc, input_helpers);
  tcase_add_test(tc, doc_decode_errors);
  tcase_add_test(tc, doc_prefixes_refused);
  tcase_add_test(tc, run_start_and_round_trip);
  tcase_add_test(tc, run_of_no_moves);
  tcase_add_test(tc, run_states);
  tcase_add_test(tc, run_decode_errors);
  tcase_add_test(tc, run_encode_refuses_invalid);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(plan_doc_suite()); }
