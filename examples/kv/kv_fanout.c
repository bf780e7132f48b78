/*
 * kv_fanout.c: concurrent HTTP calls to ring-kv servers (kv_fanout.h).
 */
#define _GNU_SOURCE
#include "kv_fanout.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

kv_fanout *kv_fanout_new(void) {
  kv_fanout *f = calloc(1, sizeof *f);
  if (f == NULL || (f->multi = curl_multi_init()) == NULL) {
    free(f);
    return NULL;
  }
  curl_multi_setopt(f->multi, CURLMOPT_MAXCONNECTS, 64L);
  for (int i = 0; i < KV_FANOUT_MAX; i++)
    if ((f->easy[i] = curl_easy_init()) == NULL) {
      kv_fanout_free(f);
      return NULL;
    }
  return f;
}

void kv_fanout_free(kv_fanout *f) {
  if (f == NULL)
    return;
  for (int i = 0; i < KV_FANOUT_MAX; i++)
    if (f->easy[i])
      curl_easy_cleanup(f->easy[i]);
  curl_multi_cleanup(f->multi);
  free(f);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  kv_call *c = ud;
  size_t add = size * n;
  if (c->resp_len + add > c->resp_cap) {
    size_t cap = (c->resp_len + add) * 2;
    uint8_t *d = realloc(c->resp, cap);
    if (d == NULL)
      return 0;
    c->resp = d, c->resp_cap = cap;
  }
  memcpy(c->resp + c->resp_len, p, add);
  c->resp_len += add;
  return add;
}

/* Header "Name: value" in p[0..n); NULL when it is another one. */
static const char *header_value(const char *p, size_t n, const char *name) {
  size_t l = strlen(name);
  if (n <= l + 1 || strncasecmp(p, name, l) != 0 || p[l] != ':')
    return NULL;
  p += l + 1;
  while (*p == ' ')
    p++;
  return p;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  kv_call *c = ud;
  const char *v;
  if ((v = header_value(p, size * n, "X-Ring-Version")) != NULL)
    c->srv_version = strtoull(v, NULL, 10);
  else if ((v = header_value(p, size * n, "X-Ring-Miss")) != NULL)
    c->tombstone = strncmp(v, "tombstone", 9) == 0;
  return size * n;
}

static void setup(CURL *h, kv_call *c, char *url, size_t cap, struct curl_slist **hdrs,
                  uint32_t timeout_ms) {
  snprintf(url, cap, "http://%s%s", c->addr, c->path);
  curl_easy_reset(h); /* options only: connections stay in the multi's cache */
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < 1000 ? timeout_ms : 1000));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
  curl_easy_setopt(h, CURLOPT_PRIVATE, c);
  if (strcmp(c->method, "PUT") == 0) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body ? c->body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
  }
  if (strcmp(c->method, "GET") != 0)
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
  char line[64];
  snprintf(line, sizeof line, "X-Ring-Version: %" PRIu64, c->version);
  *hdrs = curl_slist_append(NULL, line);
  if (c->ts) {
    snprintf(line, sizeof line, "X-Ring-Timestamp: %" PRIu64, c->ts);
    *hdrs = curl_slist_append(*hdrs, line);
  }
  *hdrs = curl_slist_append(*hdrs, "Expect:");
  *hdrs = curl_slist_append(*hdrs, "Content-Type: application/octet-stream");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
}

void kv_fanout_run(kv_fanout *f, kv_call *calls, int n, uint32_t timeout_ms) {
  char urls[KV_FANOUT_MAX][3400]; /* an escaped key takes up to 3 * KV_KEY_MAX */
  struct curl_slist *hdrs[KV_FANOUT_MAX] = {0};
  for (int i = 0; i < n && i < KV_FANOUT_MAX; i++) {
    kv_call *c = &calls[i];
    c->status = 0, c->srv_version = 0, c->tombstone = false, c->resp_len = 0;
    setup(f->easy[i], c, urls[i], sizeof urls[i], &hdrs[i], timeout_ms);
    curl_multi_add_handle(f->multi, f->easy[i]);
  }
  int running = 1;
  while (running > 0) {
    if (curl_multi_perform(f->multi, &running) != CURLM_OK)
      break;
    if (running > 0)
      curl_multi_poll(f->multi, NULL, 0, 100, NULL);
  }
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(f->multi, &left)) != NULL) {
    kv_call *c = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
    if (m->msg == CURLMSG_DONE && m->data.result == CURLE_OK && c)
      curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &c->status);
  }
  for (int i = 0; i < n && i < KV_FANOUT_MAX; i++) {
    curl_multi_remove_handle(f->multi, f->easy[i]);
    curl_slist_free_all(hdrs[i]);
  }
}
