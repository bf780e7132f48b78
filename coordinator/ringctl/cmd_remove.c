/*
 * cmd_remove.c: `ringctl remove ID [--json]`: forgets a drained or down
 * node that owns nothing. Its record's desired state becomes `removed`;
 * the coordinator then publishes a table without it (a plan that moves
 * nothing, which the repair policy approves by itself) and marks the
 * record `removed`, which `status` leaves out.
 *
 * Refused (exit 1, naming why) while the node could still hold the only
 * copy of something: when it is active, joining or draining with replicas
 * left, or owns or is about to own any token-replica of the live table.
 * The check is repeated on the record inside the compare-and-swap, so a
 * node that comes back meanwhile is not removed.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>

static const char help[] =
    "Usage: ringctl remove ID [--json]\n\n"
    "Forgets node ID: it must be drained (ringctl drain ID, and its plan done) or\n"
    "down, and own nothing in the live table. The coordinator publishes a table\n"
    "without it; `ringctl members` still lists its record as removed.\n";

typedef struct remove_args {
  const char *id;
  ring_node_state state; /* out: the record's state when removed */
} remove_args;

/* Drained or down: nothing new will be placed on it. */
static int removable(const ringctl_ctx *ctx, const rk_node *n) {
  if (n->state == RING_NODE_DOWN || n->desired == RK_WANT_DRAINED)
    return RINGCTL_EXIT_OK;
  return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                     "node %s is %s: drain it first (ringctl drain %s) or wait until it is down",
                     n->id, ring_node_state_name(n->state), n->id);
}

static int mark_removed(ringctl_ctx *ctx, rk_node *n, void *ud) {
  remove_args *r = ud;
  int rc = removable(ctx, n);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  ringctl_audit(ctx, "node.remove", n->id, "was %s, desired %s; owned nothing",
                ring_node_state_name(n->state), rk_desired_name(n->desired));
  r->state = n->state;
  n->desired = RK_WANT_REMOVED;
  return RINGCTL_EXIT_OK;
}

static int report(const ringctl_ctx *ctx, const remove_args *r, bool already) {
  if (!ctx->a->globals->json) {
    printf(already ? "node %s is already removed\n"
                   : "node %s: removed (the coordinator publishes a table without it)\n",
           r->id);
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "node", r->id);
  cJSON_AddStringToObject(o, "desired", "removed");
  cJSON_AddStringToObject(o, "state", ring_node_state_name(r->state));
  cJSON_AddBoolToObject(o, "changed", !already);
  return ringctl_json_emit(o);
}

/* Whether rec (NULL: no record) may be removed now, against table t. */
static int check(ringctl_ctx *ctx, const char *id, const rk_node *rec, const ring_table *t) {
  if (rec == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "unknown node %s", id);
  if (rec->desired == RK_WANT_REMOVED)
    return RINGCTL_EXIT_OK;
  int rc = removable(ctx, rec);
  uint32_t n = ringctl_node_holds(t, id);
  if (rc == RINGCTL_EXIT_OK && n > 0)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                     "node %s still owns %u token-replicas in version %llu: drain it and let "
                     "the plan finish first",
                     id, n, (unsigned long long)ring_table_version(t));
  return rc;
}

static int run(ringctl_ctx *ctx, void *ud) {
  remove_args *r = ud;
  rk_state st;
  ring_table *t = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_NODES, &st, &t);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  const rk_node *rec = rk_state_node(&st, r->id);
  rc = check(ctx, r->id, rec, t);
  bool already = rc == RINGCTL_EXIT_OK && rec->desired == RK_WANT_REMOVED;
  if (already)
    r->state = rec->state;
  ring_table_free(t);
  rk_state_free(&st);
  if (rc == RINGCTL_EXIT_OK && !already)
    rc = ringctl_node_cas(ctx, r->id, mark_removed, r);
  return rc == RINGCTL_EXIT_OK ? report(ctx, r, already) : rc;
}

int ringctl_cmd_remove(ringctl_args *a) {
  remove_args r = {NULL, RING_NODE_REMOVED};
  bool help_shown = false;
  int rc = ringctl_node_args(a, help, &r.id, 1, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &r);
}

const ringctl_command ringctl_command_remove = {
    "remove", ringctl_cmd_remove, "forget a drained or down node that owns nothing", NULL, help};
