/*
 * clock.c: the two clocks the daemons use, in milliseconds: monotonic for
 * deadlines and intervals (immune to NTP steps), wall for timestamps.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "daemon.h"

#include <time.h>

static uint64_t clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rd_now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

uint64_t rd_wall_ms(void) { return clock_ms(CLOCK_REALTIME); }
