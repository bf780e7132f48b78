/*
 * cmd_apply.c: `ringctl apply`: approves exactly one plan by writing
 * plan/active; the coordinator runs it.
 *
 * Usage: ringctl apply [ID|FILE] [--wait [--stuck-timeout DURATION]]
 *
 * Sections: arguments; which plan; the approving txn; the command.
 *
 * The approval is one txn that compares everything the plan depends on:
 * no plan is active; the version key is the one read (its mod revision, and
 * its value is the plan's base version; absent for base version 0); and,
 * for the proposed plan, plan/proposed is the one read. Whatever changed in
 * between, nothing is written and the exit code is 3. A plan from a FILE is
 * recomputed from its base table and must match its digest.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* -------------------------------------------------------------- arguments */

enum { OPT_WAIT, OPT_STUCK_TIMEOUT };

static const ringctl_opt apply_opts[] = {
    {"wait", OPT_WAIT, false}, {"stuck-timeout", OPT_STUCK_TIMEOUT, true}, {NULL, 0, false}};

static const char help[] =
    "Usage: ringctl apply [ID|FILE] [--wait [--stuck-timeout DURATION]]\n"
    "\n"
    "Approves a plan: the proposed one (no argument), the proposed one only if its id\n"
    "is ID, or one saved by ringctl plan -o FILE (recomputed and checked against its\n"
    "digest first). Refused with exit 3 when the plan's base version is not the\n"
    "cluster's version, a plan is already active, or the proposal changed.\n"
    "\n"
    "Options:\n"
    "  --wait  follow the run until it is done (exit 0), failed or cancelled (exit 1):\n"
    "          a progress bar on a terminal, progress lines otherwise. etcd going away\n"
    "          meanwhile is waited out: no --timeout unless given; exit 4 when etcd\n"
    "          did not answer (or the run went on) until then. ringctl wait re-attaches\n"
    "  --stuck-timeout DURATION\n"
    "          with --wait: exit 1, showing the stuck and failing moves, when no move\n"
    "          was done for DURATION (e.g. 30m; measured here) or the coordinator\n"
    "          reports moves of the run stuck. The run goes on (deploy/STUCK.md).\n"
    "  --json  {\"plan\",\"base_version\",\"moves_total\",\"waves\",\"applied\"};\n"
    "          not with --wait (follow the run with ringctl status --json)\n";

typedef struct apply_settings {
  const char *target; /* ID or FILE, NULL for the proposed plan */
  bool wait;
  uint64_t stuck_timeout_ms; /* 0: wait however long it takes */
} apply_settings;

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  apply_settings *s = ud;
  if (id == OPT_WAIT) {
    s->wait = true;
    return RINGCTL_EXIT_OK;
  }
  if (id == OPT_STUCK_TIMEOUT)
    return ringctl_stuck_timeout_opt(a, value, &s->stuck_timeout_ms);
  if (s->target != NULL)
    return ringctl_usage_error(a, "one plan at a time: \"%s\" after \"%s\"", value, s->target);
  s->target = value;
  return RINGCTL_EXIT_OK;
}

/* ------------------------------------------------------------- which plan */

/* The proposed plan, if it is the one asked for (id NULL: any). */
static int pick_proposed(ringctl_ctx *ctx, const rk_state *st, const char *id) {
  if (!st->has_proposed && id == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "no plan is proposed: nothing to apply");
  if (!st->has_proposed)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT, "plan %s is not proposed (no plan is)", id);
  if (id != NULL && strcmp(st->proposed.id, id) != 0)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT, "plan %s is not the proposed plan (%s is)", id,
                       st->proposed.id[0] ? st->proposed.id : "a refused plan");
  return RINGCTL_EXIT_OK;
}

/* Whether d may be approved on the cluster as read. */
static int check_plan(ringctl_ctx *ctx, const rk_state *st, const rk_plan_doc *d) {
  if (st->has_active && strcmp(st->active.plan.id, d->id) == 0)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT,
                       "plan %s is already %s (applied before): ringctl wait %s follows it", d->id,
                       rk_run_state_name(st->active.state), d->id);
  if (st->has_active)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT, "plan %s is already %s: one plan at a time",
                       st->active.plan.id, rk_run_state_name(st->active.state));
  if (strcmp(d->cluster, ctx->cluster) != 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "plan %s is for cluster %s, not %s", d->id,
                       d->cluster, ctx->cluster);
  if (d->n_violations > 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "the plan was refused by the planner: %s",
                       d->violations[0]);
  if (d->base_version != st->version)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT,
                       "plan base version %llu, cluster is at version %llu: the plan is stale",
                       (unsigned long long)d->base_version, (unsigned long long)st->version);
  return RINGCTL_EXIT_OK;
}

/* ------------------------------------------------------- the approving txn */

/* The compares: see the file comment. Returns how many. */
static uint32_t approval_cmps(ringctl_ctx *ctx, const rk_state *st, bool proposed,
                              char keys[3][RK_KEY_MAX], char *base, ring_cmp cmps[4]) {
  uint32_t n = 0;
  ringctl_key(ctx, "plan/active", keys[0]);
  ringctl_key(ctx, "version", keys[1]);
  ringctl_key(ctx, "plan/proposed", keys[2]);
  cmps[n++] = (ring_cmp){keys[0], strlen(keys[0]), RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0};
  if (st->version_mod == 0) {
    cmps[n++] = (ring_cmp){keys[1], strlen(keys[1]), RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0};
  } else {
    cmps[n++] =
        (ring_cmp){keys[1], strlen(keys[1]), RING_CMP_MOD, RING_CMP_EQ, st->version_mod, NULL, 0};
    cmps[n++] =
        (ring_cmp){keys[1], strlen(keys[1]), RING_CMP_VALUE, RING_CMP_EQ, 0, base, strlen(base)};
  }
  if (proposed)
    cmps[n++] =
        (ring_cmp){keys[2], strlen(keys[2]), RING_CMP_MOD, RING_CMP_EQ, st->proposed_mod, NULL, 0};
  return n;
}

static int approve(ringctl_ctx *ctx, const rk_state *st, const rk_plan_doc *d, bool proposed) {
  rk_run run;
  char *json = NULL;
  size_t len = 0;
  if (rk_run_start(d, ringctl_now_ms(), &run) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  int ring_rc = rk_run_encode(&run, &json, &len);
  rk_run_free(&run);
  if (ring_rc != RING_OK)
    return ringctl_fail(ctx, ring_rc, NULL, "encoding the run");
  char keys[3][RK_KEY_MAX], base[24];
  ring_cmp cmps[4];
  snprintf(base, sizeof base, "%llu", (unsigned long long)d->base_version);
  uint32_t n = approval_cmps(ctx, st, proposed, keys, base, cmps);
  ring_op put = {RING_OP_PUT, keys[0], strlen(keys[0]), json, len, 0, false};
  bool won = false;
  ringctl_audit(ctx, "plan.approve", NULL, "plan %s: %u move%s in %u wave%s from version %s%s",
                d->id, d->moves_total, ringctl_s(d->moves_total), d->waves, ringctl_s(d->waves),
                base, proposed ? "" : " (from a saved file)");
  int rc = ringctl_txn(ctx, cmps, n, &put, 1, "writing plan/active", &won);
  free(json);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (!won)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT,
                       "the cluster changed while approving (another apply, a new version or "
                       "a new proposal): nothing was applied; review ringctl plan again");
  return RINGCTL_EXIT_OK;
}

/* ----------------------------------------------------------- the command */

/* The time plan takes at the byte rate, from the arc sizes hosts report
 * (ms; 0 when unknown), printed as the estimate `apply --wait` is held to. */
static uint64_t estimate(ringctl_ctx *ctx, const ring_plan *plan) {
  rk_state z;
  ring_table *live = NULL;
  uint64_t *arc = NULL, eta = 0;
  uint32_t known = 0;
  if (plan == NULL || ringctl_read_live(ctx, RK_READ_CONFIG | RK_READ_SIZES, &z, &live) != 0)
    return 0;
  uint64_t rate = z.config.throttle.bytes_per_sec;
  if (rk_arc_bytes(&z, live, &arc, &known) == RING_OK && arc != NULL && rate > 0) {
    char b[32], r[32], t[32], why[RING_ID_MAX + 64];
    rk_eta e;
    if (rk_plan_eta(plan, arc, &z.config.throttle, &e) == RING_OK)
      printf("estimate: %s at %s/s per agent: about %s (%s)\n",
             ringctl_bytes(rk_plan_bytes_in(plan, arc, NULL), b), ringctl_bytes(rate, r),
             ringctl_duration((e.ms + 999) / 1000, t), rk_eta_text(plan, &e, why, sizeof why));
    eta = e.ms;
    ringctl_sizes_partial(stdout, live, known);
  }
  free(arc);
  ring_table_free(live);
  rk_state_free(&z);
  return eta;
}

/* --json: {"plan","base_version","moves_total","waves","applied":true}. */
static int report_json(const rk_plan_doc *d) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "plan", d->id);
  cJSON_AddNumberToObject(o, "base_version", (double)d->base_version);
  cJSON_AddNumberToObject(o, "moves_total", d->moves_total);
  cJSON_AddNumberToObject(o, "waves", d->waves);
  cJSON_AddBoolToObject(o, "applied", true);
  return ringctl_json_emit(o);
}

/* Approves d (from a file when !proposed) and reports it. */
static int approve_doc(ringctl_ctx *ctx, const rk_state *st, const rk_plan_doc *d, bool proposed,
                       const apply_settings *s) {
  int rc = check_plan(ctx, st, d);
  ring_plan *plan = NULL;
  if (rc == RINGCTL_EXIT_OK && !proposed) /* a file's digest and moves must hold */
    rc = ringctl_plan_compute_file(ctx, s->target, d, &plan);
  else if (rc == RINGCTL_EXIT_OK && s->wait)
    rc = ringctl_plan_compute(ctx, d, &plan);
  if (rc == RINGCTL_EXIT_OK)
    rc = approve(ctx, st, d, proposed);
  uint64_t eta = rc == RINGCTL_EXIT_OK && s->wait ? estimate(ctx, plan) : 0;
  ring_plan_free(plan);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (ctx->a->globals->json)
    return report_json(d);
  printf("applied plan %s: %u move%s in %u wave%s from version %llu\n", d->id, d->moves_total,
         ringctl_s(d->moves_total), d->waves, ringctl_s(d->waves),
         (unsigned long long)d->base_version);
  return s->wait ? ringctl_wait_run(ctx, d->id, s->stuck_timeout_ms, eta) : RINGCTL_EXIT_OK;
}

static int apply_file(ringctl_ctx *ctx, const rk_state *st, const apply_settings *s) {
  rk_plan_doc d;
  int rc = ringctl_plan_load(ctx, s->target, &d);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rc = approve_doc(ctx, st, &d, false, s);
  rk_plan_doc_free(&d);
  return rc;
}

static int run(ringctl_ctx *ctx, void *ud) {
  const apply_settings *s = ud;
  bool file = s->target != NULL && access(s->target, F_OK) == 0;
  if (s->target != NULL && !file && !ringctl_is_plan_id(s->target))
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "\"%s\" is neither a plan id (16 hex digits) nor a plan file", s->target);
  rk_state st;
  int rc = ringctl_read_state(ctx, RK_READ_VERSION | RK_READ_PLANS, &st);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (file)
    rc = apply_file(ctx, &st, s);
  else if ((rc = pick_proposed(ctx, &st, s->target)) == RINGCTL_EXIT_OK)
    rc = approve_doc(ctx, &st, &st.proposed, true, s);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_apply(ringctl_args *a) {
  apply_settings s = {NULL, false, 0};
  bool help_shown = false;
  int rc = ringctl_parse(a, apply_opts, help, apply, &s, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (s.stuck_timeout_ms != 0 && !s.wait)
    return ringctl_usage_error(a, "--stuck-timeout goes with --wait");
  if (s.wait && a->globals->json) /* the run is followed as text; status --json reads it */
    return ringctl_usage_error(a, "--json reports the approval: without --wait (then "
                                  "ringctl status --json)");
  a->globals->until_done = s.wait;
  return ringctl_with_etcd(a, run, &s);
}

const ringctl_command ringctl_command_apply = {"apply", ringctl_cmd_apply,
                                               "approve the proposed plan (or ID, or a saved FILE)",
                                               apply_opts, help};
