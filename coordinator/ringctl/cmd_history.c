/*
 * cmd_history.c: `ringctl history`: the finished, failed and cancelled
 * plans kept under plan/history/ (config retention.plans), newest first,
 * then the journal (journal/, proto/etcd.md): what changed the cluster
 * other than a plan, such as a node's address, newest first.
 *
 * Usage: ringctl history [--json]
 *
 * --json: {"plans":[{"id","state","base_version","moves_total","moves_done",
 *          "approved_ms","finished_ms","reason"}],
 *          "journal":[{"at_ms","by","what","node","detail"}]}
 *          (an entry that does not decode: {"key","error"})
 */
#include "journal.h"
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdlib.h>
#include <string.h>

static const char help[] =
    "Usage: ringctl history [--json]\n"
    "\n"
    "Lists the plans that ran to an end (done, failed, cancelled), newest first,\n"
    "then the journal: node address changes and other events, newest first\n"
    "(the coordinator keeps the last 1000).\n";

/* An entry's place: names carry writers' clocks, so entries are ordered
 * by their create revision. */
typedef struct entry_at {
  int64_t revision; /* create revision */
  uint32_t index;   /* into the range */
} entry_at;

/* The journal as read: entries newest first. */
typedef struct journal {
  ring_kvs r;   /* the range, in key order */
  entry_at *at; /* newest first; malloc()'ed */
} journal;

static int newest_entry_first(const void *a, const void *b) {
  int64_t x = ((const entry_at *)a)->revision, y = ((const entry_at *)b)->revision;
  return x < y ? 1 : x > y ? -1 : 0;
}

static int journal_read(ringctl_ctx *ctx, journal *j, ring_error *err) {
  char prefix[RK_KEY_MAX];
  int plen = rk_key(prefix, ctx->cluster, "journal/");
  ring_range_opts o = {.prefix = true, .limit = 4 * RK_JOURNAL_KEEP};
  if (plen < 0)
    return RING_EINVAL;
  int rc = ring_etcd_range(ctx->etcd, prefix, (size_t)plen, &o, &j->r, err);
  if (rc != RING_OK)
    return rc;
  if ((j->at = malloc((j->r.n ? j->r.n : 1) * sizeof *j->at)) == NULL) {
    ring_kvs_clear(&j->r);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < j->r.n; i++)
    j->at[i] = (entry_at){j->r.kvs[i].create_revision, i};
  qsort(j->at, j->r.n, sizeof *j->at, newest_entry_first);
  return RING_OK;
}

static void journal_free(journal *j) {
  ring_kvs_clear(&j->r);
  free(j->at);
}

/* Decodes entry i of the journal (newest first). */
static int journal_entry(const journal *j, uint32_t i, rk_event *e, ring_error *why) {
  const ring_kv *kv = &j->r.kvs[j->at[i].index];
  return rk_event_decode((const char *)kv->value, kv->value_len, e, why);
}

static cJSON *event_json(const journal *j, uint32_t i) {
  cJSON *o = cJSON_CreateObject();
  rk_event e;
  ring_error why = {0};
  if (journal_entry(j, i, &e, &why) != RING_OK) {
    cJSON_AddStringToObject(o, "key", (const char *)j->r.kvs[j->at[i].index].key);
    cJSON_AddStringToObject(o, "error", why.message);
    return o;
  }
  cJSON_AddNumberToObject(o, "at_ms", (double)e.at_ms);
  cJSON_AddStringToObject(o, "by", e.by);
  cJSON_AddStringToObject(o, "what", e.what);
  cJSON_AddStringToObject(o, "node", e.node);
  cJSON_AddStringToObject(o, "detail", e.detail);
  return o;
}

static void print_journal(const journal *j) {
  if (j->r.n == 0) {
    puts("\njournal: empty");
    return;
  }
  printf("\n%-20s  %-12s %-16s %-24s %s\n", "WHEN", "WHAT", "NODE", "BY", "DETAIL");
  for (uint32_t i = 0; i < j->r.n; i++) {
    rk_event e;
    ring_error why = {0};
    char when[32];
    if (journal_entry(j, i, &e, &why) != RING_OK)
      printf("%-20s  %-12s %-16s %-24s %s: %s\n", "?", "unreadable", "-", "-",
             (const char *)j->r.kvs[j->at[i].index].key, why.message);
    else
      printf("%-20s  %-12s %-16s %-24s %s\n", ringctl_time(e.at_ms, when), e.what,
             e.node[0] ? e.node : "-", e.by, e.detail);
  }
  if (j->r.count > (int64_t)j->r.n)
    printf("(%lld more entries not read)\n", (long long)(j->r.count - (int64_t)j->r.n));
}

static cJSON *run_json(const rk_run *r) {
  cJSON *o = ringctl_run_json(r);
  cJSON_AddNumberToObject(o, "base_version", (double)r->plan.base_version);
  cJSON_AddNumberToObject(o, "approved_ms", (double)r->approved_ms);
  cJSON_AddNumberToObject(o, "finished_ms", (double)r->finished_ms);
  cJSON_AddStringToObject(o, "reason", r->reason);
  return o;
}

static int print_json(const rk_run *runs, uint32_t n, const journal *j) {
  cJSON *o = cJSON_CreateObject();
  cJSON *a = cJSON_AddArrayToObject(o, "plans");
  for (uint32_t i = 0; i < n; i++)
    cJSON_AddItemToArray(a, run_json(&runs[i]));
  cJSON *e = cJSON_AddArrayToObject(o, "journal");
  for (uint32_t i = 0; i < j->r.n; i++)
    cJSON_AddItemToArray(e, event_json(j, i));
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
  journal j = {.at = NULL};
  if ((rc = journal_read(ctx, &j, &err)) != RING_OK) {
    ringctl_runs_free(runs, n);
    return ringctl_fail(ctx, rc, &err, "reading journal/");
  }
  if (ctx->a->globals->json) {
    rc = print_json(runs, n, &j);
  } else {
    print_text(runs, n);
    print_journal(&j);
  }
  journal_free(&j);
  ringctl_runs_free(runs, n);
  return rc;
}

int ringctl_cmd_history(ringctl_args *a) { return ringctl_run_plain(a, help, run, NULL); }

const ringctl_command ringctl_command_history = {
    "history", ringctl_cmd_history, "finished plans, then the journal of operators' changes", NULL,
    help};
