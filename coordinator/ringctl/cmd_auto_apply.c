/*
 * cmd_auto_apply.c: `ringctl auto-apply [none|repair|all] [--json]`: shows
 * or changes which proposed plans the coordinator approves itself
 * (proto/etcd.md, config.auto_apply).
 *
 * repair (init's default) lets a plan run without a human only when every
 * move takes a replica off a down node and can stream it from a live one:
 * re-replication after a failure. Joins, drains and weight changes, and
 * any plan that would lose data, wait for `ringctl apply`.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

static const char help[] =
    "Usage: ringctl auto-apply [none|repair|all] [--json]\n"
    "\n"
    "Without an argument, prints the policy. With one, changes it in the cluster's\n"
    "config; the coordinator applies it at its next step.\n"
    "  none    every plan waits for `ringctl apply`\n"
    "  repair  re-replicating a down node's tokens runs by itself when nothing\n"
    "          would be lost; every other plan waits (the default)\n"
    "  all     every plan without violations runs by itself\n";

static const ringctl_opt no_opts[] = {{NULL, 0, false}};

typedef struct policy_arg {
  bool given;
  rk_auto_apply policy;
} policy_arg;

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  policy_arg *p = ud;
  if (id != RINGCTL_ARG_POSITIONAL)
    return ringctl_usage_error(a, "unexpected option");
  if (p->given)
    return ringctl_usage_error(a, "one policy at most (got \"%s\" too)", value);
  p->given = true;
  return ringctl_auto_apply_opt(a, value, &p->policy);
}

static int show(ringctl_ctx *ctx) {
  rk_state st;
  int rc = ringctl_read_state(ctx, RK_READ_CONFIG, &st);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  const char *name = rk_auto_apply_name(st.config.auto_apply);
  rk_state_free(&st);
  if (!ctx->a->globals->json) {
    printf("auto-apply: %s\n", name);
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "auto_apply", name);
  return ringctl_json_emit(o);
}

static void change(const ringctl_args *a, rk_config *config, const void *ud) {
  (void)a;
  config->auto_apply = ((const policy_arg *)ud)->policy;
}

static int run(ringctl_ctx *ctx, void *ud) {
  const policy_arg *p = ud;
  if (p->given)
    ringctl_audit(ctx, "config.auto_apply", NULL, "auto-apply %s", rk_auto_apply_name(p->policy));
  int rc = p->given ? ringctl_config_cas(ctx, change, p) : RINGCTL_EXIT_OK;
  return rc == RINGCTL_EXIT_OK ? show(ctx) : rc;
}

int ringctl_cmd_auto_apply(ringctl_args *a) {
  policy_arg p = {false, RK_AUTO_NONE};
  bool help_shown = false;
  int rc = ringctl_parse(a, no_opts, help, apply, &p, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &p);
}

const ringctl_command ringctl_command_auto_apply = {
    "auto-apply", ringctl_cmd_auto_apply,
    "show or change which plans run without apply: none, repair or all", no_opts, help};
