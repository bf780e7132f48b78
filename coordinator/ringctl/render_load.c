/*
 * render_load.c: `ringctl render --what load` (render.h): token-replicas
 * per node, before and after a plan (or now), against each node's
 * weighted target, grouped by failure domain.
 *
 * Sections: layout; one node; domains; the picture.
 *
 * At most LOAD_BARS_MAX nodes are drawn: those furthest from their target
 * after the plan, which are the ones an operator looks for; the footer
 * says how many are left out and how close to target they all are.
 */
#include "render.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOAD_BARS_MAX 32
#define X0 80.0
#define X1 1250.0
#define Y_TOP 140.0  /* the highest bar's top */
#define Y_BASE 590.0 /* the bars' foot */
#define Y_DOMAIN 700.0
#define BEFORE_FILL "#b4b4b4"
#define DOMAIN_FILL "#888888" /* domain brackets: the colours are the nodes' */
#define DOMAIN_GAP 0.6        /* slots between two domains */

/* ------------------------------------------------------------------ layout */

typedef struct layout {
  const render_input *in;
  const uint32_t *order; /* the nodes drawn, grouped by domain */
  uint32_t k;
  double slot;  /* one node's width */
  double scale; /* pixels per token-replica */
} layout;

static double bar_y(const layout *l, double v) { return Y_BASE - v * l->scale; }

static bool new_domain(const layout *l, uint32_t j) {
  return j > 0 &&
         strcmp(l->in->nodes[l->order[j]].domain, l->in->nodes[l->order[j - 1]].domain) != 0;
}

static double top_of(const render_node *n) {
  double m = n->before > n->after ? n->before : n->after;
  return m > n->target ? m : n->target;
}

static void measure(layout *l) {
  double top = 1;
  uint32_t gaps = 0;
  for (uint32_t j = 0; j < l->k; j++) {
    double v = top_of(&l->in->nodes[l->order[j]]);
    top = v > top ? v : top;
    gaps += new_domain(l, j);
  }
  l->scale = (Y_BASE - Y_TOP) / (top * 1.08);
  l->slot = (X1 - X0) / ((double)l->k + DOMAIN_GAP * gaps + (l->k == 0));
}

static void grid(FILE *f, const layout *l) {
  double top = (Y_BASE - Y_TOP) / l->scale;
  for (int g = 0; g <= 4; g++) {
    double v = round(top * g / 4), y = bar_y(l, v);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>\n", X0,
            y, X1, y);
    svg_text(f, X0 - 8, y + 4, 11, "end", "fill=\"#666\"", "%.0f", v);
  }
}

/* ---------------------------------------------------------------- one node */

static void node(FILE *f, const layout *l, const render_node *n, double x) {
  double w = l->slot, fs = w * 0.36 < 12 ? w * 0.36 : 12;
  if (l->in->has_plan) {
    svg_rect(f, x + w * 0.1, bar_y(l, n->before), w * 0.38, n->before * l->scale, BEFORE_FILL);
    svg_node_rect(f, x + w * 0.52, bar_y(l, n->after), w * 0.38, n->after * l->scale, n->id);
  } else {
    svg_node_rect(f, x + w * 0.2, bar_y(l, n->after), w * 0.6, n->after * l->scale, n->id);
  }
  double ty = bar_y(l, n->target);
  fprintf(f,
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" "
          "stroke-width=\"2\"/>\n",
          x + w * 0.04, ty, x + w * 0.96, ty);
  double y = bar_y(l, top_of(n)) - 6;
  svg_text(f, x + w / 2, y, fs, "middle", "font-weight=\"bold\"", "%u", n->after);
  if (l->in->has_plan)
    svg_text(f, x + w / 2, y - fs - 2, fs, "middle", "fill=\"#777\"", "%u", n->before);
  svg_text(f, x + w / 2, Y_BASE + 16, fs * 0.9, "middle", "fill=\"#555\"", "%.1f", n->target);
  char rot[96];
  snprintf(rot, sizeof rot, "transform=\"rotate(-40 %.1f %.1f)\"", x + w / 2, Y_BASE + 30);
  svg_text(f, x + w / 2, Y_BASE + 30, fs, "end", rot, "%s", n->id);
}

/* ----------------------------------------------------------------- domains */

/* A bracket under the nodes of one domain [x0, x1) and its name: grey, as
 * the colours are the nodes'. */
static void domain(FILE *f, const char *name, double x0, double x1) {
  svg_rect(f, x0 + 2, Y_DOMAIN - 8, x1 - x0 - 4, 4, DOMAIN_FILL);
  svg_text(f, (x0 + x1) / 2, Y_DOMAIN + 12, 13, "middle", "", "%s", name[0] ? name : "(none)");
}

static void bars(FILE *f, const layout *l) {
  double x = X0, start = X0;
  for (uint32_t j = 0; j < l->k; j++) {
    if (new_domain(l, j)) {
      domain(f, l->in->nodes[l->order[j - 1]].domain, start, x);
      x += l->slot * DOMAIN_GAP;
      start = x;
    }
    node(f, l, &l->in->nodes[l->order[j]], x);
    x += l->slot;
  }
  if (l->k > 0)
    domain(f, l->in->nodes[l->order[l->k - 1]].domain, start, x);
}

/* ------------------------------------------------------------- the picture */

static void key(FILE *f, const layout *l) {
  double x = 24, y = 62;
  if (l->in->has_plan) {
    svg_rect(f, x, y - 10, 12, 12, BEFORE_FILL);
    svg_text(f, x + 16, y, 13, "start", "", "before the plan");
    svg_rect(f, x + 140, y - 10, 12, 12, svg_colour(0));
    svg_text(f, x + 156, y, 13, "start", "", "after (each node its colour)");
    x += 360;
  } else {
    svg_rect(f, x, y - 10, 12, 12, svg_colour(0));
    svg_text(f, x + 16, y, 13, "start", "", "owned now (each node its colour)");
    x += 250;
  }
  fprintf(f,
          "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\" "
          "stroke-width=\"2\"/>\n",
          x, y - 4, x + 16, y - 4);
  svg_text(f, x + 22, y, 13, "start", "", "weighted target (number under the bar)");
  svg_text(f, 24, 84, 12, "start", "fill=\"#555\"", "token-replicas per node, grouped by %s",
           l->in->level[0] ? l->in->level : "node");
}

/* "+N more nodes, each within D of its target", scores of the left out. */
static void more(FILE *f, const layout *l, const double *score) {
  uint32_t n = l->in->n_nodes;
  if (l->k >= n)
    return;
  bool *drawn = calloc(n, sizeof *drawn);
  double worst = 0;
  for (uint32_t j = 0; drawn != NULL && j < l->k; j++)
    drawn[l->order[j]] = true;
  for (uint32_t i = 0; drawn != NULL && i < n; i++)
    worst = !drawn[i] && score[i] > worst ? score[i] : worst;
  svg_text(f, X1, RENDER_H - 14, 13, "end", "fill=\"#444\"",
           "+%u more nodes not drawn, each within %.1f of its target", n - l->k, worst);
  free(drawn);
}

int render_load(FILE *f, const render_input *in) {
  uint32_t n = in->n_nodes;
  double *score = calloc(n ? n : 1, sizeof *score);
  uint32_t *order = calloc(LOAD_BARS_MAX, sizeof *order);
  if (score == NULL || order == NULL) {
    free(score);
    free(order);
    return -1;
  }
  for (uint32_t i = 0; i < n; i++)
    score[i] = fabs((double)in->nodes[i].after - in->nodes[i].target);
  layout l = {in, order, render_pick(in->nodes, score, n, LOAD_BARS_MAX, order), 0, 0};
  measure(&l);
  svg_begin(f, in->title);
  key(f, &l);
  grid(f, &l);
  bars(f, &l);
  more(f, &l, score);
  free(score);
  free(order);
  return svg_end(f);
}
