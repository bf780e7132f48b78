/*
 * plan_doc.h: plan documents and runs (proto/plan.md). Internal to
 * Ringkeeper: part of the ringproto library, never of libring.
 *
 * Sections: the plan document; making and checking one; runs.
 *
 * A plan document holds the planner's input and a digest of its output;
 * rk_plan_doc_compute turns it back into the ring_plan, byte for byte, or
 * refuses. Decoders validate everything, name the offending field in err,
 * never read past len and leave *out untouched on failure.
 */
#ifndef RING_PROTO_PLAN_DOC_H
#define RING_PROTO_PLAN_DOC_H

#include "records.h"

/* ------------------------------------------------------ the plan document */

#define RK_PLAN_ID_LEN 16    /* hex digits */
#define RK_DIGEST_LEN 41     /* "xxh3-128:" + 32 hex digits */
#define RK_VIOLATIONS_MAX 16 /* reasons kept for a refused plan */
#define RK_REASON_MAX 256

typedef struct rk_plan_input {
  uint32_t tokens;
  uint32_t replicas;
  uint64_t seed;
  char failure_domain[RING_ID_MAX + 1];
  char best_effort[RING_ID_MAX + 1];
  uint32_t moves_per_node;
  uint32_t moves_per_domain;
  uint32_t moves_per_wave;
  uint32_t n_nodes;
  rk_node *nodes;       /* malloc()'ed; id, addr, labels, weight, state are used */
  ring_balance balance; /* tokens unless the document says bytes */
  uint8_t *arc_q;       /* bytes: per token, the size kept (sizes.h); malloc()'ed */
  uint64_t *arc_w;      /* bytes: rk_size_weight of each, what the planner weighs */
} rk_plan_input;

void rk_plan_input_free(rk_plan_input *in); /* frees the contents, not in */
/* Makes in balance by bytes, keeping the given per-token sizes (tokens
 * entries) as the document will. RING_ENOMEM, or RING_EINVAL when every
 * arc is empty (nothing to weigh). */
int rk_plan_input_weigh(rk_plan_input *in, const uint64_t *bytes);
/* A deep copy (nodes duplicated). */
int rk_plan_input_copy(const rk_plan_input *in, rk_plan_input *out);

typedef struct rk_plan_doc {
  char id[RK_PLAN_ID_LEN + 1]; /* "" for a refused plan */
  char cluster[RING_ID_MAX + 1];
  uint64_t base_version; /* 0: first placement */
  uint64_t created_ms;
  rk_plan_input input;
  uint32_t moves_total;
  uint32_t lower_bound;
  uint32_t waves;
  uint64_t bytes;
  uint32_t lost;
  uint32_t best_effort_violations;
  uint32_t n_violations; /* > 0: refused, digest "" */
  char violations[RK_VIOLATIONS_MAX][RK_REASON_MAX];
  char digest[RK_DIGEST_LEN + 1];
} rk_plan_doc;

void rk_plan_doc_free(rk_plan_doc *d); /* frees the contents, not d */

/* Decodes a plan document; a "moves" field, if present, is skipped. */
int rk_plan_doc_decode(const char *json, size_t len, rk_plan_doc *out, ring_error *err);
/* Parses d from an already parsed cJSON object (for runs and files). */
struct cJSON;
int rk_plan_doc_from_json(const struct cJSON *o, rk_plan_doc *out, ring_error *err);

/* Encodes d. With p (the computed plan, NULL for none) the "moves" field is
 * written too, node numbers as ids (proto/plan.md). */
int rk_plan_doc_encode(const rk_plan_doc *d, const ring_plan *p, char **json, size_t *len);

/* --------------------------------------------------- making and checking */

/* The ring_plan_config an input stands for (strings borrowed from in). */
void rk_plan_input_config(const rk_plan_input *in, const char *cluster, ring_plan_config *cfg);
/* Builder specs of the input's nodes; *specs and *labels are malloc()'ed
 * (free both); specs borrow in's strings and *labels. */
int rk_plan_input_specs(const rk_plan_input *in, ring_node_spec **specs, const char ***labels);

/* "xxh3-128:..." of a computed plan (proto/plan.md, digest). */
int rk_plan_digest(const ring_plan *p, char out[RK_DIGEST_LEN + 1]);

/* Computes the plan for (base, input): on success fills *out (a doc owning
 * a copy of input, id and digest set, created_ms = now_ms) and *plan (the
 * caller frees both). When the planner refuses (RING_EPLAN), *out is a
 * refused doc (violations filled, no digest), *plan is NULL and RING_OK is
 * returned: a refusal is a plan to show, not an error. Other failures
 * return a negative ring_errno. base NULL means the first placement. */
int rk_plan_doc_make(const ring_table *base, const char *cluster, const rk_plan_input *input,
                     uint64_t now_ms, rk_plan_doc *out, ring_plan **plan, ring_error *err);

/* Recomputes a document's plan from its base table (NULL when base_version
 * is 0) and checks it: RING_ECHECKSUM when the digest differs, RING_EVERSION
 * when base's version is not base_version, RING_EPLAN for a refused doc. */
int rk_plan_doc_compute(const rk_plan_doc *d, const ring_table *base, ring_plan **plan,
                        ring_error *err);

/* ----------------------------------------------------------------- runs */

typedef enum rk_run_state {
  RK_RUN_ACTIVE = 0,
  RK_RUN_PAUSED,
  RK_RUN_CANCELLING,
  RK_RUN_DONE,
  RK_RUN_FAILED,
  RK_RUN_CANCELLED
} rk_run_state;

typedef struct rk_cursor {
  uint32_t wave;
  bool pending;      /* phase "pending" (else "settled") */
  uint64_t version;  /* the table version the cursor refers to */
  uint8_t *done;     /* ceil(moves_total/8) bytes, malloc()'ed (NULL for 0 moves) */
  uint8_t *inflight; /* same size */
  uint32_t moves_done;
  uint64_t bytes_done;
} rk_cursor;

typedef struct rk_run {
  rk_plan_doc plan;
  rk_run_state state;
  uint64_t approved_ms;
  uint64_t updated_ms;
  uint64_t finished_ms; /* 0 while in plan/active */
  rk_cursor cursor;
  char reason[RK_REASON_MAX];
} rk_run;

const char *rk_run_state_name(rk_run_state s);
int rk_run_state_parse(const char *name); /* the state or RING_EINVAL */

/* A new run of plan (copied) approved at now_ms: active, settled at the
 * plan's base version, wave 0, nothing done. */
int rk_run_start(const rk_plan_doc *plan, uint64_t now_ms, rk_run *out);
void rk_run_free(rk_run *r); /* frees the contents, not r */
int rk_run_decode(const char *json, size_t len, rk_run *out, ring_error *err);
int rk_run_encode(const rk_run *r, char **json, size_t *len);

/* The 1-based wave to show people: the one in progress, the last when done. */
static inline uint32_t rk_run_wave_shown(const rk_run *r) {
  uint32_t w = r->cursor.wave + 1;
  return w > r->plan.waves ? r->plan.waves : w;
}

static inline bool rk_bit(const uint8_t *bits, uint32_t i) {
  return bits != NULL && (bits[i / 8] >> (i % 8)) & 1u;
}
static inline void rk_bit_set(uint8_t *bits, uint32_t i, bool on) {
  if (on)
    bits[i / 8] |= (uint8_t)(1u << (i % 8));
  else
    bits[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

#endif /* RING_PROTO_PLAN_DOC_H */
