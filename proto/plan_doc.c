/*
 * plan_doc.c: ringkeeper.plan.v1 documents (proto/plan.md, plan_doc.h):
 * the planner's input, its decoding and encoding, the digest of a computed
 * plan, and making a document / recomputing and checking one. Runs are in
 * plan_run.c.
 *
 * Sections: the input; the digest; decoding; encoding; making and checking.
 */
#include "proto_int.h"
#include "plan_doc.h"
#include "sizes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define PLAN_FORMAT "ringkeeper.plan.v1"
#define DIGEST_PREFIX "xxh3-128:"
#define N_KEYS(a) (sizeof(a) / sizeof *(a))

/* -------------------------------------------------------------- the input */

void rk_plan_input_free(rk_plan_input *in) {
  if (in == NULL)
    return;
  free(in->nodes);
  free(in->arc_q);
  free(in->arc_w);
  in->nodes = NULL;
  in->n_nodes = 0;
  in->arc_q = NULL;
  in->arc_w = NULL;
}

/* arc_w from arc_q: the exact integers the planner weighs. */
static int weights_from_q(rk_plan_input *in) {
  free(in->arc_w);
  if ((in->arc_w = malloc(in->tokens * sizeof *in->arc_w)) == NULL)
    return RING_ENOMEM;
  bool any = false;
  for (uint32_t t = 0; t < in->tokens; t++) {
    in->arc_w[t] = rk_size_weight(in->arc_q[t]);
    any |= in->arc_w[t] > 0;
  }
  return any ? RING_OK : RING_EINVAL;
}

int rk_plan_input_weigh(rk_plan_input *in, const uint64_t *bytes) {
  if (in == NULL || bytes == NULL || in->tokens == 0)
    return RING_EINVAL;
  free(in->arc_q);
  if ((in->arc_q = malloc(in->tokens)) == NULL)
    return RING_ENOMEM;
  rk_sizes_quantize(bytes, in->tokens, in->arc_q);
  in->balance = RING_BALANCE_BYTES;
  return weights_from_q(in);
}

int rk_plan_input_copy(const rk_plan_input *in, rk_plan_input *out) {
  if (in == NULL || out == NULL || (in->n_nodes > 0 && in->nodes == NULL))
    return RING_EINVAL;
  rk_node *nodes = NULL;
  if (in->n_nodes > 0) {
    if ((nodes = malloc(in->n_nodes * sizeof *nodes)) == NULL)
      return RING_ENOMEM;
    memcpy(nodes, in->nodes, in->n_nodes * sizeof *nodes);
  }
  *out = *in;
  out->nodes = nodes;
  out->arc_q = NULL;
  out->arc_w = NULL;
  if (in->balance == RING_BALANCE_BYTES && in->arc_q != NULL) {
    out->arc_q = malloc(in->tokens);
    int rc = out->arc_q ? RING_OK : RING_ENOMEM;
    if (rc == RING_OK) {
      memcpy(out->arc_q, in->arc_q, in->tokens);
      rc = weights_from_q(out);
    }
    if (rc != RING_OK) {
      rk_plan_input_free(out);
      return rc;
    }
  }
  return RING_OK;
}

void rk_plan_input_config(const rk_plan_input *in, const char *cluster, ring_plan_config *cfg) {
  *cfg = (ring_plan_config){.cluster = cluster,
                            .tokens = in->tokens,
                            .replicas = in->replicas,
                            .seed = in->seed,
                            .failure_domain = in->failure_domain,
                            .best_effort = in->best_effort,
                            .max_moves_per_node = in->moves_per_node,
                            .max_moves_per_domain = in->moves_per_domain,
                            .max_moves_per_wave = in->moves_per_wave,
                            .balance = in->balance,
                            .balance_sizes = in->arc_w};
}

int rk_plan_input_specs(const rk_plan_input *in, ring_node_spec **specs, const char ***labels) {
  if (in == NULL || specs == NULL || labels == NULL || (in->n_nodes > 0 && in->nodes == NULL))
    return RING_EINVAL;
  const size_t n = in->n_nodes ? in->n_nodes : 1;
  ring_node_spec *s = malloc(n * sizeof *s);
  const char **l = malloc(n * 2 * RING_LABELS_MAX * sizeof *l);
  if (s == NULL || l == NULL) {
    free(s);
    free(l);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < in->n_nodes; i++) {
    const char **keys = &l[(size_t)i * 2 * RING_LABELS_MAX];
    rk_node_spec(&in->nodes[i], keys, keys + RING_LABELS_MAX, &s[i]);
  }
  *specs = s;
  *labels = l;
  return RING_OK;
}

/* The settings' rules are the config's (proto/etcd.md): checked through
 * rk_config_validate, the message prefixed with "input.". */
static int check_settings(const rk_plan_input *in, ring_error *err) {
  rk_config c;
  rk_config_defaults(&c);
  c.tokens = in->tokens;
  c.replicas = in->replicas;
  c.seed = in->seed;
  memcpy(c.failure_domain, in->failure_domain, sizeof c.failure_domain);
  memcpy(c.best_effort, in->best_effort, sizeof c.best_effort);
  ring_error inner;
  int rc = rk_config_validate(&c, &inner);
  return rc == RING_OK ? rc : ring__err(err, rc, "input.%s", inner.message);
}

/* ------------------------------------------------------------- the digest */

/* A move as the digest hashes it: 15 bytes, little-endian. */
static void move_bytes(const ring_move *m, uint8_t b[15]) {
  const uint32_t v32[2] = {m->token, m->wave};
  const uint16_t v16[3] = {m->from, m->to, m->source};
  for (int i = 0; i < 4; i++)
    b[i] = (uint8_t)(v32[0] >> (8 * i));
  b[4] = (uint8_t)m->slot;
  for (int k = 0; k < 3; k++) {
    b[5 + 2 * k] = (uint8_t)v16[k];
    b[6 + 2 * k] = (uint8_t)(v16[k] >> 8);
  }
  for (int i = 0; i < 4; i++)
    b[11 + i] = (uint8_t)(v32[1] >> (8 * i));
}

int rk_plan_digest(const ring_plan *p, char out[RK_DIGEST_LEN + 1]) {
  char *json = NULL;
  size_t len = 0;
  if (p == NULL || out == NULL)
    return RING_EINVAL;
  int rc = ring_table_encode(ring_plan_target(p), &json, &len);
  if (rc != RING_OK)
    return rc;
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  XXH3_128bits_update(&st, json, len);
  free(json);
  const ring_move *m = ring_plan_moves(p);
  const uint32_t n = ring_plan_move_count(p);
  uint8_t buf[15 * 256];
  for (uint32_t i = 0; i < n;) {
    size_t used = 0;
    for (; i < n && used < sizeof buf; i++, used += 15)
      move_bytes(&m[i], buf + used);
    XXH3_128bits_update(&st, buf, used);
  }
  XXH128_hash_t h = XXH3_128bits_digest(&st);
  snprintf(out, RK_DIGEST_LEN + 1, DIGEST_PREFIX "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64,
           (uint64_t)h.low64);
  return RING_OK;
}

/* --------------------------------------------------------------- decoding */

static int decode_input_nodes(const cJSON *input, rk_plan_input *in, ring_error *err) {
  const cJSON *arr = ring__json_field(input, "nodes");
  if (!cJSON_IsArray(arr))
    return ring__err(err, RING_EFIELD, "input.nodes: %s", arr ? "must be an array" : "missing");
  int n = cJSON_GetArraySize(arr);
  if (n > (int)RING_NODES_MAX)
    return ring__err(err, RING_ENODE, "input.nodes: %d nodes, at most %u", n, RING_NODES_MAX);
  ring_table *scratch = NULL;
  int rc = rk__scratch_table(&scratch, err);
  if (rc == RING_OK && n > 0 && (in->nodes = calloc((size_t)n, sizeof *in->nodes)) == NULL)
    rc = ring__err(err, RING_ENOMEM, "input.nodes: out of memory");
  uint32_t i = 0;
  for (const cJSON *e = arr->child; rc == RING_OK && e != NULL; e = e->next, i++) {
    char where[48];
    snprintf(where, sizeof where, "input.nodes[%u]: ", i);
    rc = rk__plan_node_decode(e, where, scratch, &in->nodes[i], err);
  }
  in->n_nodes = i;
  ring_table_free(scratch);
  return rc;
}

/* balance and arc_sizes: both absent (tokens), or "bytes" with the sizes
 * as base64 of exactly `tokens` bytes. */
static int decode_balance(const cJSON *o, rk_plan_input *in, ring_error *err) {
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "balance");
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arc_sizes");
  in->balance = RING_BALANCE_TOKENS;
  if (b == NULL && a == NULL)
    return RING_OK;
  if (!cJSON_IsString(b) || strcmp(b->valuestring, "bytes") != 0 || !cJSON_IsString(a))
    return ring__err(err, RING_EFIELD, "input.balance: \"bytes\" with input.arc_sizes, or neither");
  size_t len = strlen(a->valuestring);
  if (len != ring__base64_encoded_len(in->tokens) || (in->arc_q = malloc(in->tokens)) == NULL ||
      ring__base64_decode(a->valuestring, len, in->arc_q, in->tokens) != (long)in->tokens)
    return ring__err(err, RING_EFIELD, "input.arc_sizes: not base64 of %u bytes", in->tokens);
  in->balance = RING_BALANCE_BYTES;
  int rc = weights_from_q(in);
  return rc == RING_OK ? rc : ring__err(err, RING_EFIELD, "input.arc_sizes: every arc is empty");
}

static int decode_input(const cJSON *root, rk_plan_input *in, ring_error *err) {
  static const char *const keys[] = {"tokens",           "replicas",       "seed",
                                     "failure_domain",   "best_effort",    "moves_per_node",
                                     "moves_per_domain", "moves_per_wave", "nodes",
                                     "balance",          "arc_sizes"};
  const cJSON *o = ring__json_object(root, "", "input", keys, N_KEYS(keys), err);
  if (o == NULL)
    return RING_EFIELD;
  int rc = ring__json_u32_at(o, "input.", "tokens", &in->tokens, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(o, "input.", "replicas", &in->replicas, err);
  if (rc == RING_OK)
    rc = ring__json_uint_at(o, "input.", "seed", 0, RING_VERSION_MAX, RING_EFIELD, &in->seed, err);
  if (rc == RING_OK)
    rc = ring__json_string_copy(o, "input.", "failure_domain", in->failure_domain,
                                sizeof in->failure_domain, err);
  if (rc == RING_OK)
    rc = ring__json_string_copy(o, "input.", "best_effort", in->best_effort, sizeof in->best_effort,
                                err);
  if (rc == RING_OK)
    rc = check_settings(in, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(o, "input.", "moves_per_node", &in->moves_per_node, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(o, "input.", "moves_per_domain", &in->moves_per_domain, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(o, "input.", "moves_per_wave", &in->moves_per_wave, err);
  if (rc == RING_OK)
    rc = decode_balance(o, in, err);
  return rc == RING_OK ? decode_input_nodes(o, in, err) : rc;
}

static int decode_violations(const cJSON *root, rk_plan_doc *d, ring_error *err) {
  const cJSON *arr = ring__json_array(root, "violations", err);
  if (arr == NULL)
    return RING_EFIELD;
  uint32_t i = 0;
  for (const cJSON *e = arr->child; e != NULL; e = e->next, i++) {
    if (i == RK_VIOLATIONS_MAX)
      return ring__err(err, RING_EFIELD, "violations: more than %d", RK_VIOLATIONS_MAX);
    if (!cJSON_IsString(e) || *e->valuestring == '\0' || strlen(e->valuestring) >= RK_REASON_MAX)
      return ring__err(err, RING_EFIELD, "violations[%u]: must be a string of 1 to %d bytes", i,
                       RK_REASON_MAX - 1);
    memcpy(d->violations[i], e->valuestring, strlen(e->valuestring) + 1);
  }
  d->n_violations = i;
  return RING_OK;
}

static bool lower_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return s[n] == '\0';
}

/* digest and id: "" for a refused plan; else the digest's form, and the id
 * its first 16 hex digits. */
static int decode_digest(const cJSON *root, rk_plan_doc *d, ring_error *err) {
  const char *digest = "", *id = "";
  const size_t plen = sizeof DIGEST_PREFIX - 1;
  int rc = ring__json_string(root, "", "digest", &digest, err);
  if (rc == RING_OK)
    rc = ring__json_string(root, "", "id", &id, err);
  if (rc != RING_OK)
    return rc;
  if (d->n_violations > 0) {
    if (*digest || *id)
      return ring__err(err, RING_EFIELD, "%s: must be \"\" for a refused plan",
                       *digest ? "digest" : "id");
    return RING_OK;
  }
  if (strncmp(digest, DIGEST_PREFIX, plen) != 0 || !lower_hex(digest + plen, 32))
    return ring__err(err, RING_ECHECKSUM,
                     "digest: \"%.48s\" is not " DIGEST_PREFIX "<32 lowercase hex digits>", digest);
  if (strlen(id) != RK_PLAN_ID_LEN || strncmp(id, digest + plen, RK_PLAN_ID_LEN) != 0)
    return ring__err(err, RING_ECHECKSUM, "id: \"%.32s\" is not the digest's first %d digits", id,
                     RK_PLAN_ID_LEN);
  memcpy(d->digest, digest, RK_DIGEST_LEN + 1);
  memcpy(d->id, id, RK_PLAN_ID_LEN + 1);
  return RING_OK;
}

static int decode_counts(const cJSON *root, rk_plan_doc *d, ring_error *err) {
  int rc = ring__json_u32_at(root, "", "moves_total", &d->moves_total, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(root, "", "lower_bound", &d->lower_bound, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(root, "", "waves", &d->waves, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "bytes", 0, RING_VERSION_MAX, RING_EFIELD, &d->bytes, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(root, "", "lost", &d->lost, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(root, "", "best_effort_violations", &d->best_effort_violations, err);
  return rc;
}

int rk_plan_doc_from_json(const cJSON *o, rk_plan_doc *out, ring_error *err) {
  static const char *const keys[] = {"format",       "id",          "cluster",
                                     "base_version", "created_ms",  "input",
                                     "moves_total",  "lower_bound", "waves",
                                     "bytes",        "lost",        "best_effort_violations",
                                     "violations",   "digest",      "moves"};
  if (o == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "rk_plan_doc_from_json: NULL argument");
  rk_plan_doc *d = calloc(1, sizeof *d); /* large: not on the stack */
  if (d == NULL)
    return ring__err(err, RING_ENOMEM, "plan: out of memory");
  int rc = ring__record_check(o, PLAN_FORMAT, keys, N_KEYS(keys), err);
  if (rc == RING_OK &&
      (rc = ring__json_string_copy(o, "", "cluster", d->cluster, sizeof d->cluster, err)) ==
          RING_OK &&
      !ring_id_valid(d->cluster))
    rc = ring__err(err, RING_EFIELD, "cluster: \"%s\" must match [a-z0-9._-]{1,63}", d->cluster);
  if (rc == RING_OK)
    rc = ring__json_uint(o, "base_version", 0, RING_VERSION_MAX, RING_EVERSION, &d->base_version,
                         err);
  if (rc == RING_OK)
    rc = ring__json_uint(o, "created_ms", 0, RING_VERSION_MAX, RING_EFIELD, &d->created_ms, err);
  if (rc == RING_OK)
    rc = decode_input(o, &d->input, err);
  if (rc == RING_OK)
    rc = decode_counts(o, d, err);
  if (rc == RING_OK)
    rc = decode_violations(o, d, err);
  if (rc == RING_OK)
    rc = decode_digest(o, d, err);
  if (rc == RING_OK)
    *out = *d;
  else
    rk_plan_doc_free(d);
  free(d);
  return rc;
}

int rk_plan_doc_decode(const char *json, size_t len, rk_plan_doc *out, ring_error *err) {
  if (json == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "rk_plan_doc_decode: NULL argument");
  cJSON *root = NULL;
  int rc = ring__json_parse_object(json, len, "plan", &root, err);
  if (rc == RING_OK)
    rc = rk_plan_doc_from_json(root, out, err);
  cJSON_Delete(root);
  return rc;
}

void rk_plan_doc_free(rk_plan_doc *d) {
  if (d != NULL)
    rk_plan_input_free(&d->input);
}

/* --------------------------------------------------------------- encoding */

static void write_input(ring__sbuf *b, const rk_plan_input *in) {
  ring__sb_printf(b, "\"input\":{\"tokens\":%u,\"replicas\":%u,\"seed\":%" PRIu64 ",", in->tokens,
                  in->replicas, in->seed);
  ring__sb_puts(b, "\"failure_domain\":");
  ring__sb_json_string(b, in->failure_domain);
  ring__sb_puts(b, ",\"best_effort\":");
  ring__sb_json_string(b, in->best_effort);
  ring__sb_printf(b, ",\"moves_per_node\":%u,\"moves_per_domain\":%u,\"moves_per_wave\":%u,",
                  in->moves_per_node, in->moves_per_domain, in->moves_per_wave);
  if (in->balance == RING_BALANCE_BYTES && in->arc_q != NULL) {
    char *b64 = malloc(ring__base64_encoded_len(in->tokens) + 1);
    if (b64 == NULL) {
      b->oom = true;
      return;
    }
    ring__base64_encode(in->arc_q, in->tokens, b64);
    ring__sb_printf(b, "\"balance\":\"bytes\",\"arc_sizes\":\"%s\",", b64);
    free(b64);
  }
  ring__sb_puts(b, "\"nodes\":[");
  for (uint32_t i = 0; i < in->n_nodes; i++) {
    ring__sb_puts(b, i ? "," : "");
    rk__plan_node_encode(b, &in->nodes[i]);
  }
  ring__sb_puts(b, "]}");
}

/* A node of the plan's target by index, or null. */
static void write_node_ref(ring__sbuf *b, const ring_table *t, uint16_t node) {
  const char *id = node == RING_NODE_NONE ? NULL : ring_table_node_id(t, node);
  if (id == NULL)
    ring__sb_puts(b, "null");
  else
    ring__sb_json_string(b, id);
}

static void write_moves(ring__sbuf *b, const ring_plan *p) {
  const ring_table *t = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  ring__sb_puts(b, ",\"moves\":[");
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    ring__sb_printf(b, "%s{\"token\":%u,\"slot\":%u,\"from\":", i ? "," : "", m[i].token,
                    m[i].slot);
    write_node_ref(b, t, m[i].from);
    ring__sb_puts(b, ",\"to\":");
    write_node_ref(b, t, m[i].to);
    ring__sb_puts(b, ",\"source\":");
    write_node_ref(b, t, m[i].source);
    ring__sb_printf(b, ",\"wave\":%u}", m[i].wave);
  }
  ring__sb_puts(b, "]");
}

void rk__plan_doc_write(ring__sbuf *b, const rk_plan_doc *d, const ring_plan *p) {
  ring__sb_puts(b, "{\"format\":\"" PLAN_FORMAT "\",\"id\":");
  ring__sb_json_string(b, d->id);
  ring__sb_puts(b, ",\"cluster\":");
  ring__sb_json_string(b, d->cluster);
  ring__sb_printf(b, ",\"base_version\":%" PRIu64 ",\"created_ms\":%" PRIu64 ",", d->base_version,
                  d->created_ms);
  write_input(b, &d->input);
  ring__sb_printf(b,
                  ",\"moves_total\":%u,\"lower_bound\":%u,\"waves\":%u,\"bytes\":%" PRIu64
                  ",\"lost\":%u,\"best_effort_violations\":%u,\"violations\":[",
                  d->moves_total, d->lower_bound, d->waves, d->bytes, d->lost,
                  d->best_effort_violations);
  for (uint32_t i = 0; i < d->n_violations && i < RK_VIOLATIONS_MAX; i++) {
    ring__sb_puts(b, i ? "," : "");
    ring__sb_json_string(b, d->violations[i]);
  }
  ring__sb_puts(b, "],\"digest\":");
  ring__sb_json_string(b, d->digest);
  if (p != NULL)
    write_moves(b, p);
  ring__sb_puts(b, "}");
}

int rk_plan_doc_encode(const rk_plan_doc *d, const ring_plan *p, char **json, size_t *len) {
  if (d == NULL || json == NULL || (d->input.n_nodes > 0 && d->input.nodes == NULL) ||
      memchr(d->id, '\0', sizeof d->id) == NULL ||
      memchr(d->cluster, '\0', sizeof d->cluster) == NULL ||
      memchr(d->digest, '\0', sizeof d->digest) == NULL)
    return RING_EINVAL;
  ring__sbuf b = {0};
  rk__plan_doc_write(&b, d, p);
  return ring__sb_finish(&b, json, len);
}

/* ---------------------------------------------------- making and checking */

/* Runs the planner on (base, input) with cluster for a first placement.
 * Its error, if any, is in *inner. */
static int compute(const ring_table *base, const char *cluster, const rk_plan_input *in,
                   ring_plan **plan, ring_error *inner) {
  ring_node_spec *specs = NULL;
  const char **labels = NULL;
  ring_plan_config cfg;
  rk_plan_input_config(in, cluster, &cfg);
  int rc = rk_plan_input_specs(in, &specs, &labels);
  if (rc != RING_OK)
    return ring__err(inner, rc, "input.nodes: %s", ring_strerror(rc));
  rc = ring_plan_compute(base, specs, in->n_nodes, &cfg, plan, inner);
  free(specs);
  free(labels);
  return rc;
}

/* The summary of a computed plan into d. */
static int fill_summary(rk_plan_doc *d, const ring_plan *p) {
  int rc = rk_plan_digest(p, d->digest);
  if (rc != RING_OK)
    return rc;
  memcpy(d->id, d->digest + sizeof DIGEST_PREFIX - 1, RK_PLAN_ID_LEN);
  d->id[RK_PLAN_ID_LEN] = '\0';
  d->moves_total = ring_plan_move_count(p);
  d->lower_bound = ring_plan_lower_bound(p);
  d->waves = ring_plan_wave_count(p);
  d->bytes = ring_plan_bytes(p);
  d->lost = ring_plan_lost_moves(p);
  d->best_effort_violations = ring_plan_best_effort_violations(p);
  return RING_OK;
}

int rk_plan_doc_make(const ring_table *base, const char *cluster, const rk_plan_input *input,
                     uint64_t now_ms, rk_plan_doc *out, ring_plan **plan, ring_error *err) {
  if (input == NULL || out == NULL || plan == NULL || (base == NULL && cluster == NULL) ||
      (base && cluster && strcmp(cluster, ring_table_cluster(base)) != 0))
    return ring__err(err, RING_EINVAL, "rk_plan_doc_make: bad argument");
  if (now_ms > RING_VERSION_MAX)
    return ring__err(err, RING_EINVAL, "created_ms: above 2^53-1");
  const char *name = base ? ring_table_cluster(base) : cluster;
  if (!ring_id_valid(name))
    return ring__err(err, RING_EINVAL, "cluster: \"%.63s\" must match [a-z0-9._-]{1,63}", name);
  int rc = check_settings(input, err);
  if (rc != RING_OK)
    return rc;
  rk_plan_doc *d = calloc(1, sizeof *d);
  if (d == NULL)
    return ring__err(err, RING_ENOMEM, "plan: out of memory");
  snprintf(d->cluster, sizeof d->cluster, "%s", name);
  d->base_version = base ? ring_table_version(base) : 0;
  d->created_ms = now_ms;
  ring_plan *p = NULL;
  ring_error inner = {0};
  rc = compute(base, name, input, &p, &inner);
  if (rc == RING_EPLAN) { /* a refusal is a document too */
    d->n_violations = 1;
    snprintf(d->violations[0], RK_REASON_MAX, "%s", inner.message);
    rc = RING_OK;
  } else if (rc != RING_OK) {
    ring__err(err, rc, "%s", inner.message);
  } else if ((rc = fill_summary(d, p)) != RING_OK) {
    ring__err(err, rc, "digest: %s", ring_strerror(rc));
  }
  if (rc == RING_OK && (rc = rk_plan_input_copy(input, &d->input)) != RING_OK)
    ring__err(err, rc, "input: %s", ring_strerror(rc));
  if (rc == RING_OK) {
    *out = *d;
    *plan = p;
  } else {
    ring_plan_free(p);
  }
  free(d);
  return rc;
}

/* The recomputed plan must match what the document says of it. */
static int check_summary(const rk_plan_doc *d, const ring_plan *p, ring_error *err) {
  char digest[RK_DIGEST_LEN + 1];
  int rc = rk_plan_digest(p, digest);
  if (rc != RING_OK)
    return ring__err(err, rc, "digest: %s", ring_strerror(rc));
  if (strcmp(digest, d->digest) != 0)
    return ring__err(err, RING_ECHECKSUM, "digest: the plan recomputes to %s, document says %s",
                     digest, d->digest);
  const struct {
    const char *name;
    uint32_t doc, plan;
  } counts[] = {
      {"moves_total", d->moves_total, ring_plan_move_count(p)},
      {"lower_bound", d->lower_bound, ring_plan_lower_bound(p)},
      {"waves", d->waves, ring_plan_wave_count(p)},
      {"lost", d->lost, ring_plan_lost_moves(p)},
      {"best_effort_violations", d->best_effort_violations, ring_plan_best_effort_violations(p)}};
  for (size_t i = 0; i < N_KEYS(counts); i++)
    if (counts[i].doc != counts[i].plan)
      return ring__err(err, RING_ECHECKSUM, "%s: document says %u, the plan has %u", counts[i].name,
                       counts[i].doc, counts[i].plan);
  return RING_OK;
}

static int check_base(const rk_plan_doc *d, const ring_table *base, ring_error *err) {
  if (d->n_violations > 0)
    return ring__err(err, RING_EPLAN, "plan refused: %s", d->violations[0]);
  if (base == NULL && d->base_version != 0)
    return ring__err(err, RING_EVERSION, "base_version: %" PRIu64 " but no base table",
                     d->base_version);
  if (base != NULL && ring_table_version(base) != d->base_version)
    return ring__err(err, RING_EVERSION,
                     "base_version: %" PRIu64 ", base table is version %" PRIu64, d->base_version,
                     ring_table_version(base));
  if (base != NULL && strcmp(ring_table_cluster(base), d->cluster) != 0)
    return ring__err(err, RING_EFIELD, "cluster: \"%s\", base table is of \"%s\"", d->cluster,
                     ring_table_cluster(base));
  return RING_OK;
}

int rk_plan_doc_compute(const rk_plan_doc *d, const ring_table *base, ring_plan **plan,
                        ring_error *err) {
  if (d == NULL || plan == NULL)
    return ring__err(err, RING_EINVAL, "rk_plan_doc_compute: NULL argument");
  int rc = check_base(d, base, err);
  if (rc != RING_OK)
    return rc;
  ring_plan *p = NULL;
  ring_error inner = {0};
  rc = compute(base, d->cluster, &d->input, &p, &inner);
  if (rc == RING_EPLAN) /* the document says a plan exists: it is not this input's */
    return ring__err(err, RING_ECHECKSUM, "digest: the input no longer plans: %s", inner.message);
  if (rc != RING_OK)
    return ring__err(err, rc, "%s", inner.message);
  if ((rc = check_summary(d, p, err)) != RING_OK) {
    ring_plan_free(p);
    return rc;
  }
  *plan = p;
  return RING_OK;
}
