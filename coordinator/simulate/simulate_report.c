/*
 * simulate_report.c: `ringctl simulate`'s output: aligned tables for
 * people, one line of JSON for scripts.
 *
 * Sections: text; JSON.
 *
 * The JSON shape is a contract (issue 3): {"nodes","keys",
 * "ideal_moved_fraction","systems":[{"name","vnodes" (rings only),
 * "moved_fraction","moved_fraction_leave" (N >= 2),"max_over_mean",
 * "min_over_mean"}],"bounded_loads":[{"cap","affinity","max_over_mean"}]}.
 * Figures are rounded to 6 decimals: more digits would only show noise.
 */
#include "simulate.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------- text */

/* "12.34%", or "-" where a figure does not exist (no leave from 1 node). */
static const char *pct(double x, char *buf, size_t cap) {
  if (isnan(x))
    snprintf(buf, cap, "-");
  else
    snprintf(buf, cap, "%.2f%%", 100 * x);
  return buf;
}

static void text_header(const sim_report *r, FILE *f) {
  const sim_params *p = &r->p;
  fprintf(f, "ringctl simulate: %u nodes, %" PRIu64 " keys (session-0 .. session-%" PRIu64 ")\n",
          p->nodes, p->keys, p->keys - 1);
  fprintf(f, "moved +1: keys whose owner changes when node-%u joins", p->nodes);
  if (p->nodes >= 2)
    fprintf(f, "; moved -1: when node-%u leaves (fixed tokens: is drained)", p->nodes - 1);
  fputc('\n', f);
  fprintf(f, "max/mean, min/mean: keys per node with %u nodes, over the mean %.1f\n\n", p->nodes,
          (double)p->keys / p->nodes);
}

static void text_row(FILE *f, const char *name, uint32_t vnodes, double join, double leave,
                     double max, double min) {
  char v[16], j[16], l[16];
  snprintf(v, sizeof v, vnodes ? "%u" : "-", vnodes);
  fprintf(f, "%-14s %6s %9s %9s %9.3f %9.3f\n", name, v, pct(join, j, sizeof j),
          pct(leave, l, sizeof l), max, min);
}

static void text_systems(const sim_report *r, FILE *f) {
  fprintf(f, "%-14s %6s %9s %9s %9s %9s\n", "system", "vnodes", "moved +1", "moved -1", "max/mean",
          "min/mean");
  for (size_t i = 0; i < r->n_systems; i++) {
    const sim_result *s = &r->systems[i];
    text_row(f, s->name, s->vnodes, s->moved_join, s->moved_leave, s->max_over_mean,
             s->min_over_mean);
  }
  text_row(f, "ideal", 0, r->ideal_join, r->ideal_leave, 1, 1);
  const sim_plan_stats *pl = &r->plans;
  fprintf(f,
          "\nfixed tokens: T=%u, R=1, no failure domain; planner moves (lower bound): "
          "join %u (%u)",
          r->p.tokens, pl->join_moves, pl->join_lower_bound);
  if (r->p.nodes >= 2)
    fprintf(f, ", drain %u (%u)", pl->leave_moves, pl->leave_lower_bound);
  fputc('\n', f);
}

static void text_bounded(const sim_report *r, FILE *f) {
  const sim_stream *st = &r->stream;
  fprintf(f,
          "\nbounded loads (no hysteresis, no sticky map) on the fixed-token table: %" PRIu64
          " requests,\nZipf(%.2f) over the %" PRIu64 " keys, ~%" PRIu64 " in flight\n",
          st->requests, st->zipf_s, r->p.keys, st->mean_ms);
  fprintf(f, "affinity: requests sent to the key's first choice; max/mean: in-flight load "
             "of the busiest node (average, peak)\n\n");
  fprintf(f, "%-6s %9s %9s %9s\n", "cap", "affinity", "max/mean", "peak");
  for (size_t i = 0; i < r->n_bounded; i++) {
    const sim_bounded_result *b = &r->bounded[i];
    char cap[16], aff[16];
    snprintf(cap, sizeof cap, b->cap == 0 ? "none" : "%.2f", b->cap);
    fprintf(f, "%-6s %9s %9.3f %9.3f\n", cap, pct(b->affinity, aff, sizeof aff), b->max_over_mean,
            b->peak_over_mean);
  }
}

void sim_report_text(const sim_report *r, FILE *f) {
  text_header(r, f);
  text_systems(r, f);
  text_bounded(r, f);
}

/* ------------------------------------------------------------------- JSON */

static double round6(double x) { return round(x * 1e6) / 1e6; }

/* Adds key: value to o; false if cJSON ran out of memory. */
static bool add_num(cJSON *o, const char *key, double value) {
  return cJSON_AddNumberToObject(o, key, value) != NULL;
}

static cJSON *json_system(const sim_result *s) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o != NULL && cJSON_AddStringToObject(o, "name", s->name) != NULL;
  if (ok && s->vnodes > 0)
    ok = add_num(o, "vnodes", s->vnodes);
  ok = ok && add_num(o, "moved_fraction", round6(s->moved_join));
  if (ok && !isnan(s->moved_leave))
    ok = add_num(o, "moved_fraction_leave", round6(s->moved_leave));
  ok = ok && add_num(o, "max_over_mean", round6(s->max_over_mean)) &&
       add_num(o, "min_over_mean", round6(s->min_over_mean));
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *json_bounded(const sim_bounded_result *b) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL || !add_num(o, "cap", b->cap) || !add_num(o, "affinity", round6(b->affinity)) ||
      !add_num(o, "max_over_mean", round6(b->max_over_mean))) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* Appends item to array a; false (item freed) if item is NULL or on ENOMEM. */
static bool append(cJSON *a, cJSON *item) {
  if (item != NULL && cJSON_AddItemToArray(a, item))
    return true;
  cJSON_Delete(item);
  return false;
}

static cJSON *json_report(const sim_report *r) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o != NULL && add_num(o, "nodes", r->p.nodes) && add_num(o, "keys", (double)r->p.keys) &&
            add_num(o, "ideal_moved_fraction", round6(r->ideal_join));
  cJSON *sys = ok ? cJSON_AddArrayToObject(o, "systems") : NULL;
  ok = ok && sys != NULL;
  for (size_t i = 0; ok && i < r->n_systems; i++)
    ok = append(sys, json_system(&r->systems[i]));
  cJSON *bl = ok ? cJSON_AddArrayToObject(o, "bounded_loads") : NULL;
  ok = ok && bl != NULL;
  for (size_t i = 0; ok && i < r->n_bounded; i++)
    if (r->bounded[i].cap > 0) /* the uncapped baseline is text-only */
      ok = append(bl, json_bounded(&r->bounded[i]));
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

int sim_report_json(const sim_report *r, FILE *f) {
  cJSON *o = json_report(r);
  char *s = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (s == NULL)
    return RING_ENOMEM;
  fprintf(f, "%s\n", s);
  cJSON_free(s);
  return RING_OK;
}
