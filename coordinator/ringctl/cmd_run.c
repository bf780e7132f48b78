/*
 * cmd_run.c: `ringctl pause`, `resume` and `cancel`: change the active
 * run's state in plan/active; the coordinator acts on it at its next step.
 *
 * Usage: ringctl pause | resume | cancel [--json]
 *
 * Each is a compare-and-swap on plan/active's mod revision (the coordinator
 * rewrites it at every step, so a lost race is retried on the new value):
 * pause: active -> paused; resume: paused -> active; cancel: active or
 * paused -> cancelling. A run already in the wanted state is left alone.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <string.h>

/* One state change: what it goes to and what it may come from. */
typedef struct transition {
  rk_run_state to;
  rk_run_state from[2];
  uint32_t n_from;
  const char *verb;            /* for messages: "paused" */
  const char *what;            /* the journal's kind: "plan.pause" */
  char id[RK_PLAN_ID_LEN + 1]; /* out: the run's plan id */
  bool changed;                /* out: written (false: already there) */
} transition;

static bool may_leave(const transition *t, rk_run_state s) {
  for (uint32_t i = 0; i < t->n_from; i++)
    if (t->from[i] == s)
      return true;
  return false;
}

static int edit(ringctl_ctx *ctx, const ring_kv *kv, char **out, size_t *len, void *ud) {
  transition *t = ud;
  rk_run r;
  ring_error err = {RING_OK, ""};
  int rc = rk_run_decode((const char *)kv->value, kv->value_len, &r, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading plan/active");
  snprintf(t->id, sizeof t->id, "%s", r.plan.id);
  t->changed = r.state != t->to;
  if (t->changed && !may_leave(t, r.state))
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "plan %s is %s: it cannot be %s", r.plan.id,
                     rk_run_state_name(r.state), t->verb);
  else if (t->changed) {
    ringctl_audit(ctx, t->what, NULL, "plan %s: %s -> %s", r.plan.id, rk_run_state_name(r.state),
                  rk_run_state_name(t->to));
    r.state = t->to;
    r.updated_ms = ringctl_now_ms();
    rc = rk_run_encode(&r, out, len) == RING_OK
             ? RINGCTL_EXIT_OK
             : ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  }
  rk_run_free(&r);
  return rc;
}

#define JSON_HELP "  --json  {\"plan\",\"state\",\"changed\"}: the run's state now\n"

static int report(const ringctl_ctx *ctx, const transition *t) {
  if (!ctx->a->globals->json) {
    printf(t->changed ? "plan %s %s\n" : "plan %s is already %s\n", t->id,
           t->changed ? t->verb : rk_run_state_name(t->to));
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "plan", t->id);
  cJSON_AddStringToObject(o, "state", rk_run_state_name(t->to));
  cJSON_AddBoolToObject(o, "changed", t->changed);
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  transition *t = ud;
  char key[RK_KEY_MAX];
  ringctl_key(ctx, "plan/active", key);
  int rc = ringctl_cas(ctx, key, "no plan is active", edit, t);
  return rc == RINGCTL_EXIT_OK ? report(ctx, t) : rc;
}

static const char help_pause[] = "Usage: ringctl pause [--json]\n\n"
                                 "Pauses the active plan: moves in flight complete, no new ones "
                                 "start.\n" JSON_HELP;

static const char help_resume[] =
    "Usage: ringctl resume [--json]\n\nResumes a paused plan.\n" JSON_HELP;

static const char help_cancel[] =
    "Usage: ringctl cancel [--json]\n\n"
    "Cancels the active or paused plan: moves in flight are dropped (their owners\n"
    "never changed), moves done stay done, and the coordinator proposes anew.\n" JSON_HELP;

int ringctl_cmd_pause(ringctl_args *a) {
  transition t = {RK_RUN_PAUSED, {RK_RUN_ACTIVE}, 1, "paused", "plan.pause", "", false};
  return ringctl_run_plain(a, help_pause, run, &t);
}

int ringctl_cmd_resume(ringctl_args *a) {
  transition t = {RK_RUN_ACTIVE, {RK_RUN_PAUSED}, 1, "resumed", "plan.resume", "", false};
  return ringctl_run_plain(a, help_resume, run, &t);
}

int ringctl_cmd_cancel(ringctl_args *a) {
  transition t = {
      RK_RUN_CANCELLING, {RK_RUN_ACTIVE, RK_RUN_PAUSED}, 2, "cancelled", "plan.cancel", "", false};
  return ringctl_run_plain(a, help_cancel, run, &t);
}

const ringctl_command ringctl_command_pause = {"pause", ringctl_cmd_pause,
                                               "pause the active plan after its moves in flight",
                                               NULL, help_pause};
const ringctl_command ringctl_command_resume = {"resume", ringctl_cmd_resume,
                                                "resume a paused plan", NULL, help_resume};
const ringctl_command ringctl_command_cancel = {
    "cancel", ringctl_cmd_cancel, "cancel the active plan: unfinished moves are dropped", NULL,
    help_cancel};
