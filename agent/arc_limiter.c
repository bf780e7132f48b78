/*
 * arc_limiter.c: one token bucket for every transfer of an agent.
 *
 * Bytes pass as tokens accrue at `rate` per second; the bucket holds at
 * most BURST_S seconds of them, so an idle agent cannot burst for long. A
 * taker takes its bytes a bucketful at a time: it sleeps until the bucket
 * holds what it needs (in slices of at most POLL_MS, so that it notices its
 * stop flag); a rate change wakes every taker, which then waits by the new
 * rate.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, pthread_condattr_setclock */
#include "arc.h"
#include "ring.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define BURST_S 0.05 /* the bucket holds 50 ms of tokens */
#define POLL_MS 50   /* a sleeping taker looks at its stop flag this often */

struct arc_limiter {
  pthread_mutex_t lock; /* guards every field below */
  pthread_cond_t wake;  /* broadcast on a rate change */
  uint64_t rate;        /* bytes per second; 0: unlimited */
  double tokens;        /* bytes that may pass now, <= rate * BURST_S */
  double last;          /* monotonic seconds of the last refill */
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Adds the tokens accrued since the last refill. Under lock. */
static void refill(arc_limiter *l, double now) {
  double cap = (double)l->rate * BURST_S;
  l->tokens += (now - l->last) * (double)l->rate;
  if (l->tokens > cap)
    l->tokens = cap;
  l->last = now;
}

int arc_limiter_new(uint64_t bytes_per_sec, arc_limiter **out) {
  if (out == NULL)
    return RING_EINVAL;
  arc_limiter *l = calloc(1, sizeof *l);
  if (l == NULL)
    return RING_ENOMEM;
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc == 0 && (rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) == 0 &&
      (rc = pthread_cond_init(&l->wake, &ca)) == 0 &&
      (rc = pthread_mutex_init(&l->lock, NULL)) != 0)
    pthread_cond_destroy(&l->wake);
  pthread_condattr_destroy(&ca);
  if (rc != 0) {
    free(l);
    return RING_ENOMEM;
  }
  l->rate = bytes_per_sec;
  l->last = now_s();
  *out = l;
  return RING_OK;
}

void arc_limiter_free(arc_limiter *l) {
  if (l == NULL)
    return;
  pthread_cond_destroy(&l->wake);
  pthread_mutex_destroy(&l->lock);
  free(l);
}

void arc_limiter_set_rate(arc_limiter *l, uint64_t bytes_per_sec) {
  if (l == NULL)
    return;
  pthread_mutex_lock(&l->lock);
  double now = now_s();
  if (l->rate != 0)
    refill(l, now); /* what accrued at the old rate stays */
  else
    l->tokens = 0; /* from unlimited: start empty */
  l->rate = bytes_per_sec;
  l->last = now;
  refill(l, now); /* clamps to the new burst */
  pthread_cond_broadcast(&l->wake);
  pthread_mutex_unlock(&l->lock);
}

/* Sleeps until `wait` seconds from now, POLL_MS at most, or a broadcast. */
static void nap(arc_limiter *l, double now, double wait) {
  if (wait > POLL_MS / 1000.0)
    wait = POLL_MS / 1000.0;
  double until = now + wait;
  struct timespec ts;
  ts.tv_sec = (time_t)until;
  ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
  pthread_cond_timedwait(&l->wake, &l->lock, &ts);
}

static bool stopped(const atomic_bool *stop) { return stop != NULL && atomic_load(stop); }

bool arc_limiter_take(arc_limiter *l, uint64_t n, const atomic_bool *stop) {
  if (l == NULL)
    return !stopped(stop);
  double want = (double)n;
  pthread_mutex_lock(&l->lock);
  while (want > 0 && !stopped(stop) && l->rate != 0) {
    double now = now_s();
    refill(l, now);
    double cap = (double)l->rate * BURST_S;
    double need = want < cap ? want : cap; /* a full bucket at most */
    if (l->tokens + 1e-9 >= need) {
      l->tokens -= need;
      want -= need;
      continue;
    }
    nap(l, now, (need - l->tokens) / (double)l->rate);
  }
  pthread_mutex_unlock(&l->lock);
  return !stopped(stop);
}
