/*
 * ringctl_labels.c: hosts whose agent reports other labels than their node
 * record (a host restarted with another --label zone=...). The record is
 * what the planner uses, so a real zone change stays invisible to the
 * domain rules until an operator settles it with `ringctl label`: status
 * shows both values and verify fails while any remain.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>

cJSON *ringctl_label_mismatch_json(const rk_state *st) {
  cJSON *arr = cJSON_CreateArray();
  for (uint32_t i = 0; i < st->n_nodes; i++) {
    const rk_labels *host = rk_label_mismatch(st, &st->nodes[i]);
    if (host == NULL)
      continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "node", st->nodes[i].id);
    cJSON_AddItemToObject(o, "record", ringctl_json_labels(&st->nodes[i].labels));
    cJSON_AddItemToObject(o, "host", ringctl_json_labels(host));
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* One line a mismatch: "node a3: record zone=z1, host says zone=z2". */
static void line(const rk_node *n, const rk_labels *host, char *out, size_t cap) {
  char rec[512], got[512];
  ringctl_labels(&n->labels, rec, sizeof rec);
  ringctl_labels(host, got, sizeof got);
  snprintf(out, cap, "node %s: labels in its record %s, its host says %s (ringctl label %s ...)",
           n->id, rec, got, n->id);
}

void ringctl_label_mismatch_text(FILE *f, const rk_state *st) {
  bool head = false;
  for (uint32_t i = 0; i < st->n_nodes; i++) {
    const rk_labels *host = rk_label_mismatch(st, &st->nodes[i]);
    if (host == NULL)
      continue;
    if (!head)
      fputs("\nlabels that differ (the planner uses the record's):\n", f);
    head = true;
    char text[1300];
    line(&st->nodes[i], host, text, sizeof text);
    fprintf(f, "  %s\n", text);
  }
}

int ringctl_label_violations(const rk_state *st, cJSON *v) {
  int n = 0;
  for (uint32_t i = 0; i < st->n_nodes; i++) {
    const rk_labels *host = rk_label_mismatch(st, &st->nodes[i]);
    if (host == NULL)
      continue;
    char text[1300];
    line(&st->nodes[i], host, text, sizeof text);
    cJSON_AddItemToArray(v, cJSON_CreateString(text));
    n++;
  }
  return n;
}
