/*
 * cluster_health.c: what a cluster's state says is wrong, as reasons one
 * line each (cluster.h, "health"): the coordinator's /healthz is degraded
 * for each and `ringctl status` names each, from the same code, so an
 * operator never reads "ok" on one and a reason on the other.
 *
 * Each reason says what waits on whom: a token-replica below R names the
 * down nodes and what its repair waits for (policy none, an approval, a
 * refused plan), a refill under policy none says nothing refills, a
 * refused plan gives the planner's first reason. Stuck moves and missing
 * replicas have their own lines (coord_stuck.c, cluster_missing.c).
 */
#include "cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[RK_HEALTH_KINDS] = {"below_r", "plan_refused", "refill_waits",
                                                        "label_mismatch"};

const char *rk_health_kind_name(rk_health_kind k) {
  return (unsigned)k < RK_HEALTH_KINDS ? kind_names[k] : "unknown";
}

/* ------------------------------------------------------------ node checks */

const rk_labels *rk_label_mismatch(const rk_state *s, const rk_node *n) {
  const rk_alive_entry *a = rk_state_alive(s, n->id);
  if (a == NULL || !a->valid || n->state == RING_NODE_REMOVED ||
      rk_labels_equal(&a->a.labels, &n->labels))
    return NULL;
  return &a->a.labels;
}

bool rk_removed_alive(const rk_state *s, const rk_node *n) {
  return n->state == RING_NODE_REMOVED && n->desired == RK_WANT_REMOVED &&
         rk_state_alive(s, n->id) != NULL;
}

bool rk_node_drained(const rk_state *s, const ring_table *t, const rk_node *n) {
  if (n->state != RING_NODE_DRAINING || n->desired != RK_WANT_DRAINED || s->has_active || t == NULL)
    return false;
  int i = ring_table_find_node(t, n->id);
  if (i < 0)
    return true;
  if (ring_table_node_replicas(t, (uint16_t)i) != 0)
    return false;
  uint32_t token, slot;
  uint16_t node;
  for (uint32_t k = 0; k < ring_table_pending_count(t); k++)
    if (ring_table_pending_at(t, k, &token, &slot, &node) == RING_OK && node == (uint16_t)i)
      return false;
  return true;
}

const char *rk_node_state_shown(const rk_state *s, const ring_table *t, const rk_node *n) {
  return rk_node_drained(s, t, n) ? "drained" : ring_node_state_name(n->state);
}

int rk_down_replicas(const rk_state *s, const ring_table *t, uint64_t *held,
                     char first[RING_ID_MAX + 1]) {
  uint32_t n_nodes = ring_table_node_count(t);
  bool *down = calloc(n_nodes + 1, sizeof *down);
  if (down == NULL)
    return RING_ENOMEM;
  uint64_t count = 0;
  bool any = false; /* none down, the usual case: no pass over the tokens */
  for (uint32_t i = 0; i < n_nodes; i++) {
    const rk_node *n = rk_state_node(s, ring_table_node_id(t, (uint16_t)i));
    down[i] = n != NULL && n->state == RING_NODE_DOWN;
    any = any || down[i];
  }
  for (uint32_t tok = 0; any && tok < ring_table_tokens(t); tok++)
    for (uint32_t r = 0; r < ring_table_replicas(t); r++) {
      uint16_t o = ring_table_owner(t, tok, r);
      if (o < n_nodes && down[o] && count++ == 0 && first != NULL)
        snprintf(first, RING_ID_MAX + 1, "%s", ring_table_node_id(t, o));
    }
  free(down);
  *held = count;
  return RING_OK;
}

/* ---------------------------------------------------------------- reasons */

/* What the repair of down nodes' replicas waits for. */
static const char *repair_waits(const rk_state *s) {
  if (s->has_active)
    return "a run is active (the repair follows it)";
  if (s->has_proposed && s->proposed.n_violations > 0)
    return "every plan is refused (see the refused plan's reason)";
  if (s->has_config && s->config.auto_apply == RK_AUTO_NONE)
    return "repair waits for policy none (`ringctl apply` the proposed plan, or `ringctl "
           "auto-apply repair`)";
  if (s->has_proposed)
    return "the proposed plan waits for `ringctl apply`";
  return "the repair is being planned";
}

static int below_r(const rk_state *s, const ring_table *t, rk_health_view *v, char *why,
                   size_t cap) {
  uint64_t n = 0;
  char first[RING_ID_MAX + 1] = "";
  int rc = t != NULL ? rk_down_replicas(s, t, &n, first) : RING_OK;
  if (rc != RING_OK || n == 0)
    return rc;
  uint32_t down = 0;
  for (uint32_t i = 0; i < s->n_nodes; i++)
    down += s->nodes[i].state == RING_NODE_DOWN;
  char more[32] = "";
  if (down > 1)
    snprintf(more, sizeof more, " and %" PRIu32 " more", down - 1);
  v->count[RK_HEALTH_BELOW_R] = n;
  snprintf(why, cap, "%" PRIu64 " token-replicas below R (down: %s%s); %s", n, first, more,
           repair_waits(s));
  return RING_OK;
}

static void labels(const rk_state *s, rk_health_view *v, char *why, size_t cap) {
  const rk_node *first = NULL;
  for (uint32_t i = 0; i < s->n_nodes; i++)
    if (rk_label_mismatch(s, &s->nodes[i]) != NULL) {
      first = first != NULL ? first : &s->nodes[i];
      v->count[RK_HEALTH_LABELS]++;
    }
  if (first != NULL)
    snprintf(why, cap,
             "%" PRIu64 " nodes' labels differ from their record (%s): the planner uses the "
             "record's; settle with `ringctl label`",
             v->count[RK_HEALTH_LABELS], first->id);
}

int rk_health_make(const rk_state *s, const ring_table *t, uint64_t missing_replicas,
                   rk_health_view *out) {
  rk_health_view v;
  memset(&v, 0, sizeof v);
  int rc = below_r(s, t, &v, v.text[RK_HEALTH_BELOW_R], RK_HEALTH_TEXT);
  if (rc != RING_OK)
    return rc;
  if (s->has_proposed && s->proposed.n_violations > 0) {
    v.count[RK_HEALTH_REFUSED] = 1;
    snprintf(v.text[RK_HEALTH_REFUSED], RK_HEALTH_TEXT, "every plan is refused: %.300s",
             s->proposed.violations[0]);
  }
  if (missing_replicas > 0 && s->has_config && s->config.auto_apply == RK_AUTO_NONE) {
    v.count[RK_HEALTH_REFILL_WAITS] = missing_replicas;
    snprintf(v.text[RK_HEALTH_REFILL_WAITS], RK_HEALTH_TEXT,
             "%" PRIu64 " missing token-replicas are not refilled: the refill waits for policy "
             "none (`ringctl auto-apply repair`)",
             missing_replicas);
  }
  labels(s, &v, v.text[RK_HEALTH_LABELS], RK_HEALTH_TEXT);
  *out = v;
  return RING_OK;
}
