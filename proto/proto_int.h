/*
 * proto_int.h: helpers the control-plane codecs of proto/ share (records,
 * journal, plan documents and runs, the arc manifest). Internal to the
 * ringproto library; built on ringx's codec helpers (util/ringx.h).
 */
#ifndef RING_PROTO_INT_H
#define RING_PROTO_INT_H

#include "ringx.h"

/* ------------------------------------------ records.c, for plan_doc.c */

struct rk_node;
/* An empty table to validate node specs against (ring_table_add_node
 * checks id, addr, labels, weight, and repeated ids). */
int rk__scratch_table(ring_table **out, ring_error *err);
/* A node record of table.md (id, addr, labels, weight, state) into *out,
 * validated and added to scratch; *out untouched on failure. */
int rk__plan_node_decode(const cJSON *o, const char *where, ring_table *scratch,
                         struct rk_node *out, ring_error *err);
void rk__plan_node_encode(ring__sbuf *b, const struct rk_node *n);

/* The token array `name`: strictly ascending integers below
 * RING_TOKENS_MAX, at least `min` of them, into a malloc()'ed *out (NULL
 * when empty). On failure *out may hold a partial array the caller frees. */
int rk__token_list_decode(const cJSON *root, const char *name, uint32_t min, uint32_t **out,
                          uint32_t *n_out, ring_error *err);
/* What rk__token_list_decode accepts, for the encoders. */
bool rk__token_list_valid(const uint32_t *t, uint32_t n, uint32_t min);
/* Appends "name":[t0,t1,...]. */
void rk__token_list_encode(ring__sbuf *b, const char *name, const uint32_t *t, uint32_t n);

/* ------------------------------------------ plan_doc.c, for plan_run.c */

struct rk_plan_doc;
/* Appends a plan document (with "moves" when p is not NULL). */
void rk__plan_doc_write(ring__sbuf *b, const struct rk_plan_doc *d, const ring_plan *p);

#endif /* RING_PROTO_INT_H */
