/*
 * render_flow.c: `ringctl render --what flow` (render.h): a plan's moves
 * as flows, givers on the left, receivers on the right, each side grouped
 * by failure domain, every band as wide as its move count.
 *
 * Sections: the sides; layout; drawing; the picture.
 *
 * Bounded: each side draws at most FLOW_SIDE_MAX nodes (those giving or
 * getting the most); the rest of a side is one grey "other" block, and
 * new replicas (no giver) a grey "(new)" block. So at most
 * (FLOW_SIDE_MAX + 2)^2 bands, whatever the plan.
 */
#include "render.h"

#include <stdlib.h>
#include <string.h>

#define FLOW_SIDE_MAX 16
#define SIDE_CAP (FLOW_SIDE_MAX + 2) /* + "(new)" + "other" */
#define Y0 110.0
#define Y1 760.0
#define NODE_GAP 5.0
#define DOMAIN_GAP 16.0
#define BLOCK_MIN 14.0 /* a block holds its label */
#define BLOCK_W 18.0
#define LEFT_X 300.0  /* left blocks' left edge */
#define RIGHT_X 962.0 /* right blocks' left edge */
#define LABEL_MIN 9.0 /* bands narrower than this carry no number */
#define NODE_NEW 0xfffffffeu
#define NODE_OTHER 0xffffffffu

/* --------------------------------------------------------------- the sides */

typedef struct side {
  uint32_t node[SIDE_CAP]; /* node index, NODE_NEW or NODE_OTHER */
  double count[SIDE_CAP];  /* moves out (left) or in (right) */
  double y[SIDE_CAP], h[SIDE_CAP], used[SIDE_CAP];
  uint32_t k;
  uint32_t others; /* nodes folded into "other" */
} side;

static const char *node_domain(const render_input *in, uint32_t node) {
  return node < in->n_nodes ? in->nodes[node].domain : "";
}

/* Sums each node's moves out (giver) or in (receiver) into score[]. */
static double totals(const render_input *in, bool giver, double *score, double *fresh) {
  double all = 0;
  *fresh = 0;
  for (uint32_t i = 0; i < in->n_pairs; i++) {
    const rk_flow_pair *p = &in->pairs[i];
    uint16_t node = giver ? p->from : p->to;
    if (node < in->n_nodes)
      score[node] += p->count;
    else
      *fresh += p->count; /* a giver of RING_NODE_NONE: a new replica */
    all += p->count;
  }
  return all;
}

/* Fills one side: the top nodes by count grouped by domain, then "(new)"
 * and "other" when they hold anything. at[] maps a node index (n_nodes for
 * none) to its entry. Returns -1 when out of memory. */
static int fill_side(const render_input *in, bool giver, side *s, uint32_t *at) {
  uint32_t n = in->n_nodes, order[FLOW_SIDE_MAX];
  double *score = calloc(n + 1, sizeof *score), fresh = 0, rest;
  if (score == NULL)
    return -1;
  rest = totals(in, giver, score, &fresh) - fresh;
  uint32_t k = render_pick(in->nodes, score, n, FLOW_SIDE_MAX, order);
  memset(s, 0, sizeof *s);
  for (uint32_t j = 0; j < k; j++)
    if (score[order[j]] > 0) {
      s->node[s->k] = order[j];
      s->count[s->k] = score[order[j]];
      at[order[j]] = s->k++;
      rest -= score[order[j]];
    }
  for (uint32_t i = 0; i < n; i++)
    s->others += score[i] > 0 && at[i] == NODE_OTHER;
  if (fresh > 0) {
    at[n] = s->k;
    s->node[s->k] = NODE_NEW;
    s->count[s->k++] = fresh;
  }
  if (s->others > 0) {
    s->node[s->k] = NODE_OTHER;
    s->count[s->k++] = rest;
  }
  free(score);
  return 0;
}

/* ------------------------------------------------------------------ layout */

static double gaps(const render_input *in, const side *s) {
  double g = 0;
  for (uint32_t j = 1; j < s->k; j++)
    g += strcmp(node_domain(in, s->node[j]), node_domain(in, s->node[j - 1])) != 0 ? DOMAIN_GAP
                                                                                   : NODE_GAP;
  return g;
}

/* Pixels per move for both sides, so a band is as wide at each end. */
static double scale_for(const render_input *in, const side *l, const side *r, double total) {
  double gl = gaps(in, l) + BLOCK_MIN * l->k, gr = gaps(in, r) + BLOCK_MIN * r->k;
  double room = Y1 - Y0 - (gl > gr ? gl : gr);
  return total > 0 && room > 0 ? room / total : 0;
}

static void place(const render_input *in, side *s, double scale) {
  double y = Y0;
  for (uint32_t j = 0; j < s->k; j++) {
    if (j > 0)
      y += strcmp(node_domain(in, s->node[j]), node_domain(in, s->node[j - 1])) != 0 ? DOMAIN_GAP
                                                                                     : NODE_GAP;
    double h = s->count[j] * scale;
    s->y[j] = y;
    s->h[j] = h > BLOCK_MIN ? h : BLOCK_MIN;
    y += s->h[j];
  }
}

/* ----------------------------------------------------------------- drawing */

static const char *fill_of(const render_input *in, const side *s, uint32_t j) {
  return s->node[j] >= NODE_NEW ? RENDER_GREY : rk_node_colour(in->nodes[s->node[j]].id);
}

static const char *name_of(const render_input *in, const side *s, uint32_t j, char buf[32]) {
  if (s->node[j] == NODE_NEW)
    return "(new replicas)";
  if (s->node[j] == NODE_OTHER) {
    snprintf(buf, 32, "other (%u nodes)", s->others);
    return buf;
  }
  return in->nodes[s->node[j]].id;
}

static void blocks(FILE *f, const render_input *in, const side *s, bool left) {
  double x = left ? LEFT_X : RIGHT_X;
  const char *prev = NULL;
  for (uint32_t j = 0; j < s->k; j++) {
    char buf[32];
    const char *dom = node_domain(in, s->node[j]), *name = name_of(in, s, j, buf);
    if (s->node[j] >= NODE_NEW) /* (new replicas), other */
      svg_rect(f, x, s->y[j], BLOCK_W, s->h[j], fill_of(in, s, j));
    else
      svg_node_rect(f, x, s->y[j], BLOCK_W, s->h[j], in->nodes[s->node[j]].id);
    double ty = s->y[j] + (s->h[j] < 24 ? s->h[j] / 2 + 4 : 14);
    if (left)
      svg_text(f, x - 8, ty, 12, "end", "", "%s gives %.0f", name, s->count[j]);
    else
      svg_text(f, x + BLOCK_W + 8, ty, 12, "start", "", "%s gets %.0f", name, s->count[j]);
    if (dom[0] && (prev == NULL || strcmp(prev, dom) != 0))
      svg_text(f, left ? 24 : RENDER_W - 24, ty, 13, left ? "start" : "end",
               "font-weight=\"bold\" fill=\"#555\"", "%s", dom);
    prev = dom;
  }
}

/* A band from giver a (drawn in fill, its colour) to receiver b. */
static void band(FILE *f, const char *fill, side *l, uint32_t a, side *r, uint32_t b, double count,
                 double scale) {
  double w = count * scale, ya = l->y[a] + l->used[a], yb = r->y[b] + r->used[b];
  double xl = LEFT_X + BLOCK_W, xr = RIGHT_X, xm = (xl + xr) / 2;
  l->used[a] += w;
  r->used[b] += w;
  fprintf(f,
          "<path d=\"M%.1f %.1f C%.1f %.1f %.1f %.1f %.1f %.1f L%.1f %.1f C%.1f %.1f %.1f %.1f "
          "%.1f %.1f Z\" fill=\"%s\" fill-opacity=\"0.55\"><title>%.0f moves</title></path>\n",
          xl, ya, xm, ya, xm, yb, xr, yb, xr, yb + w, xm, yb + w, xm, ya + w, xl, ya + w, fill,
          count);
  if (w >= LABEL_MIN)
    svg_text(f, xl + 8, ya + w / 2 + 4, w < 14 ? w - 1 : 13, "start", "class=\"count\"", "%.0f",
             count);
}

/* ------------------------------------------------------------- the picture */

static void bands(FILE *f, const render_input *in, side *l, side *r, const uint32_t *at_l,
                  const uint32_t *at_r, double scale) {
  double flow[SIDE_CAP][SIDE_CAP];
  memset(flow, 0, sizeof flow);
  for (uint32_t i = 0; i < in->n_pairs; i++) {
    const rk_flow_pair *p = &in->pairs[i];
    uint32_t a = at_l[p->from < in->n_nodes ? p->from : in->n_nodes];
    uint32_t b = at_r[p->to < in->n_nodes ? p->to : in->n_nodes];
    flow[a == NODE_OTHER ? l->k - 1 : a][b == NODE_OTHER ? r->k - 1 : b] += p->count;
  }
  for (uint32_t a = 0; a < l->k; a++)
    for (uint32_t b = 0; b < r->k; b++)
      if (flow[a][b] > 0)
        band(f, fill_of(in, l, a), l, a, r, b, flow[a][b], scale);
}

static void caption(FILE *f, const render_input *in, const side *l, const side *r, double total) {
  svg_text(f, 24, 62, 13, "start", "",
           "%.0f moves in %u (giver, receiver) pairs: givers left, receivers right, grouped by %s",
           total, in->n_pairs, in->level[0] ? in->level : "node");
  svg_text(f, 24, 84, 12, "start", "fill=\"#555\"",
           "band width = moves; the number at a band's start is its count");
  if (l->others > 0 || r->others > 0)
    svg_text(f, RENDER_W - 24, RENDER_H - 14, 13, "end", "fill=\"#444\"",
             "+%u more givers and +%u more receivers drawn as \"other\"", l->others, r->others);
}

static int draw(FILE *f, const render_input *in, side *l, side *r, uint32_t *at) {
  uint32_t *at_l = at, *at_r = at + in->n_nodes + 1;
  double total = 0;
  for (uint32_t i = 0; i < in->n_pairs; i++)
    total += in->pairs[i].count;
  double scale = scale_for(in, l, r, total);
  place(in, l, scale);
  place(in, r, scale);
  svg_begin(f, in->title);
  caption(f, in, l, r, total);
  if (total == 0)
    svg_text(f, RENDER_W / 2, RENDER_H / 2, 18, "middle", "", "no moves: nothing flows");
  bands(f, in, l, r, at_l, at_r, scale);
  blocks(f, in, l, true);
  blocks(f, in, r, false);
  return svg_end(f);
}

int render_flow(FILE *f, const render_input *in) {
  size_t n = (size_t)in->n_nodes + 1;
  uint32_t *at = malloc(2 * n * sizeof *at);
  side *l = malloc(sizeof *l), *r = malloc(sizeof *r);
  int rc = at != NULL && l != NULL && r != NULL ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < 2 * n; i++)
    at[i] = NODE_OTHER;
  if (rc == 0)
    rc = fill_side(in, true, l, at) == 0 && fill_side(in, false, r, at + n) == 0 ? 0 : -1;
  if (rc == 0)
    rc = draw(f, in, l, r, at);
  free(at);
  free(l);
  free(r);
  return rc;
}
