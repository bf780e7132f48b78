/*
 * cmd_whatif.c: `ringctl plan --what-if`: plans offline from the live
 * state with a node added, removed, or a whole failure domain down, and
 * shows what the coordinator would propose. Nothing is written.
 *
 * Sections: parsing a change; applying changes to the planner's input;
 * tokens a failure hurts; the command.
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdlib.h>
#include <string.h>

/* The address a planned-only node gets: the table wants host:port. */
#define WHATIF_ADDR "what-if.invalid:1"
#define TOKEN_RANGES_SHOWN 40

/* ------------------------------------------------------ parsing a change */

static int set_id(const ringctl_args *a, const char *id, size_t len, ringctl_whatif *w) {
  if (len == 0 || len > RING_ID_MAX || strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789._-") < len)
    return ringctl_usage_error(a, "--what-if: \"%.*s\" is not a node id ([a-z0-9._-]{1,63})",
                               (int)len, id);
  memcpy(w->id, id, len);
  w->id[len] = '\0';
  return RINGCTL_EXIT_OK;
}

/* One "key=value" item after add=ID: weight, or a label. */
static int add_item(const ringctl_args *a, char *item, ringctl_whatif *w) {
  char *eq = strchr(item, '=');
  if (eq == NULL)
    return ringctl_usage_error(a, "--what-if: \"%s\" is not key=value", item);
  *eq = '\0';
  if (strcmp(item, "weight") == 0)
    return ringctl_parse_weight(a, "--what-if: weight", eq + 1, &w->weight);
  ring_error err = {RING_OK, ""};
  if (rk_labels_set(&w->labels, item, eq + 1, &err) != RING_OK)
    return ringctl_usage_error(a, "--what-if: %s", err.message);
  return RINGCTL_EXIT_OK;
}

static int parse_add(const ringctl_args *a, const char *rest, ringctl_whatif *w) {
  char buf[1024];
  if (strlen(rest) >= sizeof buf)
    return ringctl_usage_error(a, "--what-if: too long");
  strcpy(buf, rest);
  char *save = NULL, *item = strtok_r(buf, ",", &save);
  int rc = set_id(a, item ? item : "", item ? strlen(item) : 0, w);
  while (rc == RINGCTL_EXIT_OK && (item = strtok_r(NULL, ",", &save)) != NULL)
    rc = add_item(a, item, w);
  return rc;
}

static int parse_fail(const ringctl_args *a, const char *rest, ringctl_whatif *w) {
  const char *colon = strchr(rest, ':');
  char level[RING_ID_MAX + 2];
  if (colon == NULL || colon == rest || (size_t)(colon - rest) > RING_ID_MAX)
    return ringctl_usage_error(a, "--what-if: fail= takes LEVEL:VALUE, e.g. fail=zone:z1");
  memcpy(level, rest, (size_t)(colon - rest));
  level[colon - rest] = '\0';
  ring_error err = {RING_OK, ""};
  if (rk_labels_set(&w->labels, level, colon + 1, &err) != RING_OK)
    return ringctl_usage_error(a, "--what-if: %s", err.message);
  return RINGCTL_EXIT_OK;
}

int ringctl_whatif_parse(const ringctl_args *a, const char *spec, ringctl_whatif *out) {
  ringctl_whatif w;
  memset(&w, 0, sizeof w);
  w.weight = 1.0;
  int rc;
  if (strncmp(spec, "add=", 4) == 0) {
    w.kind = RINGCTL_WHATIF_ADD;
    rc = parse_add(a, spec + 4, &w);
  } else if (strncmp(spec, "remove=", 7) == 0) {
    w.kind = RINGCTL_WHATIF_REMOVE;
    rc = set_id(a, spec + 7, strlen(spec + 7), &w);
  } else if (strncmp(spec, "fail=", 5) == 0) {
    w.kind = RINGCTL_WHATIF_FAIL;
    rc = parse_fail(a, spec + 5, &w);
  } else {
    rc = ringctl_usage_error(a, "--what-if: \"%s\" is not add=..., remove=ID or fail=LEVEL:VALUE",
                             spec);
  }
  if (rc == RINGCTL_EXIT_OK)
    *out = w;
  return rc;
}

/* ------------------------------ applying changes to the planner's input */

static int find_input_node(const rk_plan_input *in, const char *id) {
  for (uint32_t i = 0; i < in->n_nodes; i++)
    if (strcmp(in->nodes[i].id, id) == 0)
      return (int)i;
  return -1;
}

static int add_node(ringctl_ctx *ctx, rk_plan_input *in, const ringctl_whatif *w) {
  if (find_input_node(in, w->id) >= 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "node %s already exists", w->id);
  rk_node *nodes = realloc(in->nodes, (in->n_nodes + 1) * sizeof *nodes);
  if (nodes == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  in->nodes = nodes;
  rk_node *n = &nodes[in->n_nodes++];
  memset(n, 0, sizeof *n);
  strcpy(n->id, w->id);
  strcpy(n->addr, WHATIF_ADDR);
  n->labels = w->labels;
  n->weight = w->weight;
  n->state = RING_NODE_ACTIVE;
  n->desired = RK_WANT_ACTIVE;
  return RINGCTL_EXIT_OK;
}

static int remove_node(ringctl_ctx *ctx, rk_plan_input *in, const ringctl_whatif *w) {
  int i = find_input_node(in, w->id);
  if (i < 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "unknown node %s", w->id);
  memmove(&in->nodes[i], &in->nodes[i + 1], (in->n_nodes - (uint32_t)i - 1) * sizeof *in->nodes);
  in->n_nodes--;
  return RINGCTL_EXIT_OK;
}

static int fail_domain(ringctl_ctx *ctx, rk_plan_input *in, const ringctl_whatif *w) {
  uint32_t hit = 0;
  for (uint32_t i = 0; i < in->n_nodes; i++) {
    const char *v = rk_labels_get(&in->nodes[i].labels, w->labels.key[0]);
    if (v != NULL && strcmp(v, w->labels.value[0]) == 0) {
      in->nodes[i].state = RING_NODE_DOWN;
      hit++;
    }
  }
  if (hit == 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "no node has %s=%s", w->labels.key[0],
                       w->labels.value[0]);
  return RINGCTL_EXIT_OK;
}

static int apply_changes(ringctl_ctx *ctx, rk_plan_input *in, const ringctl_whatif *w, uint32_t n) {
  int rc = RINGCTL_EXIT_OK;
  for (uint32_t i = 0; i < n && rc == RINGCTL_EXIT_OK; i++) {
    if (w[i].kind == RINGCTL_WHATIF_ADD)
      rc = add_node(ctx, in, &w[i]);
    else if (w[i].kind == RINGCTL_WHATIF_REMOVE)
      rc = remove_node(ctx, in, &w[i]);
    else
      rc = fail_domain(ctx, in, &w[i]);
  }
  return rc;
}

/* ----------------------------------------------- tokens a failure hurts */

/* Whether node i of t is in a failed domain of any fail= change. */
static bool failed(const ring_table *t, uint16_t i, const ringctl_whatif *w, uint32_t n) {
  for (uint32_t k = 0; k < n; k++) {
    if (w[k].kind != RINGCTL_WHATIF_FAIL)
      continue;
    const char *v = ring_table_node_label(t, i, w[k].labels.key[0]);
    if (v != NULL && strcmp(v, w[k].labels.value[0]) == 0)
      return true;
  }
  return false;
}

/* Tokens of t that lose at least one replica (degraded) and all of them
 * (lost), as JSON arrays. */
typedef struct hurt {
  cJSON *degraded, *lost;
  uint32_t n_degraded, n_lost;
} hurt;

static void count_hurt(const ring_table *t, const ringctl_whatif *w, uint32_t n, hurt *h) {
  uint32_t R = ring_table_replicas(t);
  for (uint32_t tok = 0; tok < ring_table_tokens(t); tok++) {
    uint32_t down = 0;
    for (uint32_t r = 0; r < R; r++)
      down += failed(t, ring_table_owner(t, tok, r), w, n);
    if (down > 0) {
      cJSON_AddItemToArray(h->degraded, cJSON_CreateNumber(tok));
      h->n_degraded++;
    }
    if (down == R) {
      cJSON_AddItemToArray(h->lost, cJSON_CreateNumber(tok));
      h->n_lost++;
    }
  }
}

/* "0-15, 33, 40-41" for an ascending token array, the first ranges only. */
static void print_tokens(const cJSON *tokens) {
  int n = cJSON_GetArraySize(tokens), ranges = 0;
  for (int i = 0; i < n && ranges < TOKEN_RANGES_SHOWN; ranges++) {
    int first = cJSON_GetArrayItem(tokens, i)->valueint, last = first;
    while (++i < n && cJSON_GetArrayItem(tokens, i)->valueint == last + 1)
      last++;
    printf(first == last ? "%s%d" : "%s%d-%d", ranges ? ", " : "  ", first, last);
  }
  printf("%s\n", ranges == TOKEN_RANGES_SHOWN ? ", ..." : "");
}

static void print_hurt(const hurt *h) {
  printf("\nfailure:  %u tokens would lose a replica, %u would lose all\n", h->n_degraded,
         h->n_lost);
  if (h->n_degraded > 0) {
    puts("degraded:");
    print_tokens(h->degraded);
  }
  if (h->n_lost > 0) {
    puts("lost (no replica left):");
    print_tokens(h->lost);
  }
}

/* ----------------------------------------------------------- the command */

static bool any_fail(const ringctl_whatif *w, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (w[i].kind == RINGCTL_WHATIF_FAIL)
      return true;
  return false;
}

/* Shows the plan, with the hurt tokens for fail= changes. */
static int show(ringctl_ctx *ctx, const rk_state *st, const ring_table *table, const rk_plan_doc *d,
                const ring_plan *plan, const ringctl_whatif *w, uint32_t n) {
  bool json = ctx->a->globals->json;
  hurt h = {cJSON_CreateArray(), cJSON_CreateArray(), 0, 0};
  if (table != NULL && any_fail(w, n))
    count_hurt(table, w, n, &h);
  int rc = RINGCTL_EXIT_OK;
  if (json) {
    cJSON *o = ringctl_plan_json(d, plan, &st->config, NULL), *f = cJSON_CreateObject();
    cJSON_AddItemToObject(f, "degraded", h.degraded);
    cJSON_AddItemToObject(f, "lost", h.lost);
    cJSON_AddItemToObject(o, "what_if", f);
    return ringctl_json_emit(o);
  }
  puts("what-if: nothing is written to the cluster\n");
  ringctl_plan_text(stdout, d, plan, &st->config, NULL);
  if (any_fail(w, n))
    print_hurt(&h);
  cJSON_Delete(h.degraded);
  cJSON_Delete(h.lost);
  return rc;
}

/* Weighs in by the hosts' sizes when it balances bytes. Asked for on the
 * command line, a plan by bytes that cannot be weighed is refused; under
 * the config's setting, it falls back to tokens and says so. */
static int weigh(ringctl_ctx *ctx, const rk_state *st, const ring_table *table, rk_plan_input *in,
                 bool asked) {
  char why[160];
  if (rk_input_weigh(st, table, in, why, sizeof why) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory weighing the arcs");
  if (why[0] && asked)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "%s", why);
  if (why[0] && !ctx->a->globals->json)
    printf("note: %s\n", why);
  if (asked && st->config.balance != RING_BALANCE_BYTES && !ctx->a->globals->json)
    printf("note: the config balances tokens, so after this plan runs the coordinator\n"
           "      proposes one back to token balance; `ringctl balance bytes` first\n");
  return RINGCTL_EXIT_OK;
}

static int plan_input(ringctl_ctx *ctx, const rk_state *st, const ring_table *table,
                      const ringctl_whatif *w, uint32_t n, const ring_balance *balance,
                      const char *out_file) {
  rk_plan_input in;
  ring_error err = {RING_OK, ""};
  int rc = rk_desired_input(st, table, &in, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "the desired membership");
  rk_plan_doc d;
  ring_plan *plan = NULL;
  rc = apply_changes(ctx, &in, w, n);
  if (balance != NULL)
    in.balance = *balance;
  if (rc == RINGCTL_EXIT_OK)
    rc = weigh(ctx, st, table, &in, balance != NULL && *balance == RING_BALANCE_BYTES);
  if (rc == RINGCTL_EXIT_OK) {
    int ring_rc = rk_plan_doc_make(table, ctx->cluster, &in, ringctl_now_ms(), &d, &plan, &err);
    rc = ring_rc == RING_OK ? show(ctx, st, table, &d, plan, w, n)
                            : ringctl_fail(ctx, ring_rc, &err, "planning");
    if (ring_rc == RING_OK && rc == RINGCTL_EXIT_OK && out_file != NULL)
      rc = ringctl_plan_save(ctx, &d, plan, out_file);
    if (ring_rc == RING_OK)
      rk_plan_doc_free(&d);
  }
  ring_plan_free(plan);
  rk_plan_input_free(&in);
  return rc;
}

int ringctl_plan_whatif(ringctl_ctx *ctx, const ringctl_whatif *w, uint32_t n,
                        const ring_balance *balance, const char *out_file) {
  rk_state st;
  ring_table *table = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_ALL | RK_READ_SIZES, &st, &table);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rc = plan_input(ctx, &st, table, w, n, balance, out_file);
  ring_table_free(table);
  rk_state_free(&st);
  return rc;
}
