/*
 * json_edit.h: editing JSON documents in codec tests, to build each
 * malformed input from a good one.
 */
#ifndef RING_JSON_EDIT_H
#define RING_JSON_EDIT_H

#include <cjson/cJSON.h>
#include <stdlib.h>

/* Sets obj's field `name` to the raw JSON text `raw` (kept verbatim, so
 * numbers keep their digits), adding it if absent; raw NULL removes it. */
static inline void json_set_raw(cJSON *obj, const char *name, const char *raw) {
  if (raw == NULL)
    cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
  else if (cJSON_GetObjectItemCaseSensitive(obj, name))
    cJSON_ReplaceItemInObjectCaseSensitive(obj, name, cJSON_CreateRaw(raw));
  else
    cJSON_AddItemToObject(obj, name, cJSON_CreateRaw(raw));
}

/* json (freed here) with one top-level field set as by json_set_raw; the
 * result is malloc()'ed. */
static inline char *json_with_field(char *json, const char *name, const char *raw) {
  cJSON *root = cJSON_Parse(json);
  free(json);
  json_set_raw(root, name, raw);
  char *out = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return out;
}

#endif /* RING_JSON_EDIT_H */
