/*
 * pr_front.c: the router's HTTP front: route the body (pr_route.c), post
 * it to the pick's /v1/generate, hand the answer back.
 *
 * Sections: a connection's backend client; forwarding; the handler.
 *
 * Each connection thread keeps one libcurl handle for its life, so its
 * connections to the backends are reused across requests (a new TCP
 * connection per request would cost more than the routing).
 */
#include "pr.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORWARD_TIMEOUT_MS 30000L
#define ANSWER_MAX PR_BODY_MAX /* a backend's answer, bounded like a request */

/* ------------------------------------------------ a connection's backend client */

static pthread_key_t curl_key;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_release(void *h) { curl_easy_cleanup(h); }
static void curl_key_make(void) { (void)pthread_key_create(&curl_key, curl_release); }

/* The calling thread's handle, made on first use; freed when the thread
 * ends (libmicrohttpd ends it with its connection). NULL on ENOMEM. */
static CURL *thread_curl(void) {
  pthread_once(&curl_once, curl_key_make);
  CURL *h = pthread_getspecific(curl_key);
  if (h == NULL && (h = curl_easy_init()) != NULL && pthread_setspecific(curl_key, h) != 0) {
    curl_easy_cleanup(h);
    h = NULL;
  }
  return h;
}

/* ------------------------------------------------------------------ forwarding */

typedef struct sink {
  char *data;
  size_t len;
  bool too_big;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  sink *s = ud;
  const size_t got = size * n;
  if (s->len + got > ANSWER_MAX) {
    s->too_big = true;
    return 0; /* stops the transfer */
  }
  char *grown = realloc(s->data, s->len + got + 1);
  if (grown == NULL)
    return 0;
  memcpy(grown + s->len, p, got);
  s->data = grown;
  s->len += got;
  return got;
}

/* Posts the body to http://addr/v1/generate; fills a with the backend's
 * status and answer, or 502. */
static void forward(const char *addr, const pr_body *b, pr_answer *a) {
  CURL *h = thread_curl();
  char url[RING_ADDR_MAX + 32];
  snprintf(url, sizeof url, "http://%s/v1/generate", addr);
  sink s = {NULL, 0, false};
  long status = 0;
  CURLcode rc = CURLE_OUT_OF_MEMORY;
  if (h != NULL) {
    curl_easy_reset(h); /* keeps the connection cache */
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, FORWARD_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 64L); /* one per backend, reused */
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, b->data ? b->data : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)b->len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  }
  if (rc != CURLE_OK || status < 100 || status > 599) {
    free(s.data);
    a->status = 502;
    return;
  }
  a->status = (unsigned)status;
  a->body = s.data;
  a->len = s.len;
}

/* -------------------------------------------------------------------- the handler */

static void handle(void *ud, const char *method, const char *url, const pr_body *b, pr_answer *a) {
  (void)url;
  pr_router *r = ud;
  if (strcmp(method, "POST") != 0) {
    a->status = 405;
    return;
  }
  pr_pick p;
  int rc = pr_route_begin(r, b->data ? b->data : "", b->len, &p);
  if (rc != RING_OK) {
    a->status = 503;
    return;
  }
  snprintf(a->backend, sizeof a->backend, "%s", p.addr);
  forward(p.addr, b, a);
  pr_route_end(r, &p);
}

pr_server *pr_front_start(pr_router *r, uint16_t port, char *err, size_t cap) {
  return pr_server_start(port, 1024, handle, r, err, cap);
}
