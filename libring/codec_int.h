/*
 * codec_int.h: libring's JSON codec helpers (codec_common.c), shared by the
 * table and delta codecs here and by the control-plane codecs of proto/
 * (the etcd records, plans, runs, the arc manifest), which sit above
 * libring and include this header.
 * Every decoder error names the field: `where` prefixes messages ("nodes[3]: ",
 * "throttle.").
 */
#ifndef RING_CODEC_INT_H
#define RING_CODEC_INT_H

#include "ring_int.h"

#include <cjson/cJSON.h>

#define HASH_NAME "xxh3-64"

/* Checks that obj has only the listed keys (at most 32), each at most once. */
int ring__json_check_keys(const cJSON *obj, const char *where, const char *const *keys,
                          size_t n_keys, ring_error *err);
/* A JSON number that is an integer in [0, max]. */
bool ring__json_as_uint(const cJSON *item, uint64_t max, uint64_t *out);
const cJSON *ring__json_field(const cJSON *obj, const char *name);
/* A string field; RING_EFIELD when missing or not a string. */
int ring__json_string(const cJSON *obj, const char *where, const char *name, const char **out,
                      ring_error *err);
/* An integer field in [min, max]: out of range is `code`, missing or not a
 * number RING_EFIELD. */
int ring__json_uint(const cJSON *obj, const char *name, uint64_t min, uint64_t max, int code,
                    uint64_t *out, ring_error *err);
/* The same with a prefix for the field's name ("throttle."). */
int ring__json_uint_at(const cJSON *obj, const char *where, const char *name, uint64_t min,
                       uint64_t max, int code, uint64_t *out, ring_error *err);
/* An integer field in [0, 2^32-1]; anything else is RING_EFIELD. */
int ring__json_u32_at(const cJSON *obj, const char *where, const char *name, uint32_t *out,
                      ring_error *err);
/* Enumerations by name: the index of name in names[0..n) or RING_EINVAL;
 * the name of a value, "unknown" when out of range. */
int ring__enum_parse(const char *const *names, size_t n, const char *name);
const char *ring__enum_name(const char *const *names, size_t n, unsigned value);
/* A string field copied into dst[cap]; RING_EFIELD when missing, mistyped
 * or too long (dst untouched then). */
int ring__json_string_copy(const cJSON *obj, const char *where, const char *name, char *dst,
                           size_t cap, ring_error *err);
/* A true/false field; RING_EFIELD when missing or not a boolean. */
int ring__json_bool(const cJSON *obj, const char *where, const char *name, bool *out,
                    ring_error *err);
/* An object field holding only the listed keys, or NULL with RING_EFIELD
 * in err. */
const cJSON *ring__json_object(const cJSON *obj, const char *where, const char *name,
                               const char *const *keys, size_t n_keys, ring_error *err);
/* An array field, or NULL with RING_EFIELD in err. */
const cJSON *ring__json_array(const cJSON *obj, const char *name, ring_error *err);
/* "xxh3-64:<16 lowercase hex digits>" -> the value; RING_ECHECKSUM if malformed. */
int ring__json_checksum(const cJSON *obj, const char *name, uint64_t *out, ring_error *err);
/* Parses len bytes that must hold one JSON object and nothing but white
 * space after it; `what` names the document in errors ("table", "delta"). */
int ring__json_parse_object(const char *json, size_t len, const char *what, cJSON **root,
                            ring_error *err);

/* A node record (proto/table.md) as a builder spec borrowing its strings;
 * keys/values hold RING_LABELS_MAX entries. */
int ring__node_record_decode(const cJSON *node, const char *where, const char **keys,
                             const char **values, ring_node_spec *s, ring_error *err);
/* The id, addr, labels, weight (and state when with_state; else the spec
 * says active) of a node object whose keys the caller has checked. Types
 * only: values are the builder's to validate. */
int ring__node_fields_decode(const cJSON *node, const char *where, bool with_state,
                             const char **keys, const char **values, ring_node_spec *s,
                             ring_error *err);
void ring__node_record_encode(ring__sbuf *b, const ring__node *n);
/* Appends "id":..,"addr":..,"labels":{..},"weight":.. (no braces). */
void ring__node_fields_encode(ring__sbuf *b, const ring_node_spec *s);
/* Appends s as a JSON string, quoted and escaped. */
void ring__sb_json_string(ring__sbuf *b, const char *s);
/* The shortest decimal that reads back as exactly w, with a '.' or an
 * exponent; cap >= 32. */
void ring__format_weight(double w, char *out, size_t cap);
/* One [token, slot, node_index] entry, strictly after *prev in (token, slot). */
int ring__pending_entry_decode(ring_table *t, const cJSON *e, uint32_t i, uint64_t *prev,
                               ring_error *err);

/* ------------------------------------------ records (codec_common.c) */

/* Parses a record: one object whose "format" is `format` (else
 * RING_EFORMAT) holding only the listed keys. *root is the caller's to
 * cJSON_Delete. */
int ring__record_parse(const char *json, size_t len, const char *format, const char *const *keys,
                       size_t n_keys, cJSON **root, ring_error *err);
/* The same checks on an object already parsed. */
int ring__record_check(const cJSON *obj, const char *format, const char *const *keys, size_t n_keys,
                       ring_error *err);
/* Hands b's string to *json (and its length to *len if not NULL), or frees
 * it and returns RING_ENOMEM when an append failed. */
int ring__sb_finish(ring__sbuf *b, char **json, size_t *len);

#endif /* RING_CODEC_INT_H */
