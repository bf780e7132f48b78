/*
 * ringctl_keys.c: nodes whose agent publishes (alive/<id>) another arc
 * signing key than the one pinned in their record (nodes/<id>). Their
 * peers refuse what they sign until an operator approves the new key with
 * `ringctl trust` (a rebuilt host) or finds out who is speaking as the
 * node: status names them.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>

/* The key the host publishes when it differs from the pinned one. */
static const char *untrusted(const rk_state *st, const rk_node *n) {
  const rk_alive_entry *a = rk_state_alive(st, n->id);
  if (a == NULL || !a->valid || !rk_key_untrusted(n, a->a.key))
    return NULL;
  return a->a.key;
}

cJSON *ringctl_untrusted_keys_json(const rk_state *st) {
  cJSON *arr = cJSON_CreateArray();
  for (uint32_t i = 0; i < st->n_nodes; i++) {
    const char *host = untrusted(st, &st->nodes[i]);
    if (host == NULL)
      continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "node", st->nodes[i].id);
    cJSON_AddStringToObject(o, "pinned", st->nodes[i].key);
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

void ringctl_untrusted_keys_text(FILE *f, const rk_state *st) {
  bool head = false;
  for (uint32_t i = 0; i < st->n_nodes; i++) {
    const char *host = untrusted(st, &st->nodes[i]);
    if (host == NULL)
      continue;
    if (!head)
      fputs("\nuntrusted keys (peers refuse what these sign; ringctl trust ID approves):\n", f);
    head = true;
    fprintf(f, "  node %s: signs with %.16s..., pinned %.16s...\n", st->nodes[i].id, host,
            st->nodes[i].key);
  }
}
