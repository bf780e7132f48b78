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

#include "ringx.h" /* ring__sbuf */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
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
  RD_OPT_MS /* uint64_t milliseconds: "500ms", "5s", "2m", "1h" or bare ms; within [min, max] */
} rd_opt_type;

typedef struct rd_opt {
  const char *name; /* without "--" */
  rd_opt_type type;
  void *target;     /* where the value goes; holds the default on entry */
  double min, max;  /* for UINT, DOUBLE, MS */
  const char *help; /* one line for --help */
} rd_opt;
/* min == max == 0 leaves a number unbounded. On RD_OPTS_ERROR every target
 * holds what it held on entry. */

/* Parses argv: first finds --config FILE (if any) and applies the file,
 * then applies the flags. Unknown keys or flags, bad values, a missing or
 * unreadable file and positional arguments are errors: the message (with
 * file:line for the file) goes to errbuf and RD_OPTS_ERROR is returned.
 * `--help` prints usage (prog, a one-line summary, every option) to stdout
 * and returns RD_OPTS_HELP; so do `--version` (rd_version_print) and the
 * hidden `--man` (the manual page in roff, section 8, from the same table;
 * CMake runs it at build time). RD_OPTS_OK otherwise. */
enum { RD_OPTS_OK = 0, RD_OPTS_HELP = 1, RD_OPTS_ERROR = -1 };
int rd_opts_parse(int argc, char **argv, const char *summary, const rd_opt *opts, char *errbuf,
                  size_t errcap);
/* The config file's syntax (opts_file.c) for a reader of its own (ringctl's
 * config): rd_conf_parse cuts text (len bytes, NUL-terminated at len, at
 * most RD_CONF_MAX; lines of at most RD_CONF_LINE_MAX) into `name = value`
 * settings in place and calls fn for each, with where "path:line"; fn
 * returns 0, or -1 having written err. Returns 0, or -1 with "path:line:
 * why" in err. rd_conf_read reads a whole file (at most RD_CONF_MAX) into
 * a malloc()'ed *text for it; -1 with err for one missing, unreadable or
 * too large. */
#define RD_CONF_MAX 65536u
#define RD_CONF_LINE_MAX 4096u
typedef int (*rd_conf_fn)(void *ud, const char *name, char *value, const char *where, char *err,
                          size_t errcap);
int rd_conf_parse(const char *path, char *text, size_t len, rd_conf_fn fn, void *ud, char *err,
                  size_t errcap);
int rd_conf_read(const char *path, char **text, size_t *len, char *err, size_t errcap);

/* Frees the strings rd_opts_parse stored (string targets reset to NULL
 * only if they were set by the parser; defaults are never freed). */
void rd_opts_free(const rd_opt *opts);

/* ------------------------------------------------------ manual pages, version */

/* roff for man(7) pages (man.c), used by the daemons' --man and ringctl's.
 * rd_roff_text escapes s (backslashes, minus signs, a '.' or '\'' opening a
 * line) and keeps its newlines; rd_roff_head prints .TH and the NAME
 * section ("name \- summary"); rd_roff_verbatim prints text as an unfilled
 * block (.nf), as --help shows it. All write to f; errors show in ferror. */
void rd_roff_text(FILE *f, const char *s);
void rd_roff_head(FILE *f, const char *name, const char *section, const char *summary);
void rd_roff_verbatim(FILE *f, const char *text);

/* Prints "PROG VERSION" (PROG: prog's last path component; the version is
 * the project's, RING_VERSION_STRING) on stdout: every binary's --version. */
void rd_version_print(const char *prog);

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
/* A ring_log_cb (ring_etcd.h) for ring_watcher_opts.log: the watcher's
 * events become this logger's lines, with cluster, version, source and err
 * as keys. log_ud is unused. */
struct ring_log_event;
void rd_ring_log(void *log_ud, const struct ring_log_event *ev);

/* ------------------------------------------------------------------ HTTP */

/* A growing text buffer for handlers: libring's ring__sbuf, filled with
 * ring__sb_printf / ring__sb_puts. An allocation failure marks it oom and
 * the server answers 500, so handlers need no error paths. */
typedef ring__sbuf rd_text;

/* The Prometheus text exposition writer every daemon uses: a "# HELP" and
 * "# TYPE" header once per metric family (help escaped), then its samples.
 * rd_metric_sample's labels is NULL, "" or `a="x",b="y"` already escaped;
 * rd_metric_labeled writes one label and escapes its value (backslash,
 * double quote, newline). rd_metric: a family of one unlabelled sample. */
void rd_metric_head(rd_text *t, const char *name, const char *type, const char *help);
void rd_metric_sample(rd_text *t, const char *name, const char *labels, double value);
void rd_metric_labeled(rd_text *t, const char *name, const char *label, const char *label_value,
                       double value);
void rd_metric(rd_text *t, const char *name, const char *type, const char *help, double value);

/* A metric read from a table rather than written by hand: a family of one
 * unlabelled sample whose value is an _Atomic uint64_t (RD_METRIC_ATOMIC)
 * or a uint64_t of a snapshot (RD_METRIC_U64) at `offset` in the struct
 * bases[room], divided by `divisor` (0: as read); or what `get` computes
 * from bases[room] (RD_METRIC_GET); or a whole family `put` writes itself,
 * labelled or left out (RD_METRIC_FAMILY), so a table keeps the order of
 * the exposition. rd_metric_table writes n of them in order. */
typedef enum rd_metric_kind {
  RD_METRIC_ATOMIC,
  RD_METRIC_U64,
  RD_METRIC_GET,
  RD_METRIC_FAMILY
} rd_metric_kind;
typedef struct rd_metric_desc {
  const char *name;
  const char *type; /* "gauge", "counter" */
  const char *help;
  rd_metric_kind kind;
  unsigned room; /* index into rd_metric_table's bases */
  size_t offset;
  double divisor;
  double (*get)(const void *base);
  void (*put)(rd_text *t, const void *base);
} rd_metric_desc;
void rd_metric_table(rd_text *t, const rd_metric_desc *d, size_t n, const void *const *bases);

/* Every daemon's series carry its cluster, so one Prometheus can scrape
 * many clusters: rd_metrics_identify (rd_daemon_start calls it) names the
 * daemon's component ("agent") and cluster; rd_metrics_finish then writes
 * `in` to `out` with ring_<component>_build_info{version,commit} first and
 * cluster="<name>" added to every sample. Not identified (a test's
 * server), it copies `in` as it is. */
void rd_metrics_identify(const char *component, const char *cluster);
void rd_metrics_finish(const rd_text *in, rd_text *out);

/* Table entries: a field of struct `st` in bases[room]; a computed value; a family. */
#define RD_METRIC_FIELD(kind_, room_, st, field, name_, type_, help_)                              \
  {                                                                                                \
    .name = (name_), .type = (type_), .help = (help_), .kind = (kind_), .room = (room_),           \
    .offset = offsetof(st, field)                                                                  \
  }
#define RD_METRIC_GETTER(room_, fn, name_, type_, help_)                                           \
  {                                                                                                \
    .name = (name_), .type = (type_), .help = (help_), .kind = RD_METRIC_GET, .room = (room_),     \
    .get = (fn)                                                                                    \
  }
#define RD_METRIC_PUT(room_, fn)                                                                   \
  { .kind = RD_METRIC_FAMILY, .room = (room_), .put = (fn) }

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

typedef struct rd_addrs rd_addrs;

/* One extra GET path: an exact match, tried after /metrics and /healthz
 * (which a route cannot take over). Tables end with {NULL}. A route with
 * an allow-list answers 403 to a client whose address is not in it (and
 * counts it), before its page is asked for. */
typedef struct rd_http_route {
  const char *path; /* "/status.json"; NULL ends the table */
  rd_page_fn page;
  void *ud;                     /* the page's argument */
  const rd_addrs *allow;        /* borrowed; NULL: every admitted client */
  atomic_uint_fast64_t *denied; /* counts the 403s; may be NULL */
} rd_http_route;

typedef struct rd_http rd_http;

/* Listen addresses (listen.c, where the rule is written): HOST:PORT or
 * [IPV6]:PORT, the host never empty (":PORT" is refused as ambiguous; say
 * 0.0.0.0:PORT or [::]:PORT), the port 0..65535. rd_listen_split: the
 * host (brackets off) into host[cap] and the port; rd_listen_resolve: the
 * first address it names, into *addr. Both return 0, or -1 with err set
 * (and the outputs unspecified). rd_listen_advertise: the HOST:PORT others
 * reach a server on listen at: its host, the host name in place of a
 * wildcard (or of a listen address that does not parse), with port. */
struct sockaddr_storage;
int rd_listen_split(const char *listen, char *host, size_t cap, uint16_t *port, char *err,
                    size_t errcap);
int rd_listen_resolve(const char *listen, struct sockaddr_storage *addr, char *err, size_t errcap);
void rd_listen_advertise(const char *listen, unsigned port, char *out, size_t cap);

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

/* ------------------------------------------------------------- admission */

/* rd_admit: who may hold a connection to a libmicrohttpd listener, and
 * how long a request's line and headers may take. A connection is refused
 * at accept when its client address is not allowed, when max_total are
 * open, or when max_per_addr are open from its address (IPv4 /32, IPv6
 * /128; an IPv4-mapped IPv6 address is its IPv4 address). Once admitted,
 * its request line and headers must be complete within header_ms of the
 * accept (or of the end of the previous response, on a kept-alive
 * connection): a budget in total, not an idle timer that each byte
 * restarts. A reaper thread shuts down the socket of a connection that
 * overruns it, and libmicrohttpd then closes it. Refusals and cuts are
 * counted, never logged. Every function is thread-safe. */
#define RD_ADMIT_TOTAL 1024      /* max_total when 0 */
#define RD_ADMIT_PER_ADDR 64     /* max_per_addr when 0 */
#define RD_ADMIT_HEADER_MS 5000  /* header_ms when 0 */
#define RD_ADMIT_TOTAL_MAX 65536 /* max_total above this is an error */

/* Address lists (allowed, extra, rd_admit_set_allowed) hold "IP",
 * "IP:PORT", "[V6]", "[V6]:PORT" or a host name (with or without
 * ":PORT"; the port is ignored), resolved with getaddrinfo (every address
 * a name has counts). An entry that is malformed or does not resolve is
 * skipped and counted. The strings are only read during the call. */
typedef struct rd_admit_opts {
  uint32_t max_total;         /* connections open at once; 0: RD_ADMIT_TOTAL */
  uint32_t max_per_addr;      /* from one client address; 0: RD_ADMIT_PER_ADDR */
  uint32_t header_ms;         /* request line and headers due within; 0: RD_ADMIT_HEADER_MS */
  const char *const *allowed; /* the first allow-list; NULL: unset (everyone is allowed) */
  uint32_t n_allowed;
  const char *const *extra; /* always allowed on top of any allow-list; resolved once, here */
  uint32_t n_extra;
} rd_admit_opts;

typedef struct rd_admit rd_admit;

/* rd_addrs: a fixed set of client addresses, for a route's allow-list.
 * rd_addrs_parse reads a comma-separated address list (entries as above,
 * at most RD_ADDRS_MAX), resolving names now; "any" alone is no list (*out
 * NULL: everyone). Returns 0 and sets *out (rd_addrs_free), or -1 with a
 * reason in msg for an empty, malformed or unresolvable entry or too many
 * (nothing is skipped silently: an allow-list that lost an entry would
 * refuse the operator it was written for). rd_addrs_has: whether sa (an
 * IPv4 or IPv6 socket address) is in s; an IPv4-mapped IPv6 address is its
 * IPv4 address. */
#define RD_ADDRS_MAX 64
struct sockaddr;
int rd_addrs_parse(const char *list, rd_addrs **out, char *msg, size_t cap);
bool rd_addrs_has(const rd_addrs *s, const struct sockaddr *sa);
void rd_addrs_free(rd_addrs *s);

/* Counters since rd_admit_new. */
typedef struct rd_admit_counts {
  uint64_t accepted;            /* connections admitted */
  uint64_t open;                /* admitted and not yet closed */
  uint64_t refused_not_allowed; /* the address is not in the allow-list */
  uint64_t refused_total;       /* max_total were open */
  uint64_t refused_per_addr;    /* max_per_addr were open from the address */
  uint64_t header_deadline_cut; /* shut down: headers not complete within header_ms */
  uint64_t server_errors;       /* complaints of the HTTP library (rd_admit_note_error) */
} rd_admit_counts;

/* Creates the rules (opts NULL: every default) and starts the reaper
 * thread. Returns how many address entries were skipped (>= 0) with *out
 * set (free with rd_admit_free); or -EINVAL (max_total over
 * RD_ADMIT_TOTAL_MAX), -ENOMEM or another negative errno from
 * pthread_create, with nothing left behind and *out untouched. */
int rd_admit_new(const rd_admit_opts *opts, rd_admit **out);
/* Stops and joins the reaper and frees adm. Call it after the server
 * that uses adm has stopped (MHD_stop_daemon). NULL is a no-op. */
void rd_admit_free(rd_admit *adm);
/* Replaces the allow-list at once (the extras stay allowed): addrs NULL
 * unsets it (everyone allowed); otherwise only its n addresses and the
 * extras are. Connections already open stay. Resolves names with the
 * lock not held, so it may block on DNS but never blocks the server.
 * Returns how many entries were skipped (>= 0), or -ENOMEM (or -EINVAL for
 * a NULL adm) with the list unchanged. */
int rd_admit_set_allowed(rd_admit *adm, const char *const *addrs, uint32_t n);
/* The counters (zeros for a NULL adm). */
void rd_admit_stats(const rd_admit *adm, rd_admit_counts *out);
/* Counts one complaint of the HTTP library, for a server's logger to
 * call instead of logging each aborted or reset connection. */
void rd_admit_note_error(rd_admit *adm);
/* Prometheus families for the counters: <prefix>_connections_accepted_total,
 * <prefix>_connections_open, <prefix>_connections_refused_total{reason=
 * "not_allowed"|"total"|"per_addr"}, <prefix>_header_deadline_cuts_total
 * and <prefix>_server_errors_total. Nothing for a NULL adm. */
void rd_admit_metrics_text(const rd_admit *adm, const char *prefix, rd_text *t);

/* The /metrics server with admission rules: as rd_http_start_routes, its
 * connections governed by an rd_admit made from admit (NULL: every
 * default, which rd_http_start and rd_http_start_routes use). */
rd_http *rd_http_start_admit(const char *listen, rd_metrics_fn metrics, rd_health_fn health,
                             void *ud, const rd_http_route *routes, const rd_admit_opts *admit,
                             char *errbuf, size_t errcap);
/* The server's rules, for rd_admit_set_allowed and rd_admit_metrics_text;
 * they live as long as h. NULL for a NULL h. */
rd_admit *rd_http_admit(rd_http *h);

/* The libmicrohttpd side, declared where <microhttpd.h> was included
 * before this header. A server passes rd_admit_accept and adm as
 * MHD_start_daemon's accept policy, adds the options of
 * rd_admit_mhd_options (MHD_OPTION_ARRAY) and calls rd_admit_headers_done
 * from its request handler. It sets no connection limits of its own and
 * leaves the connection's socket_context to rd_admit; a notification of
 * its own (NOTIFY_CONNECTION, NOTIFY_COMPLETED) comes after the array,
 * which it overrides, and calls rd_admit_on_connection /
 * rd_admit_on_completed with adm. */
#ifdef MHD_VERSION
#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result rd_mhd_result;
#else
typedef int rd_mhd_result; /* before 0.9.71 callbacks returned int */
#endif
/* MHD_AcceptPolicyCallback; cls is the rd_admit. MHD_NO refuses (counted). */
rd_mhd_result rd_admit_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
/* MHD_NotifyConnectionCallback: registers a connection with its header
 * deadline (STARTED) and forgets it (CLOSED). */
void rd_admit_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                            enum MHD_ConnectionNotificationCode code);
/* MHD_RequestCompletedCallback: the response is done, so the next
 * request's headers are due within header_ms from now. */
void rd_admit_on_completed(void *cls, struct MHD_Connection *c, void **req,
                           enum MHD_RequestTerminationCode toe);
/* For the request handler (every call, or at least the first of a
 * request): the headers are in, so no deadline runs until the response
 * is done. */
void rd_admit_headers_done(rd_admit *adm, struct MHD_Connection *c);
/* Fills items[0 .. RD_ADMIT_MHD_OPTIONS - 1] (the last MHD_OPTION_END) for
 * MHD_OPTION_ARRAY: the notifications, no per-address limit of
 * libmicrohttpd's own, and a connection limit a little above max_total
 * for each of threads (MHD_OPTION_THREAD_POOL_SIZE; 0 for one), since
 * libmicrohttpd splits its limit between them. */
#define RD_ADMIT_MHD_OPTIONS 5
void rd_admit_mhd_options(rd_admit *adm, unsigned threads, struct MHD_OptionItem *items);
#endif

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
/* A daemon's whole option table: the etcd options of c, then `own` (rows
 * up to its {NULL} row, which ends the result too). malloc()'ed, for
 * rd_opts_release; NULL when out of memory. No count is kept by hand: a row
 * added to `own` is in the table. */
rd_opt *rd_opts_with_etcd(rd_etcd_conf *c, const rd_opt *own);
/* rd_opts_free, then frees a table from rd_opts_with_etcd. NULL is a no-op. */
void rd_opts_release(rd_opt *table);
/* What the parser cannot check: endpoints given, user and password file
 * together. 0, or -1 with msg set. */
int rd_etcd_check(const rd_etcd_conf *c, char *msg, size_t cap);

struct ring_etcd;
/* Opens the client (ring_etcd_open). 0, or -1 with msg set ("etcd: ..."
 * or the password file's trouble). */
int rd_etcd_open(const rd_etcd_conf *c, struct ring_etcd **out, char *msg, size_t cap);

/* ------------------------------------------------------ a daemon's skeleton */

/* What every daemon's start shares (skeleton.c): the options each takes
 * under the same names, their checks, --help, usage errors and logging.
 * RD_COMMON_FIELDS lists the values; a daemon's options struct holds them
 * as RD_COMMON_MEMBERS, so its code reads o->cluster as before while the
 * skeleton reads the same storage as an rd_common (a union member). */
#define RD_COMMON_FIELDS                                                                           \
  rd_etcd_conf etcd; /* --endpoints, auth, TLS, --etcd-timeout */                                  \
  char *cluster;                                                                                   \
  char *id;                                                                                        \
  char *listen;                                                                                    \
  char *advertise; /* NULL: from listen */                                                         \
  char *data_dir;                                                                                  \
  char *log_level;                                                                                 \
  uint64_t lease_ttl_ms;
typedef struct rd_common {
  RD_COMMON_FIELDS
} rd_common;
#define RD_COMMON_MEMBERS                                                                          \
  union {                                                                                          \
    rd_common common;                                                                              \
    struct {                                                                                       \
      RD_COMMON_FIELDS                                                                             \
    };                                                                                             \
  }

/* The shared options, one row each: a daemon's table lists the rows it
 * takes, where it wants them (--help and the man page keep its order). */
typedef enum rd_common_opt {
  RD_CLUSTER,
  RD_ID,
  RD_LISTEN,
  RD_ADVERTISE,
  RD_DATA_DIR,
  RD_LOG_LEVEL,
  RD_LEASE_TTL /* 2s .. 10m */
} rd_common_opt;
/* The row of option k writing into c, with help (NULL: the shared text,
 * for cluster and log-level). */
rd_opt rd_common_row(rd_common *c, rd_common_opt k, const char *help);

/* How one daemon starts. need: which shared options are required
 * (RD_NEED_*); an id given is checked either way, up to id_max bytes
 * (0: RING_ID_MAX), and a required one's message names it id_meta. check
 * (may be NULL) checks the daemon's own options, after the shared ones. */
enum { RD_NEED_ID = 1, RD_NEED_LISTEN = 2, RD_NEED_DATA_DIR = 4 };
typedef struct rd_daemon {
  const char *name;      /* "ring-agent": the prefix of a usage error */
  const char *component; /* "agent": comp= in the log */
  const char *summary;   /* --help's first line */
  unsigned need;
  const char *id_meta; /* "ID" */
  size_t id_max;
  int (*check)(const void *opts, char *msg, size_t cap);
} rd_daemon;

/* Parses argv into table (from rd_opts_with_etcd; NULL: out of memory),
 * checks the shared options in c and then d->check(opts), and starts the
 * log at --log-level (info by default) on stderr. Returns -1 to go on, or
 * the exit code: 0 after --help (--version, --man), 2 on a usage error
 * ("NAME: msg" on stderr), 1 out of memory. */
int rd_daemon_start(const rd_daemon *d, int argc, char **argv, const rd_opt *table, rd_common *c,
                    const void *opts);

/* ------------------------------------------------------------ waking a loop */

/* A loop sleeps in rd_waker_wait until someone calls rd_waker_wake or the
 * timeout passes; wakes that come while it runs are not lost (an eventfd's
 * counter). One thread waits; any thread (or a signal handler) wakes. */
typedef struct rd_waker {
  int fd; /* eventfd: readable while a wake is pending; -1 after destroy */
} rd_waker;

int rd_waker_init(rd_waker *w);
void rd_waker_destroy(rd_waker *w);
void rd_waker_wake(rd_waker *w);
/* Returns true if woken, false on timeout; clears the wake either way.
 * The timeout is relative and measured on CLOCK_MONOTONIC (poll(2)), so no
 * wall-clock step or faked wall clock can stretch it or cut it short;
 * UINT64_MAX waits for a wake (in slices of INT_MAX ms). */
bool rd_waker_wait(rd_waker *w, uint64_t timeout_ms);

/* ----------------------------------------------------------------- clocks */

/* Milliseconds. Decide with rd_now_ms: every interval, deadline, patience
 * or "gone for how long" is a difference of two rd_now_ms readings in one
 * process, and never negative. rd_wall_ms is for timestamps that people
 * or other hosts read (logs, lost_ms, since_ms, updated_ms); it may step
 * back or jump, and differs between hosts, so a decision that compares it
 * with another host's wall time clamps (rd_wall_since). */
uint64_t rd_now_ms(void);  /* CLOCK_MONOTONIC, from an arbitrary start */
uint64_t rd_wall_ms(void); /* CLOCK_REALTIME, Unix ms */
/* now - then for wall times, clamped: 0 when `then` is 0, in the future or
 * after `now` (a clock stepped back, a host whose clock is behind). A
 * caller that needs "at least this long ago" must not trust the result:
 * it is an upper bound only as good as two hosts' clocks. */
uint64_t rd_wall_since(uint64_t now, uint64_t then);

/* ------------------------------------------------- a restored etcd */

/* What a daemon shows while etcd's history went back (the client's marks,
 * ring_etcd.h "History"; restore.c): one error line when it starts, a
 * reminder every RD_RESTORE_REMIND_MS while it lasts (never a flood), one
 * info line when the operator's recover settles it; /healthz's line and a
 * gauge read from any thread. */
#define RD_RESTORE_REMIND_MS 60000
#define RD_RESTORE_WHY_MAX 192
typedef struct rd_restore {
  pthread_mutex_t mu;           /* guards why */
  char why[RD_RESTORE_WHY_MAX]; /* "etcd history went back: ..."; "" when not */
  _Atomic bool restored;        /* the gauge */
  uint64_t reminded_ms;         /* rd_now_ms of the last error line (the loop's) */
} rd_restore;

int rd_restore_init(rd_restore *r);
void rd_restore_destroy(rd_restore *r);
/* The loop, after its etcd calls: reads c's marks, logs as above (with
 * `what`, e.g. "no drops, fetches or acks until `ringctl recover`").
 * Returns whether the history went back. */
bool rd_restore_observe(rd_restore *r, struct ring_etcd *c, const char *what);
/* /healthz: writes the reason line and returns false while restored;
 * writes nothing and returns true otherwise. */
bool rd_restore_health(rd_restore *r, rd_text *t);

#endif /* RING_DAEMON_H */
