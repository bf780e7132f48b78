/*
 * ringctl_plansum.c: how ringctl shows a plan (ringctl_out.h): the JSON
 * scripts read and the summary people read.
 *
 * Sections: JSON; per-node flows; the summary.
 */
#include "ringctl_out.h"

#include <math.h>
#include <stdlib.h>

/* -------------------------------------------------------------------- JSON */

static cJSON *move_json(const ring_table *t, const ring_move *m) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  cJSON_AddNumberToObject(o, "token", m->token);
  cJSON_AddNumberToObject(o, "slot", m->slot);
  ringctl_json_add_node(o, "from", t, m->from);
  ringctl_json_add_node(o, "to", t, m->to);
  ringctl_json_add_node(o, "source", t, m->source);
  cJSON_AddNumberToObject(o, "wave", m->wave);
  return o;
}

static cJSON *moves_json(const ring_plan *plan) {
  cJSON *a = cJSON_CreateArray();
  if (plan == NULL || a == NULL)
    return a;
  const ring_table *t = ring_plan_target(plan);
  const ring_move *m = ring_plan_moves(plan);
  for (uint32_t i = 0; i < ring_plan_move_count(plan); i++)
    cJSON_AddItemToArray(a, move_json(t, &m[i]));
  return a;
}

static cJSON *violations_json(const rk_plan_doc *d) {
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; a != NULL && i < d->n_violations && i < RK_VIOLATIONS_MAX; i++)
    cJSON_AddItemToArray(a, cJSON_CreateString(d->violations[i]));
  return a;
}

/* {node: bytes received} of the plan's receivers. */
static cJSON *bytes_in_json(const ring_plan *plan, const uint64_t *arc_bytes) {
  const ring_table *t = ring_plan_target(plan);
  uint32_t n = ring_table_node_count(t);
  uint64_t *in = calloc(n + 1u, sizeof *in);
  cJSON *o = cJSON_CreateObject();
  if (in != NULL)
    rk_plan_bytes_in(plan, arc_bytes, in);
  for (uint32_t i = 0; in != NULL && i < n; i++)
    if (in[i] > 0)
      cJSON_AddNumberToObject(o, ring_table_node_id(t, (uint16_t)i), (double)in[i]);
  free(in);
  return o;
}

cJSON *ringctl_plan_json(const rk_plan_doc *d, const ring_plan *plan, const rk_config *cfg,
                         const uint64_t *arc_bytes) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  if (d->id[0] != '\0')
    cJSON_AddStringToObject(o, "id", d->id);
  else
    cJSON_AddNullToObject(o, "id"); /* a refused plan has no id */
  cJSON_AddNumberToObject(o, "base_version", (double)d->base_version);
  cJSON_AddNumberToObject(o, "moves_total", d->moves_total);
  cJSON_AddNumberToObject(o, "lower_bound", d->lower_bound);
  cJSON_AddNumberToObject(o, "waves", d->waves);
  cJSON_AddNumberToObject(o, "bytes", (double)d->bytes);
  cJSON_AddNumberToObject(o, "lost", d->lost);
  cJSON_AddItemToObject(o, "moves", moves_json(plan));
  cJSON_AddItemToObject(o, "violations", violations_json(d));
  cJSON *bb = plan ? rk_plan_bytes_balance_json(plan) : NULL;
  if (bb != NULL) {
    cJSON_AddItemToObject(o, "bytes_balance", bb);
    cJSON_AddNumberToObject(o, "bytes_bound", (double)ring_plan_bytes_bound(plan));
  }
  if (plan != NULL && arc_bytes != NULL) { /* sizes known now: per receiver, and the time */
    cJSON_AddNumberToObject(o, "bytes_now", (double)rk_plan_bytes_in(plan, arc_bytes, NULL));
    cJSON_AddItemToObject(o, "bytes_in", bytes_in_json(plan, arc_bytes));
    rk_eta e;
    char why[RING_ID_MAX + 64];
    if (cfg != NULL && cfg->throttle.bytes_per_sec > 0 &&
        rk_plan_eta(plan, arc_bytes, &cfg->throttle, &e) == RING_OK) {
      cJSON_AddNumberToObject(o, "eta_s", (double)e.ms / 1000.0);
      cJSON_AddNumberToObject(o, "eta_ideal_s", (double)e.ideal_ms / 1000.0);
      cJSON_AddStringToObject(o, "eta_bound", rk_eta_text(plan, &e, why, sizeof why));
    }
  }
  return o;
}

/* --------------------------------------------------------- per-node flows */

/* Moves (and, with arc sizes, bytes) into and out of each node of the
 * target table. */
typedef struct flows {
  uint32_t *in, *out; /* ring_table_node_count(target) entries each */
  uint64_t *bytes_in; /* NULL without arc sizes */
  uint32_t receivers; /* nodes with moves in */
} flows;

static int count_flows(const ring_plan *plan, const uint64_t *arc_bytes, flows *f) {
  uint32_t n = ring_table_node_count(ring_plan_target(plan));
  f->in = calloc(n + 1, sizeof *f->in);
  f->out = calloc(n + 1, sizeof *f->out);
  f->bytes_in = arc_bytes ? calloc(n + 1, sizeof *f->bytes_in) : NULL;
  f->receivers = 0;
  if (f->in == NULL || f->out == NULL || (arc_bytes && f->bytes_in == NULL))
    return RING_ENOMEM;
  if (arc_bytes)
    rk_plan_bytes_in(plan, arc_bytes, f->bytes_in);
  const ring_move *m = ring_plan_moves(plan);
  for (uint32_t i = 0; i < ring_plan_move_count(plan); i++) {
    if (m[i].to < n && f->in[m[i].to]++ == 0)
      f->receivers++;
    if (m[i].from < n)
      f->out[m[i].from]++;
  }
  return RING_OK;
}

/* ------------------------------------------------------------ the summary */

/* "data: ..." and "time: ..." lines: the bytes (as the hosts' sizes say
 * now, else as the plan recorded them) and the time they take at the
 * throttle (rk_plan_eta: the run's steps, each as long as its slowest
 * receiver or source), naming the node that bounds it. */
static void print_cost(FILE *f, const rk_plan_doc *d, const ring_plan *plan, const rk_config *cfg,
                       const uint64_t *arc_bytes, uint32_t receivers) {
  char b[32], t[32];
  uint64_t bytes = arc_bytes ? rk_plan_bytes_in(plan, arc_bytes, NULL) : d->bytes;
  if (arc_bytes == NULL && d->bytes == 0) {
    fputs("data:     unknown (no arc sizes: agents report them in sizes/)\n", f);
    fputs("time:     unknown\n", f);
    return;
  }
  fprintf(f, "data:     %s to %u receivers\n", ringctl_bytes(bytes, b), receivers);
  uint64_t rate = cfg ? cfg->throttle.bytes_per_sec : 0;
  if (rate == 0) {
    fputs("time:     unknown (no byte rate set: throttle --bytes-per-sec)\n", f);
    return;
  }
  rk_eta e = {.bound = RING_NODE_NONE};
  char why[RING_ID_MAX + 64] = "the receivers' share";
  if (arc_bytes != NULL && rk_plan_eta(plan, arc_bytes, &cfg->throttle, &e) == RING_OK)
    rk_eta_text(plan, &e, why, sizeof why);
  else /* the plan's recorded bytes alone: spread evenly over the receivers */
    e.ms = (bytes * 1000u + rate * receivers - 1) / (rate * (receivers ? receivers : 1));
  fprintf(f, "time:     about %s at %s/s per agent (%s)\n",
          ringctl_duration((e.ms + 999) / 1000, t), ringctl_bytes(rate, b), why);
}

void ringctl_sizes_partial(FILE *f, const ring_table *t, uint32_t known) {
  uint32_t T = t ? ring_table_tokens(t) : 0;
  if (known > 0 && known < T)
    fprintf(f, "sizes:    %u of %u tokens reported (sizes/); the bytes count the others as 0\n",
            known, T);
}

/* Node i's bytes before, after and target, and how far off its target it
 * was and is (the furthest yet in *before, *after, as fractions). */
static void print_bytes_cells(FILE *f, const ring_plan *plan, uint32_t i, double *before,
                              double *after) {
  ring_plan_bytes_load bl;
  char x[32], y[32], z[32];
  if (ring_plan_node_bytes(plan, (uint16_t)i, &bl) != RING_OK)
    return;
  fprintf(f, " %13s %12s %12s", ringctl_bytes((uint64_t)llround(bl.before), x),
          ringctl_bytes((uint64_t)llround(bl.after), y),
          ringctl_bytes((uint64_t)llround(bl.target), z));
  if (bl.target > 0) {
    *before = fmax(*before, fabs(bl.before / bl.target - 1));
    *after = fmax(*after, fabs(bl.after / bl.target - 1));
  }
}

/* Per-node table: moves in and out, load before and after, target; under
 * bytes balance also bytes held before and after, and the byte target. */
static void print_balance(FILE *f, const ring_plan *plan, const flows *fl) {
  const ring_table *t = ring_plan_target(plan);
  ring_plan_bytes_load bl;
  const bool by_bytes = ring_plan_node_bytes(plan, 0, &bl) == RING_OK;
  double worst_before = 0, worst_after = 0, bytes_before = 0, bytes_after = 0;
  fprintf(f, "\n%-20s %6s %6s %10s %8s %8s %9s", "NODE", "IN", "OUT", "BYTES IN", "BEFORE", "AFTER",
          "TARGET");
  fputs(by_bytes ? "  BYTES BEFORE  BYTES AFTER BYTES TARGET\n" : "\n", f);
  for (uint32_t i = 0; i < ring_table_node_count(t); i++) {
    ring_plan_load l;
    if (ring_plan_node_load(plan, (uint16_t)i, &l) != RING_OK)
      continue;
    char b[32];
    fprintf(f, "%-20s %6u %6u %10s %8u %8u %9.1f", ring_table_node_id(t, (uint16_t)i), fl->in[i],
            fl->out[i], fl->bytes_in ? ringctl_bytes(fl->bytes_in[i], b) : "-", l.before, l.after,
            l.target);
    if (by_bytes)
      print_bytes_cells(f, plan, i, &bytes_before, &bytes_after);
    fputc('\n', f);
    worst_before = fmax(worst_before, fabs((double)l.before - l.target));
    worst_after = fmax(worst_after, fabs((double)l.after - l.target));
  }
  fprintf(f, "balance:  furthest from target %.1f token-replicas before, %.1f after\n",
          worst_before, worst_after);
  char least[32];
  if (by_bytes) /* least: the bytes bound, as text */
    fprintf(f,
            "bytes:    furthest from byte target %.1f%% before, %.1f%% after (tolerance %.0f%%, "
            "%u nodes off it); no plan ending as close moves under %s\n",
            100 * bytes_before, 100 * bytes_after, 100 * RING_BALANCE_TOLERANCE,
            ring_plan_bytes_off_tolerance(plan), ringctl_bytes(ring_plan_bytes_bound(plan), least));
}

static void print_head(FILE *f, const rk_plan_doc *d) {
  fprintf(f, "plan:     %s (cluster %s)\n", d->id[0] ? d->id : "(refused)", d->cluster);
  if (d->base_version == 0)
    fputs("base:     first placement (no table yet)\n", f);
  else
    fprintf(f, "base:     version %llu\n", (unsigned long long)d->base_version);
  fprintf(f, "moves:    %u (lower bound %u), %u wave%s\n", d->moves_total, d->lower_bound, d->waves,
          ringctl_s(d->waves));
  if (d->lost > 0)
    fprintf(f, "lost:     %u moves have no live replica to stream from\n", d->lost);
  if (d->best_effort_violations > 0)
    fprintf(f, "soft:     %u tokens repeat a %s value (best effort)\n", d->best_effort_violations,
            d->input.best_effort);
}

static void print_violations(FILE *f, const rk_plan_doc *d) {
  fprintf(f, "refused:  the hard failure-domain rule (%s) cannot hold:\n",
          d->input.failure_domain[0] ? d->input.failure_domain : "none");
  for (uint32_t i = 0; i < d->n_violations && i < RK_VIOLATIONS_MAX; i++)
    fprintf(f, "  - %s\n", d->violations[i]);
}

void ringctl_plan_text(FILE *f, const rk_plan_doc *d, const ring_plan *plan, const rk_config *cfg,
                       const uint64_t *arc_bytes) {
  print_head(f, d);
  if (plan == NULL) {
    print_violations(f, d);
    return;
  }
  flows fl;
  if (count_flows(plan, arc_bytes, &fl) == RING_OK) {
    print_cost(f, d, plan, cfg, arc_bytes, fl.receivers);
    print_balance(f, plan, &fl);
  }
  free(fl.in);
  free(fl.out);
  free(fl.bytes_in);
}
