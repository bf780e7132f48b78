/*
 * agent_pins.c: the keys pinned for other nodes, as arc_auth checks
 * signatures with them (proto/arc.md, "Authentication"; proto/etcd.md,
 * "Node keys"). The coordinator pins a node's key in nodes/<id> when the
 * node first joins, `ringctl trust` pins a changed one; this host reads
 * nodes/ when the table changes, when a retry is due, and soon after a
 * lookup misses or a pinned key fails (a node that joined, or a key
 * approved, since the last read), at most every PINS_EVERY_MS. The agent's own alive/ key
 * is never trusted for another host: only nodes/ pins.
 */
#include "agent.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define PINS_EVERY_MS 1000 /* a missed lookup asks for a read at most this often */

typedef struct pin {
  char id[RING_ID_MAX + 1];
  unsigned char pk[ARC_PINS_MAX][ARC_PK_LEN]; /* the pinned key, then a rotation's next one */
  uint32_t n;
} pin;

static int by_id(const void *x, const void *y) {
  return strcmp(((const pin *)x)->id, ((const pin *)y)->id);
}

uint32_t agent_pins_lookup(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  agent *a = ctx;
  if (pk == NULL) { /* its pin did not verify: read again (bounded by PINS_EVERY_MS) */
    if (!atomic_exchange(&a->pins_stale, true))
      rd_waker_wake(&a->waker);
    return 0;
  }
  pin key;
  snprintf(key.id, sizeof key.id, "%s", node);
  pthread_mutex_lock(&a->pins_mu);
  const pin *p = a->n_pins ? bsearch(&key, a->pins, a->n_pins, sizeof *p, by_id) : NULL;
  uint32_t n = p != NULL ? p->n : 0;
  if (p != NULL)
    memcpy(pk, p->pk, sizeof p->pk);
  pthread_mutex_unlock(&a->pins_mu);
  if (p == NULL && !atomic_exchange(&a->pins_stale, true))
    rd_waker_wake(&a->waker); /* a node pinned since our last read: read again */
  return n;
}

/* The pins of nodes/ into a sorted array; NULL on a failed read. */
static pin *read_pins(agent *a, uint32_t *n) {
  ring_kvs r;
  ring_error err = {0};
  if (agent_read_dir(a, "nodes/", RK_NODE_VALUE_MAX, &r, &err) < 0) {
    agent_trouble(a, "reading nodes/ for the pinned keys", err.message);
    return NULL;
  }
  pin *out = calloc(r.n ? r.n : 1, sizeof *out);
  *n = 0;
  for (uint32_t i = 0; out && i < r.n; i++) {
    rk_node v;
    if (rk_node_decode((const char *)r.kvs[i].value, r.kvs[i].value_len, &v, NULL) != RING_OK)
      continue;
    pin *p = &out[*n];
    const char *keys[ARC_PINS_MAX] = {v.key, v.next_key};
    p->n = 0;
    for (int k = 0; k < ARC_PINS_MAX; k++) /* the decoder checked them: 64 hex digits or "" */
      if (keys[k][0] != '\0')
        sodium_hex2bin(p->pk[p->n++], ARC_PK_LEN, keys[k], RK_KEY_HEX, NULL, NULL, NULL);
    if (p->n == 0)
      continue; /* no key pinned yet: nothing it signs verifies */
    memcpy(p->id, v.id, sizeof v.id);
    (*n)++;
  }
  ring_kvs_clear(&r);
  if (out && *n > 1)
    qsort(out, *n, sizeof *out, by_id);
  return out;
}

void agent_pins_refresh(agent *a) {
  uint32_t n = 0;
  pin *p = read_pins(a, &n);
  if (p == NULL)
    return; /* the pins read last stay */
  a->pins_read_ms = rd_now_ms();
  pthread_mutex_lock(&a->pins_mu);
  pin *old = a->pins;
  a->pins = p;
  a->n_pins = n;
  pthread_mutex_unlock(&a->pins_mu);
  free(old);
  if (atomic_exchange(&a->m.pinned, n) != n)
    rd_logf(RD_INFO, "%" PRIu32 " nodes with a pinned key in nodes/", n);
}

uint64_t agent_pins_tick(agent *a) {
  if (!atomic_load(&a->pins_stale))
    return UINT64_MAX;
  uint64_t now = rd_now_ms();
  if (now < a->pins_read_ms + PINS_EVERY_MS)
    return a->pins_read_ms + PINS_EVERY_MS - now;
  atomic_store(&a->pins_stale, false);
  agent_pins_refresh(a);
  return UINT64_MAX;
}

void agent_pins_free(agent *a) {
  free(a->pins);
  a->pins = NULL;
  a->n_pins = 0;
}
