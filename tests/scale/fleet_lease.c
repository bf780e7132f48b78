/*
 * fleet_lease.c: the leases of one slice of the fleet (fleet.h), kept
 * alive by one thread in turns.
 *
 * Why not ring_etcd_keep_alive: it runs a thread per lease, and a slice
 * holds thousands. Here every lease is refreshed once per period of a
 * third of the TTL, spread evenly over the period (a slice of 2,500 leases
 * with a 600 s TTL refreshes 13 leases a second), so a lease survives two
 * refreshes lost in a row and etcd sees a steady trickle instead of bursts.
 * A lease that etcd no longer knows is counted lost and not renewed: its
 * host's alive/<id> went, as a crashed agent's would.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int fleet_leases_init(fleet_leases *l, ring_etcd *c, int64_t ttl_s, uint32_t cap) {
  memset(l, 0, sizeof *l);
  l->c = c;
  l->ttl_s = ttl_s;
  l->cap = cap;
  if (cap && (l->ids = calloc(cap, sizeof *l->ids)) == NULL)
    return RING_ENOMEM;
  pthread_mutex_init(&l->mu, NULL);
  fleet_cond_init(&l->wake);
  return RING_OK;
}

int fleet_leases_grant(fleet_leases *l, int64_t *lease, ring_error *err) {
  if (l->n == l->cap) {
    snprintf(err->message, sizeof err->message, "more than %u leases", l->cap);
    return RING_EINVAL;
  }
  int rc = ring_etcd_lease_grant(l->c, l->ttl_s, lease, err);
  if (rc == RING_OK)
    l->ids[l->n++] = *lease; /* before start only: the thread reads n unlocked */
  return rc;
}

/* Sleeps until `until` (CLOCK_MONOTONIC) unless stopped; false once stopped. */
static bool sleep_until(fleet_leases *l, const struct timespec *until) {
  pthread_mutex_lock(&l->mu);
  while (!l->stop && pthread_cond_timedwait(&l->wake, &l->mu, until) != ETIMEDOUT)
    ;
  bool go = !l->stop;
  pthread_mutex_unlock(&l->mu);
  return go;
}

static void *keeper_main(void *arg) {
  fleet_leases *l = arg;
  int64_t period_s = l->ttl_s / 3 > 0 ? l->ttl_s / 3 : 1;
  uint32_t per_s = (uint32_t)((l->n + (uint64_t)period_s - 1) / (uint64_t)period_s);
  uint32_t next = 0;
  bool *gone = calloc(l->n ? l->n : 1, sizeof *gone);
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  for (;;) {
    t.tv_sec += 1;
    if (!sleep_until(l, &t))
      break;
    for (uint32_t k = 0; k < per_s && l->n; k++, next = (next + 1) % l->n) {
      if (gone && gone[next])
        continue;
      ring_error err;
      int64_t ttl = 0;
      int rc = ring_etcd_lease_refresh(l->c, l->ids[next], &ttl, &err);
      if (rc == RING_OK) {
        atomic_fetch_add(&l->refreshes, 1);
      } else if (rc == RING_ENOTFOUND) {
        if (gone)
          gone[next] = true;
        if (atomic_fetch_add(&l->lost, 1) < 5)
          fprintf(stderr, "fleet_sim: lease %lld lost\n", (long long)l->ids[next]);
      } else if (atomic_fetch_add(&l->errors, 1) < 5) {
        fprintf(stderr, "fleet_sim: lease refresh: %s\n", err.message);
      }
    }
  }
  free(gone);
  return NULL;
}

int fleet_leases_start(fleet_leases *l, ring_error *err) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 256u << 10);
  int e = pthread_create(&l->thread, &a, keeper_main, l);
  pthread_attr_destroy(&a);
  if (e != 0) {
    snprintf(err->message, sizeof err->message, "pthread_create: %s", strerror(e));
    return RING_ENOMEM;
  }
  l->running = true;
  return RING_OK;
}

void fleet_leases_free(fleet_leases *l) {
  if (l->running) {
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    l->running = false;
  }
  for (uint32_t i = 0; i < l->n; i++)
    ring_etcd_lease_revoke(l->c, l->ids[i], NULL); /* gone already is fine: etcd drops them */
  free(l->ids);
  l->ids = NULL;
  l->n = 0;
  pthread_cond_destroy(&l->wake);
  pthread_mutex_destroy(&l->mu);
}
