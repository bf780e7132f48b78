/*
 * etcd_watch.c: ring_etcd_watch and ring_watch_cancel: one streamed
 * POST /v3/watch per watch, on a thread of its own, resumed across broken
 * streams, member loss and compaction.
 *
 * Sections:
 *   1. parsing one message of the stream (ring__watch_parse)
 *   2. the watch: state, delivery, the handling of each message
 *   3. one stream: a curl transfer driven by a multi handle of the watch's
 *      own, so a cancel wakes it at once (curl_multi_wakeup)
 *   4. the thread: reconnects with backoff and failover
 *   5. the public calls
 *
 * Revisions: `next` is the first revision the watch still owes the
 * callback. A stream asks for start_revision = next; events below next are
 * replays and are dropped, so after any reconnect nothing is repeated; a
 * delivered batch moves next past its last event, so nothing is missed.
 * A progress notification at revision r moves next to r + 1 (etcd sends one
 * only to a watcher that is in sync, so every event up to r was sent first).
 * Compaction past next: the callback hears compacted=true with the compact
 * revision, and the watch resumes from there. A store behind next (etcd
 * restored from an older snapshot) is judged by the client's history
 * (behind()); when it went back, the callback hears compacted=true too and
 * the watch follows the store from its current revision. A batch of events is called
 * back with revision = its last event's mod revision (the header's revision
 * may run ahead of events still to come while etcd replays history).
 *
 * Starting: ring_etcd_watch returns once etcd confirmed the first watch
 * ("created"), so with start_revision 0 every change after the return is
 * seen; when no endpoint gives a watch (each tried once, within the
 * client's timeouts) it fails with that error (RING_ECONNECT, RING_EAUTH,
 * RING_EPROTO, ...) and leaves nothing running. Callbacks may begin before
 * it returns. After that no error reaches the caller: the thread retries.
 *
 * Liveness: a dead peer is found by TCP keep-alive within KEEPIDLE +
 * KEEPCNT * KEEPINTVL seconds (16 s: with the kernel's 9 probes a stream on
 * a member cut off by a partition stayed blind for 55 s, and a coordinator
 * that had just taken over missed a join meanwhile: tests/net's
 * leader_minority); a peer that accepts and says nothing by two deadlines:
 * no "created" within the client's request timeout, and no byte at all for
 * RING_WATCH_IDLE_MS (etcd sends a progress notification every 10 minutes
 * by default, so this is kept well above it).
 */
#define _POSIX_C_SOURCE 200809L
#include "etcd_watch_int.h"
#include "json_stream.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#ifndef RING_WATCH_STACK
#define RING_WATCH_STACK (256u << 10) /* the watch thread's stack */
#endif
#ifndef RING_WATCH_IDLE_MS
#define RING_WATCH_IDLE_MS (15L * 60 * 1000) /* a stream silent this long is broken */
#endif
#ifndef RING_WATCH_BACKOFF_MIN_MS
#define RING_WATCH_BACKOFF_MIN_MS 50L
#endif
#ifndef RING_WATCH_BACKOFF_MAX_MS
#define RING_WATCH_BACKOFF_MAX_MS 2000L
#endif
#ifndef RING_WATCH_KEEPIDLE_S
#define RING_WATCH_KEEPIDLE_S 10L /* TCP keep-alive: first probe after this idle time */
#endif
#ifndef RING_WATCH_KEEPINTVL_S
#define RING_WATCH_KEEPINTVL_S 2L /* and then one probe every this often */
#endif
#ifndef RING_WATCH_KEEPCNT
#define RING_WATCH_KEEPCNT 3 /* unanswered probes before the stream counts as dead */
#endif
#define WATCH_ERRBODY_MAX (64u << 10) /* body of a non-200 reply kept for its message */
#define WATCH_STABLE_S 2.0            /* a stream that lived this long resets the backoff */
#define WATCH_POLL_MAX_MS 30000L      /* longest sleep in poll (cancel wakes it anyway) */

/* ------------------------------------------------------- 1. parsing */

static const cJSON *field(const cJSON *o, const char *name) {
  return cJSON_GetObjectItemCaseSensitive(o, name);
}

static int malformed(ring_error *err, const char *what) {
  return ring__err(err, RING_EPROTO, "etcd watch: malformed message: %s", what);
}

/* A boolean that may be absent (false). */
static bool get_bool(const cJSON *o, const char *name, bool *out) {
  const cJSON *it = field(o, name);
  *out = cJSON_IsTrue(it);
  return it == NULL || cJSON_IsBool(it);
}

static int parse_event(const cJSON *e, ring_event *ev, ring_error *err) {
  memset(ev, 0, sizeof *ev);
  if (!cJSON_IsObject(e))
    return malformed(err, "an event is not an object");
  const cJSON *type = field(e, "type");
  if (type == NULL || (cJSON_IsString(type) && strcmp(type->valuestring, "PUT") == 0) ||
      (cJSON_IsNumber(type) && type->valuedouble == 0))
    ev->type = RING_EVENT_PUT;
  else if ((cJSON_IsString(type) && strcmp(type->valuestring, "DELETE") == 0) ||
           (cJSON_IsNumber(type) && type->valuedouble == 1))
    ev->type = RING_EVENT_DELETE;
  else
    return malformed(err, "events[].type");
  int rc = ring__kv_parse(field(e, "kv"), &ev->kv);
  if (rc == RING_ENOMEM)
    return ring__err(err, rc, "etcd watch: event");
  if (rc != RING_OK)
    return malformed(err, "events[].kv");
  if (ev->kv.mod_revision < 1) {
    ring_kv_clear(&ev->kv);
    return malformed(err, "events[].kv.mod_revision");
  }
  return RING_OK;
}

static int parse_events(const cJSON *evs, ring__watch_resp *out, ring_error *err) {
  if (evs == NULL)
    return RING_OK;
  if (!cJSON_IsArray(evs))
    return malformed(err, "events is not an array");
  int n = cJSON_GetArraySize(evs);
  if (n == 0)
    return RING_OK;
  if ((out->events = calloc((size_t)n, sizeof *out->events)) == NULL)
    return ring__err(err, RING_ENOMEM, "etcd watch: %d events", n);
  for (const cJSON *e = evs->child; e; e = e->next) {
    ring_event *ev = &out->events[out->n_events];
    int rc = parse_event(e, ev, err);
    if (rc != RING_OK)
      return rc;
    out->n_events++;
    if (out->n_events > 1 && ev->kv.mod_revision < ev[-1].kv.mod_revision)
      return malformed(err, "events out of revision order");
  }
  return RING_OK;
}

static int parse_result(const cJSON *res, ring__watch_resp *out, ring_error *err) {
  const cJSON *h = field(res, "header"), *reason = field(res, "cancel_reason");
  if (h != NULL && !cJSON_IsObject(h))
    return malformed(err, "header");
  if (h != NULL && !ring__json_i64(h, "revision", &out->revision))
    return malformed(err, "header.revision");
  if (h != NULL)
    out->cluster_id = ring__header_cluster_id(h);
  if (!ring__json_i64(res, "compact_revision", &out->compact_revision))
    return malformed(err, "compact_revision");
  if (out->revision < 0 || out->compact_revision < 0)
    return malformed(err, "negative revision");
  if (!get_bool(res, "created", &out->created) || !get_bool(res, "canceled", &out->canceled))
    return malformed(err, "created or canceled is not a boolean");
  if (reason != NULL && !cJSON_IsString(reason))
    return malformed(err, "cancel_reason");
  if (reason != NULL)
    snprintf(out->reason, sizeof out->reason, "%s", reason->valuestring);
  return parse_events(field(res, "events"), out, err);
}

int ring__watch_parse(const char *msg, size_t len, ring__watch_resp *out, ring_error *err) {
  memset(out, 0, sizeof *out);
  cJSON *j = cJSON_ParseWithLength(msg, len);
  int rc;
  if (!cJSON_IsObject(j))
    rc = malformed(err, j ? "not an object" : "not JSON");
  else if (field(j, "result") == NULL && field(j, "error") != NULL)
    rc = ring__etcd_error(j, 0, "etcd watch", NULL, err);
  else if (!cJSON_IsObject(field(j, "result")))
    rc = malformed(err, "no result object");
  else
    rc = parse_result(field(j, "result"), out, err);
  cJSON_Delete(j);
  if (rc != RING_OK)
    ring__watch_resp_free(out);
  return rc;
}

void ring__watch_resp_free(ring__watch_resp *r) {
  if (r == NULL)
    return;
  for (uint32_t i = 0; i < r->n_events; i++)
    ring_kv_clear(&r->events[i].kv);
  free(r->events);
  r->events = NULL;
  r->n_events = 0;
}

/* ---------------------------------------------------------- 2. the watch */

typedef enum phase { STARTING, RUNNING, FAILED } phase;

/* What ended a stream, besides a failure (a negative ring_errno). */
enum {
  WATCH_RESUME = 1, /* compaction: reconnect at once from `next` */
  WATCH_STOP = 2    /* cancelled, or the callback said stop */
};

struct ring_watch {
  ring_etcd *c;                  /* borrowed: the caller closes it after the watch */
  uint8_t *key, *range_end;      /* malloc()'ed; range_end NULL without prefix */
  size_t key_len, range_end_len; /* their lengths */
  ring_watch_cb cb;              /* called on the watch's thread */
  void *ud;                      /* cb's first argument */
  pthread_t thread;              /* runs watch_main */
  CURLM *multi;                  /* lives from ring_etcd_watch to cancel: wakeup is always safe */
  _Atomic bool cancel;           /* set once by ring_watch_cancel */
  _Atomic bool orphan;           /* cancelled from its own callback: the thread frees w */
  /* Guarded by lock (with wake): */
  pthread_mutex_t lock; /* guards phase and start_err; pairs with wake */
  pthread_cond_t wake;  /* broadcast on cancel and on leaving STARTING */
  phase phase;          /* STARTING until the first watch is created */
  ring_error start_err; /* why starting failed (FAILED) */
  /* The watch thread's own: */
  int64_t next;          /* first revision still owed; 0: "now", until created */
  int64_t asked;         /* the start_revision the current stream asked for */
  ring__jstream js;      /* splits the current stream */
  CURL *h;               /* the current stream's handle */
  long status;           /* its HTTP status, 0 until the first byte */
  ring__buf errbody;     /* the body of a non-200 reply */
  bool created;          /* the current stream's watch exists */
  int stream_rc;         /* why the current stream must end, 0 while it may go on */
  ring_error stream_err; /* detail for a negative stream_rc */
  double begun, last_rx; /* monotonic seconds: the stream's start, its last byte */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Leaves STARTING: ring_etcd_watch may return. */
static void set_phase(ring_watch *w, phase p, const ring_error *err) {
  pthread_mutex_lock(&w->lock);
  if (w->phase == STARTING) {
    w->phase = p;
    if (err)
      w->start_err = *err;
    pthread_cond_broadcast(&w->wake);
  }
  pthread_mutex_unlock(&w->lock);
}

/* Calls back unless the watch is being cancelled; WATCH_STOP when it
 * should end. */
static int deliver(ring_watch *w, const ring_event *ev, uint32_t n, int64_t rev, bool compacted) {
  if (atomic_load(&w->cancel))
    return WATCH_STOP;
  return w->cb(w->ud, ev, n, rev, compacted) != 0 ? WATCH_STOP : 0;
}

/* The server ended the watch for a reason other than compaction. */
static int canceled(ring_watch *w, const ring__watch_resp *r) {
  const char *why = r->reason[0] ? r->reason : "no reason given";
  return ring__err(&w->stream_err, ring__etcd_errno(0, 0, why, NULL), "etcd watch canceled: %s",
                   why);
}

/* etcd cancelled the watch because history it asked for is gone. */
static int compacted(ring_watch *w, const ring__watch_resp *r) {
  if (w->asked == 0 || r->compact_revision <= w->asked) /* etcd never says this: no loop on it */
    return ring__err(&w->stream_err, RING_EPROTO,
                     "etcd watch: compact revision %lld at or before start %lld",
                     (long long)r->compact_revision, (long long)w->asked);
  set_phase(w, RUNNING, NULL);
  if (r->compact_revision <= w->next) /* nothing still owed was lost: resume quietly */
    return WATCH_RESUME;
  w->next = r->compact_revision;
  return deliver(w, NULL, 0, r->compact_revision, true) == WATCH_STOP ? WATCH_STOP : WATCH_RESUME;
}

static int events(ring_watch *w, const ring__watch_resp *r) {
  uint32_t first = 0;
  while (first < r->n_events && r->events[first].kv.mod_revision < w->next)
    first++; /* replayed: delivered before */
  if (first == r->n_events)
    return 0;
  int64_t last = r->events[r->n_events - 1].kv.mod_revision;
  w->next = last + 1;
  return deliver(w, r->events + first, r->n_events - first, last, false);
}

static int progress(ring_watch *w, const ring__watch_resp *r) {
  if (r->revision < 1 || r->revision < w->next - 1)
    return 0; /* would go backwards */
  w->next = r->revision + 1;
  return deliver(w, NULL, 0, r->revision, false);
}

/* A watch resumed at a revision the store has not reached: etcd waits
 * for it in silence, which after a restore from an older snapshot is
 * forever. A member behind the others may say the same for a moment, so
 * the client judges a linearizable read of the key (its header goes
 * through etcd_history.c); when that says the history went back, the
 * watch follows the store from where it is now, and the callback hears
 * compacted=true (re-read everything). Returns 0, WATCH_RESUME or
 * WATCH_STOP. */
static int behind(ring_watch *w, const ring__watch_resp *r) {
  ring_etcd_history h;
  ring_kvs kvs;
  ring_range_opts ro = {.keys_only = true, .limit = 1};
  if (ring_etcd_range(w->c, w->key, w->key_len, &ro, &kvs, NULL) == RING_OK)
    ring_kvs_clear(&kvs);
  ring_etcd_history_get(w->c, &h);
  if (!h.went_back)
    return 0;
  w->next = r->revision + 1;
  return deliver(w, NULL, 0, r->revision, true) == WATCH_STOP ? WATCH_STOP : WATCH_RESUME;
}

/* Acts on one parsed message: 0 to go on, else why the stream ends. */
static int handle(ring_watch *w, const ring__watch_resp *r) {
  if (r->cluster_id != 0)
    ring__history_watch_header(w->c, r->cluster_id);
  if (r->created && !w->created) {
    if (r->canceled && r->compact_revision == 0)
      return canceled(w, r);
    w->created = true;
    set_phase(w, RUNNING, NULL);
    if (w->next == 0)
      w->next = r->revision + 1; /* "now" is fixed: a reconnect resumes from here */
    else if (r->revision > 0 && r->revision + 1 < w->next && r->compact_revision == 0)
      return behind(w, r);
  }
  if (r->compact_revision > 0)
    return compacted(w, r);
  if (r->canceled)
    return canceled(w, r);
  if (!w->created)
    return ring__err(&w->stream_err, RING_EPROTO, "etcd watch: a message before \"created\"");
  if (r->n_events > 0)
    return events(w, r);
  return r->created ? 0 : progress(w, r);
}

static int on_message(void *ud, const char *msg, size_t len) {
  ring_watch *w = ud;
  ring__watch_resp r;
  int rc = ring__watch_parse(msg, len, &r, &w->stream_err);
  if (rc == RING_OK) {
    rc = handle(w, &r);
    ring__watch_resp_free(&r);
  }
  return w->stream_rc = rc;
}

/* ------------------------------------------------------- 3. one stream */

/* curl's write callback: splits and handles the stream; 0 ends it. */
static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  ring_watch *w = ud;
  size_t len = size * n;
  w->last_rx = now_s();
  if (w->status == 0)
    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->status);
  if (w->status != 200)
    return ring__buf_write(p, size, n, &w->errbody);
  int rc = ring__jstream_feed(&w->js, p, len, on_message, w);
  if (rc == 0)
    return len;
  if (w->stream_rc == 0) /* the splitter's own refusal */
    w->stream_rc = ring__err(&w->stream_err, rc, "etcd watch: %s",
                             rc == RING_ETOOBIG  ? "a message over the size cap"
                             : rc == RING_EPROTO ? "garbage between messages, or nesting too deep"
                                                 : "out of memory");
  return 0;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut, (void)un;
  return atomic_load(&((ring_watch *)ud)->cancel) ? 1 : 0;
}

/* curl before 8.9 has no option for the probe count: set it on the socket. */
static int set_keepcnt(void *ud, curl_socket_t fd, curlsocktype purpose) {
  (void)ud;
  int n = RING_WATCH_KEEPCNT;
  if (purpose == CURLSOCKTYPE_IPCXN)
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &n, sizeof n); /* best effort, as curl's */
  return CURL_SOCKOPT_OK;
}

/* {"create_request":{"key","range_end","start_revision","progress_notify":true}} */
static char *request_body(const ring_watch *w) {
  cJSON *body = cJSON_CreateObject();
  cJSON *cr = cJSON_AddObjectToObject(body, "create_request");
  int rc = cr ? ring__json_add_bytes(cr, "key", w->key, w->key_len) : RING_ENOMEM;
  if (rc == RING_OK && w->range_end)
    rc = ring__json_add_bytes(cr, "range_end", w->range_end, w->range_end_len);
  if (rc == RING_OK && w->next > 0)
    rc = ring__json_add_i64(cr, "start_revision", w->next);
  if (rc == RING_OK && !cJSON_AddTrueToObject(cr, "progress_notify"))
    rc = RING_ENOMEM;
  char *text = rc == RING_OK ? cJSON_PrintUnformatted(body) : NULL;
  cJSON_Delete(body);
  return text;
}

/* Why a stream that curl finished (crc) ended, when nothing said so yet. */
static int stream_outcome(ring_watch *w, uint32_t ep, CURLcode crc) {
  const char *url = w->c->endpoints[ep];
  if (w->status != 0 && w->status != 200) {
    cJSON *j = w->errbody.p ? cJSON_ParseWithLength(w->errbody.p, w->errbody.len) : NULL;
    int rc = cJSON_IsObject(j)
                 ? ring__etcd_error(j, w->status, "etcd watch", NULL, &w->stream_err)
                 : ring__err(&w->stream_err, RING_EPROTO, "etcd watch %s: HTTP %ld with %s body",
                             url, w->status, w->errbody.len ? "a non-JSON" : "an empty");
    cJSON_Delete(j);
    return rc;
  }
  if (crc == CURLE_OK && ring__jstream_partial(&w->js))
    return ring__err(&w->stream_err, RING_EPROTO,
                     "etcd watch %s: the stream ended inside a message", url);
  if (crc == CURLE_OK && !w->created)
    return ring__err(&w->stream_err, RING_EPROTO,
                     "etcd watch %s: the stream ended before the watch was created", url);
  if (crc == CURLE_OK)
    return ring__err(&w->stream_err, RING_ECONNECT, "etcd watch %s: the server closed the stream",
                     url);
  return ring__err(&w->stream_err, crc == CURLE_OPERATION_TIMEDOUT ? RING_ETIMEDOUT : RING_ECONNECT,
                   "etcd watch %s: %s", url, curl_easy_strerror(crc));
}

/* A deadline that ends the stream: no "created" in time, or silence. */
static int deadline(ring_watch *w, double t, long *wait_ms) {
  double created_by = w->begun + (double)w->c->timeout_ms / 1000;
  double idle_by = w->last_rx + (double)RING_WATCH_IDLE_MS / 1000;
  double by = w->created ? idle_by : created_by;
  if (t >= by)
    return ring__err(&w->stream_err, RING_ETIMEDOUT, "etcd watch: %s",
                     w->created ? "the stream went silent" : "no reply to the watch request");
  double left_ms = (by - t) * 1000 + 1;
  *wait_ms = left_ms < WATCH_POLL_MAX_MS ? (long)left_ms : WATCH_POLL_MAX_MS;
  return 0;
}

/* Drives the transfer until it ends or must end. */
static int pump(ring_watch *w, uint32_t ep) {
  CURLcode crc = CURLE_OK;
  int running = 1;
  while (w->stream_rc == 0 && !atomic_load(&w->cancel)) {
    if (curl_multi_perform(w->multi, &running) != CURLM_OK) {
      crc = CURLE_OUT_OF_MEMORY;
      break;
    }
    if (!running) {
      int left;
      for (CURLMsg *m; (m = curl_multi_info_read(w->multi, &left)) != NULL;)
        if (m->msg == CURLMSG_DONE)
          crc = m->data.result;
      break;
    }
    long wait_ms = WATCH_POLL_MAX_MS;
    if (w->stream_rc == 0)
      w->stream_rc = deadline(w, now_s(), &wait_ms);
    if (w->stream_rc == 0)
      curl_multi_poll(w->multi, NULL, 0, (int)wait_ms, NULL);
  }
  if (atomic_load(&w->cancel))
    return WATCH_STOP;
  if (w->status == 0) /* a reply without a body never reached on_body */
    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->status);
  return w->stream_rc ? w->stream_rc : stream_outcome(w, ep, crc);
}

/* One stream from endpoint ep: returns why it ended (a WATCH_* or a
 * negative ring_errno with w->stream_err). */
static int run_stream(ring_watch *w, uint32_t ep) {
  w->asked = w->next;
  w->created = false;
  w->status = 0;
  w->stream_rc = 0;
  w->errbody.len = 0;
  w->begun = w->last_rx = now_s();
  ring__jstream_reset(&w->js);
  char *body = request_body(w);
  struct curl_slist *hdr = NULL;
  CURL *h = body ? ring__etcd_handle_new(w->c, ep, "watch", true, &hdr) : NULL;
  if (h == NULL || hdr == NULL) {
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    free(body);
    return ring__err(&w->stream_err, RING_ENOMEM, "etcd watch: request");
  }
  w->h = h;
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, RING_WATCH_KEEPIDLE_S);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, RING_WATCH_KEEPINTVL_S);
  curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, set_keepcnt);
  int rc = curl_multi_add_handle(w->multi, h) == CURLM_OK
               ? pump(w, ep)
               : ring__err(&w->stream_err, RING_ENOMEM, "etcd watch: curl_multi_add_handle");
  curl_multi_remove_handle(w->multi, h);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(h); /* the connection stays in w->multi's cache for the next stream */
  w->h = NULL;
  free(body);
  return rc;
}

/* ----------------------------------------------------------- 4. thread */

static int64_t mono_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Sleeps ms unless cancelled first; false when cancelled. The wait is
 * curl_multi_poll with a relative timeout, which ring_watch_cancel's
 * curl_multi_wakeup ends at once: no absolute deadline is handed to the C
 * library, so a process whose clocks are faked or stepped (libfaketime)
 * sleeps as long as it should instead of spinning. */
static bool pause_unless_cancelled(ring_watch *w, long ms) {
  int64_t end = mono_ms() + ms;
  for (int64_t now; !atomic_load(&w->cancel) && (now = mono_ms()) < end;)
    curl_multi_poll(w->multi, NULL, 0, (int)(end - now < 1000 ? end - now : 1000), NULL);
  return !atomic_load(&w->cancel);
}

static uint64_t token_gen(ring_etcd *c) {
  pthread_mutex_lock(&c->lock);
  uint64_t gen = c->token_gen;
  pthread_mutex_unlock(&c->lock);
  return gen;
}

static void watch_free(ring_watch *w);

static void *watch_main(void *arg) {
  ring_watch *w = arg;
  ring_etcd *c = w->c;
  long backoff = 0;
  uint32_t start_tries = c->n_endpoints + (c->user ? 1 : 0); /* each endpoint once, reauth once */
  while (!atomic_load(&w->cancel)) {
    uint32_t ep = atomic_load(&c->current) % c->n_endpoints;
    uint64_t gen = token_gen(c);
    int rc = run_stream(w, ep);
    if (rc == WATCH_STOP)
      break;
    if (rc == WATCH_RESUME) {
      backoff = 0;
      continue;
    }
    bool stable = w->created && now_s() - w->begun >= WATCH_STABLE_S;
    if (rc == RING_EAUTH &&
        c->user) /* the token may have expired: the next stream gets a new one */
      ring__etcd_reauth(c, gen, NULL);
    else
      ring__etcd_failover(c, ep);
    pthread_mutex_lock(&w->lock);
    bool starting = w->phase == STARTING;
    pthread_mutex_unlock(&w->lock);
    if (starting) { /* try each endpoint once at once; then ring_etcd_watch fails */
      if (--start_tries == 0) {
        set_phase(w, FAILED, &w->stream_err);
        break;
      }
      continue;
    }
    backoff =
        stable || backoff == 0
            ? RING_WATCH_BACKOFF_MIN_MS
            : (backoff * 2 < RING_WATCH_BACKOFF_MAX_MS ? backoff * 2 : RING_WATCH_BACKOFF_MAX_MS);
    if (!pause_unless_cancelled(w, backoff))
      break;
  }
  if (atomic_load(&w->orphan))
    watch_free(w);
  return NULL;
}

/* -------------------------------------------------------- 5. public calls */

static void watch_free(ring_watch *w) {
  if (w->multi)
    curl_multi_cleanup(w->multi);
  ring__jstream_free(&w->js);
  free(w->errbody.p);
  free(w->key);
  free(w->range_end);
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

static ring_watch *watch_new(ring_etcd *c, const void *key, size_t key_len, bool prefix,
                             int64_t start) {
  ring_watch *w = calloc(1, sizeof *w);
  if (w == NULL)
    return NULL;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->lock, NULL);
  w->c = c;
  w->next = start;
  w->errbody.max = WATCH_ERRBODY_MAX;
  ring__jstream_init(&w->js, RING_WATCH_MESSAGE_MAX, 0);
  w->key = malloc(key_len + 1);
  w->key_len = key_len;
  w->multi = curl_multi_init();
  if (w->key && key_len)
    memcpy(w->key, key, key_len);
  if (w->key == NULL || w->multi == NULL ||
      (prefix && ring__prefix_end(key, key_len, &w->range_end, &w->range_end_len) != RING_OK)) {
    watch_free(w);
    return NULL;
  }
  return w;
}

int ring_etcd_watch(ring_etcd *c, const void *key, size_t key_len, bool prefix,
                    int64_t start_revision, ring_watch_cb cb, void *ud, ring_watch **out,
                    ring_error *err) {
  if (c == NULL || cb == NULL || out == NULL || (key == NULL && key_len))
    return ring__err(err, RING_EINVAL, "ring_etcd_watch: NULL argument");
  if (start_revision < 0 || (key_len == 0 && !prefix))
    return ring__err(err, RING_EINVAL, "ring_etcd_watch: %s",
                     start_revision < 0 ? "negative start revision" : "empty key");
  ring_watch *w = watch_new(c, key, key_len, prefix, start_revision);
  if (w == NULL)
    return ring__err(err, RING_ENOMEM, "ring_etcd_watch");
  w->cb = cb;
  w->ud = ud;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, RING_WATCH_STACK);
  int prc = pthread_create(&w->thread, &attr, watch_main, w);
  pthread_attr_destroy(&attr);
  if (prc != 0) {
    watch_free(w);
    return ring__err(err, RING_ENOMEM, "ring_etcd_watch: pthread_create: %s", strerror(prc));
  }
  pthread_mutex_lock(&w->lock); /* until the first watch is created, or every try failed */
  while (w->phase == STARTING)
    pthread_cond_wait(&w->wake, &w->lock);
  phase p = w->phase;
  pthread_mutex_unlock(&w->lock);
  if (p == FAILED) {
    pthread_join(w->thread, NULL);
    int rc = ring__err(err, w->start_err.code, "%s", w->start_err.message);
    watch_free(w);
    return rc;
  }
  *out = w;
  return RING_OK;
}

void ring_watch_cancel(ring_watch *w) {
  if (w == NULL)
    return;
  if (pthread_equal(pthread_self(), w->thread)) { /* from the callback: misuse, made safe */
    atomic_store(&w->cancel, true);
    atomic_store(&w->orphan, true);
    pthread_detach(w->thread);
    return; /* the thread ends once the callback returns, and frees w */
  }
  pthread_mutex_lock(&w->lock);
  atomic_store(&w->cancel, true);
  curl_multi_wakeup(w->multi);
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  watch_free(w);
}
