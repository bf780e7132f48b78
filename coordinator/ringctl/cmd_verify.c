/*
 * cmd_verify.c: `ringctl verify`: checks the placement invariants on the
 * live table (ring_table_verify with the config's failure domain) and that
 * the table agrees with the version key and the config.
 *
 * Usage: ringctl verify [--json]
 *
 * Owners that report owned arcs missing (missing/<id>) and tokens every
 * owner lacks (lost) are violations too: the data is not where the table
 * says until they are refilled (or their loss accepted).
 *
 * Exit 0 when every check holds, 1 listing the violations.
 * --json: {"version":N,"ok":bool,"violations":["...",...]}
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdlib.h>
#include <string.h>

static const char help[] =
    "Usage: ringctl verify [--json]\n"
    "\n"
    "Checks every placement invariant on the live table: a token's owners are\n"
    "distinct and in distinct failure domains (when enough domains exist), every\n"
    "node holds within one token-replica of its weighted target, and nodes that are\n"
    "draining, down or removed own nothing. Also checks that the table is the\n"
    "version the version key names and matches the config (T, R, seed, domain),\n"
    "and that no owner reports an owned arc missing (missing/<id>; tokens every\n"
    "owner lacks are named lost).\n"
    "Exit 1 lists the violations.\n";

/* Appends one formatted violation to the array. */
static void add(cJSON *v, const char *fmt, unsigned long long a, unsigned long long b) {
  char line[160];
  snprintf(line, sizeof line, fmt, a, b);
  cJSON_AddItemToArray(v, cJSON_CreateString(line));
}

/* The table against the version key and the config. */
static void check_agreement(const rk_state *st, const ring_table *t, cJSON *v) {
  const rk_config *c = &st->config;
  if (ring_table_version(t) != st->version)
    add(v, "tables/%llu holds version %llu", st->version, ring_table_version(t));
  if (ring_table_tokens(t) != c->tokens)
    add(v, "the table has %llu tokens, the config %llu", ring_table_tokens(t), c->tokens);
  if (ring_table_replicas(t) != c->replicas)
    add(v, "the table has %llu replicas, the config %llu", ring_table_replicas(t), c->replicas);
  if (ring_table_seed(t) != c->seed)
    add(v, "the table's seed is %llu, the config's %llu", ring_table_seed(t), c->seed);
  if (strcmp(ring_table_failure_domain(t), c->failure_domain) != 0)
    cJSON_AddItemToArray(v, cJSON_CreateString("the table's failure domain is not the config's"));
}

/* The table's report under the config's balance: bytes checks each node's
 * bytes against its share with the sizes hosts report now (drift shows as
 * a violation), and only the hard rules while any token's size is unknown. */
static int verify_balanced(const rk_state *st, const ring_table *t, bool say, char **report) {
  if (st->config.balance != RING_BALANCE_BYTES)
    return ring_table_verify(t, st->config.failure_domain, report);
  uint64_t *arc = NULL;
  uint32_t known = 0;
  if (rk_arc_bytes(st, t, &arc, &known) != RING_OK)
    return -RING_ENOMEM;
  int n = known == ring_table_tokens(t)
              ? ring_table_verify_bytes(t, st->config.failure_domain, arc, report)
              : ring_table_verify_rules(t, st->config.failure_domain, report);
  if (known < ring_table_tokens(t) && say) /* unknown is not unbalanced: a note */
    printf("note: bytes balance not checked: sizes known for %u of %u tokens\n", known,
           ring_table_tokens(t));
  free(arc);
  return n;
}

/* The lines of the table's report. */
static int check_invariants(const rk_state *st, const ring_table *t, bool say, cJSON *v) {
  char *report = NULL;
  int n = verify_balanced(st, t, say, &report);
  for (char *save = NULL, *line = report ? strtok_r(report, "\n", &save) : NULL; line;
       line = strtok_r(NULL, "\n", &save))
    cJSON_AddItemToArray(v, cJSON_CreateString(line));
  free(report);
  return n;
}

static int report(const ringctl_ctx *ctx, const rk_state *st, cJSON *v, int counted) {
  int shown = cJSON_GetArraySize(v);
  bool ok = shown == 0 && counted == 0;
  if (ctx->a->globals->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", (double)st->version);
    cJSON_AddBoolToObject(o, "ok", ok);
    cJSON_AddItemToObject(o, "violations", v);
    int rc = ringctl_json_emit(o);
    return rc != RINGCTL_EXIT_OK ? rc : ok ? RINGCTL_EXIT_OK : RINGCTL_EXIT_FAILURE;
  }
  if (ok)
    printf("ok: version %llu, %u tokens x %u replicas: every invariant holds\n",
           (unsigned long long)st->version, st->config.tokens, st->config.replicas);
  const cJSON *line;
  cJSON_ArrayForEach(line, v) printf("violation: %s\n", line->valuestring);
  if (counted > 0 && counted > shown)
    printf("(%d violations in all)\n", counted);
  cJSON_Delete(v);
  return ok ? RINGCTL_EXIT_OK : RINGCTL_EXIT_FAILURE;
}

/* Owners reporting owned arcs missing (missing/<id>), and lost tokens. */
static int check_missing(const rk_state *st, const ring_table *t, cJSON *v) {
  rk_missing_view mv;
  if (rk_missing_view_make(st, t, &mv) != RING_OK)
    return -RING_ENOMEM; /* negative, as ring_table_verify's failures */
  int n = ringctl_missing_violations(&mv, v);
  rk_missing_view_free(&mv);
  return n;
}

static int check(ringctl_ctx *ctx, const rk_state *st, const ring_table *t, void *ud) {
  (void)ud;
  if (t == NULL && !ctx->a->globals->json) {
    puts("no table is published yet: nothing to verify");
    return RINGCTL_EXIT_OK;
  }
  cJSON *v = cJSON_CreateArray();
  int counted = 0;
  if (t != NULL) {
    check_agreement(st, t, v);
    counted = check_invariants(st, t, !ctx->a->globals->json, v);
    int missing = counted >= 0 ? check_missing(st, t, v) : 0;
    missing += missing >= 0 ? ringctl_label_violations(st, v) : 0;
    counted = missing < 0 ? missing : counted > 0 ? counted + missing : counted;
  }
  if (counted >= 0)
    return report(ctx, st, v, counted);
  cJSON_Delete(v);
  return ringctl_fail(ctx, counted, NULL, "verifying");
}

static int run(ringctl_ctx *ctx, void *ud) {
  rk_state st;
  ring_table *t = NULL;
  int rc = ringctl_read_live(
      ctx, RK_READ_VERSION | RK_READ_MISSING | RK_READ_NODES | RK_READ_ALIVE | RK_READ_SIZES, &st,
      &t);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rc = check(ctx, &st, t, ud);
  ring_table_free(t);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_verify(ringctl_args *a) { return ringctl_run_plain(a, help, run, NULL); }

const ringctl_command ringctl_command_verify = {
    "verify", ringctl_cmd_verify, "check every placement invariant on the live table", NULL, help};
