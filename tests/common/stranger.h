/*
 * stranger.h: a stranger at a node's address, for the trust tests. A small
 * TCP server on 127.0.0.1 (a port of its own) that accepts connections,
 * keeps every byte it receives, in arrival order, in one bounded buffer,
 * and answers every request it sees (a request ends at its blank line)
 * with `HTTP/1.1 404 Not Found`, a short body and no signature, then
 * closes the connection. It knows no secret: whatever a cluster member
 * tells it is what a stranger at that address would learn.
 *
 * Bounded: at most STRANGER_CONNS connections at once (more are closed at
 * accept and counted), one idle for STRANGER_IDLE_S is closed, bytes past
 * the buffer are counted but not kept, and the server stops by itself
 * after its lifetime. One thread, polling; stranger_stop joins it.
 *
 * The caller owns the struct (stranger_start fills it); the capture may be
 * read at any time. Needs -pthread (the Check tests link it).
 */
#ifndef RING_TEST_STRANGER_H
#define RING_TEST_STRANGER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STRANGER_CONNS 32    /* connections open at once */
#define STRANGER_IDLE_S 5.0  /* a connection silent this long is closed */
#define STRANGER_TICK_MS 100 /* how often the thread looks at stop and the clocks */
#define STRANGER_ANSWER                                                                            \
  "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n"                   \
  "Connection: close\r\n\r\nnot found\n"

typedef struct stranger_conn {
  int fd;        /* -1: free slot */
  uint32_t tail; /* the last bytes seen, to find "\r\n\r\n" across reads */
  double last_s; /* when it last sent a byte */
} stranger_conn;

typedef struct stranger {
  int lfd;       /* the listener; -1 once closed */
  uint16_t port; /* where it listens */
  double end_s;  /* it stops serving at this time (stranger_now) */
  pthread_t thread;
  bool running;                    /* thread started and not joined */
  atomic_bool stop;                /* set by stranger_stop */
  stranger_conn c[STRANGER_CONNS]; /* the thread's own */
  pthread_mutex_t mu;              /* guards what follows; the thread writes, tests read */
  unsigned char *buf;              /* captured bytes, in arrival order over all connections */
  size_t len, max;
  uint64_t dropped;     /* bytes received past max, not kept */
  uint64_t requests;    /* requests answered */
  uint64_t connections; /* connections accepted and served */
  uint64_t refused;     /* connections closed at accept: all slots taken */
} stranger;

static inline double stranger_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void stranger_close(stranger_conn *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

/* Keeps n received bytes (what does not fit is counted). */
static inline void stranger_keep(stranger *s, const unsigned char *p, size_t n) {
  pthread_mutex_lock(&s->mu);
  size_t room = s->max - s->len, k = n < room ? n : room;
  memcpy(s->buf + s->len, p, k);
  s->len += k;
  s->dropped += n - k;
  pthread_mutex_unlock(&s->mu);
}

static inline void stranger_count(stranger *s, uint64_t *what) {
  pthread_mutex_lock(&s->mu);
  (*what)++;
  pthread_mutex_unlock(&s->mu);
}

/* Reads what connection c sent; answers (and closes) at the end of a
 * request's headers; closes on EOF or error. */
static inline void stranger_read(stranger *s, stranger_conn *c, double now) {
  unsigned char b[4096];
  ssize_t n = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    stranger_close(c);
    return;
  }
  c->last_s = now;
  stranger_keep(s, b, (size_t)n);
  bool end = false;
  for (ssize_t i = 0; i < n && !end; i++) {
    c->tail = c->tail << 8 | b[i];
    end = c->tail == 0x0d0a0d0au; /* "\r\n\r\n" */
  }
  if (!end)
    return;
  stranger_count(s, &s->requests);
  /* best effort: a client that went away gets nothing */
  if (send(c->fd, STRANGER_ANSWER, sizeof STRANGER_ANSWER - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
    errno = 0;
  shutdown(c->fd, SHUT_WR);
  stranger_close(c);
}

static inline void stranger_accept(stranger *s, double now) {
  int fd = accept(s->lfd, NULL, NULL);
  if (fd < 0)
    return;
  for (int i = 0; i < STRANGER_CONNS; i++)
    if (s->c[i].fd < 0) {
      s->c[i] = (stranger_conn){.fd = fd, .tail = 0, .last_s = now};
      stranger_count(s, &s->connections);
      return;
    }
  close(fd);
  stranger_count(s, &s->refused);
}

static inline void *stranger_main(void *ud) {
  stranger *s = ud;
  while (!atomic_load(&s->stop) && stranger_now() < s->end_s) {
    struct pollfd p[STRANGER_CONNS + 1];
    int idx[STRANGER_CONNS + 1], n = 0;
    p[n] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
    idx[n++] = -1;
    for (int i = 0; i < STRANGER_CONNS; i++)
      if (s->c[i].fd >= 0) {
        p[n] = (struct pollfd){.fd = s->c[i].fd, .events = POLLIN};
        idx[n++] = i;
      }
    if (poll(p, (nfds_t)n, STRANGER_TICK_MS) < 0 && errno != EINTR)
      break;
    double now = stranger_now();
    for (int k = 0; k < n; k++) {
      if (idx[k] < 0) {
        if (p[k].revents & POLLIN)
          stranger_accept(s, now);
      } else if (p[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        stranger_read(s, &s->c[idx[k]], now);
      } else if (now - s->c[idx[k]].last_s > STRANGER_IDLE_S) {
        stranger_close(&s->c[idx[k]]);
      }
    }
  }
  for (int i = 0; i < STRANGER_CONNS; i++)
    stranger_close(&s->c[i]);
  close(s->lfd);
  s->lfd = -1;
  return NULL;
}

/* Listens on 127.0.0.1 (a free port) and serves for at most lifetime_s,
 * keeping up to max_bytes. Returns 0, or a negative errno with nothing
 * left open. */
static inline int stranger_start(stranger *s, double lifetime_s, size_t max_bytes) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < STRANGER_CONNS; i++)
    s->c[i].fd = -1;
  s->max = max_bytes;
  s->buf = malloc(max_bytes ? max_bytes : 1);
  s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int e = 0;
  if (s->buf == NULL)
    e = -ENOMEM;
  else if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
           listen(s->lfd, 64) != 0 || getsockname(s->lfd, (struct sockaddr *)&a, &len) != 0)
    e = -errno;
  if (e == 0) {
    s->port = ntohs(a.sin_port);
    s->end_s = stranger_now() + lifetime_s;
    pthread_mutex_init(&s->mu, NULL);
    if ((e = -pthread_create(&s->thread, NULL, stranger_main, s)) != 0)
      pthread_mutex_destroy(&s->mu);
  }
  if (e != 0) {
    if (s->lfd >= 0)
      close(s->lfd);
    free(s->buf);
    memset(s, 0, sizeof *s);
    s->lfd = -1;
    return e;
  }
  s->running = true;
  return 0;
}

/* "127.0.0.1:<port>" into out[cap]. */
static inline void stranger_addr(const stranger *s, char *out, size_t cap) {
  snprintf(out, cap, "127.0.0.1:%u", (unsigned)s->port);
}

/* Requests answered, and bytes received (kept or not), so far. */
static inline uint64_t stranger_requests(stranger *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->requests;
  pthread_mutex_unlock(&s->mu);
  return n;
}

static inline uint64_t stranger_bytes(stranger *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->len + s->dropped;
  pthread_mutex_unlock(&s->mu);
  return n;
}

/* Whether the bytes kept so far contain needle[0..n). */
static inline bool stranger_saw(stranger *s, const void *needle, size_t n) {
  pthread_mutex_lock(&s->mu);
  bool seen = n > 0 && memmem(s->buf, s->len, needle, n) != NULL;
  pthread_mutex_unlock(&s->mu);
  return seen;
}

/* Stops the thread (within a tick), closes every socket and frees the
 * capture. Safe on a stranger that never started or was stopped. */
static inline void stranger_stop(stranger *s) {
  if (!s->running)
    return;
  atomic_store(&s->stop, true);
  pthread_join(s->thread, NULL);
  s->running = false;
  pthread_mutex_destroy(&s->mu);
  free(s->buf);
  s->buf = NULL;
}

#endif /* RING_TEST_STRANGER_H */
