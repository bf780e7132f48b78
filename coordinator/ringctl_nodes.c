/*
 * ringctl_nodes.c: node rows for `ringctl status` and `ringctl members`
 * (ringctl_out.h): what each node record owns in the live table against
 * its weighted target, whether it is alive, and what it acked.
 *
 * Sections: shares; rows; printing.
 */
#include "ringctl_out.h"

#include <stdlib.h>

/* ------------------------------------------------------------------ shares */

/* Serving nodes (active, joining) take a share; the others give theirs up. */
static bool serving(ring_node_state s) { return s == RING_NODE_ACTIVE || s == RING_NODE_JOINING; }

/* Sum of the serving nodes' weights in t. */
static double serving_weight(const ring_table *t) {
  double sum = 0;
  for (uint32_t i = 0; i < ring_table_node_count(t); i++)
    if (serving(ring_table_node_state(t, (uint16_t)i)))
      sum += ring_table_node_weight(t, (uint16_t)i);
  return sum;
}

/* T*R*w/sum(w) for node i of t (0 for a node that does not serve). The
 * planner's domain caps are not applied: this is the plain weighted share. */
static double node_target(const ring_table *t, uint16_t i, double sum) {
  if (sum <= 0 || !serving(ring_table_node_state(t, i)))
    return 0;
  double slots = (double)ring_table_tokens(t) * (double)ring_table_replicas(t);
  return slots * ring_table_node_weight(t, i) / sum;
}

/* -------------------------------------------------------------------- rows */

static void fill_row(const rk_state *st, const ring_table *t, double sum, uint32_t i,
                     ringctl_node_row *r) {
  const rk_node *n = &st->nodes[i];
  *r = (ringctl_node_row){n, 0, 0, rk_state_alive(st, n->id) != NULL, rk_state_ack(st, n->id)};
  int index = t ? ring_table_find_node(t, n->id) : RING_ENOTFOUND;
  if (index < 0)
    return;
  r->replicas = ring_table_node_replicas(t, (uint16_t)index);
  r->target = node_target(t, (uint16_t)index, sum);
}

int ringctl_node_rows(const rk_state *st, const ring_table *table, ringctl_node_row **rows) {
  ringctl_node_row *r = calloc(st->n_nodes ? st->n_nodes : 1, sizeof *r);
  if (r == NULL)
    return RING_ENOMEM;
  double sum = table ? serving_weight(table) : 0;
  for (uint32_t i = 0; i < st->n_nodes; i++)
    fill_row(st, table, sum, i, &r[i]);
  *rows = r;
  return RING_OK;
}

cJSON *ringctl_node_json(const ringctl_node_row *r, bool full) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  cJSON_AddStringToObject(o, "id", r->node->id);
  if (full)
    cJSON_AddStringToObject(o, "addr", r->node->addr);
  cJSON_AddStringToObject(o, "state", ring_node_state_name(r->node->state));
  if (full)
    cJSON_AddStringToObject(o, "desired", rk_desired_name(r->node->desired));
  cJSON_AddItemToObject(o, "labels", ringctl_json_labels(&r->node->labels));
  cJSON_AddNumberToObject(o, "weight", r->node->weight);
  cJSON_AddNumberToObject(o, "replicas", r->replicas);
  cJSON_AddNumberToObject(o, "target", r->target);
  if (full) {
    cJSON_AddBoolToObject(o, "alive", r->alive);
    cJSON_AddNumberToObject(o, "acked", (double)r->acked);
  }
  return o;
}

/* ---------------------------------------------------------------- printing */

void ringctl_node_table(FILE *f, const ringctl_node_row *rows, uint32_t n, bool full) {
  if (full)
    fprintf(f, "%-20s %-22s %-9s %-8s %-5s %7s %8s %9s %6s  %s\n", "ID", "ADDR", "STATE", "DESIRED",
            "ALIVE", "ACKED", "WEIGHT", "REPLICAS", "TARGET", "LABELS");
  else
    fprintf(f, "%-20s %-9s %-5s %7s %8s %9s %9s  %s\n", "ID", "STATE", "ALIVE", "ACKED", "WEIGHT",
            "REPLICAS", "TARGET", "LABELS");
  for (uint32_t i = 0; i < n; i++) {
    const ringctl_node_row *r = &rows[i];
    char labels[512];
    ringctl_labels(&r->node->labels, labels, sizeof labels);
    const char *state = ring_node_state_name(r->node->state);
    const char *alive = r->alive ? "yes" : "no";
    if (full)
      fprintf(f, "%-20s %-22s %-9s %-8s %-5s %7llu %8.3g %9u %6.1f  %s\n", r->node->id,
              r->node->addr, state, rk_desired_name(r->node->desired), alive,
              (unsigned long long)r->acked, r->node->weight, r->replicas, r->target, labels);
    else
      fprintf(f, "%-20s %-9s %-5s %7llu %8.3g %9u %9.1f  %s\n", r->node->id, state, alive,
              (unsigned long long)r->acked, r->node->weight, r->replicas, r->target, labels);
  }
  if (n == 0)
    fputs("(no nodes yet: agents register themselves)\n", f);
}
