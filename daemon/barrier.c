/*
 * barrier.c: the version barrier (barrier.h).
 *
 * Sections:
 *   1. acks: one acks/ record
 *   2. the rule
 *   3. the agent's read: alive/, acks/ and clients/ at one revision
 */
#include "barrier.h"

#include "ringx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- 1. acks */

int rd_ack_parse(const ring_kv *kv, size_t prefix_len, rd_ack *a, char *why, size_t size) {
  a->version = 0;
  int ok = rd_host_check(RK_HOST_ACK, kv, prefix_len, a->id, why, size);
  if (ok <= 0)
    return ok;
  ring_error e = {RING_OK, ""};
  if (rk_ack_decode((const char *)kv->value, kv->value_len, &a->version, &e) == RING_OK)
    return 1;
  a->version = 0;
  snprintf(why, size, "%s", e.message);
  return 0;
}

/* ------------------------------------------------------------ 2. the rule */

static int by_id(const void *key, const void *elem) {
  return strcmp((const char *)key, (const char *)elem); /* every element starts with its id */
}

static bool has_alive(const rd_barrier_view *v, const char *id) {
  return v->n_alive && bsearch(id, v->alive, v->n_alive, v->alive_size, by_id) != NULL;
}

static uint64_t acked(const rd_barrier_view *v, const char *id) {
  const rd_ack *a = v->n_acks ? bsearch(id, v->acks, v->n_acks, sizeof *v->acks, by_id) : NULL;
  return a ? a->version : 0;
}

const char *rd_barrier_laggard(const rd_barrier_view *v, const ring_table *t, uint64_t version) {
  for (uint32_t i = 0; t && i < ring_table_node_count(t); i++) {
    const char *id = ring_table_node_id(t, (uint16_t)i);
    if (has_alive(v, id) && acked(v, id) < version)
      return id;
  }
  for (uint32_t i = 0; i < v->n_clients; i++)
    if (acked(v, v->clients[i]) < version)
      return v->clients[i];
  return NULL;
}

/* ------------------------------------------------------ 3. the agent's read */

/* The ids of r's keys that name one (alive/, clients/): their values are
 * only checked, a bad one counted. */
static int read_names(const ring_kvs *r, size_t plen, rk_host_kind kind,
                      char (**out)[RING_ID_MAX + 1], uint32_t *n, uint32_t *n_bad,
                      ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  if ((*out = calloc(r->n, sizeof **out)) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u %s keys", r->n,
                     rk_host_kind_name(kind));
  for (uint32_t i = 0; i < r->n; i++) {
    char why[RING_ERROR_MESSAGE_MAX];
    int ok = rd_host_check(kind, &r->kvs[i], plen, (*out)[*n], why, sizeof why);
    *n_bad += ok <= 0;
    *n += ok >= 0;
  }
  return RING_OK;
}

static int read_acks(const ring_kvs *r, size_t plen, rd_barrier *b, ring_error *err) {
  if (r->n == 0)
    return RING_OK;
  if ((b->acks = calloc(r->n, sizeof *b->acks)) == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory reading %u acks", r->n);
  for (uint32_t i = 0; i < r->n; i++) {
    char why[RING_ERROR_MESSAGE_MAX];
    int ok = rd_ack_parse(&r->kvs[i], plen, &b->acks[b->n_acks], why, sizeof why);
    b->n_bad += ok <= 0;
    b->n_acks += ok >= 0;
  }
  return RING_OK;
}

static const rk_host_kind barrier_kinds[] = {RK_HOST_ALIVE, RK_HOST_ACK, RK_HOST_CLIENT};

static int read_once(ring_etcd *c, const char *cluster, rd_barrier *out, ring_error *err) {
  rd_barrier b = {0};
  char key[RK_KEY_MAX];
  if (rk_key(key, cluster, rk_host_kind_dir(RK_HOST_ALIVE)) < 0)
    return ring__err(err, RING_EINVAL, "cluster name \"%.63s\" is not valid", cluster);
  ring_range_opts o = {.prefix = true, .count_only = true};
  ring_kvs r;
  int rc = ring_etcd_range(c, key, strlen(key), &o, &r, err);
  if (rc != RING_OK)
    return rc;
  b.revision = r.revision;
  ring_kvs_clear(&r);
  for (size_t i = 0; rc == RING_OK && i < sizeof barrier_kinds / sizeof *barrier_kinds; i++) {
    rk_host_kind kind = barrier_kinds[i];
    rk_key(key, cluster, rk_host_kind_dir(kind));
    size_t plen = strlen(key);
    if ((rc = rd_host_pages(c, key, plen, b.revision, rk_host_value_max(kind), &r, err)) != RING_OK)
      break;
    if (kind == RK_HOST_ACK)
      rc = read_acks(&r, plen, &b, err);
    else if (kind == RK_HOST_ALIVE)
      rc = read_names(&r, plen, kind, &b.alive, &b.n_alive, &b.n_bad, err);
    else
      rc = read_names(&r, plen, kind, &b.clients, &b.n_clients, &b.n_bad, err);
    ring_kvs_clear(&r);
  }
  if (rc != RING_OK) {
    rd_barrier_free(&b);
    return rc;
  }
  *out = b;
  return RING_OK;
}

int rd_barrier_read(ring_etcd *c, const char *cluster, rd_barrier *out, ring_error *err) {
  ring_error local = {RING_OK, ""};
  ring_error *e = err != NULL ? err : &local;
  int rc = read_once(c, cluster, out, e);
  for (int again = 0; again < 3 && rd_host_compacted(rc, e); again++)
    rc = read_once(c, cluster, out, e);
  return rc;
}

void rd_barrier_free(rd_barrier *b) {
  if (b == NULL)
    return;
  free(b->alive);
  free(b->acks);
  free(b->clients);
  memset(b, 0, sizeof *b);
}

rd_barrier_view rd_barrier_view_of(const rd_barrier *b) {
  return (rd_barrier_view){b->alive,    sizeof *b->alive,
                           b->n_alive,  b->acks,
                           b->n_acks,   (const char(*)[RING_ID_MAX + 1]) b->clients,
                           b->n_clients};
}
