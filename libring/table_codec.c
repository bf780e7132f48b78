/*
 * table_codec.c: the ringkeeper.table.v1 JSON encoding (proto/table.md).
 *
 * Sections: decoding helpers (typed field access); decoding of the header,
 * nodes, owners, pending entries; the encoder.
 *
 * The decoder parses with cJSON, then builds the table through the same
 * builder API an embedder uses, so the structural rules live in one place
 * (libring/table_validate.c). It rejects unknown and repeated fields: v1 is
 * a closed format, and a field we do not understand may change meaning.
 */
#include "codec_int.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_FORMAT "ringkeeper.table.v1"

/* ----------------------------------------------------------------- header */

static const char *const top_keys[] = {"format",   "cluster", "version",        "tokens",
                                       "replicas", "hash",    "failure_domain", "nodes",
                                       "owners",   "pending", "checksum"};

static int decode_hash(const cJSON *root, uint64_t *seed, ring_error *err) {
  static const char *const keys[] = {"name", "seed"};
  const cJSON *h = ring__json_field(root, "hash");
  if (!cJSON_IsObject(h))
    return ring__err(err, RING_EFIELD, "hash: %s", h ? "must be an object" : "missing");
  int rc = ring__json_check_keys(h, "hash: ", keys, 2, err);
  const char *name = "";
  if (rc == RING_OK && (rc = ring__json_string(h, "hash.", "name", &name, err)) == RING_OK &&
      strcmp(name, HASH_NAME) != 0)
    rc = ring__err(err, RING_EHASH, "hash.name: \"%.64s\" unsupported (want \"" HASH_NAME "\")",
                   name);
  if (rc == RING_OK && !ring__json_as_uint(ring__json_field(h, "seed"), RING_VERSION_MAX, seed))
    rc = ring__err(err, RING_EHASH, "hash.seed: must be an integer in [0, 2^53-1]");
  return rc;
}

static int decode_header(const cJSON *root, ring_table **out, ring_error *err) {
  int rc = ring__json_check_keys(root, "", top_keys, sizeof top_keys / sizeof *top_keys, err);
  const char *format = "", *cluster = "", *fd = "";
  if (rc == RING_OK && (rc = ring__json_string(root, "", "format", &format, err)) == RING_OK &&
      strcmp(format, TABLE_FORMAT) != 0)
    rc = ring__err(err, RING_EFORMAT, "format: \"%.64s\" (want \"" TABLE_FORMAT "\")", format);
  if (rc == RING_OK)
    rc = ring__json_string(root, "", "cluster", &cluster, err);
  if (rc == RING_OK)
    rc = ring__json_string(root, "", "failure_domain", &fd, err);
  uint64_t version = 0, tokens = 0, replicas = 0, seed = 0;
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", 0, RING_VERSION_MAX, RING_EVERSION, &version, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "tokens", 0, RING_TOKENS_MAX, RING_ETOKENS, &tokens, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "replicas", 0, RING_REPLICAS_MAX, RING_EREPLICAS, &replicas, err);
  if (rc == RING_OK)
    rc = decode_hash(root, &seed, err);
  if (rc != RING_OK)
    return rc;
  ring_table_params p = {cluster, fd, version, seed, (uint32_t)tokens, (uint32_t)replicas};
  return ring_table_new(&p, out, err);
}

/* ------------------------------------------------------------------ nodes */

static int decode_node(ring_table *t, const cJSON *node, uint32_t i, ring_error *err) {
  char where[40];
  snprintf(where, sizeof where, "nodes[%u]: ", i);
  const char *keys[RING_LABELS_MAX], *values[RING_LABELS_MAX];
  ring_node_spec s;
  int rc = ring__node_record_decode(node, where, keys, values, &s, err);
  if (rc != RING_OK)
    return rc;
  ring_error inner;
  rc = ring_table_add_node(t, &s, NULL, &inner);
  return rc == RING_OK ? rc : ring__err(err, rc, "%s%s", where, inner.message);
}

static int decode_nodes(ring_table *t, const cJSON *root, ring_error *err) {
  const cJSON *nodes = ring__json_field(root, "nodes");
  if (!cJSON_IsArray(nodes))
    return ring__err(err, RING_EFIELD, "nodes: %s", nodes ? "must be an array" : "missing");
  uint32_t i = 0;
  for (const cJSON *n = nodes->child; n != NULL; n = n->next, i++) {
    int rc = decode_node(t, n, i, err);
    if (rc != RING_OK)
      return rc;
  }
  return RING_OK;
}

/* ----------------------------------------------------- owners and pending */

static int decode_owners(ring_table *t, const cJSON *root, ring_error *err) {
  const char *b64 = "";
  int rc = ring__json_string(root, "", "owners", &b64, err);
  if (rc != RING_OK)
    return rc;
  const size_t slots = (size_t)t->view.tokens * t->view.replicas;
  const size_t want = ring__base64_encoded_len(slots * 2), have = strlen(b64);
  if (have != want)
    return ring__err(err, RING_EOWNERS, "owners: %zu base64 characters, T*R=%zu needs %zu", have,
                     slots, want);
  uint8_t *raw = (uint8_t *)t->owners; /* decode in place, then fix byte order */
  if (ring__base64_decode(b64, have, raw, slots * 2) != (long)(slots * 2))
    return ring__err(err, RING_EOWNERS, "owners: not canonical base64");
  for (size_t s = 0; s < slots; s++)
    t->owners[s] = (uint16_t)(raw[2 * s] | raw[2 * s + 1] << 8);
  uint64_t want_sum = 0, have_sum = ring__owners_checksum(t);
  if ((rc = ring__json_checksum(root, "checksum", &want_sum, err)) != RING_OK)
    return rc;
  if (want_sum != have_sum)
    return ring__err(err, RING_ECHECKSUM,
                     "checksum: owners hash to %016" PRIx64 ", table says %016" PRIx64, have_sum,
                     want_sum);
  return RING_OK;
}

static int decode_pending(ring_table *t, const cJSON *root, ring_error *err) {
  const cJSON *pending = ring__json_field(root, "pending");
  if (!cJSON_IsArray(pending))
    return ring__err(err, RING_EFIELD, "pending: %s", pending ? "must be an array" : "missing");
  uint64_t prev = 0;
  uint32_t i = 0;
  for (const cJSON *e = pending->child; e != NULL; e = e->next, i++) {
    int rc = ring__pending_entry_decode(t, e, i, &prev, err);
    if (rc != RING_OK)
      return rc;
  }
  return RING_OK;
}

int ring_table_decode(const char *json, size_t len, ring_table **out, ring_error *err) {
  if (json == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_table_decode: NULL argument");
  cJSON *root = NULL;
  ring_table *t = NULL;
  int rc = ring__json_parse_object(json, len, "table", &root, err);
  if (rc == RING_OK)
    rc = decode_header(root, &t, err);
  if (rc == RING_OK)
    rc = decode_nodes(t, root, err);
  if (rc == RING_OK)
    rc = decode_owners(t, root, err);
  if (rc == RING_OK)
    rc = decode_pending(t, root, err);
  if (rc == RING_OK)
    rc = ring_table_seal(t, err);
  cJSON_Delete(root);
  if (rc != RING_OK) {
    ring_table_free(t);
    return rc;
  }
  *out = t;
  return RING_OK;
}

/* ---------------------------------------------------------------- encoder */

static void encode_owners(ring__sbuf *b, const ring_table *t) {
  const size_t slots = (size_t)t->view.tokens * t->view.replicas;
  uint8_t *raw = malloc(slots * 2);
  size_t n64 = ring__base64_encoded_len(slots * 2);
  ring__sb_reserve(b, n64 + 16);
  if (raw == NULL || b->oom) {
    free(raw);
    b->oom = true;
    return;
  }
  for (size_t s = 0; s < slots; s++) {
    raw[2 * s] = (uint8_t)t->owners[s];
    raw[2 * s + 1] = (uint8_t)(t->owners[s] >> 8);
  }
  ring__sb_puts(b, ",\"owners\":\"");
  ring__base64_encode(raw, slots * 2, b->p + b->len);
  b->len += n64;
  ring__sb_puts(b, "\"");
  free(raw);
}

int ring_table_encode(const ring_table *t, char **json, size_t *len) {
  if (t == NULL || json == NULL || !t->sealed)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b,
                  "{\"format\":\"" TABLE_FORMAT "\",\"cluster\":\"%s\",\"version\":%" PRIu64
                  ",\"tokens\":%u,\"replicas\":%u,\"hash\":{\"name\":\"" HASH_NAME
                  "\",\"seed\":%" PRIu64 "},\"failure_domain\":\"%s\",\"nodes\":[",
                  t->cluster, t->version, t->view.tokens, t->view.replicas, t->view.seed,
                  t->failure_domain);
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    if (i)
      ring__sb_puts(&b, ",");
    ring__node_record_encode(&b, &t->nodes[i]);
  }
  ring__sb_puts(&b, "]");
  encode_owners(&b, t);
  ring__sb_puts(&b, ",\"pending\":[");
  for (uint32_t i = 0; i < t->n_pending; i++)
    ring__sb_printf(&b, "%s[%u,%u,%u]", i ? "," : "", t->pending[i].token, t->pending[i].slot,
                    t->pending[i].node);
  ring__sb_printf(&b, "],\"checksum\":\"" HASH_NAME ":%016" PRIx64 "\"}", ring__owners_checksum(t));
  if (b.oom) {
    free(b.p);
    return RING_ENOMEM;
  }
  *json = b.p;
  if (len)
    *len = b.len;
  return RING_OK;
}
