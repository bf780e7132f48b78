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
 * Later additions only add: "affinity_held" and "churn" in each bounded
 * entry, "bounded_loads_sticky" (the same caps with hysteresis and the
 * sticky map, plus "margin","sticky_capacity","sticky_ttl_ms") and
 * "weighted_rendezvous":[{"weights","nodes","keys","replicas",
 * "node0_share","ideal_share","seed_share" (when the seed has one),
 * "max_share_error","moved_fraction_leave","kept_moved_fraction_leave"}].
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
  fprintf(f,
          "\nmaglev: a lookup table of M=%u entries, rebuilt whole for each membership "
          "(the seed: \"a global operation\")\n",
          sim_maglev_size(r->p.nodes));
  const sim_plan_stats *pl = &r->plans;
  fprintf(f,
          "\nfixed tokens: T=%u, R=1, no failure domain; planner moves (lower bound): "
          "join %u (%u)",
          r->p.tokens, pl->join_moves, pl->join_lower_bound);
  if (r->p.nodes >= 2)
    fprintf(f, ", drain %u (%u)", pl->leave_moves, pl->leave_lower_bound);
  fputc('\n', f);
}

static void text_bounded_rows(const sim_bounded_result *b, size_t n, FILE *f) {
  fprintf(f, "%-6s %9s %9s %9s %9s %9s\n", "cap", "affinity", "held", "churn", "max/mean", "peak");
  for (size_t i = 0; i < n; i++) {
    char cap[16], aff[16], held[16], churn[16];
    snprintf(cap, sizeof cap, b[i].cap == 0 ? "none" : "%.2f", b[i].cap);
    fprintf(f, "%-6s %9s %9s %9s %9.3f %9.3f\n", cap, pct(b[i].affinity, aff, sizeof aff),
            pct(b[i].affinity_held, held, sizeof held), pct(b[i].churn, churn, sizeof churn),
            b[i].max_over_mean, b[i].peak_over_mean);
  }
}

static void text_bounded(const sim_report *r, FILE *f) {
  const sim_stream *st = &r->stream;
  fprintf(f,
          "\nbounded loads (no hysteresis, no sticky map) on the fixed-token table: %" PRIu64
          " requests,\nZipf(%.2f) over the %" PRIu64 " keys, ~%" PRIu64 " in flight\n",
          st->requests, st->zipf_s, r->p.keys, st->mean_ms);
  fprintf(f, "affinity: requests sent to the key's first choice; held: to it or to the node the "
             "key's\nprevious request went to (where its state is); churn: repeated requests "
             "sent to another\nnode than the time before; max/mean: in-flight load of the "
             "busiest node (average, peak)\n\n");
  text_bounded_rows(r->bounded, r->n_bounded, f);
  if (r->n_sticky == 0)
    return;
  const ring_bounded_opts *o = &r->sticky[0].o;
  fprintf(f,
          "\nthe same stream and caps with hysteresis %.2f and a sticky map of %u entries, "
          "ttl %" PRIu64 " ms\n(the seed: \"a reassignment needs a memory ... and "
          "hysteresis\")\n\n",
          o->margin, o->sticky_capacity, o->sticky_ttl_ms);
  text_bounded_rows(r->sticky, r->n_sticky, f);
}

static void text_hrw(const sim_report *r, FILE *f) {
  if (r->n_hrw == 0)
    return;
  fprintf(f,
          "\nweighted rendezvous (libring's ring_rendezvous_pick, -w/ln(u)) with top-k "
          "replicas, %" PRIu64 " keys\nshare: keys whose first replica is node-0 (weight 3); "
          "seed: the chapter's figure;\nmoved -1: keys whose replica set changes when the "
          "last node leaves; kept moved: keys\nwhose other replicas change or reorder then\n\n",
          r->hrw[0].keys);
  fprintf(f, "%-16s %8s %8s %8s %8s %3s %9s %10s\n", "weights", "share", "ideal", "seed", "max err",
          "k", "moved -1", "kept moved");
  for (size_t i = 0; i < r->n_hrw; i++) {
    const sim_hrw_result *h = &r->hrw[i];
    char sh[16], id[16], sd[16], er[16], mv[16], km[16];
    fprintf(f, "%-16s %8s %8s %8s %8s %3u %9s %10s\n", h->c->label, pct(h->share, sh, sizeof sh),
            pct(h->ideal, id, sizeof id), pct(h->c->seed_share, sd, sizeof sd),
            pct(h->max_err, er, sizeof er), h->k, pct(h->leave_moved, mv, sizeof mv),
            pct(h->leave_kept_moved, km, sizeof km));
  }
}

void sim_report_text(const sim_report *r, FILE *f) {
  text_header(r, f);
  text_systems(r, f);
  text_bounded(r, f);
  text_hrw(r, f);
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

/* One bounded run; `sticky` adds the router's options. */
static cJSON *json_bounded(const sim_bounded_result *b, bool sticky) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o != NULL && add_num(o, "cap", b->cap);
  if (ok && sticky)
    ok = add_num(o, "margin", b->o.margin) && add_num(o, "sticky_capacity", b->o.sticky_capacity) &&
         add_num(o, "sticky_ttl_ms", (double)b->o.sticky_ttl_ms);
  ok = ok && add_num(o, "affinity", round6(b->affinity)) &&
       add_num(o, "affinity_held", round6(b->affinity_held)) &&
       add_num(o, "churn", round6(b->churn)) &&
       add_num(o, "max_over_mean", round6(b->max_over_mean));
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *json_hrw(const sim_hrw_result *h) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o != NULL && cJSON_AddStringToObject(o, "weights", h->c->label) != NULL &&
            add_num(o, "nodes", h->c->nodes) && add_num(o, "keys", (double)h->keys) &&
            add_num(o, "replicas", h->k) && add_num(o, "node0_share", round6(h->share)) &&
            add_num(o, "ideal_share", round6(h->ideal));
  if (ok && !isnan(h->c->seed_share))
    ok = add_num(o, "seed_share", h->c->seed_share);
  ok = ok && add_num(o, "max_share_error", round6(h->max_err)) &&
       add_num(o, "moved_fraction_leave", round6(h->leave_moved)) &&
       add_num(o, "kept_moved_fraction_leave", round6(h->leave_kept_moved));
  if (!ok) {
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

/* The add_* below each add one array to o; false on ENOMEM, when the
 * caller deletes o whole. */
static bool add_systems(cJSON *o, const sim_report *r) {
  cJSON *a = cJSON_AddArrayToObject(o, "systems");
  bool ok = a != NULL;
  for (size_t i = 0; ok && i < r->n_systems; i++)
    ok = append(a, json_system(&r->systems[i]));
  return ok;
}

static bool add_bounded(cJSON *o, const char *key, const sim_bounded_result *b, size_t n,
                        bool sticky) {
  cJSON *a = cJSON_AddArrayToObject(o, key);
  bool ok = a != NULL;
  for (size_t i = 0; ok && i < n; i++)
    if (b[i].cap > 0) /* the uncapped baseline is text-only */
      ok = append(a, json_bounded(&b[i], sticky));
  return ok;
}

static bool add_hrw(cJSON *o, const sim_report *r) {
  cJSON *a = cJSON_AddArrayToObject(o, "weighted_rendezvous");
  bool ok = a != NULL;
  for (size_t i = 0; ok && i < r->n_hrw; i++)
    ok = append(a, json_hrw(&r->hrw[i]));
  return ok;
}

static cJSON *json_report(const sim_report *r) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o != NULL && add_num(o, "nodes", r->p.nodes) && add_num(o, "keys", (double)r->p.keys) &&
            add_num(o, "ideal_moved_fraction", round6(r->ideal_join)) && add_systems(o, r) &&
            add_bounded(o, "bounded_loads", r->bounded, r->n_bounded, false) &&
            add_bounded(o, "bounded_loads_sticky", r->sticky, r->n_sticky, true) && add_hrw(o, r);
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
