/*
 * cluster_missing.c: the token-replicas hosts report missing (missing/<id>,
 * proto/etcd.md), seen against the table in service (cluster.h, "missing
 * replicas").
 *
 * Sections: the view; JSON and text.
 *
 * A record names what its host found at its last check, for the version it
 * had then. Only tokens the table in service still makes that host own are
 * counted: a record a version behind never names a replica the table has
 * moved away, and the agent rewrites it at its next check. A host that
 * writes no record is never counted as missing anything (an absent answer
 * proves nothing either way; its arc server says "not held" to receivers).
 */
#include "cluster.h"

#include <cjson/cJSON.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- the view */

/* The tokens of m the table makes node `me` own, into h (malloc()'ed). */
static int host_tokens(const ring_table *t, uint16_t me, const rk_missing *m, rk_missing_host *h) {
  uint32_t r = ring_table_replicas(t), T = ring_table_tokens(t);
  h->tokens = malloc((m->n_tokens ? m->n_tokens : 1) * sizeof *h->tokens);
  if (h->tokens == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < m->n_tokens; i++) {
    uint32_t tok = m->tokens[i];
    for (uint32_t s = 0; tok < T && s < r; s++)
      if (ring_table_owner(t, tok, s) == me) {
        h->tokens[h->n++] = tok;
        break;
      }
  }
  return RING_OK;
}

/* Whether every owner of token reports it missing (counts[] per token). */
static bool lost(const ring_table *t, uint32_t token, const uint8_t *counts) {
  uint32_t owners = 0;
  for (uint32_t s = 0; s < ring_table_replicas(t); s++)
    owners += ring_table_owner(t, token, s) != RING_NODE_NONE;
  return owners > 0 && counts[token] >= owners;
}

static int find_lost(const ring_table *t, rk_missing_view *v) {
  uint32_t T = ring_table_tokens(t);
  uint8_t *counts = calloc(T, 1); /* R <= 7: a byte per token is enough */
  if (counts == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < v->n_hosts; i++)
    for (uint32_t k = 0; k < v->hosts[i].n; k++)
      counts[v->hosts[i].tokens[k]]++;
  v->lost = malloc(T * sizeof *v->lost);
  for (uint32_t tok = 0; v->lost != NULL && tok < T; tok++)
    if (counts[tok] > 0 && lost(t, tok, counts))
      v->lost[v->n_lost++] = tok;
  free(counts);
  return v->lost != NULL ? RING_OK : RING_ENOMEM;
}

int rk_missing_view_make(const rk_state *s, const ring_table *t, rk_missing_view *out) {
  rk_missing_view v = {0};
  if (t != NULL && s->n_missing > 0 && (v.hosts = calloc(s->n_missing, sizeof *v.hosts)) == NULL)
    return RING_ENOMEM;
  int rc = RING_OK;
  for (uint32_t i = 0; t != NULL && rc == RING_OK && i < s->n_missing; i++) {
    const rk_agent_missing *am = &s->missing[i];
    int me = ring_table_find_node(t, am->id);
    rk_missing_host *h = &v.hosts[v.n_hosts];
    if (me < 0 || am->m.n_tokens == 0)
      continue;
    snprintf(h->id, sizeof h->id, "%s", am->id);
    h->m = &am->m;
    rc = host_tokens(t, (uint16_t)me, &am->m, h);
    if (rc == RING_OK && h->n == 0)
      free(h->tokens), h->tokens = NULL; /* all moved away since the record: nothing missing */
    else if (rc == RING_OK)
      v.replicas += h->n, v.n_hosts++;
  }
  if (rc == RING_OK && v.n_hosts > 0)
    rc = find_lost(t, &v);
  if (rc != RING_OK) { /* host_tokens left nothing allocated for the host it failed on */
    rk_missing_view_free(&v);
    return rc;
  }
  *out = v;
  return RING_OK;
}

void rk_missing_view_free(rk_missing_view *v) {
  if (v == NULL)
    return;
  for (uint32_t i = 0; i < v->n_hosts; i++)
    free(v->hosts[i].tokens);
  free(v->hosts);
  free(v->lost);
  memset(v, 0, sizeof *v);
}

/* ----------------------------------------------------------- JSON and text */

static cJSON *tokens_json(const uint32_t *t, uint32_t n, uint32_t max) {
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; a != NULL && i < n && i < max; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber(t[i]));
  return a;
}

static int by_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* The record's reasons for the tokens the view counts. */
static cJSON *failing_json(const rk_missing_host *h) {
  cJSON *a = cJSON_CreateArray();
  for (uint32_t i = 0; a != NULL && h->m != NULL && i < h->m->n_failing; i++) {
    const rk_failing *f = &h->m->failing[i];
    if (bsearch(&f->token, h->tokens, h->n, sizeof *h->tokens, by_u32) == NULL)
      continue;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "token", f->token);
    cJSON_AddNumberToObject(o, "attempts", f->attempts);
    cJSON_AddStringToObject(o, "error", f->error);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

cJSON *rk_missing_json(const rk_missing_view *v) {
  cJSON *o = cJSON_CreateObject(), *hosts = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "replicas", v->replicas);
  cJSON_AddItemToObject(o, "hosts", hosts);
  for (uint32_t i = 0; hosts != NULL && i < v->n_hosts; i++) {
    const rk_missing_host *h = &v->hosts[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "host", h->id);
    cJSON_AddNumberToObject(e, "count", h->n);
    cJSON_AddItemToObject(e, "tokens", tokens_json(h->tokens, h->n, RK_MISSING_SHOWN));
    cJSON_AddItemToObject(e, "failing", failing_json(h));
    cJSON_AddItemToArray(hosts, e);
  }
  cJSON_AddItemToObject(o, "lost", tokens_json(v->lost, v->n_lost, UINT32_MAX));
  return o;
}

/* Appends "a, b, c" (at most max of them, then ", ...") to buf at *at. */
static void list_tokens(char *buf, size_t size, size_t *at, const uint32_t *t, uint32_t n,
                        uint32_t max) {
  for (uint32_t i = 0; i < n && i < max && *at < size; i++)
    *at += (size_t)snprintf(buf + *at, size - *at, "%s%" PRIu32, i ? ", " : "", t[i]);
  if (n > max && *at < size)
    *at += (size_t)snprintf(buf + *at, size - *at, ", ...");
}

const char *rk_missing_text(const rk_missing_view *v, char *buf, size_t size) {
  size_t at = (size_t)snprintf(buf, size, "%" PRIu32 " token-replicas missing (", v->replicas);
  for (uint32_t i = 0; i < v->n_hosts && i < 4 && at < size; i++) {
    at += (size_t)snprintf(buf + at, size - at, "%s%s: ", i ? "; " : "", v->hosts[i].id);
    list_tokens(buf, size, &at, v->hosts[i].tokens, v->hosts[i].n, 3);
  }
  if (v->n_hosts > 4 && at < size)
    at += (size_t)snprintf(buf + at, size - at, "; %" PRIu32 " more hosts", v->n_hosts - 4);
  if (v->n_lost > 0 && at < size) {
    at += (size_t)snprintf(buf + at, size - at, "; %" PRIu32 " lost: ", v->n_lost);
    list_tokens(buf, size, &at, v->lost, v->n_lost, 8);
  }
  if (at < size)
    snprintf(buf + at, size - at, ")");
  return buf;
}
