/*
 * ringctl_restore.c: how `ringctl status` shows a restored etcd (proto/
 * etcd.md, "A restored etcd"): first, before anything else it prints, since
 * every other line of the status is read from the restored state.
 */
#include "ringctl_out.h"

#include <inttypes.h>
#include <stdio.h>

bool ringctl_restored(ring_etcd *c, const rk_state *st, char *why, size_t cap) {
  ring_etcd_history h;
  bool back = rk_state_history(c, st);
  ring_etcd_history_get(c, &h);
  ring_etcd_history_text(&h, why, cap);
  return back;
}

cJSON *ringctl_restore_json(ring_etcd *c, const rk_state *st) {
  char why[RING_HISTORY_WHY_MAX];
  if (!ringctl_restored(c, st, why, sizeof why))
    return NULL;
  cJSON *o = cJSON_CreateObject(), *hosts = cJSON_CreateArray();
  cJSON_AddStringToObject(o, "why", why);
  cJSON_AddNumberToObject(o, "seen_version", (double)rk_state_seen_version(st));
  for (uint32_t i = 0; i < st->n_recovery; i++) {
    const rk_recovery *r = &st->recovery[i].r;
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "id", st->recovery[i].id);
    cJSON_AddNumberToObject(h, "seen_version", (double)r->seen_version);
    cJSON_AddNumberToObject(h, "table_version", (double)r->table_version);
    cJSON_AddNumberToObject(h, "tokens", r->n_tokens);
    cJSON_AddItemToArray(hosts, h);
  }
  cJSON_AddItemToObject(o, "hosts", hosts);
  return o;
}

bool ringctl_restore_text(FILE *f, ring_etcd *c, const rk_state *st) {
  char why[RING_HISTORY_WHY_MAX];
  if (!ringctl_restored(c, st, why, sizeof why))
    return false;
  fprintf(f, "!!! ETCD RESTORED: %s\n", why);
  fprintf(f,
          "!!! daemons act on nothing until `ringctl recover`; %u host%s reported, the "
          "highest version seen is %" PRIu64 " (deploy/PRODUCTION.md, \"Backup and restore\")\n\n",
          st->n_recovery, st->n_recovery == 1 ? "" : "s", rk_state_seen_version(st));
  return true;
}
