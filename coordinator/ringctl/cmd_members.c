/*
 * cmd_members.c: `ringctl members`: every node record in full: address,
 * state and desired state, liveness, acked version, weight, labels, and
 * the token-replicas it owns against its weighted target.
 *
 * Usage: ringctl members [--all] [--json]
 *
 * --json: {"version":N,"nodes":[{"id","addr","state","desired","labels",
 *          "weight","replicas","target","bytes","bytes_reported","alive","acked"}]}
 * Removed nodes only with --all (as `ringctl status`, cmd_status.c).
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdlib.h>

static const char help[] =
    "Usage: ringctl members [--all] [--json]\n"
    "\n"
    "Lists every node record: address, state (what the coordinator concluded) and\n"
    "desired state (what the operator asked: drain, undrain), whether its agent is\n"
    "alive, the table version it acked, weight, labels, and the token-replicas it\n"
    "owns in the live table against its weighted target, and the bytes it holds\n"
    "(BYTES: its sizes/ report; \"-\" when it wrote none). A draining node that owns\n"
    "nothing shows as drained; removed nodes are listed only with --all.\n"
    "  --all  also list removed nodes\n";

static int print_json(const rk_state *st, const ringctl_node_row *rows, uint32_t n) {
  cJSON *o = cJSON_CreateObject();
  cJSON *nodes = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "version", (double)st->version);
  cJSON_AddItemToObject(o, "nodes", nodes);
  for (uint32_t i = 0; i < n; i++)
    cJSON_AddItemToArray(nodes, ringctl_node_json(&rows[i], true));
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  rk_state st;
  ring_table *table = NULL;
  ringctl_node_row *rows = NULL;
  uint32_t n = 0;
  int rc = ringctl_read_live(
      ctx, RK_READ_NODES | RK_READ_ALIVE | RK_READ_ACKS | RK_READ_PLANS | RK_READ_SIZES, &st,
      &table);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (ringctl_node_rows(&st, table, *(bool *)ud, &rows, &n) != RING_OK)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  else if (ctx->a->globals->json)
    rc = print_json(&st, rows, n);
  else
    ringctl_node_table(stdout, rows, n, true), ringctl_node_notes(stdout, &st, rows, n);
  free(rows);
  ring_table_free(table);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_members(ringctl_args *a) { return ringctl_run_all(a, help, run); }

const ringctl_command ringctl_command_members = {
    "members", ringctl_cmd_members, "every node in full: state, liveness, acks, bytes, labels",
    ringctl_all_opts, help};
