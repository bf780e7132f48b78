/*
 * cmd_weight.c: `ringctl weight ID W`: changes a node's weight (its
 * capacity) in nodes/<id>; the coordinator proposes the plan that moves
 * replicas to match.
 *
 * Usage: ringctl weight ID W [--json]
 *
 * A compare-and-swap on nodes/<id> (ringctl_node_cas). The record is the
 * authority on weight from then on: an agent restarted with another
 * --weight does not change it (proto/etcd.md).
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>

static const char help[] =
    "Usage: ringctl weight ID W [--json]\n\n"
    "Sets node ID's weight to W, a number in (0, 1000000]: its share of token-replicas\n"
    "is T*R*W/sum(weights). The coordinator proposes the plan that moves them.\n"
    "  --json  {\"node\",\"weight\",\"was\",\"changed\"}\n";

typedef struct weight_args {
  const char *pos[2]; /* ID, W */
  double weight;
  double old; /* out: the weight before */
} weight_args;

static int set_weight(ringctl_ctx *ctx, rk_node *n, void *ud) {
  weight_args *w = ud;
  ringctl_audit(ctx, "node.weight", n->id, "weight %g -> %g", n->weight, w->weight);
  w->old = n->weight;
  n->weight = w->weight;
  return RINGCTL_EXIT_OK;
}

static int report(const ringctl_ctx *ctx, const weight_args *w) {
  if (!ctx->a->globals->json) {
    printf("node %s: weight %g -> %g (the coordinator proposes the plan: ringctl plan)\n",
           w->pos[0], w->old, w->weight);
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "node", w->pos[0]);
  cJSON_AddNumberToObject(o, "weight", w->weight);
  cJSON_AddNumberToObject(o, "was", w->old);
  cJSON_AddBoolToObject(o, "changed", w->old != w->weight);
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  weight_args *w = ud;
  int rc = ringctl_node_cas(ctx, w->pos[0], set_weight, w);
  return rc == RINGCTL_EXIT_OK ? report(ctx, w) : rc;
}

int ringctl_cmd_weight(ringctl_args *a) {
  weight_args w = {{NULL, NULL}, 0, 0};
  bool help_shown = false;
  int rc = ringctl_node_args(a, help, w.pos, 2, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if ((rc = ringctl_parse_weight(a, "weight", w.pos[1], &w.weight)) != RINGCTL_EXIT_OK)
    return rc;
  return ringctl_with_etcd(a, run, &w);
}

const ringctl_command ringctl_command_weight = {"weight", ringctl_cmd_weight,
                                                "change a node's weight (capacity)", NULL, help};
