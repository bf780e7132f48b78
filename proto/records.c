/*
 * records.c: the small etcd values of proto/etcd.md (records.h).
 *
 * Sections: keys; shared pieces (top-level parse, node fields); config;
 * labels and node records; alive; progress (and the token lists and
 * arrays of objects the later records share); leader; loss; stuck; host
 * records (size caps, acks, clients).
 *
 * Every decoder parses with cJSON into a local value and copies it to *out
 * only when every rule holds. Node fields are validated by adding the node
 * to a scratch table: the builder (libring/table.c) owns the rules for ids,
 * addresses, labels and weights, so they live in one place.
 */
#include "proto_int.h"
#include "plan_doc.h" /* RK_PLAN_ID_LEN */
#include "records.h"
#include "sizes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_FORMAT "ringkeeper.config.v1"
#define NODE_FORMAT "ringkeeper.node.v1"
#define ALIVE_FORMAT "ringkeeper.alive.v1"
#define PROGRESS_FORMAT "ringkeeper.progress.v1"
#define LEADER_FORMAT "ringkeeper.leader.v1"
#define LOSS_FORMAT "ringkeeper.loss.v1"
#define STUCK_FORMAT "ringkeeper.stuck.v1"
#define MISSING_FORMAT "ringkeeper.missing.v1"
#define CLIENT_FORMAT "ringkeeper.client.v1"
#define RECOVERY_FORMAT "ringkeeper.recovery.v1"

#define N_KEYS(a) (sizeof(a) / sizeof *(a))

/* ------------------------------------------------------------------- keys */

int rk_key(char key[RK_KEY_MAX], const char *cluster, const char *what) {
  return ring__key(key, RK_KEY_MAX, cluster, what, "");
}

int rk_key2(char key[RK_KEY_MAX], const char *cluster, const char *dir, const char *name) {
  return ring__key(key, RK_KEY_MAX, cluster, dir, name);
}

int rk_key_version(char key[RK_KEY_MAX], const char *cluster, const char *dir, uint64_t v) {
  char num[24];
  snprintf(num, sizeof num, "%" PRIu64, v);
  return rk_key2(key, cluster, dir, num);
}

int rk__scratch_table(ring_table **out, ring_error *err) {
  ring_table_params p = {"scratch", "", 1, 0, RING_TOKENS_MIN, 1};
  return ring_table_new(&p, out, err);
}

/* Copies a validated spec's strings (the builder bounded their lengths). */
static void member_copy(const ring_node_spec *s, char id[RING_ID_MAX + 1],
                        char addr[RING_ADDR_MAX + 1], rk_labels *labels) {
  snprintf(id, RING_ID_MAX + 1, "%s", s->id);
  snprintf(addr, RING_ADDR_MAX + 1, "%s", s->addr);
  labels->n = s->n_labels;
  for (uint32_t l = 0; l < s->n_labels; l++) {
    snprintf(labels->key[l], RING_ID_MAX + 1, "%s", s->label_keys[l]);
    snprintf(labels->value[l], RING_ID_MAX + 1, "%s", s->label_values[l]);
  }
}

/* Validates a decoded spec by adding it to `scratch` (which also catches a
 * repeated id); the builder's message gets `where` in front. */
static int member_check(ring_table *scratch, const ring_node_spec *s, const char *where,
                        ring_error *err) {
  ring_error inner = {0};
  int rc = ring_table_add_node(scratch, s, NULL, &inner);
  return rc == RING_OK ? RING_OK : ring__err(err, rc, "%s%s", where, inner.message);
}

/* The node fields of a record (id, addr, labels, weight, and state when
 * with_state) into n's fields, validated; the caller checked the keys. */
static int member_decode(const cJSON *o, const char *where, bool with_state, ring_table *scratch,
                         rk_node *n, ring_error *err) {
  const char *keys[RING_LABELS_MAX], *values[RING_LABELS_MAX];
  ring_node_spec s;
  int rc = ring__node_fields_decode(o, where, with_state, keys, values, &s, err);
  if (rc == RING_OK)
    rc = member_check(scratch, &s, where, err);
  if (rc != RING_OK)
    return rc;
  member_copy(&s, n->id, n->addr, &n->labels);
  n->weight = s.weight;
  n->state = s.state;
  return RING_OK;
}

int rk__plan_node_decode(const cJSON *o, const char *where, ring_table *scratch, rk_node *out,
                         ring_error *err) {
  static const char *const keys[] = {"id", "addr", "labels", "weight", "state"};
  if (!cJSON_IsObject(o))
    return ring__err(err, RING_ENODE, "%smust be an object", where);
  rk_node n = {0};
  int rc = ring__json_check_keys(o, where, keys, N_KEYS(keys), err);
  if (rc == RING_OK)
    rc = member_decode(o, where, true, scratch, &n, err);
  if (rc == RING_OK)
    *out = n;
  return rc;
}

static void labels_spec(const rk_labels *l, const char **keys, const char **values) {
  for (uint32_t i = 0; i < l->n && i < RING_LABELS_MAX; i++) {
    keys[i] = l->key[i];
    values[i] = l->value[i];
  }
}

void rk__plan_node_encode(ring__sbuf *b, const rk_node *n) {
  const char *keys[RING_LABELS_MAX], *values[RING_LABELS_MAX];
  ring_node_spec s;
  rk_node_spec(n, keys, values, &s);
  ring__sb_puts(b, "{");
  ring__node_fields_encode(b, &s);
  ring__sb_printf(b, ",\"state\":\"%s\"}", ring_node_state_name(n->state));
}

/* ------------------------------------------------------------------ config */

static const char *const migration_names[] = {"stream", "none"};

const char *rk_migration_name(rk_migration m) {
  return ring__enum_name(migration_names, N_KEYS(migration_names), (unsigned)m);
}

static const char *const auto_apply_names[] = {"none", "repair", "all"};

const char *rk_auto_apply_name(rk_auto_apply a) {
  return ring__enum_name(auto_apply_names, N_KEYS(auto_apply_names), (unsigned)a);
}

int rk_auto_apply_parse(const char *s) {
  int v = ring__enum_parse(auto_apply_names, N_KEYS(auto_apply_names), s);
  return v < 0 ? RING_EINVAL : v;
}

/* auto_apply is false (none), true (all) or "repair": the booleans are the
 * field's first form, so a config without repairs reads the same to a
 * reader that predates the policy. */
static int decode_auto_apply(const cJSON *root, rk_auto_apply *out, ring_error *err) {
  const cJSON *it = ring__json_field(root, "auto_apply");
  if (cJSON_IsBool(it)) {
    *out = cJSON_IsTrue(it) ? RK_AUTO_ALL : RK_AUTO_NONE;
    return RING_OK;
  }
  if (cJSON_IsString(it) && strcmp(it->valuestring, "repair") == 0) {
    *out = RK_AUTO_REPAIR;
    return RING_OK;
  }
  return ring__err(err, RING_EFIELD, "auto_apply: %s",
                   it ? "must be false, true or \"repair\"" : "missing");
}

/* balance is optional: absent means tokens, and only "bytes" is written,
 * so a config that balances tokens reads the same to 0.2.0 readers. */
static int decode_balance(const cJSON *root, ring_balance *out, ring_error *err) {
  const cJSON *it = ring__json_field(root, "balance");
  *out = RING_BALANCE_TOKENS;
  if (it == NULL)
    return RING_OK;
  if (cJSON_IsString(it) && strcmp(it->valuestring, "bytes") == 0)
    *out = RING_BALANCE_BYTES;
  else if (!cJSON_IsString(it) || strcmp(it->valuestring, "tokens") != 0)
    return ring__err(err, RING_EFIELD, "balance: want \"tokens\" or \"bytes\"");
  return RING_OK;
}

static const char *encode_auto_apply(rk_auto_apply a) {
  return a == RK_AUTO_ALL ? "true" : a == RK_AUTO_REPAIR ? "\"repair\"" : "false";
}

void rk_config_defaults(rk_config *c) {
  *c = (rk_config){.tokens = 16384,
                   .replicas = 3,
                   .migration = RK_MIGRATE_STREAM,
                   .down_after_ms = 60000,
                   .auto_apply = RK_AUTO_REPAIR,
                   .throttle = {.moves_per_node = 4, .moves_per_wave = 256},
                   .keep_versions = 16,
                   .keep_plans = 32};
}

/* "" or a label key. */
static bool valid_level(const char *s) { return *s == '\0' || ring_id_valid(s); }

int rk_config_validate(const rk_config *c, ring_error *err) {
  if (c == NULL)
    return ring__err(err, RING_EINVAL, "rk_config_validate: NULL config");
  if (c->tokens < RING_TOKENS_MIN || c->tokens > RING_TOKENS_MAX ||
      (c->tokens & (c->tokens - 1)) != 0)
    return ring__err(err, RING_ETOKENS, "tokens: %u is not a power of two in [64, 65536]",
                     c->tokens);
  if (c->replicas < 1 || c->replicas > RING_REPLICAS_MAX)
    return ring__err(err, RING_EREPLICAS, "replicas: %u not in [1, %d]", c->replicas,
                     RING_REPLICAS_MAX);
  if (c->seed > RING_VERSION_MAX)
    return ring__err(err, RING_EFIELD, "seed: above 2^53-1");
  if (memchr(c->failure_domain, '\0', sizeof c->failure_domain) == NULL ||
      !valid_level(c->failure_domain))
    return ring__err(err, RING_EFIELD, "failure_domain: must be \"\" or a label key");
  if (memchr(c->best_effort, '\0', sizeof c->best_effort) == NULL || !valid_level(c->best_effort))
    return ring__err(err, RING_EFIELD, "best_effort: must be \"\" or a label key");
  if (*c->best_effort && strcmp(c->best_effort, c->failure_domain) == 0)
    return ring__err(err, RING_EFIELD, "best_effort: \"%s\" is also the failure_domain",
                     c->best_effort);
  if ((unsigned)c->migration >= N_KEYS(migration_names))
    return ring__err(err, RING_EFIELD, "migration: unknown mode %d", (int)c->migration);
  if ((unsigned)c->auto_apply >= N_KEYS(auto_apply_names))
    return ring__err(err, RING_EFIELD, "auto_apply: unknown policy %d", (int)c->auto_apply);
  if (c->balance != RING_BALANCE_TOKENS && c->balance != RING_BALANCE_BYTES)
    return ring__err(err, RING_EFIELD, "balance: unknown mode %d", (int)c->balance);
  if (c->down_after_ms < 1000 || c->down_after_ms > 86400000)
    return ring__err(err, RING_EFIELD, "down_after_ms: %" PRIu64 " not in [1000, 86400000]",
                     c->down_after_ms);
  if (c->throttle.bytes_per_sec > RING_VERSION_MAX)
    return ring__err(err, RING_EFIELD, "throttle.bytes_per_sec: above 2^53-1");
  if (c->keep_versions < 2)
    return ring__err(err, RING_EFIELD, "retention.versions: %u, at least 2", c->keep_versions);
  if (c->keep_plans < 1)
    return ring__err(err, RING_EFIELD, "retention.plans: 0, at least 1");
  return RING_OK;
}

static int decode_throttle(const cJSON *root, rk_config *c, ring_error *err) {
  static const char *const keys[] = {"moves_per_node", "moves_per_domain", "moves_per_wave",
                                     "bytes_per_sec"};
  const cJSON *t = ring__json_object(root, "", "throttle", keys, N_KEYS(keys), err);
  if (t == NULL)
    return RING_EFIELD;
  int rc = ring__json_u32_at(t, "throttle.", "moves_per_node", &c->throttle.moves_per_node, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(t, "throttle.", "moves_per_domain", &c->throttle.moves_per_domain, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(t, "throttle.", "moves_per_wave", &c->throttle.moves_per_wave, err);
  if (rc == RING_OK)
    rc = ring__json_uint_at(t, "throttle.", "bytes_per_sec", 0, RING_VERSION_MAX, RING_EFIELD,
                            &c->throttle.bytes_per_sec, err);
  return rc;
}

static int decode_retention(const cJSON *root, rk_config *c, ring_error *err) {
  static const char *const keys[] = {"versions", "plans"};
  const cJSON *r = ring__json_object(root, "", "retention", keys, N_KEYS(keys), err);
  if (r == NULL)
    return RING_EFIELD;
  int rc = ring__json_u32_at(r, "retention.", "versions", &c->keep_versions, err);
  return rc == RING_OK ? ring__json_u32_at(r, "retention.", "plans", &c->keep_plans, err) : rc;
}

static int decode_config(const cJSON *root, rk_config *c, ring_error *err) {
  uint64_t tokens = 0, replicas = 0;
  const char *mig = "";
  int rc = ring__json_uint(root, "tokens", 0, RING_TOKENS_MAX, RING_ETOKENS, &tokens, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "replicas", 0, RING_REPLICAS_MAX, RING_EREPLICAS, &replicas, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "seed", 0, RING_VERSION_MAX, RING_EFIELD, &c->seed, err);
  if (rc == RING_OK)
    rc = ring__json_string_copy(root, "", "failure_domain", c->failure_domain,
                                sizeof c->failure_domain, err);
  if (rc == RING_OK)
    rc =
        ring__json_string_copy(root, "", "best_effort", c->best_effort, sizeof c->best_effort, err);
  if (rc == RING_OK && (rc = ring__json_string(root, "", "migration", &mig, err)) == RING_OK &&
      ring__enum_parse(migration_names, N_KEYS(migration_names), mig) < 0)
    rc = ring__err(err, RING_EFIELD, "migration: \"%.32s\" (want \"stream\" or \"none\")", mig);
  if (rc == RING_OK)
    c->migration = (rk_migration)ring__enum_parse(migration_names, N_KEYS(migration_names), mig);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "down_after_ms", 0, RING_VERSION_MAX, RING_EFIELD, &c->down_after_ms,
                         err);
  if (rc == RING_OK)
    rc = decode_auto_apply(root, &c->auto_apply, err);
  if (rc == RING_OK)
    rc = decode_throttle(root, c, err);
  if (rc == RING_OK)
    rc = decode_retention(root, c, err);
  if (rc == RING_OK)
    rc = decode_balance(root, &c->balance, err);
  c->tokens = (uint32_t)tokens;
  c->replicas = (uint32_t)replicas;
  return rc == RING_OK ? rk_config_validate(c, err) : rc;
}

int rk_config_decode(const char *json, size_t len, rk_config *out, ring_error *err) {
  static const char *const keys[] = {"format",         "tokens",      "replicas",  "seed",
                                     "failure_domain", "best_effort", "migration", "down_after_ms",
                                     "auto_apply",     "throttle",    "retention", "balance"};
  cJSON *root = NULL;
  rk_config c = {0};
  int rc = ring__record_parse(json, len, CONFIG_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = decode_config(root, &c, err);
  cJSON_Delete(root);
  if (rc == RING_OK && out)
    *out = c;
  return rc;
}

int rk_config_encode(const rk_config *c, char **json, size_t *len) {
  if (c == NULL || json == NULL || rk_config_validate(c, NULL) != RING_OK)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b,
                  "{\"format\":\"" CONFIG_FORMAT "\",\"tokens\":%u,\"replicas\":%u,"
                  "\"seed\":%" PRIu64 ",\"failure_domain\":\"%s\",\"best_effort\":\"%s\","
                  "\"migration\":\"%s\",\"down_after_ms\":%" PRIu64 ",\"auto_apply\":%s,",
                  c->tokens, c->replicas, c->seed, c->failure_domain, c->best_effort,
                  rk_migration_name(c->migration), c->down_after_ms,
                  encode_auto_apply(c->auto_apply));
  ring__sb_printf(&b,
                  "\"throttle\":{\"moves_per_node\":%u,\"moves_per_domain\":%u,"
                  "\"moves_per_wave\":%u,\"bytes_per_sec\":%" PRIu64 "},"
                  "\"retention\":{\"versions\":%u,\"plans\":%u}%s}",
                  c->throttle.moves_per_node, c->throttle.moves_per_domain,
                  c->throttle.moves_per_wave, c->throttle.bytes_per_sec, c->keep_versions,
                  c->keep_plans, c->balance == RING_BALANCE_BYTES ? ",\"balance\":\"bytes\"" : "");
  return ring__sb_finish(&b, json, len);
}

/* ------------------------------------------------ labels and node records */

const char *rk_labels_get(const rk_labels *l, const char *key) {
  for (uint32_t i = 0; l && key && i < l->n && i < RING_LABELS_MAX; i++)
    if (strcmp(l->key[i], key) == 0)
      return l->value[i];
  return NULL;
}

int rk_labels_set(rk_labels *l, const char *key, const char *value, ring_error *err) {
  if (l == NULL || key == NULL || value == NULL)
    return ring__err(err, RING_EINVAL, "rk_labels_set: NULL argument");
  if (!ring_id_valid(key))
    return ring__err(err, RING_ENODE, "labels: key \"%.63s\" must match [a-z0-9._-]{1,63}", key);
  if (!ring__valid_label_value(value))
    return ring__err(err, RING_ENODE, "labels.%s: value must match [A-Za-z0-9._:-]{1,63}", key);
  uint32_t i = 0;
  while (i < l->n && strcmp(l->key[i], key) != 0)
    i++;
  if (i >= RING_LABELS_MAX)
    return ring__err(err, RING_ENODE, "labels: more than %d", RING_LABELS_MAX);
  if (i == l->n) {
    snprintf(l->key[i], sizeof l->key[i], "%s", key);
    l->n++;
  }
  snprintf(l->value[i], sizeof l->value[i], "%s", value);
  return RING_OK;
}

bool rk_labels_del(rk_labels *l, const char *key) {
  uint32_t i = 0;
  while (i < l->n && strcmp(l->key[i], key) != 0)
    i++;
  if (i == l->n)
    return false;
  for (; i + 1 < l->n; i++) {
    memcpy(l->key[i], l->key[i + 1], sizeof l->key[i]);
    memcpy(l->value[i], l->value[i + 1], sizeof l->value[i]);
  }
  l->n--;
  return true;
}

bool rk_labels_equal(const rk_labels *a, const rk_labels *b) {
  if (a->n != b->n)
    return false;
  for (uint32_t i = 0; i < a->n; i++) {
    const char *v = rk_labels_get(b, a->key[i]);
    if (v == NULL || strcmp(v, a->value[i]) != 0)
      return false; /* keys are unique: equal counts and every one found = equal sets */
  }
  return true;
}

static const char *const desired_names[] = {"active", "drained", "removed"};

const char *rk_desired_name(rk_desired d) {
  return ring__enum_name(desired_names, N_KEYS(desired_names), (unsigned)d);
}

int rk_desired_parse(const char *name) {
  return ring__enum_parse(desired_names, N_KEYS(desired_names), name);
}

void rk_node_spec(const rk_node *n, const char **keys, const char **values, ring_node_spec *s) {
  labels_spec(&n->labels, keys, values);
  *s = (ring_node_spec){n->id, n->addr, keys, values, n->labels.n, n->weight, n->state};
}

/* Decodes one record of nodes/ or alive/: the shared node fields through a
 * scratch table, then what `rest` adds. */
static int member_record_decode(const char *json, size_t len, const char *format,
                                const char *const *keys, size_t n_keys, bool with_state,
                                int (*rest)(const cJSON *, rk_node *, void *, ring_error *),
                                rk_node *n, void *extra, ring_error *err) {
  cJSON *root = NULL;
  ring_table *scratch = NULL;
  int rc = ring__record_parse(json, len, format, keys, n_keys, &root, err);
  if (rc == RING_OK)
    rc = rk__scratch_table(&scratch, err);
  if (rc == RING_OK)
    rc = member_decode(root, "", with_state, scratch, n, err);
  if (rc == RING_OK)
    rc = rest(root, n, extra, err);
  ring_table_free(scratch);
  cJSON_Delete(root);
  return rc;
}

bool rk_key_hex_valid(const char *s) {
  size_t n = 0;
  for (; s[n] != '\0' && n <= RK_KEY_HEX; n++)
    if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
      return false;
  return n == RK_KEY_HEX;
}

bool rk_keys_valid(const char *key, const char *next_key) {
  return (key[0] == '\0' || rk_key_hex_valid(key)) &&
         (next_key[0] == '\0' || rk_key_hex_valid(next_key));
}

bool rk_key_untrusted(const rk_node *n, const char *published) {
  return n->key[0] != '\0' && published[0] != '\0' && strcmp(published, n->key) != 0 &&
         strcmp(published, n->next_key) != 0;
}

/* The optional key field `name` of a nodes/ or alive/ record into out. */
static int key_field(const cJSON *root, const char *name, char out[RK_KEY_HEX + 1],
                     ring_error *err) {
  if (ring__json_field(root, name) == NULL)
    return RING_OK;
  const char *key = "";
  int rc = ring__json_string(root, "", name, &key, err);
  if (rc == RING_OK && !rk_key_hex_valid(key))
    return ring__err(err, RING_EFIELD, "%s: \"%.80s\" (want 64 lowercase hex digits)", name, key);
  if (rc == RING_OK)
    memcpy(out, key, RK_KEY_HEX + 1);
  return rc;
}

/* "key" and "next_key" into n. */
static int key_rest(const cJSON *root, rk_node *n, ring_error *err) {
  int rc = key_field(root, "key", n->key, err);
  return rc == RING_OK ? key_field(root, "next_key", n->next_key, err) : rc;
}

/* ,"key":"...","next_key":"..." for those the record has. */
static void key_encode(ring__sbuf *b, const char *key, const char *next_key) {
  if (key[0] != '\0')
    ring__sb_printf(b, ",\"key\":\"%s\"", key);
  if (next_key[0] != '\0')
    ring__sb_printf(b, ",\"next_key\":\"%s\"", next_key);
}

static int node_rest(const cJSON *root, rk_node *n, void *extra, ring_error *err) {
  (void)extra;
  const char *desired = "";
  int rc = key_rest(root, n, err);
  if (rc == RING_OK)
    rc = ring__json_string(root, "", "desired", &desired, err);
  if (rc == RING_OK && rk_desired_parse(desired) < 0)
    rc = ring__err(err, RING_EFIELD, "desired: \"%.32s\" (want active, drained or removed)",
                   desired);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "lost_ms", 0, RING_VERSION_MAX, RING_EFIELD, &n->lost_ms, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "since_ms", 0, RING_VERSION_MAX, RING_EFIELD, &n->since_ms, err);
  if (rc == RING_OK)
    n->desired = (rk_desired)rk_desired_parse(desired);
  return rc;
}

int rk_node_decode(const char *json, size_t len, rk_node *out, ring_error *err) {
  static const char *const keys[] = {"format",  "id",      "addr",     "labels", "weight",  "state",
                                     "desired", "lost_ms", "since_ms", "key",    "next_key"};
  rk_node n = {0};
  int rc = member_record_decode(json, len, NODE_FORMAT, keys, N_KEYS(keys), true, node_rest, &n,
                                NULL, err);
  if (rc == RING_OK && out)
    *out = n;
  return rc;
}

/* The record's validity, as the decoder would judge it. */
static bool member_valid(const char *id, const char *addr, const rk_labels *l, double weight,
                         ring_node_state state) {
  ring_table *scratch = NULL;
  if (l->n > RING_LABELS_MAX || rk__scratch_table(&scratch, NULL) != RING_OK)
    return false;
  const char *keys[RING_LABELS_MAX], *values[RING_LABELS_MAX];
  labels_spec(l, keys, values);
  ring_node_spec s = {id, addr, keys, values, l->n, weight, state};
  bool ok = ring_table_add_node(scratch, &s, NULL, NULL) == RING_OK;
  ring_table_free(scratch);
  return ok;
}

static void member_encode(ring__sbuf *b, const char *format, const rk_node *n) {
  const char *keys[RING_LABELS_MAX], *values[RING_LABELS_MAX];
  ring_node_spec s;
  rk_node_spec(n, keys, values, &s);
  ring__sb_printf(b, "{\"format\":\"%s\",", format);
  ring__node_fields_encode(b, &s);
}

int rk_node_encode(const rk_node *n, char **json, size_t *len) {
  if (n == NULL || json == NULL || !member_valid(n->id, n->addr, &n->labels, n->weight, n->state) ||
      (unsigned)n->desired >= N_KEYS(desired_names) || n->lost_ms > RING_VERSION_MAX ||
      n->since_ms > RING_VERSION_MAX || !rk_keys_valid(n->key, n->next_key))
    return RING_EINVAL;
  ring__sbuf b = {0};
  member_encode(&b, NODE_FORMAT, n);
  ring__sb_printf(
      &b, ",\"state\":\"%s\",\"desired\":\"%s\",\"lost_ms\":%" PRIu64 ",\"since_ms\":%" PRIu64,
      ring_node_state_name(n->state), rk_desired_name(n->desired), n->lost_ms, n->since_ms);
  key_encode(&b, n->key, n->next_key);
  ring__sb_printf(&b, "}");
  return ring__sb_finish(&b, json, len);
}

/* ------------------------------------------------------------------- alive */

/* started_ms, then the optional capacity_bytes and free_bytes (absent: 0). */
static int alive_rest(const cJSON *root, rk_node *n, void *extra, ring_error *err) {
  uint64_t *v = extra;
  int rc = key_rest(root, n, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "started_ms", 0, RING_VERSION_MAX, RING_EFIELD, &v[0], err);
  static const char *const optional[] = {"capacity_bytes", "free_bytes"};
  for (int i = 0; i < 2 && rc == RING_OK; i++)
    if (ring__json_field(root, optional[i]) != NULL)
      rc = ring__json_uint(root, optional[i], 0, RING_VERSION_MAX, RING_EFIELD, &v[1 + i], err);
  return rc;
}

int rk_alive_decode(const char *json, size_t len, rk_alive *out, ring_error *err) {
  static const char *const keys[] = {"format", "id",         "addr",           "labels",
                                     "weight", "started_ms", "capacity_bytes", "free_bytes",
                                     "key",    "next_key"};
  rk_node n = {0};
  uint64_t nums[3] = {0}; /* started_ms, capacity_bytes, free_bytes */
  int rc = member_record_decode(json, len, ALIVE_FORMAT, keys, N_KEYS(keys), false, alive_rest, &n,
                                nums, err);
  if (rc != RING_OK || out == NULL)
    return rc;
  memcpy(out->id, n.id, sizeof out->id);
  memcpy(out->addr, n.addr, sizeof out->addr);
  out->labels = n.labels;
  out->weight = n.weight;
  out->started_ms = nums[0];
  out->capacity_bytes = nums[1];
  out->free_bytes = nums[2];
  memcpy(out->key, n.key, sizeof out->key);
  memcpy(out->next_key, n.next_key, sizeof out->next_key);
  return RING_OK;
}

int rk_alive_encode(const rk_alive *a, char **json, size_t *len) {
  if (a == NULL || json == NULL ||
      !member_valid(a->id, a->addr, &a->labels, a->weight, RING_NODE_ACTIVE) ||
      a->started_ms > RING_VERSION_MAX || a->capacity_bytes > RING_VERSION_MAX ||
      a->free_bytes > RING_VERSION_MAX || !rk_keys_valid(a->key, a->next_key))
    return RING_EINVAL;
  rk_node n = {.labels = a->labels, .weight = a->weight};
  memcpy(n.id, a->id, sizeof n.id);
  memcpy(n.addr, a->addr, sizeof n.addr);
  ring__sbuf b = {0};
  member_encode(&b, ALIVE_FORMAT, &n);
  ring__sb_printf(
      &b, ",\"started_ms\":%" PRIu64 ",\"capacity_bytes\":%" PRIu64 ",\"free_bytes\":%" PRIu64,
      a->started_ms, a->capacity_bytes, a->free_bytes);
  key_encode(&b, a->key, a->next_key);
  ring__sb_printf(&b, "}");
  return ring__sb_finish(&b, json, len);
}

/* ---------------------------------------------------------------- progress */

/* The token array `name`: strictly ascending integers below
 * RING_TOKENS_MAX, at least `min` of them, into a malloc()'ed *out (NULL
 * when empty). On failure *out may hold a partial array the caller frees. */
int rk__token_list_decode(const cJSON *root, const char *name, uint32_t min, uint32_t **out,
                          uint32_t *n_out, ring_error *err) {
  const cJSON *arr = ring__json_array(root, name, err);
  if (arr == NULL)
    return RING_EFIELD;
  int n = cJSON_GetArraySize(arr);
  if (n > (int)RING_TOKENS_MAX)
    return ring__err(err, RING_EFIELD, "%s: %d entries, at most %u", name, n, RING_TOKENS_MAX);
  if ((uint32_t)n < min)
    return ring__err(err, RING_EFIELD, "%s: empty", name);
  if (n == 0)
    return RING_OK;
  uint32_t *t = *out = malloc((size_t)n * sizeof *t);
  if (t == NULL)
    return ring__err(err, RING_ENOMEM, "%s: out of memory", name);
  uint32_t i = 0;
  for (const cJSON *e = arr->child; e != NULL; e = e->next, i++) {
    uint64_t v = 0;
    if (!ring__json_as_uint(e, RING_TOKENS_MAX - 1, &v))
      return ring__err(err, RING_EFIELD, "%s[%u]: must be an integer in [0, %u]", name, i,
                       RING_TOKENS_MAX - 1);
    if (i > 0 && v <= t[i - 1])
      return ring__err(err, RING_EFIELD, "%s[%u]: %" PRIu64 " not above %u", name, i, v, t[i - 1]);
    t[i] = (uint32_t)v;
  }
  *n_out = i;
  return RING_OK;
}

/* What decode_token_list accepts, for the encoders. */
bool rk__token_list_valid(const uint32_t *t, uint32_t n, uint32_t min) {
  if (n < min || (n > 0 && t == NULL) || n > RING_TOKENS_MAX)
    return false;
  for (uint32_t i = 0; i < n; i++)
    if (t[i] >= RING_TOKENS_MAX || (i > 0 && t[i] <= t[i - 1]))
      return false;
  return true;
}

void rk__token_list_encode(ring__sbuf *b, const char *name, const uint32_t *t, uint32_t n) {
  ring__sb_printf(b, "\"%s\":[", name);
  for (uint32_t i = 0; i < n; i++)
    ring__sb_printf(b, "%s%u", i ? "," : "", t[i]);
  ring__sb_puts(b, "]");
}

/* One entry of an array of objects (entries_decode): `where` is
 * "name[i]." for its fields; prev is the entry before it, NULL for the
 * first. */
typedef int (*entry_fn)(const cJSON *e, const char *where, void *out, const void *prev, void *ctx,
                        ring_error *err);

typedef struct entry_spec {
  const char *name;        /* the array field */
  const char *const *keys; /* an entry's fields, all required */
  size_t n_keys;
  uint32_t max; /* entries at most */
  size_t size;  /* bytes of a decoded entry */
  entry_fn one;
} entry_spec;

/* The array field sp->name of objects into a malloc()'ed *out (NULL when
 * empty). On failure *out may hold a partial array the caller frees. */
static int entries_decode(const cJSON *root, const entry_spec *sp, void *ctx, void **out,
                          uint32_t *n_out, ring_error *err) {
  const cJSON *arr = ring__json_array(root, sp->name, err);
  if (arr == NULL)
    return RING_EFIELD;
  int n = cJSON_GetArraySize(arr);
  if (n > (int)sp->max)
    return ring__err(err, RING_EFIELD, "%s: %d entries, at most %u", sp->name, n, sp->max);
  if (n == 0)
    return RING_OK;
  char *a = *out = calloc((size_t)n, sp->size);
  if (a == NULL)
    return ring__err(err, RING_ENOMEM, "%s: out of memory", sp->name);
  uint32_t i = 0;
  for (const cJSON *e = arr->child; e != NULL; e = e->next, i++) {
    char where[48], inner[48];
    snprintf(where, sizeof where, "%s[%u].", sp->name, i);
    snprintf(inner, sizeof inner, "%s[%u]: ", sp->name, i);
    if (!cJSON_IsObject(e))
      return ring__err(err, RING_EFIELD, "%smust be an object", inner);
    int rc = ring__json_check_keys(e, inner, sp->keys, sp->n_keys, err);
    if (rc == RING_OK)
      rc = sp->one(e, where, a + (size_t)i * sp->size, i ? a + (size_t)(i - 1) * sp->size : NULL,
                   ctx, err);
    if (rc != RING_OK)
      return rc;
  }
  *n_out = i;
  return RING_OK;
}

/* bsearch's order for a uint32_t key and an element that starts with one
 * (a token, an rk_failing). */
static int by_token(const void *key, const void *elem) {
  uint32_t a = *(const uint32_t *)key, b = *(const uint32_t *)elem;
  return a < b ? -1 : a > b;
}

static bool has_token(const uint32_t *t, uint32_t n, uint32_t token) {
  return n > 0 && bsearch(&token, t, n, sizeof *t, by_token) != NULL;
}

/* What a failing entry is checked against: its record's tokens, and
 * whether the entry's token must be among them (missing/: a reason for a
 * listed token) or must not (progress/: a fetch not yet held). */
typedef struct failing_ctx {
  const uint32_t *tokens;
  uint32_t n;
  bool listed;
} failing_ctx;

/* A failing entry: ctx is a failing_ctx over the tokens decoded before. */
static int failing_one(const cJSON *e, const char *where, void *out, const void *prev, void *ctx,
                       ring_error *err) {
  rk_failing *f = out;
  const rk_failing *before = prev;
  const failing_ctx *c = ctx;
  uint64_t token = 0, attempts = 0;
  int rc = ring__json_uint_at(e, where, "token", 0, RING_TOKENS_MAX - 1, RING_EFIELD, &token, err);
  if (rc == RING_OK && before != NULL && token <= before->token)
    rc = ring__err(err, RING_EFIELD, "%stoken: %" PRIu64 " not above %u", where, token,
                   before->token);
  if (rc == RING_OK && has_token(c->tokens, c->n, (uint32_t)token) != c->listed)
    rc = ring__err(err, RING_EFIELD, "%stoken: %" PRIu64 " %s", where, token,
                   c->listed ? "is not in tokens" : "is also in tokens (held)");
  if (rc == RING_OK)
    rc = ring__json_uint_at(e, where, "attempts", 1, UINT32_MAX, RING_EFIELD, &attempts, err);
  if (rc == RING_OK)
    rc = ring__json_string_copy(e, where, "error", f->error, sizeof f->error, err);
  f->token = (uint32_t)token;
  f->attempts = (uint32_t)attempts;
  return rc;
}

static const char *const failing_keys[] = {"token", "attempts", "error"};
static const entry_spec failing_spec = {"failing",      failing_keys,       N_KEYS(failing_keys),
                                        RK_FAILING_MAX, sizeof(rk_failing), failing_one};

/* What failing_one accepts, for the encoders. */
static bool failing_valid(const rk_failing *f, uint32_t n, const failing_ctx *c) {
  if (n > RK_FAILING_MAX || (n > 0 && f == NULL))
    return false;
  for (uint32_t i = 0; i < n; i++)
    if (f[i].token >= RING_TOKENS_MAX || (i > 0 && f[i].token <= f[i - 1].token) ||
        f[i].attempts == 0 || memchr(f[i].error, '\0', sizeof f[i].error) == NULL ||
        has_token(c->tokens, c->n, f[i].token) != c->listed)
      return false;
  return true;
}

/* ,"failing":[...] when there are entries; nothing otherwise, so a record
 * without failures keeps its bytes. */
static void encode_failing(ring__sbuf *b, const rk_failing *f, uint32_t n) {
  if (n > 0)
    ring__sb_puts(b, ",\"failing\":[");
  for (uint32_t i = 0; i < n; i++) {
    ring__sb_printf(b, "%s{\"token\":%u,\"attempts\":%u,\"error\":", i ? "," : "", f[i].token,
                    f[i].attempts);
    ring__sb_json_string(b, f[i].error);
    ring__sb_puts(b, "}");
  }
  if (n > 0)
    ring__sb_puts(b, "]");
}

int rk_progress_decode(const char *json, size_t len, rk_progress *out, ring_error *err) {
  static const char *const keys[] = {"format", "version", "tokens", "bytes", "failing"};
  cJSON *root = NULL;
  rk_progress p = {0};
  int rc = ring__record_parse(json, len, PROGRESS_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", 0, RING_VERSION_MAX, RING_EVERSION, &p.version, err);
  if (rc == RING_OK)
    rc = rk__token_list_decode(root, "tokens", 0, &p.tokens, &p.n_tokens, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "bytes", 0, RING_VERSION_MAX, RING_EFIELD, &p.bytes, err);
  failing_ctx fc = {p.tokens, p.n_tokens, false};
  if (rc == RING_OK && ring__json_field(root, "failing") != NULL) /* optional */
    rc = entries_decode(root, &failing_spec, &fc, (void **)&p.failing, &p.n_failing, err);
  cJSON_Delete(root);
  if (rc != RING_OK || out == NULL) {
    rk_progress_free(&p);
    return rc;
  }
  *out = p;
  return RING_OK;
}

int rk_progress_encode(const rk_progress *p, char **json, size_t *len) {
  if (p == NULL || json == NULL || !rk__token_list_valid(p->tokens, p->n_tokens, 0) ||
      p->version > RING_VERSION_MAX || p->bytes > RING_VERSION_MAX)
    return RING_EINVAL;
  failing_ctx fc = {p->tokens, p->n_tokens, false};
  if (!failing_valid(p->failing, p->n_failing, &fc))
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b, "{\"format\":\"" PROGRESS_FORMAT "\",\"version\":%" PRIu64 ",", p->version);
  rk__token_list_encode(&b, "tokens", p->tokens, p->n_tokens);
  ring__sb_printf(&b, ",\"bytes\":%" PRIu64, p->bytes);
  encode_failing(&b, p->failing, p->n_failing);
  ring__sb_puts(&b, "}");
  return ring__sb_finish(&b, json, len);
}

void rk_progress_free(rk_progress *p) {
  if (p == NULL)
    return;
  free(p->tokens);
  free(p->failing);
  p->tokens = NULL;
  p->n_tokens = 0;
  p->failing = NULL;
  p->n_failing = 0;
}

bool rk_progress_covers(const rk_progress *p, const uint32_t *want, uint32_t n) {
  uint32_t j = 0;
  for (uint32_t i = 0; i < n; i++) {
    while (p && j < p->n_tokens && p->tokens[j] < want[i])
      j++;
    if (p == NULL || j == p->n_tokens || p->tokens[j] != want[i])
      return false;
  }
  return true;
}

const rk_failing *rk_progress_failing(const rk_progress *p, uint32_t token) {
  if (p == NULL || p->n_failing == 0)
    return NULL;
  return bsearch(&token, p->failing, p->n_failing, sizeof *p->failing, by_token);
}

/* ----------------------------------------------------------------- missing */

int rk_missing_decode(const char *json, size_t len, rk_missing *out, ring_error *err) {
  static const char *const keys[] = {"format", "version", "tokens", "failing"};
  cJSON *root = NULL;
  rk_missing m = {0};
  int rc = ring__record_parse(json, len, MISSING_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", 1, RING_VERSION_MAX, RING_EVERSION, &m.version, err);
  if (rc == RING_OK)
    rc = rk__token_list_decode(root, "tokens", 1, &m.tokens, &m.n_tokens, err);
  failing_ctx fc = {m.tokens, m.n_tokens, true};
  if (rc == RING_OK && ring__json_field(root, "failing") != NULL) /* optional */
    rc = entries_decode(root, &failing_spec, &fc, (void **)&m.failing, &m.n_failing, err);
  cJSON_Delete(root);
  if (rc != RING_OK || out == NULL) {
    rk_missing_free(&m);
    return rc;
  }
  *out = m;
  return RING_OK;
}

int rk_missing_encode(const rk_missing *m, char **json, size_t *len) {
  if (m == NULL || json == NULL || m->version == 0 || m->version > RING_VERSION_MAX ||
      !rk__token_list_valid(m->tokens, m->n_tokens, 1))
    return RING_EINVAL;
  failing_ctx fc = {m->tokens, m->n_tokens, true};
  if (!failing_valid(m->failing, m->n_failing, &fc))
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b, "{\"format\":\"" MISSING_FORMAT "\",\"version\":%" PRIu64 ",", m->version);
  rk__token_list_encode(&b, "tokens", m->tokens, m->n_tokens);
  encode_failing(&b, m->failing, m->n_failing);
  ring__sb_puts(&b, "}");
  return ring__sb_finish(&b, json, len);
}

void rk_missing_free(rk_missing *m) {
  if (m == NULL)
    return;
  free(m->tokens);
  free(m->failing);
  memset(m, 0, sizeof *m);
}

bool rk_missing_has(const rk_missing *m, uint32_t token) {
  return m != NULL && has_token(m->tokens, m->n_tokens, token);
}

/* ------------------------------------------------------------------ leader */

int rk_leader_decode(const char *json, size_t len, rk_leader *out, ring_error *err) {
  static const char *const keys[] = {"format", "id", "addr", "pid"};
  cJSON *root = NULL;
  rk_leader l = {0};
  uint64_t pid = 0;
  int rc = ring__record_parse(json, len, LEADER_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK &&
      (rc = ring__json_string_copy(root, "", "id", l.id, sizeof l.id, err)) == RING_OK &&
      !ring_id_valid(l.id))
    rc = ring__err(err, RING_ENODEID, "id: \"%s\" must match [a-z0-9._-]{1,63}", l.id);
  if (rc == RING_OK &&
      (rc = ring__json_string_copy(root, "", "addr", l.addr, sizeof l.addr, err)) == RING_OK &&
      *l.addr && !ring__valid_addr(l.addr))
    rc = ring__err(err, RING_EFIELD, "addr: \"%.64s\" is not \"\" or host:port", l.addr);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "pid", 0, RING_VERSION_MAX, RING_EFIELD, &pid, err);
  cJSON_Delete(root);
  if (rc != RING_OK)
    return rc;
  l.pid = (int64_t)pid;
  if (out)
    *out = l;
  return RING_OK;
}

int rk_leader_encode(const rk_leader *l, char **json, size_t *len) {
  if (l == NULL || json == NULL || memchr(l->id, '\0', sizeof l->id) == NULL ||
      !ring_id_valid(l->id) || memchr(l->addr, '\0', sizeof l->addr) == NULL ||
      (*l->addr && !ring__valid_addr(l->addr)) || l->pid < 0 || (uint64_t)l->pid > RING_VERSION_MAX)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(
      &b, "{\"format\":\"" LEADER_FORMAT "\",\"id\":\"%s\",\"addr\":\"%s\",\"pid\":%" PRId64 "}",
      l->id, l->addr, l->pid);
  return ring__sb_finish(&b, json, len);
}

/* -------------------------------------------------------------------- loss */

int rk_loss_decode(const char *json, size_t len, rk_loss *out, ring_error *err) {
  static const char *const keys[] = {"format", "version", "tokens", "by", "at_ms"};
  cJSON *root = NULL;
  rk_loss l = {0};
  int rc = ring__record_parse(json, len, LOSS_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", 1, RING_VERSION_MAX, RING_EVERSION, &l.version, err);
  if (rc == RING_OK)
    rc = rk__token_list_decode(root, "tokens", 1, &l.tokens, &l.n_tokens, err);
  if (rc == RING_OK &&
      (rc = ring__json_string_copy(root, "", "by", l.by, sizeof l.by, err)) == RING_OK &&
      !ring_id_valid(l.by))
    rc = ring__err(err, RING_EFIELD, "by: \"%s\" must match [a-z0-9._-]{1,63}", l.by);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "at_ms", 0, RING_VERSION_MAX, RING_EFIELD, &l.at_ms, err);
  cJSON_Delete(root);
  if (rc != RING_OK || out == NULL) {
    rk_loss_free(&l);
    return rc;
  }
  *out = l;
  return RING_OK;
}

int rk_loss_encode(const rk_loss *l, char **json, size_t *len) {
  if (l == NULL || json == NULL || l->version < 1 || l->version > RING_VERSION_MAX ||
      !rk__token_list_valid(l->tokens, l->n_tokens, 1) ||
      memchr(l->by, '\0', sizeof l->by) == NULL || !ring_id_valid(l->by) ||
      l->at_ms > RING_VERSION_MAX)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b, "{\"format\":\"" LOSS_FORMAT "\",\"version\":%" PRIu64 ",", l->version);
  rk__token_list_encode(&b, "tokens", l->tokens, l->n_tokens);
  ring__sb_printf(&b, ",\"by\":\"%s\",\"at_ms\":%" PRIu64 "}", l->by, l->at_ms);
  return ring__sb_finish(&b, json, len);
}

void rk_loss_free(rk_loss *l) {
  if (l == NULL)
    return;
  free(l->tokens);
  l->tokens = NULL;
  l->n_tokens = 0;
}

bool rk_loss_covers(const rk_loss *l, uint64_t version, uint32_t token) {
  return l != NULL && l->version == version && has_token(l->tokens, l->n_tokens, token);
}

/* ------------------------------------------------------------------- stuck */

/* A node id field: `from` may be "" (no owner before). */
static int stuck_node(const cJSON *e, const char *where, const char *name, bool may_be_empty,
                      char dst[RING_ID_MAX + 1], ring_error *err) {
  int rc = ring__json_string_copy(e, where, name, dst, RING_ID_MAX + 1, err);
  if (rc == RING_OK && !(may_be_empty && *dst == '\0') && !ring_id_valid(dst))
    rc = ring__err(err, RING_ENODEID, "%s%s: \"%s\" must be %sa node id", where, name, dst,
                   may_be_empty ? "\"\" or " : "");
  return rc;
}

static int stuck_one(const cJSON *e, const char *where, void *out, const void *prev, void *ctx,
                     ring_error *err) {
  (void)ctx;
  rk_stuck_move *m = out;
  const rk_stuck_move *before = prev;
  uint64_t token = 0, slot = 0;
  int rc = ring__json_uint_at(e, where, "token", 0, RING_TOKENS_MAX - 1, RING_EFIELD, &token, err);
  if (rc == RING_OK)
    rc = ring__json_uint_at(e, where, "slot", 0, RING_REPLICAS_MAX - 1, RING_EFIELD, &slot, err);
  if (rc == RING_OK && before != NULL &&
      (token < before->token || (token == before->token && slot <= before->slot)))
    rc = ring__err(err, RING_EFIELD, "%stoken: (%" PRIu64 ", %" PRIu64 ") not after (%u, %u)",
                   where, token, slot, before->token, before->slot);
  if (rc == RING_OK)
    rc = stuck_node(e, where, "from", true, m->from, err);
  if (rc == RING_OK)
    rc = stuck_node(e, where, "to", false, m->to, err);
  if (rc == RING_OK)
    rc = ring__json_string_copy(e, where, "error", m->error, sizeof m->error, err);
  if (rc == RING_OK)
    rc = ring__json_uint_at(e, where, "for_ms", 0, RING_VERSION_MAX, RING_EFIELD, &m->for_ms, err);
  m->token = (uint32_t)token;
  m->slot = (uint32_t)slot;
  return rc;
}

static const char *const stuck_keys[] = {"token", "slot", "from", "to", "error", "for_ms"};
static const entry_spec stuck_spec = {
    "moves", stuck_keys, N_KEYS(stuck_keys), RK_STUCK_MAX, sizeof(rk_stuck_move), stuck_one};

static bool plan_id_valid(const char *id) {
  return strlen(id) == RK_PLAN_ID_LEN && strspn(id, "0123456789abcdef") == RK_PLAN_ID_LEN;
}

int rk_stuck_decode(const char *json, size_t len, rk_stuck *out, ring_error *err) {
  static const char *const keys[] = {"format", "version", "plan", "moves", "more"};
  cJSON *root = NULL;
  rk_stuck st = {0};
  int rc = ring__record_parse(json, len, STUCK_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", 1, RING_VERSION_MAX, RING_EVERSION, &st.version, err);
  if (rc == RING_OK &&
      (rc = ring__json_string_copy(root, "", "plan", st.plan, sizeof st.plan, err)) == RING_OK &&
      !plan_id_valid(st.plan))
    rc = ring__err(err, RING_EFIELD, "plan: \"%s\" is not a plan id (%d hex digits)", st.plan,
                   RK_PLAN_ID_LEN);
  if (rc == RING_OK)
    rc = entries_decode(root, &stuck_spec, NULL, (void **)&st.moves, &st.n_moves, err);
  if (rc == RING_OK)
    rc = ring__json_u32_at(root, "", "more", &st.more, err);
  if (rc == RING_OK && st.more > 0 && st.n_moves < RK_STUCK_MAX)
    rc = ring__err(err, RING_EFIELD, "more: %u with only %u moves listed (up to %d are)", st.more,
                   st.n_moves, RK_STUCK_MAX);
  cJSON_Delete(root);
  if (rc != RING_OK || out == NULL) {
    rk_stuck_free(&st);
    return rc;
  }
  *out = st;
  return RING_OK;
}

/* Strings that are not NUL-terminated within their arrays cannot be
 * printed; every other rule is the decoder's (rk_stuck_encode). */
static bool stuck_printable(const rk_stuck *s) {
  if (memchr(s->plan, '\0', sizeof s->plan) == NULL || s->n_moves > RK_STUCK_MAX ||
      (s->n_moves > 0 && s->moves == NULL))
    return false;
  for (uint32_t i = 0; i < s->n_moves; i++) {
    const rk_stuck_move *m = &s->moves[i];
    if (memchr(m->from, '\0', sizeof m->from) == NULL ||
        memchr(m->to, '\0', sizeof m->to) == NULL ||
        memchr(m->error, '\0', sizeof m->error) == NULL)
      return false;
  }
  return true;
}

/* The encoder writes, then refuses what its decoder refuses by decoding
 * the result: the rules live in one place. */
int rk_stuck_encode(const rk_stuck *s, char **json, size_t *len) {
  if (s == NULL || json == NULL || !stuck_printable(s))
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b,
                  "{\"format\":\"" STUCK_FORMAT "\",\"version\":%" PRIu64 ",\"plan\":", s->version);
  ring__sb_json_string(&b, s->plan);
  ring__sb_puts(&b, ",\"moves\":[");
  for (uint32_t i = 0; i < s->n_moves; i++) {
    const rk_stuck_move *m = &s->moves[i];
    ring__sb_printf(&b, "%s{\"token\":%u,\"slot\":%u,\"from\":", i ? "," : "", m->token, m->slot);
    ring__sb_json_string(&b, m->from);
    ring__sb_puts(&b, ",\"to\":");
    ring__sb_json_string(&b, m->to);
    ring__sb_puts(&b, ",\"error\":");
    ring__sb_json_string(&b, m->error);
    ring__sb_printf(&b, ",\"for_ms\":%" PRIu64 "}", m->for_ms);
  }
  ring__sb_printf(&b, "],\"more\":%u}", s->more);
  char *text = NULL;
  size_t n = 0;
  int rc = ring__sb_finish(&b, &text, &n);
  if (rc == RING_OK && rk_stuck_decode(text, n, NULL, NULL) != RING_OK) {
    free(text);
    rc = RING_EINVAL;
  }
  if (rc == RING_OK) {
    *json = text;
    if (len)
      *len = n;
  }
  return rc;
}

void rk_stuck_free(rk_stuck *s) {
  if (s == NULL)
    return;
  free(s->moves);
  s->moves = NULL;
  s->n_moves = 0;
}

/* ------------------------------------------------------------ host records */

static const struct {
  const char *name, *dir;
  size_t max;
} host_kinds[RK_HOST_KINDS] = {
    [RK_HOST_ALIVE] = {"alive", "alive/", RK_ALIVE_VALUE_MAX},
    [RK_HOST_ACK] = {"acks", "acks/", RK_ACK_VALUE_MAX},
    [RK_HOST_PROGRESS] = {"progress", "progress/", RK_PROGRESS_VALUE_MAX},
    [RK_HOST_CLIENT] = {"clients", "clients/", RK_CLIENT_VALUE_MAX},
    [RK_HOST_MISSING] = {"missing", "missing/", RK_MISSING_VALUE_MAX},
    [RK_HOST_RECOVERY] = {"recovery", "recovery/", RK_RECOVERY_VALUE_MAX},
    [RK_HOST_SIZES] = {"sizes", "sizes/", RK_SIZES_VALUE_MAX},
};

const char *rk_host_kind_name(rk_host_kind k) {
  return (unsigned)k < RK_HOST_KINDS ? host_kinds[k].name : "?";
}

const char *rk_host_kind_dir(rk_host_kind k) {
  return (unsigned)k < RK_HOST_KINDS ? host_kinds[k].dir : "?";
}

size_t rk_host_value_max(rk_host_kind k) {
  return (unsigned)k < RK_HOST_KINDS ? host_kinds[k].max : 0;
}

int rk_host_size_check(rk_host_kind k, size_t len, ring_error *err) {
  size_t max = rk_host_value_max(k);
  if (len <= max)
    return RING_OK;
  return ring__err(err, RING_ETOOBIG, "%zu bytes over the %zu cap", len, max);
}

int rk_ack_decode(const char *value, size_t len, uint64_t *version, ring_error *err) {
  uint64_t v = 0;
  if (value == NULL)
    return ring__err(err, RING_EINVAL, "ack: NULL input");
  if (len == 0 || len > 16 || value[0] == '0')
    return ring__err(err, RING_EVERSION, "not a version number (%zu bytes)", len);
  for (size_t i = 0; i < len; i++) {
    if (value[i] < '0' || value[i] > '9')
      return ring__err(err, RING_EVERSION, "not a version number: byte %zu is not a digit", i);
    v = v * 10 + (uint64_t)(value[i] - '0');
  }
  if (v > RING_VERSION_MAX)
    return ring__err(err, RING_EVERSION, "version %" PRIu64 " over 2^53-1", v);
  if (version != NULL)
    *version = v;
  return RING_OK;
}

int rk_client_decode(const char *json, size_t len, rk_client *out, ring_error *err) {
  static const char *const keys[] = {"format", "kind"};
  cJSON *root = NULL;
  rk_client c = {{0}};
  int rc = ring__record_parse(json, len, CLIENT_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK &&
      (rc = ring__json_string_copy(root, "", "kind", c.kind, sizeof c.kind, err)) == RING_OK &&
      !ring_id_valid(c.kind))
    rc = ring__err(err, RING_EFIELD, "kind: \"%.64s\" must match [a-z0-9._-]{1,63}", c.kind);
  cJSON_Delete(root);
  if (rc == RING_OK && out != NULL)
    *out = c;
  return rc;
}

int rk_client_encode(const rk_client *c, char **json, size_t *len) {
  if (c == NULL || json == NULL || memchr(c->kind, '\0', sizeof c->kind) == NULL ||
      !ring_id_valid(c->kind))
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b, "{\"format\":\"" CLIENT_FORMAT "\",\"kind\":\"%s\"}", c->kind);
  return ring__sb_finish(&b, json, len);
}

/* ------------------------------------------------- a restored etcd */

int rk_recovery_decode(const char *json, size_t len, rk_recovery *out, ring_error *err) {
  static const char *const keys[] = {"format",        "seen_version", "seen_revision",
                                     "table_version", "tokens",       "at_ms"};
  cJSON *root = NULL;
  rk_recovery r = {0};
  int rc = ring__record_parse(json, len, RECOVERY_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "seen_version", 1, RING_VERSION_MAX, RING_EVERSION, &r.seen_version,
                         err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "seen_revision", 0, RING_VERSION_MAX, RING_EFIELD, &r.seen_revision,
                         err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "table_version", 0, r.seen_version, RING_EVERSION, &r.table_version,
                         err);
  if (rc == RING_OK)
    rc = rk__token_list_decode(root, "tokens", 0, &r.tokens, &r.n_tokens, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "at_ms", 0, RING_VERSION_MAX, RING_EFIELD, &r.at_ms, err);
  cJSON_Delete(root);
  if (rc != RING_OK || out == NULL) {
    rk_recovery_free(&r);
    return rc;
  }
  *out = r;
  return RING_OK;
}

int rk_recovery_encode(const rk_recovery *r, char **json, size_t *len) {
  if (r == NULL || json == NULL || r->seen_version < 1 || r->seen_version > RING_VERSION_MAX ||
      r->seen_revision > RING_VERSION_MAX || r->table_version > r->seen_version ||
      !rk__token_list_valid(r->tokens, r->n_tokens, 0) || r->at_ms > RING_VERSION_MAX)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b,
                  "{\"format\":\"" RECOVERY_FORMAT "\",\"seen_version\":%" PRIu64
                  ",\"seen_revision\":%" PRIu64 ",\"table_version\":%" PRIu64 ",",
                  r->seen_version, r->seen_revision, r->table_version);
  rk__token_list_encode(&b, "tokens", r->tokens, r->n_tokens);
  ring__sb_printf(&b, ",\"at_ms\":%" PRIu64 "}", r->at_ms);
  return ring__sb_finish(&b, json, len);
}

void rk_recovery_free(rk_recovery *r) {
  if (r == NULL)
    return;
  free(r->tokens);
  r->tokens = NULL;
  r->n_tokens = 0;
}
