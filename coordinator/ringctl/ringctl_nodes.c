/*
 * ringctl_nodes.c: node rows for `ringctl status` and `ringctl members`
 * (ringctl_out.h): what each node record owns in the live table against
 * its weighted target (rk_node_targets: the planner's, with failure-domain
 * caps), whether it is alive, and what it acked.
 *
 * Sections: rows; printing.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdlib.h>

/* -------------------------------------------------------------------- rows */

static void fill_row(const rk_state *st, const ring_table *t, const double *targets, uint32_t i,
                     ringctl_node_row *r) {
  const rk_node *n = &st->nodes[i];
  *r = (ringctl_node_row){.node = n,
                          .alive = rk_state_alive(st, n->id) != NULL,
                          .acked = rk_state_ack(st, n->id),
                          .state = rk_node_state_shown(st, t, n),
                          .agent_running = rk_removed_alive(st, n)};
  r->bytes = rk_node_bytes(st, n->id, &r->bytes_reported);
  int index = t ? ring_table_find_node(t, n->id) : RING_ENOTFOUND;
  if (index < 0)
    return;
  r->replicas = ring_table_node_replicas(t, (uint16_t)index);
  r->target = targets[index];
}

uint32_t ringctl_node_holds(const ring_table *t, const char *id) {
  int i = t ? ring_table_find_node(t, id) : RING_ENOTFOUND;
  if (i < 0)
    return 0;
  uint32_t n = ring_table_node_replicas(t, (uint16_t)i), token, slot;
  uint16_t node;
  for (uint32_t k = 0; k < ring_table_pending_count(t); k++)
    if (ring_table_pending_at(t, k, &token, &slot, &node) == RING_OK && node == (uint16_t)i)
      n++;
  return n;
}

int ringctl_node_rows(const rk_state *st, const ring_table *table, bool all,
                      ringctl_node_row **rows, uint32_t *n) {
  uint32_t n_table = table ? ring_table_node_count(table) : 0, k = 0;
  ringctl_node_row *r = calloc(st->n_nodes ? st->n_nodes : 1, sizeof *r);
  double *targets = calloc(n_table ? n_table : 1, sizeof *targets);
  if (r == NULL || targets == NULL) {
    free(r);
    free(targets);
    return RING_ENOMEM;
  }
  if (table != NULL)
    rk_node_targets(table, targets);
  for (uint32_t i = 0; i < st->n_nodes; i++) {
    fill_row(st, table, targets, i, &r[k]);
    k += all || r[k].node->state != RING_NODE_REMOVED || r[k].agent_running;
  }
  free(targets);
  *rows = r;
  *n = k;
  return RING_OK;
}

void ringctl_node_notes(FILE *f, const rk_state *st, const ringctl_node_row *rows, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (rows[i].agent_running)
      fprintf(f,
              "node %s: removed, agent still running (refused: never re-joined; stop its agent "
              "or wipe it before it joins as a new node)\n",
              rows[i].node->id);
  uint32_t removed = 0;
  for (uint32_t i = 0; i < st->n_nodes; i++)
    removed += st->nodes[i].state == RING_NODE_REMOVED;
  for (uint32_t i = 0; i < n; i++)
    removed -= rows[i].node->state == RING_NODE_REMOVED;
  if (removed > 0)
    fprintf(f, "(%u removed nodes hidden: --all shows them)\n", removed);
}

cJSON *ringctl_node_json(const ringctl_node_row *r, bool full) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  cJSON_AddStringToObject(o, "id", r->node->id);
  if (full)
    cJSON_AddStringToObject(o, "addr", r->node->addr);
  cJSON_AddStringToObject(o, "state", r->state);
  if (full)
    cJSON_AddStringToObject(o, "desired", rk_desired_name(r->node->desired));
  cJSON_AddItemToObject(o, "labels", ringctl_json_labels(&r->node->labels));
  cJSON_AddNumberToObject(o, "weight", r->node->weight);
  cJSON_AddNumberToObject(o, "replicas", r->replicas);
  cJSON_AddNumberToObject(o, "target", r->target);
  cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
  cJSON_AddBoolToObject(o, "bytes_reported", r->bytes_reported);
  if (r->agent_running)
    cJSON_AddBoolToObject(o, "agent_running", true);
  if (full) {
    cJSON_AddBoolToObject(o, "alive", r->alive);
    cJSON_AddNumberToObject(o, "acked", (double)r->acked);
  }
  return o;
}

enum { OPT_ALL };
const ringctl_opt ringctl_all_opts[] = {{"all", OPT_ALL, false}, {NULL, 0, false}};

static int take_all(const ringctl_args *a, int id, const char *value, void *ud) {
  if (id != OPT_ALL)
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  *(bool *)ud = true;
  return RINGCTL_EXIT_OK;
}

int ringctl_run_all(ringctl_args *a, const char *help, ringctl_body_fn body) {
  bool all = false, help_shown = false;
  int rc = ringctl_parse(a, ringctl_all_opts, help, take_all, &all, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, body, &all);
}

/* ---------------------------------------------------------------- printing */

/* "1.5 GiB", or "-" when the node reported no sizes. */
static const char *bytes_cell(const ringctl_node_row *r, char buf[32]) {
  return r->bytes_reported ? ringctl_bytes(r->bytes, buf) : "-";
}

void ringctl_node_table(FILE *f, const ringctl_node_row *rows, uint32_t n, bool full) {
  if (full)
    fprintf(f, "%-20s %-22s %-9s %-8s %-5s %7s %8s %9s %6s %10s  %s\n", "ID", "ADDR", "STATE",
            "DESIRED", "ALIVE", "ACKED", "WEIGHT", "REPLICAS", "TARGET", "BYTES", "LABELS");
  else
    fprintf(f, "%-20s %-9s %-5s %7s %8s %9s %9s %10s  %s\n", "ID", "STATE", "ALIVE", "ACKED",
            "WEIGHT", "REPLICAS", "TARGET", "BYTES", "LABELS");
  for (uint32_t i = 0; i < n; i++) {
    const ringctl_node_row *r = &rows[i];
    char labels[512], bytes[32];
    ringctl_labels(&r->node->labels, labels, sizeof labels);
    const char *alive = r->alive ? "yes" : "no";
    if (full)
      fprintf(f, "%-20s %-22s %-9s %-8s %-5s %7llu %8.3g %9u %6.1f %10s  %s\n", r->node->id,
              r->node->addr, r->state, rk_desired_name(r->node->desired), alive,
              (unsigned long long)r->acked, r->node->weight, r->replicas, r->target,
              bytes_cell(r, bytes), labels);
    else
      fprintf(f, "%-20s %-9s %-5s %7llu %8.3g %9u %9.1f %10s  %s\n", r->node->id, r->state, alive,
              (unsigned long long)r->acked, r->node->weight, r->replicas, r->target,
              bytes_cell(r, bytes), labels);
  }
  if (n == 0)
    fputs("(no nodes yet: agents register themselves)\n", f);
}
