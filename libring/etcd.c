/*
 * etcd.c: the etcd client's transport: endpoints, the connection pool,
 * requests with failover, authentication, TLS, and JSON helpers for the
 * gateway's encoding (bytes as base64, int64 as strings).
 *
 * Why the gateway: it is etcd's own HTTP/JSON front (every etcd 3.x serves
 * it on the client port), so libring needs only libcurl and cJSON, no gRPC
 * or protobuf runtime.
 */
#define _POSIX_C_SOURCE 200809L
#include "etcd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- buffers */

size_t ring__buf_write(char *data, size_t size, size_t n, void *ud) {
  ring__buf *b = ud;
  size_t len = size * n;
  if (b->len + len + 1 > b->max) {
    b->overflow = true;
    return 0; /* makes curl fail the transfer */
  }
  if (b->len + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + len + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
      return 0;
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, data, len);
  b->len += len;
  b->p[b->len] = '\0';
  return len;
}

/* ------------------------------------------------------------ open/close */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_ALL); }

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

/* "http://" + host_port, malloc()'ed (NULL: out of memory). */
static char *with_http(const char *host_port) {
  size_t n = strlen(host_port) + sizeof "http://";
  char *url = malloc(n);
  if (url != NULL)
    snprintf(url, n, "http://%s", host_port);
  return url;
}

/* Splits "a,b,c" into trimmed URLs without trailing slashes. */
static int parse_endpoints(ring_etcd *c, const char *list, ring_error *err) {
  char *copy = strdup(list), *save = NULL;
  if (copy == NULL)
    return ring__err(err, RING_ENOMEM, "endpoints");
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ')
      tok++;
    size_t n = strlen(tok);
    while (n > 0 && (tok[n - 1] == '/' || tok[n - 1] == ' '))
      tok[--n] = '\0';
    if (n == 0)
      continue;
    bool bare = strstr(tok, "://") == NULL; /* host:port is http://, as etcdctl takes it */
    if (!bare && strncmp(tok, "http://", 7) != 0 && strncmp(tok, "https://", 8) != 0) {
      int rc = ring__err(err, RING_EINVAL, "endpoint \"%.100s\": want http:// or https://", tok);
      free(copy);
      return rc;
    }
    char **e = realloc(c->endpoints, (c->n_endpoints + 1) * sizeof *e);
    if (e == NULL || (e[c->n_endpoints] = bare ? with_http(tok) : strdup(tok)) == NULL) {
      if (e)
        c->endpoints = e;
      free(copy);
      return ring__err(err, RING_ENOMEM, "endpoints");
    }
    c->endpoints = e;
    c->n_endpoints++;
  }
  free(copy);
  return c->n_endpoints ? RING_OK : ring__err(err, RING_EINVAL, "no endpoints given");
}

static int authenticate(ring_etcd *c, ring_error *err);

int ring_etcd_open(const ring_etcd_opts *o, ring_etcd **out, ring_error *err) {
  if (o == NULL || out == NULL || o->endpoints == NULL)
    return ring__err(err, RING_EINVAL, "ring_etcd_open: NULL argument");
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return ring__err(err, RING_ENOMEM, "curl_global_init failed");
  ring_etcd *c = calloc(1, sizeof *c);
  if (c == NULL)
    return ring__err(err, RING_ENOMEM, "client");
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->hist_lock, NULL);
  c->timeout_ms = o->timeout_ms ? o->timeout_ms : 5000;
  c->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 1000;
  c->user = dup_or_null(o->user);
  c->password = o->password ? strdup(o->password) : NULL;
  c->ca_file = dup_or_null(o->ca_file);
  c->cert_file = dup_or_null(o->cert_file);
  c->key_file = dup_or_null(o->key_file);
  int rc = parse_endpoints(c, o->endpoints, err);
  if (rc == RING_OK && c->user)
    rc = authenticate(c, err);
  if (rc != RING_OK) {
    ring_etcd_close(c);
    return rc;
  }
  *out = c;
  return RING_OK;
}

void ring_etcd_close(ring_etcd *c) {
  if (c == NULL)
    return;
  for (uint32_t i = 0; i < c->n_pool; i++)
    curl_easy_cleanup(c->pool[i]);
  for (uint32_t i = 0; i < c->n_endpoints; i++)
    free(c->endpoints[i]);
  free(c->endpoints);
  free(c->user);
  free(c->password);
  free(c->ca_file);
  free(c->cert_file);
  free(c->key_file);
  free(c->token);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->hist_lock);
  free(c);
}

const char *ring_etcd_endpoint(ring_etcd *c) {
  return c ? c->endpoints[atomic_load(&c->current) % c->n_endpoints] : NULL;
}

uint64_t ring_etcd_requests(ring_etcd *c) { return c ? atomic_load(&c->requests) : 0; }

void ring_etcd_set_deadline(ring_etcd *c, int64_t deadline_ms) {
  if (c != NULL)
    atomic_store(&c->deadline_ms, deadline_ms > 0 ? deadline_ms : 0);
}

static int64_t mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* What one attempt may take: the client's timeout, or what is left before
 * the deadline if that is less (<= 0: the deadline has passed). */
static long budget_ms(ring_etcd *c, long timeout_ms) {
  int64_t d = atomic_load(&c->deadline_ms);
  if (d == 0)
    return timeout_ms;
  int64_t left = d - mono_ms();
  return left < timeout_ms ? (long)left : timeout_ms;
}

void ring__etcd_failover(ring_etcd *c, uint32_t from) {
  uint32_t next = (from + 1) % c->n_endpoints;
  atomic_compare_exchange_strong(&c->current, &from, next);
}

/* --------------------------------------------------------------- handles */

/* Sets h (pooled or new; NULL: out of memory) up for ep and path. */
static CURL *handle_setup(ring_etcd *c, CURL *h, uint32_t ep, const char *path, bool with_token,
                          struct curl_slist **headers) {
  char auth[1024] = "";
  pthread_mutex_lock(&c->lock);
  if (c->token && with_token)
    snprintf(auth, sizeof auth, "Authorization: %s", c->token);
  pthread_mutex_unlock(&c->lock);
  if (h == NULL)
    return NULL;
  char url[1024];
  snprintf(url, sizeof url, "%s/v3/%s", c->endpoints[ep % c->n_endpoints], path);
  curl_easy_reset(h); /* keeps the handle's open connections */
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  if (c->ca_file)
    curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
  if (c->cert_file)
    curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
  if (c->key_file)
    curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
  *headers = curl_slist_append(NULL, "Content-Type: application/json");
  if (*auth && *headers)
    *headers = curl_slist_append(*headers, auth);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, *headers);
  atomic_fetch_add(&c->requests, 1);
  return h;
}

CURL *ring__etcd_handle(ring_etcd *c, uint32_t ep, const char *path, bool with_token,
                        struct curl_slist **headers) {
  CURL *h = NULL;
  pthread_mutex_lock(&c->lock);
  if (c->n_pool > 0)
    h = c->pool[--c->n_pool];
  pthread_mutex_unlock(&c->lock);
  return handle_setup(c, h ? h : curl_easy_init(), ep, path, with_token, headers);
}

CURL *ring__etcd_handle_new(ring_etcd *c, uint32_t ep, const char *path, bool with_token,
                            struct curl_slist **headers) {
  return handle_setup(c, curl_easy_init(), ep, path, with_token, headers);
}

void ring__etcd_release(ring_etcd *c, CURL *h) {
  pthread_mutex_lock(&c->lock);
  if (c->n_pool < ETCD_POOL_MAX) {
    c->pool[c->n_pool++] = h;
    h = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  if (h)
    curl_easy_cleanup(h);
}

/* -------------------------------------------------------------- requests */

/* What one HTTP exchange came to. */
typedef enum outcome {
  OUT_DONE,     /* a reply: success or an error etcd stated */
  OUT_REFUSED,  /* never reached a server: safe to retry anywhere */
  OUT_UNCERTAIN /* sent, no reply: a read may retry, a write's fate is unknown */
} outcome;

static outcome classify(CURLcode rc) {
  switch (rc) {
  case CURLE_OK:
    return OUT_DONE;
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_SSL_CONNECT_ERROR:
    return OUT_REFUSED;
  default:
    return OUT_UNCERTAIN;
  }
}

/* One POST to endpoint ep; the reply body lands in b. */
static outcome post(ring_etcd *c, uint32_t ep, const char *path, bool with_token, const char *body,
                    ring__buf *b, long *status, CURLcode *crc) {
  struct curl_slist *hdr = NULL;
  CURL *h = ring__etcd_handle(c, ep, path, with_token, &hdr);
  if (h == NULL || hdr == NULL) {
    curl_slist_free_all(hdr);
    if (h)
      ring__etcd_release(c, h);
    *crc = CURLE_OUT_OF_MEMORY;
    return OUT_REFUSED;
  }
  long left = budget_ms(c, c->timeout_ms);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left > 1 ? left : 1L);
  if (left < c->connect_timeout_ms)
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, left > 1 ? left : 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ring__buf_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
  *crc = curl_easy_perform(h);
  *status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all(hdr);
  ring__etcd_release(c, h);
  return classify(*crc);
}

/* gRPC status codes the gateway reports. */
enum {
  GRPC_DEADLINE = 4,
  GRPC_NOT_FOUND = 5,
  GRPC_PERMISSION_DENIED = 7,
  GRPC_UNAVAILABLE = 14,
  GRPC_UNAUTHENTICATED = 16
};

/* Messages that name an auth failure whatever the code beside them (a
 * watch's cancel reason has none): "user name is empty" is the
 * InvalidArgument a request without a token gets. */
static bool names_auth(const char *m) {
  return strstr(m, "auth") != NULL || strstr(m, "permission denied") != NULL ||
         strstr(m, "user name is empty") != NULL;
}

int ring__etcd_errno(double grpc_code, long status, const char *msg, bool *transient) {
  bool busy = grpc_code == GRPC_UNAVAILABLE || grpc_code == GRPC_DEADLINE || status == 503;
  if (transient != NULL)
    *transient = busy;
  if (grpc_code == GRPC_UNAUTHENTICATED || grpc_code == GRPC_PERMISSION_DENIED || names_auth(msg))
    return RING_EAUTH;
  if (grpc_code == GRPC_NOT_FOUND)
    return RING_ENOTFOUND;
  return busy ? RING_EUNKNOWN : RING_ESERVER;
}

static const cJSON *field(const cJSON *o, const char *name) {
  return cJSON_GetObjectItemCaseSensitive(o, name);
}

int ring__etcd_error(const cJSON *j, long status, const char *what, bool *transient,
                     ring_error *err) {
  const cJSON *e = field(j, "error"), *from = cJSON_IsObject(e) ? e : j;
  const cJSON *msg = field(from, "message"), *code = field(from, "grpc_code");
  if (!cJSON_IsNumber(code))
    code = field(from, "code");
  const cJSON *http = field(from, "http_code");
  if (status == 0 && cJSON_IsNumber(http) && http->valuedouble >= 0 && http->valuedouble < 1000)
    status = (long)http->valuedouble; /* a status; anything else is noise, never cast */
  const char *m = cJSON_IsString(msg) ? msg->valuestring
                  : cJSON_IsString(e) ? e->valuestring
                                      : "no message";
  double g = cJSON_IsNumber(code) ? code->valuedouble : 0;
  int rc = ring__etcd_errno(g, status, m, transient);
  return ring__err(err, rc, "%s: %.180s (HTTP %ld)", what, m, status);
}

int ring__etcd_parse_reply(const char *body, size_t len, long status, cJSON **resp, bool *transient,
                           ring_error *err) {
  *transient = false;
  cJSON *j = body && len ? cJSON_ParseWithLength(body, len) : NULL;
  if (j == NULL || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    *transient = status >= 500;
    return ring__err(err, RING_EPROTO, "etcd: HTTP %ld with %s body", status,
                     len ? "a non-JSON" : "an empty");
  }
  if (status == 200 && !cJSON_HasObjectItem(j, "error")) {
    *resp = j;
    return RING_OK;
  }
  int rc = ring__etcd_error(j, status, "etcd", transient, err);
  cJSON_Delete(j);
  return rc;
}

struct timespec ring__deadline_ms(long ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int auth_refusal(ring_etcd *c, uint32_t ep, int rc, ring_error *e);

/* The pause after round `round` of failed attempts: 100 ms doubling to
 * 1.6 s, never past the deadline. */
static void backoff(ring_etcd *c, uint32_t round) {
  long ms = budget_ms(c, 100L << (round < 4 ? round : 4));
  if (ms > 0)
    pause_ms(ms);
}

/* One attempt at the current endpoint. *again: worth another attempt.
 * Works on a local ring_error when err is NULL, so that the auth check
 * below can read etcd's message whatever the caller passed. */
static int attempt(ring_etcd *c, const char *path, const char *body, ring__retry retry,
                   bool with_token, cJSON **resp, bool *again, ring_error *err) {
  uint32_t ep = atomic_load(&c->current) % c->n_endpoints;
  ring__buf b = {NULL, 0, 0, RING_ETCD_RESPONSE_MAX, false};
  ring_error local, *e = err ? err : &local;
  long status;
  CURLcode crc;
  *again = false;
  if (budget_ms(c, c->timeout_ms) <= 0)
    return ring__err(e, RING_ETIMEDOUT, "etcd %s: the command's deadline passed", c->endpoints[ep]);
  int64_t floor = ring__history_floor(c);
  outcome o = post(c, ep, path, with_token, body, &b, &status, &crc);
  int rc;
  bool transient = false;
  if (b.overflow) {
    rc = ring__err(e, RING_EPROTO, "etcd: reply over %u bytes", RING_ETCD_RESPONSE_MAX);
  } else if (o == OUT_DONE) {
    rc = auth_refusal(c, ep, ring__etcd_parse_reply(b.p, b.len, status, resp, &transient, e), e);
    if (rc == RING_OK)
      ring__history_header(c, *resp, floor); /* unary replies are linearizable: judged */
  } else {
    transient = true;
    rc = ring__err(e, crc == CURLE_OPERATION_TIMEDOUT ? RING_ETIMEDOUT : RING_ECONNECT,
                   "etcd %s: %s", c->endpoints[ep], curl_easy_strerror(crc));
  }
  free(b.p);
  *again = transient && (retry == RING__READ || o == OUT_REFUSED);
  if (transient)
    ring__etcd_failover(c, ep);
  if (transient && !*again && retry == RING__WRITE) {
    char why[RING_ERROR_MESSAGE_MAX]; /* e->message cannot be both source and target */
    snprintf(why, sizeof why, "%s", e->message);
    rc = ring__err(e, RING_EUNKNOWN, "etcd %s: %s: the write may or may not have applied",
                   c->endpoints[ep], why);
  }
  return rc;
}

/* Sends text with failover. with_token: the request carries (and may
 * renew) the auth token; the authenticate call itself goes without. A
 * refusal may be an expired token, and is tried once more with a new one;
 * never a "permission denied": the user's roles refused it, a new token
 * changes nothing, and each authentication costs etcd a password hash. */
static int call(ring_etcd *c, const char *path, const char *text, ring__retry retry,
                bool with_token, cJSON **resp, ring_error *err) {
  /* with a deadline, tries end at the deadline (attempt says so) */
  const uint32_t tries = atomic_load(&c->deadline_ms) ? UINT32_MAX : 2 * c->n_endpoints + 1;
  bool reauthed = false;
  int rc = RING_ECONNECT;
  ring_error local, *e = err ? err : &local;
  for (uint32_t i = 0; i < tries; i++) {
    pthread_mutex_lock(&c->lock);
    uint64_t gen = c->token_gen;
    pthread_mutex_unlock(&c->lock);
    bool again = false;
    rc = attempt(c, path, text, retry, with_token, resp, &again, e);
    if (rc == RING_EAUTH && with_token && c->user && !reauthed &&
        strstr(e->message, "permission denied") == NULL) {
      reauthed = true;
      if ((rc = ring__etcd_reauth(c, gen, e)) != RING_OK)
        break;
      i--;
      continue;
    }
    if (rc == RING_OK || !again || budget_ms(c, 1) <= 0) /* past the deadline: the last error */
      break;
    if ((i + 1) % c->n_endpoints == 0) /* every endpoint failed once: back off */
      backoff(c, i / c->n_endpoints);
    if (budget_ms(c, 1) <= 0) /* the backoff took what was left: the last error stands */
      break;
  }
  return rc;
}

int ring__etcd_call(ring_etcd *c, const char *path, cJSON *body, ring__retry retry, cJSON **resp,
                    ring_error *err) {
  char *text = cJSON_PrintUnformatted(body);
  if (text == NULL)
    return ring__err(err, RING_ENOMEM, "request body");
  int rc = call(c, path, text, retry, true, resp, err);
  free(text);
  return rc;
}

/* ------------------------------------------------------------------ auth */

/* etcd refuses a request that lacks a token with InvalidArgument ("user
 * name is empty"), which ring__etcd_errno calls RING_EAUTH: the message
 * then says which endpoint wants a user, and whether one is configured. */
static int auth_refusal(ring_etcd *c, uint32_t ep, int rc, ring_error *e) {
  if (rc != RING_EAUTH || strstr(e->message, "user name is empty") == NULL)
    return rc;
  char why[RING_ERROR_MESSAGE_MAX];
  snprintf(why, sizeof why, "%s", e->message);
  return ring__err(e, RING_EAUTH, "etcd %s requires authentication%s (%s)", c->endpoints[ep],
                   c->user ? "" : " and no user is configured", why);
}

static int authenticate(ring_etcd *c, ring_error *err) {
  cJSON *body = cJSON_CreateObject(), *resp = NULL;
  cJSON_AddStringToObject(body, "name", c->user);
  cJSON_AddStringToObject(body, "password", c->password ? c->password : "");
  char *text = cJSON_PrintUnformatted(body);
  cJSON_Delete(body);
  if (text == NULL)
    return ring__err(err, RING_ENOMEM, "auth request");
  ring_error local, *e = err ? err : &local;
  int rc = call(c, "auth/authenticate", text, RING__READ, false, &resp, e);
  free(text);
  if (rc == RING_EAUTH || rc == RING_ESERVER) {
    char why[RING_ERROR_MESSAGE_MAX]; /* e->message cannot be both source and target */
    snprintf(why, sizeof why, "%s", e->message);
    return ring__err(err, RING_EAUTH, "etcd auth as %s: %s", c->user, why);
  }
  if (rc != RING_OK)
    return rc;
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(resp, "token");
  char *token = cJSON_IsString(tok) ? strdup(tok->valuestring) : NULL;
  cJSON_Delete(resp);
  if (token == NULL)
    return ring__err(err, RING_EPROTO, "etcd auth: no token in the reply");
  pthread_mutex_lock(&c->lock);
  free(c->token);
  c->token = token;
  c->token_gen++;
  pthread_mutex_unlock(&c->lock);
  return RING_OK;
}

int ring__etcd_reauth(ring_etcd *c, uint64_t seen_gen, ring_error *err) {
  pthread_mutex_lock(&c->lock);
  bool stale = c->token_gen == seen_gen; /* another thread may have re-authenticated */
  pthread_mutex_unlock(&c->lock);
  return stale ? authenticate(c, err) : RING_OK;
}
