/*
 * arc_fetch.c: fetching an arc from a peer's arc server with libcurl
 * (proto/arc.md) and installing it.
 *
 * Sections: the transfer state; curl; the manifest; one file (resume,
 * stream, verify, retry); the temporary directory; install; the entry.
 *
 * Bytes go from curl's buffer through the shared limiter and XXH3 into
 * tmp/<token>.<version>/<name> through an arc_sink (arc_sink.c: O_DIRECT
 * from a 1 MiB staging buffer, or the page cache): nothing is buffered
 * beyond curl's receive buffer and that one. A file left there by an
 * earlier attempt is hashed from disk and continued with a range request;
 * the checksum of the whole file decides. The directory is renamed into
 * arcs/ only when every file is verified and fsync()ed.
 *
 * Every request is signed (arc_auth.c); the manifest and every refusal the
 * fetch acts on must come back signed by the node the table names at that
 * address, for this very request. An answer that is not is refused and
 * counted, whatever it says: a stranger at the address can say "not held"
 * as easily as it can send a manifest, and neither may move data.
 */
#define _GNU_SOURCE /* renameat2, O_NOFOLLOW, O_DIRECTORY */
#include "arc_int.h"
#include "ringx.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef ARC_FETCH_BUFFER
#define ARC_FETCH_BUFFER (1L << 20) /* curl's receive buffer, bytes */
#endif

/* ---------------------------------------------------- the transfer state */

struct arc_fetcher {
  CURL *curl; /* its connection stays open for the next arc from the same source */
  XXH3_state_t *h;
  arc_sink sink; /* its staging buffer */
};

typedef struct fetch {
  arc_store *store;
  const arc_fetch_opts *o;
  uint32_t token;
  uint32_t max_retries;
  CURL *curl;                         /* the fetcher's */
  struct curl_slist *headers;         /* this request's X-Ring-Auth */
  char base[1024];                    /* http[s]://host:port */
  unsigned char nonce[ARC_NONCE_LEN]; /* this request's: its answer must carry it */
  long status;                      /* the answer's status line (the last, after redirects: none) */
  char sig[ARC_AUTH_VALUE_MAX + 1]; /* its X-Ring-Sig, "" if none */
  char errbody[512];                /* the body of an answer that is not 200/206, cut short */
  size_t errlen;
  char tmpdir[4096]; /* tmp/<token>.<version> */
  int dfd;           /* tmpdir, locked with flock */
  char curl_error[CURL_ERROR_SIZE];
  arc_fetch_result res;
  /* the file being received */
  const arc_file *file;
  int fd;
  arc_sink *sink;  /* the fetcher's, on fd: its bytes so far are the file's, all hashed into h */
  XXH3_state_t *h; /* the fetcher's */
  int write_errno; /* write(2) failed: no retry */
  bool untrusted;  /* an I/O error or a failed fsync in tmpdir: see discard_tmp */
  bool overflow;   /* the source sent more than the manifest said */
  bool stopped;    /* o->stop seen */
  bool unpinned;   /* no key pinned for the source: the request was not made */
  ring__sbuf body; /* the manifest */
} fetch;

/* An answer the fetch takes bytes from: anything else is an error, whose
 * body is kept (short) for its signature, never written to a file. */
static bool success(long status) { return status == 200 || status == 206; }

/* Keeps the first bytes of an error answer's body. */
static size_t keep_error_body(fetch *f, const char *p, size_t n) {
  size_t room = sizeof f->errbody - f->errlen, k = n < room ? n : room;
  memcpy(f->errbody + f->errlen, p, k);
  f->errlen += k;
  return n;
}

/* Bytes of the current file so far (on disk after a flush). */
static uint64_t received(const fetch *f) { return arc__sink_bytes(f->sink); }

static bool stop_requested(fetch *f) {
  if (f->o->stop != NULL && atomic_load(f->o->stop))
    f->stopped = true;
  return f->stopped;
}

/* ------------------------------------------------------------------ curl */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

/* Aborts a transfer (within a second) once stop is set. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut, (void)un;
  return stop_requested(ud) ? 1 : 0;
}

/* Header lines of an answer: its status and its X-Ring-Sig. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *ud) {
  fetch *f = ud;
  size_t n = size * nmemb, name = sizeof ARC_SIG_HEADER - 1;
  if (n >= 12 && memcmp(p, "HTTP/", 5) == 0) { /* a new answer: forget the last one's */
    f->sig[0] = '\0';
    f->errlen = 0;
    const char *sp = memchr(p, ' ', n);
    f->status = sp && sp + 4 <= p + n ? strtol(sp + 1, NULL, 10) : 0;
  } else if (n > name + 1 && strncasecmp(p, ARC_SIG_HEADER, name) == 0 && p[name] == ':') {
    const char *v = p + name + 1, *end = p + n;
    while (v < end && *v == ' ')
      v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
      end--;
    size_t len = (size_t)(end - v) < sizeof f->sig - 1 ? (size_t)(end - v) : 0;
    memcpy(f->sig, v, len); /* too long: kept empty, so it fails to verify */
    f->sig[len] = '\0';
  }
  return n;
}

static int setup_curl(fetch *f, const char *source, ring_error *err) {
  const char *scheme = strstr(source, "://") ? "" : "http://";
  size_t n = (size_t)snprintf(f->base, sizeof f->base, "%s%s", scheme, source);
  while (n > 0 && f->base[n - 1] == '/')
    f->base[--n] = '\0';
  if (n >= sizeof f->base - 64 || n == 0)
    return ring__err(err, RING_EINVAL, "source \"%.64s\": too long or empty", source);
  long timeout_ms = f->o->timeout_ms ? (long)f->o->timeout_ms : 10000;
  CURL *c = f->curl;
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, f->curl_error);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, f);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, timeout_ms >= 2000 ? timeout_ms / 1000 : 1L);
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, ARC_FETCH_BUFFER);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, f);
  if (f->o->ca_file != NULL)
    curl_easy_setopt(c, CURLOPT_CAINFO, f->o->ca_file);
  return RING_OK;
}

/* This request's X-Ring-Auth header (a fresh nonce into f->nonce). The
 * range is what curl sends for CURLOPT_RESUME_FROM_LARGE: "bytes=<from>-". */
static CURLcode sign(fetch *f, const char *path, uint64_t from) {
  char range[32] = "", line[sizeof ARC_AUTH_HEADER + 2 + ARC_AUTH_VALUE_MAX];
  if (from > 0)
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-", from);
  int n = snprintf(line, sizeof line, "%s: ", ARC_AUTH_HEADER);
  int rc = arc_auth_sign_request(f->o->keys, f->o->self_id, f->o->source_id, "GET", path, range,
                                 arc__wall_ms(), f->nonce, line + n, sizeof line - (size_t)n);
  f->unpinned = rc == RING_ENODEID;
  if (rc != RING_OK)
    return CURLE_BAD_FUNCTION_ARGUMENT;
  curl_slist_free_all(f->headers);
  f->headers = curl_slist_append(NULL, line);
  if (f->headers == NULL)
    return CURLE_OUT_OF_MEMORY;
  curl_easy_setopt(f->curl, CURLOPT_HTTPHEADER, f->headers);
  return CURLE_OK;
}

/* GET base + path, signed, with the given write callback; the HTTP status
 * in *status (0 if none came). Returns curl's code. */
static CURLcode get(fetch *f, const char *path, curl_write_callback cb, uint64_t from,
                    long *status) {
  char url[sizeof f->base + 64 + ARC_NAME_MAX];
  snprintf(url, sizeof url, "%s%s", f->base, path);
  f->curl_error[0] = '\0';
  f->status = 0;
  f->sig[0] = '\0';
  f->errlen = 0;
  CURLcode signed_rc = sign(f, path, from);
  if (signed_rc != CURLE_OK)
    return signed_rc;
  curl_easy_setopt(f->curl, CURLOPT_URL, url);
  curl_easy_setopt(f->curl, CURLOPT_WRITEFUNCTION, cb);
  curl_easy_setopt(f->curl, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(f->curl, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)from);
  CURLcode rc = curl_easy_perform(f->curl);
  *status = 0;
  curl_easy_getinfo(f->curl, CURLINFO_RESPONSE_CODE, status);
  return rc;
}

/* The answer's body: a manifest request's is in f->body, a file
 * request's (an error) in errbody. */
static const char *answer_text(const fetch *f) { return f->body.len ? f->body.p : f->errbody; }

/* The length of its first line, at most 120 bytes. */
static int answer_line(const fetch *f) {
  const char *p = answer_text(f);
  size_t n = f->body.len ? f->body.len : f->errlen, k = 0;
  while (k < n && k < 120 && p[k] != '\n' && p[k] != '\0')
    k++;
  return (int)k;
}

/* What a failed request means, for everything but the file's own bytes. */
static int request_error(fetch *f, const char *what, CURLcode rc, long status, ring_error *err) {
  const char *src = f->o->source_id, *base = f->base,
             *curl_says = f->curl_error[0] ? f->curl_error : curl_easy_strerror(rc);
  uint32_t t = f->token;
  if (f->stopped || rc == CURLE_ABORTED_BY_CALLBACK)
    return ring__err(err, RING_ETIMEDOUT, "arc %" PRIu32 ": %s: stopped", t, what);
  if (f->unpinned)
    return ring__err(err, RING_EAUTH,
                     "arc %" PRIu32
                     ": %s: no key is pinned for %s (nodes/%s): not asked until one is",
                     t, what, src, src);
  if (status == 401 || status == 403)
    return ring__err(err, RING_EAUTH,
                     "arc %" PRIu32 ": %s: %s (%s) refused our request: %ld (another secret? "
                     "clock skew?)",
                     t, what, src, base, status);
  if (status == 404)
    return ring__err(err, RING_ENOTFOUND, "arc %" PRIu32 ": %s: not held by %s (%s)", t, what, src,
                     base);
  if (status == 503) /* the source says why: "arc store unavailable", "busy" */
    f->res.busy = strncmp(answer_text(f), "busy", 4) == 0;
  if (status == 503)
    return ring__err(err, RING_EUNAVAIL, "arc %" PRIu32 ": %s: %s (%s): %.*s", t, what, src, base,
                     answer_line(f), answer_text(f));
  if (rc == CURLE_OPERATION_TIMEDOUT)
    return ring__err(err, RING_ETIMEDOUT, "arc %" PRIu32 ": %s: %s (%s): %s", t, what, src, base,
                     curl_says);
  if (status >= 300 || (rc == CURLE_OK && status != 200 && status != 206))
    return ring__err(err, RING_EPROTO, "arc %" PRIu32 ": %s: %s (%s): HTTP status %ld", t, what,
                     src, base, status);
  return ring__err(err, RING_ECONNECT, "arc %" PRIu32 ": %s: %s (%s): %s", t, what, src, base,
                   curl_says);
}

/* ----------------------------------------------------------- the manifest */

static size_t on_manifest(char *p, size_t size, size_t nmemb, void *ud) {
  fetch *f = ud;
  size_t n = size * nmemb;
  if (f->body.len + n > ARC_MANIFEST_JSON_MAX)
    return 0;
  ring__sb_reserve(&f->body, n + 1);
  if (f->body.oom)
    return 0;
  memcpy(f->body.p + f->body.len, p, n);
  f->body.len += n;
  f->body.p[f->body.len] = '\0';
  return n;
}

/* Whether the answer just received (status, body) is signed by the node
 * expected at the source, for this request and this token (or, for a
 * refusal before the path was read, for no token). */
static bool signed_by_source(fetch *f, long status, const void *body, size_t len) {
  size_t n = strlen(f->sig);
  const arc_keyring *k = f->o->keys;
  const char *id = f->o->source_id;
  unsigned st = (unsigned)status;
  return arc_auth_verify_answer(k, f->sig, n, id, f->nonce, st, f->token, body, len) == RING_OK ||
         ((status == 401 || status == 503) &&
          arc_auth_verify_answer(k, f->sig, n, id, f->nonce, st, ARC_NO_TOKEN, body, len) ==
              RING_OK);
}

/* An answer to the manifest request that is not signed by the source:
 * refused and counted, whatever it says. */
static int unsigned_answer(fetch *f, long status, ring_error *err) {
  f->res.bad_signature = true;
  return ring__err(err, RING_EAUTH,
                   "arc %" PRIu32 ": %s answered %ld for the manifest without a valid signature "
                   "of %s (the cluster MAC and the key pinned for it): not acted on",
                   f->token, f->base, status, f->o->source_id);
}

static int fetch_manifest(fetch *f, arc_manifest *m, ring_error *err) {
  char path[64];
  snprintf(path, sizeof path, "/v1/arcs/%" PRIu32 "/manifest", f->token);
  long status = 0;
  CURLcode rc = get(f, path, on_manifest, 0, &status);
  int code = RING_OK;
  ring_error why = {0};
  const char *body = f->body.p ? f->body.p : "";
  if (f->body.oom) {
    code = ring__err(err, RING_ENOMEM, "manifest: out of memory");
  } else if (rc != CURLE_OK || status == 0) {
    code = request_error(f, "manifest", rc, status, err);
  } else if (!signed_by_source(f, status, body, f->body.len)) {
    code = unsigned_answer(f, status, err);
  } else if (status != 200) {
    code = request_error(f, "manifest", rc, status, err);
    f->res.not_held = code == RING_ENOTFOUND; /* signed: the source says it holds no such arc */
  } else if ((code = arc_manifest_decode(f->body.p ? f->body.p : "", f->body.len, m, &why)) !=
             RING_OK) {
    code = ring__err(err, RING_EPROTO, "arc %" PRIu32 ": manifest from %s: %s", f->token, f->base,
                     why.message);
  } else if (m->token != f->token) {
    code = ring__err(err, RING_EPROTO, "arc %" PRIu32 ": the source sent the manifest of %" PRIu32,
                     f->token, m->token);
    arc_manifest_free(m);
  }
  free(f->body.p);
  f->body = (ring__sbuf){0};
  return code;
}

/* ---------------------------------------------------------------- one file */

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud) {
  fetch *f = ud;
  size_t n = size * nmemb;
  if (stop_requested(f))
    return 0;
  if (!success(f->status))
    return keep_error_body(f, p, n);
  if (n > f->file->size - received(f)) {
    f->overflow = true;
    return 0;
  }
  if (!arc_limiter_take(f->o->limiter, n, f->o->stop)) {
    f->stopped = true;
    return 0;
  }
  XXH3_64bits_update(f->h, p, n); /* first: the sink's copy may evict them from cache */
  int rc = arc__sink_write(f->sink, p, n);
  if (rc != 0) {
    f->write_errno = -rc;
    return 0;
  }
  f->res.bytes += n;
  return n;
}

/* Back to an empty file. */
static int restart_file(fetch *f) {
  XXH3_64bits_reset(f->h);
  return arc__sink_truncate(f->sink);
}

/* Opens tmpdir/<name> and hashes what an earlier attempt left there; a
 * leftover longer than the file is dropped. */
static int open_partial(fetch *f, ring_error *err) {
  const arc_file *a = f->file;
  f->fd = openat(f->dfd, a->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  struct stat st;
  int rc = f->fd < 0 || fstat(f->fd, &st) != 0 ? -errno : 0;
  XXH3_64bits_reset(f->h);
  uint64_t size = rc == 0 ? (uint64_t)st.st_size : 0;
  if (rc == 0 && size <= a->size)
    rc = arc__hash_fd(f->fd, size, f->h);
  if (rc == 0)
    arc__sink_start(f->sink, f->fd, size);
  if (rc == 0 && size > a->size) /* longer than the file: start over */
    rc = restart_file(f);
  if (rc != 0) {
    f->untrusted = true;
    return ring__err(err, arc__errno_code(rc), "%s/%s: %s", f->tmpdir, a->name, strerror(-rc));
  }
  if (received(f) > 0)
    f->res.resumed_files++;
  return RING_OK;
}

/* A write refused for want of space copied nothing: the bytes before it
 * are as good as they were, and kept for a resume once there is room (the
 * next attempt's space check then refuses at once instead of refetching).
 * Any other write error may have left the file in an unknown state. */
static bool out_of_space(int e) { return e == ENOSPC || e == EDQUOT; }

/* One request for the rest of the file. Returns RING_OK when the bytes
 * stopped coming for a reason worth another attempt (or none), else the
 * error that ends the fetch. */
static int transfer(fetch *f, ring_error *err) {
  char path[64 + ARC_NAME_MAX];
  snprintf(path, sizeof path, "/v1/arcs/%" PRIu32 "/files/%s", f->token, f->file->name);
  f->overflow = false;
  long status = 0;
  CURLcode rc = get(f, path, on_data, received(f), &status);
  int flushed = arc__sink_flush(f->sink); /* what came is on disk, for a resume */
  if (flushed != 0 && f->write_errno == 0)
    f->write_errno = -flushed;
  f->untrusted |= f->write_errno != 0 && !out_of_space(f->write_errno);
  if (f->write_errno != 0)
    return ring__err(err, arc__errno_code(-f->write_errno), "%s/%s: %s", f->tmpdir, f->file->name,
                     strerror(f->write_errno));
  if (rc == CURLE_RANGE_ERROR || status == 416)
    f->overflow = true; /* the source's file is not what the manifest said: start over */
  if ((rc == CURLE_OK && success(status)) || f->overflow)
    return RING_OK; /* the checksum decides; a short file is a broken transfer */
  int code = request_error(f, f->file->name, rc, status, err);
  bool again = code == RING_ECONNECT || code == RING_ETIMEDOUT || code == RING_EPROTO;
  return again && !f->stopped ? RING_OK : code;
}

/* Back to byte 0 of the current file: its bytes so far are wrong. */
static int start_over(fetch *f, uint64_t *kept, ring_error *err) {
  *kept = 0;
  int e = restart_file(f);
  f->untrusted |= e != 0;
  if (e != 0)
    return ring__err(err, arc__errno_code(e), "%s/%s: %s", f->tmpdir, f->file->name, strerror(-e));
  return RING_OK;
}

/* Receives one file into the temporary directory, verified, written
 * (install fsyncs it). A leftover is continued, and one that is already
 * whole is only checked: a stale copy of the arc (arc_store_recheck) costs
 * no transfer for the files the source still has. A file that began from
 * a leftover and fails its checksum starts over without counting as a
 * failed transfer (stale_files): the leftover may have been the wrong
 * part, and the next attempt has none. */
static int fetch_file(fetch *f, const arc_file *a, ring_error *err) {
  f->file = a;
  int rc = open_partial(f, err);
  uint64_t kept = received(f); /* a leftover's bytes: sent again only if wrong */
  uint32_t failures = 0;
  while (rc == RING_OK) {
    if (received(f) < a->size && (rc = transfer(f, err)) != RING_OK)
      break;
    bool complete = received(f) == a->size && !f->overflow;
    if (complete && XXH3_64bits_digest(f->h) == a->xxh3) {
      f->res.reused_bytes += kept;
      break; /* verified */
    }
    if (stop_requested(f)) {
      rc = ring__err(err, RING_ETIMEDOUT, "arc %" PRIu32 ": stopped", f->token);
      break;
    }
    if (complete && kept > 0) { /* the leftover was not (a prefix of) the source's file */
      f->res.stale_files++;
      rc = start_over(f, &kept, err);
      continue;
    }
    if (++failures > f->max_retries) {
      rc = complete || f->overflow
               ? ring__err(err, RING_ECHECKSUM,
                           "arc %" PRIu32 ": %s: checksum mismatch %" PRIu32 " times", f->token,
                           a->name, failures)
               : ring__err(err, RING_ECONNECT,
                           "arc %" PRIu32 ": %s: transfer broken %" PRIu32 " times (%s)", f->token,
                           a->name, failures, f->curl_error);
      break;
    }
    if (complete || f->overflow) { /* bytes are wrong: start over */
      f->res.checksum_failures++;
      rc = start_over(f, &kept, err);
    }
  }
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
  return rc;
}

/* ------------------------------------------------- the temporary directory */

static bool in_manifest(const arc_manifest *m, const char *name) {
  uint32_t lo = 0, hi = m->n_files;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    int c = strcmp(m->files[mid].name, name);
    if (c == 0)
      return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* Creates (or reopens and locks) tmp/<token>.<version> and removes every
 * entry the manifest does not name, so the directory renamed in at the end
 * holds exactly the verified files. */
static int prepare_tmp(fetch *f, uint64_t version, const arc_manifest *m, ring_error *err) {
  snprintf(f->tmpdir, sizeof f->tmpdir, "%s/%" PRIu32 ".%" PRIu64, arc__store_tmp(f->store),
           f->token, version);
  if (mkdir(f->tmpdir, 0755) != 0 && errno != EEXIST)
    return ring__err(err, arc__errno_code(-errno), "mkdir %s: %s", f->tmpdir, strerror(errno));
  f->dfd = open(f->tmpdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (f->dfd < 0)
    return ring__err(err, RING_EIO, "%s: %s", f->tmpdir, strerror(errno));
  if (flock(f->dfd, LOCK_EX | LOCK_NB) != 0)
    return ring__err(err, RING_EBUSY, "%s: another fetch of this arc is running", f->tmpdir);
  DIR *d = fdopendir(dup(f->dfd));
  if (d == NULL)
    return ring__err(err, RING_EIO, "%s: %s", f->tmpdir, strerror(errno));
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    struct stat st;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (in_manifest(m, e->d_name) && fstatat(f->dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st.st_mode))
      continue;
    char p[sizeof f->tmpdir + 1 + 256];
    snprintf(p, sizeof p, "%s/%s", f->tmpdir, e->d_name);
    rc = arc__rmtree(p);
  }
  closedir(d);
  if (rc != 0)
    return ring__err(err, arc__errno_code(rc), "cleaning %s: %s", f->tmpdir, strerror(-rc));
  return RING_OK;
}

/* RING_ENOSPC now rather than after most of the bytes came. */
static int check_space(fetch *f, const arc_manifest *m, ring_error *err) {
  uint64_t need = 0;
  for (uint32_t i = 0; i < m->n_files; i++) {
    struct stat st;
    uint64_t have =
        fstatat(f->dfd, m->files[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (uint64_t)st.st_size : 0;
    need += have < m->files[i].size ? m->files[i].size - have : 0;
  }
  uint64_t avail = arc_store_free_bytes(f->store);
  if (avail < need)
    return ring__err(err, RING_ENOSPC,
                     "arc %" PRIu32 ": needs %" PRIu64 " more bytes, %" PRIu64 " free", f->token,
                     need, avail);
  return RING_OK;
}

/* ------------------------------------------------------------------ install */

/* Every file fsync()ed, then the directory, then the rename: an arc in
 * arcs/ is whole on disk. A file is reopened by name for its fsync (an arc
 * may have 65,536 files; they are not all kept open): a writeback error no
 * one has seen yet is reported to a descriptor opened after it (Linux
 * >= 4.16), and nothing reads these files' errors in between. */
static int fsync_files(fetch *f, const arc_manifest *m, ring_error *err) {
  for (uint32_t i = 0; i < m->n_files; i++) {
    const char *name = m->files[i].name;
    int fd = openat(f->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -errno;
    if (fd >= 0)
      close(fd);
    if (rc != 0)
      return ring__err(err, arc__errno_code(rc), "fsync %s/%s: %s", f->tmpdir, name, strerror(-rc));
  }
  return RING_OK;
}

static int install(fetch *f, const arc_manifest *m, ring_error *err) {
  int rc = fsync_files(f, m, err);
  if (rc == RING_OK && fsync(f->dfd) != 0)
    rc = ring__err(err, arc__errno_code(-errno), "fsync %s: %s", f->tmpdir, strerror(errno));
  if (rc != RING_OK) {
    f->untrusted = true;
    return rc;
  }
  return arc__install_dir(f->store, f->tmpdir, f->token, err);
}

/* After a failed fsync (or an I/O error) the temporary files are not
 * resumed: Linux reports a writeback error to one fsync, then keeps the
 * pages, clean, as if the disk had them. A later attempt would hash those
 * pages, find the checksum right, fsync without an error and install bytes
 * the disk never got. So they go, and the next attempt starts from
 * nothing. (A fetch that lost its connection, or was refused space by
 * write(2), keeps them: they are resumed.) */
static void discard_tmp(fetch *f) {
  if (f->untrusted) /* set only once tmpdir is made */
    arc__rmtree(f->tmpdir);
}

/* ------------------------------------------------------------------ the entry */

static int fetch_arc(fetch *f, const char *source, uint64_t version, ring_error *err) {
  int rc = setup_curl(f, source, err);
  arc_manifest m = {0};
  if (rc == RING_OK)
    rc = fetch_manifest(f, &m, err);
  if (rc == RING_OK && arc_store_has(f->store, f->token))
    rc = ring__err(err, RING_EEXIST, "arc %" PRIu32 ": already installed", f->token);
  if (rc == RING_OK)
    rc = prepare_tmp(f, version, &m, err);
  if (rc == RING_OK)
    rc = check_space(f, &m, err);
  for (uint32_t i = 0; rc == RING_OK && i < m.n_files; i++)
    rc = fetch_file(f, &m.files[i], err);
  if (rc == RING_OK)
    rc = install(f, &m, err);
  f->res.empty = rc == RING_OK && m.n_files == 0;
  if (rc != RING_OK)
    discard_tmp(f);
  arc_manifest_free(&m);
  return rc;
}

arc_fetcher *arc_fetcher_new(void) {
  pthread_once(&curl_once, curl_init_once);
  arc_fetcher *fx = calloc(1, sizeof *fx);
  if (fx == NULL)
    return NULL;
  arc__sink_init(&fx->sink);
  fx->curl = curl_easy_init();
  fx->h = XXH3_createState();
  if (fx->curl == NULL || fx->h == NULL) {
    arc_fetcher_free(fx);
    return NULL;
  }
  return fx;
}

void arc_fetcher_free(arc_fetcher *fx) {
  if (fx == NULL)
    return;
  curl_easy_cleanup(fx->curl);
  XXH3_freeState(fx->h);
  arc__sink_free(&fx->sink);
  free(fx);
}

int arc_fetch(arc_store *s, const char *source, uint32_t token, uint64_t version,
              const arc_fetch_opts *o, arc_fetch_result *res, ring_error *err) {
  if (s == NULL || source == NULL || o == NULL || o->keys == NULL || o->self_id == NULL ||
      o->source_id == NULL || token > ARC_TOKEN_MAX)
    return ring__err(err, RING_EINVAL,
                     "arc_fetch: bad argument (keys, self_id and source_id are required)");
  arc_fetcher *own = o->fetcher == NULL ? arc_fetcher_new() : NULL;
  arc_fetcher *fx = o->fetcher != NULL ? o->fetcher : own;
  fetch *f = fx != NULL ? calloc(1, sizeof *f) : NULL;
  if (f == NULL) {
    arc_fetcher_free(own);
    return ring__err(err, RING_ENOMEM, "arc_fetch: out of memory");
  }
  f->store = s;
  f->o = o;
  f->token = token;
  f->max_retries = o->max_retries ? o->max_retries : 3;
  f->dfd = f->fd = -1;
  f->curl = fx->curl;
  f->h = fx->h;
  f->sink = &fx->sink;
  int rc = fetch_arc(f, source, version, err);
  curl_easy_reset(fx->curl); /* it points into f (error buffer, headers) */
  if (res != NULL)
    *res = f->res;
  if (f->dfd >= 0)
    close(f->dfd); /* releases the flock */
  curl_slist_free_all(f->headers);
  free(f);
  arc_fetcher_free(own);
  return rc;
}
