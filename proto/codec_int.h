/*
 * codec_int.h: helpers shared by the table and delta codecs (codec_common.c).
 * Every decoder error names the field: `where` prefixes messages ("nodes[3]: ").
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
void ring__node_record_encode(ring__sbuf *b, const ring__node *n);
/* One [token, slot, node_index] entry, strictly after *prev in (token, slot). */
int ring__pending_entry_decode(ring_table *t, const cJSON *e, uint32_t i, uint64_t *prev,
                               ring_error *err);

#endif /* RING_CODEC_INT_H */
