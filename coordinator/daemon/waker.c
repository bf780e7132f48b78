/*
 * waker.c: rd_waker, how a daemon's loop sleeps until there is work or a
 * deadline: a flag under a mutex plus a condition variable on
 * CLOCK_MONOTONIC, so a wall-clock step can neither stretch nor cut a
 * timeout. The flag is what keeps a wake that arrives while the loop is
 * busy (not yet waiting) from being lost.
 */
#define _POSIX_C_SOURCE 200809L /* pthread_condattr_setclock, clock_gettime */
#include "daemon.h"

#include <errno.h>
#include <time.h>

/* Returns 0 or an errno value; nothing is left to destroy on failure. */
int rd_waker_init(rd_waker *w) {
  pthread_condattr_t attr;
  int rc = pthread_condattr_init(&attr);
  if (rc != 0)
    return rc;
  rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (rc == 0)
    rc = pthread_cond_init(&w->cv, &attr);
  pthread_condattr_destroy(&attr);
  if (rc != 0)
    return rc;
  if ((rc = pthread_mutex_init(&w->mu, NULL)) != 0) {
    pthread_cond_destroy(&w->cv);
    return rc;
  }
  w->woken = false;
  return 0;
}

void rd_waker_destroy(rd_waker *w) {
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

void rd_waker_wake(rd_waker *w) {
  pthread_mutex_lock(&w->mu);
  w->woken = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* now + ms on CLOCK_MONOTONIC; ms is capped at a year so the seconds
 * cannot overflow time_t. */
static struct timespec deadline_after(uint64_t ms) {
  const uint64_t year_ms = 365ull * 24 * 3600 * 1000;
  if (ms > year_ms)
    ms = year_ms;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

bool rd_waker_wait(rd_waker *w, uint64_t timeout_ms) {
  struct timespec deadline = deadline_after(timeout_ms);
  pthread_mutex_lock(&w->mu);
  int rc = 0;
  while (!w->woken && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&w->cv, &w->mu, &deadline); /* loops over spurious wake-ups */
  bool woken = w->woken;
  w->woken = false;
  pthread_mutex_unlock(&w->mu);
  return woken;
}
