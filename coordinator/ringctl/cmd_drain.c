/*
 * cmd_drain.c: `ringctl drain ID` and `ringctl undrain ID`: set a node's
 * desired state in nodes/<id>; the coordinator proposes the plan that
 * moves its replicas off (or gives it its share back).
 *
 * Usage: ringctl drain ID | ringctl undrain ID
 *
 * Both are compare-and-swaps on nodes/<id> (ringctl_node_cas), so a record
 * the coordinator rewrites meanwhile is re-read and edited again, never
 * overwritten with old fields.
 */
#include "ringctl_etcd.h"

#include <stdio.h>

typedef struct desire_args {
  const char *id;
  rk_desired want;
} desire_args;

static int set_desired(ringctl_ctx *ctx, rk_node *n, void *ud) {
  (void)ctx;
  n->desired = ((const desire_args *)ud)->want;
  return RINGCTL_EXIT_OK;
}

static int run(ringctl_ctx *ctx, void *ud) {
  const desire_args *d = ud;
  ringctl_audit(ctx, d->want == RK_WANT_DRAINED ? "node.drain" : "node.undrain", d->id,
                "desired %s", rk_desired_name(d->want));
  int rc = ringctl_node_cas(ctx, d->id, set_desired, ud);
  if (rc == RINGCTL_EXIT_OK)
    printf("node %s: desired state %s (the coordinator proposes the plan: ringctl plan)\n", d->id,
           rk_desired_name(d->want));
  return rc;
}

/* Runs `drain ID` / `undrain ID`: desired becomes want. */
static int desire(ringctl_args *a, const char *help, rk_desired want) {
  desire_args d = {NULL, want};
  bool help_shown = false;
  int rc = ringctl_node_args(a, help, &d.id, 1, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &d);
}

int ringctl_cmd_drain(ringctl_args *a) {
  static const char help[] =
      "Usage: ringctl drain ID\n\n"
      "Asks for node ID to own nothing: the coordinator proposes a plan that moves every\n"
      "replica off it. The node stays a member (ringctl undrain brings it back).\n";
  return desire(a, help, RK_WANT_DRAINED);
}

int ringctl_cmd_undrain(ringctl_args *a) {
  static const char help[] = "Usage: ringctl undrain ID\n\n"
                             "Lets a drained node ID take its weighted share again.\n";
  return desire(a, help, RK_WANT_ACTIVE);
}
