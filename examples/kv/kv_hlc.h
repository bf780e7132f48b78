/*
 * kv_hlc.h: hybrid timestamps for ring-kv records: wall-clock ms << 16 |
 * a counter, never going backwards in one process and moving past any
 * timestamp it has seen (a hybrid logical clock). Header-only.
 */
#ifndef RING_KV_HLC_H
#define RING_KV_HLC_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t kv_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The next timestamp of clock *last: above every one it gave or saw. */
static inline uint64_t kv_hlc_next(_Atomic uint64_t *last) {
  uint64_t wall = kv_wall_ms() << 16, cur = atomic_load(last), next;
  do
    next = wall > cur ? wall : cur + 1;
  while (!atomic_compare_exchange_weak(last, &cur, next));
  return next;
}

/* Moves the clock past a timestamp seen from elsewhere. */
static inline void kv_hlc_observe(_Atomic uint64_t *last, uint64_t ts) {
  uint64_t cur = atomic_load(last);
  while (cur < ts && !atomic_compare_exchange_weak(last, &cur, ts))
    ;
}

#endif /* RING_KV_HLC_H */
