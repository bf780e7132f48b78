/*
 * render_svg.c: the ring as an SVG picture (ringctl_out.h), for
 * `ringctl render --svg`.
 *
 * Sections: geometry; colours; rings; the domain band; pending marks; the
 * legend; the document.
 *
 * Token i is the arc [i/T, (i+1)/T) of the circle, clockwise from the top.
 * Runs of consecutive tokens with one owner are drawn as one annular
 * sector, so a table draws in paths proportional to its owner changes, not
 * to T*R.
 */
#include "ringctl_out.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846
#define SIZE 800.0 /* the ring's square */
#define CX (SIZE / 2)
#define CY (SIZE / 2)
#define R_HOLE 120.0  /* inside the innermost ring */
#define R_RINGS 310.0 /* outside the outermost ring */
#define R_BAND0 318.0 /* the domain band */
#define R_BAND1 340.0
#define R_MARK0 346.0 /* pending marks */
#define R_MARK1 370.0
#define LEGEND_X (SIZE + 20)
#define WIDTH (SIZE + 340)
#define LEGEND_ROWS_MAX 48

/* ---------------------------------------------------------------- geometry */

static double angle(uint32_t token, uint32_t tokens) {
  return 2 * PI * (double)token / (double)tokens - PI / 2;
}

/* One annular sector from token a to b (exclusive) between radii r0, r1. */
static void sector(FILE *f, uint32_t a, uint32_t b, uint32_t T, double r0, double r1,
                   const char *fill) {
  if (b - a == T) { /* a full circle: two halves, an arc cannot close on itself */
    sector(f, 0, T / 2, T, r0, r1, fill);
    sector(f, T / 2, T, T, r0, r1, fill);
    return;
  }
  double t0 = angle(a, T), t1 = angle(b, T);
  int large = (double)(b - a) / T > 0.5;
  fprintf(f,
          "<path d=\"M%.2f %.2f A%.1f %.1f 0 %d 1 %.2f %.2f L%.2f %.2f A%.1f %.1f 0 %d 0 %.2f "
          "%.2f Z\" fill=\"%s\"/>\n",
          CX + r1 * cos(t0), CY + r1 * sin(t0), r1, r1, large, CX + r1 * cos(t1), CY + r1 * sin(t1),
          CX + r0 * cos(t1), CY + r0 * sin(t1), r0, r0, large, CX + r0 * cos(t0), CY + r0 * sin(t0),
          fill);
}

/* ----------------------------------------------------------------- colours */

/* Node i's colour: hues a golden angle apart, so neighbours differ. */
static void node_colour(uint16_t i, char out[32]) {
  if (i == RING_NODE_NONE)
    snprintf(out, 32, "#ffffff");
  else
    snprintf(out, 32, "hsl(%.0f,70%%,%d%%)", fmod(i * 137.508, 360.0), 45 + (i % 3) * 10);
}

/* The colour of a failure domain value: by its position among t's values. */
static void domain_colour(const ring_table *t, const char *level, uint16_t node, char out[32]) {
  const char *v = node == RING_NODE_NONE ? NULL : ring_table_node_label(t, node, level);
  int k = -1;
  for (uint16_t i = 0; v != NULL && i <= node; i++) {
    const char *w = ring_table_node_label(t, i, level);
    if (w != NULL && strcmp(w, v) == 0) {
      k = i; /* the first node with this value names the colour */
      break;
    }
  }
  if (k < 0)
    snprintf(out, 32, "#cccccc");
  else
    snprintf(out, 32, "hsl(%.0f,30%%,35%%)", fmod(k * 97.0 + 20, 360.0));
}

/* ------------------------------------------------------------------- rings */

static void ring(FILE *f, const ring_table *t, uint32_t slot) {
  uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t);
  double w = (R_RINGS - R_HOLE) / R, r0 = R_HOLE + slot * w + 1, r1 = r0 + w - 2;
  uint32_t start = 0;
  for (uint32_t tok = 1; tok <= T; tok++) {
    uint16_t owner = ring_table_owner(t, start, slot);
    if (tok < T && ring_table_owner(t, tok, slot) == owner)
      continue;
    char c[32];
    node_colour(owner, c);
    sector(f, start, tok, T, r0, r1, c);
    start = tok;
  }
}

/* --------------------------------------------------------- the domain band */

static void band(FILE *f, const ring_table *t, const char *level) {
  uint32_t T = ring_table_tokens(t), start = 0;
  char prev[32], c[32];
  domain_colour(t, level, ring_table_owner(t, 0, 0), prev);
  for (uint32_t tok = 1; tok <= T; tok++) {
    if (tok < T) {
      domain_colour(t, level, ring_table_owner(t, tok, 0), c);
      if (strcmp(c, prev) == 0)
        continue;
    }
    sector(f, start, tok, T, R_BAND0, R_BAND1, prev);
    start = tok;
    memcpy(prev, c, sizeof prev);
  }
}

/* ------------------------------------------------------------ pending marks */

static void pending(FILE *f, const ring_table *t) {
  uint32_t T = ring_table_tokens(t);
  for (uint32_t i = 0; i < ring_table_pending_count(t); i++) {
    uint32_t tok, slot;
    uint16_t node;
    if (ring_table_pending_at(t, i, &tok, &slot, &node) != RING_OK)
      continue;
    char c[32];
    node_colour(node, c);
    double a = angle(tok, T) + PI / T;
    fprintf(f,
            "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
            "stroke-width=\"2\"><title>token %u slot %u: pending %s</title></line>\n",
            CX + R_MARK0 * cos(a), CY + R_MARK0 * sin(a), CX + R_MARK1 * cos(a),
            CY + R_MARK1 * sin(a), c, tok, slot, ring_table_node_id(t, node));
  }
}

/* -------------------------------------------------------------- the legend */

static void legend(FILE *f, const ring_table *t, const char *level) {
  uint32_t n = ring_table_node_count(t);
  fprintf(f, "<text x=\"%.0f\" y=\"30\" font-size=\"14\" font-weight=\"bold\">nodes</text>\n",
          LEGEND_X);
  for (uint32_t i = 0; i < n && i < LEGEND_ROWS_MAX; i++) {
    char c[32], d[32];
    const char *v = level[0] ? ring_table_node_label(t, (uint16_t)i, level) : NULL;
    node_colour((uint16_t)i, c);
    domain_colour(t, level, (uint16_t)i, d);
    double y = 45 + i * 15.0;
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
            "<rect x=\"%.0f\" y=\"%.0f\" width=\"4\" height=\"10\" fill=\"%s\"/>"
            "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">%s %s%s%s %u replicas, %s</text>\n",
            LEGEND_X, y, c, LEGEND_X + 12, y, d, LEGEND_X + 20, y + 9,
            ring_table_node_id(t, (uint16_t)i), v ? "(" : "", v ? v : "", v ? ")" : "",
            ring_table_node_replicas(t, (uint16_t)i),
            ring_node_state_name(ring_table_node_state(t, (uint16_t)i)));
  }
  if (n > LEGEND_ROWS_MAX)
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">... %u more</text>\n", LEGEND_X,
            45 + LEGEND_ROWS_MAX * 15.0 + 9, n - LEGEND_ROWS_MAX);
}

/* ------------------------------------------------------------ the document */

static void caption(FILE *f, const ring_table *t, const char *level) {
  fprintf(f,
          "<text x=\"%.0f\" y=\"%.0f\" font-size=\"13\" text-anchor=\"middle\">%s v%llu</text>\n"
          "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">%u tokens x %u "
          "replicas</text>\n"
          "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">rings: slot 0 "
          "(inner) .. %u; band: %s; ticks: pending</text>\n",
          CX, CY - 8, ring_table_cluster(t), (unsigned long long)ring_table_version(t), CX, CY + 8,
          ring_table_tokens(t), ring_table_replicas(t), CX, CY + 22, ring_table_replicas(t) - 1,
          level[0] ? level : "no failure domain");
}

int ringctl_render_svg(FILE *f, const ring_table *t, const char *level) {
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
          WIDTH, SIZE, WIDTH, SIZE);
  for (uint32_t r = 0; r < ring_table_replicas(t); r++)
    ring(f, t, r);
  band(f, t, level);
  pending(f, t);
  caption(f, t, level);
  legend(f, t, level);
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}
