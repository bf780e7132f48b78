/*
 * recovered.c: the `recovered` record (proto/etcd.md, "A restored etcd"),
 * which `ringctl recover` writes and every libring client reads to settle
 * a restored etcd (libring/etcd_history.c): one codec for the reader below
 * and the writer above, so it lives in ringx, which both link.
 */
#include "ringx.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define RECOVERED_FORMAT "ringkeeper.recovered.v1"
#define N_KEYS(a) (sizeof(a) / sizeof *(a))

int ring__recovered_decode(const char *json, size_t len, ring__recovered *out, ring_error *err) {
  static const char *const keys[] = {"format", "version", "seen_version", "by", "at_ms"};
  cJSON *root = NULL;
  ring__recovered r = {0};
  int rc = ring__record_parse(json, len, RECOVERED_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "version", 1, RING_VERSION_MAX, RING_EVERSION, &r.version, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "seen_version", 0, r.version - 1, RING_EVERSION, &r.seen_version,
                         err);
  if (rc == RING_OK &&
      (rc = ring__json_string_copy(root, "", "by", r.by, sizeof r.by, err)) == RING_OK &&
      !ring__valid_id(r.by))
    rc = ring__err(err, RING_EFIELD, "by: \"%s\" must match [a-z0-9._-]{1,63}", r.by);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "at_ms", 0, RING_VERSION_MAX, RING_EFIELD, &r.at_ms, err);
  cJSON_Delete(root);
  if (rc == RING_OK && out)
    *out = r;
  return rc;
}

int ring__recovered_encode(const ring__recovered *r, char **json, size_t *len) {
  if (r == NULL || json == NULL || r->version < 1 || r->version > RING_VERSION_MAX ||
      r->seen_version >= r->version || memchr(r->by, '\0', sizeof r->by) == NULL ||
      !ring__valid_id(r->by) || r->at_ms > RING_VERSION_MAX)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_printf(&b,
                  "{\"format\":\"" RECOVERED_FORMAT "\",\"version\":%" PRIu64
                  ",\"seen_version\":%" PRIu64 ",\"by\":\"%s\",\"at_ms\":%" PRIu64 "}",
                  r->version, r->seen_version, r->by, r->at_ms);
  return ring__sb_finish(&b, json, len);
}
