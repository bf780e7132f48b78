/*
 * ringctl_plans.c: plan documents in ringctl (ringctl_etcd.h, "plans"):
 * loading saved ones, recomputing their moves, showing and saving them.
 * Shared by plan, plan --what-if, apply and render.
 *
 * Sections: loading; recomputing; showing; saving.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- loading */

#define PLAN_FILE_MAX (64u << 20) /* as apply has always read: bounds the read, not the planner */

/* Reads a whole file into a malloc()'ed buffer; NULL with errno set. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf = f ? malloc(PLAN_FILE_MAX + 1) : NULL;
  if (buf != NULL) {
    *len = fread(buf, 1, PLAN_FILE_MAX + 1, f);
    if (ferror(f) || *len > PLAN_FILE_MAX) {
      int err = ferror(f) ? errno : EFBIG; /* over 64 MiB: "File too large" */
      free(buf);
      buf = NULL;
      errno = err;
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
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot read plan file %s: %s", path,
                       strerror(errno));
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

/* The "moves" of a plan document's JSON (text), parsed; NULL when absent. */
static cJSON *moves_of(const char *json, size_t len) {
  cJSON *doc = cJSON_ParseWithLength(json, len);
  cJSON *moves = cJSON_DetachItemFromObjectCaseSensitive(doc, "moves");
  cJSON_Delete(doc);
  return moves;
}

/* Whether the file's moves (if it lists any) are plan's, as the document
 * with plan would list them. The moves are never read from a file (they
 * are recomputed), so a file whose moves say otherwise was edited: a run
 * of other moves than its reader reviewed must not start quietly. */
static int check_moves(const ringctl_ctx *ctx, const char *path, const rk_plan_doc *d,
                       const ring_plan *plan) {
  size_t len = 0, ours_len = 0;
  char *json = read_file(path, &len), *ours = NULL;
  if (json == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot read plan file %s: %s", path,
                       strerror(errno));
  cJSON *theirs = moves_of(json, len), *want = NULL;
  free(json);
  if (theirs != NULL && rk_plan_doc_encode(d, plan, &ours, &ours_len) == RING_OK)
    want = moves_of(ours, ours_len);
  bool same = theirs == NULL || cJSON_Compare(theirs, want, true);
  cJSON_Delete(theirs);
  cJSON_Delete(want);
  free(ours);
  if (same)
    return RINGCTL_EXIT_OK;
  return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                     "plan file %s: its \"moves\" are not the moves plan %s recomputes from its "
                     "input and base version (were they edited?): refusing it; the moves follow "
                     "from the input, so change that (ringctl plan --what-if) instead",
                     path, d->id);
}

int ringctl_plan_compute_file(ringctl_ctx *ctx, const char *path, const rk_plan_doc *d,
                              ring_plan **plan) {
  int rc = ringctl_plan_compute(ctx, d, plan);
  if (rc == RINGCTL_EXIT_OK && *plan != NULL &&
      (rc = check_moves(ctx, path, d, *plan)) != RINGCTL_EXIT_OK) {
    ring_plan_free(*plan);
    *plan = NULL;
  }
  return rc;
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
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "cannot write %s: %s", path, strerror(errno));
  fprintf(stderr, "%s: saved plan %s (base version %llu) to %s\n", ctx->a->prog,
          d->id[0] ? d->id : "(refused)", (unsigned long long)d->base_version, path);
  return RINGCTL_EXIT_OK;
}
