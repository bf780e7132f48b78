/*
 * etcd_watch_int.h: the watch stream's message parser, shared by
 * etcd_watch.c and the fuzz target (tests/fuzz/fuzz_watch_stream.c), so the
 * fuzzer exercises exactly what the watch runs.
 */
#ifndef RING_ETCD_WATCH_INT_H
#define RING_ETCD_WATCH_INT_H

#include "etcd_int.h"

#ifndef RING_WATCH_MESSAGE_MAX
#define RING_WATCH_MESSAGE_MAX (64u << 20) /* one streamed message larger than this is refused */
#endif
#ifndef RING_WATCH_REASON_MAX
#define RING_WATCH_REASON_MAX 160 /* bytes of a cancel reason kept, NUL included */
#endif

/* One message of the /v3/watch stream: the gateway's
 * {"result":{"header":{...},"created":..,"canceled":..,"compact_revision":..,
 * "cancel_reason":..,"events":[{"type":..,"kv":{...}}]}}. Missing fields
 * are zero; an event without "type" is a PUT. */
typedef struct ring__watch_resp {
  int64_t revision;                   /* header.revision: the store when sent; >= 0 */
  uint64_t cluster_id;                /* header.cluster_id; 0 when absent or malformed */
  int64_t compact_revision;           /* > 0: the start revision was compacted away */
  bool created;                       /* the reply to the create request */
  bool canceled;                      /* the server ended this watch */
  char reason[RING_WATCH_REASON_MAX]; /* cancel_reason (truncated), or "" */
  ring_event *events;                 /* n_events, mod revisions >= 1 and non-decreasing */
  uint32_t n_events;
} ring__watch_resp;

/* Parses one message (msg[0..len), not NUL-terminated). On RING_OK *out
 * owns its events (ring__watch_resp_free). Fails with RING_EPROTO on
 * anything malformed (not JSON, wrong types, numbers out of int64 range,
 * negative revisions, bad base64, events out of order), with RING_EAUTH or
 * RING_ESERVER for an error the gateway reports in the stream
 * ({"error":{...}}), or RING_ENOMEM; err says which field. On failure *out
 * holds nothing that needs freeing. */
int ring__watch_parse(const char *msg, size_t len, ring__watch_resp *out, ring_error *err);
/* Frees the events; r may be parsed into again. */
void ring__watch_resp_free(ring__watch_resp *r);

#endif /* RING_ETCD_WATCH_INT_H */
