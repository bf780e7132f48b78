/*
 * cmd_render.c: `ringctl render --svg FILE`: draws the live table
 * (render_svg.c) into FILE.
 *
 * Usage: ringctl render --svg FILE
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>

enum { OPT_SVG };

static const ringctl_opt render_opts[] = {{"svg", OPT_SVG, true}, {NULL, 0, false}};

static const char help[] =
    "Usage: ringctl render --svg FILE [--json]\n"
    "\n"
    "Draws the live table as an SVG picture: the tokens around a circle, one ring per\n"
    "replica slot (slot 0, the primary, innermost) coloured by owner; an outer band\n"
    "coloured by the primary's failure domain; ticks where a move is pending; and a\n"
    "legend of the nodes.\n"
    "  --json  {\"svg\":FILE,\"version\":N}: what was drawn where\n";

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  if (id != OPT_SVG)
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  *(const char **)ud = value;
  return RINGCTL_EXIT_OK;
}

typedef struct picture {
  const ring_table *t;
  const char *level;
} picture;

static int fill_svg(FILE *f, void *ud) {
  const picture *p = ud;
  return ringctl_render_svg(f, p->t, p->level);
}

static int draw(ringctl_ctx *ctx, const rk_state *st, const ring_table *t, void *ud) {
  const char *path = ud;
  picture p = {t, st->config.failure_domain};
  if (ringctl_write_file(path, fill_svg, &p) != 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot write %s", path);
  if (!ctx->a->globals->json) {
    printf("drew version %llu to %s\n", (unsigned long long)ring_table_version(t), path);
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "svg", path);
  cJSON_AddNumberToObject(o, "version", (double)ring_table_version(t));
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  return ringctl_with_table(ctx, "nothing to draw", draw, ud);
}

int ringctl_cmd_render(ringctl_args *a) {
  const char *svg = NULL;
  bool help_shown = false;
  int rc = ringctl_parse(a, render_opts, help, apply, &svg, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (svg == NULL)
    return ringctl_usage_error(a, "--svg FILE is required");
  return ringctl_with_etcd(a, run, (void *)svg);
}

const ringctl_command ringctl_command_render = {
    "render", ringctl_cmd_render, "draw the ring as an SVG picture", render_opts, help};
