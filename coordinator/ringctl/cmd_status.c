/*
 * cmd_status.c: `ringctl status`: the cluster at a glance: table version,
 * leader, each node's state and share, and the current plan.
 *
 * Usage: ringctl status [--json]
 *
 * --json prints the shape docs/DESIGN.md fixes:
 *   {"version":N,"nodes":[{"id","state","labels","weight","replicas","target"}],
 *    "plan":null|{"id","state","moves_total","moves_done"},
 * and after it
 *    "stuck":[{"token","slot","from","to","error","for_ms"}],
 *    "failing":[{"node","token","attempts","error"}],
 *    "missing":{"replicas","hosts":[{"host","count","tokens","failing"}],"lost"}
 * and, only when the read ignored records, "bad_records":[{"kind","host","why"}],
 * and, only when a host publishes another arc signing key than its pinned
 * one (ringctl_keys.c), "untrusted_keys":[{"node","pinned","host"}],
 * and, only while etcd's history went back (ringctl_restore.c),
 * "etcd_restored":{"why","seen_version","hosts":[...]}}
 * "plan" is the active run, else the proposed plan, else the last finished run.
 * "stuck" is the coordinator's `stuck` report for the current version;
 * "failing" every failing fetch the receivers report for it, stuck or not yet.
 * "missing" the token-replicas their owners report missing (missing/<id>)
 * that the table still gives them: per host its count, its first 16 tokens
 * and the refill's failing reasons; "lost" the tokens every owner lacks.
 * "bad_records" the host records (and leader, stuck values) the read
 * ignored, over their size cap or malformed (proto/etcd.md).
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdlib.h>

static const char help[] =
    "Usage: ringctl status [--json]\n"
    "\n"
    "Shows the table version, the leader, every node (state, alive, token-replicas\n"
    "owned against its weighted target), the plan in progress or proposed, the\n"
    "moves the coordinator reports stuck and the fetches receivers report failing\n"
    "(deploy/STUCK.md), the token-replicas owners report missing (a wiped or\n"
    "replaced disk; tokens no owner holds are lost), and the bad records: host values ignored as "
    "over their\n"
    "size cap or malformed.\n";

/* What the status shows of the plans. */
typedef struct plan_view {
  const rk_run *run;      /* the active run, or the last finished one */
  const rk_plan_doc *doc; /* the proposed plan when no run is active */
  rk_run *history;        /* owned: plan/history/, newest first */
  uint32_t n_history;
} plan_view;

static int read_plans(ringctl_ctx *ctx, const rk_state *st, plan_view *v) {
  *v = (plan_view){NULL, NULL, NULL, 0};
  if (st->has_active) {
    v->run = &st->active;
    return RINGCTL_EXIT_OK;
  }
  if (st->has_proposed) {
    v->doc = &st->proposed;
    return RINGCTL_EXIT_OK;
  }
  ring_error err = {RING_OK, ""};
  int rc = ringctl_history_read(ctx->etcd, ctx->cluster, &v->history, &v->n_history, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading plan/history/");
  v->run = v->n_history ? &v->history[0] : NULL;
  return RINGCTL_EXIT_OK;
}

static cJSON *plan_json(const plan_view *v) {
  if (v->run != NULL)
    return ringctl_run_json(v->run);
  if (v->doc == NULL)
    return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", v->doc->id);
  cJSON_AddStringToObject(o, "state", "proposed");
  cJSON_AddNumberToObject(o, "moves_total", v->doc->moves_total);
  cJSON_AddNumberToObject(o, "moves_done", 0);
  return o;
}

static int print_json(ringctl_ctx *ctx, const rk_state *st, const ringctl_node_row *rows,
                      const plan_view *v, const rk_missing_view *mv) {
  cJSON *o = cJSON_CreateObject(), *restored = ringctl_restore_json(ctx->etcd, st);
  if (restored != NULL) /* only then, first: the shape above is unchanged otherwise */
    cJSON_AddItemToObject(o, "etcd_restored", restored);
  cJSON *nodes = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "version", (double)st->version);
  cJSON_AddItemToObject(o, "nodes", nodes);
  for (uint32_t i = 0; i < st->n_nodes; i++)
    cJSON_AddItemToArray(nodes, ringctl_node_json(&rows[i], false));
  cJSON_AddItemToObject(o, "plan", plan_json(v));
  cJSON_AddItemToObject(o, "stuck", ringctl_stuck_json(st));
  cJSON_AddItemToObject(o, "failing", ringctl_failing_json(st));
  cJSON_AddItemToObject(o, "missing", rk_missing_json(mv));
  if (st->n_bad > 0) /* only then: scripts checking the shape above see it unchanged */
    cJSON_AddItemToObject(o, "bad_records", rk_bad_json(st, st->n_bad));
  cJSON *labels = ringctl_label_mismatch_json(st);
  if (cJSON_GetArraySize(labels) > 0) /* only then, as bad_records */
    cJSON_AddItemToObject(o, "label_mismatch", labels);
  else
    cJSON_Delete(labels);
  cJSON *keys = ringctl_untrusted_keys_json(st);
  if (cJSON_GetArraySize(keys) > 0) /* only then, as bad_records */
    cJSON_AddItemToObject(o, "untrusted_keys", keys);
  else
    cJSON_Delete(keys);
  return ringctl_json_emit(o);
}

static void print_plan(const plan_view *v) {
  if (v->doc != NULL)
    printf("plan:     %s proposed, %u moves (ringctl plan to review, apply to run)\n",
           v->doc->id[0] ? v->doc->id : "(refused)", v->doc->moves_total);
  else if (v->run != NULL)
    printf("plan:     %s %s, %u of %u moves done (wave %u of %u)%s%s\n", v->run->plan.id,
           rk_run_state_name(v->run->state), v->run->cursor.moves_done, v->run->plan.moves_total,
           rk_run_wave_shown(v->run), v->run->plan.waves, v->run->reason[0] ? ": " : "",
           v->run->reason);
  else
    puts("plan:     none");
}

static void print_text(const ringctl_ctx *ctx, const rk_state *st, const ringctl_node_row *rows,
                       const plan_view *v, const rk_missing_view *mv) {
  const rk_config *c = &st->config;
  ringctl_restore_text(stdout, ctx->etcd, st); /* first: it changes how to read the rest */
  printf("cluster:  %s, %u tokens x %u replicas, failure domain %s, migration %s\n", ctx->cluster,
         c->tokens, c->replicas, c->failure_domain[0] ? c->failure_domain : "none",
         rk_migration_name(c->migration));
  if (st->version)
    printf("version:  %llu\n", (unsigned long long)st->version);
  else
    puts("version:  none (no table published yet)");
  if (st->has_leader)
    printf("leader:   %s%s%s\n", st->leader.id, st->leader.addr[0] ? " at " : "", st->leader.addr);
  else
    puts("leader:   none (is ring-coordinator running?)");
  print_plan(v);
  putchar('\n');
  ringctl_node_table(stdout, rows, st->n_nodes, false);
  ringctl_stuck_text(stdout, st);
  ringctl_missing_text(stdout, mv);
  ringctl_bad_text(stdout, st);
  ringctl_label_mismatch_text(stdout, st);
  ringctl_untrusted_keys_text(stdout, st);
}

static int show(ringctl_ctx *ctx, const rk_state *st, const ring_table *table) {
  ringctl_node_row *rows = NULL;
  plan_view v;
  rk_missing_view mv;
  if (rk_missing_view_make(st, table, &mv) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  if (ringctl_node_rows(st, table, &rows) != RING_OK) {
    rk_missing_view_free(&mv);
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  }
  int rc = read_plans(ctx, st, &v);
  if (rc == RINGCTL_EXIT_OK && ctx->a->globals->json)
    rc = print_json(ctx, st, rows, &v, &mv);
  else if (rc == RINGCTL_EXIT_OK)
    print_text(ctx, st, rows, &v, &mv);
  ringctl_runs_free(v.history, v.n_history);
  rk_missing_view_free(&mv);
  free(rows);
  return rc;
}

static int run(ringctl_ctx *ctx, void *ud) {
  (void)ud;
  rk_state st;
  ring_table *table = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_ALL, &st, &table);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rc = show(ctx, &st, table);
  ring_table_free(table);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_status(ringctl_args *a) { return ringctl_run_plain(a, help, run, NULL); }

const ringctl_command ringctl_command_status = {
    "status", ringctl_cmd_status, "version, leader, nodes and their shares, current plan", NULL,
    help};
