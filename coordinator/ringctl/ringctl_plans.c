/*
 * ringctl_plans.c: plan documents in ringctl (ringctl_etcd.h, "plans"):
 * loading saved ones, recomputing their moves, showing and saving them.
 * Shared by plan, plan --what-if, apply and render.
 *
 * Sections: loading; recomputing; showing; saving.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- loading */

#define PLAN_FILE_MAX (64u << 20) /* as apply has always read: bounds the read, not the planner */

/* Reads a whole file into a malloc()'ed buffer. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf = f ? malloc(PLAN_FILE_MAX + 1) : NULL;
  if (buf != NULL) {
    *len = fread(buf, 1, PLAN_FILE_MAX + 1, f);
    if (ferror(f) || *len > PLAN_FILE_MAX) {
      free(buf);
      buf = NULL;
    }
  }
  if (f != NULL)
    fclose(f);
  return buf;
}

int ringctl_plan_load(const ringctl_ctx *ctx, const char *path, rk_plan_doc *d) {
  size_t len = 0;
  char *json = read_file(path, &len);
  if (json == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot read plan file %s", path);
  ring_error err = {RING_OK, ""};
  int rc = rk_plan_doc_decode(json, len, d, &err);
  free(json);
  if (rc != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "%s is not a plan: %s", path, err.message);
  return RINGCTL_EXIT_OK;
}

/* ------------------------------------------------------------- recomputing */

int ringctl_plan_compute(ringctl_ctx *ctx, const rk_plan_doc *d, ring_plan **plan) {
  *plan = NULL;
  if (d->n_violations > 0)
    return RINGCTL_EXIT_OK;
  ring_table *base = NULL;
  int rc = d->base_version ? ringctl_read_table(ctx, d->base_version, &base) : RINGCTL_EXIT_OK;
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  ring_error err = {RING_OK, ""};
  int ring_rc = rk_plan_doc_compute(d, base, plan, &err);
  ring_table_free(base);
  if (ring_rc == RING_ECHECKSUM)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "plan %s does not match its digest (edited, or made by another "
                       "release of the planner): refusing it",
                       d->id);
  if (ring_rc != RING_OK)
    return ringctl_fail(ctx, ring_rc, &err, "recomputing the plan");
  return RINGCTL_EXIT_OK;
}

/* ----------------------------------------------------------------- showing */

int ringctl_plan_show(const ringctl_ctx *ctx, const rk_plan_doc *d, const ring_plan *plan,
                      const rk_config *cfg, const uint64_t *arc_bytes) {
  if (ctx->a->globals->json)
    return ringctl_json_emit(ringctl_plan_json(d, plan, cfg, arc_bytes));
  ringctl_plan_text(stdout, d, plan, cfg, arc_bytes);
  return RINGCTL_EXIT_OK;
}

/* ------------------------------------------------------------------ saving */

/* The encoded document (a string) and a newline. */
static int fill_json(FILE *f, void *ud) {
  const char *json = ud;
  return fputs(json, f) == EOF || fputc('\n', f) == EOF ? -1 : 0;
}

int ringctl_plan_save(const ringctl_ctx *ctx, const rk_plan_doc *d, const ring_plan *plan,
                      const char *path) {
  char *json = NULL;
  size_t len = 0;
  if (rk_plan_doc_encode(d, plan, &json, &len) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot encode the plan");
  int rc = ringctl_write_file(path, fill_json, json);
  free(json);
  if (rc != 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot write %s", path);
  fprintf(stderr, "%s: saved plan %s (base version %llu) to %s\n", ctx->a->prog,
          d->id[0] ? d->id : "(refused)", (unsigned long long)d->base_version, path);
  return RINGCTL_EXIT_OK;
}
