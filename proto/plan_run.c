/*
 * plan_run.c: ringkeeper.run.v1, a plan under execution (plan/active) or
 * finished (plan/history/<id>): proto/plan.md, plan_doc.h.
 *
 * Sections: states; starting and freeing; bitmaps; decoding; encoding.
 */
#include "proto_int.h"
#include "plan_doc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_FORMAT "ringkeeper.run.v1"
#define N_KEYS(a) (sizeof(a) / sizeof *(a))

/* ----------------------------------------------------------------- states */

static const char *const state_names[] = {"active", "paused", "cancelling",
                                          "done",   "failed", "cancelled"};

const char *rk_run_state_name(rk_run_state s) {
  return ring__enum_name(state_names, N_KEYS(state_names), (unsigned)s);
}

int rk_run_state_parse(const char *name) {
  return ring__enum_parse(state_names, N_KEYS(state_names), name);
}

/* ---------------------------------------------------- starting and freeing */

static size_t bitmap_bytes(uint32_t moves) { return ((size_t)moves + 7) / 8; }

int rk_run_start(const rk_plan_doc *plan, uint64_t now_ms, rk_run *out) {
  if (plan == NULL || out == NULL || plan->n_violations > 0)
    return RING_EINVAL;
  rk_run *r = calloc(1, sizeof *r);
  if (r == NULL)
    return RING_ENOMEM;
  r->plan = *plan;
  int rc = rk_plan_input_copy(&plan->input, &r->plan.input);
  const size_t nb = bitmap_bytes(plan->moves_total);
  if (rc == RING_OK && nb > 0 &&
      ((r->cursor.done = calloc(nb, 1)) == NULL || (r->cursor.inflight = calloc(nb, 1)) == NULL))
    rc = RING_ENOMEM;
  if (rc != RING_OK) {
    if (r->plan.input.nodes != plan->input.nodes)
      rk_plan_doc_free(&r->plan);
    free(r->cursor.done);
    free(r);
    return rc;
  }
  r->state = RK_RUN_ACTIVE;
  r->approved_ms = r->updated_ms = now_ms;
  r->cursor.version = plan->base_version;
  *out = *r;
  free(r);
  return RING_OK;
}

void rk_run_free(rk_run *r) {
  if (r == NULL)
    return;
  rk_plan_doc_free(&r->plan);
  free(r->cursor.done);
  free(r->cursor.inflight);
  r->cursor.done = r->cursor.inflight = NULL;
}

/* ---------------------------------------------------------------- bitmaps */

/* cursor.<name>: base64 of exactly ceil(moves/8) bytes, no bit set at or
 * past `moves`. *out is malloc()'ed (NULL for no moves). */
static int decode_bitmap(const cJSON *cur, const char *name, uint32_t moves, uint8_t **out,
                         ring_error *err) {
  const char *s = "";
  int rc = ring__json_string(cur, "cursor.", name, &s, err);
  if (rc != RING_OK)
    return rc;
  const size_t nb = bitmap_bytes(moves), want = ring__base64_encoded_len(nb), have = strlen(s);
  if (have != want)
    return ring__err(err, RING_EFIELD, "cursor.%s: %zu base64 characters, %u moves need %zu", name,
                     have, moves, want);
  if (nb == 0)
    return RING_OK;
  uint8_t *bits = malloc(nb);
  if (bits == NULL)
    return ring__err(err, RING_ENOMEM, "cursor.%s: out of memory", name);
  if (ring__base64_decode(s, have, bits, nb) != (long)nb) {
    free(bits);
    return ring__err(err, RING_EFIELD, "cursor.%s: not canonical base64", name);
  }
  if (moves % 8 != 0 && (bits[nb - 1] >> (moves % 8)) != 0) {
    free(bits);
    return ring__err(err, RING_EFIELD, "cursor.%s: bits set past move %u", name, moves);
  }
  *out = bits;
  return RING_OK;
}

/* Done and in-flight bits agree with each other and with the counters. */
static int check_bitmaps(const rk_cursor *c, uint32_t moves, ring_error *err) {
  uint32_t done = 0;
  bool any_inflight = false;
  for (size_t i = 0; i < bitmap_bytes(moves); i++) {
    if (c->done[i] & c->inflight[i])
      return ring__err(err, RING_EFIELD, "cursor.inflight: move %zu is already done",
                       i * 8 + (size_t)__builtin_ctz(c->done[i] & c->inflight[i]));
    done += (uint32_t)__builtin_popcount(c->done[i]);
    any_inflight |= c->inflight[i] != 0;
  }
  if (done != c->moves_done)
    return ring__err(err, RING_EFIELD, "cursor.moves_done: %u, the done bitmap holds %u",
                     c->moves_done, done);
  if (any_inflight && !c->pending)
    return ring__err(err, RING_EFIELD, "cursor.inflight: moves in flight while settled");
  return RING_OK;
}

static void write_bitmap(ring__sbuf *b, const uint8_t *bits, uint32_t moves) {
  const size_t nb = bitmap_bytes(moves), n64 = ring__base64_encoded_len(nb);
  ring__sb_reserve(b, n64 + 2);
  if (b->oom)
    return;
  b->p[b->len++] = '"';
  ring__base64_encode(bits, nb, b->p + b->len);
  b->len += n64;
  ring__sb_puts(b, "\"");
}

/* --------------------------------------------------------------- decoding */

static int decode_cursor(const cJSON *root, const rk_plan_doc *plan, rk_cursor *c,
                         ring_error *err) {
  static const char *const keys[] = {"wave",     "phase",      "version",   "done",
                                     "inflight", "moves_done", "bytes_done"};
  const cJSON *o = ring__json_object(root, "", "cursor", keys, N_KEYS(keys), err);
  if (o == NULL)
    return RING_EFIELD;
  uint64_t wave = 0, done = 0;
  const char *phase = "";
  int rc = ring__json_uint_at(o, "cursor.", "wave", 0, plan->waves, RING_EFIELD, &wave, err);
  if (rc == RING_OK && (rc = ring__json_string(o, "cursor.", "phase", &phase, err)) == RING_OK &&
      strcmp(phase, "pending") != 0 && strcmp(phase, "settled") != 0)
    rc = ring__err(err, RING_EFIELD, "cursor.phase: \"%.32s\" (want pending or settled)", phase);
  if (rc == RING_OK)
    rc = ring__json_uint_at(o, "cursor.", "version", 0, RING_VERSION_MAX, RING_EVERSION,
                            &c->version, err);
  if (rc == RING_OK)
    rc = decode_bitmap(o, "done", plan->moves_total, &c->done, err);
  if (rc == RING_OK)
    rc = decode_bitmap(o, "inflight", plan->moves_total, &c->inflight, err);
  if (rc == RING_OK)
    rc = ring__json_uint_at(o, "cursor.", "moves_done", 0, plan->moves_total, RING_EFIELD, &done,
                            err);
  if (rc == RING_OK)
    rc = ring__json_uint_at(o, "cursor.", "bytes_done", 0, RING_VERSION_MAX, RING_EFIELD,
                            &c->bytes_done, err);
  c->wave = (uint32_t)wave;
  c->pending = strcmp(phase, "pending") == 0;
  c->moves_done = (uint32_t)done;
  return rc == RING_OK ? check_bitmaps(c, plan->moves_total, err) : rc;
}

static int decode_plan(const cJSON *root, rk_plan_doc *plan, ring_error *err) {
  const cJSON *o = ring__json_field(root, "plan");
  if (!cJSON_IsObject(o))
    return ring__err(err, RING_EFIELD, "plan: %s", o ? "must be an object" : "missing");
  ring_error inner = {0};
  int rc = rk_plan_doc_from_json(o, plan, &inner);
  if (rc != RING_OK)
    return ring__err(err, rc, "plan.%s", inner.message);
  if (plan->n_violations > 0) {
    rk_plan_doc_free(plan);
    return ring__err(err, RING_EPLAN, "plan.violations: a refused plan cannot run");
  }
  return RING_OK;
}

static int decode_run(const cJSON *root, rk_run *r, ring_error *err) {
  const char *state = "";
  int rc = ring__json_string(root, "", "state", &state, err);
  if (rc == RING_OK && rk_run_state_parse(state) < 0)
    rc = ring__err(err, RING_EFIELD, "state: \"%.32s\" unknown", state);
  if (rc == RING_OK)
    r->state = (rk_run_state)rk_run_state_parse(state);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "approved_ms", 0, RING_VERSION_MAX, RING_EFIELD, &r->approved_ms,
                         err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "updated_ms", 0, RING_VERSION_MAX, RING_EFIELD, &r->updated_ms, err);
  if (rc == RING_OK)
    rc = ring__json_uint(root, "finished_ms", 0, RING_VERSION_MAX, RING_EFIELD, &r->finished_ms,
                         err);
  if (rc == RING_OK)
    rc = ring__json_string_copy(root, "", "reason", r->reason, sizeof r->reason, err);
  if (rc == RING_OK)
    rc = decode_plan(root, &r->plan, err);
  if (rc == RING_OK && (rc = decode_cursor(root, &r->plan, &r->cursor, err)) != RING_OK)
    rk_run_free(r);
  return rc;
}

int rk_run_decode(const char *json, size_t len, rk_run *out, ring_error *err) {
  static const char *const keys[] = {"format",     "plan",        "state",  "approved_ms",
                                     "updated_ms", "finished_ms", "cursor", "reason"};
  if (out == NULL)
    return ring__err(err, RING_EINVAL, "rk_run_decode: NULL argument");
  cJSON *root = NULL;
  rk_run *r = calloc(1, sizeof *r);
  int rc = r ? RING_OK : ring__err(err, RING_ENOMEM, "run: out of memory");
  if (rc == RING_OK)
    rc = ring__record_parse(json, len, RUN_FORMAT, keys, N_KEYS(keys), &root, err);
  if (rc == RING_OK)
    rc = decode_run(root, r, err);
  cJSON_Delete(root);
  if (rc == RING_OK)
    *out = *r;
  free(r);
  return rc;
}

/* --------------------------------------------------------------- encoding */

int rk_run_encode(const rk_run *r, char **json, size_t *len) {
  const size_t nb = r ? bitmap_bytes(r->plan.moves_total) : 0;
  if (r == NULL || json == NULL || (unsigned)r->state >= N_KEYS(state_names) ||
      (nb > 0 && (r->cursor.done == NULL || r->cursor.inflight == NULL)) ||
      memchr(r->reason, '\0', sizeof r->reason) == NULL)
    return RING_EINVAL;
  ring__sbuf b = {0};
  ring__sb_puts(&b, "{\"format\":\"" RUN_FORMAT "\",\"plan\":");
  rk__plan_doc_write(&b, &r->plan, NULL);
  ring__sb_printf(&b,
                  ",\"state\":\"%s\",\"approved_ms\":%" PRIu64 ",\"updated_ms\":%" PRIu64
                  ",\"finished_ms\":%" PRIu64 ",\"cursor\":{\"wave\":%u,\"phase\":\"%s\","
                  "\"version\":%" PRIu64 ",\"done\":",
                  rk_run_state_name(r->state), r->approved_ms, r->updated_ms, r->finished_ms,
                  r->cursor.wave, r->cursor.pending ? "pending" : "settled", r->cursor.version);
  write_bitmap(&b, r->cursor.done, r->plan.moves_total);
  ring__sb_puts(&b, ",\"inflight\":");
  write_bitmap(&b, r->cursor.inflight, r->plan.moves_total);
  ring__sb_printf(&b, ",\"moves_done\":%u,\"bytes_done\":%" PRIu64 "},\"reason\":",
                  r->cursor.moves_done, r->cursor.bytes_done);
  ring__sb_json_string(&b, r->reason);
  ring__sb_puts(&b, "}");
  return ring__sb_finish(&b, json, len);
}
