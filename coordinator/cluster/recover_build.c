/*
 * recover_build.c: the table `ringctl recover` publishes after an etcd
 * restore (cluster.h, "a restored etcd"): the newest table hosts had in
 * service, with every slot given to a host that reports holding the
 * token's arc. Nothing is inferred: a slot no holder can fill keeps its
 * named owner and is listed missing (the owner lacks the arc; the refill
 * of missing replicas rebuilds it), a token nobody holds is listed lost.
 *
 * Slot order: for each token, first the newest table's owners that hold
 * it keep their slots; then each empty slot takes its pending owner if
 * that one holds it (a move whose copy had landed); then any other holder
 * in node index order. Only then do leftover slots fall back to their
 * named owner (missing).
 */
#include "cluster.h"
#include "ringx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool bit(const uint8_t *b, size_t i) { return (b[i >> 3] >> (i & 7)) & 1u; }
static void bit_on(uint8_t *b, size_t i) { b[i >> 3] = (uint8_t)(b[i >> 3] | (1u << (i & 7))); }

void rk_recover_free(rk_recover *r) {
  if (r == NULL)
    return;
  ring_table_free(r->table);
  free(r->missing);
  free(r->lost);
  memset(r, 0, sizeof *r);
}

/* The report of node `id`, NULL when it sent none that parsed. */
static const rk_recovery *report_of(const rk_agent_recovery *reps, uint32_t n, const char *id) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(reps[i].id, id) == 0 && reps[i].r.seen_version != 0)
      return &reps[i].r;
  return NULL;
}

static bool listed(const char *const *ids, uint32_t n, const char *id) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(ids[i], id) == 0)
      return true;
  return false;
}

/* held: one T-bit set per node of `newest`, from the reports (nodes left
 * out with --without hold nothing). */
static int holdings(const ring_table *newest, const rk_agent_recovery *reps, uint32_t n_reps,
                    const char *const *without, uint32_t n_without, uint8_t **out,
                    ring_error *err) {
  uint32_t nodes = ring_table_node_count(newest), T = ring_table_tokens(newest);
  size_t bytes = (size_t)T / 8;
  uint8_t *held = calloc((size_t)nodes * bytes + 1, 1);
  char who[256] = "";
  uint32_t silent = 0;
  if (held == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory");
  for (uint16_t i = 0; i < nodes; i++) {
    const char *id = ring_table_node_id(newest, i);
    const rk_recovery *r = report_of(reps, n_reps, id);
    bool owner = ring_table_node_replicas(newest, i) > 0;
    if (r == NULL && owner && !listed(without, n_without, id) && silent++ < 8)
      snprintf(who + strlen(who), sizeof who - strlen(who), "%s%s", silent > 1 ? "," : "", id);
    for (uint32_t k = 0; r != NULL && !listed(without, n_without, id) && k < r->n_tokens; k++)
      if (r->tokens[k] < T)
        bit_on(held + (size_t)i * bytes, r->tokens[k]);
  }
  if (silent > 0) {
    free(held);
    return ring__err(err, RING_ENOTFOUND,
                     "%u owner%s of table %llu sent no recovery report: %s%s (wait for them, or "
                     "leave them out with --without ID,...)",
                     silent, silent == 1 ? "" : "s", (unsigned long long)ring_table_version(newest),
                     who, silent > 8 ? ",..." : "");
  }
  *out = held;
  return RING_OK;
}

/* An empty table like newest at `version`, with newest's nodes. */
static int skeleton(const ring_table *newest, uint64_t version, ring_table **out, ring_error *err) {
  ring_table_params p = {.cluster = ring_table_cluster(newest),
                         .failure_domain = ring_table_failure_domain(newest),
                         .version = version,
                         .seed = ring_table_seed(newest),
                         .tokens = ring_table_tokens(newest),
                         .replicas = ring_table_replicas(newest)};
  ring_table *t = NULL;
  int rc = ring_table_new(&p, &t, err);
  for (uint16_t i = 0; rc == RING_OK && i < ring_table_node_count(newest); i++) {
    const char *keys[RING_LABELS_MAX], *values[RING_LABELS_MAX];
    uint32_t n = ring_table_node_label_count(newest, i);
    for (uint32_t k = 0; k < n && k < RING_LABELS_MAX; k++)
      ring_table_node_label_at(newest, i, k, &keys[k], &values[k]);
    ring_node_spec s = {.id = ring_table_node_id(newest, i),
                        .addr = ring_table_node_addr(newest, i),
                        .label_keys = keys,
                        .label_values = values,
                        .n_labels = n < RING_LABELS_MAX ? n : RING_LABELS_MAX,
                        .weight = ring_table_node_weight(newest, i),
                        .state = ring_table_node_state(newest, i)};
    rc = ring_table_add_node(t, &s, NULL, err);
  }
  if (rc != RING_OK) {
    ring_table_free(t);
    return rc;
  }
  *out = t;
  return RING_OK;
}

static bool taken(const uint16_t *chosen, uint32_t R, uint16_t node) {
  for (uint32_t s = 0; s < R; s++)
    if (chosen[s] == node)
      return true;
  return false;
}

/* Chooses the owners of one token's slots into chosen[] (RING_NODE_NONE
 * where no holder is left). Returns how many slots holders fill. */
static uint32_t choose(const ring_table *newest, const uint8_t *held, size_t bytes, uint32_t token,
                       uint16_t chosen[RING_REPLICAS_MAX]) {
  uint32_t R = ring_table_replicas(newest), nodes = ring_table_node_count(newest), filled = 0;
  for (uint32_t s = 0; s < R; s++)
    chosen[s] = RING_NODE_NONE;
  for (uint32_t s = 0; s < R; s++) {
    uint16_t o = ring_table_owner(newest, token, s);
    if (o != RING_NODE_NONE && bit(held + (size_t)o * bytes, token) && !taken(chosen, R, o))
      chosen[s] = o, filled++;
  }
  for (uint32_t s = 0; s < R; s++) {
    uint16_t p = ring_table_pending(newest, token, s);
    if (chosen[s] == RING_NODE_NONE && p != RING_NODE_NONE && !taken(chosen, R, p) &&
        bit(held + (size_t)p * bytes, token))
      chosen[s] = p, filled++;
  }
  for (uint32_t s = 0; s < R; s++)
    for (uint16_t i = 0; chosen[s] == RING_NODE_NONE && i < nodes; i++)
      if (!taken(chosen, R, i) && bit(held + (size_t)i * bytes, token))
        chosen[s] = i, filled++;
  return filled;
}

/* Fills r->table's owners for every token, noting missing and lost. */
static int fill(const ring_table *newest, const uint8_t *held, rk_recover *r) {
  uint32_t T = ring_table_tokens(newest), R = ring_table_replicas(newest);
  size_t bytes = (size_t)T / 8;
  for (uint32_t t = 0; t < T; t++) {
    uint16_t chosen[RING_REPLICAS_MAX];
    if (choose(newest, held, bytes, t, chosen) == 0)
      r->lost[r->n_lost++] = t;
    for (uint32_t s = 0; s < R; s++) {
      uint16_t o = chosen[s];
      if (o == RING_NODE_NONE) { /* the named owner keeps the slot, lacking the arc */
        o = ring_table_owner(newest, t, s);
        if (taken(chosen, R, o)) /* a holder took its place elsewhere: the pending one */
          o = ring_table_pending(newest, t, s);
        r->missing[r->n_missing++] = (rk_recover_slot){t, s, o};
      }
      if (o != ring_table_owner(newest, t, s))
        r->n_moved++;
      int rc = ring_table_set_owner(r->table, t, s, o);
      if (rc != RING_OK)
        return rc;
    }
  }
  return RING_OK;
}

int rk_recover_build(const ring_table *newest, const rk_agent_recovery *reps, uint32_t n_reps,
                     const char *const *without, uint32_t n_without, uint64_t version,
                     rk_recover *out, ring_error *err) {
  uint8_t *held = NULL;
  int rc = holdings(newest, reps, n_reps, without, n_without, &held, err);
  if (rc != RING_OK)
    return rc;
  uint32_t T = ring_table_tokens(newest), R = ring_table_replicas(newest);
  rk_recover r = {0};
  r.missing = calloc((size_t)T * R, sizeof *r.missing);
  r.lost = calloc(T, sizeof *r.lost);
  if (r.missing == NULL || r.lost == NULL)
    rc = ring__err(err, RING_ENOMEM, "out of memory");
  if (rc == RING_OK)
    rc = skeleton(newest, version, &r.table, err);
  if (rc == RING_OK && (rc = fill(newest, held, &r)) != RING_OK)
    ring__err(err, rc, "setting owners failed: %s", ring_strerror(rc));
  if (rc == RING_OK)
    rc = ring_table_seal(r.table, err);
  free(held);
  if (rc != RING_OK) {
    rk_recover_free(&r);
    return rc;
  }
  *out = r;
  return RING_OK;
}
