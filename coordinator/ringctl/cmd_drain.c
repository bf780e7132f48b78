/*
 * cmd_drain.c: `ringctl drain ID` and `ringctl undrain ID`: set a node's
 * desired state in nodes/<id>; the coordinator proposes the plan that
 * moves its replicas off (or gives it its share back).
 *
 * Usage: ringctl drain ID [--force] | ringctl undrain ID [--json]
 *
 * Draining the only node of a failure domain (no other node of its domain
 * value that is not down, removed or drained) is refused unless --force
 * when it leaves fewer domains than R: the planner refuses every plan then.
 * The only node of one of more than R domains drains as asked (taking a
 * host out of a zone that others cover is an ordinary decommission).
 *
 * Both are compare-and-swaps on nodes/<id> (ringctl_node_cas), so a record
 * the coordinator rewrites meanwhile is re-read and edited again, never
 * overwritten with old fields.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <string.h>

typedef struct desire_args {
  const char *id;
  rk_desired want;
  rk_desired was; /* out: the desired state before */
  bool force;     /* --force (drain) */
} desire_args;

enum { OPT_FORCE };
static const ringctl_opt drain_opts[] = {{"force", OPT_FORCE, false}, {NULL, 0, false}};

/* Whether n serves its domain value: it keeps its replicas. */
static bool serves(const rk_node *n) {
  return n->state != RING_NODE_DOWN && n->state != RING_NODE_REMOVED &&
         n->desired == RK_WANT_ACTIVE;
}

/* The domain values that keep serving if `id` drains, counted into *left;
 * whether id's own value keeps one. */
static bool domain_kept(const rk_state *st, const char *id, const char *level, uint32_t *left) {
  const rk_node *me = rk_state_node(st, id);
  const char *mine = me != NULL ? rk_labels_get(&me->labels, level) : NULL;
  bool kept = mine == NULL;
  *left = 0;
  for (uint32_t i = 0; i < st->n_nodes; i++) {
    const rk_node *n = &st->nodes[i];
    const char *v = rk_labels_get(&n->labels, level);
    if (strcmp(n->id, id) == 0 || !serves(n) || v == NULL)
      continue;
    kept = kept || strcmp(v, mine) == 0;
    bool first = true; /* counted once per value: at its first serving node */
    for (uint32_t k = 0; k < i && first; k++) {
      const char *w = rk_labels_get(&st->nodes[k].labels, level);
      first = !(serves(&st->nodes[k]) && strcmp(st->nodes[k].id, id) != 0 && w != NULL &&
                strcmp(w, v) == 0);
    }
    *left += first;
  }
  return kept;
}

/* Refuses (exit 1, saying why) a drain that empties a failure domain and
 * leaves fewer than R, unless --force. */
static int footgun(ringctl_ctx *ctx, const desire_args *d) {
  rk_state st;
  ring_error err = {RING_OK, ""};
  int rc = rk_state_read(ctx->etcd, ctx->cluster, RK_READ_CONFIG | RK_READ_NODES, &st, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading the nodes");
  const char *level = st.has_config ? st.config.failure_domain : "";
  uint32_t left = 0;
  rc = RINGCTL_EXIT_OK;
  if (level[0] != '\0' && rk_state_node(&st, d->id) != NULL &&
      !domain_kept(&st, d->id, level, &left) && left < st.config.replicas)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                     "drain %s: refused: it is the only node of its %s; draining it leaves %u "
                     "%s values for %u replicas, and every plan is refused (--force overrides)",
                     d->id, level, left, level, st.config.replicas);
  rk_state_free(&st);
  return rc;
}

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
  int refused = d->want == RK_WANT_DRAINED && !d->force ? footgun(ctx, d) : RINGCTL_EXIT_OK;
  if (refused != RINGCTL_EXIT_OK)
    return refused;
  ringctl_audit(ctx, d->want == RK_WANT_DRAINED ? "node.drain" : "node.undrain", d->id,
                "desired %s", rk_desired_name(d->want));
  int rc = ringctl_node_cas(ctx, d->id, set_desired, ud);
  return rc == RINGCTL_EXIT_OK ? report(ctx, d) : rc;
}

static int take(const ringctl_args *a, int id, const char *value, void *ud) {
  desire_args *d = ud;
  if (id == OPT_FORCE)
    return d->force = true, RINGCTL_EXIT_OK;
  if (d->id != NULL)
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  d->id = value;
  return ring_id_valid(value)
             ? RINGCTL_EXIT_OK
             : ringctl_usage_error(a, "\"%s\" is not a node id ([a-z0-9._-]{1,63})", value);
}

/* Runs `drain ID` / `undrain ID`: desired becomes want. */
static int desire(ringctl_args *a, const char *help, rk_desired want) {
  desire_args d = {NULL, want, want, false};
  bool help_shown = false;
  int rc =
      ringctl_parse(a, want == RK_WANT_DRAINED ? drain_opts : NULL, help, take, &d, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (d.id == NULL)
    return ringctl_usage_error(a, "missing node ID");
  return ringctl_with_etcd(a, run, &d);
}

static const char help_drain[] =
    "Usage: ringctl drain ID [--force] [--json]\n\n"
    "Asks for node ID to own nothing: the coordinator proposes a plan that moves every\n"
    "replica off it. The node stays a member (ringctl undrain brings it back); once it\n"
    "owns nothing, status shows it drained. Draining the only node of a failure domain\n"
    "is refused when that leaves fewer domains than R (every plan would be refused).\n"
    "  --force  drain it all the same\n"
    "  --json  {\"node\",\"desired\",\"was\",\"changed\"}\n";

static const char help_undrain[] = "Usage: ringctl undrain ID [--json]\n\n"
                                   "Lets a drained node ID take its weighted share again.\n"
                                   "  --json  {\"node\",\"desired\",\"was\",\"changed\"}\n";

int ringctl_cmd_drain(ringctl_args *a) { return desire(a, help_drain, RK_WANT_DRAINED); }

int ringctl_cmd_undrain(ringctl_args *a) { return desire(a, help_undrain, RK_WANT_ACTIVE); }

const ringctl_command ringctl_command_drain = {
    "drain", ringctl_cmd_drain, "move every replica off a node", drain_opts, help_drain};
const ringctl_command ringctl_command_undrain = {
    "undrain", ringctl_cmd_undrain, "let a drained node take its share again", NULL, help_undrain};
