/*
 * ringctl_node_edit.c: editing one node record, for drain, undrain and
 * weight (ringctl_etcd.h): their arguments, and the compare-and-swap.
 *
 * Sections: arguments; the compare-and-swap.
 */
#include "ringctl_etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- arguments */

#define NODE_ARGS_MAX 4

typedef struct node_args {
  const char **pos;
  uint32_t want, got;
} node_args;

static int take_positional(const ringctl_args *a, int id, const char *value, void *ud) {
  node_args *n = ud;
  (void)id;
  if (n->got == n->want)
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  n->pos[n->got++] = value;
  return RINGCTL_EXIT_OK;
}

int ringctl_node_args(ringctl_args *a, const char *help, const char **pos, uint32_t n,
                      bool *help_shown) {
  node_args na = {pos, n, 0};
  int rc = ringctl_parse(a, NULL, help, take_positional, &na, help_shown);
  if (rc != RINGCTL_EXIT_OK || *help_shown)
    return rc;
  if (na.got < n)
    return ringctl_usage_error(a, na.got == 0 ? "missing node ID" : "missing argument");
  if (!ring_id_valid(pos[0]))
    return ringctl_usage_error(a, "\"%s\" is not a node id ([a-z0-9._-]{1,63})", pos[0]);
  return RINGCTL_EXIT_OK;
}

/* ------------------------------------------------------ the compare-and-swap */

typedef struct node_edit {
  ringctl_node_fn edit;
  void *ud;
} node_edit;

static int edit_record(ringctl_ctx *ctx, const ring_kv *kv, char **out, size_t *len, void *ud) {
  const node_edit *e = ud;
  rk_node n;
  ring_error err = {RING_OK, ""};
  int rc = rk_node_decode((const char *)kv->value, kv->value_len, &n, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, (const char *)kv->key);
  if ((rc = e->edit(ctx, &n, e->ud)) != RINGCTL_EXIT_OK)
    return rc;
  if (rk_node_encode(&n, out, len) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  return RINGCTL_EXIT_OK;
}

int ringctl_node_cas(ringctl_ctx *ctx, const char *id, ringctl_node_fn edit, void *ud) {
  char key[RK_KEY_MAX], missing[RING_ID_MAX + 16];
  if (rk_key2(key, ctx->cluster, "nodes/", id) < 0)
    return ringctl_say(ctx, RINGCTL_EXIT_USAGE, "bad node id %s", id);
  snprintf(missing, sizeof missing, "unknown node %s", id);
  node_edit e = {edit, ud};
  return ringctl_cas(ctx, key, missing, edit_record, &e);
}
