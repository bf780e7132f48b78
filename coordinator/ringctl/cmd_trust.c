/*
 * cmd_trust.c: `ringctl trust ID`: approves the arc signing key node ID's
 * agent publishes now (alive/<id>) as its pinned key (nodes/<id>), as SSH's
 * known hosts takes a changed host key only on the operator's word.
 *
 * Usage: ringctl trust ID [--json]
 *
 * Also pins the next key the agent publishes (`next-key-file`, a rotation):
 * peers then accept both, the agent restarts signing with the next key, and
 * the coordinator makes it the pinned key on its own (proto/etcd.md).
 * The coordinator pins a node's key at its first join and never changes
 * it: an agent restarted with another key (a new disk, a rebuilt host, or
 * a host speaking as another) is refused by its peers and reported
 * (ring_coordinator_key_refused_nodes, /healthz, ringctl status) until
 * this command pins its new key. A compare-and-swap on nodes/<id>
 * (ringctl_node_cas), journaled (node.key).
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <string.h>

static const char help[] =
    "Usage: ringctl trust ID [--json]\n\n"
    "Pins the arc signing key node ID's agent publishes in alive/ID as the key its\n"
    "peers check its signatures with (nodes/ID). The coordinator pins a node's first\n"
    "key and reports a changed one (ringctl status: \"untrusted keys\") until this\n"
    "approves it. Check first that the change is yours: a rebuilt host, a new key file.\n"
    "A rotation: start the agent with --next-key-file NEW, trust it (both keys are then\n"
    "pinned), restart it with --key-file NEW; the coordinator drops the old key.\n"
    "  --json  {\"node\",\"key\",\"next_key\",\"was\",\"changed\"}\n";

typedef struct trust_args {
  const char *pos[1];            /* ID */
  char key[RK_KEY_HEX + 1];      /* alive/<id>'s key */
  char next_key[RK_KEY_HEX + 1]; /* alive/<id>'s next key ("" none) */
  char old[RK_KEY_HEX + 1];      /* out: the key pinned before */
  bool changed;                  /* out */
} trust_args;

static int pin(ringctl_ctx *ctx, rk_node *n, void *ud) {
  trust_args *t = ud;
  ringctl_audit(ctx, "node.key", n->id, "key %.16s -> %.16s, next %.16s -> %.16s",
                n->key[0] ? n->key : "(none)", t->key, n->next_key[0] ? n->next_key : "(none)",
                t->next_key[0] ? t->next_key : "(none)");
  memcpy(t->old, n->key, sizeof t->old);
  t->changed = strcmp(n->key, t->key) != 0 || strcmp(n->next_key, t->next_key) != 0;
  memcpy(n->key, t->key, sizeof n->key);
  memcpy(n->next_key, t->next_key, sizeof n->next_key);
  return RINGCTL_EXIT_OK;
}

/* The key alive/<id> publishes, into t->key. */
static int alive_key(ringctl_ctx *ctx, trust_args *t) {
  char what[RING_ID_MAX + 8], key[RK_KEY_MAX], missing[RING_ID_MAX + 48];
  snprintf(what, sizeof what, "alive/%s", t->pos[0]);
  ringctl_key(ctx, what, key);
  snprintf(missing, sizeof missing, "node %s is not alive: no key to trust", t->pos[0]);
  ring_kv kv;
  int rc = ringctl_get_required(ctx, key, &kv, missing);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rk_alive a;
  ring_error err = {RING_OK, ""};
  int drc = rk_alive_decode((const char *)kv.value, kv.value_len, &a, &err);
  ring_kv_clear(&kv);
  if (drc != RING_OK)
    return ringctl_fail(ctx, drc, &err, key);
  if (a.key[0] == '\0')
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "node %s publishes no key (an older agent?)",
                       t->pos[0]);
  memcpy(t->key, a.key, sizeof t->key);
  memcpy(t->next_key, a.next_key, sizeof t->next_key);
  return RINGCTL_EXIT_OK;
}

static int report(const ringctl_ctx *ctx, const trust_args *t) {
  if (!ctx->a->globals->json) {
    printf("node %s: key %.16s...%s%.16s%s %s\n", t->pos[0], t->key,
           t->next_key[0] ? ", next key " : "", t->next_key, t->next_key[0] ? "..." : "",
           t->changed ? "pinned: its peers accept it now" : "were pinned already");
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "node", t->pos[0]);
  cJSON_AddStringToObject(o, "key", t->key);
  cJSON_AddStringToObject(o, "next_key", t->next_key);
  cJSON_AddStringToObject(o, "was", t->old);
  cJSON_AddBoolToObject(o, "changed", t->changed);
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  trust_args *t = ud;
  int rc = alive_key(ctx, t);
  if (rc == RINGCTL_EXIT_OK)
    rc = ringctl_node_cas(ctx, t->pos[0], pin, t);
  return rc == RINGCTL_EXIT_OK ? report(ctx, t) : rc;
}

int ringctl_cmd_trust(ringctl_args *a) {
  trust_args t = {{NULL}, "", "", "", false};
  bool help_shown = false;
  int rc = ringctl_node_args(a, help, t.pos, 1, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &t);
}

const ringctl_command ringctl_command_trust = {
    "trust", ringctl_cmd_trust, "pin the arc signing key a node publishes now", NULL, help};
