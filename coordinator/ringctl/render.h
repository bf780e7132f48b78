/*
 * render.h: `ringctl render`'s pictures, SVG written to a FILE. Internal
 * to the ringctl binary (and its unit test, tests/unit/test_render.c).
 *
 * Sections: the page; the writer (render_svg.c); what is drawn
 * (render_input.c); the pictures (render_load.c, render_flow.c,
 * render_ring.c).
 *
 * Every picture is RENDER_W x RENDER_H, legible at that size, and bounded
 * whatever the cluster: at most a fixed number of bars, bands, sectors and
 * legend entries are drawn, and what is left out is counted in a "+N more"
 * line. Text from the cluster (ids, labels) is escaped on the way out.
 * Drawing functions return 0, or -1 when writing to f failed.
 */
#ifndef RINGCTL_RENDER_H
#define RINGCTL_RENDER_H

#include "cluster.h"

#include <stdarg.h>
#include <stdio.h>

/* ---------------------------------------------------------------- the page */

#define RENDER_W 1280.0
#define RENDER_H 800.0
#define RENDER_GREY "#c0c0c0" /* what is aggregated: "other", "+N more" */

/* ------------------------------------------------ the writer (render_svg.c) */

/* The XML declaration, the <svg> element (RENDER_W x RENDER_H), a white
 * background and the title at the top. */
void svg_begin(FILE *f, const char *title);
/* Closes the document; returns 0, or -1 when anything failed to write. */
int svg_end(FILE *f);
/* Writes s with &, <, >, " and ' escaped; control characters become '?'. */
void svg_escape(FILE *f, const char *s);
/* <text x y font-size [text-anchor] [extra attributes]>TEXT</text>, TEXT
 * printf-formatted then escaped. anchor: "start", "middle" or "end";
 * attrs: more attributes written as they are ("" for none; never from the
 * cluster). */
#if defined(__GNUC__)
__attribute__((format(printf, 7, 8)))
#endif
void svg_text(FILE *f, double x, double y, double size, const char *anchor, const char *attrs,
              const char *fmt, ...);
void svg_rect(FILE *f, double x, double y, double w, double h, const char *fill);
/* A rectangle in node id's colour (rk_node_colour: the same in every
 * picture and on the status page), marked data-node="id". */
void svg_node_rect(FILE *f, double x, double y, double w, double h, const char *id);
/* Colour i of a palette of distinguishable colours (cycles past its end). */
const char *svg_colour(uint32_t i);

/* ----------------------------------------- what is drawn (render_input.c) */

/* One node as the load and flow pictures see it. */
typedef struct render_node {
  const char *id;     /* borrowed from the table */
  const char *domain; /* its failure-domain value, "" when none (borrowed) */
  uint32_t before;    /* token-replicas owned before the plan (the live table: now) */
  uint32_t after;     /* after the plan (the live table: now) */
  double target;      /* the weighted target the planner aims at */
} render_node;

/* What a picture draws: nodes by index of `table` (a plan's target table,
 * else the live table), and a plan's flows when there is a plan. */
typedef struct render_input {
  const ring_table *table; /* borrowed */
  const char *level;       /* the failure-domain level, "" for none */
  bool has_plan;           /* before and after differ: a plan is drawn */
  char title[160];
  render_node *nodes; /* one per node of table (malloc()'ed) */
  uint32_t n_nodes;
  rk_flow_pair *pairs; /* the plan's flows, most first (malloc()'ed; NULL: none) */
  uint32_t n_pairs;
} render_input;

/* Fills *in from plan p (its target table, ring_plan_node_load, its flows)
 * or, when p is NULL, from live table t (targets: rk_node_targets).
 * Returns RING_OK, or RING_ENOMEM with nothing held. render_input_free
 * frees what it holds, not in. */
int render_input_from(const ring_table *t, const ring_plan *p, const char *level, render_input *in);
void render_input_free(render_input *in);

/* Picks at most `max` of n nodes, those with the highest score[] (ties:
 * lower index), and orders them by domain, then by score, highest first:
 * the order a picture groups them in. Writes their indexes to out[] and
 * returns how many. */
uint32_t render_pick(const render_node *nodes, const double *score, uint32_t n, uint32_t max,
                     uint32_t *out);

/* ------------------------------------------------------------- the pictures */

/* Bars per node (render_load.c): before and after the plan, or what it
 * owns now, against its weighted target, grouped by failure domain, with
 * the numbers written. Over LOAD_BARS_MAX nodes, those furthest from their
 * target are drawn. */
int render_load(FILE *f, const render_input *in);
/* The plan's moves as flows between nodes (render_flow.c): givers left,
 * receivers right, grouped by domain, bands as wide as their counts. */
int render_flow(FILE *f, const render_input *in);
/* The table `in->table` as 64 sectors of the token space (render_ring.c),
 * each a stack of its owners' shares, with a legend of the largest. */
int render_ring(FILE *f, const render_input *in);

#endif /* RINGCTL_RENDER_H */
