/*
 * pr_server.c: what the router's front and the simulated backends share: a
 * libmicrohttpd server on loopback that gathers a request's body (bounded
 * by PR_BODY_MAX) and hands it to one handler.
 *
 * Sections: the body; answering; start and stop.
 *
 * A thread per connection: a handler may block (the front on its backend,
 * a backend on a batch slot) without holding up other connections.
 */
#include "pr.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result;
#endif

struct pr_server {
  struct MHD_Daemon *d;
  pr_handler h;
  void *ud;
  uint16_t port;
};

/* ----------------------------------------------------------------- the body */

/* Appends a chunk; past PR_BODY_MAX the rest is dropped and the body
 * marked. false on ENOMEM. */
static bool body_add(pr_body *b, const char *data, size_t n) {
  if (b->too_big || b->len + n > PR_BODY_MAX) {
    b->too_big = true;
    return true;
  }
  char *grown = realloc(b->data, b->len + n + 1);
  if (grown == NULL)
    return false;
  memcpy(grown + b->len, data, n);
  b->data = grown;
  b->len += n;
  b->data[b->len] = '\0';
  return true;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls, (void)c, (void)toe;
  pr_body *b = *req;
  if (b != NULL)
    free(b->data);
  free(b);
  *req = NULL;
}

/* ---------------------------------------------------------------- answering */

static mhd_result send_answer(struct MHD_Connection *c, pr_answer *a) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(a->body ? a->len : 0, a->body, MHD_RESPMEM_MUST_FREE);
  if (resp == NULL) {
    free(a->body);
    return MHD_NO;
  }
  if (a->backend[0] != '\0')
    MHD_add_response_header(resp, "X-Backend", a->backend);
  mhd_result ok = MHD_queue_response(c, a->status, resp);
  MHD_destroy_response(resp);
  return ok;
}

/* libmicrohttpd calls this first with no body (a context is set up), then
 * once per chunk, then once more with none: then the handler answers. */
static mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_size, void **req) {
  (void)version;
  pr_server *s = cls;
  if (*req == NULL) {
    *req = calloc(1, sizeof(pr_body));
    return *req != NULL ? MHD_YES : MHD_NO;
  }
  pr_body *b = *req;
  if (*upload_size > 0) {
    bool ok = body_add(b, upload, *upload_size);
    *upload_size = 0;
    return ok ? MHD_YES : MHD_NO;
  }
  pr_answer a = {413, NULL, 0, ""};
  if (!b->too_big)
    s->h(s->ud, method, url, b, &a);
  return send_answer(c, &a);
}

/* ------------------------------------------------------------ start and stop */

pr_server *pr_server_start(uint16_t port, unsigned connections, pr_handler h, void *ud, char *err,
                           size_t cap) {
  pr_server *s = calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(err, cap, "out of memory");
    return NULL;
  }
  *s = (pr_server){NULL, h, ud, 0};
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only: an example */
  s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                              MHD_USE_POLL,
                          0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &sa,
                          MHD_OPTION_CONNECTION_LIMIT, connections, MHD_OPTION_NOTIFY_COMPLETED,
                          on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
  const union MHD_DaemonInfo *info =
      s->d ? MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
  if (info == NULL) {
    snprintf(err, cap, "cannot listen on 127.0.0.1:%u", (unsigned)port);
    pr_server_stop(s);
    return NULL;
  }
  s->port = info->port;
  return s;
}

uint16_t pr_server_port(const pr_server *s) { return s->port; }

void pr_server_stop(pr_server *s) {
  if (s == NULL)
    return;
  if (s->d != NULL)
    MHD_stop_daemon(s->d);
  free(s);
}
