/*
 * pr_backend.c: a simulated model server behind the router: batch slots
 * and a prefix cache, on loopback HTTP (pr_server.c).
 *
 * Sections: the backend; batch slots; the prefix cache; the handler; start
 * and stop.
 *
 * No model runs: a request holds a slot for hit_us or miss_us (sleeping,
 * not spinning), which is what makes affinity show in latency: a hot
 * backend queues for slots, a cold prefix pays the prefill.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "pr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

/* -------------------------------------------------------------- the backend */

typedef struct cache_entry {
  uint64_t prefix; /* XXH3 of the prefix; 0 with last = 0 is a free entry */
  uint64_t last;   /* the use clock when last used; 0: free */
} cache_entry;

struct pr_backend {
  pr_backend_opts o;
  pr_server *srv;
  pthread_mutex_t mu; /* guards all below */
  pthread_cond_t slot_free;
  uint32_t busy;      /* slots taken */
  cache_entry *cache; /* o.cache_entries */
  uint64_t clock;     /* counts cache uses: LRU order */
  pr_backend_stats st;
};

static bool valid_opts(const pr_backend_opts *o) {
  return o->slots >= 1 && o->slots <= 1024 && o->cache_entries >= 1 && o->cache_entries <= 65536 &&
         o->prefix_bytes >= 1 && o->prefix_bytes <= PR_PREFIX_MAX && o->hit_us <= 10000000 &&
         o->miss_us <= 10000000;
}

/* ------------------------------------------------------------------ batch slots */

static void slot_take(pr_backend *b) {
  pthread_mutex_lock(&b->mu);
  while (b->busy >= b->o.slots)
    pthread_cond_wait(&b->slot_free, &b->mu);
  b->busy++;
  pthread_mutex_unlock(&b->mu);
}

static void slot_give(pr_backend *b) {
  pthread_mutex_lock(&b->mu);
  b->busy--;
  pthread_cond_signal(&b->slot_free);
  pthread_mutex_unlock(&b->mu);
}

/* ---------------------------------------------------------------- the prefix cache */

/* Whether the prefix was cached; either way it is now, the least recently
 * used entry giving way. A linear scan: the cache is small by design (it
 * is what makes affinity matter) and the scan is far under a request. */
static bool cache_use(pr_backend *b, uint64_t prefix) {
  pthread_mutex_lock(&b->mu);
  cache_entry *victim = &b->cache[0];
  bool hit = false;
  for (uint32_t i = 0; i < b->o.cache_entries && !hit; i++) {
    cache_entry *e = &b->cache[i];
    hit = e->last != 0 && e->prefix == prefix;
    if (hit)
      victim = e;
    else if (e->last < victim->last)
      victim = e;
  }
  *victim = (cache_entry){prefix, ++b->clock};
  b->st.hits += hit;
  b->st.misses += !hit;
  pthread_mutex_unlock(&b->mu);
  return hit;
}

/* -------------------------------------------------------------------- the handler */

static void sleep_us(uint32_t us) {
  struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000};
  while (nanosleep(&ts, &ts) != 0) /* resumes after a signal */
    ;
}

static void handle(void *ud, const char *method, const char *url, const pr_body *body,
                   pr_answer *a) {
  pr_backend *b = ud;
  if (strcmp(method, "POST") != 0 || strcmp(url, "/v1/generate") != 0) {
    a->status = 404;
    return;
  }
  const size_t klen = pr_prefix_len(body->len, b->o.prefix_bytes);
  const uint64_t prefix = XXH3_64bits(body->data ? body->data : "", klen);
  slot_take(b);
  const bool hit = cache_use(b, prefix);
  sleep_us(hit ? b->o.hit_us : b->o.miss_us);
  slot_give(b);
  a->status = 200;
  a->body = strdup(hit ? "hit\n" : "miss\n");
  a->len = a->body ? strlen(a->body) : 0;
}

/* ------------------------------------------------------------------- start and stop */

int pr_backend_start(const pr_backend_opts *o, pr_backend **out, char *err, size_t cap) {
  if (o == NULL || out == NULL || !valid_opts(o)) {
    snprintf(err, cap, "backend options out of range");
    return RING_EINVAL;
  }
  pr_backend *b = calloc(1, sizeof *b);
  if (b == NULL || (b->cache = calloc(o->cache_entries, sizeof *b->cache)) == NULL) {
    free(b);
    snprintf(err, cap, "out of memory");
    return RING_ENOMEM;
  }
  b->o = *o;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->slot_free, NULL);
  /* Each connection is one router thread's: at most the router's. */
  if ((b->srv = pr_server_start(0, 1024, handle, b, err, cap)) == NULL) {
    pr_backend_stop(b);
    return RING_EIO;
  }
  *out = b;
  return RING_OK;
}

uint16_t pr_backend_port(const pr_backend *b) { return pr_server_port(b->srv); }

void pr_backend_stats_get(pr_backend *b, pr_backend_stats *out) {
  pthread_mutex_lock(&b->mu);
  *out = b->st;
  pthread_mutex_unlock(&b->mu);
}

void pr_backend_stop(pr_backend *b) {
  if (b == NULL)
    return;
  pr_server_stop(b->srv); /* joins the connections: nobody waits for a slot */
  pthread_cond_destroy(&b->slot_free);
  pthread_mutex_destroy(&b->mu);
  free(b->cache);
  free(b);
}
