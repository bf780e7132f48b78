/*
 * log.c: logfmt lines (`ts=... level=info comp=coordinator msg="..." k=v`).
 *
 * Sections: settings; building a line; values; writing; the entry points.
 * How a value is quoted and escaped is one rule, libring's too (util/logfmt.c).
 *
 * A line is built in a fixed buffer on the caller's stack and written with
 * one write(2): writes of at most PIPE_BUF bytes to a pipe are atomic, and
 * O_APPEND files and terminals do not split a single write in practice, so
 * lines from different threads never interleave and no lock is needed. A
 * line that would not fit is cut at a character boundary, its open quote
 * closed, and ends with ` truncated=true`, so it still parses.
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */
#include "daemon.h"
#include "ring_etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifndef RD_LOG_LINE_MAX
#define RD_LOG_LINE_MAX 4096 /* PIPE_BUF on Linux: the most one atomic pipe write carries */
#endif
#define TRUNCATED " truncated=true\n"

/* ----------------------------------------------------------------- settings */

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/* Level and fd are atomic so a test or a reload may change them while
 * threads log; the component is set once, before threads start. */
static atomic_int log_min = RD_INFO;
static atomic_int log_fd = STDERR_FILENO;
static char log_comp[64];

int rd_log_level_parse(const char *name) {
  for (int i = RD_DEBUG; i <= RD_ERROR; i++)
    if (name != NULL && strcasecmp(name, level_names[i]) == 0)
      return i;
  return -1;
}

void rd_log_init(const char *component, rd_level min, int fd) {
  snprintf(log_comp, sizeof log_comp, "%s", component != NULL ? component : "");
  atomic_store(&log_min, (int)min);
  atomic_store(&log_fd, fd >= 0 ? fd : STDERR_FILENO);
}

bool rd_log_enabled(rd_level l) { return (int)l >= atomic_load(&log_min); }

/* -------------------------------------------------------------- building a line */

typedef struct line {
  char buf[RD_LOG_LINE_MAX];
  size_t len;   /* bytes used */
  size_t limit; /* len never passes this: the rest is kept for TRUNCATED */
  bool cut;     /* something did not fit; nothing more is added */
} line;

static void line_init(line *l) {
  l->len = 0;
  l->limit = sizeof l->buf - (sizeof TRUNCATED - 1);
  l->cut = false;
}

/* Appends n bytes whole, or marks the line cut. */
static void put_raw(line *l, const char *s, size_t n) {
  if (l->cut || l->len + n > l->limit) {
    l->cut = true;
    return;
  }
  memcpy(l->buf + l->len, s, n);
  l->len += n;
}

static void put_str(line *l, const char *s) { put_raw(l, s, strlen(s)); }

/* " key=", with bytes that would break the format replaced by '_'. */
static void put_key(line *l, const char *key) {
  size_t n = strlen(key);
  if (l->cut || l->len + n + 2 > l->limit) {
    l->cut = true;
    return;
  }
  l->buf[l->len++] = ' ';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)key[i];
    l->buf[l->len++] = c <= ' ' || c == '=' || c == '"' || c == 0x7f ? '_' : (char)c;
  }
  l->buf[l->len++] = '=';
}

/* ------------------------------------------------------------------ values */

/* A value by the one logfmt rule (util/logfmt.c: quoted and escaped
 * when it needs it, cut at a character boundary); NULL logs as "". The NUL
 * it writes lands at most at limit, inside buf. */
static void put_value(line *l, const char *v) {
  if (l->cut)
    return;
  bool cut;
  l->len += ring__logfmt_value(v, l->buf + l->len, l->limit - l->len + 1, &cut);
  l->cut = cut;
}

/* ------------------------------------------------------------------ writing */

/* One write(2); the loop only finishes a write a signal or a full disk
 * interrupted. errno is kept: callers log and then look at it. */
static void emit(const char *buf, size_t len) {
  int saved = errno;
  int fd = atomic_load(&log_fd);
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    buf += n;
    len -= (size_t)n;
  }
  errno = saved;
}

static void put_header(line *l, rd_level lv, const char *msg) {
  char ts[40];
  uint64_t ms = rd_wall_ms();
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(ts + n, sizeof ts - n, ".%03uZ", (unsigned)(ms % 1000));
  put_str(l, "ts=");
  put_str(l, ts);
  put_str(l, " level=");
  put_str(l, level_names[lv >= RD_DEBUG && lv <= RD_ERROR ? lv : RD_ERROR]);
  if (log_comp[0] != '\0') {
    put_key(l, "comp");
    put_value(l, log_comp);
  }
  put_key(l, "msg");
  put_value(l, msg);
}

static void finish(line *l) {
  if (l->cut)
    memcpy(l->buf + l->len, TRUNCATED, sizeof TRUNCATED - 1), l->len += sizeof TRUNCATED - 1;
  else
    l->buf[l->len++] = '\n';
  emit(l->buf, l->len);
}

/* ------------------------------------------------------------ entry points */

void rd_log(rd_level lv, const char *msg, ...) {
  if (!rd_log_enabled(lv))
    return;
  line l;
  line_init(&l);
  put_header(&l, lv, msg);
  va_list ap;
  va_start(ap, msg);
  for (const char *key; (key = va_arg(ap, const char *)) != NULL;) {
    const char *value = va_arg(ap, const char *);
    put_key(&l, key);
    put_value(&l, value);
  }
  va_end(ap);
  finish(&l);
}

void rd_logf(rd_level lv, const char *fmt, ...) {
  if (!rd_log_enabled(lv))
    return;
  char msg[RD_LOG_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  line l;
  line_init(&l);
  put_header(&l, lv, n >= 0 ? msg : fmt);
  l.cut = l.cut || n >= (int)sizeof msg;
  finish(&l);
}

void rd_ring_log(void *log_ud, const ring_log_event *ev) {
  (void)log_ud;
  rd_level lv = ev->level == RING_LOG_ERROR  ? RD_ERROR
                : ev->level == RING_LOG_WARN ? RD_WARN
                                             : RD_INFO;
  char version[24];
  snprintf(version, sizeof version, "%" PRIu64, ev->version);
  rd_log(lv, ev->msg, "cluster", ev->cluster, "version", version, "source", ev->source, "err",
         ev->error, NULL);
}
