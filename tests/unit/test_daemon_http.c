/*
 * test_daemon_http.c: what a daemon runs on besides its own logic: the
 * /metrics and /healthz server and the pages a daemon adds (real requests
 * through libcurl on 127.0.0.1, port 0), the exposition helpers, the waker
 * a loop sleeps on, and the stop/reload signal thread.
 *
 * Sections: a client; the server; routes; exposition; the waker; signals.
 */
#define _GNU_SOURCE /* kill, strcasestr */
#include "daemon.h"
#include "ring.h"
#include "check_main.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ a client */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

typedef struct reply {
  long status;
  rd_text body;
  char type[128];  /* Content-Type */
  rd_text headers; /* every header line */
} reply;

static size_t collect(char *data, size_t size, size_t n, void *ud) {
  ring__sb_printf(ud, "%.*s", (int)(size * n), data);
  return size * n;
}

/* method "GET", "HEAD" or "POST" to http://127.0.0.1:port path. The caller
 * frees r->body.p and r->headers.p. */
static void request(const char *method, uint16_t port, const char *path, reply *r) {
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
  memset(r, 0, sizeof *r);
  CURL *c = curl_easy_init();
  ck_assert_ptr_nonnull(c);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r->headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  if (strcmp(method, "POST") == 0)
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "a=1");
  if (strcmp(method, "HEAD") == 0)
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  CURLcode rc = curl_easy_perform(c);
  ck_assert_msg(rc == CURLE_OK, "%s %s: %s", method, url, curl_easy_strerror(rc));
  char *type = NULL;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
  snprintf(r->type, sizeof r->type, "%s", type != NULL ? type : "");
  curl_easy_cleanup(c);
}

/* GETs path and checks status, content type and body. */
static void expect(uint16_t port, const char *method, const char *path, long status,
                   const char *type, const char *body) {
  reply r;
  request(method, port, path, &r);
  ck_assert_int_eq(r.status, status);
  if (type != NULL)
    ck_assert_str_eq(r.type, type);
  ck_assert_str_eq(r.body.p != NULL ? r.body.p : "", body);
  free(r.body.p);
  free(r.headers.p);
}

/* ---------------------------------------------------------------- the server */

/* What the handlers report, set by each test. */
static struct {
  atomic_bool healthy; /* /healthz answer */
  atomic_bool fail;    /* handlers behave as if an allocation failed */
  atomic_int scrapes;  /* /metrics calls so far */
} app;

static void app_metrics(void *ud, rd_text *t) {
  ck_assert_ptr_eq(ud, &app);
  int n = atomic_fetch_add(&app.scrapes, 1) + 1;
  rd_metric_head(t, "ring_scrapes_total", "counter", "Scrapes served.");
  rd_metric_sample(t, "ring_scrapes_total", "", n);
  rd_metric_head(t, "ring_nodes", "gauge", "Nodes by state.");
  rd_metric_sample(t, "ring_nodes", "state=\"up\"", 3);
  if (atomic_load(&app.fail))
    t->oom = true;
}

static bool app_health(void *ud, rd_text *t) {
  (void)ud;
  bool ok = atomic_load(&app.healthy);
  ring__sb_printf(t, "%s", ok ? "ok" : "etcd unreachable: connection refused");
  if (atomic_load(&app.fail))
    t->oom = true;
  return ok;
}

static rd_http *server;
static uint16_t port;

static void start(void) {
  atomic_store(&app.healthy, true);
  atomic_store(&app.fail, false);
  atomic_store(&app.scrapes, 0);
  char err[256];
  server = rd_http_start("127.0.0.1:0", app_metrics, app_health, &app, err, sizeof err);
  ck_assert_msg(server != NULL, "%s", err);
  port = rd_http_port(server);
  ck_assert_uint_ne(port, 0);
}

static void stop(void) {
  rd_http_stop(server);
  server = NULL;
}

#define METRICS_TYPE "text/plain; version=0.0.4"

START_TEST(metrics_body_and_type) {
  const char *want = "# HELP ring_scrapes_total Scrapes served.\n"
                     "# TYPE ring_scrapes_total counter\n"
                     "ring_scrapes_total 1\n"
                     "# HELP ring_nodes Nodes by state.\n"
                     "# TYPE ring_nodes gauge\n"
                     "ring_nodes{state=\"up\"} 3\n";
  expect(port, "GET", "/metrics", 200, METRICS_TYPE, want);
  reply r;
  request("GET", port, "/metrics?x=1", &r); /* a query string is ignored */
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_nonnull(strstr(r.body.p, "ring_scrapes_total 2\n"));
  free(r.body.p);
  free(r.headers.p);
}
END_TEST

START_TEST(head_metrics) { expect(port, "HEAD", "/metrics", 200, METRICS_TYPE, ""); }
END_TEST

START_TEST(healthz_ok_and_unavailable) {
  expect(port, "GET", "/healthz", 200, NULL, "ok\n");
  atomic_store(&app.healthy, false);
  expect(port, "GET", "/healthz", 503, NULL, "etcd unreachable: connection refused\n");
}
END_TEST

START_TEST(not_found_and_not_allowed) {
  expect(port, "GET", "/", 404, NULL, "not found\n");
  expect(port, "GET", "/metricsx", 404, NULL, "not found\n");
  expect(port, "POST", "/nowhere", 404, NULL, "not found\n");
  expect(port, "POST", "/metrics", 405, NULL, "method not allowed\n");
  expect(port, "POST", "/healthz", 405, NULL, "method not allowed\n");
  ck_assert_int_eq(atomic_load(&app.scrapes), 0);
}
END_TEST

START_TEST(failed_text_is_500) {
  atomic_store(&app.fail, true);
  expect(port, "GET", "/metrics", 500, NULL, "out of memory\n");
  expect(port, "GET", "/healthz", 500, NULL, "out of memory\n");
  atomic_store(&app.fail, false);
  expect(port, "GET", "/healthz", 200, NULL, "ok\n"); /* the server carries on */
}
END_TEST

/* The file descriptors this process has open (the server's among them). */
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

/* A client that connected and sent half a request must not hold up stop. */
START_TEST(stop_with_client_connected) {
  int fds = open_fds();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  const char half[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  ck_assert_int_eq(write(fd, half, sizeof half - 1), (ssize_t)(sizeof half - 1));
  /* the server took the connection: its end is a descriptor of ours too */
  uint64_t until = rd_now_ms() + 5000;
  while (open_fds() < fds + 2 && rd_now_ms() < until)
    sleep_ms(5);
  ck_assert_int_ge(open_fds(), fds + 2);
  uint64_t t0 = rd_now_ms();
  stop();
  ck_assert_uint_lt(rd_now_ms() - t0, 2000);
  char buf[64];
  ck_assert_int_le(read(fd, buf, sizeof buf), 0); /* closed by the server */
  close(fd);
}
END_TEST

START_TEST(null_callbacks) {
  char err[256];
  rd_http *h = rd_http_start("127.0.0.1:0", NULL, NULL, NULL, err, sizeof err);
  ck_assert_msg(h != NULL, "%s", err);
  expect(rd_http_port(h), "GET", "/metrics", 200, METRICS_TYPE, "");
  expect(rd_http_port(h), "GET", "/healthz", 200, NULL, "ok\n");
  rd_http_stop(h);
  rd_http_stop(NULL);
}
END_TEST

START_TEST(start_errors) {
  char err[256], want[128];
  ck_assert_ptr_null(rd_http_start("127.0.0.1:0:", NULL, NULL, NULL, err, sizeof err));
  ck_assert_ptr_nonnull(strstr(err, "bad listen address '127.0.0.1:0:': "));
  ck_assert_ptr_nonnull(strstr(err, "(expected HOST:PORT or [IPV6]:PORT)"));
  ck_assert_ptr_null(rd_http_start(":0", NULL, NULL, NULL, err, sizeof err)); /* ambiguous */
  ck_assert_ptr_nonnull(strstr(err, "no host (say 0.0.0.0 or [::] for every address)"));
  ck_assert_ptr_null(rd_http_start("127.0.0.1", NULL, NULL, NULL, err, sizeof err));
  ck_assert_ptr_null(rd_http_start("127.0.0.1:65536", NULL, NULL, NULL, err, sizeof err));
  ck_assert_ptr_null(rd_http_start("[::1", NULL, NULL, NULL, err, sizeof err));
  ck_assert_ptr_nonnull(strstr(err, "bad listen address '[::1'"));
  ck_assert_ptr_null(rd_http_start("no-such-host.invalid:80", NULL, NULL, NULL, err, sizeof err));
  ck_assert_ptr_nonnull(strstr(err, "cannot resolve 'no-such-host.invalid:80': "));
  /* the port the fixture's server holds */
  snprintf(want, sizeof want, "cannot serve HTTP on 127.0.0.1:%u: ", port);
  char busy[32];
  snprintf(busy, sizeof busy, "127.0.0.1:%u", port);
  ck_assert_ptr_null(rd_http_start(busy, NULL, NULL, NULL, err, sizeof err));
  ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
  ck_assert_msg(strstr(err, "bind: Address already in use") && !strstr(err, "port 0"), "%s", err);
}
END_TEST

/* ------------------------------------------------------------------ routes */

/* A page that answers with its path and the route's argument; "/fail"
 * behaves as if an allocation failed, "/teapot" answers 418 with no type
 * and "/bad" an impossible status. */
static unsigned app_page(void *ud, const char *path, rd_text *t, const char **type) {
  if (strcmp(path, "/fail") == 0) {
    t->oom = true;
    return 200;
  }
  if (strcmp(path, "/teapot") == 0) {
    ring__sb_printf(t, "short and stout");
    return 418;
  }
  if (strcmp(path, "/bad") == 0)
    return 42;
  ring__sb_printf(t, "%s for %s", path, (const char *)ud);
  *type = "text/html; charset=utf-8";
  return 200;
}

static unsigned empty_page(void *ud, const char *path, rd_text *t, const char **type) {
  (void)ud, (void)path, (void)t, (void)type;
  return 204;
}

static const rd_http_route app_routes[] = {
    {.path = "/", .page = app_page, .ud = "root"},
    {.path = "/status.json", .page = app_page, .ud = "json"},
    {.path = "/fail", .page = app_page, .ud = NULL},
    {.path = "/teapot", .page = app_page, .ud = NULL},
    {.path = "/bad", .page = app_page, .ud = NULL},
    {.path = "/empty", .page = empty_page, .ud = NULL},
    {.path = "/metrics", .page = app_page, .ud = "taken"}, /* built-in paths come first */
    {.path = "/nothing", .page = NULL, .ud = NULL},        /* no page: not found */
    {.path = "/", .page = app_page, .ud = "second"},       /* the first match wins */
    {.path = NULL, .page = NULL, .ud = NULL},
};

#define HTML_TYPE "text/html; charset=utf-8"
#define PLAIN_TYPE "text/plain; charset=utf-8"

START_TEST(routes_serve_pages) {
  char err[256];
  rd_http *h = rd_http_start_routes("127.0.0.1:0", app_metrics, app_health, &app, app_routes, err,
                                    sizeof err);
  ck_assert_msg(h != NULL, "%s", err);
  uint16_t p = rd_http_port(h);
  expect(p, "GET", "/", 200, HTML_TYPE, "/ for root");
  expect(p, "GET", "/status.json?t=1", 200, HTML_TYPE, "/status.json for json");
  expect(p, "HEAD", "/status.json", 200, HTML_TYPE, "");
  expect(p, "GET", "/teapot", 418, PLAIN_TYPE, "short and stout");
  expect(p, "GET", "/fail", 500, NULL, "out of memory\n");
  expect(p, "GET", "/bad", 500, PLAIN_TYPE, "");
  expect(p, "GET", "/empty", 204, NULL, "");
  expect(p, "GET", "/nothing", 404, NULL, "not found\n");
  expect(p, "GET", "/status.jsonx", 404, NULL, "not found\n");
  expect(p, "POST", "/status.json", 405, NULL, "method not allowed\n");
  expect(p, "GET", "/healthz", 200, NULL, "ok\n");
  reply r;
  request("GET", p, "/metrics", &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.type, METRICS_TYPE);
  ck_assert_ptr_nonnull(strstr(r.body.p, "ring_scrapes_total 1\n"));
  ck_assert_ptr_null(strcasestr(r.headers.p, "cache-control"));
  free(r.body.p);
  free(r.headers.p);
  request("GET", p, "/", &r); /* a page is never cached nor sniffed */
  ck_assert_ptr_nonnull(strcasestr(r.headers.p, "Cache-Control: no-store\r\n"));
  ck_assert_ptr_nonnull(strcasestr(r.headers.p, "X-Content-Type-Options: nosniff\r\n"));
  free(r.body.p);
  free(r.headers.p);
  rd_http_stop(h);
}
END_TEST

START_TEST(no_routes) {
  char err[256];
  rd_http *h = rd_http_start_routes("127.0.0.1:0", NULL, NULL, NULL, NULL, err, sizeof err);
  ck_assert_msg(h != NULL, "%s", err);
  expect(rd_http_port(h), "GET", "/", 404, NULL, "not found\n");
  expect(rd_http_port(h), "GET", "/healthz", 200, NULL, "ok\n");
  rd_http_stop(h);
}
END_TEST

/* A route's allow-list: a client outside it gets 403 and is counted, the
 * page is never asked; /metrics and /healthz stay open; "any" is no list;
 * a list with an entry that is not an address is refused, never shortened. */
START_TEST(route_allow_list) {
  char err[256];
  rd_addrs *only_other = NULL, *loop = NULL, *any = (rd_addrs *)1;
  ck_assert_int_eq(rd_addrs_parse("127.0.0.2,[::1]", &only_other, err, sizeof err), 0);
  ck_assert_int_eq(rd_addrs_parse("127.0.0.1", &loop, err, sizeof err), 0);
  ck_assert_int_eq(rd_addrs_parse("any", &any, err, sizeof err), 0);
  ck_assert_ptr_null(any);
  rd_addrs *bad = NULL;
  ck_assert_int_eq(rd_addrs_parse("127.0.0.1,no such host.invalid", &bad, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "no such host.invalid"));
  ck_assert_int_eq(rd_addrs_parse("127.0.0.1,", &bad, err, sizeof err), -1);
  ck_assert_ptr_null(bad);
  atomic_uint_fast64_t denied = 0;
  const rd_http_route routes[] = {
      {.path = "/closed", .page = app_page, .ud = "closed", .allow = only_other, .denied = &denied},
      {.path = "/open", .page = app_page, .ud = "open", .allow = loop, .denied = &denied},
      {.path = NULL}};
  rd_http *h = rd_http_start_routes("127.0.0.1:0", NULL, NULL, NULL, routes, err, sizeof err);
  ck_assert_msg(h != NULL, "%s", err);
  expect(rd_http_port(h), "GET", "/closed", 403, NULL,
         "forbidden: this address may not read this page\n");
  ck_assert_uint_eq(atomic_load(&denied), 1);
  expect(rd_http_port(h), "GET", "/open", 200, "text/html; charset=utf-8", "/open for open");
  expect(rd_http_port(h), "GET", "/healthz", 200, NULL, "ok\n");
  ck_assert_uint_eq(atomic_load(&denied), 1);
  rd_http_stop(h);
  rd_addrs_free(only_other);
  rd_addrs_free(loop);
}
END_TEST

/* -------------------------------------------------------------- exposition */

START_TEST(metric_helpers) {
  rd_text t = {0};
  rd_metric_head(&t, "m", "gauge", "back\\slash and\nnewline");
  rd_metric_sample(&t, "m", "a=\"x\",b=\"y\"", 0.1);
  rd_metric_sample(&t, "m", NULL, 1e21);
  rd_metric_sample(&t, "m", "", -2.5);
  rd_metric_sample(&t, "m", "", 1.0 / 3.0);
  rd_metric_sample(&t, "m", "", 0.0 / 0.0);
  rd_metric_sample(&t, "m", "", 1.0 / 0.0);
  rd_metric_sample(&t, "m", "", -1.0 / 0.0);
  rd_metric_sample(&t, "m", "", 18446744073709551615.0);
  ck_assert(!t.oom);
  ck_assert_str_eq(t.p, "# HELP m back\\\\slash and\\nnewline\n"
                        "# TYPE m gauge\n"
                        "m{a=\"x\",b=\"y\"} 0.1\n"
                        "m 1e+21\n"
                        "m -2.5\n"
                        "m 0.33333333333333331\n"
                        "m NaN\n"
                        "m +Inf\n"
                        "m -Inf\n"
                        "m 1.8446744073709552e+19\n");
  ck_assert_uint_eq(t.len, strlen(t.p));
  free(t.p);
}
END_TEST

/* rd_metrics_finish: as written for a server no daemon identified; once
 * identified, its build_info first and cluster="..." first in every
 * sample's labels (none, empty braces, labels), comments untouched. */
START_TEST(metrics_carry_cluster_and_build_info) {
  rd_text in = {0}, out = {0};
  rd_metric(&in, "m_total", "counter", "h", 3);
  rd_metric_labeled(&in, "m_nodes", "state", "down", 2);
  ring__sb_printf(&in, "m_empty{} 1\n");
  rd_metrics_finish(&in, &out);
  ck_assert_str_eq(out.p, in.p);
  free(out.p);
  out = (rd_text){0};
  rd_metrics_identify("kv", "c-1");
  rd_metrics_finish(&in, &out);
  ck_assert(!out.oom);
  const char *want_head =
      "# HELP ring_kv_build_info 1, labelled with the version and the "
      "commit built\n# TYPE ring_kv_build_info gauge\n"
      "ring_kv_build_info{cluster=\"c-1\",version=\"" RING_VERSION_STRING "\",commit=\"";
  ck_assert_msg(strncmp(out.p, want_head, strlen(want_head)) == 0, "%s", out.p);
  ck_assert_str_eq(strstr(out.p, "\n# HELP m_total"), "\n# HELP m_total h\n"
                                                      "# TYPE m_total counter\n"
                                                      "m_total{cluster=\"c-1\"} 3\n"
                                                      "m_nodes{cluster=\"c-1\",state=\"down\"} 2\n"
                                                      "m_empty{cluster=\"c-1\"} 1\n");
  rd_metrics_identify(NULL, NULL); /* the process's other tests serve as no daemon */
  free(in.p);
  free(out.p);
}
END_TEST

/* rd_metric_table: each kind of entry, from two rooms, written in table
 * order exactly as the hand-written calls would write it. */
typedef struct table_room {
  _Atomic uint64_t wait_ms;
  _Atomic uint64_t hits;
} table_room;
typedef struct table_snap {
  uint64_t served;
} table_snap;

static double table_half(const void *base) {
  return (double)atomic_load(&((const table_room *)base)->hits) / 2;
}

static void table_family(rd_text *t, const void *base) {
  rd_metric_head(t, "f", "gauge", "a family");
  rd_metric_labeled(t, "f", "k", "v", (double)((const table_snap *)base)->served);
}

START_TEST(metric_table) {
  static const rd_metric_desc d[] = {
      RD_METRIC_FIELD(RD_METRIC_ATOMIC, 0, table_room, hits, "hits_total", "counter", "hits"),
      {.name = "wait_seconds",
       .type = "gauge",
       .help = "waited",
       .kind = RD_METRIC_ATOMIC,
       .offset = offsetof(table_room, wait_ms),
       .divisor = 1000.0},
      RD_METRIC_PUT(1, table_family),
      RD_METRIC_FIELD(RD_METRIC_U64, 1, table_snap, served, "served_total", "counter", "served"),
      RD_METRIC_GETTER(0, table_half, "half", "gauge", "hits / 2"),
  };
  table_room room = {.wait_ms = 1234, .hits = 7};
  table_snap snap = {.served = UINT64_MAX};
  const void *bases[] = {&room, &snap};
  rd_text got = {0}, want = {0};
  rd_metric_table(&got, d, sizeof d / sizeof *d, bases);
  rd_metric(&want, "hits_total", "counter", "hits", 7);
  rd_metric(&want, "wait_seconds", "gauge", "waited", 1.234);
  table_family(&want, &snap);
  rd_metric(&want, "served_total", "counter", "served", (double)UINT64_MAX);
  rd_metric(&want, "half", "gauge", "hits / 2", 3.5);
  ck_assert(!got.oom && !want.oom);
  ck_assert_str_eq(got.p, want.p);
  ck_assert_ptr_nonnull(strstr(got.p, "wait_seconds 1.234\n"));
  ck_assert_ptr_nonnull(strstr(got.p, "f{k=\"v\"} 1.8446744073709552e+19\n"));
  free(got.p);
  free(want.p);
}
END_TEST

START_TEST(text_grows) {
  rd_text t = {0};
  char big[5000];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  for (int i = 0; i < 1000; i++)
    ring__sb_printf(&t, "%d,", i % 10);
  ring__sb_printf(&t, "%s", big);
  ring__sb_printf(&t, "%s", "");
  ck_assert(!t.oom);
  ck_assert_uint_eq(t.len, 2000 + sizeof big - 1);
  ck_assert_uint_eq(strlen(t.p), t.len);
  ck_assert(strncmp(t.p, "0,1,2,", 6) == 0);
  ck_assert_uint_lt(t.len, t.cap);
  t.oom = true; /* a failed text ignores what follows */
  ring__sb_printf(&t, "more");
  ck_assert_uint_eq(t.len, 2000 + sizeof big - 1);
  free(t.p);
}
END_TEST

/* --------------------------------------------------------------- the waker */

static rd_waker waker;

static void waker_up(void) { ck_assert_int_eq(rd_waker_init(&waker), 0); }
static void waker_down(void) { rd_waker_destroy(&waker); }

START_TEST(wake_before_wait_is_kept) {
  rd_waker_wake(&waker);
  rd_waker_wake(&waker); /* wakes do not count up */
  uint64_t t0 = rd_now_ms();
  ck_assert(rd_waker_wait(&waker, 5000));
  ck_assert_uint_lt(rd_now_ms() - t0, 1000);
  ck_assert(!rd_waker_wait(&waker, 20)); /* the flag was cleared */
}
END_TEST

START_TEST(timeout_honoured) {
  uint64_t t0 = rd_now_ms();
  ck_assert(!rd_waker_wait(&waker, 150));
  uint64_t took = rd_now_ms() - t0;
  ck_assert_uint_ge(took, 150);
  ck_assert_uint_lt(took, 2000);
  t0 = rd_now_ms();
  ck_assert(!rd_waker_wait(&waker, 0));
  ck_assert_uint_lt(rd_now_ms() - t0, 100);
}
END_TEST

static void *wake_later(void *arg) {
  sleep_ms(50); /* a fixed time is the point: the waiter is asleep when the wake comes */
  rd_waker_wake(arg);
  return NULL;
}

START_TEST(wake_from_another_thread) {
  pthread_t t;
  uint64_t t0 = rd_now_ms();
  ck_assert_int_eq(pthread_create(&t, NULL, wake_later, &waker), 0);
  ck_assert(rd_waker_wait(&waker, 10000));
  ck_assert_uint_lt(rd_now_ms() - t0, 5000);
  pthread_join(t, NULL);
}
END_TEST

START_TEST(huge_timeout_does_not_overflow) {
  rd_waker_wake(&waker);
  ck_assert(rd_waker_wait(&waker, UINT64_MAX));
}
END_TEST

/* ------------------------------------------------------------------ signals */

static atomic_int stops, reloads;

/* Count after waking: once the test sees the count, the callback is done
 * with the waker and the fixture may destroy it. */
static void on_stop(void *ud) {
  rd_waker_wake(ud);
  atomic_fetch_add(&stops, 1);
}

static void on_reload(void *ud) {
  rd_waker_wake(ud);
  atomic_fetch_add(&reloads, 1);
}

/* Waits until counter reaches want or 5 s pass. */
static void await(atomic_int *counter, int want) {
  uint64_t deadline = rd_now_ms() + 5000;
  while (atomic_load(counter) < want && rd_now_ms() < deadline)
    rd_waker_wait(&waker, 100);
  ck_assert_int_eq(atomic_load(counter), want);
}

/* Last in the suite: the signals stay blocked in this process afterwards. */
START_TEST(signals_reach_the_callbacks) {
  ck_assert_int_eq(rd_signals_start(on_stop, on_reload, &waker), 0);
  ck_assert_int_eq(kill(getpid(), SIGHUP), 0);
  await(&reloads, 1);
  ck_assert_int_eq(kill(getpid(), SIGPIPE), 0); /* ignored: the process lives on */
  ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
  await(&stops, 1);
  ck_assert_int_eq(kill(getpid(), SIGINT), 0); /* on_stop runs once */
  ck_assert_int_eq(kill(getpid(), SIGHUP), 0);
  await(&reloads, 2);
  ck_assert_int_eq(atomic_load(&stops), 1);
}
END_TEST

static Suite *http_suite(void) {
  Suite *s = suite_create("daemon_http");
  TCase *tc = tcase_create("http");
  tcase_add_checked_fixture(tc, start, stop);
  tcase_add_test(tc, metrics_body_and_type);
  tcase_add_test(tc, head_metrics);
  tcase_add_test(tc, healthz_ok_and_unavailable);
  tcase_add_test(tc, not_found_and_not_allowed);
  tcase_add_test(tc, failed_text_is_500);
  tcase_add_test(tc, stop_with_client_connected);
  tcase_add_test(tc, null_callbacks);
  tcase_add_test(tc, start_errors);
  tcase_add_test(tc, routes_serve_pages);
  tcase_add_test(tc, no_routes);
  tcase_add_test(tc, route_allow_list);
  suite_add_tcase(s, tc);
  tc = tcase_create("exposition");
  tcase_add_test(tc, metric_helpers);
  tcase_add_test(tc, metrics_carry_cluster_and_build_info);
  tcase_add_test(tc, metric_table);
  tcase_add_test(tc, text_grows);
  suite_add_tcase(s, tc);
  tc = tcase_create("waker");
  tcase_add_checked_fixture(tc, waker_up, waker_down);
  tcase_add_test(tc, wake_before_wait_is_kept);
  tcase_add_test(tc, timeout_honoured);
  tcase_add_test(tc, wake_from_another_thread);
  tcase_add_test(tc, huge_timeout_does_not_overflow);
  tcase_add_test(tc, signals_reach_the_callbacks);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = run_suite(http_suite());
  curl_global_cleanup();
  return rc;
}
