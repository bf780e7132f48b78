/*
 * ringx.h: ringx, the helpers libring and the daemons share (ring__ names):
 * errors, the growing string, base64, logfmt values, typed JSON access for
 * the codecs, and the few format rules both sides apply (names, the etcd
 * key's spelling, the `recovered` record). Compiled into libring's objects
 * (hidden, so libring.so exports none of it) and into the static library
 * `ringx` the daemons link. Never installed; it sees only include/ring.h,
 * and nothing here calls libring.
 */
#ifndef RINGX_H
#define RINGX_H

#include "ring.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------ errors (error.c) */

/* Fills err (if not NULL) with code and a formatted message; returns code. */
int ring__err(ring_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The message of an error code (what ring_strerror returns). */
const char *ring__strerror(int code);

/* ---------------------------------------------- growing string (sbuf.c) */

/* A growing string. Appends never fail visibly: on allocation failure the
 * buffer is marked oom and further appends are ignored, so a caller checks
 * once at the end (then frees p and reports RING_ENOMEM). */
typedef struct ring__sbuf {
  char *p;    /* malloc()'ed, NUL-terminated once anything is appended */
  size_t len; /* bytes used, without the NUL */
  size_t cap; /* bytes allocated */
  bool oom;   /* an append failed; the content is incomplete */
} ring__sbuf;

void ring__sb_reserve(ring__sbuf *b, size_t more);
void ring__sb_puts(ring__sbuf *b, const char *s);
void ring__sb_printf(ring__sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string, quoted and escaped. */
void ring__sb_json_string(ring__sbuf *b, const char *s);
/* Hands b's string to *json (and its length to *len if not NULL), or frees
 * it and returns RING_ENOMEM when an append failed. */
int ring__sb_finish(ring__sbuf *b, char **json, size_t *len);

/* ---------------------------------------------------------- base64.c */

/* Strict RFC 4648 base64 (with padding). encode writes 4*ceil(n/3) chars
 * plus a NUL; decode returns the byte count or -1 on any malformed input,
 * writing at most out_cap bytes. */
size_t ring__base64_encoded_len(size_t n);
void ring__base64_encode(const uint8_t *in, size_t n, char *out);
long ring__base64_decode(const char *in, size_t n, uint8_t *out, size_t out_cap);

/* ---------------------------------------------------------- logfmt.c */

/* logfmt values (logfmt.c, where the quoting rule is written): whether v
 * must be quoted; one byte as it appears inside quotes (returns the bytes
 * written to out, 1 to 6); and v written to out (cap bytes with the NUL),
 * quoted when `quoted`, or when needed for ring__logfmt_value. Both return
 * the length written; *cut is true when v did not fit whole (the value is
 * then cut at a character boundary, its quote closed). */
bool ring__logfmt_needs_quotes(const char *v);
size_t ring__logfmt_escape(unsigned char c, char out[8]);
size_t ring__logfmt_put(const char *v, bool quoted, char *out, size_t cap, bool *cut);
size_t ring__logfmt_value(const char *v, char *out, size_t cap, bool *cut);

/* ------------------------------------------------------------ json.c */

/* Every decoder error names the field: `where` prefixes messages
 * ("nodes[3]: ", "throttle."). */

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
/* Parses a record: one object whose "format" is `format` (else
 * RING_EFORMAT) holding only the listed keys. *root is the caller's to
 * cJSON_Delete. */
int ring__record_parse(const char *json, size_t len, const char *format, const char *const *keys,
                       size_t n_keys, cJSON **root, ring_error *err);
/* The same checks on an object already parsed. */
int ring__record_check(const cJSON *obj, const char *format, const char *const *keys, size_t n_keys,
                       ring_error *err);

/* Node records (proto/table.md), read by libring's table codec and by
 * proto's host records: the id, addr, labels, weight (and state when
 * with_state; else the spec says active) of a node object whose keys the
 * caller has checked, as a builder spec borrowing its strings. Types only:
 * values are the builder's to validate. keys/values hold RING_LABELS_MAX
 * entries. */
int ring__node_fields_decode(const cJSON *node, const char *where, bool with_state,
                             const char **keys, const char **values, ring_node_spec *s,
                             ring_error *err);
/* Appends "id":..,"addr":..,"labels":{..},"weight":.. (no braces). */
void ring__node_fields_encode(ring__sbuf *b, const ring_node_spec *s);
/* The shortest decimal that reads back as exactly w, with a '.' or an
 * exponent; cap >= 32. */
void ring__format_weight(double w, char *out, size_t cap);

/* ----------------------------------------------------------- names.c */

/* The character classes of proto/table.md, for libring's table builder and
 * decoder and for proto's records: an id ([a-z0-9._-]{1,63}, what
 * ring_id_valid answers), a label value, an arc server's host:port. */
bool ring__valid_id(const char *s);
bool ring__valid_label_value(const char *s);
bool ring__valid_addr(const char *s);
/* A node state's name and back (what ring_node_state_name/_parse answer). */
const char *ring__node_state_name(ring_node_state s);
int ring__node_state_parse(const char *name);

/* A cluster's etcd key, "/ringkeeper/<cluster>/<dir><name>" (proto/etcd.md),
 * into key (cap bytes): the one spelling of the prefix, for libring's
 * watcher and history and for proto's key builders. Returns its length, or
 * RING_EINVAL when an argument is NULL or the key does not fit. */
int ring__key(char *key, size_t cap, const char *cluster, const char *dir, const char *name);
/* Where, under a cluster's prefix, the publish txn writes the new version's
 * delta a second time (proto/etcd.md, "version/delta"): its name starts
 * with "version", so one watch on that prefix carries the version and its
 * delta in the same response, and a watcher one behind reads nothing more. */
#define RING__VERSION_DELTA "version/delta"

/* The `version` key's value: a decimal in 1 .. RING_VERSION_MAX and nothing
 * else. True with *out set, else false (*out untouched). The watcher and
 * the history marks read the key through this one rule. */
bool ring__parse_version(const uint8_t *p, size_t len, uint64_t *out);

/* ------------------------------------------------------- recovered.c */

/* `recovered` (proto/etcd.md, "A restored etcd"): the operator settled a
 * restore (`ringctl recover`) by publishing table `version`, above every
 * version any host saw. libring's clients read it (etcd_history.c);
 * ringctl writes it. */
typedef struct ring__recovered {
  uint64_t version;         /* 1 .. 2^53-1 */
  uint64_t seen_version;    /* the highest version hosts reported: 0 .. version-1 */
  char by[RING_ID_MAX + 1]; /* [a-z0-9._-]{1,63} */
  uint64_t at_ms;
} ring__recovered;

int ring__recovered_decode(const char *json, size_t len, ring__recovered *out, ring_error *err);
/* *json is malloc()'ed, the caller's to free. */
int ring__recovered_encode(const ring__recovered *r, char **json, size_t *len);

#endif /* RINGX_H */
