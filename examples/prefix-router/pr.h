/*
 * pr.h: prefix-router, an example HTTP router on libring's bounded loads
 * (README.md), internal to the example.
 *
 * Sections: the prefix; routing; the HTTP servers' shared part; the
 * router's HTTP front; simulated backends; the load run.
 *
 * A request's body starts with the text a model would prefill (a system
 * prompt, tool schemas, an adapter name); its first prefix_bytes bytes are
 * the key. Requests sharing the key go to one backend while it is under
 * the load cap, so that backend's prefix cache serves them.
 */
#ifndef PR_H
#define PR_H

#include "ring.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- the prefix */

#define PR_PREFIX_MAX 4096u /* the longest key, in bytes */
#define PR_BODY_MAX 65536u  /* the longest request body (413 beyond) */

/* Bytes of a body of len bytes that form its key: min(len, prefix_bytes).
 * The router and the backends' caches both key on exactly this. */
size_t pr_prefix_len(size_t len, uint32_t prefix_bytes);

/* xorshift64* over *state (never 0): the random baseline and the load's
 * draws need spread, not quality. */
uint64_t pr_rng_next(uint64_t *state);

/* ------------------------------------------------------------------ routing */

typedef enum pr_mode {
  PR_RANDOM = 0, /* any backend: the seed's "random routing" baseline */
  PR_RING,       /* the key's first owner, no cap */
  PR_BOUNDED     /* ring_bounded_route under the cap */
} pr_mode;

typedef struct pr_route_opts {
  pr_mode mode;
  ring_bounded_opts bounded; /* PR_BOUNDED: cap, hysteresis, sticky map */
  uint32_t prefix_bytes;     /* 1 .. PR_PREFIX_MAX */
} pr_route_opts;

/* Where one request goes; pr_route_end takes it back. */
typedef struct pr_pick {
  uint16_t node;                /* index in the table it was routed on */
  bool first;                   /* the key's first choice */
  char addr[RING_ADDR_MAX + 1]; /* the backend's host:port */
} pr_pick;

/* What the router saw: loads are in-flight requests per backend, sampled
 * at each route (before it), over the backends that serve. */
typedef struct pr_route_stats {
  uint64_t routed;       /* requests routed */
  uint64_t first;        /* of which to their key's first choice */
  double max_over_mean;  /* busiest backend's load over the mean, averaged */
  double peak_over_mean; /* the largest sample */
} pr_route_stats;

typedef struct pr_router pr_router;

/* A router reading tables from live (borrowed: it must outlive the router).
 * RING_OK and *out, RING_EINVAL for bad options, RING_ENOMEM. */
int pr_router_new(const pr_route_opts *o, ring_live *live, pr_router **out);
void pr_router_free(pr_router *r); /* NULL is a no-op */

/* Routes a body and counts it in flight on the pick. RING_OK, RING_EUNAVAIL
 * (no table yet, or no backend under the cap), RING_ENOMEM. Thread-safe. */
int pr_route_begin(pr_router *r, const char *body, size_t len, pr_pick *out);
/* The request picked by pr_route_begin is done. */
void pr_route_end(pr_router *r, const pr_pick *p);
void pr_router_stats(pr_router *r, pr_route_stats *out);

/* ---------------------------------------------- the HTTP servers' shared part */

/* A request body gathered over libmicrohttpd's calls. */
typedef struct pr_body {
  char *data; /* malloc()'ed, NUL-terminated */
  size_t len;
  bool too_big; /* more than PR_BODY_MAX came: answered 413 */
} pr_body;

/* Called for each request once its body is in (never with a body past
 * PR_BODY_MAX). Fills the answer: status, a malloc()'ed body or NULL, and
 * an X-Backend header value or NULL. */
typedef struct pr_answer {
  unsigned status;
  char *body; /* malloc()'ed or NULL; freed by the server */
  size_t len;
  char backend[RING_ADDR_MAX + 1]; /* "" for none */
} pr_answer;
typedef void (*pr_handler)(void *ud, const char *method, const char *url, const pr_body *b,
                           pr_answer *a);

typedef struct pr_server pr_server;

/* Serves on 127.0.0.1:port (0: any free port), a thread per connection,
 * at most `connections` at once. NULL on failure, with the reason in err. */
pr_server *pr_server_start(uint16_t port, unsigned connections, pr_handler h, void *ud, char *err,
                           size_t cap);
uint16_t pr_server_port(const pr_server *s);
void pr_server_stop(pr_server *s); /* waits for the connections; NULL is a no-op */

/* ---------------------------------------------------- the router's HTTP front */

/* POST anything: the body is routed and forwarded to the pick's
 * POST /v1/generate; the answer comes back with X-Backend. 503 when no
 * backend can take it, 502 when the backend fails. */
pr_server *pr_front_start(pr_router *r, uint16_t port, char *err, size_t cap);

/* ------------------------------------------------------ simulated backends */

/* A model server's prefix cache and its batch slots, simulated: a request
 * waits for a slot, then takes hit_us if its prefix is cached and miss_us
 * (the prefill) if not, and leaves the prefix at the head of the cache. */
typedef struct pr_backend_opts {
  uint32_t slots;         /* requests served at once, 1 .. 1024 */
  uint32_t cache_entries; /* prefixes the cache holds (LRU), 1 .. 65536 */
  uint32_t hit_us;        /* service time on a hit */
  uint32_t miss_us;       /* service time on a miss */
  uint32_t prefix_bytes;  /* as the router's */
} pr_backend_opts;

typedef struct pr_backend_stats {
  uint64_t hits, misses;
} pr_backend_stats;

typedef struct pr_backend pr_backend;
int pr_backend_start(const pr_backend_opts *o, pr_backend **out, char *err, size_t cap);
uint16_t pr_backend_port(const pr_backend *b);
void pr_backend_stats_get(pr_backend *b, pr_backend_stats *out);
void pr_backend_stop(pr_backend *b); /* NULL is a no-op */

/* ------------------------------------------------------------ the load run */

/* One run: backends on loopback, a table placing them (libring's planner),
 * the router in front, and closed-loop clients posting bodies whose
 * prefixes follow Zipf(s). Stops after `requests` or `max_ms`, whichever
 * comes first. */
typedef struct pr_load_opts {
  uint32_t backends; /* 2 .. 32 */
  uint32_t clients;  /* concurrent requests, 1 .. 256 */
  uint32_t prefixes; /* distinct prefixes, 1 .. 100000 */
  double zipf_s;     /* popularity skew of the prefixes */
  uint64_t requests; /* 1 .. 10^7 */
  uint32_t max_ms;   /* the run's time limit */
  uint32_t join_at;  /* > 0: after this many requests one more backend
                        joins, a new table swapped into the live holder
                        as the watcher would */
  pr_backend_opts backend;
  pr_route_opts route;
} pr_load_opts;

typedef struct pr_load_result {
  uint64_t done, errors; /* answered 200, and not */
  double hit_rate;       /* prefix-cache hits over served requests */
  double first_share;    /* routed to the key's first choice */
  double max_over_mean;  /* the router's in-flight loads (pr_route_stats) */
  double peak_over_mean;
  double p50_ms, p99_ms; /* client-side latency */
  double seconds;        /* the run's wall time */
  uint64_t version;      /* the table version in service at the end */
} pr_load_result;

/* RING_OK and *out; otherwise an error with the reason in err. */
int pr_load_run(const pr_load_opts *o, pr_load_result *out, char *err, size_t cap);

/* The defaults of the quick run the test and `--quick` use. */
pr_load_opts pr_load_quick(pr_mode mode);

#endif /* PR_H */
