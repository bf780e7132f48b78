/*
 * waker.c: rd_waker, how a daemon's loop sleeps until there is work or a
 * deadline: an eventfd that a wake makes readable, and poll(2) with a
 * relative timeout, which the kernel measures on CLOCK_MONOTONIC. No
 * absolute deadline is ever handed to the C library, so neither a
 * wall-clock step nor a process whose clocks are faked (libfaketime
 * converts pthread_cond_timedwait deadlines, and with the wall clock
 * offset and the monotonic clock real it turns a monotonic deadline into
 * one that has passed: a loop that spins) can stretch or cut a timeout.
 * The eventfd's counter is what keeps a wake that arrives while the loop
 * is busy (not yet waiting) from being lost.
 */
#define _GNU_SOURCE /* eventfd */
#include "daemon.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Returns 0 or an errno value; nothing is left to destroy on failure. */
int rd_waker_init(rd_waker *w) {
  w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return w->fd < 0 ? errno : 0;
}

void rd_waker_destroy(rd_waker *w) {
  if (w->fd >= 0)
    close(w->fd);
  w->fd = -1;
}

/* Async-signal-safe and thread-safe: one write(2). A full counter (never
 * in practice) still leaves the fd readable, so the wake is not lost. */
void rd_waker_wake(rd_waker *w) {
  uint64_t one = 1;
  ssize_t n;
  do
    n = write(w->fd, &one, sizeof one);
  while (n < 0 && errno == EINTR);
}

/* Clears the counter; true when there was a wake. */
static bool drain(rd_waker *w) {
  uint64_t count = 0;
  ssize_t n;
  do
    n = read(w->fd, &count, sizeof count);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof count && count > 0;
}

bool rd_waker_wait(rd_waker *w, uint64_t timeout_ms) {
  const uint64_t start = rd_now_ms();
  for (;;) {
    uint64_t spent = rd_now_ms() - start; /* monotonic: never negative */
    if (spent >= timeout_ms)
      return drain(w); /* a wake that came with the deadline still counts */
    uint64_t left = timeout_ms - spent;
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    int rc = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    if (rc > 0 && drain(w))
      return true;
    if (rc == 0 && left <= INT_MAX)
      return false; /* the kernel waited the whole of it */
    if (rc < 0 && errno != EINTR)
      return drain(w); /* cannot wait (EINVAL, ENOMEM): never spin on it */
  }
}
