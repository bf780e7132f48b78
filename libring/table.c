/*
 * table.c: the fixed-token table: building, validation, accessors.
 *
 * Sections: character classes; node index (id -> index hash); building;
 * sharing (references) and comparing; accessors.
 *
 * A table is built unsealed (ring_table_new / _add_node / _set_owner /
 * _add_pending), then ring_table_seal validates it and freezes it. The
 * decoder goes through the same builder, so one validator serves both.
 */
#include "ring_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ------------------------------------------------------ character classes */

int ring_id_valid(const char *s) { return ring__valid_id(s); }

uint64_t ring__hash(const void *key, size_t len, uint64_t seed) {
  return XXH3_64bits_withSeed(key, len, seed);
}

/* ---------------------------------------------------------- node id index */

/* Open addressing over id hashes; slots hold index+1 (0 = empty). Kept at
 * most half full so probes stay short. */
static int index_grow(ring_table *t, uint32_t want) {
  if (want * 2 <= t->cap_index)
    return RING_OK;
  uint32_t cap = t->cap_index ? t->cap_index : 64;
  while (want * 2 > cap)
    cap *= 2;
  uint32_t *idx = calloc(cap, sizeof *idx);
  if (idx == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    uint32_t h = (uint32_t)t->nodes[i].id_hash & (cap - 1);
    while (idx[h] != 0)
      h = (h + 1) & (cap - 1);
    idx[h] = i + 1;
  }
  free(t->index);
  t->index = idx;
  t->cap_index = cap;
  return RING_OK;
}

int ring_table_find_node(const ring_table *t, const char *id) {
  if (t == NULL || id == NULL || t->cap_index == 0)
    return t == NULL || id == NULL ? RING_EINVAL : RING_ENOTFOUND;
  uint64_t hash = XXH3_64bits(id, strlen(id));
  uint32_t mask = t->cap_index - 1;
  for (uint32_t h = (uint32_t)hash & mask;; h = (h + 1) & mask) {
    uint32_t slot = t->index[h];
    if (slot == 0)
      return RING_ENOTFOUND;
    const ring__node *n = &t->nodes[slot - 1];
    if (n->id_hash == hash && strcmp(n->id, id) == 0)
      return (int)(slot - 1);
  }
}

/* --------------------------------------------------------------- building */

static bool is_pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

static uint32_t log2_u32(uint32_t x) {
  uint32_t r = 0;
  while (x >>= 1)
    r++;
  return r;
}

static int check_params(const ring_table_params *p, ring_error *err) {
  if (p->cluster == NULL || !ring_id_valid(p->cluster))
    return ring__err(err, RING_EFIELD, "cluster: must match [a-z0-9._-]{1,63}");
  if (p->failure_domain && *p->failure_domain && !ring_id_valid(p->failure_domain))
    return ring__err(err, RING_EFIELD, "failure_domain: must match [a-z0-9._-]{1,63}");
  if (p->version < 1 || p->version > RING_VERSION_MAX)
    return ring__err(err, RING_EVERSION, "version: %llu not in [1, 2^53-1]",
                     (unsigned long long)p->version);
  if (p->seed > RING_VERSION_MAX)
    return ring__err(err, RING_EHASH, "hash.seed: %llu not in [0, 2^53-1]",
                     (unsigned long long)p->seed);
  if (!is_pow2(p->tokens) || p->tokens < RING_TOKENS_MIN || p->tokens > RING_TOKENS_MAX)
    return ring__err(err, RING_ETOKENS, "tokens: %u is not a power of two in [64, 65536]",
                     p->tokens);
  if (p->replicas < 1 || p->replicas > RING_REPLICAS_MAX)
    return ring__err(err, RING_EREPLICAS, "replicas: %u not in [1, 7]", p->replicas);
  return RING_OK;
}

int ring_table_new(const ring_table_params *p, ring_table **out, ring_error *err) {
  if (p == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_table_new: NULL argument");
  int rc = check_params(p, err);
  if (rc != RING_OK)
    return rc;
  ring_table *t = calloc(1, sizeof *t);
  size_t n = (size_t)p->tokens * p->replicas;
  if (t == NULL || (t->owners = malloc(n * sizeof *t->owners)) == NULL) {
    free(t);
    return ring__err(err, RING_ENOMEM, "table of %zu slots", n);
  }
  memset(t->owners, 0xff, n * sizeof *t->owners); /* RING_NODE_NONE */
  t->view = (ring_view){.owners = t->owners,
                        .seed = p->seed,
                        .tokens = p->tokens,
                        .shift = 64 - log2_u32(p->tokens),
                        .replicas = p->replicas};
  t->version = p->version;
  atomic_init(&t->refs, 1);
  strcpy(t->cluster, p->cluster);
  strcpy(t->failure_domain, p->failure_domain ? p->failure_domain : "");
  *out = t;
  return RING_OK;
}

void ring_table_free(ring_table *t) {
  /* acq_rel: the last holder sees every other holder's reads done */
  if (t == NULL || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
    return;
  free(t->owners);
  for (uint32_t i = 0; t->nodes && i < t->n_nodes; i++)
    free(t->nodes[i].strings);
  free(t->nodes);
  free(t->pending);
  free(t->index);
  free(t);
}

static int check_labels(const ring_node_spec *s, ring_error *err) {
  if (s->n_labels > RING_LABELS_MAX)
    return ring__err(err, RING_ENODE, "node %s: %u labels, at most %d", s->id, s->n_labels,
                     RING_LABELS_MAX);
  if (s->n_labels > 0 && (s->label_keys == NULL || s->label_values == NULL))
    return ring__err(err, RING_EINVAL, "node %s: labels missing", s->id);
  for (uint32_t i = 0; i < s->n_labels; i++) {
    const char *k = s->label_keys[i], *v = s->label_values[i];
    if (k == NULL || !ring_id_valid(k))
      return ring__err(err, RING_ENODE, "node %s: label key must match [a-z0-9._-]{1,63}", s->id);
    if (v == NULL || !ring__valid_label_value(v))
      return ring__err(err, RING_ENODE, "node %s: label %s: value must match [A-Za-z0-9._:-]{1,63}",
                       s->id, k);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(s->label_keys[j], k) == 0)
        return ring__err(err, RING_ENODE, "node %s: label %s given twice", s->id, k);
  }
  return RING_OK;
}

/* Appends s and its NUL at *len; returns its offset. The caller sized buf. */
static uint16_t put_string(char *buf, uint32_t *len, const char *s) {
  size_t n = strlen(s) + 1;
  memcpy(buf + *len, s, n);
  uint16_t at = (uint16_t)*len;
  *len += (uint32_t)n;
  return at;
}

/* The node's strings block from a checked spec: RING_OK or RING_ENOMEM. */
static int copy_strings(ring__node *n, const ring_node_spec *s) {
  size_t size = strlen(s->addr) + 1;
  for (uint32_t i = 0; i < s->n_labels; i++)
    size += strlen(s->label_keys[i]) + strlen(s->label_values[i]) + 2;
  if ((n->strings = malloc(size)) == NULL)
    return RING_ENOMEM;
  uint32_t len = 0;
  put_string(n->strings, &len, s->addr);
  for (uint32_t i = 0; i < s->n_labels; i++) {
    n->labels[i].key = put_string(n->strings, &len, s->label_keys[i]);
    n->labels[i].value = put_string(n->strings, &len, s->label_values[i]);
  }
  n->strings_len = len;
  n->n_labels = s->n_labels;
  return RING_OK;
}

static bool valid_weight(double w) { return isfinite(w) && w > 0 && w <= 1e6; }

static int check_node_spec(const ring_table *t, const ring_node_spec *s, ring_error *err) {
  if (s->id == NULL || !ring_id_valid(s->id))
    return ring__err(err, RING_ENODEID, "id \"%.63s\" must match [a-z0-9._-]{1,63}",
                     s->id ? s->id : "");
  if (ring_table_find_node(t, s->id) >= 0)
    return ring__err(err, RING_EDUPNODE, "duplicate id \"%s\"", s->id);
  if (t->n_nodes >= RING_NODES_MAX)
    return ring__err(err, RING_ENODE, "more than %u nodes", RING_NODES_MAX);
  if (s->addr == NULL || !ring__valid_addr(s->addr))
    return ring__err(err, RING_ENODE, "node %s: addr \"%.64s\" is not host:port", s->id,
                     s->addr ? s->addr : "");
  if (!valid_weight(s->weight))
    return ring__err(err, RING_ENODE, "node %s: weight %g not in (0, 1e6]", s->id, s->weight);
  if ((unsigned)s->state > RING_NODE_REMOVED)
    return ring__err(err, RING_ENODE, "node %s: unknown state %d", s->id, (int)s->state);
  return check_labels(s, err);
}

int ring_table_add_node(ring_table *t, const ring_node_spec *s, uint16_t *index, ring_error *err) {
  if (t == NULL || s == NULL || t->sealed)
    return ring__err(err, RING_EINVAL, "ring_table_add_node: NULL or sealed table");
  int rc = check_node_spec(t, s, err);
  if (rc != RING_OK)
    return rc;
  if (t->n_nodes == t->cap_nodes) {
    uint32_t cap = t->cap_nodes ? t->cap_nodes * 2 : 8;
    ring__node *nodes = realloc(t->nodes, cap * sizeof *nodes);
    if (nodes == NULL)
      return ring__err(err, RING_ENOMEM, "node list of %u", cap);
    t->nodes = nodes;
    t->cap_nodes = cap;
  }
  if (index_grow(t, t->n_nodes + 1) != RING_OK)
    return ring__err(err, RING_ENOMEM, "node index");
  ring__node *n = &t->nodes[t->n_nodes];
  memset(n, 0, sizeof *n);
  if (copy_strings(n, s) != RING_OK)
    return ring__err(err, RING_ENOMEM, "node %s: out of memory", s->id);
  strcpy(n->id, s->id);
  n->weight = s->weight;
  n->state = s->state;
  n->id_hash = XXH3_64bits(n->id, strlen(n->id));
  uint32_t mask = t->cap_index - 1, h = (uint32_t)n->id_hash & mask;
  while (t->index[h] != 0)
    h = (h + 1) & mask;
  t->index[h] = ++t->n_nodes;
  if (index)
    *index = (uint16_t)(t->n_nodes - 1);
  return RING_OK;
}

ring_node_spec ring__node_spec(const ring__node *n, ring_node_state state, const char **keys,
                               const char **values) {
  for (uint32_t l = 0; l < n->n_labels; l++) {
    keys[l] = ring__label_key(n, l);
    values[l] = ring__label_value(n, l);
  }
  return (ring_node_spec){n->id, ring__node_addr(n), keys, values, n->n_labels, n->weight, state};
}

int ring_table_set_owner(ring_table *t, uint32_t token, uint32_t slot, uint16_t node) {
  if (t == NULL || t->sealed || token >= t->view.tokens || slot >= t->view.replicas)
    return RING_EINVAL;
  t->owners[(size_t)token * t->view.replicas + slot] = node;
  t->sum_known = false;
  return RING_OK;
}

int ring_table_add_pending(ring_table *t, uint32_t token, uint32_t slot, uint16_t node) {
  if (t == NULL || t->sealed || token >= t->view.tokens || slot >= t->view.replicas)
    return RING_EINVAL;
  if (t->n_pending == t->cap_pending) {
    uint32_t cap = t->cap_pending ? t->cap_pending * 2 : 16;
    ring__pending *p = realloc(t->pending, cap * sizeof *p);
    if (p == NULL)
      return RING_ENOMEM;
    t->pending = p;
    t->cap_pending = cap;
  }
  t->pending[t->n_pending++] = (ring__pending){token, (uint16_t)slot, node};
  return RING_OK;
}

void ring_table_clear_pending(ring_table *t) {
  if (t && !t->sealed)
    t->n_pending = 0;
}

int ring_table_set_node(ring_table *t, uint16_t index, ring_node_state state, double weight) {
  if (t == NULL || t->sealed || index >= t->n_nodes || (unsigned)state > RING_NODE_REMOVED ||
      !valid_weight(weight))
    return RING_EINVAL;
  t->nodes[index].state = state;
  t->nodes[index].weight = weight;
  return RING_OK;
}

int ring_table_clone(const ring_table *t, uint64_t version, ring_table **out) {
  if (t == NULL || out == NULL)
    return RING_EINVAL;
  ring_table_params p = {t->cluster,   t->failure_domain, version,
                         t->view.seed, t->view.tokens,    t->view.replicas};
  ring_table *c;
  int rc = ring_table_new(&p, &c, NULL);
  if (rc != RING_OK)
    return rc;
  size_t slots = (size_t)t->view.tokens * t->view.replicas;
  memcpy(c->owners, t->owners, slots * sizeof *c->owners);
  c->nodes = malloc((t->n_nodes ? t->n_nodes : 1) * sizeof *c->nodes);
  c->pending = malloc((t->n_pending ? t->n_pending : 1) * sizeof *c->pending);
  if (c->nodes == NULL || c->pending == NULL) {
    ring_table_free(c);
    return RING_ENOMEM;
  }
  c->cap_nodes = t->n_nodes ? t->n_nodes : 1;
  for (uint32_t i = 0; i < t->n_nodes; i++, c->n_nodes++) { /* freed up to n_nodes on failure */
    c->nodes[i] = t->nodes[i];
    if ((c->nodes[i].strings = malloc(t->nodes[i].strings_len)) == NULL) {
      ring_table_free(c);
      return RING_ENOMEM;
    }
    memcpy(c->nodes[i].strings, t->nodes[i].strings, t->nodes[i].strings_len);
  }
  if (t->n_pending > 0)
    memcpy(c->pending, t->pending, t->n_pending * sizeof *c->pending);
  c->cap_pending = t->n_pending ? t->n_pending : 1;
  c->n_pending = t->n_pending;
  if (index_grow(c, c->n_nodes) != RING_OK) { /* hashes the copied nodes */
    ring_table_free(c);
    return RING_ENOMEM;
  }
  *out = c;
  return RING_OK;
}

/* ------------------------------------------------- sharing, comparing */

ring_table *ring__table_ref(const ring_table *t) {
  ring_table *m = (ring_table *)t; /* the count is the one field a sealed table changes */
  atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
  return m;
}

bool ring__node_same(const ring__node *a, const ring__node *b) {
  /* a node's strings block is built from its fields in one order, so equal
   * fields give equal blocks and label offsets */
  return strcmp(a->id, b->id) == 0 && a->strings_len == b->strings_len &&
         memcmp(a->strings, b->strings, a->strings_len) == 0 && a->n_labels == b->n_labels &&
         memcmp(a->labels, b->labels, a->n_labels * sizeof *a->labels) == 0 &&
         a->weight == b->weight && a->state == b->state;
}

bool ring__table_same(const ring_table *a, const ring_table *b) {
  if (a == b)
    return true;
  if (a->version != b->version || a->view.seed != b->view.seed ||
      a->view.tokens != b->view.tokens || a->view.replicas != b->view.replicas ||
      a->n_nodes != b->n_nodes || a->n_pending != b->n_pending ||
      strcmp(a->cluster, b->cluster) != 0 || strcmp(a->failure_domain, b->failure_domain) != 0 ||
      ring__owners_checksum(a) != ring__owners_checksum(b))
    return false;
  for (uint32_t i = 0; i < a->n_nodes; i++)
    if (!ring__node_same(&a->nodes[i], &b->nodes[i]))
      return false;
  const size_t slots = (size_t)a->view.tokens * a->view.replicas;
  return (a->n_pending == 0 ||
          memcmp(a->pending, b->pending, a->n_pending * sizeof *a->pending) == 0) &&
         memcmp(a->owners, b->owners, slots * sizeof *a->owners) == 0;
}

/* -------------------------------------------------------------- accessors */

static const ring__node *node_at(const ring_table *t, uint16_t index) {
  return t != NULL && index < t->n_nodes ? &t->nodes[index] : NULL;
}

uint64_t ring_table_version(const ring_table *t) { return t ? t->version : 0; }
const char *ring_table_cluster(const ring_table *t) { return t ? t->cluster : NULL; }
const char *ring_table_failure_domain(const ring_table *t) { return t ? t->failure_domain : NULL; }
uint64_t ring_table_seed(const ring_table *t) { return t ? t->view.seed : 0; }
uint32_t ring_table_tokens(const ring_table *t) { return t ? t->view.tokens : 0; }
uint32_t ring_table_replicas(const ring_table *t) { return t ? t->view.replicas : 0; }
uint32_t ring_table_node_count(const ring_table *t) { return t ? t->n_nodes : 0; }
const ring_view *ring_table_view(const ring_table *t) { return t ? &t->view : NULL; }

const char *ring_table_node_id(const ring_table *t, uint16_t index) {
  const ring__node *n = node_at(t, index);
  return n ? n->id : NULL;
}

const char *ring_table_node_addr(const ring_table *t, uint16_t index) {
  const ring__node *n = node_at(t, index);
  return n ? ring__node_addr(n) : NULL;
}

double ring_table_node_weight(const ring_table *t, uint16_t index) {
  const ring__node *n = node_at(t, index);
  return n ? n->weight : 0;
}

ring_node_state ring_table_node_state(const ring_table *t, uint16_t index) {
  const ring__node *n = node_at(t, index);
  return n ? n->state : RING_NODE_REMOVED;
}

uint32_t ring_table_node_replicas(const ring_table *t, uint16_t index) {
  const ring__node *n = node_at(t, index);
  return n ? n->replicas : 0;
}

const char *ring_table_node_label(const ring_table *t, uint16_t index, const char *key) {
  const ring__node *n = node_at(t, index);
  for (uint32_t i = 0; n && key && i < n->n_labels; i++)
    if (strcmp(ring__label_key(n, i), key) == 0)
      return ring__label_value(n, i);
  return NULL;
}

uint32_t ring_table_node_label_count(const ring_table *t, uint16_t index) {
  const ring__node *n = node_at(t, index);
  return n ? n->n_labels : 0;
}

int ring_table_node_label_at(const ring_table *t, uint16_t index, uint32_t k, const char **key,
                             const char **value) {
  const ring__node *n = node_at(t, index);
  if (n == NULL || k >= n->n_labels || key == NULL || value == NULL)
    return RING_EINVAL;
  *key = ring__label_key(n, k);
  *value = ring__label_value(n, k);
  return RING_OK;
}

uint16_t ring_table_owner(const ring_table *t, uint32_t token, uint32_t slot) {
  if (t == NULL || token >= t->view.tokens || slot >= t->view.replicas)
    return RING_NODE_NONE;
  return t->owners[(size_t)token * t->view.replicas + slot];
}

/* First pending entry with (token, slot) >= the given pair; n_pending if none. */
static uint32_t pending_lower_bound(const ring_table *t, uint32_t token, uint32_t slot) {
  uint32_t lo = 0, hi = t->n_pending;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    const ring__pending *p = &t->pending[mid];
    if (p->token < token || (p->token == token && p->slot < slot))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

uint32_t ring__pending_first(const ring_table *t, uint32_t token) {
  return pending_lower_bound(t, token, 0);
}

uint16_t ring_table_pending(const ring_table *t, uint32_t token, uint32_t slot) {
  if (t == NULL || !t->sealed)
    return RING_NODE_NONE;
  uint32_t i = pending_lower_bound(t, token, slot);
  if (i < t->n_pending && t->pending[i].token == token && t->pending[i].slot == slot)
    return t->pending[i].node;
  return RING_NODE_NONE;
}

uint32_t ring_table_pending_count(const ring_table *t) { return t ? t->n_pending : 0; }

int ring_table_pending_at(const ring_table *t, uint32_t i, uint32_t *token, uint32_t *slot,
                          uint16_t *node) {
  if (t == NULL || i >= t->n_pending)
    return RING_EINVAL;
  if (token)
    *token = t->pending[i].token;
  if (slot)
    *slot = t->pending[i].slot;
  if (node)
    *node = t->pending[i].node;
  return RING_OK;
}

const char *ring_node_state_name(ring_node_state s) { return ring__node_state_name(s); }

int ring_node_state_parse(const char *name) { return ring__node_state_parse(name); }
