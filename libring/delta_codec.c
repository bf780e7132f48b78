/*
 * delta_codec.c: the ringkeeper.delta.v1 encoding (proto/delta.md): what
 * changed from one table to a newer one, so that a client one version
 * behind fetches bytes in proportion to the moves, not to T.
 *
 * Sections: decoding helpers (typed field access, as in table_codec.c);
 * the base check; the node list (dropped, renumbered, replaced, appended);
 * owner changes and the checksum; pending entries; ring_delta_apply; the
 * encoder.
 *
 * ring_delta_apply builds the result through the same builder API as the
 * table decoder, and seals it, so a result obeys every rule a decoded
 * table does. Like the table, v1 is closed: unknown or repeated fields are
 * refused.
 *
 * The seal is the short one (ring__table_seal_tokens), because the base
 * is sealed: a token no owner record names has its base owners,
 * renumbered one-to-one (a dropped node's slots must all be re-owned, or
 * the delta is refused), so it is still in range and distinct; only the
 * tokens the records changed are checked again, with every pending entry
 * (the delta lists them all). The nodes' replica counts start as the
 * base's and follow each record, instead of a recount of T*R slots. The
 * result's owners checksum stays the full XXH3 over T*R slots, checked
 * against the delta's: it proves the unchanged slots too. What the short
 * seal accepts is exactly what ring_table_seal would (test_delta_codec's
 * property test holds one to the other, ring__delta_build giving the
 * unsealed result).
 */
#include "codec_int.h"
#include "delta_int.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELTA_FORMAT "ringkeeper.delta.v1"
#define RECORD_BYTES 6 /* an owner change: uint32 slot index, uint16 node; little-endian */

/* ------------------------------------------------------ decoding helpers */

/* --------------------------------------------------------------- the base */

/* State of one apply. The result is built into t (unsealed until the end). */
typedef struct apply_ctx {
  const ring_table *base;
  const cJSON *root;
  ring_table *t;       /* the result, NULL until the header is read */
  uint16_t *remap;     /* base index -> index in L, RING_NODE_NONE if dropped */
  uint32_t *kept;      /* L: base indexes of the surviving nodes, in order */
  uint32_t n_kept;     /* |L| */
  uint32_t node_count; /* nodes in the result */
  uint32_t *touched;   /* tokens an owner record changed, ascending, each once */
  uint32_t n_touched;
  ring_error *err;
} apply_ctx;

static const char *const top_keys[] = {"format",        "cluster",    "base_version", "version",
                                       "base_checksum", "node_count", "dropped",      "nodes",
                                       "owners",        "pending",    "checksum"};

/* Checks that the delta is meant for this base, then starts the result. */
static int decode_header(apply_ctx *a) {
  const ring_table *b = a->base;
  const cJSON *root = a->root;
  ring_error *err = a->err;
  int rc = ring__json_check_keys(root, "", top_keys, sizeof top_keys / sizeof *top_keys, err);
  const char *format = "", *cluster = "";
  if (rc == RING_OK && (rc = ring__json_string(root, "", "format", &format, err)) == RING_OK &&
      strcmp(format, DELTA_FORMAT) != 0)
    rc = ring__err(err, RING_EFORMAT, "format: \"%.64s\" (want \"" DELTA_FORMAT "\")", format);
  if (rc == RING_OK && (rc = ring__json_string(root, "", "cluster", &cluster, err)) == RING_OK &&
      strcmp(cluster, b->cluster) != 0)
    rc = ring__err(err, RING_EFIELD, "cluster: delta is for \"%.63s\", base table is \"%s\"",
                   cluster, b->cluster);
  uint64_t base_version = 0, version = 0, base_sum = 0, count = 0;
  if (rc == RING_OK)
    rc = ring__json_uint(root, "base_version", 1, RING_VERSION_MAX - 1, RING_EVERSION,
                         &base_version, err);
  if (rc == RING_OK && base_version != b->version)
    rc = ring__err(err, RING_EVERSION,
                   "base_version: delta applies to version %" PRIu64 ", base table is %" PRIu64,
                   base_version, b->version);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", base_version + 1, RING_VERSION_MAX, RING_EVERSION,
                         &version, err);
  if (rc == RING_OK &&
      (rc = ring__json_checksum(root, "base_checksum", &base_sum, err)) == RING_OK &&
      base_sum != ring__owners_checksum(b))
    rc = ring__err(err, RING_ECHECKSUM,
                   "base_checksum: base table's owners hash to %016" PRIx64
                   ", delta wants %016" PRIx64 " (a different table of version %" PRIu64 ")",
                   ring__owners_checksum(b), base_sum, b->version);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "node_count", 1, RING_NODES_MAX, RING_ENODE, &count, err);
  if (rc != RING_OK)
    return rc;
  a->node_count = (uint32_t)count;
  ring_table_params p = {b->cluster,   b->failure_domain, version,
                         b->view.seed, b->view.tokens,    b->view.replicas};
  return ring_table_new(&p, &a->t, err);
}

/* -------------------------------------------------------------- node list */

/* Reads `dropped` and numbers the surviving base nodes: L and remap. */
static int decode_dropped(apply_ctx *a) {
  const uint32_t n = a->base->n_nodes;
  const cJSON *dropped = ring__json_array(a->root, "dropped", a->err);
  if (dropped == NULL)
    return RING_EFIELD;
  a->remap = malloc((n ? n : 1) * sizeof *a->remap);
  a->kept = malloc((n ? n : 1) * sizeof *a->kept);
  if (a->remap == NULL || a->kept == NULL)
    return ring__err(a->err, RING_ENOMEM, "node map of %u", n);
  for (uint32_t i = 0; i < n; i++)
    a->remap[i] = 0;
  uint32_t k = 0;
  uint64_t prev = 0;
  for (const cJSON *e = dropped->child; e != NULL; e = e->next, k++) {
    uint64_t v;
    if (!ring__json_as_uint(e, RING_NODES_MAX, &v) || v >= n)
      return ring__err(a->err, RING_ENODE, "dropped[%u]: not a base node index (%u nodes)", k, n);
    if (k > 0 && v <= prev)
      return ring__err(a->err, RING_ENODE, "dropped[%u]: not in ascending order", k);
    prev = v;
    a->remap[v] = RING_NODE_NONE;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (a->remap[i] == RING_NODE_NONE)
      continue;
    a->remap[i] = (uint16_t)a->n_kept;
    a->kept[a->n_kept++] = i;
  }
  if (a->node_count < a->n_kept)
    return ring__err(a->err, RING_ENODE, "node_count: %u, but %u base nodes remain", a->node_count,
                     a->n_kept);
  return RING_OK;
}

static bool same_node(const ring_node_spec *s, const ring__node *n) {
  if (strcmp(s->id, n->id) != 0 || strcmp(s->addr, ring__node_addr(n)) != 0 ||
      s->n_labels != n->n_labels || s->weight != n->weight || s->state != n->state)
    return false;
  for (uint32_t l = 0; l < n->n_labels; l++)
    if (strcmp(s->label_keys[l], ring__label_key(n, l)) != 0 ||
        strcmp(s->label_values[l], ring__label_value(n, l)) != 0)
      return false;
  return true;
}

/* Checks one `nodes` entry's shape and index; *record is its node record. */
static int entry_index(const apply_ctx *a, const cJSON *e, uint32_t k, uint64_t prev,
                       uint32_t *index, const cJSON **record) {
  const cJSON *first = cJSON_IsArray(e) ? e->child : NULL;
  const cJSON *second = first ? first->next : NULL;
  if (second == NULL || second->next != NULL)
    return ring__err(a->err, RING_ENODE, "nodes[%u]: must be [index, node_record]", k);
  uint64_t i;
  if (!ring__json_as_uint(first, RING_NODES_MAX, &i) || i >= a->node_count)
    return ring__err(a->err, RING_ENODE, "nodes[%u][0]: not a node index below node_count %u", k,
                     a->node_count);
  if (k > 0 && i <= prev)
    return ring__err(a->err, RING_ENODE, "nodes[%u]: index %" PRIu64 " not in ascending order", k,
                     i);
  *index = (uint32_t)i;
  *record = second;
  return RING_OK;
}

/* Adds result node i: the delta's record for it (entry k), or L[i]. */
static int add_result_node(apply_ctx *a, uint32_t i, const cJSON *record, uint32_t k) {
  const char *keys[RING_LABELS_MAX], *values[RING_LABELS_MAX];
  ring_node_spec s;
  char where[48];
  ring_error inner;
  int rc;
  if (record != NULL) {
    snprintf(where, sizeof where, "nodes[%u]: ", k);
    if ((rc = ring__node_record_decode(record, where, keys, values, &s, a->err)) != RING_OK)
      return rc;
    if (i < a->n_kept && same_node(&s, &a->base->nodes[a->kept[i]]))
      return ring__err(a->err, RING_ENODE, "%sindex %u: record of %s unchanged", where, i, s.id);
  } else if (i < a->n_kept) {
    snprintf(where, sizeof where, "nodes: base node %u (now %u): ", a->kept[i], i);
    const ring__node *n = &a->base->nodes[a->kept[i]];
    s = ring__node_spec(n, n->state, keys, values);
  } else {
    return ring__err(a->err, RING_ENODE,
                     "nodes: no record for appended index %u (%u base nodes remain)", i, a->n_kept);
  }
  rc = ring_table_add_node(a->t, &s, NULL, &inner);
  return rc == RING_OK ? rc : ring__err(a->err, rc, "%s%s", where, inner.message);
}

/* Builds the result's node list: L with the delta's records merged in. */
static int decode_nodes(apply_ctx *a) {
  const cJSON *nodes = ring__json_array(a->root, "nodes", a->err);
  if (nodes == NULL)
    return RING_EFIELD;
  const cJSON *e = nodes->child;
  uint32_t k = 0, next = 0; /* next: index of entry e, valid while e != NULL */
  const cJSON *record = NULL;
  int rc = e ? entry_index(a, e, 0, 0, &next, &record) : RING_OK;
  for (uint32_t i = 0; rc == RING_OK && i < a->node_count; i++) {
    bool here = e != NULL && next == i;
    rc = add_result_node(a, i, here ? record : NULL, k);
    if (rc == RING_OK && here && (e = e->next) != NULL)
      rc = entry_index(a, e, ++k, i, &next, &record);
  }
  return rc;
}

/* ---------------------------------------------------- owners and checksum */

static uint32_t record_slot(const uint8_t *r) {
  return (uint32_t)r[0] | (uint32_t)r[1] << 8 | (uint32_t)r[2] << 16 | (uint32_t)r[3] << 24;
}

/* Applies owner change i (record r) to the result; prev: the previous slot.
 * Keeps the nodes' replica counts and the list of changed tokens. */
static int apply_record(apply_ctx *a, const uint8_t *r, size_t i, uint32_t prev) {
  uint16_t *owners = a->t->owners;
  const uint32_t R = a->t->view.replicas;
  const size_t slots = (size_t)a->t->view.tokens * R;
  const uint32_t slot = record_slot(r);
  const uint16_t node = (uint16_t)(r[4] | r[5] << 8);
  if (slot >= slots)
    return ring__err(a->err, RING_EOWNERS, "owners: record %zu: slot index %u, T*R is %zu", i, slot,
                     slots);
  if (i > 0 && slot <= prev)
    return ring__err(a->err, RING_EOWNERS, "owners: record %zu: slot index %u not ascending", i,
                     slot);
  if (node >= a->node_count)
    return ring__err(a->err, RING_EINDEX,
                     "owners: record %zu: owners[%u][%u]: node index %u, %u nodes", i, slot / R,
                     slot % R, node, a->node_count);
  if (owners[slot] == node)
    return ring__err(a->err, RING_EOWNERS, "owners: record %zu: owners[%u][%u] is already node %u",
                     i, slot / R, slot % R, node);
  if (a->n_touched == 0 || a->touched[a->n_touched - 1] != slot / R)
    a->touched[a->n_touched++] = slot / R;
  if (owners[slot] != RING_NODE_NONE) /* NONE: a dropped node's, counted for no one */
    a->t->nodes[owners[slot]].replicas--;
  a->t->nodes[node].replicas++;
  owners[slot] = node;
  return RING_OK;
}

/* Renumbers the base's owners into the result, then applies the changes.
 * The result's replica counts start as their base nodes' (appended nodes
 * own nothing yet) and follow each change. */
static int decode_owners(apply_ctx *a) {
  const ring_table *b = a->base;
  uint16_t *owners = a->t->owners;
  const uint32_t R = a->t->view.replicas;
  const size_t slots = (size_t)a->t->view.tokens * R;
  const bool dropped = a->n_kept < b->n_nodes;
  for (uint32_t i = 0; i < a->t->n_nodes; i++)
    a->t->nodes[i].replicas = i < a->n_kept ? b->nodes[a->kept[i]].replicas : 0;
  if (dropped)
    for (size_t s = 0; s < slots; s++)
      owners[s] = a->remap[b->owners[s]];
  else /* the numbering stands */
    memcpy(owners, b->owners, slots * sizeof *owners);
  const char *b64 = "";
  int rc = ring__json_string(a->root, "", "owners", &b64, a->err);
  if (rc != RING_OK)
    return rc;
  const size_t have = strlen(b64), n = have / 8;
  if (have % 8 != 0 || n > slots)
    return ring__err(a->err, RING_EOWNERS,
                     "owners: %zu base64 characters, want 8 per record and at most %zu records",
                     have, slots);
  uint8_t *raw = malloc(n ? n * RECORD_BYTES : 1);
  a->touched = malloc((n ? n : 1) * sizeof *a->touched);
  if (raw == NULL || a->touched == NULL) {
    free(raw);
    return ring__err(a->err, RING_ENOMEM, "owners: %zu records", n);
  }
  if (ring__base64_decode(b64, have, raw, n * RECORD_BYTES) != (long)(n * RECORD_BYTES))
    rc = ring__err(a->err, RING_EOWNERS, "owners: not canonical base64");
  for (size_t i = 0; rc == RING_OK && i < n; i++)
    rc = apply_record(a, raw + i * RECORD_BYTES, i,
                      i ? record_slot(raw + (i - 1) * RECORD_BYTES) : 0);
  free(raw);
  for (size_t s = 0; dropped && rc == RING_OK && s < slots; s++)
    if (owners[s] == RING_NODE_NONE)
      rc = ring__err(a->err, RING_EINDEX,
                     "owners[%zu][%zu]: owned by dropped node %s and given no new owner", s / R,
                     s % R, b->nodes[b->owners[s]].id);
  return rc;
}

/* The result's owners hash to what the delta says: the proof that the
 * whole owner array, not only the changed slots, is the table the delta
 * was made from. Kept in the result, which seals with it. */
static int check_result_checksum(apply_ctx *a) {
  uint64_t want = 0, have = ring__owners_checksum(a->t);
  int rc = ring__json_checksum(a->root, "checksum", &want, a->err);
  if (rc == RING_OK && want != have)
    rc = ring__err(a->err, RING_ECHECKSUM,
                   "checksum: result owners hash to %016" PRIx64 ", delta says %016" PRIx64, have,
                   want);
  a->t->owners_sum = have;
  a->t->sum_known = rc == RING_OK;
  return rc;
}

/* ---------------------------------------------------------------- pending */

static int decode_pending(apply_ctx *a) {
  const cJSON *pending = ring__json_array(a->root, "pending", a->err);
  if (pending == NULL)
    return RING_EFIELD;
  uint64_t prev = 0;
  uint32_t i = 0;
  for (const cJSON *e = pending->child; e != NULL; e = e->next, i++) {
    int rc = ring__pending_entry_decode(a->t, e, i, &prev, a->err);
    if (rc != RING_OK)
      return rc;
  }
  return RING_OK;
}

/* ------------------------------------------------------------------ apply */

/* Reads the delta and builds the result on base; seals it (fast, see the
 * top of the file) when `seal`, else leaves it unsealed. */
static int build(const ring_table *base, const char *json, size_t len, bool seal, ring_table **out,
                 ring_error *err) {
  if (base == NULL || json == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_delta_apply: NULL argument");
  if (!base->sealed)
    return ring__err(err, RING_EINVAL, "ring_delta_apply: base table not sealed");
  cJSON *root = NULL;
  int rc = ring__json_parse_object(json, len, "delta", &root, err);
  if (rc != RING_OK)
    return rc;
  apply_ctx a = {.base = base, .root = root, .err = err};
  rc = decode_header(&a);
  if (rc == RING_OK)
    rc = decode_dropped(&a);
  if (rc == RING_OK)
    rc = decode_nodes(&a);
  if (rc == RING_OK)
    rc = decode_owners(&a);
  if (rc == RING_OK)
    rc = check_result_checksum(&a);
  if (rc == RING_OK)
    rc = decode_pending(&a); /* strictly ascending, as the fast seal needs */
  if (rc == RING_OK && seal)
    rc = ring__table_seal_tokens(a.t, a.touched, a.n_touched, err);
  cJSON_Delete(root);
  free(a.remap);
  free(a.kept);
  free(a.touched);
  if (rc != RING_OK) {
    ring_table_free(a.t);
    return rc;
  }
  *out = a.t;
  return RING_OK;
}

int ring__delta_build(const ring_table *base, const char *json, size_t len, ring_table **out,
                      ring_error *err) {
  return build(base, json, len, false, out, err);
}

int ring_delta_apply(const ring_table *base, const char *json, size_t len, ring_table **out,
                     ring_error *err) {
  return build(base, json, len, true, out, err);
}

/* ---------------------------------------------------------------- encoder */

static int check_pair(const ring_table *from, const ring_table *to) {
  if (from == NULL || to == NULL || !from->sealed || !to->sealed)
    return RING_EINVAL;
  if (strcmp(from->cluster, to->cluster) != 0 ||
      strcmp(from->failure_domain, to->failure_domain) != 0)
    return RING_EFIELD;
  if (from->view.tokens != to->view.tokens)
    return RING_ETOKENS;
  if (from->view.replicas != to->view.replicas)
    return RING_EREPLICAS;
  if (from->view.seed != to->view.seed)
    return RING_EHASH;
  return to->version > from->version ? RING_OK : RING_ESTALE;
}

/* Writes "dropped" and "nodes"; fills remap (from index -> index in L). */
static void encode_node_changes(ring__sbuf *b, const ring_table *from, const ring_table *to,
                                uint16_t *remap) {
  uint32_t n_kept = 0;
  bool first = true;
  ring__sb_puts(b, ",\"dropped\":[");
  for (uint32_t i = 0; i < from->n_nodes; i++) {
    if (ring_table_find_node(to, from->nodes[i].id) < 0) {
      remap[i] = RING_NODE_NONE;
      ring__sb_printf(b, "%s%u", first ? "" : ",", i);
      first = false;
    } else {
      remap[i] = (uint16_t)n_kept++;
    }
  }
  ring__sb_puts(b, "],\"nodes\":[");
  first = true;
  uint32_t k = 0; /* walks L: from's surviving nodes in order */
  for (uint32_t i = 0; i < to->n_nodes; i++) {
    while (k < from->n_nodes && remap[k] == RING_NODE_NONE)
      k++;
    const ring__node *was = k < from->n_nodes ? &from->nodes[k++] : NULL;
    if (was != NULL && ring__node_same(was, &to->nodes[i]))
      continue;
    ring__sb_printf(b, "%s[%u,", first ? "" : ",", i);
    ring__node_record_encode(b, &to->nodes[i]);
    ring__sb_puts(b, "]");
    first = false;
  }
  ring__sb_puts(b, "]");
}

/* Writes "owners": the slots whose renumbered from-owner is not to's. */
static void encode_owner_changes(ring__sbuf *b, const ring_table *from, const ring_table *to,
                                 const uint16_t *remap) {
  const size_t slots = (size_t)to->view.tokens * to->view.replicas;
  size_t n = 0;
  for (size_t s = 0; s < slots; s++)
    n += remap[from->owners[s]] != to->owners[s];
  uint8_t *raw = malloc(n ? n * RECORD_BYTES : 1);
  size_t n64 = ring__base64_encoded_len(n * RECORD_BYTES);
  ring__sb_reserve(b, n64 + 16);
  if (raw == NULL || b->oom) {
    free(raw);
    b->oom = true;
    return;
  }
  uint8_t *r = raw;
  for (size_t s = 0; s < slots; s++) {
    if (remap[from->owners[s]] == to->owners[s])
      continue;
    uint16_t node = to->owners[s];
    *r++ = (uint8_t)s, *r++ = (uint8_t)(s >> 8), *r++ = (uint8_t)(s >> 16);
    *r++ = (uint8_t)(s >> 24), *r++ = (uint8_t)node, *r++ = (uint8_t)(node >> 8);
  }
  ring__sb_puts(b, ",\"owners\":\"");
  ring__base64_encode(raw, n * RECORD_BYTES, b->p + b->len);
  b->len += n64;
  ring__sb_puts(b, "\"");
  free(raw);
}

int ring_delta_encode(const ring_table *from, const ring_table *to, char **json, size_t *len) {
  if (json == NULL)
    return RING_EINVAL;
  int rc = check_pair(from, to);
  if (rc != RING_OK)
    return rc;
  uint16_t *remap = malloc((from->n_nodes ? from->n_nodes : 1) * sizeof *remap);
  if (remap == NULL)
    return RING_ENOMEM;
  ring__sbuf b = {0};
  ring__sb_printf(&b,
                  "{\"format\":\"" DELTA_FORMAT "\",\"cluster\":\"%s\",\"base_version\":%" PRIu64
                  ",\"version\":%" PRIu64 ",\"base_checksum\":\"" HASH_NAME ":%016" PRIx64
                  "\",\"node_count\":%u",
                  to->cluster, from->version, to->version, ring__owners_checksum(from),
                  to->n_nodes);
  encode_node_changes(&b, from, to, remap);
  encode_owner_changes(&b, from, to, remap);
  ring__sb_puts(&b, ",\"pending\":[");
  for (uint32_t i = 0; i < to->n_pending; i++)
    ring__sb_printf(&b, "%s[%u,%u,%u]", i ? "," : "", to->pending[i].token, to->pending[i].slot,
                    to->pending[i].node);
  ring__sb_printf(&b, "],\"checksum\":\"" HASH_NAME ":%016" PRIx64 "\"}",
                  ring__owners_checksum(to));
  free(remap);
  if (b.oom) {
    free(b.p);
    return RING_ENOMEM;
  }
  *json = b.p;
  if (len)
    *len = b.len;
  return RING_OK;
}
