/*
 * coord_status_plan.c: the active run's part of the status page
 * (coord.h, coord_status_plan): its flow, who gives how many to whom, and
 * its progress over time as moves/s and bytes/s.
 *
 * Sections: the flow; the samples; /status.json.
 *
 * Both belong to the loop (coord_status_observe calls in at every look,
 * whether or not anyone reads the page). The flow is counted once per run
 * from the plan the loop already holds (c->run_plan, rk_plan_flow) and
 * kept as JSON; the samples are a ring of at most COORD_SAMPLES_MAX, one a
 * second while a run is active, so the page's chart covers the last ten
 * minutes of a run of any length.
 *
 * In /status.json:
 *   "flow":null|{"plan":ID,"moves":N,"pairs":[{"from":ID|null (new
 *          replicas),"to":ID,"from_domain","to_domain","count":N}],
 *          "more_pairs":N,"more_moves":N}  (the STATUS_FLOW_PAIRS largest
 *          pairs; the rest counted)
 *   "rates":null|{"plan":ID,"samples":[{"t_ms","moves_done","bytes_done",
 *          "moves_per_s","bytes_per_s"}]}  (oldest first; each rate over
 *          the time since the sample before, 0 for the first)
 */
#include "coord.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#ifndef STATUS_FLOW_PAIRS
#define STATUS_FLOW_PAIRS 24 /* pairs listed: what a page can draw legibly */
#endif
#define SAMPLE_EVERY_MS 900 /* the loop looks about once a second: take each */

/* ---------------------------------------------------------------- the flow */

static cJSON *pair_json(const ring_table *t, const char *level, const rk_flow_pair *p) {
  cJSON *o = cJSON_CreateObject();
  if (p->from < ring_table_node_count(t))
    cJSON_AddStringToObject(o, "from", ring_table_node_id(t, p->from));
  else
    cJSON_AddNullToObject(o, "from");
  cJSON_AddStringToObject(o, "to", ring_table_node_id(t, p->to));
  cJSON_AddStringToObject(o, "from_domain", rk_node_domain(t, p->from, level));
  cJSON_AddStringToObject(o, "to_domain", rk_node_domain(t, p->to, level));
  cJSON_AddNumberToObject(o, "count", p->count);
  return o;
}

/* The flow of plan p (run `id`); NULL when out of memory. */
static cJSON *flow_json(const ring_plan *p, const char *id, const char *level) {
  rk_flow_pair *pairs = NULL;
  uint32_t n = 0, more = 0;
  if (rk_plan_flow(p, &pairs, &n) != RING_OK)
    return NULL;
  const ring_table *t = ring_plan_target(p);
  cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "pairs");
  cJSON_AddStringToObject(o, "plan", id);
  cJSON_AddNumberToObject(o, "moves", ring_plan_move_count(p));
  for (uint32_t i = 0; i < n; i++)
    if (i < STATUS_FLOW_PAIRS)
      cJSON_AddItemToArray(list, pair_json(t, level, &pairs[i]));
    else
      more += pairs[i].count;
  cJSON_AddNumberToObject(o, "more_pairs", n > STATUS_FLOW_PAIRS ? n - STATUS_FLOW_PAIRS : 0);
  cJSON_AddNumberToObject(o, "more_moves", more);
  free(pairs);
  return o;
}

/* Counts the active run's flow once, when the loop holds its plan. */
static void refresh_flow(coord *c, const rk_state *s) {
  coord_status *st = &c->status;
  const char *id = s->active.plan.id;
  if (!s->has_active || c->run_plan == NULL || strcmp(c->run_plan_id, id) != 0 ||
      strcmp(st->flow_plan, id) == 0)
    return;
  cJSON *flow = flow_json(c->run_plan, id, s->config.failure_domain);
  if (flow == NULL)
    return; /* out of memory: tried again at the next rebuild */
  cJSON_Delete(st->flow);
  st->flow = flow;
  memcpy(st->flow_plan, id, sizeof st->flow_plan);
}

/* ------------------------------------------------------------- the samples */

static coord_sample *sample_at(coord_status *st, uint32_t i) {
  return &st->samples[(st->first + i) % COORD_SAMPLES_MAX];
}

static void take_sample(coord_status *st, const rk_state *s, uint64_t now) {
  const char *id = s->active.plan.id;
  if (!s->has_active)
    return;
  if (strcmp(st->samples_plan, id) != 0) { /* a new run: a new series */
    memcpy(st->samples_plan, id, sizeof st->samples_plan);
    st->first = st->n_samples = 0;
  }
  if (st->n_samples > 0 && now - sample_at(st, st->n_samples - 1)->t_ms < SAMPLE_EVERY_MS)
    return;
  coord_sample x = {now, s->active.cursor.moves_done, s->active.cursor.bytes_done};
  if (st->n_samples == COORD_SAMPLES_MAX) { /* full: the oldest goes */
    st->samples[st->first] = x;
    st->first = (st->first + 1) % COORD_SAMPLES_MAX;
    return;
  }
  *sample_at(st, st->n_samples++) = x;
}

/* n per second from a to b; 0 when the clock did not move forward. */
static double rate(uint64_t from, uint64_t to, const coord_sample *a, const coord_sample *b) {
  return b->t_ms > a->t_ms && to >= from
             ? (double)(to - from) * 1000.0 / (double)(b->t_ms - a->t_ms)
             : 0;
}

static cJSON *rates_json(coord_status *st) {
  if (st->n_samples == 0)
    return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "samples");
  cJSON_AddStringToObject(o, "plan", st->samples_plan);
  for (uint32_t i = 0; i < st->n_samples; i++) {
    const coord_sample *b = sample_at(st, i), *a = i > 0 ? sample_at(st, i - 1) : b;
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "t_ms", (double)b->t_ms);
    cJSON_AddNumberToObject(x, "moves_done", (double)b->moves_done);
    cJSON_AddNumberToObject(x, "bytes_done", (double)b->bytes_done);
    cJSON_AddNumberToObject(x, "moves_per_s", rate(a->moves_done, b->moves_done, a, b));
    cJSON_AddNumberToObject(x, "bytes_per_s", rate(a->bytes_done, b->bytes_done, a, b));
    cJSON_AddItemToArray(list, x);
  }
  return o;
}

/* ------------------------------------------------------------ /status.json */

void coord_status_plan_follow(coord *c, const rk_state *s) {
  refresh_flow(c, s);
  take_sample(&c->status, s, rd_wall_ms());
}

void coord_status_plan(coord *c, cJSON *o) {
  coord_status *st = &c->status;
  cJSON_AddItemToObject(o, "flow",
                        st->flow != NULL ? cJSON_Duplicate(st->flow, true) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "rates", rates_json(st));
}

void coord_status_plan_free(coord *c) {
  cJSON_Delete(c->status.flow);
  c->status.flow = NULL;
  c->status.flow_plan[0] = '\0';
  c->status.samples_plan[0] = '\0';
  c->status.n_samples = 0;
}
