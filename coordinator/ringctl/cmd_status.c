/*
 * cmd_status.c: `ringctl status`: the cluster at a glance: table version,
 * leader, each node's state and share, and the current plan.
 *
 * Usage: ringctl status [--all] [--json]
 *
 * --json prints the shape docs/DESIGN.md fixes:
 *   {"version":N,"nodes":[{"id","state","labels","weight","replicas","target",
 *                          "bytes","bytes_reported"}],
 *    "health":{"ok":BOOL,"reasons":[{"kind","count","text"}]},
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
 * "nodes" leaves out removed nodes unless --all (one whose agent still runs
 * stays, with "agent_running":true); "state" is "drained" for a drain done;
 * "bytes" is what the node's sizes/ report sums to (0 with bytes_reported
 * false when it wrote none). "health" is every reason the coordinator's
 * /healthz is degraded for: moves stuck (kind stuck), replicas missing
 * while they refill (missing), and cluster_health.c's (below_r,
 * plan_refused, refill_waits, label_mismatch); ok is true without any.
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

#include <inttypes.h>
#include <stdlib.h>

static const char help[] =
    "Usage: ringctl status [--all] [--json]\n"
    "\n"
    "Shows the table version, the leader, what is wrong (a token below R and what\n"
    "its repair waits for, every plan refused, a refill waiting for policy, labels\n"
    "that differ from the record: the reasons the coordinator's /healthz gives),\n"
    "every node (state, alive, token-replicas owned against its weighted target,\n"
    "bytes held; removed nodes only with --all), the plan in progress or proposed, the\n"
    "moves the coordinator reports stuck and the fetches receivers report failing\n"
    "(deploy/STUCK.md), the token-replicas owners report missing (a wiped or\n"
    "replaced disk; tokens no owner holds are lost), and the bad records: host values ignored as "
    "over their\n"
    "size cap or malformed.\n"
    "  --all  also list removed nodes\n";

/* The reasons besides cluster_health.c's that the coordinator's /healthz
 * also gives, each with its own list below: moves stuck (the `stuck` key:
 * a run without progress) and token-replicas missing while they refill
 * (under policy none that is refill_waits already). A token below R is
 * degraded wherever an operator looks. */
typedef struct extra_reasons {
  const char *kind[2];
  uint64_t count[2];
  char text[2][RK_HEALTH_TEXT];
  int n;
} extra_reasons;

static void extra_make(const rk_state *st, const rk_health_view *h, uint64_t missing,
                       extra_reasons *x) {
  x->n = 0;
  uint64_t stuck = st->has_stuck ? (uint64_t)st->stuck.n_moves + st->stuck.more : 0;
  if (stuck > 0 && st->stuck.n_moves > 0) {
    x->kind[x->n] = "stuck", x->count[x->n] = stuck;
    snprintf(x->text[x->n++], RK_HEALTH_TEXT,
             "%" PRIu64 " moves stuck (no progress for --stuck-after; first: token %" PRIu32
             " to %s): listed below",
             stuck, st->stuck.moves[0].token, st->stuck.moves[0].to);
  }
  if (missing > 0 && h->count[RK_HEALTH_REFILL_WAITS] == 0) {
    x->kind[x->n] = "missing", x->count[x->n] = missing;
    snprintf(x->text[x->n++], RK_HEALTH_TEXT,
             "%" PRIu64 " token-replicas missing, being refilled: listed below", missing);
  }
}

static cJSON *reason_json(const char *kind, uint64_t count, const char *text) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "kind", kind);
  cJSON_AddNumberToObject(r, "count", (double)count);
  cJSON_AddStringToObject(r, "text", text);
  return r;
}

/* The reasons as `ringctl status --json` gives them. */
static cJSON *health_json(const extra_reasons *x, const rk_health_view *h) {
  cJSON *o = cJSON_CreateObject(), *reasons = cJSON_CreateArray();
  for (int i = 0; i < x->n; i++)
    cJSON_AddItemToArray(reasons, reason_json(x->kind[i], x->count[i], x->text[i]));
  for (int k = 0; k < RK_HEALTH_KINDS; k++)
    if (h->count[k] != 0)
      cJSON_AddItemToArray(
          reasons, reason_json(rk_health_kind_name((rk_health_kind)k), h->count[k], h->text[k]));
  cJSON_AddBoolToObject(o, "ok", cJSON_GetArraySize(reasons) == 0);
  cJSON_AddItemToObject(o, "reasons", reasons);
  return o;
}

static void health_text(const extra_reasons *x, const rk_health_view *h) {
  bool ok = true;
  for (int i = 0; i < x->n; i++, ok = false)
    printf("%s%s\n", ok ? "health:   degraded: " : "          ", x->text[i]);
  for (int k = 0; k < RK_HEALTH_KINDS; k++)
    if (h->count[k] != 0) {
      printf("%s%s\n", ok ? "health:   degraded: " : "          ", h->text[k]);
      ok = false;
    }
  if (ok)
    puts("health:   ok");
}

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

/* What status shows besides the state: rows, plans, missing, health. */
typedef struct view {
  ringctl_node_row *rows;
  uint32_t n_rows;
  plan_view plans;
  rk_missing_view missing;
  rk_health_view health;
  extra_reasons extra; /* stuck moves, replicas refilling */
} view;

static int print_json(ringctl_ctx *ctx, const rk_state *st, const view *w) {
  const ringctl_node_row *rows = w->rows;
  const plan_view *v = &w->plans;
  const rk_missing_view *mv = &w->missing;
  cJSON *o = cJSON_CreateObject(), *restored = ringctl_restore_json(ctx->etcd, st);
  if (restored != NULL) /* only then, first: the shape above is unchanged otherwise */
    cJSON_AddItemToObject(o, "etcd_restored", restored);
  cJSON *nodes = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "version", (double)st->version);
  cJSON_AddItemToObject(o, "nodes", nodes);
  for (uint32_t i = 0; i < w->n_rows; i++)
    cJSON_AddItemToArray(nodes, ringctl_node_json(&rows[i], false));
  cJSON_AddItemToObject(o, "health", health_json(&w->extra, &w->health));
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

static void print_text(const ringctl_ctx *ctx, const rk_state *st, const view *w) {
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
  health_text(&w->extra, &w->health);
  print_plan(&w->plans);
  putchar('\n');
  ringctl_node_table(stdout, w->rows, w->n_rows, false);
  ringctl_node_notes(stdout, st, w->rows, w->n_rows);
  ringctl_stuck_text(stdout, st);
  ringctl_missing_text(stdout, &w->missing, w->health.count[RK_HEALTH_REFILL_WAITS] > 0);
  ringctl_bad_text(stdout, st);
  ringctl_label_mismatch_text(stdout, st);
  ringctl_untrusted_keys_text(stdout, st);
}

static int show(ringctl_ctx *ctx, const rk_state *st, const ring_table *table, bool all) {
  view w = {.rows = NULL};
  if (rk_missing_view_make(st, table, &w.missing) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  if (rk_health_make(st, table, w.missing.replicas, &w.health) != RING_OK ||
      ringctl_node_rows(st, table, all, &w.rows, &w.n_rows) != RING_OK) {
    rk_missing_view_free(&w.missing);
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  }
  extra_make(st, &w.health, w.missing.replicas, &w.extra);
  int rc = read_plans(ctx, st, &w.plans);
  if (rc == RINGCTL_EXIT_OK && ctx->a->globals->json)
    rc = print_json(ctx, st, &w);
  else if (rc == RINGCTL_EXIT_OK)
    print_text(ctx, st, &w);
  ringctl_runs_free(w.plans.history, w.plans.n_history);
  rk_missing_view_free(&w.missing);
  free(w.rows);
  return rc;
}

static int run(ringctl_ctx *ctx, void *ud) {
  rk_state st;
  ring_table *table = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_ALL | RK_READ_SIZES, &st, &table);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rc = show(ctx, &st, table, *(bool *)ud);
  ring_table_free(table);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_status(ringctl_args *a) { return ringctl_run_all(a, help, run); }

const ringctl_command ringctl_command_status = {
    "status", ringctl_cmd_status, "version, leader, health, nodes and their shares, current plan",
    ringctl_all_opts, help};
