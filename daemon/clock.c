/*
 * clock.c: the two clocks the daemons use, in milliseconds: monotonic for
 * deadlines, intervals and every decision (immune to NTP steps and to
 * another host's clock), wall for timestamps that people and other hosts
 * read. daemon.h ("clocks") says which to use when.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "daemon.h"

#include <time.h>

/* Modulo 2^64, so the difference of two readings of one clock is right
 * even where a faked monotonic clock reads below zero. */
static uint64_t clock_ms(clockid_t id) {
  struct timespec ts;
  if (clock_gettime(id, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rd_now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

/* A wall clock before 1970 (faked or broken) reads as 0, never as a huge
 * timestamp. */
uint64_t rd_wall_ms(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rd_wall_since(uint64_t now, uint64_t then) {
  return then == 0 || then >= now ? 0 : now - then;
}
