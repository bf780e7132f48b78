/*
 * coord_status_bytes.c: the bytes a running plan moves, per receiver, for
 * the status page (coord.h, coord_status_bytes). The sizes come from the
 * agents' sizes/ reports, read once when a run is first shown: a report
 * is up to 1.4 MB per host, too much to read every second, and a run's
 * moves do not change while it runs. A run balanced by bytes also shows
 * each node's bytes before, after and target, from the recomputed plan.
 */
#include "coord.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

void coord_status_bytes_free(coord *c) {
  cJSON_Delete(c->status.run_bytes);
  c->status.run_bytes = NULL;
  c->status.run_bytes_id[0] = '\0';
}

/* {"bytes_in":{id:bytes},"bytes_now","sizes_known","eta_s","eta_bound"} for plan p on
 * base, or NULL when no host reported sizes. */
static cJSON *compute(coord *c, const ring_plan *p, const ring_table *base,
                      const rk_config *config) {
  rk_state z;
  if (base == NULL || rk_state_read(c->etcd, c->o.cluster, RK_READ_SIZES, &z, NULL) != RING_OK)
    return NULL;
  uint64_t *arc = NULL, *in = NULL;
  uint32_t known = 0, n = ring_table_node_count(ring_plan_target(p));
  cJSON *o = NULL;
  if (rk_arc_bytes(&z, base, &arc, &known) == RING_OK && arc != NULL &&
      (in = calloc(n + 1, sizeof *in)) != NULL) {
    o = cJSON_CreateObject();
    cJSON *per = cJSON_AddObjectToObject(o, "bytes_in");
    uint64_t total = rk_plan_bytes_in(p, arc, in);
    for (uint32_t i = 0; i < n; i++)
      if (in[i] > 0)
        cJSON_AddNumberToObject(per, ring_table_node_id(ring_plan_target(p), (uint16_t)i),
                                (double)in[i]);
    cJSON_AddNumberToObject(o, "bytes_now", (double)total);
    cJSON_AddNumberToObject(o, "sizes_known", known);
    rk_eta e;
    char why[RING_ID_MAX + 64];
    if (rk_plan_eta(p, arc, &config->throttle, &e) == RING_OK) {
      cJSON_AddNumberToObject(o, "eta_s", (double)e.ms / 1000.0);
      cJSON_AddStringToObject(o, "eta_bound", rk_eta_text(p, &e, why, sizeof why));
    }
  }
  free(in);
  free(arc);
  rk_state_free(&z);
  return o;
}

/* compute's object, with "bytes_balance" (each node's bytes before, after
 * and target) when p balances bytes. */
static cJSON *compute_all(coord *c, const ring_plan *p, const ring_table *base,
                          const rk_config *config) {
  cJSON *o = compute(c, p, base, config), *bb = rk_plan_bytes_balance_json(p);
  if (bb != NULL && o == NULL)
    o = cJSON_CreateObject();
  if (bb != NULL && o != NULL)
    cJSON_AddItemToObject(o, "bytes_balance", bb);
  else
    cJSON_Delete(bb);
  return o;
}

void coord_status_bytes(coord *c, const rk_state *s, cJSON *o) {
  if (!s->has_active || c->run_plan == NULL || strcmp(c->run_plan_id, s->active.plan.id) != 0)
    return;
  if (strcmp(c->status.run_bytes_id, s->active.plan.id) != 0) {
    coord_status_bytes_free(c);
    c->status.run_bytes = compute_all(c, c->run_plan, c->run_base, &s->config);
    snprintf(c->status.run_bytes_id, sizeof c->status.run_bytes_id, "%s", s->active.plan.id);
  }
  const cJSON *item;
  cJSON_ArrayForEach(item, c->status.run_bytes) {
    cJSON_AddItemToObject(o, item->string, cJSON_Duplicate(item, true));
  }
}
