/*
 * cmd_replace.c: `ringctl replace OLD NEW [--json]`: NEW takes OLD's
 * token-replicas one for one. NEW is a registered node that owns nothing
 * (its agent is up, so its record exists, joining) in OLD's failure
 * domain. One txn, comparing both records' mod revisions, gives NEW OLD's
 * weight and sets OLD's desired state to removed; the coordinator then
 * proposes the plan, whose moves are exactly OLD's token-replicas, each to
 * NEW (the planner's minimal movement: every other node is already at its
 * share), streamed from OLD while it is up, else from live replicas.
 * Joins, drains and weights wait for `ringctl apply` under the default
 * policy; so does this.
 *
 * Refused (exit 1, naming why): a run in progress, an unknown or removed
 * node, a NEW that owns or is receiving anything, or one whose failure
 * domain differs from OLD's (the swap would move other replicas too).
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "Usage: ringctl replace OLD NEW [--json]\n\n"
    "Node NEW (registered, owning nothing, in OLD's failure domain) takes OLD's\n"
    "token-replicas one for one: NEW gets OLD's weight and OLD is removed. The\n"
    "coordinator proposes the plan (ringctl plan; ringctl apply to run it).\n";

typedef struct replace_args {
  const char *pos[2]; /* OLD, NEW */
  uint32_t replicas;  /* out: OLD's, in the live table */
  double weight;      /* out: OLD's */
} replace_args;

/* Why OLD cannot be replaced by NEW now, or RINGCTL_EXIT_OK. */
static int check(ringctl_ctx *ctx, const rk_state *st, const ring_table *t, const char *const id[2],
                 const rk_node *old, const rk_node *nu) {
  const char *level = st->config.failure_domain;
  if (st->has_active)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "plan %s is running: wait for it or cancel it first", st->active.plan.id);
  if (old == NULL || nu == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "unknown node %s", old == NULL ? id[0] : id[1]);
  if (old->desired == RK_WANT_REMOVED || old->state == RING_NODE_REMOVED)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "node %s is removed already", old->id);
  if (nu->desired != RK_WANT_ACTIVE || nu->state == RING_NODE_DOWN ||
      nu->state == RING_NODE_REMOVED)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "node %s is %s (desired %s): it cannot take over",
                       nu->id, ring_node_state_name(nu->state), rk_desired_name(nu->desired));
  if (ringctl_node_holds(t, nu->id) > 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "node %s owns token-replicas already: only a node that owns nothing can "
                       "take another's place",
                       nu->id);
  const char *a = level[0] ? rk_labels_get(&old->labels, level) : NULL;
  const char *b = level[0] ? rk_labels_get(&nu->labels, level) : NULL;
  if (level[0] && (a == NULL || b == NULL || strcmp(a, b) != 0))
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "%s is in %s %s, %s in %s %s: a replacement keeps the failure domain "
                       "(ringctl label %s %s=...)",
                       old->id, level, a ? a : "(none)", nu->id, level, b ? b : "(none)", nu->id,
                       level);
  return RINGCTL_EXIT_OK;
}

/* Both records, edited, in one txn on both mod revisions. */
static int write_both(ringctl_ctx *ctx, const rk_state *st, rk_node old, rk_node nu) {
  const rk_node *recs[2] = {rk_state_node(st, old.id), rk_state_node(st, nu.id)};
  int64_t mods[2] = {st->node_mod[recs[0] - st->nodes], st->node_mod[recs[1] - st->nodes]};
  nu.weight = old.weight;
  old.desired = RK_WANT_REMOVED;
  char keys[2][RK_KEY_MAX], *vals[2] = {NULL, NULL};
  size_t lens[2] = {0, 0};
  ring_cmp cmps[2];
  ring_op ops[2];
  const rk_node *edited[2] = {&old, &nu};
  int rc = RINGCTL_EXIT_OK;
  for (int i = 0; i < 2 && rc == RINGCTL_EXIT_OK; i++) {
    if (rk_key2(keys[i], ctx->cluster, "nodes/", edited[i]->id) < 0 ||
        rk_node_encode(edited[i], &vals[i], &lens[i]) != RING_OK)
      rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "encoding node %s failed", edited[i]->id);
    cmps[i] = (ring_cmp){keys[i], strlen(keys[i]), RING_CMP_MOD, RING_CMP_EQ, mods[i], NULL, 0};
    ops[i] = (ring_op){RING_OP_PUT, keys[i], strlen(keys[i]), vals[i], lens[i], 0, false};
  }
  bool won = false;
  ringctl_audit(ctx, "node.replace", old.id, "by %s (weight %g, %s removed)", nu.id, old.weight,
                old.id);
  if (rc == RINGCTL_EXIT_OK)
    rc = ringctl_txn(ctx, cmps, 2, ops, 2, "writing the node records", &won);
  free(vals[0]);
  free(vals[1]);
  if (rc == RINGCTL_EXIT_OK && !won)
    rc = ringctl_say(ctx, RINGCTL_EXIT_CONFLICT,
                     "a node record changed meanwhile: nothing was written; run replace again");
  return rc;
}

static int report(const ringctl_ctx *ctx, const replace_args *r) {
  if (!ctx->a->globals->json) {
    printf("node %s replaces %s (weight %g): the coordinator proposes the plan that moves %s's "
           "%u token-replicas to %s (ringctl plan, then ringctl apply)\n",
           r->pos[1], r->pos[0], r->weight, r->pos[0], r->replicas, r->pos[1]);
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "old", r->pos[0]);
  cJSON_AddStringToObject(o, "new", r->pos[1]);
  cJSON_AddNumberToObject(o, "replicas", r->replicas);
  cJSON_AddNumberToObject(o, "weight", r->weight);
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  replace_args *r = ud;
  rk_state st;
  ring_table *t = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_NODES | RK_READ_PLANS, &st, &t);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  const rk_node *old = rk_state_node(&st, r->pos[0]), *nu = rk_state_node(&st, r->pos[1]);
  rc = check(ctx, &st, t, r->pos, old, nu);
  if (rc == RINGCTL_EXIT_OK) {
    r->replicas = ringctl_node_holds(t, old->id); /* no run: nothing pending */
    r->weight = old->weight;
    rc = write_both(ctx, &st, *old, *nu);
  }
  ring_table_free(t);
  rk_state_free(&st);
  return rc == RINGCTL_EXIT_OK ? report(ctx, r) : rc;
}

int ringctl_cmd_replace(ringctl_args *a) {
  replace_args r = {{NULL, NULL}, 0, 0};
  bool help_shown = false;
  int rc = ringctl_node_args(a, help, r.pos, 2, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (!ring_id_valid(r.pos[1]))
    return ringctl_usage_error(a, "\"%s\" is not a node id ([a-z0-9._-]{1,63})", r.pos[1]);
  if (strcmp(r.pos[0], r.pos[1]) == 0)
    return ringctl_usage_error(a, "a node cannot replace itself");
  return ringctl_with_etcd(a, run, &r);
}

const ringctl_command ringctl_command_replace = {
    "replace", ringctl_cmd_replace, "a new node takes an old one's token-replicas one for one",
    NULL, help};
