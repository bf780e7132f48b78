/*
 * test_daemon_admit.c: rd_admit, the connection rules of the daemons' HTTP
 * listeners, with real sockets on 127.0.0.1 and other loopback addresses
 * (a client binds 127.0.0.N before it connects). Every wait is bounded in
 * time; timings are printed, and asserted only with a wide margin.
 *
 * Sections: clients; the rules alone (accept policy, address lists,
 * errors, exposition); caps; the allow-list; header deadlines; slow
 * clients against a real one; churn against the reaper (a server of the
 * test's own, as an embedder such as the arc server builds one).
 */
#define _GNU_SOURCE     /* MSG_NOSIGNAL */
#include <microhttpd.h> /* before daemon.h: it declares rd_admit's MHD side then */

#include "daemon.h"
#include "check_main.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ clients */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Waits up to ms for cond, checking every 10 ms. */
#define AWAIT(cond, ms)                                                                            \
  do {                                                                                             \
    uint64_t await_end_ = rd_now_ms() + (ms);                                                      \
    while (!(cond) && rd_now_ms() < await_end_)                                                    \
      sleep_ms(10);                                                                                \
  } while (0)

/* A TCP connection from the loopback address `from` to 127.0.0.1:port;
 * -1 when connect fails. */
static int dial_try(const char *from, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
  ck_assert_int_eq(inet_pton(AF_INET, from, &src.sin_addr), 1);
  dst.sin_port = htons(port);
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
      connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int dial(const char *from, uint16_t port) {
  int fd = dial_try(from, port);
  ck_assert_msg(fd >= 0, "connect from %s: %s", from, strerror(errno));
  return fd;
}

/* Whether the server closed (or shut down) fd within ms: the end of the
 * stream or a reset is readable. False while it stays open and silent. */
static bool closed_by_peer(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) <= 0)
    return false;
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static bool send_text(int fd, const char *s) {
  size_t len = strlen(s);
  return send(fd, s, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* Reads one response within ms; returns its status, or -1 if the
 * connection ended or the time ran out first. */
static int read_response(int fd, int ms) {
  char buf[4096];
  size_t len = 0;
  uint64_t end = rd_now_ms() + (uint64_t)ms;
  for (;;) {
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    const char *cl = strstr(buf, "Content-Length: ");
    if (body != NULL && cl != NULL && len - (size_t)(body + 4 - buf) >= (size_t)atol(cl + 16))
      return atoi(buf + 9); /* "HTTP/1.1 200 OK" */
    uint64_t now = rd_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (now >= end || len + 1 >= sizeof buf || poll(&p, 1, (int)(end - now)) <= 0)
      return -1;
    ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
    if (n <= 0)
      return -1;
    len += (size_t)n;
  }
}

#define REQUEST(path) "GET " path " HTTP/1.1\r\nHost: t\r\n\r\n"

/* GET /healthz from `from` on a connection of its own: the status, or -1
 * if the connection was refused or ended without an answer. */
static int get(const char *from, uint16_t port) {
  int fd = dial_try(from, port);
  if (fd < 0)
    return -1;
  int status = send_text(fd, REQUEST("/healthz")) ? read_response(fd, 5000) : -1;
  close(fd);
  return status;
}

/* --------------------------------------------------------- an rd_http server */

static rd_http *server;
static uint16_t port;

static void serve(const rd_admit_opts *o) {
  char err[256];
  server = rd_http_start_admit("127.0.0.1:0", NULL, NULL, NULL, NULL, o, err, sizeof err);
  ck_assert_msg(server != NULL, "%s", err);
  port = rd_http_port(server);
}

static void unserve(void) {
  rd_http_stop(server);
  server = NULL;
}

static rd_admit_counts counts(void) {
  rd_admit_counts c;
  rd_admit_stats(rd_http_admit(server), &c);
  return c;
}

static void close_all(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0)
      close(fds[i]);
}

/* --------------------------------------------------------- the rules alone */

static rd_mhd_result from4(rd_admit *a, const char *ip) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
  return rd_admit_accept(a, (struct sockaddr *)&sa, sizeof sa);
}

static rd_mhd_result from6(rd_admit *a, const char *ip) {
  struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
  ck_assert_int_eq(inet_pton(AF_INET6, ip, &sa.sin6_addr), 1);
  return rd_admit_accept(a, (struct sockaddr *)&sa, sizeof sa);
}

/* Every spelling of an entry; a mapped IPv6 peer is its IPv4 address. */
START_TEST(address_lists) {
  const char *allowed[] = {"10.1.2.3",
                           "[2001:db8::1]:443",
                           "2001:db8::2",
                           "[2001:db8::3]",
                           "::ffff:10.9.9.9",
                           "10.4.4.4:80",
                           "localhost:8080",
                           NULL,
                           "",
                           "x:y",
                           "[::1",
                           "[::1]x",
                           "1.2.3.4:",
                           "no-such-host.invalid"};
  const char *extra[] = {"10.7.7.7", "also-no-such-host.invalid:1"};
  rd_admit_opts o = {.allowed = allowed, .n_allowed = 14, .extra = extra, .n_extra = 2};
  rd_admit *a = NULL;
  ck_assert_int_eq(rd_admit_new(&o, &a), 8); /* 7 bad entries and 1 bad extra */
  ck_assert_int_eq(from4(a, "10.1.2.3"), MHD_YES);
  ck_assert_int_eq(from6(a, "::ffff:10.1.2.3"), MHD_YES);
  ck_assert_int_eq(from6(a, "2001:db8::1"), MHD_YES);
  ck_assert_int_eq(from6(a, "2001:db8::2"), MHD_YES);
  ck_assert_int_eq(from6(a, "2001:db8::3"), MHD_YES);
  ck_assert_int_eq(from4(a, "10.9.9.9"), MHD_YES);
  ck_assert_int_eq(from4(a, "10.4.4.4"), MHD_YES);
  ck_assert_int_eq(from4(a, "127.0.0.1"), MHD_YES); /* localhost */
  ck_assert_int_eq(from4(a, "10.7.7.7"), MHD_YES);  /* an extra */
  ck_assert_int_eq(from4(a, "10.1.2.4"), MHD_NO);
  ck_assert_int_eq(from6(a, "2001:db8::4"), MHD_NO);
  ck_assert_int_eq(from4(a, "1.2.3.4"), MHD_NO);
  rd_admit_counts c;
  rd_admit_stats(a, &c);
  ck_assert_uint_eq(c.refused_not_allowed, 3);
  ck_assert_uint_eq(c.accepted, 0); /* admission is counted when a connection starts */

  const char *next[] = {"10.1.2.4", "bad:port"};
  ck_assert_int_eq(rd_admit_set_allowed(a, next, 2), 1);
  ck_assert_int_eq(from4(a, "10.1.2.4"), MHD_YES);
  ck_assert_int_eq(from4(a, "10.1.2.3"), MHD_NO);
  ck_assert_int_eq(from4(a, "10.7.7.7"), MHD_YES);       /* extras stay */
  ck_assert_int_eq(rd_admit_set_allowed(a, next, 0), 0); /* set, empty: the extras only */
  ck_assert_int_eq(from4(a, "10.1.2.4"), MHD_NO);
  ck_assert_int_eq(from4(a, "10.7.7.7"), MHD_YES);
  ck_assert_int_eq(rd_admit_set_allowed(a, NULL, 0), 0); /* unset: everyone */
  ck_assert_int_eq(from4(a, "192.0.2.1"), MHD_YES);
  ck_assert_int_eq(from6(a, "2001:db8::9"), MHD_YES);
  rd_admit_stats(a, &c);
  ck_assert_uint_eq(c.refused_not_allowed, 5);
  rd_admit_free(a);
}
END_TEST

START_TEST(errors_and_nulls) {
  rd_admit *a = NULL;
  rd_admit_opts big = {.max_total = RD_ADMIT_TOTAL_MAX + 1};
  ck_assert_int_eq(rd_admit_new(&big, &a), -EINVAL);
  ck_assert_ptr_null(a);
  ck_assert_int_eq(rd_admit_new(NULL, NULL), -EINVAL);
  ck_assert_int_eq(rd_admit_set_allowed(NULL, NULL, 0), -EINVAL);
  rd_admit_counts c = {.accepted = 7};
  rd_admit_stats(NULL, &c);
  ck_assert_uint_eq(c.accepted, 0);
  rd_admit_stats(NULL, NULL);
  rd_admit_note_error(NULL);
  rd_admit_headers_done(NULL, NULL);
  rd_text t = {0};
  rd_admit_metrics_text(NULL, "x", &t);
  ck_assert_ptr_null(t.p);
  rd_admit_free(NULL);
  ck_assert_ptr_null(rd_http_admit(NULL));
  ck_assert_int_eq(rd_admit_new(NULL, &a), 0); /* every default */
  ck_assert_ptr_nonnull(a);
  rd_admit_free(a);
}
END_TEST

START_TEST(exposition) {
  const char *allowed[] = {"10.0.0.1"};
  rd_admit_opts o = {.allowed = allowed, .n_allowed = 1};
  rd_admit *a = NULL;
  ck_assert_int_eq(rd_admit_new(&o, &a), 0);
  ck_assert_int_eq(from4(a, "10.0.0.2"), MHD_NO);
  ck_assert_int_eq(from4(a, "10.0.0.3"), MHD_NO);
  rd_admit_note_error(a);
  rd_text t = {0};
  rd_admit_metrics_text(a, "ring_agent_http", &t);
  ck_assert(!t.oom);
  ck_assert_str_eq(
      t.p,
      "# HELP ring_agent_http_connections_accepted_total HTTP connections admitted\n"
      "# TYPE ring_agent_http_connections_accepted_total counter\n"
      "ring_agent_http_connections_accepted_total 0\n"
      "# HELP ring_agent_http_connections_open HTTP connections admitted and not yet closed\n"
      "# TYPE ring_agent_http_connections_open gauge\n"
      "ring_agent_http_connections_open 0\n"
      "# HELP ring_agent_http_connections_refused_total HTTP connections refused at accept: "
      "address not allowed, the total cap reached, the cap per client address reached\n"
      "# TYPE ring_agent_http_connections_refused_total counter\n"
      "ring_agent_http_connections_refused_total{reason=\"not_allowed\"} 2\n"
      "ring_agent_http_connections_refused_total{reason=\"total\"} 0\n"
      "ring_agent_http_connections_refused_total{reason=\"per_addr\"} 0\n"
      "# HELP ring_agent_http_header_deadline_cuts_total HTTP connections shut down because a "
      "request's headers were not complete in time\n"
      "# TYPE ring_agent_http_header_deadline_cuts_total counter\n"
      "ring_agent_http_header_deadline_cuts_total 0\n"
      "# HELP ring_agent_http_server_errors_total complaints of the HTTP library (aborted, reset "
      "or refused connections), counted not logged\n"
      "# TYPE ring_agent_http_server_errors_total counter\n"
      "ring_agent_http_server_errors_total 1\n");
  free(t.p);
  rd_admit_free(a);
}
END_TEST

/* ------------------------------------------------------------------- caps */

/* N+5 from one address: N held, 5 closed at once and counted; another
 * address is still served. */
START_TEST(cap_per_address) {
  rd_admit_opts o = {.max_per_addr = 4};
  serve(&o);
  int fds[9];
  for (int i = 0; i < 9; i++)
    fds[i] = dial("127.0.0.2", port);
  AWAIT(counts().accepted == 4 && counts().refused_per_addr == 5, 3000);
  ck_assert_uint_eq(counts().accepted, 4);
  ck_assert_uint_eq(counts().refused_per_addr, 5);
  for (int i = 4; i < 9; i++)
    ck_assert_msg(closed_by_peer(fds[i], 2000), "connection %d was not refused", i);
  for (int i = 0; i < 4; i++)
    ck_assert_msg(!closed_by_peer(fds[i], 20), "connection %d was not held", i);
  ck_assert_int_eq(get("127.0.0.3", port), 200);
  ck_assert_int_eq(get("127.0.0.2", port), -1); /* still full */
  ck_assert_uint_eq(counts().refused_per_addr, 6);
  ck_assert_uint_eq(counts().refused_total + counts().refused_not_allowed, 0);
  close(fds[0]);
  AWAIT(counts().open == 3, 3000);
  ck_assert_int_eq(get("127.0.0.2", port), 200); /* a place came free */
  close_all(fds + 1, 8);
  AWAIT(counts().open == 0, 3000);
  ck_assert_uint_eq(counts().open, 0);
  unserve();
}
END_TEST

/* One connection from each of 8 addresses with a cap of 1, some closed:
 * every address's count stays right while others leave the table. */
START_TEST(counts_survive_departures) {
  rd_admit_opts o = {.max_per_addr = 1, .max_total = 8}; /* a 16-place table for 8 addresses */
  serve(&o);
  int fds[8];
  char ip[16];
  for (int i = 0; i < 8; i++) {
    snprintf(ip, sizeof ip, "127.0.0.%d", 21 + i);
    fds[i] = dial(ip, port);
  }
  AWAIT(counts().accepted == 8, 3000);
  ck_assert_uint_eq(counts().accepted, 8);
  const int gone[] = {1, 4, 5, 7};
  for (int i = 0; i < 4; i++) {
    close(fds[gone[i]]);
    fds[gone[i]] = -1;
  }
  AWAIT(counts().open == 4, 3000);
  for (int i = 0; i < 8; i++) {
    snprintf(ip, sizeof ip, "127.0.0.%d", 21 + i);
    ck_assert_int_eq(get(ip, port), fds[i] < 0 ? 200 : -1);
  }
  ck_assert_uint_eq(counts().refused_per_addr, 4);
  close_all(fds, 8);
  unserve();
}
END_TEST

START_TEST(cap_total) {
  rd_admit_opts o = {.max_total = 6};
  serve(&o);
  int fds[9];
  const char *from[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
  for (int i = 0; i < 9; i++)
    fds[i] = dial(from[i / 3], port);
  AWAIT(counts().accepted == 6 && counts().refused_total == 3, 3000);
  ck_assert_uint_eq(counts().accepted, 6);
  ck_assert_uint_eq(counts().refused_total, 3);
  for (int i = 6; i < 9; i++)
    ck_assert(closed_by_peer(fds[i], 2000));
  ck_assert_int_eq(get("127.0.0.5", port), -1);
  ck_assert_uint_eq(counts().refused_total, 4);
  close(fds[0]);
  AWAIT(counts().open == 5, 3000);
  ck_assert_int_eq(get("127.0.0.5", port), 200);
  ck_assert_uint_eq(counts().refused_per_addr + counts().refused_not_allowed, 0);
  close_all(fds + 1, 8);
  unserve();
}
END_TEST

/* ------------------------------------------------------------ the allow-list */

START_TEST(allow_list) {
  const char *allowed[] = {"127.0.0.2"};
  const char *extra[] = {"127.0.0.5:9000"};
  rd_admit_opts o = {.allowed = allowed, .n_allowed = 1, .extra = extra, .n_extra = 1};
  serve(&o);
  rd_admit *a = rd_http_admit(server);
  int fd = dial("127.0.0.3", port);
  ck_assert(closed_by_peer(fd, 2000)); /* closed at once */
  close(fd);
  ck_assert_uint_eq(counts().refused_not_allowed, 1);
  ck_assert_uint_eq(counts().accepted, 0);
  ck_assert_int_eq(get("127.0.0.2", port), 200);
  ck_assert_int_eq(get("127.0.0.5", port), 200); /* an extra */
  const char *more[] = {"127.0.0.2", "127.0.0.3:1234"};
  ck_assert_int_eq(rd_admit_set_allowed(a, more, 2), 0);
  ck_assert_int_eq(get("127.0.0.3", port), 200);
  ck_assert_int_eq(get("127.0.0.5", port), 200);
  ck_assert_int_eq(get("127.0.0.4", port), -1);
  ck_assert_int_eq(rd_admit_set_allowed(a, NULL, 0), 0);
  ck_assert_int_eq(get("127.0.0.4", port), 200);
  ck_assert_uint_eq(counts().refused_not_allowed, 2);
  ck_assert_uint_eq(counts().accepted, 5);
  unserve();
}
END_TEST

/* -------------------------------------------------------- header deadlines */

/* Sends a request's bytes one every 200 ms until the server ends the
 * connection or the request is all sent; returns the ms until the end
 * (or -1 if it never came). */
static long dribble(int fd, const char *req) {
  uint64_t t0 = rd_now_ms();
  for (const char *p = req; *p != '\0'; p++) {
    if (send(fd, p, 1, MSG_NOSIGNAL) != 1 || closed_by_peer(fd, 200))
      return (long)(rd_now_ms() - t0);
  }
  return -1;
}

START_TEST(header_deadline) {
  rd_admit_opts o = {.header_ms = 600};
  serve(&o);
  /* Never idle, never done: one byte each 200 ms, cut after 600 ms. */
  int slow = dial("127.0.0.2", port);
  long took = dribble(slow, REQUEST("/healthz-with-a-long-path-to-send-slowly"));
  close(slow);
  printf("header_deadline: a dribbling client was cut after %ld ms (deadline 600)\n", took);
  ck_assert_msg(took >= 500 && took <= 3000, "cut after %ld ms", took);
  ck_assert_uint_eq(counts().header_deadline_cut, 1);
  /* A whole request is answered. */
  ck_assert_int_eq(get("127.0.0.3", port), 200);
  ck_assert_uint_eq(counts().accepted, 2);
  AWAIT(counts().open == 0, 3000);
  ck_assert_uint_eq(counts().open, 0);
  unserve();
}
END_TEST

/* ------------------------------------------- slow clients against a real one */

#define SLOW 200
#define SLOW_ADDRS 8

static struct {
  int fds[SLOW];
  atomic_bool stop;
} slow;

/* Sends one more header byte to every slow connection each 100 ms. */
static void *slow_loop(void *arg) {
  (void)arg;
  for (int round = 0; round < 300 && !atomic_load(&slow.stop); round++) {
    for (int i = 0; i < SLOW; i++)
      send(slow.fds[i], round == 0 ? "GET /healthz HTTP/1.1\r\nX-Slow: " : "a", round == 0 ? 31 : 1,
           MSG_NOSIGNAL | MSG_DONTWAIT);
    sleep_ms(100);
  }
  return NULL;
}

/* 200 slowloris connections from 127.0.0.11..18 against a server with
 * the default rules (what the daemons get): a real client on 127.0.0.1
 * is answered throughout. */
START_TEST(slow_clients_do_not_stall_real_ones) {
  char err[256];
  server = rd_http_start("127.0.0.1:0", NULL, NULL, NULL, err, sizeof err);
  ck_assert_msg(server != NULL, "%s", err);
  port = rd_http_port(server);
  char ip[16];
  for (int i = 0; i < SLOW; i++) {
    snprintf(ip, sizeof ip, "127.0.0.%d", 11 + i % SLOW_ADDRS);
    slow.fds[i] = dial(ip, port);
  }
  atomic_store(&slow.stop, false);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, slow_loop, NULL), 0);
  AWAIT(counts().open >= SLOW, 5000);
  ck_assert_uint_ge(counts().open, SLOW);
  uint64_t worst = 0, end = rd_now_ms() + 3000;
  int served = 0;
  while (rd_now_ms() < end) { /* 3 s: within the 5 s header deadline */
    uint64_t t0 = rd_now_ms();
    ck_assert_int_eq(get("127.0.0.1", port), 200);
    uint64_t took = rd_now_ms() - t0;
    worst = took > worst ? took : worst;
    served++;
    sleep_ms(50);
  }
  rd_admit_counts c = counts();
  atomic_store(&slow.stop, true);
  pthread_join(t, NULL);
  printf("slow clients: %d GET /healthz beside %d slow connections, worst %llu ms\n", served, SLOW,
         (unsigned long long)worst);
  ck_assert_uint_lt(worst, 3000);
  ck_assert_uint_ge(c.open, SLOW); /* the slow ones were held all along */
  ck_assert_uint_eq(c.refused_total + c.refused_per_addr + c.header_deadline_cut, 0);
  close_all(slow.fds, SLOW);
  unserve();
}
END_TEST

/* ------------------------------------------------- churn against the reaper */

/* A server of the test's own on libmicrohttpd with a pool of 4 threads,
 * set up as daemon.h tells an embedder to: rd_admit's accept policy and
 * options, its own connection notification calling rd_admit's, and a
 * handler that answers on the second call. The notification checks that
 * the socket is still open when CLOSED comes, the order rd_admit relies
 * on to never shut down a reused descriptor. */
static struct {
  rd_admit *adm;
  atomic_int fd_gone; /* CLOSED came with the socket already closed */
  atomic_int closed;  /* CLOSED notifications */
} own;

static void own_notify(void *cls, struct MHD_Connection *c, void **ctx,
                       enum MHD_ConnectionNotificationCode code) {
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (i == NULL || fcntl(i->connect_fd, F_GETFD) == -1)
      atomic_fetch_add(&own.fd_gone, 1);
    atomic_fetch_add(&own.closed, 1);
  }
  rd_admit_on_connection(cls, c, ctx, code);
}

static rd_mhd_result own_route(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_size, void **req) {
  (void)url, (void)method, (void)version, (void)upload_data, (void)upload_size;
  if (*req == NULL) {
    rd_admit_headers_done(cls, c);
    *req = cls;
    return MHD_YES;
  }
  struct MHD_Response *r =
      MHD_create_response_from_buffer(3, (void *)"ok\n", MHD_RESPMEM_PERSISTENT);
  rd_mhd_result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ok;
}

static void own_log(void *cls, const char *fmt, va_list ap) {
  (void)fmt, (void)ap; /* "closed by remote side with incomplete request" and the like */
  rd_admit_note_error(cls);
}

static struct MHD_Daemon *own_start(const rd_admit_opts *o) {
  ck_assert_int_eq(rd_admit_new(o, &own.adm), 0);
  atomic_store(&own.fd_gone, 0);
  atomic_store(&own.closed, 0);
  struct MHD_OptionItem admit[RD_ADMIT_MHD_OPTIONS];
  rd_admit_mhd_options(own.adm, 4, admit);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, rd_admit_accept, own.adm, own_route,
      own.adm, MHD_OPTION_EXTERNAL_LOGGER, own_log, own.adm, MHD_OPTION_SOCK_ADDR, &sa,
      MHD_OPTION_THREAD_POOL_SIZE, 4u, MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_ARRAY, admit,
      MHD_OPTION_NOTIFY_CONNECTION, own_notify, own.adm, MHD_OPTION_END);
  ck_assert_ptr_nonnull(d);
  port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
  return d;
}

static void own_stop(struct MHD_Daemon *d) {
  MHD_stop_daemon(d);
  rd_admit_free(own.adm);
  own.adm = NULL;
}

/* Kept alive (rd_http answers on a request's first call, and
 * libmicrohttpd closes such a connection after the response, so this is
 * the embedder's server): each response starts a fresh deadline, so three
 * requests 500 ms apart (1.5 s in all) are served on one connection with
 * a deadline of 1 s; idle after the last, it is cut. */
START_TEST(keep_alive_gets_fresh_deadlines) {
  rd_admit_opts o = {.header_ms = 1000};
  struct MHD_Daemon *d = own_start(&o);
  int fd = dial("127.0.0.4", port);
  for (int i = 0; i < 3; i++) {
    ck_assert(send_text(fd, REQUEST("/v")));
    ck_assert_int_eq(read_response(fd, 3000), 200);
    sleep_ms(500);
  }
  ck_assert(!closed_by_peer(fd, 0));
  rd_admit_counts c;
  rd_admit_stats(own.adm, &c);
  ck_assert_uint_eq(c.header_deadline_cut, 0);
  uint64_t t0 = rd_now_ms();
  ck_assert(closed_by_peer(fd, 3000));
  printf("keep-alive: idle connection cut %llu ms after the 500 ms pause (deadline 1000)\n",
         (unsigned long long)(rd_now_ms() - t0));
  close(fd);
  rd_admit_stats(own.adm, &c);
  ck_assert_uint_eq(c.header_deadline_cut, 1);
  ck_assert_uint_eq(c.accepted, 1);
  own_stop(d);
}
END_TEST

#define CHURNERS 4
#define CHURN_EACH 40
#define CHURN_BATCH 4
#define VICTIM_GETS 100

static atomic_int dialed, victim_failures;

/* Opens a batch of connections from one address, sends half a request on
 * each, then closes them at once, after a while, or once the reaper has
 * cut them. */
static void *churn_loop(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  char ip[16];
  for (int i = 0; i < CHURN_EACH; i++) {
    snprintf(ip, sizeof ip, "127.0.0.%d", 20 + (int)(rand_r(&seed) % 8));
    int fds[CHURN_BATCH];
    for (int j = 0; j < CHURN_BATCH; j++) {
      if ((fds[j] = dial_try(ip, port)) < 0)
        continue;
      atomic_fetch_add(&dialed, 1);
      send_text(fds[j], "GET /x HTTP/1.1\r\nHost");
    }
    int how = (int)(rand_r(&seed) % 3);
    if (how == 1)
      sleep_ms((long)(rand_r(&seed) % 150));
    for (int j = 0; j < CHURN_BATCH; j++) {
      if (how == 2 && fds[j] >= 0)
        closed_by_peer(fds[j], 1000);
    }
    close_all(fds, CHURN_BATCH);
  }
  return NULL;
}

/* Well-behaved clients, each from an address of its own (127.0.1.N), so
 * no cap refuses them: each is answered, unless a shutdown(2) of the
 * reaper hit a descriptor reused for its connection. */
static void *victim_loop(void *arg) {
  (void)arg;
  char ip[16];
  for (int i = 0; i < VICTIM_GETS; i++) {
    snprintf(ip, sizeof ip, "127.0.1.%d", 1 + i);
    int fd = dial_try(ip, port);
    if (fd < 0) {
      fprintf(stderr, "victim %d: connect: %s\n", i, strerror(errno));
      atomic_fetch_add(&victim_failures, 1);
      continue;
    }
    atomic_fetch_add(&dialed, 1);
    uint64_t t0 = rd_now_ms();
    bool ok = send_text(fd, REQUEST("/v")) && read_response(fd, 5000) == 200;
    close(fd);
    if (!ok) {
      fprintf(stderr, "victim %d: no answer after %llu ms\n", i,
              (unsigned long long)(rd_now_ms() - t0));
      atomic_fetch_add(&victim_failures, 1);
    }
  }
  return NULL;
}

START_TEST(churn_never_hits_a_reused_fd) {
  /* A cap per address that batches overrun, so a pool's threads race for
   * the last places; a total the churn never reaches, so a well-behaved
   * client is never refused. */
  rd_admit_opts o = {.header_ms = 300, .max_per_addr = 3, .max_total = 64};
  struct MHD_Daemon *d = own_start(&o);
  atomic_store(&dialed, 0);
  atomic_store(&victim_failures, 0);
  pthread_t t[CHURNERS + 1];
  for (int i = 0; i < CHURNERS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, churn_loop, (void *)(uintptr_t)(i + 1)), 0);
  ck_assert_int_eq(pthread_create(&t[CHURNERS], NULL, victim_loop, NULL), 0);
  for (int i = 0; i <= CHURNERS; i++)
    pthread_join(t[i], NULL);
  rd_admit_counts c;
  uint64_t end = rd_now_ms() + 5000, seen;
  do { /* until every connection was decided and has closed */
    sleep_ms(10);
    rd_admit_stats(own.adm, &c);
    seen = c.accepted + c.refused_total + c.refused_per_addr + c.refused_not_allowed;
  } while ((c.open > 0 || seen < (uint64_t)atomic_load(&dialed)) && rd_now_ms() < end);
  printf("churn: %d connections, %llu admitted, %llu refused (per address %llu), %llu cut, "
         "%d closed, %llu server complaints\n",
         atomic_load(&dialed), (unsigned long long)c.accepted,
         (unsigned long long)(c.refused_total + c.refused_per_addr + c.refused_not_allowed),
         (unsigned long long)c.refused_per_addr, (unsigned long long)c.header_deadline_cut,
         atomic_load(&own.closed), (unsigned long long)c.server_errors);
  ck_assert_uint_eq(c.open, 0);
  ck_assert_int_eq(atomic_load(&victim_failures), 0);
  ck_assert_int_eq(atomic_load(&own.fd_gone), 0);
  ck_assert_int_ge(atomic_load(&own.closed), (int)c.accepted); /* and those refused once started */
  ck_assert_uint_gt(c.header_deadline_cut, 0);
  ck_assert_uint_gt(c.refused_per_addr, 0);
  ck_assert_uint_eq(seen, (uint64_t)atomic_load(&dialed));
  own_stop(d);
}
END_TEST

static Suite *admit_suite(void) {
  Suite *s = suite_create("daemon_admit");
  TCase *tc = tcase_create("rules");
  tcase_add_test(tc, address_lists);
  tcase_add_test(tc, errors_and_nulls);
  tcase_add_test(tc, exposition);
  suite_add_tcase(s, tc);
  tc = tcase_create("server");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, cap_per_address);
  tcase_add_test(tc, counts_survive_departures);
  tcase_add_test(tc, cap_total);
  tcase_add_test(tc, allow_list);
  tcase_add_test(tc, header_deadline);
  tcase_add_test(tc, slow_clients_do_not_stall_real_ones);
  tcase_add_test(tc, keep_alive_gets_fresh_deadlines);
  tcase_add_test(tc, churn_never_hits_a_reused_fd);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(admit_suite()); }
