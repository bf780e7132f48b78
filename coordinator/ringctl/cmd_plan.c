/*
 * cmd_plan.c: `ringctl plan`: the proposed plan, readable or as JSON;
 * -o saves it with its moves for `ringctl apply FILE`; --what-if plans
 * offline (cmd_whatif.c).
 *
 * Usage: ringctl plan [-o FILE] [--what-if SPEC]... [--balance WHAT] [--json]
 *
 * plan/proposed holds the planner's input and a digest, not the moves: they
 * are recomputed here from tables/<base_version> and checked against the
 * digest (proto/plan.md), so what is shown is exactly what would run.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <stdlib.h>

#define WHAT_IFS_MAX 16

enum { OPT_OUTPUT, OPT_WHAT_IF, OPT_BALANCE };

static const ringctl_opt plan_opts[] = {
    {"o", OPT_OUTPUT, true},
    {"output", OPT_OUTPUT, true},
    {"what-if", OPT_WHAT_IF, true},
    {"balance", OPT_BALANCE, true},
    {NULL, 0, false},
};

static const char help[] =
    "Usage: ringctl plan [-o FILE] [--what-if SPEC]... [--balance WHAT] [--json]\n"
    "\n"
    "Shows the plan the coordinator proposes for the current membership: moves in\n"
    "and out per node, waves, bytes and time at the throttle's byte rate, balance\n"
    "before and after, moves against the lower bound, and any violations.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE  also save the plan with its moves, base version and digest\n"
    "                     (approve it later with ringctl apply FILE)\n"
    "  --what-if SPEC     plan offline from the live state with a change; nothing is\n"
    "                     written to the cluster. SPEC is one of\n"
    "                       add=ID,zone=Z[,rack=R][,weight=W]  a new node\n"
    "                       remove=ID                         a node leaves\n"
    "                       fail=zone:Z                       every node of zone Z is\n"
    "                                                         down; lists the tokens\n"
    "                                                         that lose replicas\n"
    "                     Repeat it to combine changes.\n"
    "  --balance WHAT     plan offline by tokens or by bytes held (the hosts' reported\n"
    "                     sizes; refused while any token's size is unknown), whatever\n"
    "                     the config says; with no --what-if, a rebalance of the live\n"
    "                     membership (save it with -o, run it with ringctl apply FILE)\n"
    "  --json             {\"id\",\"base_version\",\"moves_total\",\"lower_bound\",\"waves\",\n"
    "                     \"moves\":[...],\"violations\":[...]}; {\"id\":null} when none\n";

typedef struct plan_settings {
  const char *output;
  ringctl_whatif what_if[WHAT_IFS_MAX];
  uint32_t n_what_if;
  bool has_balance;
  ring_balance balance;
} plan_settings;

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  plan_settings *s = ud;
  if (id == OPT_OUTPUT) {
    s->output = value;
    return RINGCTL_EXIT_OK;
  }
  if (id == OPT_BALANCE) {
    s->has_balance = true;
    return ringctl_balance_opt(a, value, &s->balance);
  }
  if (id == OPT_WHAT_IF && s->n_what_if < WHAT_IFS_MAX)
    return ringctl_whatif_parse(a, value, &s->what_if[s->n_what_if++]);
  if (id == OPT_WHAT_IF)
    return ringctl_usage_error(a, "at most %d --what-if changes", WHAT_IFS_MAX);
  return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
}

static int nothing_proposed(const ringctl_ctx *ctx, const plan_settings *s) {
  if (s->output != NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "no plan is proposed: nothing to save");
  if (ctx->a->globals->json)
    return ringctl_json_emit(cJSON_Parse("{\"id\":null}"));
  puts("no plan proposed: the table matches the desired membership");
  return RINGCTL_EXIT_OK;
}

/* Shows (and saves) the proposed plan of st. */
static int show_proposed(ringctl_ctx *ctx, const rk_state *st, const ring_table *live,
                         const plan_settings *s) {
  ring_plan *plan = NULL;
  uint64_t *arc = NULL;
  uint32_t known = 0;
  int rc = ringctl_plan_compute(ctx, &st->proposed, &plan);
  if (rc == RINGCTL_EXIT_OK && rk_arc_bytes(st, live, &arc, &known) != RING_OK)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  if (rc == RINGCTL_EXIT_OK)
    rc = ringctl_plan_show(ctx, &st->proposed, plan, &st->config, arc);
  if (rc == RINGCTL_EXIT_OK && !ctx->a->globals->json)
    ringctl_sizes_partial(stdout, live, known);
  free(arc);
  if (rc == RINGCTL_EXIT_OK && !ctx->a->globals->json && st->proposed.base_version != st->version)
    printf("\nstale: the cluster is at version %llu; the coordinator will propose anew\n",
           (unsigned long long)st->version);
  if (rc == RINGCTL_EXIT_OK && s->output != NULL)
    rc = ringctl_plan_save(ctx, &st->proposed, plan, s->output);
  ring_plan_free(plan);
  return rc;
}

static int run(ringctl_ctx *ctx, void *ud) {
  const plan_settings *s = ud;
  if (s->n_what_if > 0 || s->has_balance)
    return ringctl_plan_whatif(ctx, s->what_if, s->n_what_if, s->has_balance ? &s->balance : NULL,
                               s->output);
  rk_state st;
  ring_table *live = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_CONFIG | RK_READ_PLANS | RK_READ_SIZES, &st, &live);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rc = st.has_proposed ? show_proposed(ctx, &st, live, s) : nothing_proposed(ctx, s);
  ring_table_free(live);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_plan(ringctl_args *a) {
  plan_settings s = {.output = NULL, .n_what_if = 0, .has_balance = false};
  bool help_shown = false;
  int rc = ringctl_parse(a, plan_opts, help, apply, &s, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &s);
}

const ringctl_command ringctl_command_plan = {
    "plan", ringctl_cmd_plan, "show the proposed plan, save it (-o), or plan a what-if", plan_opts,
    help};
