/*
 * cmd_wait.c: `ringctl wait [PLAN]`: re-attaches to a run started by
 * another ringctl or by auto-apply and follows it as `apply --wait` does.
 *
 * Usage: ringctl wait [PLAN] [--stuck-timeout DURATION]
 *
 * Without PLAN it follows the active run; with PLAN, that run, also when it
 * has already finished (its end is read from plan/history/). Following is
 * ringctl_wait_run's: it outlasts an etcd outage until --timeout (none by
 * default), and exit 4 says it could not tell how the run ended.
 */
#include "ringctl_etcd.h"

#include <stdio.h>
#include <string.h>

enum { OPT_STUCK_TIMEOUT };
static const ringctl_opt wait_opts[] = {{"stuck-timeout", OPT_STUCK_TIMEOUT, true},
                                        {NULL, 0, false}};

static const char help[] =
    "Usage: ringctl wait [PLAN] [--stuck-timeout DURATION]\n"
    "\n"
    "Follows a run until it ends, as apply --wait does: the active run, or plan PLAN\n"
    "(also one that has ended: its outcome is shown). For a run started by another\n"
    "ringctl, or by the coordinator under auto-apply, or after apply --wait ended.\n"
    "etcd going away meanwhile is waited out: --timeout bounds the command, with no\n"
    "bound unless given.\n"
    "\n"
    "Options:\n"
    "  --stuck-timeout DURATION\n"
    "          exit 1, showing the stuck and failing moves, when no move was done for\n"
    "          DURATION or the coordinator reports moves of the run stuck\n"
    "\n"
    "Exit status: 0 the run is done; 1 it failed, was cancelled or is stuck; 4 could\n"
    "not tell (etcd unreachable, or the run still going, at the end of --timeout).\n";

typedef struct wait_settings {
  const char *plan; /* NULL: the active run */
  uint64_t stuck_timeout_ms;
} wait_settings;

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  wait_settings *s = ud;
  if (id == OPT_STUCK_TIMEOUT)
    return ringctl_stuck_timeout_opt(a, value, &s->stuck_timeout_ms);
  if (s->plan != NULL)
    return ringctl_usage_error(a, "one plan at a time: \"%s\" after \"%s\"", value, s->plan);
  if (!ringctl_is_plan_id(value))
    return ringctl_usage_error(a, "\"%s\" is not a plan id (16 hex digits)", value);
  s->plan = value;
  return RINGCTL_EXIT_OK;
}

/* Whether plan/history/<id> holds a run. */
static int finished(ringctl_ctx *ctx, const char *id, bool *found) {
  char key[RK_KEY_MAX];
  ring_kv kv;
  if (rk_key2(key, ctx->cluster, "plan/history/", id) < 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "bad plan id %s", id);
  int rc = ringctl_get(ctx, key, &kv, found);
  if (rc == RINGCTL_EXIT_OK && *found)
    ring_kv_clear(&kv);
  return rc;
}

static int run(ringctl_ctx *ctx, void *ud) {
  const wait_settings *s = ud;
  rk_state st;
  int rc = ringctl_read_state(ctx, RK_READ_PLANS, &st);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  char id[RK_PLAN_ID_LEN + 1] = "";
  if (st.has_active && (s->plan == NULL || strcmp(st.active.plan.id, s->plan) == 0))
    snprintf(id, sizeof id, "%s", st.active.plan.id);
  rk_state_free(&st);
  bool found = id[0] != '\0';
  if (!found && s->plan != NULL && (rc = finished(ctx, s->plan, &found)) != RINGCTL_EXIT_OK)
    return rc;
  if (!found && s->plan == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "no plan is active: nothing to wait for "
                       "(ringctl history lists the runs that ended)");
  if (!found)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "plan %s is neither active nor in the history",
                       s->plan);
  return ringctl_wait_run(ctx, id[0] ? id : s->plan, s->stuck_timeout_ms, 0);
}

int ringctl_cmd_wait(ringctl_args *a) {
  wait_settings s = {NULL, 0};
  bool help_shown = false;
  int rc = ringctl_parse(a, wait_opts, help, apply, &s, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (a->globals->json)
    return ringctl_usage_error(a, "wait follows a run as text: ringctl status --json reads it");
  a->globals->until_done = true;
  return ringctl_with_etcd(a, run, &s);
}

const ringctl_command ringctl_command_wait = {
    "wait", ringctl_cmd_wait, "follow the active run (or PLAN) until it ends, as apply --wait",
    wait_opts, help};
