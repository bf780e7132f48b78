/*
 * cmd_lookup.c: `ringctl lookup KEY`: the token a key hashes to in the
 * live table, its owners in slot order and the pending owners of a
 * migration in flight.
 *
 * Usage: ringctl lookup KEY [--json]
 *
 * --json: {"key","token","version","owners":[ids],"pending":[ids]}
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <string.h>

static const char help[] =
    "Usage: ringctl lookup KEY [--json]\n"
    "\n"
    "Shows the token KEY hashes to in the live table, its owners in slot order\n"
    "(the first is the primary) and any pending owners (writes go to both during a\n"
    "migration; reads to the owners until the cutover).\n";

static int take_key(const ringctl_args *a, int id, const char *value, void *ud) {
  const char **key = ud;
  (void)id;
  if (*key != NULL)
    return ringctl_usage_error(a, "one key at a time: \"%s\" after \"%s\"", value, *key);
  *key = value;
  return RINGCTL_EXIT_OK;
}

/* Owners (pending false) or pending owners of a token, as a JSON array. */
static cJSON *slot_ids(const ring_table *t, uint32_t token, bool pending) {
  cJSON *a = cJSON_CreateArray();
  for (uint32_t r = 0; r < ring_table_replicas(t); r++) {
    uint16_t n = pending ? ring_table_pending(t, token, r) : ring_table_owner(t, token, r);
    if (n != RING_NODE_NONE)
      cJSON_AddItemToArray(a, cJSON_CreateString(ring_table_node_id(t, n)));
  }
  return a;
}

static void print_ids(const char *label, const cJSON *ids) {
  printf("%-9s", label);
  const cJSON *id;
  cJSON_ArrayForEach(id, ids) printf(" %s", id->valuestring);
  puts(cJSON_GetArraySize(ids) ? "" : " -");
}

static int show(ringctl_ctx *ctx, const rk_state *st, const ring_table *t, void *ud) {
  const char *key = ud;
  (void)st;
  uint32_t token = ring_table_token(t, key, strlen(key));
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "key", key);
  cJSON_AddNumberToObject(o, "token", token);
  cJSON_AddNumberToObject(o, "version", (double)ring_table_version(t));
  cJSON_AddItemToObject(o, "owners", slot_ids(t, token, false));
  cJSON_AddItemToObject(o, "pending", slot_ids(t, token, true));
  if (ctx->a->globals->json)
    return ringctl_json_emit(o);
  printf("key:      %s\ntoken:    %u of %u\nversion:  %llu\n", key, token, ring_table_tokens(t),
         (unsigned long long)ring_table_version(t));
  print_ids("owners:", cJSON_GetObjectItem(o, "owners"));
  print_ids("pending:", cJSON_GetObjectItem(o, "pending"));
  cJSON_Delete(o);
  return RINGCTL_EXIT_OK;
}

static int run(ringctl_ctx *ctx, void *ud) {
  return ringctl_with_table(ctx, "nothing owns keys", show, ud);
}

int ringctl_cmd_lookup(ringctl_args *a) {
  const char *key = NULL;
  bool help_shown = false;
  int rc = ringctl_parse(a, NULL, help, take_key, &key, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (key == NULL)
    return ringctl_usage_error(a, "missing KEY");
  return ringctl_with_etcd(a, run, (void *)key);
}

const ringctl_command ringctl_command_lookup = {"lookup", ringctl_cmd_lookup,
                                                "which nodes own a key", NULL, help};
