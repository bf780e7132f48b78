/*
 * cmd_drain.c: `ringctl drain ID` and `ringctl undrain ID`: set a node's
 * desired state in nodes/<id>; the coordinator proposes the plan that
 * moves its replicas off (or gives it its share back).
 *
 * Usage: ringctl drain ID | ringctl undrain ID [--json]
 *
 * Both are compare-and-swaps on nodes/<id> (ringctl_node_cas), so a record
 * the coordinator rewrites meanwhile is re-read and edited again, never
 * overwritten with old fields.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>

typedef struct desire_args {
  const char *id;
  rk_desired want;
  rk_desired was; /* out: the desired state before */
} desire_args;

static int set_desired(ringctl_ctx *ctx, rk_node *n, void *ud) {
  desire_args *d = ud;
  (void)ctx;
  d->was = n->desired;
  n->desired = d->want;
  return RINGCTL_EXIT_OK;
}

static int report(const ringctl_ctx *ctx, const desire_args *d) {
  if (!ctx->a->globals->json) {
    printf("node %s: desired state %s (the coordinator proposes the plan: ringctl plan)\n", d->id,
           rk_desired_name(d->want));
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "node", d->id);
  cJSON_AddStringToObject(o, "desired", rk_desired_name(d->want));
  cJSON_AddStringToObject(o, "was", rk_desired_name(d->was));
  cJSON_AddBoolToObject(o, "changed", d->was != d->want);
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  desire_args *d = ud;
  ringctl_audit(ctx, d->want == RK_WANT_DRAINED ? "node.drain" : "node.undrain", d->id,
                "desired %s", rk_desired_name(d->want));
  int rc = ringctl_node_cas(ctx, d->id, set_desired, ud);
  return rc == RINGCTL_EXIT_OK ? report(ctx, d) : rc;
}

/* Runs `drain ID` / `undrain ID`: desired becomes want. */
static int desire(ringctl_args *a, const char *help, rk_desired want) {
  desire_args d = {NULL, want, want};
  bool help_shown = false;
  int rc = ringctl_node_args(a, help, &d.id, 1, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &d);
}

static const char help_drain[] =
    "Usage: ringctl drain ID [--json]\n\n"
    "Asks for node ID to own nothing: the coordinator proposes a plan that moves every\n"
    "replica off it. The node stays a member (ringctl undrain brings it back).\n"
    "  --json  {\"node\",\"desired\",\"was\",\"changed\"}\n";

static const char help_undrain[] = "Usage: ringctl undrain ID [--json]\n\n"
                                   "Lets a drained node ID take its weighted share again.\n"
                                   "  --json  {\"node\",\"desired\",\"was\",\"changed\"}\n";

int ringctl_cmd_drain(ringctl_args *a) { return desire(a, help_drain, RK_WANT_DRAINED); }

int ringctl_cmd_undrain(ringctl_args *a) { return desire(a, help_undrain, RK_WANT_ACTIVE); }

const ringctl_command ringctl_command_drain = {"drain", ringctl_cmd_drain,
                                               "move every replica off a node", NULL, help_drain};
const ringctl_command ringctl_command_undrain = {
    "undrain", ringctl_cmd_undrain, "let a drained node take its share again", NULL, help_undrain};
