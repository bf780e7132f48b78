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
#include "ring_int.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_FORMAT "ringkeeper.table.v1"
#define HASH_NAME "xxh3-64"

/* ------------------------------------------------------ decoding helpers */

/* Checks that obj has only the listed keys, each at most once. */
static int check_keys(const cJSON *obj, const char *where, const char *const *keys,
                      size_t n_keys, ring_error *err) {
  unsigned seen = 0;
  for (const cJSON *c = obj->child; c != NULL; c = c->next) {
    size_t k = 0;
    while (k < n_keys && strcmp(c->string, keys[k]) != 0)
      k++;
    if (k == n_keys)
      return ring__err(err, RING_EFIELD, "%sunknown field \"%.64s\"", where, c->string);
    if (seen & (1u << k))
      return ring__err(err, RING_EFIELD, "%sfield \"%s\" given twice", where, keys[k]);
    seen |= 1u << k;
  }
  return RING_OK;
}

/* A JSON number that is an integer in [0, max]. */
static bool as_uint(const cJSON *item, uint64_t max, uint64_t *out) {
  if (!cJSON_IsNumber(item))
    return false;
  double v = item->valuedouble;
  if (!isfinite(v) || v < 0 || v != floor(v) || v > (double)max)
    return false;
  *out = (uint64_t)v;
  return true;
}

static const cJSON *field(const cJSON *obj, const char *name) {
  return cJSON_GetObjectItemCaseSensitive(obj, name);
}

static int get_string(const cJSON *obj, const char *where, const char *name,
                      const char **out, ring_error *err) {
  const cJSON *it = field(obj, name);
  if (!cJSON_IsString(it))
    return ring__err(err, RING_EFIELD, "%s%s: %s", where, name,
                     it ? "must be a string" : "missing");
  *out = it->valuestring;
  return RING_OK;
}

static int get_uint(const cJSON *obj, const char *name, uint64_t max, int code, uint64_t *out,
                    ring_error *err) {
  const cJSON *it = field(obj, name);
  if (it == NULL)
    return ring__err(err, RING_EFIELD, "%s: missing", name);
  if (!as_uint(it, max, out))
    return ring__err(err, cJSON_IsNumber(it) ? code : RING_EFIELD,
                     "%s: must be an integer in [0, %" PRIu64 "]", name, max);
  return RING_OK;
}

/* ----------------------------------------------------------------- header */

static const char *const top_keys[] = {"format", "cluster", "version", "tokens",
                                       "replicas", "hash", "failure_domain", "nodes",
                                       "owners", "pending", "checksum"};

static int decode_hash(const cJSON *root, uint64_t *seed, ring_error *err) {
  static const char *const keys[] = {"name", "seed"};
  const cJSON *h = field(root, "hash");
  if (!cJSON_IsObject(h))
    return ring__err(err, RING_EFIELD, "hash: %s", h ? "must be an object" : "missing");
  int rc = check_keys(h, "hash: ", keys, 2, err);
  const char *name = "";
  if (rc == RING_OK && (rc = get_string(h, "hash.", "name", &name, err)) == RING_OK &&
      strcmp(name, HASH_NAME) != 0)
    rc = ring__err(err, RING_EHASH, "hash.name: \"%.64s\" unsupported (want \"" HASH_NAME "\")",
                   name);
  if (rc == RING_OK && !as_uint(field(h, "seed"), RING_VERSION_MAX, seed))
    rc = ring__err(err, RING_EHASH, "hash.seed: must be an integer in [0, 2^53-1]");
  return rc;
}

static int decode_header(const cJSON *root, ring_table **out, ring_error *err) {
  int rc = check_keys(root, "", top_keys, sizeof top_keys / sizeof *top_keys, err);
  const char *format = "", *cluster = "", *fd = "";
  if (rc == RING_OK && (rc = get_string(root, "", "format", &format, err)) == RING_OK &&
      strcmp(format, TABLE_FORMAT) != 0)
    rc = ring__err(err, RING_EFORMAT, "format: \"%.64s\" (want \"" TABLE_FORMAT "\")", format);
  if (rc == RING_OK)
    rc = get_string(root, "", "cluster", &cluster, err);
  if (rc == RING_OK)
    rc = get_string(root, "", "failure_domain", &fd, err);
  uint64_t version = 0, tokens = 0, replicas = 0, seed = 0;
  if (rc == RING_OK)
    rc = get_uint(root, "version", RING_VERSION_MAX, RING_EVERSION, &version, err);
  if (rc == RING_OK)
    rc = get_uint(root, "tokens", RING_TOKENS_MAX, RING_ETOKENS, &tokens, err);
  if (rc == RING_OK)
    rc = get_uint(root, "replicas", RING_REPLICAS_MAX, RING_EREPLICAS, &replicas, err);
  if (rc == RING_OK)
    rc = decode_hash(root, &seed, err);
  if (rc != RING_OK)
    return rc;
  ring_table_params p = {cluster, fd, version, seed, (uint32_t)tokens, (uint32_t)replicas};
  return ring_table_new(&p, out, err);
}

/* ------------------------------------------------------------------ nodes */

static int decode_labels(const cJSON *labels, const char *where, const char **keys,
                         const char **values, uint32_t *n, ring_error *err) {
  if (!cJSON_IsObject(labels))
    return ring__err(err, RING_ENODE, "%slabels: %s", where,
                     labels ? "must be an object" : "missing");
  uint32_t i = 0;
  for (const cJSON *l = labels->child; l != NULL; l = l->next, i++) {
    if (i == RING_LABELS_MAX)
      return ring__err(err, RING_ENODE, "%slabels: more than %d", where, RING_LABELS_MAX);
    if (!cJSON_IsString(l))
      return ring__err(err, RING_ENODE, "%slabels.%.63s: must be a string", where, l->string);
    keys[i] = l->string;
    values[i] = l->valuestring;
  }
  *n = i;
  return RING_OK;
}

static int decode_node(ring_table *t, const cJSON *node, uint32_t i, ring_error *err) {
  static const char *const keys[] = {"id", "addr", "labels", "weight", "state"};
  char where[40];
  snprintf(where, sizeof where, "nodes[%u]: ", i);
  if (!cJSON_IsObject(node))
    return ring__err(err, RING_ENODE, "%smust be an object", where);
  const char *lk[RING_LABELS_MAX], *lv[RING_LABELS_MAX], *state = "";
  ring_node_spec s = {.label_keys = lk, .label_values = lv};
  int rc = check_keys(node, where, keys, 5, err);
  if (rc == RING_OK && (rc = get_string(node, where, "id", &s.id, err)) != RING_OK)
    rc = ring__err(err, RING_ENODEID, "%sid: missing or not a string", where);
  if (rc == RING_OK)
    rc = get_string(node, where, "addr", &s.addr, err);
  if (rc == RING_OK)
    rc = decode_labels(field(node, "labels"), where, lk, lv, &s.n_labels, err);
  const cJSON *w = field(node, "weight");
  if (rc == RING_OK && !cJSON_IsNumber(w))
    rc = ring__err(err, RING_ENODE, "%sweight: missing or not a number", where);
  if (rc == RING_OK && (rc = get_string(node, where, "state", &state, err)) == RING_OK &&
      ring_node_state_parse(state) < 0)
    rc = ring__err(err, RING_ENODE, "%sstate: \"%.32s\" unknown", where, state);
  if (rc != RING_OK)
    return rc;
  s.weight = w->valuedouble;
  s.state = (ring_node_state)ring_node_state_parse(state);
  ring_error inner;
  rc = ring_table_add_node(t, &s, NULL, &inner);
  return rc == RING_OK ? rc : ring__err(err, rc, "%s%s", where, inner.message);
}

static int decode_nodes(ring_table *t, const cJSON *root, ring_error *err) {
  const cJSON *nodes = field(root, "nodes");
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

static int decode_checksum(const cJSON *root, uint64_t *want, ring_error *err) {
  const char *s = "";
  int rc = get_string(root, "", "checksum", &s, err);
  if (rc != RING_OK)
    return rc;
  static const char prefix[] = HASH_NAME ":";
  const size_t plen = sizeof prefix - 1;
  bool ok = strlen(s) == plen + 16 && strncmp(s, prefix, plen) == 0;
  uint64_t v = 0;
  for (size_t i = plen; ok && i < plen + 16; i++) {
    char c = s[i];
    ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    v = v << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  if (!ok)
    return ring__err(err, RING_ECHECKSUM,
                     "checksum: \"%.40s\" is not " HASH_NAME ":<16 lowercase hex digits>", s);
  *want = v;
  return RING_OK;
}

static int decode_owners(ring_table *t, const cJSON *root, ring_error *err) {
  const char *b64 = "";
  int rc = get_string(root, "", "owners", &b64, err);
  if (rc != RING_OK)
    return rc;
  const size_t slots = (size_t)t->view.tokens * t->view.replicas;
  const size_t want = ring__base64_encoded_len(slots * 2), have = strlen(b64);
  if (have != want)
    return ring__err(err, RING_EOWNERS, "owners: %zu base64 characters, T*R=%zu needs %zu",
                     have, slots, want);
  uint8_t *raw = (uint8_t *)t->owners; /* decode in place, then fix byte order */
  if (ring__base64_decode(b64, have, raw, slots * 2) != (long)(slots * 2))
    return ring__err(err, RING_EOWNERS, "owners: not canonical base64");
  for (size_t s = 0; s < slots; s++)
    t->owners[s] = (uint16_t)(raw[2 * s] | raw[2 * s + 1] << 8);
  uint64_t want_sum = 0, have_sum = ring__owners_checksum(t);
  if ((rc = decode_checksum(root, &want_sum, err)) != RING_OK)
    return rc;
  if (want_sum != have_sum)
    return ring__err(err, RING_ECHECKSUM, "checksum: owners hash to %016" PRIx64
                     ", table says %016" PRIx64, have_sum, want_sum);
  return RING_OK;
}

static int decode_pending_entry(ring_table *t, const cJSON *e, uint32_t i, uint64_t *prev,
                                ring_error *err) {
  uint64_t v[3];
  const cJSON *c = cJSON_IsArray(e) ? e->child : NULL;
  int k = 0;
  for (; c != NULL && k < 3; c = c->next, k++)
    if (!as_uint(c, k == 0 ? RING_TOKENS_MAX - 1 : k == 1 ? RING_REPLICAS_MAX - 1
                                                          : RING_NODES_MAX - 1, &v[k]))
      return ring__err(err, RING_EPENDING, "pending[%u][%d]: not a valid %s", i, k,
                       k == 0 ? "token" : k == 1 ? "slot" : "node index");
  if (k != 3 || c != NULL)
    return ring__err(err, RING_EPENDING, "pending[%u]: must be [token, slot, node_index]", i);
  uint64_t key = v[0] << 8 | v[1];
  if (i > 0 && key <= *prev)
    return ring__err(err, RING_EPENDING, "pending[%u]: not in ascending (token, slot) order",
                     i);
  *prev = key;
  if (ring_table_add_pending(t, (uint32_t)v[0], (uint32_t)v[1], (uint16_t)v[2]) != RING_OK)
    return ring__err(err, v[0] >= t->view.tokens || v[1] >= t->view.replicas ? RING_EPENDING
                                                                                : RING_ENOMEM,
                     "pending[%u]: token %" PRIu64 " slot %" PRIu64 " out of range", i, v[0],
                     v[1]);
  return RING_OK;
}

static int decode_pending(ring_table *t, const cJSON *root, ring_error *err) {
  const cJSON *pending = field(root, "pending");
  if (!cJSON_IsArray(pending))
    return ring__err(err, RING_EFIELD, "pending: %s", pending ? "must be an array" : "missing");
  uint64_t prev = 0;
  uint32_t i = 0;
  for (const cJSON *e = pending->child; e != NULL; e = e->next, i++) {
    int rc = decode_pending_entry(t, e, i, &prev, err);
    if (rc != RING_OK)
      return rc;
  }
  return RING_OK;
}

static bool only_space(const char *p, const char *end) {
  for (; p < end; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
      return false;
  return true;
}

int ring_table_decode(const char *json, size_t len, ring_table **out, ring_error *err) {
  if (json == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_table_decode: NULL argument");
  if (len > RING_TABLE_JSON_MAX)
    return ring__err(err, RING_ETOOBIG, "table of %zu bytes exceeds %u", len,
                     RING_TABLE_JSON_MAX);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  if (root == NULL || end == NULL || !only_space(end, json + len)) {
    size_t at = end ? (size_t)(end - json) : 0;
    cJSON_Delete(root);
    return ring__err(err, RING_EJSON, "malformed JSON near byte %zu", at);
  }
  ring_table *t = NULL;
  int rc = cJSON_IsObject(root) ? RING_OK
                                : ring__err(err, RING_EJSON, "top level must be an object");
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

/* The shortest decimal that reads back as exactly w, always with a '.' or
 * exponent so that it reads as a real ("1.0", not "1"). */
static void format_weight(double w, char *out, size_t cap) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(out, cap, "%.*g", prec, w);
    if (strtod(out, NULL) == w)
      break;
  }
  if (strpbrk(out, ".e") == NULL)
    strncat(out, ".0", cap - strlen(out) - 1);
}

static void encode_node(ring__sbuf *b, const ring__node *n) {
  char w[40];
  ring__sb_printf(b, "{\"id\":\"%s\",\"addr\":\"%s\",\"labels\":{", n->id, n->addr);
  for (uint32_t l = 0; l < n->n_labels; l++)
    ring__sb_printf(b, "%s\"%s\":\"%s\"", l ? "," : "", n->labels[l].key, n->labels[l].value);
  format_weight(n->weight, w, sizeof w);
  ring__sb_printf(b, "},\"weight\":%s,\"state\":\"%s\"}", w, ring_node_state_name(n->state));
}

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
    encode_node(&b, &t->nodes[i]);
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
