/*
 * json_stream.h: splits a byte stream of concatenated JSON objects into
 * one object per message, as etcd's gRPC-JSON gateway streams them.
 *
 * The gateway specifies no delimiter between messages (etcd issue 11372:
 * usually "\n", not promised), so boundaries are found by nesting depth,
 * honouring strings and their escapes. Whitespace between objects is
 * skipped; anything else there is an error. The splitter does not validate
 * JSON inside an object: the parser that reads each message does.
 *
 * Memory: a message is buffered only while it is incomplete; a message
 * that lies whole inside one chunk is handed over in place. A message
 * longer than `max` bytes, or nested deeper than `max_depth`, is an error,
 * never unbounded growth. After an error the splitter refuses everything
 * until it is reset.
 */
#ifndef RING_JSON_STREAM_H
#define RING_JSON_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#ifndef RING_JSTREAM_MAX
#define RING_JSTREAM_MAX (64u << 20) /* default message cap: 64 MiB */
#endif
#ifndef RING_JSTREAM_DEPTH_MAX
#define RING_JSTREAM_DEPTH_MAX 64u /* default nesting cap (watch replies nest 5 deep) */
#endif
#ifndef RING_JSTREAM_KEEP
#define RING_JSTREAM_KEEP (1u << 20) /* a buffer larger than this is freed once empty */
#endif

typedef struct ring__jstream {
  char *buf;          /* the incomplete message so far (malloc()'ed), or NULL */
  size_t len;         /* bytes in buf */
  size_t cap;         /* bytes allocated for buf */
  size_t max;         /* longest message accepted, in bytes */
  unsigned max_depth; /* deepest nesting accepted ({ and [ both count) */
  unsigned depth;     /* current nesting; 0 between messages */
  bool in_str;        /* inside a string literal */
  bool esc;           /* the previous byte was a backslash inside a string */
  int err;            /* sticky error (a ring_errno), 0 while healthy */
} ring__jstream;

/* Called once per complete message: msg[0..len) is one object from '{' to
 * its '}', not NUL-terminated, borrowed for the call. A non-zero return
 * stops ring__jstream_feed, which returns it. */
typedef int (*ring__jstream_cb)(void *ud, const char *msg, size_t len);

/* Prepares s; max 0 means RING_JSTREAM_MAX, max_depth 0 RING_JSTREAM_DEPTH_MAX.
 * Allocates nothing. */
void ring__jstream_init(ring__jstream *s, size_t max, unsigned max_depth);
/* Forgets any partial message and any error, keeping the limits (for a new
 * connection); frees a buffer larger than RING_JSTREAM_KEEP. */
void ring__jstream_reset(ring__jstream *s);
/* Frees the buffer; s may be reused after ring__jstream_init. */
void ring__jstream_free(ring__jstream *s);

/* Feeds n bytes, calling cb for each message they complete, in order.
 * Returns 0 when every byte was taken; the first non-zero cb return (the
 * rest of the chunk is dropped: the caller is expected to stop); or
 * RING_EPROTO (a byte other than whitespace or '{' between messages, or
 * nesting deeper than max_depth), RING_ETOOBIG (a message over max bytes),
 * RING_ENOMEM. An error is sticky: later feeds return it at once. */
int ring__jstream_feed(ring__jstream *s, const char *data, size_t n, ring__jstream_cb cb, void *ud);

/* Whether a message has begun and not ended (a stream that ends now was
 * cut short). */
bool ring__jstream_partial(const ring__jstream *s);

#endif /* RING_JSON_STREAM_H */
