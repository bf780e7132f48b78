/*
 * arc_manifest.c: the manifest of an arc (proto/arc.md) in JSON and back,
 * and the syntax of file names and tokens that every part checks.
 *
 * Sections: names and tokens; encoding; decoding.
 */
#define _GNU_SOURCE /* memmem */
#include "arc_manifest.h"
#include "proto_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ names and tokens */

bool arc__valid_name(const char *s) {
  size_t n = 0;
  if (s == NULL || s[0] == '.')
    return false;
  for (; s[n] != '\0'; n++) {
    char c = s[n];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok || n >= ARC_NAME_MAX)
      return false;
  }
  return n > 0;
}

bool arc__parse_token(const char *s, size_t n, uint32_t *out) {
  if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
    return false;
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    v = v * 10 + (uint32_t)(s[i] - '0');
  }
  if (v > ARC_TOKEN_MAX)
    return false;
  *out = v;
  return true;
}

void arc_manifest_free(arc_manifest *m) {
  if (m == NULL)
    return;
  free(m->files);
  m->files = NULL;
  m->n_files = 0;
  m->bytes = 0;
}

/* --------------------------------------------------------------- encoding */

int arc_manifest_encode(const arc_manifest *m, char **json, size_t *len) {
  if (m == NULL || json == NULL || (m->n_files > 0 && m->files == NULL))
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b,
                  "{\"format\":\"" ARC_MANIFEST_FORMAT "\",\"token\":%" PRIu32 ",\"bytes\":%" PRIu64
                  ",\"files\":[",
                  m->token, m->bytes);
  for (uint32_t i = 0; i < m->n_files; i++) {
    const arc_file *f = &m->files[i];
    ring__sb_puts(&b, i ? ",{\"name\":" : "{\"name\":");
    ring__sb_json_string(&b, f->name);
    ring__sb_printf(&b, ",\"size\":%" PRIu64 ",\"checksum\":\"" HASH_NAME ":%016" PRIx64 "\"}",
                    f->size, f->xxh3);
  }
  ring__sb_puts(&b, "]}");
  return ring__sb_finish(&b, json, len);
}

/* --------------------------------------------------------------- decoding */

static int decode_file(const cJSON *o, uint32_t i, const arc_file *prev, arc_file *f,
                       ring_error *err) {
  static const char *const keys[] = {"name", "size", "checksum"};
  char where[48];
  snprintf(where, sizeof where, "files[%" PRIu32 "].", i);
  if (!cJSON_IsObject(o))
    return ring__err(err, RING_EFIELD, "files[%" PRIu32 "]: must be an object", i);
  int rc = ring__json_check_keys(o, where, keys, 3, err);
  if (rc == RING_OK)
    rc = ring__json_string_copy(o, where, "name", f->name, sizeof f->name, err);
  if (rc == RING_OK && !arc__valid_name(f->name))
    rc =
        ring__err(err, RING_EFIELD,
                  "%sname: \"%.64s\" is not [A-Za-z0-9._-]+ without a leading '.'", where, f->name);
  if (rc == RING_OK && prev != NULL && strcmp(prev->name, f->name) >= 0)
    rc = ring__err(err, RING_EFIELD, "%sname: \"%.64s\" is not after \"%.64s\" (sorted, unique)",
                   where, f->name, prev->name);
  if (rc == RING_OK)
    rc = ring__json_uint_at(o, where, "size", 0, ARC_SIZE_MAX, RING_EFIELD, &f->size, err);
  if (rc == RING_OK) {
    rc = ring__json_checksum(o, "checksum", &f->xxh3, err);
    if (rc != RING_OK) /* name the file too */
      rc = ring__err(err, rc, "%schecksum: missing, or not " HASH_NAME ":<16 lowercase hex digits>",
                     where);
  }
  return rc;
}

static int decode_files(const cJSON *arr, arc_manifest *m, ring_error *err) {
  int n = cJSON_GetArraySize(arr);
  if (n < 0 || (uint32_t)n > ARC_FILES_MAX)
    return ring__err(err, RING_ETOOBIG, "files: %d entries, at most %u", n, ARC_FILES_MAX);
  m->files = n ? calloc((size_t)n, sizeof *m->files) : NULL;
  if (n && m->files == NULL)
    return ring__err(err, RING_ENOMEM, "files: out of memory");
  uint64_t sum = 0;
  uint32_t i = 0;
  for (const cJSON *o = arr->child; o != NULL; o = o->next, i++) {
    int rc = decode_file(o, i, i ? &m->files[i - 1] : NULL, &m->files[i], err);
    if (rc != RING_OK)
      return rc;
    sum += m->files[i].size;
    if (sum > ARC_SIZE_MAX)
      return ring__err(err, RING_EFIELD, "files: sizes add up to more than %" PRIu64,
                       (uint64_t)ARC_SIZE_MAX);
  }
  m->n_files = i;
  if (sum != m->bytes)
    return ring__err(err, RING_EFIELD, "bytes: %" PRIu64 " but the files add up to %" PRIu64,
                     m->bytes, sum);
  return RING_OK;
}

int arc_manifest_decode(const char *json, size_t len, arc_manifest *out, ring_error *err) {
  static const char *const keys[] = {"format", "token", "bytes", "files"};
  if (json == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "arc_manifest_decode: NULL argument");
  if (len > ARC_MANIFEST_JSON_MAX)
    return ring__err(err, RING_ETOOBIG, "manifest of %zu bytes exceeds %u", len,
                     ARC_MANIFEST_JSON_MAX);
  if (memmem(json, len, "\\u0000", 6) != NULL) /* cJSON would cut a name short there */
    return ring__err(err, RING_EFIELD, "files: a name holds \\u0000");
  cJSON *root = NULL;
  int rc = ring__record_parse(json, len, ARC_MANIFEST_FORMAT, keys, 4, &root, err);
  if (rc != RING_OK)
    return rc;
  arc_manifest m = {0};
  uint64_t token = 0;
  const cJSON *files = NULL;
  rc = ring__json_uint(root, "token", 0, ARC_TOKEN_MAX, RING_EFIELD, &token, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "bytes", 0, ARC_SIZE_MAX, RING_EFIELD, &m.bytes, err);
  if (rc == RING_OK && (files = ring__json_array(root, "files", err)) == NULL)
    rc = RING_EFIELD;
  if (rc == RING_OK)
    rc = decode_files(files, &m, err);
  cJSON_Delete(root);
  if (rc != RING_OK) {
    arc_manifest_free(&m);
    return rc;
  }
  m.token = (uint32_t)token;
  *out = m;
  return RING_OK;
}
