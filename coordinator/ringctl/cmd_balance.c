/*
 * cmd_balance.c: `ringctl balance [tokens|bytes] [--json]`: shows or
 * changes what the coordinator's plans balance (proto/etcd.md,
 * config.balance).
 *
 * tokens (the default): every node within one token-replica of its
 * weighted share. bytes: every node within 10% (never looser than the
 * largest arc) of its byte target, its weighted share of the bytes held
 * (ring.h, RING_BALANCE_TOLERANCE), from the sizes hosts report; a plan falls back
 * to tokens, saying so, while any token's size is unknown. Bytes drift as
 * data grows: the coordinator plans on membership changes only, and
 * `ringctl plan --balance bytes -o FILE` + `ringctl apply FILE` rebalances
 * for drift when the operator says so.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

static const char help[] =
    "Usage: ringctl balance [tokens|bytes] [--json]\n"
    "\n"
    "Without an argument, prints what plans balance. With one, changes it in the\n"
    "cluster's config; the coordinator's next plan follows it.\n"
    "  tokens  every node within one token-replica of its weighted share (default)\n"
    "  bytes   every node within 10% (or the largest arc, if less) of its weighted\n"
    "          share of the bytes held (sizes reported by the hosts); by tokens while\n"
    "          any is unknown\n"
    "Bytes drift as data grows; rebalance for drift with\n"
    "`ringctl plan --balance bytes -o FILE` and `ringctl apply FILE`.\n";

static int get(const rk_config *c) { return (int)c->balance; }
static void set(rk_config *c, int value) { c->balance = (ring_balance)value; }

int ringctl_cmd_balance(ringctl_args *a) {
  static const ringctl_setting s = {
      help, "balance", "balance", "tokens or bytes", ringctl_balance_names, 2, get, set};
  return ringctl_setting_cmd(a, &s);
}

const ringctl_command ringctl_command_balance = {
    "balance", ringctl_cmd_balance, "show or change what plans balance: tokens or bytes held", NULL,
    help};
