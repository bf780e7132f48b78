/*
 * daemon.h: what Ringkeeper's daemons (ring-coordinator, ring-agent) share:
 * options from a config file and flags, logfmt logging, the /metrics and
 * /healthz HTTP server (and pages a daemon adds), stop signals, and a
 * wake-up primitive for an event loop without busy waiting. Static
 * library `ringdaemon`.
 *
 * Sections: options; logging; HTTP; signals; waking a loop.
 */
#ifndef RING_DAEMON_H
#define RING_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* --------------------------------------------------------------- options */

/* One option, the same in the config file (`name = value`) and on the
 * command line (`--name VALUE` or `--name=VALUE`; a bool flag also as bare
 * `--name`). A flag wins over the file. Tables end with {NULL}. */
typedef enum rd_opt_type {
  RD_OPT_STRING, /* char *: strdup()'ed value, free with rd_opts_free */
  RD_OPT_BOOL,   /* bool: true/false/yes/no/on/off/1/0 */
  RD_OPT_UINT,   /* uint64_t: decimal, within [min, max] */
  RD_OPT_DOUBLE, /* double: within [min, max] */
  RD_OPT_MS      /* uint64_t milliseconds: "500ms", "5s", "2m", "1h" or bare ms; within [min, max] */
} rd_opt_type;

typedef struct rd_opt {
  const char *name;  /* without "--" */
  rd_opt_type type;
  void *target;      /* where the value goes; holds the default on entry */
  double min, max;   /* for UINT, DOUBLE, MS */
  const char *help;  /* one line for --help */
} rd_opt;
/* min == max == 0 leaves a number unbounded. On RD_OPTS_ERROR every target
 * holds what it held on entry. */

/* Parses argv: first finds --config FILE (if any) and applies the file,
 * then applies the flags. Unknown keys or flags, bad values, a missing or
 * unreadable file and positional arguments are errors: the message (with
 * file:line for the file) goes to errbuf and RD_OPTS_ERROR is returned.
 * `--help` prints usage (prog, a one-line summary, every option) to stdout
 * and returns RD_OPTS_HELP. RD_OPTS_OK otherwise. */
enum { RD_OPTS_OK = 0, RD_OPTS_HELP = 1, RD_OPTS_ERROR = -1 };
int rd_opts_parse(int argc, char **argv, const char *summary, const rd_opt *opts,
                  char *errbuf, size_t errcap);
/* Frees the strings rd_opts_parse stored (string targets reset to NULL
 * only if they were set by the parser; defaults are never freed). */
void rd_opts_free(const rd_opt *opts);

/* --------------------------------------------------------------- logging */

/* logfmt lines: `ts=2026-11-30T08:00:00.123Z level=info comp=coordinator
 * msg="became leader" lease=7587 ...`. One write(2) per line, so lines from
 * threads never interleave. */
typedef enum rd_level { RD_DEBUG = 0, RD_INFO, RD_WARN, RD_ERROR } rd_level;

/* Parses "debug" / "info" / "warn" / "error"; returns the level or -1. */
int rd_log_level_parse(const char *name);
/* Where lines go (default stderr), the component name and the lowest level. */
void rd_log_init(const char *component, rd_level min, int fd);
bool rd_log_enabled(rd_level l);
/* Logs msg (quoted as needed) then key=value pairs: kv is a list of
 * (const char *key, const char *value) pairs ending with a NULL key; each
 * value is quoted and escaped if it needs it. */
void rd_log(rd_level l, const char *msg, ...);
/* The compiler checks that the list ends with NULL. */
void rd_log(rd_level l, const char *msg, ...) __attribute__((sentinel));
/* The same with printf formatting of the message; no key=value pairs. */
void rd_logf(rd_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ HTTP */

/* A growing text buffer for handlers. */
typedef struct rd_text {
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed: the response becomes a 500 */
} rd_text;
void rd_text_printf(rd_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prometheus text exposition helpers: a "# HELP" and "# TYPE" header once
 * per metric family, then samples. labels is "" or `a="x",b="y"`. */
void rd_metric_head(rd_text *t, const char *name, const char *type, const char *help);
void rd_metric_sample(rd_text *t, const char *name, const char *labels, double value);

/* /metrics: fills t with the exposition. /healthz: returns true when
 * healthy, writing a one-line reason to t either way ("ok", "etcd
 * unreachable: ..."). Called from the server's thread. */
typedef void (*rd_metrics_fn)(void *ud, rd_text *t);
typedef bool (*rd_health_fn)(void *ud, rd_text *t);

/* A page of the daemon's own (a status page, its JSON): fills t with the
 * body, sets *type to the content type (a string that outlives the
 * server; NULL: text/plain; charset=utf-8) and returns the HTTP status. A
 * failed t becomes a 500. Called from the server's thread with the path
 * (no query string), so it must not wait on the daemon's loop. */
typedef unsigned (*rd_page_fn)(void *ud, const char *path, rd_text *t, const char **type);

/* One extra GET path: an exact match, tried after /metrics and /healthz
 * (which a route cannot take over). Tables end with {NULL}. */
typedef struct rd_http_route {
  const char *path; /* "/status.json"; NULL ends the table */
  rd_page_fn page;
  void *ud;         /* the page's argument */
} rd_http_route;

typedef struct rd_http rd_http;

/* Listens on "HOST:PORT" (IPv4, [IPv6] or a name; port 0 picks one) and
 * serves GET /metrics (200, text/plain; version=0.0.4), GET /healthz (200 or
 * 503) and 404 / 405 otherwise, from a thread of its own, with a bounded
 * number of connections and a per-connection timeout. NULL with errbuf set
 * on failure. */
rd_http *rd_http_start(const char *listen, rd_metrics_fn metrics, rd_health_fn health, void *ud,
                       char *errbuf, size_t errcap);
/* The same, also serving GET and HEAD on each path of routes (borrowed:
 * the table must outlive the server; NULL for none). Route responses say
 * `Cache-Control: no-store` and `X-Content-Type-Options: nosniff`. */
rd_http *rd_http_start_routes(const char *listen, rd_metrics_fn metrics, rd_health_fn health,
                              void *ud, const rd_http_route *routes, char *errbuf, size_t errcap);
/* The port actually bound (for port 0). */
uint16_t rd_http_port(const rd_http *h);
void rd_http_stop(rd_http *h);

/* --------------------------------------------------------------- signals */

/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (call it before
 * starting any thread, so every thread inherits the mask) and starts a
 * thread that waits for them: SIGTERM and SIGINT call on_stop once, SIGHUP
 * calls on_reload (may be NULL). SIGPIPE is ignored. */
int rd_signals_start(void (*on_stop)(void *ud), void (*on_reload)(void *ud), void *ud);
/* rd_signals_start and rd_waker_init return 0 or an errno value. */

/* ---------------------------------------------------- health and secrets */

/* A daemon's health for /healthz: the last trouble a step met, "" when
 * fine. Troubles are logged once per distinct message, so a daemon stuck
 * on one problem does not flood its log. */
typedef struct rd_health {
  pthread_mutex_t mu;
  char reason[256];
  bool troubled; /* rd_health_trouble was called since rd_health_step (the loop only) */
} rd_health;

int rd_health_init(rd_health *h);
void rd_health_destroy(rd_health *h);
/* Starts a step of the loop: forgets whether the last step had trouble. */
void rd_health_step(rd_health *h);
/* Records and (if new) logs "what: detail"; detail NULL or "" says "failed". */
void rd_health_trouble(rd_health *h, const char *what, const char *detail);
/* Clears the trouble unless this step had one; logs "recovered" once. */
void rd_health_ok(rd_health *h);
/* Writes "ok" or the trouble (one line) to t; true when healthy. */
bool rd_health_text(rd_health *h, rd_text *t);

/* The first line of a secret file (a password, a shared secret), without
 * its line end: malloc()'ed, or NULL with msg set for a missing,
 * unreadable or empty file. */
char *rd_read_secret(const char *path, char *msg, size_t cap);
/* A name as ids and clusters are: [a-z0-9._-]{1,63}. */
bool rd_valid_name(const char *s);

/* ------------------------------------------------------------------ etcd */

/* How a daemon reaches etcd: its options, as given. Every daemon takes
 * the same ones under the same names (rd_etcd_opts). */
typedef struct rd_etcd_conf {
  char *endpoints;
  char *user;          /* NULL: no auth */
  char *password_file; /* read with rd_read_secret */
  char *ca_file, *cert_file, *key_file;
  uint64_t timeout_ms; /* per request; the caller's default stands until a flag or file sets it */
} rd_etcd_conf;

/* The options in an rd_etcd_conf: --endpoints, --user, --password-file,
 * --etcd-ca-file, --etcd-cert-file, --etcd-key-file and --etcd-timeout
 * (etcd-prefixed where a daemon may have TLS files of its own). Writes
 * RD_ETCD_OPTS entries at t. */
#define RD_ETCD_OPTS 7
void rd_etcd_opts(rd_etcd_conf *c, rd_opt *t);
/* What the parser cannot check: endpoints given, user and password file
 * together. 0, or -1 with msg set. */
int rd_etcd_check(const rd_etcd_conf *c, char *msg, size_t cap);

struct ring_etcd;
/* Opens the client (ring_etcd_open). 0, or -1 with msg set ("etcd: ..."
 * or the password file's trouble). */
int rd_etcd_open(const rd_etcd_conf *c, struct ring_etcd **out, char *msg, size_t cap);

/* ------------------------------------------------------------ waking a loop */

/* A loop sleeps in rd_waker_wait until someone calls rd_waker_wake or the
 * timeout passes; wakes that come while it runs are not lost (a flag). */
typedef struct rd_waker {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC */
  bool woken;
} rd_waker;

int rd_waker_init(rd_waker *w);
void rd_waker_destroy(rd_waker *w);
void rd_waker_wake(rd_waker *w);
/* Returns true if woken, false on timeout; clears the flag either way. */
bool rd_waker_wait(rd_waker *w, uint64_t timeout_ms);

/* Monotonic and wall clocks in milliseconds. */
uint64_t rd_now_ms(void);  /* CLOCK_MONOTONIC */
uint64_t rd_wall_ms(void); /* CLOCK_REALTIME, Unix ms */

#endif /* RING_DAEMON_H */
