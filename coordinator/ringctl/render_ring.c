/*
 * render_ring.c: `ringctl render --what ring` (render.h): the token space
 * as SECTORS sectors around a circle, clockwise from the top; each sector
 * a stack of its largest owners' shares of its token-replicas, in the
 * legend's order,
 * with a legend of the nodes that own the most.
 *
 * Sections: counting; geometry; sectors; the legend; the picture.
 *
 * Bounded: SECTORS sectors of at most SECTOR_TOP owners and one grey rest
 * each, and at most LEGEND_MAX nodes coloured and listed; every other
 * node is grey, counted in the legend's "+N more". Counting is one pass
 * over the table's T*R slots.
 */
#include "render.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SECTORS 64
#define SECTOR_TOP 4
#define LEGEND_MAX 20
#define PI 3.14159265358979323846
#define CX 400.0
#define CY 440.0
#define R0 100.0
#define R1 300.0
#define R_MARK 310.0
#define LEG_X0 790.0
#define LEG_X1 1260.0
#define LEG_Y0 110.0
#define LEG_ROW 22.0

/* ---------------------------------------------------------------- counting */

typedef struct sector_view {
  const render_input *in;
  uint32_t n;        /* nodes */
  uint32_t *count;   /* per node: token-replicas in the sector being drawn */
  uint32_t *touched; /* nodes whose count is not 0 */
  uint32_t n_touched;
  int32_t *colour; /* per node: its legend place, -1 when not listed */
  uint32_t listed;
} sector_view;

static uint32_t sector_start(uint32_t s, uint32_t T, uint32_t sectors) {
  return (uint32_t)((uint64_t)s * T / sectors);
}

/* Counts the owners of tokens [a, b) into v->count; returns the slots. */
static uint32_t count_sector(sector_view *v, uint32_t a, uint32_t b) {
  const ring_table *t = v->in->table;
  uint32_t R = ring_table_replicas(t), slots = 0;
  for (uint32_t i = 0; i < v->n_touched; i++)
    v->count[v->touched[i]] = 0;
  v->n_touched = 0;
  for (uint32_t tok = a; tok < b; tok++)
    for (uint32_t r = 0; r < R; r++) {
      uint16_t o = ring_table_owner(t, tok, r);
      if (o >= v->n)
        continue; /* an empty slot: drawn as the white rest */
      if (v->count[o]++ == 0)
        v->touched[v->n_touched++] = o;
      slots++;
    }
  return slots;
}

static uint32_t place(const sector_view *v, uint32_t node) {
  return v->colour[node] >= 0 ? (uint32_t)v->colour[node] : UINT32_MAX;
}

/* The SECTOR_TOP largest counts of the sector, largest first; then in
 * legend order (unlisted last), so a node keeps its place in the stack
 * from one sector to the next and reads as one band around the ring. */
static uint32_t top_owners(const sector_view *v, uint32_t *top) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < v->n_touched; i++) {
    uint32_t o = v->touched[i], j = k < SECTOR_TOP ? k++ : SECTOR_TOP;
    if (j == SECTOR_TOP && v->count[o] <= v->count[top[SECTOR_TOP - 1]])
      continue;
    if (j == SECTOR_TOP)
      j--;
    for (; j > 0 && v->count[top[j - 1]] < v->count[o]; j--)
      top[j] = top[j - 1];
    top[j] = o;
  }
  for (uint32_t i = 1; i < k; i++) /* insertion sort of at most SECTOR_TOP */
    for (uint32_t j = i; j > 0 && place(v, top[j]) < place(v, top[j - 1]); j--) {
      uint32_t x = top[j];
      top[j] = top[j - 1];
      top[j - 1] = x;
    }
  return k;
}

/* ---------------------------------------------------------------- geometry */

static double angle(double frac) { return 2 * PI * frac - PI / 2; }

/* An annular sector between fractions a and b of the circle, radii r0, r1. */
static void arc(FILE *f, double a, double b, double r0, double r1, const char *fill) {
  double t0 = angle(a), t1 = angle(b);
  int large = b - a > 0.5;
  fprintf(f,
          "<path d=\"M%.1f %.1f A%.1f %.1f 0 %d 1 %.1f %.1f L%.1f %.1f A%.1f %.1f 0 %d 0 %.1f "
          "%.1f Z\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\"/>\n",
          CX + r1 * cos(t0), CY + r1 * sin(t0), r1, r1, large, CX + r1 * cos(t1), CY + r1 * sin(t1),
          CX + r0 * cos(t1), CY + r0 * sin(t1), r0, r0, large, CX + r0 * cos(t0), CY + r0 * sin(t0),
          fill);
}

static const char *colour_of(const sector_view *v, uint32_t node) {
  return rk_node_colour(v->in->nodes[node].id);
}

/* ----------------------------------------------------------------- sectors */

static void sector(FILE *f, sector_view *v, uint32_t s, uint32_t sectors) {
  uint32_t T = ring_table_tokens(v->in->table);
  uint32_t a = sector_start(s, T, sectors), b = sector_start(s + 1, T, sectors);
  uint32_t slots = count_sector(v, a, b), top[SECTOR_TOP];
  uint32_t k = top_owners(v, top), full = (b - a) * ring_table_replicas(v->in->table);
  double fa = (double)s / sectors, fb = (double)(s + 1) / sectors, r = R0;
  for (uint32_t j = 0; j < k; j++) {
    double h = (R1 - R0) * v->count[top[j]] / (full ? full : 1);
    arc(f, fa, fb, r, r + h, colour_of(v, top[j]));
    r += h;
  }
  if (slots > 0 && r < R0 + (R1 - R0) * slots / (full ? full : 1) - 0.05)
    arc(f, fa, fb, r, R0 + (R1 - R0) * slots / (full ? full : 1), "#e0e0e0"); /* the rest */
}

/* Marks each sector with pending moves, its count in the mark's title. */
static void pending(FILE *f, const sector_view *v, uint32_t sectors) {
  const ring_table *t = v->in->table;
  uint32_t T = ring_table_tokens(t), per[SECTORS] = {0};
  for (uint32_t i = 0; i < ring_table_pending_count(t); i++) {
    uint32_t tok, slot;
    uint16_t node;
    if (ring_table_pending_at(t, i, &tok, &slot, &node) == RING_OK && tok < T)
      per[(uint64_t)tok * sectors / T]++;
  }
  for (uint32_t s = 0; s < sectors; s++)
    if (per[s] > 0) {
      double m = angle(((double)s + 0.5) / sectors);
      fprintf(f,
              "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#d62728\"><title>%u pending "
              "moves</title></circle>\n",
              CX + R_MARK * cos(m), CY + R_MARK * sin(m), per[s]);
    }
}

/* Token numbers at the quarters, outside the ring. */
static void ticks(FILE *f, uint32_t T) {
  for (uint32_t q = 0; q < 4; q++) {
    double m = angle(q / 4.0), r = R1 + 28;
    svg_text(f, CX + r * cos(m), CY + r * sin(m) + 5, 13, "middle", "fill=\"#555\"", "token %u",
             (uint32_t)((uint64_t)T * q / 4));
  }
}

/* -------------------------------------------------------------- the legend */

typedef struct ranked {
  uint32_t node, replicas;
} ranked;

static int most_first(const void *pa, const void *pb) {
  const ranked *a = pa, *b = pb;
  if (a->replicas != b->replicas)
    return a->replicas > b->replicas ? -1 : 1;
  return a->node < b->node ? -1 : a->node > b->node;
}

/* Gives the LEGEND_MAX nodes owning most their colours, in that order. */
static int rank_nodes(sector_view *v) {
  ranked *r = malloc((v->n ? v->n : 1) * sizeof *r);
  if (r == NULL)
    return -1;
  for (uint32_t i = 0; i < v->n; i++) {
    r[i] = (ranked){i, ring_table_node_replicas(v->in->table, (uint16_t)i)};
    v->colour[i] = -1;
  }
  qsort(r, v->n, sizeof *r, most_first);
  for (uint32_t i = 0; i < v->n && i < LEGEND_MAX && r[i].replicas > 0; i++)
    v->colour[r[i].node] = (int32_t)v->listed++;
  free(r);
  return 0;
}

/* Entries flow left to right and wrap at LEG_X1: "id (domain) 25.0%". */
static void legend(FILE *f, const sector_view *v) {
  const ring_table *t = v->in->table;
  double slots = (double)ring_table_tokens(t) * ring_table_replicas(t), x = LEG_X0, y = LEG_Y0;
  svg_text(f, LEG_X0, LEG_Y0 - 24, 14, "start", "font-weight=\"bold\"",
           "nodes by share of the token-replicas");
  for (uint32_t place = 0; place < v->listed; place++) {
    uint32_t i = 0;
    while (v->colour[i] != (int32_t)place)
      i++;
    const render_node *nd = &v->in->nodes[i];
    char label[160];
    snprintf(label, sizeof label, "%s%s%s%s %.1f%%", nd->id, nd->domain[0] ? " (" : "", nd->domain,
             nd->domain[0] ? ")" : "", 100.0 * ring_table_node_replicas(t, (uint16_t)i) / slots);
    double w = 22 + 7.0 * (double)strlen(label) + 16;
    if (x > LEG_X0 && x + w > LEG_X1) {
      x = LEG_X0;
      y += LEG_ROW;
    }
    svg_node_rect(f, x, y - 11, 14, 14, nd->id);
    svg_text(f, x + 20, y, 13, "start", "", "%s", label);
    x += w;
  }
  uint32_t rest = v->n - v->listed;
  if (rest > 0) {
    svg_rect(f, LEG_X0, y + LEG_ROW - 11, 14, 14, RENDER_GREY);
    svg_text(f, LEG_X0 + 20, y + LEG_ROW, 13, "start", "", "+%u more nodes", rest);
  }
}

/* ------------------------------------------------------------- the picture */

static void centre(FILE *f, const ring_table *t, uint32_t sectors) {
  uint32_t T = ring_table_tokens(t);
  svg_text(f, CX, CY - 10, 16, "middle", "font-weight=\"bold\"", "version %llu",
           (unsigned long long)ring_table_version(t));
  svg_text(f, CX, CY + 10, 12, "middle", "", "%u tokens x %u replicas", T, ring_table_replicas(t));
  svg_text(f, CX, CY + 28, 12, "middle", "fill=\"#555\"", "%u sectors of %u tokens", sectors,
           (T + sectors - 1) / sectors);
}

int render_ring(FILE *f, const render_input *in) {
  const ring_table *t = in->table;
  uint32_t n = ring_table_node_count(t), T = ring_table_tokens(t);
  uint32_t sectors = T < SECTORS ? T : SECTORS;
  sector_view v = {in,
                   n,
                   calloc(n + 1, sizeof(uint32_t)),
                   calloc(n + 1, sizeof(uint32_t)),
                   0,
                   calloc(n + 1, sizeof(int32_t)),
                   0};
  int rc = v.count && v.touched && v.colour ? rank_nodes(&v) : -1;
  if (rc == 0) {
    svg_begin(f, in->title);
    svg_text(f, 24, 62, 13, "start", "",
             "each of %u sectors: its owners' shares of the token-replicas, stacked in legend "
             "order; red dots: pending moves",
             sectors);
    for (uint32_t s = 0; s < sectors; s++)
      sector(f, &v, s, sectors);
    pending(f, &v, sectors);
    ticks(f, T);
    centre(f, t, sectors);
    legend(f, &v);
    rc = svg_end(f);
  }
  free(v.count);
  free(v.touched);
  free(v.colour);
  return rc;
}
