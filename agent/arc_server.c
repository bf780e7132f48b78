/*
 * arc_server.c: the arc server (proto/arc.md) on libmicrohttpd.
 *
 * Sections: limits; the listen address and TLS; responses; checks on a
 * request (signature, time, replay, path, range); the two endpoints;
 * routing; start, stop.
 *
 * libmicrohttpd parses HTTP, bounds every connection's memory (a request
 * whose headers do not fit gets 431), times out idle and half-sent
 * requests, caps connections overall and per client address, and sends
 * file responses with sendfile(2) from the descriptor. Handlers run on its
 * small thread pool: a request has no body worth reading. Nothing is read
 * from the store before the request's signature, time and nonce are
 * checked (arc_auth.c), and only names of the arc syntax reach the file
 * system, opened under the arc's directory with O_NOFOLLOW, so no path
 * and no symbolic link can leave arcs/<token>/. Every answer but file
 * bytes is signed with this node's id and the request's nonce: a receiver
 * acts on nothing else.
 */
#define _GNU_SOURCE     /* O_NOFOLLOW, O_CLOEXEC, getaddrinfo */
#include <microhttpd.h> /* before daemon.h: rd_admit's libmicrohttpd side */

#include "arc_int.h"
#include "daemon.h"
#include "ringx.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ limits */

#ifndef ARC_SERVER_THREADS
#define ARC_SERVER_THREADS 4 /* MHD's pool: sendfile keeps each one cheap */
#endif
#ifndef ARC_SERVER_MEMORY
#define ARC_SERVER_MEMORY (32u << 10) /* per connection: request line + headers */
#endif
#ifndef ARC_TLS_PEM_MAX
#define ARC_TLS_PEM_MAX (1u << 20)
#endif
#ifndef ARC_REPLAY_SLOTS
#define ARC_REPLAY_SLOTS (1u << 17) /* nonces remembered: 3 MiB, ~2,000 requests/s for 60 s */
#endif
#define PREFIX "/v1/arcs/"

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result; /* before 0.9.71 handlers returned int */
#endif

struct arc_server {
  struct MHD_Daemon *mhd;  /* owns the socket and the threads */
  arc_store *store;        /* borrowed; outlives the server */
  const arc_keyring *keys; /* borrowed; outlives the server */
  char node[RING_ID_MAX + 1];
  int64_t skew_ms;
  arc_replay *replay;
  rd_admit *admit;     /* who may connect, how many, how fast their headers must come */
  atomic_bool started; /* mhd is up: its complaints are counted, not kept as the start error */
  char *cert, *key;    /* PEM contents for TLS, or NULL; live as long as mhd */
  uint16_t port;
  atomic_uint_fast64_t bytes_out, requests, unauthorized, bad_requests, connections;
  atomic_uint_fast64_t skewed, replayed, busy, not_held, store_missing, serve_busy, bad_signer;
  pthread_mutex_t signer_mu;             /* guards last_bad_signer */
  char last_bad_signer[RING_ID_MAX + 1]; /* node= of the last request refused as bad_signer */
  atomic_uint serve_limit;               /* arc files streamed at once; 0: no limit */
  atomic_uint serving; /* streams holding a slot; released when their request completes */
  char error[256];     /* libmicrohttpd's last complaint, for a failed start */
};

/* ------------------------------------------------ the listen address, TLS */

/* The listen address by the daemons' one rule (daemon/listen.c). */
static int resolve_listen(const char *listen, struct sockaddr_storage *addr, ring_error *err) {
  char why[RING_ERROR_MESSAGE_MAX - 16];
  if (rd_listen_resolve(listen, addr, why, sizeof why) != 0)
    return ring__err(err, RING_EINVAL, "listen: %s", why);
  return RING_OK;
}

/* A PEM file's contents, malloc()'ed and NUL-terminated. */
static int read_pem(const char *path, char **out, ring_error *err) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return ring__err(err, RING_EIO, "%s: %s", path, strerror(errno));
  char *p = malloc(ARC_TLS_PEM_MAX + 1);
  size_t n = p ? fread(p, 1, ARC_TLS_PEM_MAX + 1, f) : 0;
  fclose(f);
  if (p == NULL || n == 0 || n > ARC_TLS_PEM_MAX) {
    free(p);
    return ring__err(err, RING_EIO, "%s: empty, unreadable or over %u bytes", path,
                     ARC_TLS_PEM_MAX);
  }
  p[n] = '\0';
  *out = p;
  return RING_OK;
}

/* ------------------------------------------------------------- responses */

/* What an answer is signed for: the request's header (NULL when it did
 * not parse) and the token its path names (ARC_NO_TOKEN if none). */
typedef struct answer_ctx {
  const arc_auth *req;
  uint32_t token;
} answer_ctx;

/* Queues r with status, signed over body[0..len) (X-Ring-Sig). */
static mhd_result queue_signed(arc_server *srv, struct MHD_Connection *c, const answer_ctx *a,
                               unsigned status, struct MHD_Response *r, const void *body,
                               size_t len) {
  char sig[ARC_AUTH_VALUE_MAX];
  if (arc_auth_sign_answer(srv->keys, srv->node, a->req, status, a->token, body, len, sig,
                           sizeof sig) == RING_OK)
    MHD_add_response_header(r, ARC_SIG_HEADER, sig);
  mhd_result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ok;
}

static mhd_result reply_text(arc_server *srv, struct MHD_Connection *c, const answer_ctx *a,
                             unsigned status, const char *text) {
  size_t len = strlen(text);
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_PERSISTENT);
  if (r == NULL)
    return MHD_NO; /* libmicrohttpd closes the connection */
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
  if (status == MHD_HTTP_UNAUTHORIZED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "X-Ring-Auth");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  return queue_signed(srv, c, a, status, r, text, len);
}

static mhd_result bad_request(arc_server *srv, struct MHD_Connection *c, const answer_ctx *a,
                              const char *text) {
  atomic_fetch_add(&srv->bad_requests, 1);
  return reply_text(srv, c, a, MHD_HTTP_BAD_REQUEST, text);
}

/* ------------------------------------------------------ checks on a request */

/* The request's X-Ring-Auth, parsed into *a; false when absent or malformed. */
static bool request_auth(struct MHD_Connection *c, arc_auth *a) {
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, ARC_AUTH_HEADER);
  return h != NULL && arc_auth_parse(h, strlen(h), a) == RING_OK;
}

/* The status a request is refused with (401, or 503 when the replay cache
 * is full), or 0 when it is signed for this node by a cluster key, within
 * the time window and not seen before. Signature first: an unsigned
 * request never touches the replay cache. */
static unsigned check_request(arc_server *srv, struct MHD_Connection *c, const char *method,
                              const char *url, const arc_auth *a, bool parsed) {
  const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
  int rc =
      parsed ? arc_auth_verify_request(srv->keys, a, srv->node, method, url, range) : RING_EAUTH;
  if (rc == RING_ENODEID) {
    atomic_fetch_add(&srv->bad_signer, 1);
    pthread_mutex_lock(&srv->signer_mu);
    memcpy(srv->last_bad_signer, a->node, sizeof srv->last_bad_signer);
    pthread_mutex_unlock(&srv->signer_mu);
  }
  if (rc != RING_OK)
    return MHD_HTTP_UNAUTHORIZED;
  int64_t now = arc__wall_ms(), d = now - a->ts_ms;
  if (d > srv->skew_ms || d < -srv->skew_ms) {
    atomic_fetch_add(&srv->skewed, 1);
    return MHD_HTTP_UNAUTHORIZED;
  }
  int seen = arc_replay_check(srv->replay, a->nonce, a->ts_ms, 0);
  if (seen == ARC_REPLAY_SEEN)
    atomic_fetch_add(&srv->replayed, 1);
  if (seen == ARC_REPLAY_FULL)
    atomic_fetch_add(&srv->busy, 1);
  return seen == ARC_REPLAY_NEW    ? 0
         : seen == ARC_REPLAY_SEEN ? MHD_HTTP_UNAUTHORIZED
                                   : MHD_HTTP_SERVICE_UNAVAILABLE;
}

/* Digits into *v without overflow; returns the end, or NULL if none. */
static const char *parse_u64(const char *p, uint64_t *v) {
  const char *start = p;
  uint64_t x = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (x > (UINT64_MAX - 9) / 10)
      return NULL;
    x = x * 10 + (uint64_t)(*p - '0');
  }
  *v = x;
  return p == start ? NULL : p;
}

enum { RANGE_NONE, RANGE_OK, RANGE_MALFORMED, RANGE_UNSATISFIABLE };

/* One "bytes=A-B", "bytes=A-" or "bytes=-N" range of a file of `size`
 * bytes into [*off, *off + *len). Several ranges are malformed here. */
static int parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len) {
  if (h == NULL)
    return RANGE_NONE;
  if (strncmp(h, "bytes=", 6) != 0)
    return RANGE_MALFORMED;
  const char *p = h + 6;
  uint64_t a = 0, b = 0;
  if (*p == '-') { /* the last b bytes */
    if ((p = parse_u64(p + 1, &b)) == NULL || *p != '\0')
      return RANGE_MALFORMED;
    if (b == 0 || size == 0)
      return RANGE_UNSATISFIABLE;
    *off = b < size ? size - b : 0;
    *len = size - *off;
    return RANGE_OK;
  }
  if ((p = parse_u64(p, &a)) == NULL || *p++ != '-')
    return RANGE_MALFORMED;
  b = UINT64_MAX;
  if (*p != '\0' && ((p = parse_u64(p, &b)) == NULL || *p != '\0'))
    return RANGE_MALFORMED;
  if (*p != '\0')
    return RANGE_MALFORMED;
  if (a >= size || b < a)
    return RANGE_UNSATISFIABLE;
  *off = a;
  *len = (b >= size ? size - 1 : b) - a + 1;
  return RANGE_OK;
}

/* ---------------------------------------------------------- the endpoints */

/* The store cannot be read at all (arcs/ gone): 503, never "not held". */
static mhd_result store_missing(arc_server *srv, struct MHD_Connection *c, const answer_ctx *a) {
  atomic_fetch_add(&srv->store_missing, 1);
  return reply_text(srv, c, a, MHD_HTTP_SERVICE_UNAVAILABLE, "arc store unavailable\n");
}

static mhd_result serve_manifest(arc_server *srv, struct MHD_Connection *c, const answer_ctx *a) {
  arc_manifest m;
  ring_error err;
  int rc = arc_store_manifest(srv->store, a->token, &m, &err);
  if (rc == RING_ENOTFOUND) {
    atomic_fetch_add(&srv->not_held, 1);
    return reply_text(srv, c, a, MHD_HTTP_NOT_FOUND, "arc not held\n");
  }
  if (rc == RING_EUNAVAIL)
    return store_missing(srv, c, a);
  char *json = NULL;
  size_t len = 0;
  if (rc == RING_OK) {
    rc = arc_manifest_encode(&m, &json, &len);
    arc_manifest_free(&m);
  }
  if (rc != RING_OK)
    return reply_text(srv, c, a, MHD_HTTP_INTERNAL_SERVER_ERROR, "manifest unavailable\n");
  struct MHD_Response *r = MHD_create_response_from_buffer(len, json, MHD_RESPMEM_MUST_FREE);
  if (r == NULL) {
    free(json);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  return queue_signed(srv, c, a, MHD_HTTP_OK, r, json, len); /* json lives as long as r */
}

/* 416 with the size the client should have asked within; signed over
 * its empty body, as every answer but file bytes is. */
static mhd_result unsatisfiable(arc_server *srv, struct MHD_Connection *c, const answer_ctx *a,
                                uint64_t size) {
  struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  if (r == NULL)
    return MHD_NO;
  char cr[64];
  snprintf(cr, sizeof cr, "bytes */%" PRIu64, size);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
  return queue_signed(srv, c, a, MHD_HTTP_RANGE_NOT_SATISFIABLE, r, "", 0);
}

/* Takes a streaming slot for this request (released by completed()), or
 * false when throttle.moves_per_node files are streaming already. */
static bool take_slot(arc_server *srv, void **req) {
  unsigned limit = atomic_load(&srv->serve_limit);
  if (atomic_fetch_add(&srv->serving, 1) >= limit && limit != 0) {
    atomic_fetch_sub(&srv->serving, 1);
    atomic_fetch_add(&srv->serve_busy, 1);
    return false;
  }
  *req = &srv->serving; /* marks the request as holding a slot */
  return true;
}

/* The file (a range of it with 206), sent from its descriptor. It is
 * opened under the arc's directory, itself opened without following a
 * symbolic link, as a regular file only (arc__open_regular), so a link at
 * arcs/<token> or at the name serves nothing and a FIFO blocks no worker. */
static mhd_result serve_file(arc_server *srv, struct MHD_Connection *c, const answer_ctx *a,
                             const char *name, void **req) {
  if (!take_slot(srv, req))
    return reply_text(srv, c, a, MHD_HTTP_SERVICE_UNAVAILABLE,
                      "busy: streaming as many arc files as throttle.moves_per_node allows\n");
  ring_error err;
  int dfd = arc__store_open_arc(srv->store, a->token, &err);
  if (dfd == RING_EUNAVAIL)
    return store_missing(srv, c, a);
  struct stat st;
  int fd = dfd < 0 ? -ENOENT : arc__open_regular(dfd, name, &st);
  if (dfd >= 0)
    close(dfd);
  if (fd == -ENOTSUP) { /* a FIFO would have blocked this worker in open(2) */
    arc__store_refuse(srv->store, a->token, name);
    return reply_text(srv, c, a, MHD_HTTP_NOT_FOUND, "not a regular file in a held arc\n");
  }
  if (fd < 0)
    return reply_text(srv, c, a, MHD_HTTP_NOT_FOUND, "no such file in a held arc\n");
  uint64_t size = (uint64_t)st.st_size, off = 0, len = size;
  const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
  int kind = parse_range(range, size, &off, &len);
  if (kind == RANGE_MALFORMED || kind == RANGE_UNSATISFIABLE) {
    close(fd);
    if (kind == RANGE_MALFORMED)
      return bad_request(srv, c, a, "malformed range: one bytes=A-B, A- or -N\n");
    return unsatisfiable(srv, c, a, size);
  }
  struct MHD_Response *r = MHD_create_response_from_fd_at_offset64(len, fd, off);
  if (r == NULL) {
    close(fd);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
  unsigned status = MHD_HTTP_OK;
  if (kind == RANGE_OK) {
    char cr[96];
    snprintf(cr, sizeof cr, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1, size);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    status = MHD_HTTP_PARTIAL_CONTENT;
  }
  mhd_result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r); /* closes fd once sent */
  if (ok == MHD_YES)
    atomic_fetch_add(&srv->bytes_out, len);
  return ok;
}

/* ------------------------------------------------------------------ routing */

/* Whether a path has an empty, "." or ".." segment: a traversal attempt
 * wherever it points. */
static bool odd_segments(const char *url) {
  for (const char *p = url; *p == '/'; p += strcspn(p + 1, "/") + 1) {
    size_t n = strcspn(p + 1, "/");
    if (n == 0 || (n == 1 && p[1] == '.') || (n == 2 && p[1] == '.' && p[2] == '.'))
      return true;
  }
  return false;
}

/* The first call for a request (its headers are in): checks the
 * signature, time and nonce. A refusal is answered now, so the connection
 * closes after it; an accepted request is answered on the next call, as
 * libmicrohttpd closes a connection whose response was queued on the first
 * one, and a fetcher reuses its connection for every request it makes. */
static mhd_result admit(arc_server *srv, struct MHD_Connection *c, const char *url,
                        const char *method, void **req) {
  atomic_fetch_add(&srv->requests, 1);
  arc_auth a;
  bool parsed = request_auth(c, &a);
  unsigned refuse = check_request(srv, c, method, url, &a, parsed);
  if (refuse == 0) {
    *req = srv;
    return MHD_YES;
  }
  if (refuse == MHD_HTTP_UNAUTHORIZED)
    atomic_fetch_add(&srv->unauthorized, 1);
  answer_ctx ctx = {.req = parsed ? &a : NULL, .token = ARC_NO_TOKEN};
  return reply_text(srv, c, &ctx, refuse,
                    refuse == MHD_HTTP_UNAUTHORIZED ? "" : "busy: too many requests\n");
}

static mhd_result route(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                        const char *version, const char *upload_data, size_t *upload_data_size,
                        void **req) {
  (void)version, (void)upload_data, (void)upload_data_size;
  arc_server *srv = cls;
  rd_admit_headers_done(srv->admit, c); /* no header deadline until this answer is sent */
  if (*req == NULL)
    return admit(srv, c, url, method, req);
  arc_auth auth; /* checked on the first call; parsed again to sign the answer */
  answer_ctx a = {.req = request_auth(c, &auth) ? &auth : NULL, .token = ARC_NO_TOKEN};
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text(srv, c, &a, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
  if (odd_segments(url))
    return bad_request(srv, c, &a, "bad path: empty, . or .. segment\n");
  if (strncmp(url, PREFIX, sizeof PREFIX - 1) != 0)
    return reply_text(srv, c, &a, MHD_HTTP_NOT_FOUND, "not found\n");
  const char *tok = url + sizeof PREFIX - 1, *slash = strchr(tok, '/');
  if (slash == NULL || !arc__parse_token(tok, (size_t)(slash - tok), &a.token)) {
    a.token = ARC_NO_TOKEN;
    return bad_request(srv, c, &a, "bad token: decimal, below 65536, no leading zeros\n");
  }
  if (strcmp(slash, "/manifest") == 0)
    return serve_manifest(srv, c, &a);
  if (strncmp(slash, "/files/", 7) != 0)
    return reply_text(srv, c, &a, MHD_HTTP_NOT_FOUND, "not found\n");
  if (!arc__valid_name(slash + 7))
    return bad_request(srv, c, &a, "bad file name: [A-Za-z0-9._-], no leading '.'\n");
  return serve_file(srv, c, &a, slash + 7, req);
}

/* A request ended (sent, failed or cut): its streaming slot, if any, is
 * free, and the next request's headers on a kept-alive connection are due
 * within the header deadline again. This callback replaces rd_admit's
 * own (MHD_OPTION_NOTIFY_COMPLETED after the array), so it must arm the
 * deadline itself: without it a client that sent one request could
 * trickle the next one's headers for as long as it liked. */
static void completed(void *cls, struct MHD_Connection *c, void **req,
                      enum MHD_RequestTerminationCode toe) {
  arc_server *srv = cls;
  rd_admit_on_completed(srv->admit, c, req, toe);
  if (*req == &srv->serving)
    atomic_fetch_sub(&srv->serving, 1);
  *req = NULL;
}

/* ---------------------------------------------------------- start and stop */

/* Percent-decoding as libmicrohttpd does it, except that a text holding
 * %00 stays encoded: a NUL would cut the path short after the checks saw
 * it whole; left encoded, its '%' fails the name check instead. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls, (void)c;
  return strstr(s, "%00") ? strlen(s) : MHD_http_unescape(s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  arc_server *srv = cls;
  if (atomic_load(&srv->started)) { /* a client's trouble: counted, never a log line each */
    rd_admit_note_error(srv->admit);
    return;
  }
  vsnprintf(srv->error, sizeof srv->error, fmt, ap);
  srv->error[strcspn(srv->error, "\n")] = '\0';
}

/* Counts accepted connections (a fetcher that reuses its connection makes
 * one for many arcs). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  arc_server *srv = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED)
    atomic_fetch_add(&srv->connections, 1);
  rd_admit_on_connection(srv->admit, c, socket_context, code);
}

static struct MHD_Daemon *start_mhd(arc_server *srv, const arc_server_opts *o,
                                    const struct sockaddr_storage *addr) {
  unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
  if (addr->ss_family == AF_INET6)
    flags |= MHD_USE_IPv6;
  if (srv->cert != NULL)
    flags |= MHD_USE_TLS;
  unsigned timeout = o->timeout_s ? o->timeout_s : 10; /* idle: behind the header deadline */
  struct MHD_OptionItem admit[RD_ADMIT_MHD_OPTIONS];
  rd_admit_mhd_options(srv->admit, ARC_SERVER_THREADS, admit);
  struct MHD_OptionItem tls[] = {
      {srv->cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, srv->cert},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->key},
      {MHD_OPTION_END, 0, NULL},
  };
  return MHD_start_daemon(
      flags, 0, rd_admit_accept, srv->admit, route, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
      MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_SOCK_ADDR, addr,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)ARC_SERVER_THREADS, MHD_OPTION_CONNECTION_TIMEOUT,
      timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ARC_SERVER_MEMORY,
      MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_ARRAY, admit, MHD_OPTION_NOTIFY_CONNECTION,
      on_connection, srv, MHD_OPTION_NOTIFY_COMPLETED, completed, srv, MHD_OPTION_ARRAY, tls,
      MHD_OPTION_END);
}

static void server_free(arc_server *srv) {
  arc_replay_free(srv->replay);
  pthread_mutex_destroy(&srv->signer_mu);
  rd_admit_free(srv->admit);
  free(srv->cert);
  free(srv->key);
  free(srv);
}

int arc_server_start(arc_store *s, const arc_server_opts *o, arc_server **out, ring_error *err) {
  if (s == NULL || o == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "arc_server_start: NULL argument");
  if (o->keys == NULL || o->node_id == NULL || !ring_id_valid(o->node_id))
    return ring__err(err, RING_EINVAL, "arc server: keys and this node's id are required");
  if ((o->tls_cert == NULL) != (o->tls_key == NULL))
    return ring__err(err, RING_EINVAL, "arc server: TLS needs both a certificate and a key");
  if (o->tls_cert != NULL && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    return ring__err(err, RING_EINVAL, "arc server: libmicrohttpd was built without TLS");
  struct sockaddr_storage addr;
  int rc = resolve_listen(o->listen, &addr, err);
  if (rc != RING_OK)
    return rc;
  int64_t skew = o->skew_ms ? o->skew_ms : ARC_SKEW_MS_DEFAULT;
  arc_server *srv = calloc(1, sizeof *srv);
  if (srv == NULL || (rc = arc_replay_new(o->replay_slots ? o->replay_slots : ARC_REPLAY_SLOTS,
                                          skew, arc__wall_ms(), &srv->replay)) != RING_OK) {
    free(srv);
    return ring__err(err, rc == RING_EINVAL ? RING_EINVAL : RING_ENOMEM,
                     "arc server: replay cache: %s (replay_slots: a power of two >= 32)",
                     ring_strerror(rc == RING_OK ? RING_ENOMEM : rc));
  }
  srv->skew_ms = skew;
  pthread_mutex_init(&srv->signer_mu, NULL);
  /* Until the first table says who the peers are, only the configured
   * extra addresses may connect (an empty allow-list, not an unset one). */
  static const char *const none[1] = {""};
  rd_admit_opts ao = {.max_total = o->max_connections,
                      .max_per_addr = o->max_per_address,
                      .header_ms = o->header_deadline_ms,
                      .allowed = o->open_to_all ? NULL : none,
                      .n_allowed = 0,
                      .extra = o->allow_from,
                      .n_extra = o->n_allow_from};
  if (rd_admit_new(&ao, &srv->admit) < 0) {
    server_free(srv);
    return ring__err(err, RING_EINVAL, "arc server: connection limits out of range");
  }
  srv->store = s;
  srv->keys = o->keys;
  snprintf(srv->node, sizeof srv->node, "%s", o->node_id);
  if (o->tls_cert != NULL && ((rc = read_pem(o->tls_cert, &srv->cert, err)) != RING_OK ||
                              (rc = read_pem(o->tls_key, &srv->key, err)) != RING_OK)) {
    server_free(srv);
    return rc;
  }
  if ((srv->mhd = start_mhd(srv, o, &addr)) == NULL) {
    rc = ring__err(err, RING_EIO, "arc server on %s: %s", o->listen,
                   srv->error[0] ? srv->error : "cannot start (address in use?)");
    server_free(srv);
    return rc;
  }
  atomic_store(&srv->started, true);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = info ? info->port : 0;
  *out = srv;
  return RING_OK;
}

uint16_t arc_server_port(const arc_server *srv) { return srv ? srv->port : 0; }

void arc_server_limit(arc_server *srv, uint32_t n) {
  if (srv != NULL)
    atomic_store(&srv->serve_limit, n);
}

int arc_server_allow(arc_server *srv, const char *const *addrs, uint32_t n) {
  return srv ? rd_admit_set_allowed(srv->admit, addrs, n) : -1;
}

void arc_server_admit_metrics(arc_server *srv, const char *prefix, rd_text *t) {
  if (srv != NULL)
    rd_admit_metrics_text(srv->admit, prefix, t);
}

void arc_server_stop(arc_server *srv) {
  if (srv == NULL)
    return;
  MHD_stop_daemon(srv->mhd);
  server_free(srv);
}

void arc_server_last_bad_signer(arc_server *srv, char out[RING_ID_MAX + 1]) {
  pthread_mutex_lock(&srv->signer_mu);
  memcpy(out, srv->last_bad_signer, RING_ID_MAX + 1);
  pthread_mutex_unlock(&srv->signer_mu);
}

void arc_server_stats_get(arc_server *srv, arc_server_stats *out) {
  if (srv == NULL || out == NULL)
    return;
  out->bytes_out = atomic_load(&srv->bytes_out);
  out->requests = atomic_load(&srv->requests);
  out->unauthorized = atomic_load(&srv->unauthorized);
  out->skewed = atomic_load(&srv->skewed);
  out->bad_signer = atomic_load(&srv->bad_signer);
  out->replayed = atomic_load(&srv->replayed);
  out->busy = atomic_load(&srv->busy);
  out->not_held = atomic_load(&srv->not_held);
  out->store_missing = atomic_load(&srv->store_missing);
  out->serve_busy = atomic_load(&srv->serve_busy);
  out->serving = atomic_load(&srv->serving);
  out->bad_requests = atomic_load(&srv->bad_requests);
  out->connections = atomic_load(&srv->connections);
}
