/*
 * cmd_label.c: `ringctl label ID KEY=VALUE... KEY-... [--json]`: sets or
 * removes labels in nodes/<id>. The record is the authority on labels (as
 * on weight): a host restarted with other --label flags does not change
 * it, and `ringctl status` and `verify` name such a host with both values
 * until this command settles it. When a failure-domain label changes, the
 * coordinator proposes the plan that restores the domain rules.
 *
 * A compare-and-swap on nodes/<id> (ringctl_node_cas): a record rewritten
 * meanwhile is edited again, never overwritten with old fields.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <string.h>

static const char help[] =
    "Usage: ringctl label ID KEY=VALUE... [KEY-...] [--force] [--json]\n\n"
    "Sets (KEY=VALUE) or removes (KEY-) labels of node ID's record. Keys match\n"
    "[a-z0-9._-]{1,63}, values [A-Za-z0-9._:-]{1,63}; at most 16 labels.\n"
    "When a failure-domain label changes, the coordinator proposes the plan that\n"
    "moves replicas to keep the domain rules (ringctl plan).\n"
    "Removing the failure-domain key (the config's failure_domain) is refused: every\n"
    "plan is refused while a node lacks it.\n"
    "  --force  remove it all the same\n";

enum { OPT_FORCE };
static const ringctl_opt label_opts[] = {{"force", OPT_FORCE, false}, {NULL, 0, false}};

#define CHANGES_MAX 32

typedef struct label_args {
  const char *id;
  const char *change[CHANGES_MAX]; /* "k=v" or "k-" */
  uint32_t n;
  bool force;                   /* --force */
  char domain[RING_ID_MAX + 1]; /* the config's failure_domain; "" for none */
  rk_labels before, after;      /* out */
} label_args;

static int take(const ringctl_args *a, int id, const char *value, void *ud) {
  label_args *l = ud;
  if (id == OPT_FORCE) {
    l->force = true;
    return RINGCTL_EXIT_OK;
  }
  if (l->id == NULL) {
    l->id = value;
    return ring_id_valid(value)
               ? RINGCTL_EXIT_OK
               : ringctl_usage_error(a, "\"%s\" is not a node id ([a-z0-9._-]{1,63})", value);
  }
  if (l->n == CHANGES_MAX)
    return ringctl_usage_error(a, "more than %d label changes", CHANGES_MAX);
  size_t len = strlen(value);
  if (strchr(value, '=') == NULL && (len < 2 || value[len - 1] != '-'))
    return ringctl_usage_error(a, "\"%s\": want KEY=VALUE or KEY-", value);
  l->change[l->n++] = value;
  return RINGCTL_EXIT_OK;
}

/* Applies one change to labels; an invalid key or value is a usage error. */
static int apply_change(ringctl_ctx *ctx, rk_labels *labels, const char *change) {
  char key[RING_ID_MAX + 2] = "";
  const char *eq = strchr(change, '=');
  size_t klen = eq ? (size_t)(eq - change) : strlen(change) - 1;
  if (klen == 0 || klen > RING_ID_MAX)
    return ringctl_say(ctx, RINGCTL_EXIT_USAGE, "\"%s\": bad label key", change);
  memcpy(key, change, klen);
  key[klen] = '\0';
  if (eq == NULL) {
    rk_labels_del(labels, key); /* removing an absent label changes nothing */
    return RINGCTL_EXIT_OK;
  }
  ring_error err = {RING_OK, ""};
  if (rk_labels_set(labels, key, eq + 1, &err) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_USAGE, "%s", err.message);
  return RINGCTL_EXIT_OK;
}

static int relabel(ringctl_ctx *ctx, rk_node *n, void *ud) {
  label_args *l = ud;
  l->before = n->labels;
  for (uint32_t i = 0; i < l->n; i++) {
    int rc = apply_change(ctx, &n->labels, l->change[i]);
    if (rc != RINGCTL_EXIT_OK)
      return rc;
  }
  l->after = n->labels;
  if (l->domain[0] != '\0' && !l->force && rk_labels_get(&l->before, l->domain) != NULL &&
      rk_labels_get(&l->after, l->domain) == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "label %s %s-: refused: %s is the failure domain; without it every plan is "
                       "refused (--force overrides)",
                       n->id, l->domain, l->domain);
  char was[RK_EVENT_DETAIL_MAX / 2], now[RK_EVENT_DETAIL_MAX / 2];
  ringctl_labels(&l->before, was, sizeof was);
  ringctl_labels(&l->after, now, sizeof now);
  ringctl_audit(ctx, "node.label", n->id, "labels %s -> %s", was, now);
  return RINGCTL_EXIT_OK;
}

static int run(ringctl_ctx *ctx, void *ud) {
  label_args *l = ud;
  rk_state st;
  ring_error err = {RING_OK, ""};
  int rc = rk_state_read(ctx->etcd, ctx->cluster, RK_READ_CONFIG, &st, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading the config");
  snprintf(l->domain, sizeof l->domain, "%s", st.has_config ? st.config.failure_domain : "");
  rk_state_free(&st);
  rc = ringctl_node_cas(ctx, l->id, relabel, l);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (ctx->a->globals->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "node", l->id);
    cJSON_AddItemToObject(o, "labels", ringctl_json_labels(&l->after));
    cJSON_AddItemToObject(o, "previous", ringctl_json_labels(&l->before));
    return ringctl_json_emit(o);
  }
  char was[512], now[512];
  ringctl_labels(&l->before, was, sizeof was);
  ringctl_labels(&l->after, now, sizeof now);
  printf("node %s: labels %s (were %s); if a domain changed the coordinator proposes the "
         "plan: ringctl plan\n",
         l->id, now, was);
  return RINGCTL_EXIT_OK;
}

int ringctl_cmd_label(ringctl_args *a) {
  label_args l = {.id = NULL, .n = 0};
  bool help_shown = false;
  int rc = ringctl_parse(a, label_opts, help, take, &l, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (l.id == NULL || l.n == 0)
    return ringctl_usage_error(a, l.id == NULL ? "missing node ID" : "missing KEY=VALUE");
  return ringctl_with_etcd(a, run, &l);
}

const ringctl_command ringctl_command_label = {
    "label", ringctl_cmd_label, "set or remove a node's labels (its failure domains)", label_opts,
    help};
