/*
 * cmd_render.c: `ringctl render`: draws the live table, or a plan, as an
 * SVG picture (render.h): per-node load, the plan's flows, or the ring.
 *
 * Usage: ringctl render [--what load|flow|ring] [--svg FILE]
 *                       [--plan FILE | --proposed] [--json]
 *
 * Sections: arguments; which plan; drawing; the command.
 */
#include "render.h"
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* --------------------------------------------------------------- arguments */

enum { OPT_SVG, OPT_WHAT, OPT_PLAN, OPT_PROPOSED };

static const ringctl_opt render_opts[] = {{"svg", OPT_SVG, true},
                                          {"what", OPT_WHAT, true},
                                          {"plan", OPT_PLAN, true},
                                          {"proposed", OPT_PROPOSED, false},
                                          {NULL, 0, false}};

static const char help[] =
    "Usage: ringctl render [--what load|flow|ring] [--svg FILE] [--plan FILE | --proposed]\n"
    "\n"
    "Draws an SVG picture (1280x800) of the live table or of a plan:\n"
    "  ring  (the default) the token space as 64 sectors, each a stack of its owners'\n"
    "        shares, with a legend of the 20 nodes owning most (+N more in grey);\n"
    "        with a plan, the table it leads to\n"
    "  load  token-replicas per node against its weighted target, grouped by failure\n"
    "        domain; with a plan, before and after it. At most 32 nodes: those\n"
    "        furthest from their target\n"
    "  flow  a plan's moves: who gives how many to whom, givers left, receivers\n"
    "        right, grouped by failure domain (16 a side; the rest as \"other\").\n"
    "        Without --plan, the proposed plan\n"
    "\n"
    "Options:\n"
    "  --what WHAT      load, flow or ring (default ring)\n"
    "  --svg FILE       where to write it (default WHAT.svg); written whole or not at all\n"
    "  --plan FILE      a plan saved by ringctl plan -o (recomputed and checked)\n"
    "  --proposed       the coordinator's proposed plan\n"
    "  --json           {\"file\",\"what\",\"bytes\",\"version\"} instead of a line of text\n";

typedef enum what { WHAT_RING, WHAT_LOAD, WHAT_FLOW } what;
static const char *const what_names[] = {"ring", "load", "flow"};

typedef struct render_settings {
  const char *svg; /* NULL: WHAT.svg */
  what what;
  const char *plan; /* a plan file, or NULL */
  bool proposed;
} render_settings;

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  render_settings *s = ud;
  if (id == OPT_SVG)
    s->svg = value;
  else if (id == OPT_PLAN)
    s->plan = value;
  else if (id == OPT_PROPOSED)
    s->proposed = true;
  else if (id != OPT_WHAT)
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  for (int w = 0; id == OPT_WHAT && w < 3; w++)
    if (strcmp(value, what_names[w]) == 0) {
      s->what = (what)w;
      return RINGCTL_EXIT_OK;
    }
  if (id == OPT_WHAT)
    return ringctl_usage_error(a, "--what: \"%s\" is not load, flow or ring", value);
  return RINGCTL_EXIT_OK;
}

/* -------------------------------------------------------------- which plan */

/* The plan asked for, recomputed into *plan (NULL: none asked for); its
 * id into id[]. */
static int pick_plan(ringctl_ctx *ctx, const render_settings *s, const rk_state *st,
                     ring_plan **plan, char id[RK_PLAN_ID_LEN + 1]) {
  *plan = NULL;
  id[0] = '\0';
  rk_plan_doc file;
  const rk_plan_doc *d = s->plan != NULL ? &file : st->has_proposed ? &st->proposed : NULL;
  if (s->plan == NULL && !s->proposed && s->what != WHAT_FLOW)
    return RINGCTL_EXIT_OK;
  if (s->plan != NULL && ringctl_plan_load(ctx, s->plan, &file) != RINGCTL_EXIT_OK)
    return RINGCTL_EXIT_FAILURE;
  if (d == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "no plan is proposed: nothing to draw");
  int rc = d == &file ? ringctl_plan_compute_file(ctx, s->plan, d, plan)
                      : ringctl_plan_compute(ctx, d, plan);
  if (rc == RINGCTL_EXIT_OK && *plan == NULL)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "plan %s was refused: it moves nothing",
                     d->id[0] ? d->id : "(refused)");
  snprintf(id, RK_PLAN_ID_LEN + 1, "%s", d->id);
  if (d == &file)
    rk_plan_doc_free(&file);
  return rc;
}

/* ----------------------------------------------------------------- drawing */

typedef struct picture {
  what what;
  const render_input *in;
} picture;

static int fill_svg(FILE *f, void *ud) {
  const picture *p = ud;
  if (p->what == WHAT_LOAD)
    return render_load(f, p->in);
  return p->what == WHAT_FLOW ? render_flow(f, p->in) : render_ring(f, p->in);
}

static void title(render_input *in, const ring_table *live, const char *id, what w) {
  static const char *const heads[] = {"Ring", "Load per node", "Moves between nodes"};
  unsigned long long v = (unsigned long long)ring_table_version(live);
  if (id[0])
    snprintf(in->title, sizeof in->title, "%s: %s, plan %s (v%llu -> v%llu)", heads[w],
             ring_table_cluster(live), id, v, (unsigned long long)ring_table_version(in->table));
  else
    snprintf(in->title, sizeof in->title, "%s: %s, version %llu", heads[w],
             ring_table_cluster(live), v);
}

/* Writes the picture and says where: a line, or --json's object. */
static int draw(ringctl_ctx *ctx, const render_settings *s, render_input *in) {
  char def[16];
  snprintf(def, sizeof def, "%s.svg", what_names[s->what]);
  const char *path = s->svg != NULL ? s->svg : def;
  picture p = {s->what, in};
  if (ringctl_write_file(path, fill_svg, &p) != 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot write %s: %s", path, strerror(errno));
  FILE *f = fopen(path, "rb");
  long bytes = f != NULL && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (f != NULL)
    fclose(f);
  if (!ctx->a->globals->json) {
    printf("drew %s of version %llu to %s (%ld bytes)\n", what_names[s->what],
           (unsigned long long)ring_table_version(in->table), path, bytes);
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "file", path);
  cJSON_AddStringToObject(o, "what", what_names[s->what]);
  cJSON_AddNumberToObject(o, "bytes", (double)bytes);
  cJSON_AddNumberToObject(o, "version", (double)ring_table_version(in->table));
  return ringctl_json_emit(o);
}

static int draw_with(ringctl_ctx *ctx, const render_settings *s, const rk_state *st,
                     const ring_table *live) {
  ring_plan *plan = NULL;
  char id[RK_PLAN_ID_LEN + 1];
  int rc = pick_plan(ctx, s, st, &plan, id);
  render_input in;
  if (rc == RINGCTL_EXIT_OK &&
      render_input_from(live, plan, st->config.failure_domain, &in) != RING_OK)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  if (rc == RINGCTL_EXIT_OK) {
    title(&in, live, id, s->what);
    rc = draw(ctx, s, &in);
    render_input_free(&in);
  }
  ring_plan_free(plan);
  return rc;
}

/* ------------------------------------------------------------- the command */

static int run(ringctl_ctx *ctx, void *ud) {
  rk_state st;
  ring_table *live = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_PLANS, &st, &live);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (live == NULL)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "no table is published yet: nothing to draw");
  else
    rc = draw_with(ctx, ud, &st, live);
  ring_table_free(live);
  rk_state_free(&st);
  return rc;
}

int ringctl_cmd_render(ringctl_args *a) {
  render_settings s = {NULL, WHAT_RING, NULL, false};
  bool help_shown = false;
  int rc = ringctl_parse(a, render_opts, help, apply, &s, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (s.plan != NULL && s.proposed)
    return ringctl_usage_error(a, "--plan FILE or --proposed, not both");
  return ringctl_with_etcd(a, run, &s);
}

const ringctl_command ringctl_command_render = {
    "render", ringctl_cmd_render, "draw the ring as an SVG picture", render_opts, help};
