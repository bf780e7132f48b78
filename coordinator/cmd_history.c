/*
 * cmd_history.c: `ringctl history`: the finished, failed and cancelled
 * plans kept under plan/history/ (config retention.plans), newest first.
 *
 * Usage: ringctl history [--json]
 *
 * --json: {"plans":[{"id","state","base_version","moves_total","moves_done",
 *          "approved_ms","finished_ms","reason"}]}
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

static const char help[] =
    "Usage: ringctl history [--json]\n"
    "\n"
    "Lists the plans that ran to an end (done, failed, cancelled), newest first.\n";

static cJSON *run_json(const rk_run *r) {
  cJSON *o = ringctl_run_json(r);
  cJSON_AddNumberToObject(o, "base_version", (double)r->plan.base_version);
  cJSON_AddNumberToObject(o, "approved_ms", (double)r->approved_ms);
  cJSON_AddNumberToObject(o, "finished_ms", (double)r->finished_ms);
  cJSON_AddStringToObject(o, "reason", r->reason);
  return o;
}

static int print_json(const rk_run *runs, uint32_t n) {
  cJSON *o = cJSON_CreateObject();
  cJSON *a = cJSON_AddArrayToObject(o, "plans");
  for (uint32_t i = 0; i < n; i++)
    cJSON_AddItemToArray(a, run_json(&runs[i]));
  return ringctl_json_emit(o);
}

static void print_text(const rk_run *runs, uint32_t n) {
  if (n == 0) {
    puts("no plan has finished yet");
    return;
  }
  printf("%-16s  %-9s %7s %13s  %-20s  %-20s  %s\n", "ID", "STATE", "BASE", "MOVES", "APPROVED",
         "FINISHED", "REASON");
  for (uint32_t i = 0; i < n; i++) {
    const rk_run *r = &runs[i];
    char approved[32], finished[32], moves[32];
    snprintf(moves, sizeof moves, "%u/%u", r->cursor.moves_done, r->plan.moves_total);
    printf("%-16s  %-9s %7llu %13s  %-20s  %-20s  %s\n", r->plan.id, rk_run_state_name(r->state),
           (unsigned long long)r->plan.base_version, moves, ringctl_time(r->approved_ms, approved),
           ringctl_time(r->finished_ms, finished), r->reason[0] ? r->reason : "-");
  }
}

static int run(ringctl_ctx *ctx, void *ud) {
  (void)ud;
  rk_run *runs = NULL;
  uint32_t n = 0;
  ring_error err = {RING_OK, ""};
  int rc = ringctl_history_read(ctx->etcd, ctx->cluster, &runs, &n, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading plan/history/");
  if (ctx->a->globals->json)
    rc = print_json(runs, n);
  else
    print_text(runs, n);
  ringctl_runs_free(runs, n);
  return rc;
}

int ringctl_cmd_history(ringctl_args *a) { return ringctl_run_plain(a, help, run, NULL); }
