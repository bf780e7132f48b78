/*
 * cmd_recover.c: `ringctl recover`: the operator's way out of a restored
 * etcd (proto/etcd.md, "A restored etcd"; deploy/PRODUCTION.md, "Backup
 * and restore"). Nothing else ends that state: daemons stay inert until a
 * `recovered` record covers every version they saw.
 *
 * Usage: ringctl recover [--without ID,...] [--yes] [--json]
 *
 * Sections: arguments; reading what hosts reported; showing; publishing;
 * the command.
 *
 * It reads the hosts' recovery/<id> reports and the newest table they had
 * in service (recovery-table/<v>), builds the table from what they hold
 * (recover_build.c), checks it with the planner's verifier, shows it, asks
 * (unless --yes), and publishes it in one txn at version max(seen by any
 * host, current) + 1, with the node records, the plan keys and the stuck
 * report cleared, the reports deleted and the `recovered` record. The txn
 * compares the version key as read: a version that moved is exit 3. Past
 * 100 nodes, the other node records go ahead in txns of 100 under the same
 * compare (etcd's limit on ops per txn).
 * It refuses (exit 1) while no host reported, while the newest table is
 * not readable, or while an owner of it sent no report (unless --without).
 */
#define _GNU_SOURCE /* strdup, strtok_r */
#include "ringctl_etcd.h"
#include "ringctl_out.h"
#include "ringx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECOVERED_BY "ringctl"
#define WITHOUT_MAX 64              /* --without ids */
#define SHOWN_MAX 20                /* missing slots and lost tokens listed in text */
#define TABLE_VALUE_MAX (64u << 20) /* a recovery-table/<v> value read at most */

/* -------------------------------------------------------------- arguments */

enum { OPT_YES, OPT_WITHOUT };

static const ringctl_opt recover_opts[] = {
    {"yes", OPT_YES, false}, {"without", OPT_WITHOUT, true}, {NULL, 0, false}};

static const char help[] =
    "Usage: ringctl recover [--without ID,...] [--yes] [--json]\n"
    "\n"
    "Ends the state daemons enter when etcd was restored from an older snapshot\n"
    "(ringctl status shows it): rebuilds the table from what hosts actually hold,\n"
    "as their recovery reports say, in the slot order of the newest table they had\n"
    "in service; checks it with the planner's verifier; shows it and asks; then\n"
    "publishes it above every version any host has seen, in one txn with the node\n"
    "records and a `recovered` record, so every daemon resumes on the new history.\n"
    "A slot no holder can fill keeps its named owner and is listed missing; a token\n"
    "no host holds is listed lost (never made empty).\n"
    "\n"
    "It refuses (exit 1) while an owner of that table has sent no report.\n"
    "\n"
    "Options:\n"
    "  --without ID,...  publish without these hosts' reports (they count as\n"
    "                    holding nothing: a host that is gone for good)\n"
    "  --yes             publish without asking\n"
    "  --json            print what it would publish (or did) as JSON\n"
    "\n"
    "Exit codes: 0 published (or nothing to do), 1 refused or failed, 2 usage,\n"
    "3 the version moved meanwhile (nothing written).\n";

typedef struct recover_settings {
  bool yes;
  char *without_buf;                /* --without, split in place */
  const char *without[WITHOUT_MAX]; /* into these ids */
  uint32_t n_without;
} recover_settings;

static int split_without(const ringctl_args *a, recover_settings *s, const char *value) {
  free(s->without_buf);
  s->n_without = 0;
  if ((s->without_buf = strdup(value)) == NULL)
    return RINGCTL_EXIT_FAILURE;
  char *save = NULL;
  for (char *id = strtok_r(s->without_buf, ",", &save); id; id = strtok_r(NULL, ",", &save)) {
    if (strlen(id) > RING_ID_MAX) /* the rest is checked against the table (decide) */
      return ringctl_usage_error(a, "--without: \"%.63s...\" is not a node id", id);
    if (s->n_without == WITHOUT_MAX)
      return ringctl_usage_error(a, "--without: at most %d ids", WITHOUT_MAX);
    s->without[s->n_without++] = id;
  }
  return s->n_without ? RINGCTL_EXIT_OK : ringctl_usage_error(a, "--without: no ids given");
}

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  recover_settings *s = ud;
  if (id == OPT_YES) {
    s->yes = true;
    return RINGCTL_EXIT_OK;
  }
  if (id == OPT_WITHOUT)
    return split_without(a, s, value);
  return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
}

/* ------------------------------------------------- what hosts reported */

/* What the command works from. */
typedef struct recover_input {
  uint32_t n_reports;    /* recovery/<id> values that parsed */
  uint64_t seen;         /* the highest version any host saw */
  uint64_t base_version; /* the newest table in service any host reported */
  ring_table *base;      /* that table (recovery-table/<v>) */
  uint64_t version;      /* the version to publish */
} recover_input;

static int read_base(ringctl_ctx *ctx, recover_input *in) {
  char key[RK_KEY_MAX];
  rk_key_version(key, ctx->cluster, "recovery-table/", in->base_version);
  char missing[160];
  snprintf(missing, sizeof missing,
           "recovery-table/%" PRIu64 " is missing: no host put the table it had in service; "
           "wait for the agents' reports",
           in->base_version);
  ring_kv kv;
  int rc = ringctl_get_required(ctx, key, &kv, missing);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  ring_error err = {RING_OK, ""};
  if (kv.value_len > TABLE_VALUE_MAX)
    rc = ring__err(&err, RING_ETOOBIG, "%zu bytes over the %u cap", kv.value_len, TABLE_VALUE_MAX);
  else
    rc = ring_table_decode((const char *)kv.value, kv.value_len, &in->base, &err);
  ring_kv_clear(&kv);
  if (rc == RING_OK && (ring_table_version(in->base) != in->base_version ||
                        strcmp(ring_table_cluster(in->base), ctx->cluster) != 0))
    rc = ring__err(&err, RING_EVERSION, "it holds table %" PRIu64 " of cluster %s",
                   ring_table_version(in->base), ring_table_cluster(in->base));
  if (rc != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "recovery-table/%" PRIu64 " is unusable: %s",
                       in->base_version, err.message);
  return RINGCTL_EXIT_OK;
}

static int gather(ringctl_ctx *ctx, const rk_state *st, recover_input *in) {
  *in = (recover_input){0};
  for (uint32_t i = 0; i < st->n_recovery; i++) {
    const rk_recovery *r = &st->recovery[i].r;
    if (r->seen_version == 0)
      continue; /* malformed: listed with the bad records */
    in->n_reports++;
    in->base_version = r->table_version > in->base_version ? r->table_version : in->base_version;
  }
  in->seen = rk_state_seen_version(st);
  ringctl_bad_text(stderr, st);
  if (in->n_reports == 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "no host reported a restored etcd (recovery/<id>): nothing to recover");
  if (in->base_version == 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "no host reported a table in service: nothing to rebuild from");
  uint64_t top = in->seen > st->version ? in->seen : st->version;
  in->version = (top > in->base_version ? top : in->base_version) + 1;
  return read_base(ctx, in);
}

/* --------------------------------------------------------------- showing */

static cJSON *result_json(const recover_input *in, const rk_state *st, const rk_recover *r,
                          int violations, bool published) {
  cJSON *o = cJSON_CreateObject(), *miss = cJSON_CreateArray(), *lost = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "version", (double)in->version);
  cJSON_AddNumberToObject(o, "base_version", (double)in->base_version);
  cJSON_AddNumberToObject(o, "seen_version", (double)in->seen);
  cJSON_AddNumberToObject(o, "current_version", (double)st->version);
  cJSON_AddNumberToObject(o, "reports", in->n_reports);
  cJSON_AddNumberToObject(o, "moved", r->n_moved);
  for (uint32_t i = 0; i < r->n_missing; i++) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "token", r->missing[i].token);
    cJSON_AddNumberToObject(m, "slot", r->missing[i].slot);
    cJSON_AddStringToObject(m, "owner", ring_table_node_id(r->table, r->missing[i].owner));
    cJSON_AddItemToArray(miss, m);
  }
  for (uint32_t i = 0; i < r->n_lost; i++)
    cJSON_AddItemToArray(lost, cJSON_CreateNumber(r->lost[i]));
  cJSON_AddItemToObject(o, "missing", miss);
  cJSON_AddItemToObject(o, "lost", lost);
  cJSON_AddNumberToObject(o, "violations", violations);
  cJSON_AddBoolToObject(o, "published", published);
  return o;
}

static void show_text(const recover_input *in, const rk_state *st, const rk_recover *r,
                      const char *report) {
  printf("recover: table %" PRIu64 " from table %" PRIu64 " as %u host%s hold it (hosts saw "
         "version %" PRIu64 ", etcd is at %" PRIu64 ")\n",
         in->version, in->base_version, in->n_reports, in->n_reports == 1 ? "" : "s", in->seen,
         st->version);
  printf("  %u slot%s given to another holder than table %" PRIu64 " named\n", r->n_moved,
         r->n_moved == 1 ? "" : "s", in->base_version);
  printf("  %u token-replica%s missing (the named owner lacks the arc):", r->n_missing,
         r->n_missing == 1 ? "" : "s");
  for (uint32_t i = 0; i < r->n_missing && i < SHOWN_MAX; i++)
    printf(" %u/%u@%s", r->missing[i].token, r->missing[i].slot,
           ring_table_node_id(r->table, r->missing[i].owner));
  printf("%s\n", r->n_missing > SHOWN_MAX ? " ..." : "");
  printf("  %u token%s LOST (no host holds them; never made empty):", r->n_lost,
         r->n_lost == 1 ? "" : "s");
  for (uint32_t i = 0; i < r->n_lost && i < SHOWN_MAX; i++)
    printf(" %u", r->lost[i]);
  printf("%s\n", r->n_lost > SHOWN_MAX ? " ..." : "");
  printf("verify: %s", report ? report : "every invariant holds\n");
}

/* Asks on stdin; true only for "y" or "yes". */
static bool confirmed(void) {
  char line[16];
  printf("publish table? [y/N] ");
  fflush(stdout);
  if (fgets(line, sizeof line, stdin) == NULL)
    return false;
  line[strcspn(line, "\r\n")] = '\0';
  return strcmp(line, "y") == 0 || strcmp(line, "yes") == 0;
}

/* ------------------------------------------------------------- publishing */

#define FIXED_OPS 9 /* table, version, recovered, 4 deletes of keys, 2 of prefixes */

/* The ops and the memory they point into. */
typedef struct publish_ops {
  ring_op *ops;
  uint32_t n;
  char (*keys)[RK_KEY_MAX]; /* one per op */
  char **values;            /* malloc()'ed values, one per op (NULL for deletes) */
} publish_ops;

static void ops_free(publish_ops *p) {
  for (uint32_t i = 0; p->values && i < p->n; i++)
    free(p->values[i]);
  free(p->values);
  free(p->keys);
  free(p->ops);
}

/* Adds one op on key (made by the caller in p->keys[p->n]); value taken over. */
static void op_add(publish_ops *p, ring_op_type type, bool prefix, char *value, size_t len) {
  uint32_t i = p->n++;
  p->values[i] = value;
  p->ops[i] = (ring_op){type, p->keys[i], strlen(p->keys[i]), value, len, 0, prefix};
}

/* nodes/<id> for node i of t: the record read (desired kept), else a new one. */
static char *node_value(const rk_state *st, const ring_table *t, uint16_t i, size_t *len) {
  rk_node n = {0}, *old = rk_state_node(st, ring_table_node_id(t, i));
  if (old != NULL)
    n = *old;
  snprintf(n.id, sizeof n.id, "%s", ring_table_node_id(t, i));
  snprintf(n.addr, sizeof n.addr, "%s", ring_table_node_addr(t, i));
  n.labels.n = 0;
  for (uint32_t k = 0; k < ring_table_node_label_count(t, i); k++) {
    const char *key, *value;
    if (ring_table_node_label_at(t, i, k, &key, &value) == RING_OK)
      rk_labels_set(&n.labels, key, value, NULL);
  }
  n.weight = ring_table_node_weight(t, i);
  n.state = ring_table_node_state(t, i);
  n.lost_ms = 0;
  n.since_ms = ringctl_now_ms();
  char *json = NULL;
  return rk_node_encode(&n, &json, len) == RING_OK ? json : NULL;
}

static int ops_make(ringctl_ctx *ctx, const rk_state *st, const recover_input *in,
                    const ring_table *t, publish_ops *p) {
  uint32_t nodes = ring_table_node_count(t), cap = FIXED_OPS + nodes;
  p->ops = calloc(cap, sizeof *p->ops);
  p->keys = calloc(cap, sizeof *p->keys);
  p->values = calloc(cap, sizeof *p->values);
  char *table = NULL, *rec = NULL, *ver = malloc(24);
  size_t tlen = 0, rlen = 0;
  ring__recovered r = {.version = in->version,
                       .seen_version = in->seen < in->version ? in->seen : 0,
                       .at_ms = ringctl_now_ms()};
  snprintf(r.by, sizeof r.by, "%s", RECOVERED_BY);
  if (!p->ops || !p->keys || !p->values || !ver || ring_table_encode(t, &table, &tlen) != RING_OK ||
      ring__recovered_encode(&r, &rec, &rlen) != RING_OK) {
    free(table), free(rec), free(ver);
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory encoding the recovery");
  }
  rk_key_version(p->keys[p->n], ctx->cluster, "tables/", in->version);
  op_add(p, RING_OP_PUT, false, table, tlen);
  ringctl_key(ctx, "version", p->keys[p->n]);
  op_add(p, RING_OP_PUT, false, ver, (size_t)snprintf(ver, 24, "%" PRIu64, in->version));
  ringctl_key(ctx, "recovered", p->keys[p->n]);
  op_add(p, RING_OP_PUT, false, rec, rlen);
  static const char *const gone[] = {"plan/proposed", "plan/active", "stuck"};
  for (size_t i = 0; i < 3; i++) {
    ringctl_key(ctx, gone[i], p->keys[p->n]);
    op_add(p, RING_OP_DELETE, false, NULL, 0);
  }
  rk_key_version(p->keys[p->n], ctx->cluster, "deltas/", in->version);
  op_add(p, RING_OP_DELETE, false, NULL, 0);
  static const char *const reports[] = {"recovery/", "recovery-table/"};
  for (size_t i = 0; i < 2; i++) {
    ringctl_key(ctx, reports[i], p->keys[p->n]);
    op_add(p, RING_OP_DELETE, true, NULL, 0);
  }
  for (uint16_t i = 0; i < nodes; i++) {
    size_t len = 0;
    char *v = node_value(st, t, i, &len);
    if (v == NULL)
      return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "encoding node %s failed",
                         ring_table_node_id(t, i));
    rk_key2(p->keys[p->n], ctx->cluster, "nodes/", ring_table_node_id(t, i));
    op_add(p, RING_OP_PUT, false, v, len);
  }
  return RINGCTL_EXIT_OK;
}

/* Node records per txn: etcd refuses a txn of more than --max-txn-ops
 * operations (128 by default), and a cluster can have thousands of nodes. */
#define NODE_OPS_PER_TXN 100

/* Node records beyond the last batch go first, each batch fenced by the
 * version key as read; the table, version, `recovered` record and the last
 * batch go together in the final txn. Records written ahead are harmless:
 * no daemon acts until `recovered` covers what it saw, and a second run
 * writes them again. Sets *won false (and stops) if the version moved. */
static int publish_ahead(ringctl_ctx *ctx, const ring_cmp *cmp, publish_ops *p, uint32_t *last,
                         bool *won) {
  uint32_t nodes = p->n - FIXED_OPS,
           ahead = nodes > NODE_OPS_PER_TXN ? nodes - NODE_OPS_PER_TXN : 0;
  int rc = RINGCTL_EXIT_OK;
  *won = true;
  for (uint32_t k = 0; rc == RINGCTL_EXIT_OK && *won && k < ahead; k += NODE_OPS_PER_TXN) {
    uint32_t n = ahead - k < NODE_OPS_PER_TXN ? ahead - k : NODE_OPS_PER_TXN;
    rc = ringctl_txn(ctx, cmp, 1, p->ops + FIXED_OPS + k, n, "writing node records", won);
  }
  *last = FIXED_OPS + ahead;
  return rc;
}

/* The final txn, if the version key is still as read. */
static int publish(ringctl_ctx *ctx, const rk_state *st, const recover_input *in,
                   const ring_table *t) {
  publish_ops p = {0};
  int rc = ops_make(ctx, st, in, t, &p);
  char vkey[RK_KEY_MAX];
  ringctl_key(ctx, "version", vkey);
  ring_cmp cmp = {vkey,
                  strlen(vkey),
                  st->version_mod ? RING_CMP_MOD : RING_CMP_CREATE,
                  RING_CMP_EQ,
                  st->version_mod,
                  NULL,
                  0};
  bool won = false;
  uint32_t last = FIXED_OPS;
  if (rc == RINGCTL_EXIT_OK)
    rc = publish_ahead(ctx, &cmp, &p, &last, &won);
  /* the journal entry rides with the final txn, not with records ahead */
  ringctl_audit(ctx, "recover", NULL, "version %llu from %u host reports (base table %llu)",
                (unsigned long long)in->version, in->n_reports,
                (unsigned long long)in->base_version);
  if (rc == RINGCTL_EXIT_OK && won && last > FIXED_OPS) /* the rest follows the fixed ops */
    memmove(p.ops + FIXED_OPS, p.ops + last, (p.n - last) * sizeof *p.ops);
  if (rc == RINGCTL_EXIT_OK && won)
    rc = ringctl_txn(ctx, &cmp, 1, p.ops, FIXED_OPS + (p.n - last),
                     "publishing the recovered table", &won);
  ops_free(&p);
  if (rc == RINGCTL_EXIT_OK && !won)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT,
                       "the version moved meanwhile: the table was not published; run recover "
                       "again");
  return rc;
}

/* ------------------------------------------------------------ the command */

static int decide(ringctl_ctx *ctx, const recover_settings *s, const rk_state *st,
                  const recover_input *in) {
  for (uint32_t i = 0; i < s->n_without; i++)
    if (ring_table_find_node(in->base, s->without[i]) < 0)
      return ringctl_say(ctx, RINGCTL_EXIT_USAGE, "--without: %s is not a node of table %" PRIu64,
                         s->without[i], in->base_version);
  rk_recover r;
  ring_error err = {RING_OK, ""};
  int rc = rk_recover_build(in->base, st->recovery, st->n_recovery, s->without, s->n_without,
                            in->version, &r, &err);
  if (rc != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "refusing to recover: %s", err.message);
  char *report = NULL;
  int violations = ring_table_verify(r.table, NULL, &report);
  bool json = ctx->a->globals->json, go = s->yes;
  if (!json)
    show_text(in, st, &r, report);
  if (!go && !json)
    go = confirmed();
  rc = go ? publish(ctx, st, in, r.table) : RINGCTL_EXIT_OK;
  if (json)
    ringctl_json_emit(result_json(in, st, &r, violations, go && rc == RINGCTL_EXIT_OK));
  else if (go && rc == RINGCTL_EXIT_OK)
    printf("published table %" PRIu64 ": daemons resume on the new history\n", in->version);
  else if (!go)
    printf("not confirmed: nothing written (--yes publishes without asking)\n");
  free(report);
  rk_recover_free(&r);
  return rc;
}

static int run(ringctl_ctx *ctx, void *ud) {
  recover_settings *s = ud;
  rk_state st;
  int rc = ringctl_read_state(ctx, RK_READ_ALL, &st);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  recover_input in;
  rc = gather(ctx, &st, &in);
  if (rc == RINGCTL_EXIT_OK)
    rc = decide(ctx, s, &st, &in);
  ring_table_free(in.base);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_recover(ringctl_args *a) {
  recover_settings s = {0};
  bool help_shown = false;
  int rc = ringctl_parse(a, recover_opts, help, apply, &s, &help_shown);
  if (rc == RINGCTL_EXIT_OK && !help_shown)
    rc = ringctl_with_etcd(a, run, &s);
  free(s.without_buf);
  return rc;
}

const ringctl_command ringctl_command_recover = {
    "recover", ringctl_cmd_recover,
    "after an etcd restore: rebuild the table from what hosts hold (--yes)", recover_opts, help};
