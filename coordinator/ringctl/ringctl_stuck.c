/*
 * ringctl_stuck.c: stuck and failing moves as ringctl shows them
 * (ringctl_out.h), for `ringctl status` and `ringctl apply --wait
 * --stuck-timeout`.
 *
 * Sections: what is shown; JSON; text.
 *
 * Stuck moves come from the coordinator's `stuck` key (only its report
 * knows how long a receiver went without progress, on the leader's own
 * clock); failing fetches come from each receiver's progress/<id> for the
 * current version, before any threshold.
 */
#include "ringctl_out.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- what is shown */

const rk_stuck *ringctl_stuck_of(const rk_state *st) {
  if (!st->has_stuck || st->stuck.version != st->version)
    return NULL; /* stale: the leader rewrites it at its next look */
  if (st->has_active && strcmp(st->active.plan.id, st->stuck.plan) != 0)
    return NULL;
  return &st->stuck;
}

/* Whether the report lists (token, to) as stuck. */
static bool listed(const rk_stuck *k, uint32_t token, const char *to) {
  for (uint32_t i = 0; k != NULL && i < k->n_moves; i++)
    if (k->moves[i].token == token && strcmp(k->moves[i].to, to) == 0)
      return true;
  return false;
}

/* Calls fn on every failing entry of the current version (with_stuck:
 * also those the report lists as stuck), by node then token. Returns how
 * many it called fn on. */
static uint32_t each_failing(const rk_state *st, bool with_stuck,
                             void (*fn)(void *ud, const char *node, const rk_failing *f),
                             void *ud) {
  const rk_stuck *k = ringctl_stuck_of(st);
  uint32_t n = 0;
  for (uint32_t i = 0; i < st->n_progress; i++) {
    const rk_agent_progress *a = &st->progress[i];
    if (a->p.version != st->version || st->version == 0)
      continue;
    for (uint32_t j = 0; j < a->p.n_failing; j++)
      if (with_stuck || !listed(k, a->p.failing[j].token, a->id)) {
        if (fn)
          fn(ud, a->id, &a->p.failing[j]);
        n++;
      }
  }
  return n;
}

/* -------------------------------------------------------------------- JSON */

cJSON *ringctl_stuck_json(const rk_state *st) {
  const rk_stuck *k = ringctl_stuck_of(st);
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; a != NULL && k != NULL && i < k->n_moves; i++) {
    const rk_stuck_move *m = &k->moves[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "token", m->token);
    cJSON_AddNumberToObject(o, "slot", m->slot);
    cJSON_AddStringToObject(o, "from", m->from);
    cJSON_AddStringToObject(o, "to", m->to);
    cJSON_AddStringToObject(o, "error", m->error);
    cJSON_AddNumberToObject(o, "for_ms", (double)m->for_ms);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

static void failing_obj(void *ud, const char *node, const rk_failing *f) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "node", node);
  cJSON_AddNumberToObject(o, "token", f->token);
  cJSON_AddNumberToObject(o, "attempts", f->attempts);
  cJSON_AddStringToObject(o, "error", f->error);
  cJSON_AddItemToArray(ud, o);
}

cJSON *ringctl_failing_json(const rk_state *st) {
  cJSON *a = cJSON_CreateArray();
  if (a != NULL)
    each_failing(st, true, failing_obj, a);
  return a;
}

/* -------------------------------------------------------------------- text */

static void failing_line(void *ud, const char *node, const rk_failing *f) {
  fprintf(ud, "  %-20s %6" PRIu32 " %9" PRIu32 "  %s\n", node, f->token, f->attempts, f->error);
}

bool ringctl_stuck_text(FILE *f, const rk_state *st) {
  const rk_stuck *k = ringctl_stuck_of(st);
  uint32_t failing = each_failing(st, false, NULL, NULL);
  if (k != NULL && k->n_moves > 0) {
    fprintf(f, "\nstuck moves: %" PRIu32 " (no progress from their receivers; deploy/STUCK.md)\n",
            k->n_moves + k->more);
    fprintf(f, "  %-20s %6s %4s %-20s %8s  %s\n", "NODE", "TOKEN", "SLOT", "FROM", "FOR",
            "LAST ERROR");
    for (uint32_t i = 0; i < k->n_moves; i++) {
      const rk_stuck_move *m = &k->moves[i];
      char d[32];
      fprintf(f, "  %-20s %6" PRIu32 " %4" PRIu32 " %-20s %8s  %s\n", m->to, m->token, m->slot,
              m->from[0] ? m->from : "-", ringctl_duration(m->for_ms / 1000, d), m->error);
    }
    if (k->more > 0)
      fprintf(f, "  ... and %" PRIu32 " more\n", k->more);
  }
  if (failing > 0) {
    fprintf(f, "\nfailing, not yet stuck: %" PRIu32 "\n", failing);
    fprintf(f, "  %-20s %6s %9s  %s\n", "NODE", "TOKEN", "ATTEMPTS", "LAST ERROR");
    each_failing(st, false, failing_line, f);
  }
  return (k != NULL && k->n_moves > 0) || failing > 0;
}
