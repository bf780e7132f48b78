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

static const char *const names[] = {"none", "repair", "all"}; /* rk_auto_apply order */

static int get(const rk_config *c) { return (int)c->auto_apply; }
static void set(rk_config *c, int value) { c->auto_apply = (rk_auto_apply)value; }

int ringctl_cmd_auto_apply(ringctl_args *a) {
  static const ringctl_setting s = {help, "auto-apply", "auto_apply", "none, repair or all", names,
                                    3,    get,          set};
  return ringctl_setting_cmd(a, &s);
}

const ringctl_command ringctl_command_auto_apply = {
    "auto-apply", ringctl_cmd_auto_apply,
    "show or change which plans run without apply: none, repair or all", NULL, help};
