/*
 * agent_sizes.c: sizes/<id> (ringkeeper.sizes.v1, proto/etcd.md): the
 * bytes of each arc this host owns in the table in service and holds, so
 * that the coordinator's plans say how much data they move and how long
 * that takes.
 *
 * Measured by the loop every --sizes-every (30 s), and again after a new
 * table but no sooner than SIZES_MIN_MS after the last measure (a run
 * publishes versions quickly). Each measure stats the files of every held owned arc:
 * bounded by what the host holds, done at most twice a minute. Written
 * only when a size or the set changed (the record's version is when it
 * was measured, and alone does not cause a write); deleted when nothing
 * owned is held. A failed write is retried at the next measure.
 */
#include "agent.h"
#include "sizes.h"

#include <inttypes.h>
#include <stdlib.h>

#define SIZES_MIN_MS 5000

enum { SIZES_UNKNOWN = 0, SIZES_ABSENT, SIZES_WRITTEN };

/* The owned arcs held, ascending, with their sizes (malloc()'ed in s). */
static int measure(agent *a, rk_sizes *s) {
  s->tokens = malloc(a->tokens * sizeof *s->tokens);
  s->bytes = malloc(a->tokens * sizeof *s->bytes);
  if (s->tokens == NULL || s->bytes == NULL)
    return RING_ENOMEM;
  for (uint32_t t = 0; t < a->tokens; t++) {
    if (!agent_bit(a->owned, t) || !arc_store_has(a->store, t))
      continue;
    uint64_t b = agent_arc_bytes(a, t);
    s->tokens[s->n] = t;
    s->bytes[s->n++] = b < RK_SIZE_SATURATED ? b : RK_SIZE_SATURATED;
  }
  return RING_OK;
}

/* FNV-1a over the tokens and sizes. */
static uint64_t digest(const rk_sizes *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t i = 0; i < s->n; i++) {
    uint64_t v[2] = {s->tokens[i], s->bytes[i]};
    const unsigned char *p = (const unsigned char *)v;
    for (size_t k = 0; k < sizeof v; k++)
      h = (h ^ p[k]) * 0x100000001b3ull;
  }
  return h;
}

/* Puts the record, or deletes the key when s lists nothing. */
static int write_record(agent *a, const rk_sizes *s, ring_error *err) {
  char key[RK_KEY_MAX], *json = NULL;
  size_t len = 0;
  int klen = agent_key(a, key, "sizes/");
  if (s->n == 0)
    return ring_etcd_delete(a->etcd, key, (size_t)klen, false, NULL, NULL, err);
  int rc = rk_sizes_encode(s, &json, &len);
  if (rc != RING_OK)
    return ring__err(err, rc, "encoding sizes/: %s", ring_strerror(rc));
  rc = ring_etcd_put(a->etcd, key, (size_t)klen, json, len, 0, NULL, NULL, err);
  free(json);
  return rc;
}

/* Whether a measure is due now; *wait the ms until one is otherwise. */
static bool due(const agent *a, uint64_t now, uint64_t *wait) {
  uint64_t since = now - a->sizes_ms;
  bool new_table = a->sizes_version != a->seen_version;
  uint64_t every = a->o.sizes_every_ms, soonest = every < SIZES_MIN_MS ? every : SIZES_MIN_MS;
  uint64_t period = a->sizes_ms == 0 ? 0 : new_table ? soonest : every;
  *wait = since >= period ? 0 : period - since;
  return *wait == 0;
}

uint64_t agent_sizes_tick(agent *a) {
  uint64_t now = rd_now_ms(), wait;
  if (a->tokens == 0 || a->seen_version == 0 || !a->own_store_ok)
    return a->o.sizes_every_ms; /* no table or no store: nothing to measure */
  if (!due(a, now, &wait))
    return wait;
  a->sizes_ms = now;
  a->sizes_version = a->seen_version;
  rk_sizes s = {.version = a->seen_version};
  if (measure(a, &s) == RING_OK) {
    uint64_t d = digest(&s), sum = 0;
    for (uint32_t i = 0; i < s.n; i++)
      sum += s.bytes[i];
    atomic_store(&a->m.bytes_held, sum); /* the sum sizes/<id> says: status shows the same */
    int want = s.n > 0 ? SIZES_WRITTEN : SIZES_ABSENT;
    ring_error err = {0};
    if ((a->sizes_written != want || (want == SIZES_WRITTEN && d != a->sizes_digest)) &&
        write_record(a, &s, &err) == RING_OK) {
      a->sizes_written = want;
      a->sizes_digest = d;
    } else if (err.code != RING_OK) {
      atomic_fetch_add(&a->m.errors, 1);
      agent_trouble(a, "writing sizes/", err.message);
    }
  }
  rk_sizes_free(&s);
  return a->o.sizes_every_ms;
}
