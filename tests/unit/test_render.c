/*
 * test_render.c: `ringctl render`'s SVG writers (coordinator/ringctl/
 * render_*.c, built into this test from their sources): every picture is
 * well-formed XML (xmllint, which deploy/install-deps.sh installs), names
 * the nodes it draws and no more, writes its numbers as text
 * (loads before, after and target; flow counts; ring shares), escapes
 * what it is given, and stays small for 10,000 nodes ("+N more").
 * RENDER_KEEP=DIR keeps the pictures drawn, for a look.
 *
 * Sections: helpers; the writer; a join; 10,000 nodes.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, open_memstream */
#include "render.h"
#include "test_cluster.h"
#include "check_main.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ----------------------------------------------------------------- helpers */

typedef int (*draw_fn)(FILE *f, const render_input *in);

static ring_plan_config config(uint32_t T, uint32_t R) {
  return (ring_plan_config){"demo", T, R, 0, "zone", NULL, 0, 0, 0, NULL, RING_BALANCE_TOKENS,
                            NULL};
}

static ring_plan *must_plan(const ring_table *cur, const test_cluster *c,
                            const ring_plan_config *cfg) {
  ring_plan *p = NULL;
  ring_error err = {0};
  ck_assert_msg(ring_plan_compute(cur, c->specs, c->n, cfg, &p, &err) == RING_OK, "%s",
                err.message);
  return p;
}

/* With RENDER_KEEP=DIR, copies each picture there for a look. */
static void keep(const char *path) {
  static int n;
  const char *dir = getenv("RENDER_KEEP");
  if (dir == NULL)
    return;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s/picture-%02d.svg'", path, dir, n++);
  ck_assert_int_eq(system(cmd), 0);
}

/* Draws into a temporary file, checks it with xmllint when there is one,
 * and returns its text (malloc()'ed) and size. */
static char *draw(draw_fn fn, const render_input *in, size_t *size) {
  char path[] = "/tmp/test_render_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  FILE *f = fdopen(fd, "w+");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fn(f, in), 0);
  ck_assert_int_eq(fflush(f), 0);
  long n = ftell(f);
  ck_assert_int_gt(n, 0);
  char *text = calloc(1, (size_t)n + 1);
  rewind(f);
  ck_assert_uint_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
  ck_assert_msg(system(cmd) == 0, "%s is not well-formed XML (or no xmllint: libxml2-utils)", path);
  ck_assert_msg(strncmp(text, "<svg", 4) == 0 || strstr(text, "\n<svg") != NULL, "no <svg> root");
  keep(path);
  unlink(path);
  *size = (size_t)n;
  return text;
}

/* Whether svg holds an element whose text is exactly `want`. */
static bool has_text(const char *svg, const char *want) {
  size_t n = strlen(want);
  for (const char *p = strstr(svg, want); p != NULL; p = strstr(p + 1, want))
    if (p > svg && p[-1] == '>' && p[n] == '<')
      return true;
  return false;
}

/* The number of in's nodes named by a <text> element of svg: its whole
 * text, or the text's first word ("n4 (z4) 25.0%"). */
static uint32_t nodes_named(const char *svg, const render_input *in) {
  bool *seen = calloc(in->n_nodes, sizeof *seen);
  uint32_t n = 0;
  for (const char *p = strstr(svg, "<text"); p != NULL; p = strstr(p + 1, "<text")) {
    const char *b = strchr(p, '>'), *e = b ? strstr(b, "</text>") : NULL;
    if (e == NULL)
      break;
    size_t len = (size_t)(e - b - 1), word = strcspn(b + 1, " <");
    for (uint32_t i = 0; i < in->n_nodes; i++) {
      size_t il = strlen(in->nodes[i].id);
      if (!seen[i] && (il == len || il == word) && strncmp(b + 1, in->nodes[i].id, il) == 0) {
        seen[i] = true;
        n++;
      }
    }
  }
  free(seen);
  return n;
}

#define ASSERT_TEXT(svg, ...)                                                                      \
  do {                                                                                             \
    char want_[200];                                                                               \
    snprintf(want_, sizeof want_, __VA_ARGS__);                                                    \
    ck_assert_msg(has_text(svg, want_), "no text \"%s\" in the picture", want_);                   \
  } while (0)

/* ---------------------------------------------------------------- the writer */

START_TEST(text_is_escaped) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  svg_text(f, 1, 2, 10, "start", "", "%s", "a<b>&\"c'\x01");
  fclose(f);
  ck_assert_str_eq(buf, "<text x=\"1.0\" y=\"2.0\" font-size=\"10\" text-anchor=\"start\">"
                        "a&lt;b&gt;&amp;&quot;c&apos;?</text>\n");
  free(buf);
}
END_TEST

/* -------------------------------------------------------------------- a join */

/* 4 nodes in 4 zones, T 256, R 3; n4 joins zone z0. */
typedef struct join {
  test_cluster c;
  ring_plan *first, *join;
} join;

static join make_join(void) {
  join j = {cluster_make(4, 4), NULL, NULL};
  ring_plan_config cfg = config(256, 3);
  j.first = must_plan(NULL, &j.c, &cfg);
  cluster_add(&j.c, "n4", "z0", "z0-r1", 1.0, RING_NODE_JOINING);
  j.join = must_plan(ring_plan_target(j.first), &j.c, &cfg);
  return j;
}

static void join_free(join *j) {
  ring_plan_free(j->first);
  ring_plan_free(j->join);
  cluster_free(&j->c);
}

START_TEST(load_writes_before_after_and_target) {
  join j = make_join();
  render_input in;
  ck_assert_int_eq(render_input_from(ring_plan_target(j.first), j.join, "zone", &in), RING_OK);
  snprintf(in.title, sizeof in.title, "join <n4>");
  size_t size;
  char *svg = draw(render_load, &in, &size);
  ASSERT_TEXT(svg, "join &lt;n4&gt;");
  for (uint32_t i = 0; i < in.n_nodes; i++) {
    ring_plan_load l;
    ck_assert_int_eq(ring_plan_node_load(j.join, (uint16_t)i, &l), RING_OK);
    ASSERT_TEXT(svg, "%u", l.before);
    ASSERT_TEXT(svg, "%u", l.after);
    ASSERT_TEXT(svg, "%.1f", l.target);
    ASSERT_TEXT(svg, "%s", in.nodes[i].id);
  }
  for (int z = 0; z < 4; z++)
    ASSERT_TEXT(svg, "z%d", z);
  ck_assert_ptr_null(strstr(svg, "more nodes"));
  free(svg);
  render_input_free(&in);
  join_free(&j);
}
END_TEST

START_TEST(load_of_the_live_table) {
  join j = make_join();
  const ring_table *t = ring_plan_target(j.first);
  render_input in;
  ck_assert_int_eq(render_input_from(t, NULL, "zone", &in), RING_OK);
  ck_assert(!in.has_plan);
  ck_assert_ptr_null(in.pairs);
  size_t size;
  char *svg = draw(render_load, &in, &size);
  for (uint32_t i = 0; i < in.n_nodes; i++)
    ASSERT_TEXT(svg, "%u", ring_table_node_replicas(t, (uint16_t)i));
  ASSERT_TEXT(svg, "192.0"); /* 256 * 3 / 4 */
  free(svg);
  render_input_free(&in);
  join_free(&j);
}
END_TEST

START_TEST(flow_counts_every_pair) {
  join j = make_join();
  render_input in;
  ck_assert_int_eq(render_input_from(ring_plan_target(j.first), j.join, "zone", &in), RING_OK);
  size_t size;
  char *svg = draw(render_flow, &in, &size);
  uint32_t total = 0;
  ck_assert_uint_gt(in.n_pairs, 0);
  for (uint32_t i = 0; i < in.n_pairs; i++) {
    const rk_flow_pair *p = &in.pairs[i];
    ck_assert_str_eq(in.nodes[p->to].id, "n4"); /* a join: everything goes to n4 */
    ck_assert(i == 0 || in.pairs[i - 1].count >= p->count);
    ASSERT_TEXT(svg, "%s gives %u", in.nodes[p->from].id, p->count);
    ASSERT_TEXT(svg, "%u", p->count); /* the band's own number */
    total += p->count;
  }
  ck_assert_uint_eq(total, ring_plan_move_count(j.join));
  ASSERT_TEXT(svg, "n4 gets %u", total);
  free(svg);
  render_input_free(&in);
  join_free(&j);
}
END_TEST

START_TEST(ring_lists_every_share) {
  join j = make_join();
  render_input in;
  ck_assert_int_eq(render_input_from(ring_plan_target(j.first), j.join, "zone", &in), RING_OK);
  const ring_table *t = ring_plan_target(j.join);
  ck_assert_ptr_eq(in.table, t);
  size_t size;
  char *svg = draw(render_ring, &in, &size);
  for (uint32_t i = 0; i < in.n_nodes; i++)
    ASSERT_TEXT(svg, "%s (%s) %.1f%%", in.nodes[i].id, in.nodes[i].domain,
                100.0 * ring_table_node_replicas(t, (uint16_t)i) / (256 * 3));
  ASSERT_TEXT(svg, "256 tokens x 3 replicas");
  ck_assert_ptr_null(strstr(svg, "more nodes"));
  free(svg);
  render_input_free(&in);
  join_free(&j);
}
END_TEST

/* Every node-coloured rectangle of svg (data-node="ID") is in
 * rk_node_colour(ID); returns how many there are, and counts each node's
 * in seen[] (by index of in). */
static int node_fills(const char *svg, const render_input *in, int *seen) {
  int n = 0;
  for (const char *p = strstr(svg, " data-node=\""); p != NULL;
       p = strstr(p + 1, " data-node=\"")) {
    const char *id = p + strlen(" data-node=\""), *end = strchr(id, '"');
    const char *open = p;
    while (open > svg && *open != '<')
      open--;
    const char *fill = strstr(open, " fill=\"");
    ck_assert(end != NULL && fill != NULL && fill < p);
    uint32_t i = 0;
    while (i < in->n_nodes && !(strncmp(in->nodes[i].id, id, (size_t)(end - id)) == 0 &&
                                in->nodes[i].id[end - id] == '\0'))
      i++;
    ck_assert_msg(i < in->n_nodes, "data-node names no node: %.20s", id);
    char want[32];
    snprintf(want, sizeof want, " fill=\"%s\"", rk_node_colour(in->nodes[i].id));
    ck_assert_msg(strncmp(fill, want, strlen(want)) == 0, "%s is %.18s, not %s", in->nodes[i].id,
                  fill, want);
    seen[i]++;
    n++;
  }
  return n;
}

/* A node's colour is its id's (rk_node_colour), in the ring, load and flow
 * pictures alike: every node of a join in the ring's legend and the load
 * bars, every giver and receiver in the flow; the status page's "colour"
 * is the same function's (test_coord_status). */
START_TEST(a_node_keeps_its_colour) {
  join j = make_join();
  render_input in;
  ck_assert_int_eq(render_input_from(ring_plan_target(j.first), j.join, "zone", &in), RING_OK);
  draw_fn views[3] = {render_ring, render_load, render_flow};
  for (int v = 0; v < 3; v++) {
    int seen[64] = {0};
    ck_assert_uint_le(in.n_nodes, 64);
    size_t size;
    char *svg = draw(views[v], &in, &size);
    ck_assert_int_gt(node_fills(svg, &in, seen), 0);
    for (uint32_t i = 0; v < 2 && i < in.n_nodes; i++) /* the flow: givers and receivers */
      ck_assert_msg(seen[i] > 0, "view %d does not colour %s", v, in.nodes[i].id);
    free(svg);
  }
  render_input_free(&in);
  join_free(&j);
}
END_TEST

/* deploy/demo.sh's cluster: n1..n3 in z1..z3, T 4096, R 3; n4 joins in
 * z4. With RENDER_KEEP, the pictures README.md shows (docs/img/). */
START_TEST(demo_join) {
  test_cluster c = {0};
  for (int i = 1; i <= 3; i++) {
    char id[8], zone[8];
    snprintf(id, sizeof id, "n%d", i);
    snprintf(zone, sizeof zone, "z%d", i);
    cluster_add(&c, id, zone, zone, 1.0, RING_NODE_ACTIVE);
  }
  ring_plan_config cfg = config(4096, 3);
  ring_plan *first = must_plan(NULL, &c, &cfg);
  cluster_add(&c, "n4", "z4", "z4", 1.0, RING_NODE_JOINING);
  ring_plan *p = must_plan(ring_plan_target(first), &c, &cfg);
  render_input in;
  const draw_fn fns[] = {render_ring, render_load, render_flow, render_ring, render_load};
  const ring_plan *plans[] = {NULL, p, p, p, NULL};
  for (int k = 0; k < 5; k++) {
    const ring_table *live = k < 3 ? ring_plan_target(first) : ring_plan_target(p);
    ck_assert_int_eq(render_input_from(live, plans[k], "zone", &in), RING_OK);
    snprintf(in.title, sizeof in.title, "demo: %s", k < 3 ? "n4 joins" : "after the join");
    size_t size;
    char *svg = draw(fns[k], &in, &size);
    ck_assert_uint_lt(size, 64 * 1024);
    ASSERT_TEXT(svg, "%s", in.title);
    /* n4 is drawn once it is in; the flow names only the pairs that move */
    uint32_t want = fns[k] == render_flow ? in.n_pairs + 1 : (k == 0 ? 3 : 4);
    ck_assert_uint_eq(in.n_nodes, k == 0 ? 3 : 4);
    ck_assert_msg(nodes_named(svg, &in) == want, "picture %d names %u nodes, not %u", k,
                  nodes_named(svg, &in), want);
    if (fns[k] == render_ring)
      ASSERT_TEXT(svg, "4096 tokens x 3 replicas");
    for (uint32_t i = 0; fns[k] == render_load && i < in.n_nodes; i++)
      ASSERT_TEXT(svg, "%u", in.nodes[i].after);
    free(svg);
    render_input_free(&in);
  }
  ring_plan_free(p);
  ring_plan_free(first);
  cluster_free(&c);
}
END_TEST

/* ------------------------------------------------------------- 10,000 nodes */

#define BIG_NODES 10000
#define BIG_JOINS 40
#define BIG_BYTES_MAX (200u * 1024) /* each picture; the old ring was 1.4 MB at 4 nodes */

START_TEST(ten_thousand_nodes_stay_small) {
  test_cluster c = cluster_make(BIG_NODES, 50);
  ring_plan_config cfg = config(16384, 3);
  ring_plan *first = must_plan(NULL, &c, &cfg);
  for (int i = 0; i < BIG_JOINS; i++) {
    char id[16];
    snprintf(id, sizeof id, "new%d", i);
    cluster_add(&c, id, "z0", "z0-r0", 1.0, RING_NODE_JOINING);
  }
  ring_plan *p = must_plan(ring_plan_target(first), &c, &cfg);
  render_input in;
  ck_assert_int_eq(render_input_from(ring_plan_target(first), p, "zone", &in), RING_OK);
  snprintf(in.title, sizeof in.title, "%d nodes join %d", BIG_JOINS, BIG_NODES);
  const draw_fn fns[] = {render_load, render_flow, render_ring};
  char more[3][96];
  snprintf(more[0], sizeof more[0], "+%d more nodes not drawn", BIG_NODES + BIG_JOINS - 32);
  snprintf(more[1], sizeof more[1], "more givers and +%d more receivers", BIG_JOINS - 16);
  snprintf(more[2], sizeof more[2], "+%d more nodes", BIG_NODES + BIG_JOINS - 20);
  for (int k = 0; k < 3; k++) {
    size_t size;
    char *svg = draw(fns[k], &in, &size);
    ck_assert_msg(size < BIG_BYTES_MAX, "picture %d is %zu bytes", k, size);
    ck_assert_msg(strstr(svg, more[k]) != NULL, "picture %d says no \"%s\"", k, more[k]);
    if (fns[k] != render_flow) /* drawn: the nodes "+N more" leaves out */
      ck_assert_uint_eq(nodes_named(svg, &in), k == 0 ? 32 : 20);
    free(svg);
  }
  render_input_free(&in);
  ring_plan_free(p);
  ring_plan_free(first);
  cluster_free(&c);
}
END_TEST

static Suite *render_suite(void) {
  Suite *s = suite_create("render");
  TCase *tc = tcase_create("render");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, text_is_escaped);
  tcase_add_test(tc, load_writes_before_after_and_target);
  tcase_add_test(tc, load_of_the_live_table);
  tcase_add_test(tc, flow_counts_every_pair);
  tcase_add_test(tc, ring_lists_every_share);
  tcase_add_test(tc, a_node_keeps_its_colour);
  tcase_add_test(tc, demo_join);
  tcase_add_test(tc, ten_thousand_nodes_stay_small);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(render_suite()); }
