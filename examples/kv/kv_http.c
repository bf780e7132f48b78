/*
 * kv_http.c: ring-kv's HTTP API (PROTOCOL.md) on libmicrohttpd.
 *
 * Sections: responses; the version check; the three methods; /metrics and
 * /healthz; routing; start and stop.
 *
 * libmicrohttpd runs a thread per connection: a PUT sleeps in the group
 * commit without holding up other connections. A request is answered on
 * its last call, once its body is in; the body is bounded by KV_VALUE_MAX
 * (413 beyond).
 */
#define _GNU_SOURCE
#include "kv_hlc.h"
#include "kv_server.h"

#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result;
#endif

#ifndef KV_HTTP_CONNECTIONS
#define KV_HTTP_CONNECTIONS 1024
#endif
#define PREFIX "/v1/kv/"
#define H_VERSION "X-Ring-Version"
#define H_TS "X-Ring-Timestamp"
#define H_MISS "X-Ring-Miss"

/* ---------------------------------------------------------------- responses */

typedef struct reply {
  unsigned status;
  uint64_t version; /* sent as X-Ring-Version when not 0 */
  uint64_t ts;      /* sent as X-Ring-Timestamp when not 0 */
  const char *miss; /* X-Ring-Miss, or NULL */
  void *body;       /* malloc()'ed, or NULL */
  size_t len;
  const char *text; /* a static body when body is NULL */
} reply;

static void count_status(kv_server *s, unsigned status) {
  if (status >= 200 && status < 300)
    atomic_fetch_add(&s->st_2xx, 1);
  else if (status == 404)
    atomic_fetch_add(&s->st_404, 1);
  else if (status == 409)
    atomic_fetch_add(&s->st_409, 1);
  else if (status == 421)
    atomic_fetch_add(&s->st_421, 1);
  else if (status == 503)
    atomic_fetch_add(&s->st_503, 1);
  else
    atomic_fetch_add(&s->st_other, 1);
}

static mhd_result send_reply(kv_server *s, struct MHD_Connection *c, reply *r) {
  struct MHD_Response *resp =
      r->body ? MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE)
              : MHD_create_response_from_buffer(r->text ? strlen(r->text) : 0, (void *)r->text,
                                                MHD_RESPMEM_PERSISTENT);
  if (resp == NULL) {
    free(r->body);
    return MHD_NO;
  }
  char num[24];
  if (r->version) {
    snprintf(num, sizeof num, "%" PRIu64, r->version);
    MHD_add_response_header(resp, H_VERSION, num);
  }
  if (r->ts) {
    snprintf(num, sizeof num, "%" PRIu64, r->ts);
    MHD_add_response_header(resp, H_TS, num);
  }
  if (r->miss)
    MHD_add_response_header(resp, H_MISS, r->miss);
  MHD_add_response_header(resp, "X-Ring-Node", s->o.id);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                          r->body ? "application/octet-stream" : "text/plain; charset=utf-8");
  count_status(s, r->status);
  mhd_result ok = MHD_queue_response(c, r->status, resp);
  MHD_destroy_response(resp);
  return ok;
}

static mhd_result text_reply(kv_server *s, struct MHD_Connection *c, unsigned status,
                             uint64_t version, const char *text) {
  reply r = {.status = status, .version = version, .text = text};
  return send_reply(s, c, &r);
}

/* A decimal header; false when absent or malformed (*out untouched). */
static bool header_u64(struct MHD_Connection *c, const char *name, uint64_t *out) {
  const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  char *end = NULL;
  if (v == NULL || *v < '0' || *v > '9')
    return false;
  unsigned long long n = strtoull(v, &end, 10);
  if (*end != '\0')
    return false;
  *out = n;
  return true;
}

/* -------------------------------------------------------- the version check */

/* Waits until the table in service reaches version want, or the wait
 * runs out. */
static void wait_version(kv_server *s, uint64_t want) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  uint64_t ns = (uint64_t)dl.tv_nsec + s->o.version_wait_ms * 1000000u;
  dl.tv_sec += (time_t)(ns / 1000000000u);
  dl.tv_nsec = (long)(ns % 1000000000u);
  pthread_mutex_lock(&s->v_mu);
  while (ring_live_version(s->live) < want && !atomic_load(&s->stop) &&
         pthread_cond_timedwait(&s->v_cv, &s->v_mu, &dl) == 0)
    ;
  pthread_mutex_unlock(&s->v_mu);
}

/* What a request may do with its key at the table in service. */
typedef struct route_info {
  uint64_t version; /* the table's */
  uint32_t token;
  int role;
  unsigned refuse; /* 0, or the status to answer with */
  const char *why;
} route_info;

/* Checks the sender's version against ours and whether this node serves
 * the key's token (PROTOCOL.md, "Versions"). A read from a stale sender is
 * still served when this node owns the token at our version: it holds every
 * write of the token, so its answer is the one an up-to-date client would
 * get, and a client whose etcd is out of reach keeps reading. */
static route_info route_key(kv_server *s, struct MHD_Connection *c, const char *key, size_t klen,
                            bool read) {
  route_info ri = {0, 0, KV_ROLE_NONE, 0, NULL};
  uint64_t want = 0;
  bool has = header_u64(c, H_VERSION, &want);
  if (has && ring_live_version(s->live) < want)
    wait_version(s, want);
  const ring_table *t = ring_live_enter(s->live);
  if (t == NULL) {
    ring_live_exit(s->live);
    ri.refuse = 503, ri.why = "no ring table yet\n";
    return ri;
  }
  ri.version = ring_table_version(t);
  if (has && want > ri.version) {
    ri.refuse = 503, ri.why = "this node has not seen the sender's ring version yet\n";
  } else {
    ri.token = ring_table_token(t, key, klen);
    ri.role = kv_role_here(s, t, ri.token, ring_table_find_node(t, s->o.id));
    if (has && want < ri.version && !(read && ri.role == KV_ROLE_OWNER))
      ri.refuse = 409, ri.why = "stale ring version: refresh the table and retry\n";
    else if (ri.role == KV_ROLE_NONE)
      ri.refuse = 421, ri.why = "misdirected: this node neither owns nor is pending for the key\n";
    else if (read && ri.role == KV_ROLE_MISSING) /* clients read another replica */
      ri.refuse = 503, ri.why = "this node's arc of the key's token is missing (being refilled)\n";
  }
  ring_live_exit(s->live);
  return ri;
}

/* ---------------------------------------------------------- the three methods */

static mhd_result do_get(kv_server *s, struct MHD_Connection *c, const route_info *ri,
                         const char *key, size_t klen) {
  kv_value v = {0}; /* freed on every path, found or not */
  int rc = kv_store_get(s->store, ri->token, key, klen, &v);
  reply r = {.status = 200, .version = ri->version};
  if (rc == RING_ENOTFOUND) {
    r.status = 404, r.miss = "absent", r.text = "no record of the key\n";
  } else if (rc != RING_OK) {
    r.status = 500, r.text = "read failed\n";
  } else if (v.tombstone) {
    r.status = 404, r.miss = "tombstone", r.ts = v.ts, r.text = "deleted\n";
  } else {
    r.ts = v.ts, r.body = v.data, r.len = v.len;
    v.data = NULL;
  }
  kv_value_free(&v);
  return send_reply(s, c, &r);
}

static mhd_result do_write(kv_server *s, struct MHD_Connection *c, const route_info *ri,
                           const char *key, size_t klen, const void *value, size_t vlen,
                           bool tombstone) {
  if (!atomic_load(&s->in_barrier)) /* a write taken now could miss a move's copy */
    return text_reply(s, c, 503, ring_live_version(s->live), "not in the version barrier\n");
  uint64_t ts = 0;
  if (header_u64(c, H_TS, &ts) && ts != 0)
    kv_hlc_observe(&s->hlc, ts);
  else
    ts = kv_hlc_next(&s->hlc);
  kv_where where = ri->role == KV_ROLE_OWNER ? KV_ARC : KV_STAGING; /* pending, missing: staged */
  int rc = kv_store_put(s->store, ri->token, where, key, klen, value, vlen, tombstone, ts);
  if (rc != RING_OK) {
    rd_log(RD_WARN, "write failed", "err", ring_strerror(rc), NULL);
    return text_reply(s, c, rc == RING_ENOSPC ? 507 : 500, ri->version, "write failed\n");
  }
  reply r = {.status = 204, .version = ri->version, .ts = ts};
  return send_reply(s, c, &r);
}

/* ------------------------------------------------------ /metrics and /healthz */

static mhd_result do_metrics(kv_server *s, struct MHD_Connection *c) {
  rd_text t = {0};
  kv_store_stats st;
  kv_store_stats_get(s->store, &st);
  rd_metric(&t, "ringkv_version", "gauge", "ring table version in service",
            (double)ring_live_version(s->live));
  rd_metric_head(&t, "ringkv_requests_total", "counter", "requests by method");
  rd_metric_labeled(&t, "ringkv_requests_total", "method", "GET", (double)s->req_get);
  rd_metric_labeled(&t, "ringkv_requests_total", "method", "PUT", (double)s->req_put);
  rd_metric_labeled(&t, "ringkv_requests_total", "method", "DELETE", (double)s->req_delete);
  rd_metric_head(&t, "ringkv_responses_total", "counter", "responses by status");
  const char *codes[] = {"2xx", "404", "409", "421", "503", "other"};
  uint64_t vals[] = {s->st_2xx, s->st_404, s->st_409, s->st_421, s->st_503, s->st_other};
  for (int i = 0; i < 6; i++)
    rd_metric_labeled(&t, "ringkv_responses_total", "code", codes[i], (double)vals[i]);
  rd_metric(&t, "ringkv_keys", "gauge", "index entries", (double)st.keys);
  rd_metric(&t, "ringkv_segments", "gauge", "segment files indexed", (double)st.segments);
  rd_metric(&t, "ringkv_commits_total", "counter", "group commits", (double)st.commits);
  rd_metric(&t, "ringkv_writes_total", "counter", "records committed", (double)st.writes);
  rd_metric(&t, "ringkv_written_bytes_total", "counter", "segment bytes", (double)st.bytes);
  rd_metric(&t, "ringkv_compactions_total", "counter", "compactions", (double)st.compactions);
  rd_metric(&t, "ringkv_rebuilds_total", "counter", "token indexes rebuilt", (double)st.rebuilds);
  rd_metric(&t, "ringkv_torn_segments_total", "counter", "torn segments", (double)st.torn);
  rd_metric(&t, "ringkv_io_errors_total", "counter", "failed commits and reads",
            (double)st.io_errors);
  rd_metric(&t, "ringkv_staging_adopted_total", "counter", "staging dirs moved into arcs",
            (double)s->adopted);
  rd_metric(&t, "ringkv_staging_dropped_total", "counter", "staging dirs dropped",
            (double)s->dropped);
  rd_text raw = t; /* with ring_kv_build_info and every daemon's cluster label */
  t = (rd_text){0};
  rd_metrics_finish(&raw, &t);
  free(raw.p);
  if (t.oom) {
    free(t.p);
    return text_reply(s, c, 500, 0, "out of memory\n");
  }
  reply r = {.status = 200, .body = t.p, .len = t.len};
  if (r.body == NULL)
    r.text = "";
  return send_reply(s, c, &r);
}

static mhd_result do_health(kv_server *s, struct MHD_Connection *c) {
  uint64_t v = ring_live_version(s->live);
  if (v == 0)
    return text_reply(s, c, 503, 0, "no ring table yet\n");
  if (atomic_load(&s->lease_lost))
    return text_reply(s, c, 503, v, "not registered in etcd\n");
  return text_reply(s, c, 200, v, "ok\n");
}

/* ------------------------------------------------------------------ routing */

typedef struct body {
  char *data;
  size_t len, cap;
  bool too_big;
} body;

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
  (void)cls, (void)c, (void)toe;
  body *b = *con_cls;
  if (b) {
    free(b->data);
    free(b);
    *con_cls = NULL;
  }
}

/* Appends upload data to the request's body; false when out of memory. */
static bool take_upload(body *b, const char *data, size_t n) {
  if (b->too_big || b->len + n > KV_VALUE_MAX) {
    b->too_big = true;
    return true;
  }
  if (b->len + n > b->cap) {
    size_t cap = (b->len + n) * 2 > KV_VALUE_MAX ? KV_VALUE_MAX : (b->len + n) * 2;
    char *d = realloc(b->data, cap);
    if (d == NULL)
      return false;
    b->data = d, b->cap = cap;
  }
  memcpy(b->data + b->len, data, n);
  b->len += n;
  return true;
}

static mhd_result handle_key(kv_server *s, struct MHD_Connection *c, const char *method,
                             const char *key, const body *b) {
  size_t klen = strlen(key);
  bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  bool put = strcmp(method, MHD_HTTP_METHOD_PUT) == 0;
  bool del = strcmp(method, MHD_HTTP_METHOD_DELETE) == 0;
  atomic_fetch_add(get ? &s->req_get : put ? &s->req_put : &s->req_delete, 1);
  if (!get && !put && !del)
    return text_reply(s, c, 405, 0, "GET, PUT or DELETE\n");
  if (klen == 0 || klen > KV_KEY_MAX)
    return text_reply(s, c, 400, 0, "a key is 1 to 1024 bytes\n");
  if (b && b->too_big)
    return text_reply(s, c, 413, 0, "value too large\n");
  route_info ri = route_key(s, c, key, klen, get);
  if (ri.refuse)
    return text_reply(s, c, ri.refuse, ri.version, ri.why);
  if (get)
    return do_get(s, c, &ri, key, klen);
  return do_write(s, c, &ri, key, klen, b ? b->data : NULL, b ? b->len : 0, del);
}

static mhd_result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                         const char *version, const char *upload, size_t *upload_size,
                         void **con_cls) {
  kv_server *s = cls;
  (void)version;
  bool is_put = strcmp(method, MHD_HTTP_METHOD_PUT) == 0;
  if (is_put && strncmp(url, PREFIX, strlen(PREFIX)) == 0) {
    body *b = *con_cls;
    if (b == NULL) { /* first call: headers only */
      if ((b = calloc(1, sizeof *b)) == NULL)
        return MHD_NO;
      *con_cls = b;
      return MHD_YES;
    }
    if (*upload_size) {
      if (!take_upload(b, upload, *upload_size))
        return MHD_NO;
      *upload_size = 0;
      return MHD_YES;
    }
    return handle_key(s, c, method, url + strlen(PREFIX), b);
  }
  if (strncmp(url, PREFIX, strlen(PREFIX)) == 0)
    return handle_key(s, c, method, url + strlen(PREFIX), NULL);
  if (strcmp(url, "/metrics") == 0)
    return do_metrics(s, c);
  if (strcmp(url, "/healthz") == 0)
    return do_health(s, c);
  return text_reply(s, c, 404, 0, "not found\n");
}

/* ----------------------------------------------------------- start and stop */

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  line[strcspn(line, "\n")] = '\0';
  rd_log(RD_WARN, "http", "detail", line, NULL);
}

int kv_http_start(kv_server *s, char *msg, size_t cap) {
  struct sockaddr_storage addr;
  char why[256];
  if (rd_listen_resolve(s->o.listen, &addr, why, sizeof why) != 0)
    return snprintf(msg, cap, "--listen: %s", why), -1;
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                   MHD_USE_ERROR_LOG | (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)KV_HTTP_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, 60u,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
  if (s->mhd == NULL)
    return snprintf(msg, cap, "cannot listen on %s", s->o.listen), -1;
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : 0;
  return 0;
}

void kv_http_stop(kv_server *s) {
  if (s->mhd)
    MHD_stop_daemon(s->mhd);
  s->mhd = NULL;
}
