/*
 * http.c: the /metrics and /healthz server, on libmicrohttpd, and the
 * pages a daemon adds (rd_http_route).
 *
 * Sections: limits; the listen address; responses; routing (built-in
 * paths first, then the daemon's routes); start and stop.
 *
 * libmicrohttpd runs its own polling thread and times idle connections
 * out; an rd_admit (admit.c) decides who connects, caps connections in
 * total and per client address, and cuts a client whose headers are
 * overdue, so slow or stuck clients cannot tie up the server and stopping
 * never waits on one. Handlers run on that thread. What libmicrohttpd
 * complains of once serving (resets, aborted requests) is counted, not
 * logged.
 */
#define _POSIX_C_SOURCE 200809L /* getaddrinfo */
#include <microhttpd.h>         /* before daemon.h: it declares rd_admit's MHD side then */

#include "daemon.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------------ limits */

/* Connections: rd_admit's limits (rd_admit_opts). */
#ifndef RD_HTTP_TIMEOUT_S
#define RD_HTTP_TIMEOUT_S 10 /* an idle connection is closed after this */
#endif

#define METRICS_TYPE "text/plain; version=0.0.4"
#define PLAIN_TYPE "text/plain; charset=utf-8"

typedef rd_mhd_result mhd_result; /* enum MHD_Result, or int before 0.9.71 */

struct rd_http {
  struct MHD_Daemon *mhd;      /* owns the listening socket and the thread */
  rd_metrics_fn metrics;       /* may be NULL: /metrics is then empty */
  rd_health_fn health;         /* may be NULL: always healthy */
  void *ud;                    /* both callbacks' argument */
  const rd_http_route *routes; /* borrowed, ends with {NULL}; may be NULL */
  rd_admit *admit;             /* who may connect; outlives mhd */
  atomic_bool serving;         /* started: complaints are counted, not logged */
  uint16_t port;               /* the port bound */
  char error[256];             /* the last complaint before serving, for a failed start */
};

/* ----------------------------------------------------------------- responses */

/* Queues body (freed by libmicrohttpd through free_body, which may be NULL
 * for static text) with the given status and content type; a daemon's page
 * also says not to cache or sniff it. */
static mhd_result reply_page(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, size_t len, MHD_ContentReaderFreeCallback free_body,
                             bool page) {
  struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(len, body, free_body);
  if (r == NULL) {
    if (free_body != NULL)
      free_body(body);
    return MHD_NO; /* libmicrohttpd closes the connection */
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  if (page) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  }
  mhd_result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ok;
}

/* The same without the page headers. */
static mhd_result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body,
                        size_t len, MHD_ContentReaderFreeCallback free_body) {
  return reply_page(c, status, type, body, len, free_body, false);
}

static mhd_result reply_static(struct MHD_Connection *c, unsigned status, const char *text) {
  return reply(c, status, PLAIN_TYPE, (char *)text, strlen(text), NULL);
}

/* Hands t's buffer to libmicrohttpd (as a page's, with page); a failed t
 * becomes a 500. */
static mhd_result reply_body(struct MHD_Connection *c, unsigned status, const char *type,
                             rd_text *t, bool page) {
  if (t->oom) {
    free(t->p);
    return reply_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
  }
  if (t->p == NULL)
    return reply_page(c, status, type, (char *)"", 0, NULL, page);
  return reply_page(c, status, type, t->p, t->len, free, page);
}

static mhd_result reply_text(struct MHD_Connection *c, unsigned status, const char *type,
                             rd_text *t) {
  return reply_body(c, status, type, t, false);
}

/* ------------------------------------------------------------------ routing */

static mhd_result serve_metrics(const rd_http *h, struct MHD_Connection *c) {
  rd_text raw = {0}, t = {0};
  if (h->metrics != NULL)
    h->metrics(h->ud, &raw);
  rd_metrics_finish(&raw, &t);
  free(raw.p);
  return reply_text(c, MHD_HTTP_OK, METRICS_TYPE, &t);
}

static mhd_result serve_health(const rd_http *h, struct MHD_Connection *c) {
  rd_text t = {0};
  bool ok = true;
  if (h->health != NULL)
    ok = h->health(h->ud, &t);
  if (t.len == 0)
    ring__sb_printf(&t, "%s", ok ? "ok" : "unhealthy");
  if (!t.oom && t.p[t.len - 1] != '\n')
    ring__sb_printf(&t, "\n");
  return reply_text(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, PLAIN_TYPE, &t);
}

static mhd_result serve_page(const rd_http_route *r, const char *url, struct MHD_Connection *c) {
  rd_text t = {0};
  const char *type = NULL;
  unsigned status = r->page(r->ud, url, &t, &type);
  if (status < 100 || status > 599)
    status = MHD_HTTP_INTERNAL_SERVER_ERROR;
  return reply_body(c, status, type != NULL ? type : PLAIN_TYPE, &t, true);
}

/* The daemon's route for url, NULL when it has none. */
static const rd_http_route *find_route(const rd_http *h, const char *url) {
  for (const rd_http_route *r = h->routes; r != NULL && r->path != NULL; r++)
    if (r->page != NULL && strcmp(url, r->path) == 0)
      return r;
  return NULL;
}

/* Whether c's client address is in allow. */
static bool client_in(struct MHD_Connection *c, const rd_addrs *allow) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return ci != NULL && rd_addrs_has(allow, ci->client_addr);
}

/* libmicrohttpd's request callback. Answers on the first call: no page
 * takes a body, so there is nothing to wait for (a POST's body is dropped
 * with the connection). */
static mhd_result route(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                        const char *version, const char *upload_data, size_t *upload_size,
                        void **state) {
  (void)version, (void)upload_data, (void)upload_size, (void)state;
  const rd_http *h = cls;
  rd_admit_headers_done(h->admit, c);
  bool metrics = strcmp(url, "/metrics") == 0, health = strcmp(url, "/healthz") == 0;
  const rd_http_route *page = metrics || health ? NULL : find_route(h, url);
  if (!metrics && !health && page == NULL)
    return reply_static(c, MHD_HTTP_NOT_FOUND, "not found\n");
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_static(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
  if (page != NULL && page->allow != NULL && !client_in(c, page->allow)) {
    if (page->denied != NULL)
      atomic_fetch_add(page->denied, 1);
    return reply_static(c, MHD_HTTP_FORBIDDEN, "forbidden: this address may not read this page\n");
  }
  if (page != NULL)
    return serve_page(page, url, c);
  return metrics ? serve_metrics(h, c) : serve_health(h, c);
}

/* ------------------------------------------------------------ start and stop */

/* Until the server is up, libmicrohttpd's complaints go to the log and
 * the latest is kept so a failed start can say why. Once serving, each
 * one is about a connection (reset, aborted, refused): counted only, so a
 * flood of bad clients cannot flood the log. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap) {
  rd_http *h = cls;
  if (atomic_load(&h->serving)) {
    rd_admit_note_error(h->admit);
    return;
  }
  vsnprintf(h->error, sizeof h->error, fmt, ap);
  h->error[strcspn(h->error, "\n")] = '\0';
  rd_log(RD_WARN, "http server", "error", h->error, NULL);
}

static struct MHD_Daemon *start_mhd(rd_http *h, const struct sockaddr_storage *addr) {
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
  if (addr->ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  struct MHD_OptionItem admit[RD_ADMIT_MHD_OPTIONS];
  rd_admit_mhd_options(h->admit, 1, admit);
  /* The logger first: libmicrohttpd reports problems with later options
   * through it. */
  return MHD_start_daemon(flags, 0, rd_admit_accept, h->admit, route, h, MHD_OPTION_EXTERNAL_LOGGER,
                          mhd_log, h, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_CONNECTION_TIMEOUT,
                          (unsigned)RD_HTTP_TIMEOUT_S, MHD_OPTION_ARRAY, admit, MHD_OPTION_END);
}

rd_http *rd_http_start(const char *listen, rd_metrics_fn metrics, rd_health_fn health, void *ud,
                       char *errbuf, size_t errcap) {
  return rd_http_start_admit(listen, metrics, health, ud, NULL, NULL, errbuf, errcap);
}

rd_http *rd_http_start_routes(const char *listen, rd_metrics_fn metrics, rd_health_fn health,
                              void *ud, const rd_http_route *routes, char *errbuf, size_t errcap) {
  return rd_http_start_admit(listen, metrics, health, ud, routes, NULL, errbuf, errcap);
}

/* Why addr cannot be bound, into why (false when it can: the failure was
 * another). libmicrohttpd says "Failed to bind to port 0" when given the
 * address whole; binding it here names the cause (strerror). */
static bool bind_error(const struct sockaddr_storage *addr, char *why, size_t cap) {
  int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return snprintf(why, cap, "socket: %s", strerror(errno)), true;
  int one = 1; /* as libmicrohttpd binds: a port in TIME_WAIT is free */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t len =
      addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  bool failed = bind(fd, (const struct sockaddr *)addr, len) != 0;
  if (failed)
    snprintf(why, cap, "bind: %s", strerror(errno));
  close(fd);
  return failed;
}

/* The server's own part: h's rules, then libmicrohttpd. Returns 0, or -1
 * with errbuf set and nothing of theirs left behind. */
static int start_server(rd_http *h, const char *listen, const struct sockaddr_storage *addr,
                        const rd_admit_opts *admit, char *errbuf, size_t errcap) {
  int rc = rd_admit_new(admit, &h->admit);
  if (rc < 0) {
    snprintf(errbuf, errcap, "cannot serve HTTP on %s: connection rules: %s", listen,
             strerror(-rc));
    return -1;
  }
  if ((h->mhd = start_mhd(h, addr)) == NULL) {
    char why[160];
    snprintf(errbuf, errcap, "cannot serve HTTP on %s: %s", listen,
             bind_error(addr, why, sizeof why) ? why
             : h->error[0] != '\0'             ? h->error
                                               : "libmicrohttpd failed to start");
    rd_admit_free(h->admit);
    return -1;
  }
  atomic_store(&h->serving, true);
  return 0;
}

rd_http *rd_http_start_admit(const char *listen, rd_metrics_fn metrics, rd_health_fn health,
                             void *ud, const rd_http_route *routes, const rd_admit_opts *admit,
                             char *errbuf, size_t errcap) {
  char scratch[1];
  if (errbuf == NULL || errcap == 0)
    errbuf = scratch, errcap = sizeof scratch;
  struct sockaddr_storage addr;
  if (rd_listen_resolve(listen, &addr, errbuf, errcap) != 0)
    return NULL;
  rd_http *h = calloc(1, sizeof *h);
  if (h == NULL) {
    snprintf(errbuf, errcap, "out of memory");
    return NULL;
  }
  *h = (rd_http){.metrics = metrics, .health = health, .ud = ud, .routes = routes};
  if (start_server(h, listen, &addr, admit, errbuf, errcap) != 0) {
    free(h);
    return NULL;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
  h->port = info != NULL ? info->port : 0;
  return h;
}

uint16_t rd_http_port(const rd_http *h) { return h != NULL ? h->port : 0; }

rd_admit *rd_http_admit(rd_http *h) { return h != NULL ? h->admit : NULL; }

/* Closes the listening socket and every connection, joins the thread,
 * then frees the rules (no callback can come any more). */
void rd_http_stop(rd_http *h) {
  if (h == NULL)
    return;
  MHD_stop_daemon(h->mhd);
  rd_admit_free(h->admit);
  free(h);
}
