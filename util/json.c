/*
 * json.c: what the codecs of libring (table, delta) and of proto/ share:
 * typed access to JSON fields with precise errors, a node record's fields
 * in both directions, checksums, the top-level parse and records' format.
 */
#include "ringx.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ fields */

/* Checks that obj has only the listed keys, each at most once. */
int ring__json_check_keys(const cJSON *obj, const char *where, const char *const *keys,
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
bool ring__json_as_uint(const cJSON *item, uint64_t max, uint64_t *out) {
  if (!cJSON_IsNumber(item))
    return false;
  double v = item->valuedouble;
  if (!isfinite(v) || v < 0 || v != floor(v) || v > (double)max)
    return false;
  *out = (uint64_t)v;
  return true;
}

const cJSON *ring__json_field(const cJSON *obj, const char *name) {
  return cJSON_GetObjectItemCaseSensitive(obj, name);
}

int ring__json_string(const cJSON *obj, const char *where, const char *name, const char **out,
                      ring_error *err) {
  const cJSON *it = ring__json_field(obj, name);
  if (!cJSON_IsString(it))
    return ring__err(err, RING_EFIELD, "%s%s: %s", where, name,
                     it ? "must be a string" : "missing");
  *out = it->valuestring;
  return RING_OK;
}

/* An integer field in [min, max]; out of range (or not an integer) is
 * `code`, missing or not a number RING_EFIELD. */
int ring__json_uint(const cJSON *obj, const char *name, uint64_t min, uint64_t max, int code,
                    uint64_t *out, ring_error *err) {
  return ring__json_uint_at(obj, "", name, min, max, code, out, err);
}

int ring__json_uint_at(const cJSON *obj, const char *where, const char *name, uint64_t min,
                       uint64_t max, int code, uint64_t *out, ring_error *err) {
  const cJSON *it = ring__json_field(obj, name);
  if (it == NULL)
    return ring__err(err, RING_EFIELD, "%s%s: missing", where, name);
  if (!ring__json_as_uint(it, max, out) || *out < min)
    return ring__err(err, cJSON_IsNumber(it) ? code : RING_EFIELD,
                     "%s%s: must be an integer in [%" PRIu64 ", %" PRIu64 "]", where, name, min,
                     max);
  return RING_OK;
}

int ring__json_u32_at(const cJSON *obj, const char *where, const char *name, uint32_t *out,
                      ring_error *err) {
  uint64_t v = 0;
  int rc = ring__json_uint_at(obj, where, name, 0, UINT32_MAX, RING_EFIELD, &v, err);
  if (rc == RING_OK)
    *out = (uint32_t)v;
  return rc;
}

int ring__enum_parse(const char *const *names, size_t n, const char *name) {
  for (size_t i = 0; name != NULL && i < n; i++)
    if (strcmp(name, names[i]) == 0)
      return (int)i;
  return RING_EINVAL;
}

const char *ring__enum_name(const char *const *names, size_t n, unsigned value) {
  return value < n ? names[value] : "unknown";
}

int ring__json_string_copy(const cJSON *obj, const char *where, const char *name, char *dst,
                           size_t cap, ring_error *err) {
  const char *s = "";
  int rc = ring__json_string(obj, where, name, &s, err);
  if (rc != RING_OK)
    return rc;
  size_t n = strlen(s);
  if (n >= cap)
    return ring__err(err, RING_EFIELD, "%s%s: %zu bytes, at most %zu", where, name, n, cap - 1);
  memcpy(dst, s, n + 1);
  return RING_OK;
}

int ring__json_bool(const cJSON *obj, const char *where, const char *name, bool *out,
                    ring_error *err) {
  const cJSON *it = ring__json_field(obj, name);
  if (!cJSON_IsBool(it))
    return ring__err(err, RING_EFIELD, "%s%s: %s", where, name,
                     it ? "must be true or false" : "missing");
  *out = cJSON_IsTrue(it);
  return RING_OK;
}

const cJSON *ring__json_object(const cJSON *obj, const char *where, const char *name,
                               const char *const *keys, size_t n_keys, ring_error *err) {
  const cJSON *it = ring__json_field(obj, name);
  if (!cJSON_IsObject(it)) {
    ring__err(err, RING_EFIELD, "%s%s: %s", where, name, it ? "must be an object" : "missing");
    return NULL;
  }
  char inner[80];
  snprintf(inner, sizeof inner, "%s%s: ", where, name);
  return ring__json_check_keys(it, inner, keys, n_keys, err) == RING_OK ? it : NULL;
}

const cJSON *ring__json_array(const cJSON *obj, const char *name, ring_error *err) {
  const cJSON *it = ring__json_field(obj, name);
  if (!cJSON_IsArray(it))
    ring__err(err, RING_EFIELD, "%s: %s", name, it ? "must be an array" : "missing");
  return cJSON_IsArray(it) ? it : NULL;
}

/* "xxh3-64:<16 lowercase hex digits>" -> the 64-bit value. */
int ring__json_checksum(const cJSON *obj, const char *name, uint64_t *out, ring_error *err) {
  const char *s = "";
  int rc = ring__json_string(obj, "", name, &s, err);
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
                     "%s: \"%.40s\" is not " HASH_NAME ":<16 lowercase hex digits>", name, s);
  *out = v;
  return RING_OK;
}

static bool only_space(const char *p, const char *end) {
  for (; p < end; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
      return false;
  return true;
}

/* ------------------------------------------------------- node records */

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

int ring__node_fields_decode(const cJSON *node, const char *where, bool with_state,
                             const char **keys, const char **values, ring_node_spec *s,
                             ring_error *err) {
  const char *state = "active";
  *s = (ring_node_spec){.label_keys = keys, .label_values = values};
  int rc = ring__json_string(node, where, "id", &s->id, err);
  if (rc != RING_OK)
    rc = ring__err(err, RING_ENODEID, "%sid: missing or not a string", where);
  if (rc == RING_OK)
    rc = ring__json_string(node, where, "addr", &s->addr, err);
  if (rc == RING_OK)
    rc = decode_labels(ring__json_field(node, "labels"), where, keys, values, &s->n_labels, err);
  const cJSON *w = ring__json_field(node, "weight");
  if (rc == RING_OK && !cJSON_IsNumber(w))
    rc = ring__err(err, RING_ENODE, "%sweight: missing or not a number", where);
  if (rc == RING_OK && with_state &&
      (rc = ring__json_string(node, where, "state", &state, err)) == RING_OK &&
      ring__node_state_parse(state) < 0)
    rc = ring__err(err, RING_ENODE, "%sstate: \"%.32s\" unknown", where, state);
  if (rc != RING_OK)
    return rc;
  s->weight = w->valuedouble;
  s->state = (ring_node_state)ring__node_state_parse(state);
  return RING_OK;
}

/* ------------------------------------------------------------- parse */

int ring__json_parse_object(const char *json, size_t len, const char *what, cJSON **root,
                            ring_error *err) {
  if (len > RING_TABLE_JSON_MAX)
    return ring__err(err, RING_ETOOBIG, "%s of %zu bytes exceeds %u", what, len,
                     RING_TABLE_JSON_MAX);
  const char *end = NULL;
  cJSON *r = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  if (r == NULL || end == NULL || !only_space(end, json + len)) {
    size_t at = end ? (size_t)(end - json) : 0;
    cJSON_Delete(r);
    return ring__err(err, RING_EJSON, "malformed JSON near byte %zu", at);
  }
  if (!cJSON_IsObject(r)) {
    cJSON_Delete(r);
    return ring__err(err, RING_EJSON, "top level must be an object");
  }
  *root = r;
  return RING_OK;
}

/* ---------------------------------------------------------- encoding */

/* The shortest decimal that reads back as exactly w, always with a '.' or
 * exponent (as table_codec.c writes weights). */
void ring__format_weight(double w, char *out, size_t cap) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(out, cap, "%.*g", prec, w);
    if (strtod(out, NULL) == w)
      break;
  }
  if (strpbrk(out, ".e") == NULL)
    strncat(out, ".0", cap - strlen(out) - 1);
}

void ring__node_fields_encode(ring__sbuf *b, const ring_node_spec *s) {
  char w[40];
  ring__sb_puts(b, "\"id\":");
  ring__sb_json_string(b, s->id);
  ring__sb_puts(b, ",\"addr\":");
  ring__sb_json_string(b, s->addr);
  ring__sb_puts(b, ",\"labels\":{");
  for (uint32_t l = 0; l < s->n_labels; l++) {
    ring__sb_puts(b, l ? "," : "");
    ring__sb_json_string(b, s->label_keys[l]);
    ring__sb_puts(b, ":");
    ring__sb_json_string(b, s->label_values[l]);
  }
  ring__format_weight(s->weight, w, sizeof w);
  ring__sb_printf(b, "},\"weight\":%s", w);
}

/* --------------------------------------------- records: format, keys */

int ring__record_check(const cJSON *obj, const char *format, const char *const *keys, size_t n_keys,
                       ring_error *err) {
  const char *f = "";
  if (!cJSON_IsObject(obj))
    return ring__err(err, RING_EFIELD, "%s: must be an object", format);
  int rc = ring__json_string(obj, "", "format", &f, err);
  if (rc == RING_OK && strcmp(f, format) != 0)
    rc = ring__err(err, RING_EFORMAT, "format: \"%.64s\" (want \"%s\")", f, format);
  return rc == RING_OK ? ring__json_check_keys(obj, "", keys, n_keys, err) : rc;
}

int ring__record_parse(const char *json, size_t len, const char *format, const char *const *keys,
                       size_t n_keys, cJSON **root, ring_error *err) {
  if (json == NULL)
    return ring__err(err, RING_EINVAL, "%s: NULL input", format);
  cJSON *r = NULL;
  int rc = ring__json_parse_object(json, len, format, &r, err);
  if (rc == RING_OK)
    rc = ring__record_check(r, format, keys, n_keys, err);
  if (rc != RING_OK) {
    cJSON_Delete(r);
    return rc;
  }
  *root = r;
  return RING_OK;
}
