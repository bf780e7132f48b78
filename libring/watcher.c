/*
 * watcher.c: the live ring watcher (ring_etcd.h, section 6): follows
 * /ringkeeper/<cluster>/version and keeps the matching table in a ring_live.
 * It watches the prefix "version", which also holds version/delta: the
 * publish txn writes the new version's delta there, so the delta arrives
 * in the same watch response as the version and a watcher one version
 * behind installs it with no request (proto/etcd.md, "version/delta").
 *
 * Sections:
 *   1. the watcher's state; keys; logging
 *   2. reading from etcd: the version; values, read once per client
 *   3. installing one version: when exactly one behind, from the delta the
 *      watch carried, else from deltas/<v> (proto/delta.md); else (or when
 *      the delta is refused) from tables/<v>; validation; swap; callback
 *   4. following: catch up to the newest version, ack, retry with backoff
 *   5. the watch callback (what one response carries) and the public calls
 *
 * Threads: ring_watcher_start joins the client's hub for the cluster
 * (watch_hub.c: one stream and one thread per client and cluster, unless
 * own_stream) and installs the current table on the caller's thread (so
 * on_table first runs there); everything after runs on the hub's thread,
 * one version at a time per watcher, so the fields marked "watch thread"
 * need no lock (the hub holds a member while it hears anything). Acks are
 * left due and written by the hub's flush, together with the acks of the
 * client's other watchers (flush_acks). Counters are atomics, read by
 * ring_watcher_stats_get from any thread. While etcd is unreachable the
 * hub retries with backoff; the stream itself reconnects and resumes;
 * readers keep the last table all along. Errors etcd states (auth,
 * permissions) are logged and not retried until the next event, so a
 * watcher never spins on them.
 *
 * A restored etcd: while the client's history went back (etcd_history.c)
 * nothing is installed or acked and the table in service stays; each look
 * asks whether the operator's `recovered` record settled it (held_back).
 *
 * Memory: besides the table in service, a watcher holds its state (about
 * 0.5 KiB) and, while installing, the new table and what building it
 * takes: a fetched value (shared by the watchers of one client, below)
 * and its parse, at most a few times the table's size, freed as soon as
 * the new table is in. The watch's buffers are ring_etcd_watch's. A table
 * built from a delta is built once per process and shared by the watchers
 * that follow the same table (delta_cache.c), which keeps the last few.
 */
#define _POSIX_C_SOURCE 200809L
#include "delta_int.h"
#include "etcd_int.h"
#include "table_reads.h"
#include "watch_hub.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef RING_WATCHER_BACKOFF_MIN_MS
#define RING_WATCHER_BACKOFF_MIN_MS 50L
#endif
#ifndef RING_WATCHER_BACKOFF_MAX_MS
#define RING_WATCHER_BACKOFF_MAX_MS 2000L
#endif
#ifndef RING_WATCHER_START_TRIES
#define RING_WATCHER_START_TRIES 3 /* etcd errors ring_watcher_start rides out */
#endif
/* JSON nested deeper than this is refused before it is parsed: a table or
 * delta nests 5 deep, and the parsers recurse on the watch's small stack. */
#define NESTING_MAX 16
#define KEY_MAX 160 /* "/ringkeeper/" + cluster + "/tables/" + 16 digits, with room */

/* ---------------------------------------------- 1. state, keys, logging */

struct ring_watcher {
  ring_etcd *c;    /* borrowed: the caller closes it after stopping */
  ring_live *live; /* borrowed */
  char cluster[RING_ID_MAX + 1];
  char ack_id[RING_ID_MAX + 1]; /* "" without acks */
  char vkey[KEY_MAX];           /* "/ringkeeper/<cluster>/version", also the watch's prefix */
  char dkey[KEY_MAX];           /* ".../version/delta": the delta the publish txn carries */
  size_t vkey_len, dkey_len;    /* their lengths */
  ring_table_cb on_table;
  void *ud;
  ring_log_cb log; /* never NULL: the embedder's, or stderr_line */
  void *log_ud;
  ring__hub *hub;         /* the stream, shared with the client's other watchers */
  ring__hub_member m;     /* this watcher in the hub */
  _Atomic uint64_t acked; /* highest version acked (by the watcher, or the hub's flush) */
  uint64_t ack_due;       /* a version to leave for the hub's flush, or 0; watch thread */
  uint64_t refused;       /* last version refused, never fetched again; watch thread */
  bool held_back;         /* stopped following: etcd's history went back; watch thread */
  _Atomic bool stop;      /* set once by ring_watcher_stop */
  pthread_mutex_t lock;   /* with wake: the backoff sleep, cut short by stop */
  pthread_cond_t wake;
  _Atomic uint64_t swaps, deltas, rejected, errors; /* ring_watcher_stats */
};

/* Writes "/ringkeeper/<cluster>/<what>[<n>]" to key; returns its length. */
static size_t make_key(const ring_watcher *w, char *key, const char *what, uint64_t n) {
  char num[24] = "";
  if (n)
    snprintf(num, sizeof num, "%" PRIu64, n);
  int len = ring__key(key, KEY_MAX, w->cluster, what, num);
  return len > 0 ? (size_t)len : 0; /* the cluster name was checked to fit at creation */
}

/* The default log: one logfmt line on stderr, for an embedder that gave
 * no callback. */
static void stderr_line(void *ud, const ring_log_event *ev) {
  static const char *const names[] = {"info", "info", "warn", "error"};
  struct timespec ts;
  struct tm tm;
  char when[32], quoted[2 * RING_ERROR_MESSAGE_MAX];
  bool cut;
  (void)ud;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  ring__logfmt_put(ev->error, true, quoted, sizeof quoted, &cut);
  fprintf(stderr,
          "ts=%s.%03ldZ level=%s msg=\"%s\" cluster=%s version=%" PRIu64 " source=%s err=%s\n",
          when, ts.tv_nsec / 1000000L, names[ev->level <= RING_LOG_ERROR ? ev->level : 3], ev->msg,
          ev->cluster, ev->version, ev->source, quoted);
}

/* One event to the embedder's log (ring_watcher_opts.log). */
static void log_line(ring_log_level level, const char *msg, const ring_watcher *w, uint64_t version,
                     const char *source, const char *error) {
  ring_log_event ev = {level, msg, w->cluster, version, source, error ? error : ""};
  w->log(w->log_ud, &ev);
}

static void refuse(ring_watcher *w, uint64_t version, const char *source, const ring_error *err) {
  log_line(RING_LOG_WARN, "table refused", w, version, source, err->message);
  atomic_fetch_add(&w->rejected, 1); /* after the line: whoever sees the count finds it logged */
}

/* ---------------------------------------------------- 2. reading etcd */

/* Reads the version key: *version is 0 when it is absent or refused. */
static int read_version(ring_watcher *w, uint64_t *version, ring_error *err) {
  ring_kvs kvs;
  int rc = ring_etcd_range(w->c, w->vkey, w->vkey_len, NULL, &kvs, err);
  if (rc != RING_OK)
    return rc;
  *version = 0;
  if (kvs.n == 1 && ring__parse_version(kvs.kvs[0].value, kvs.kvs[0].value_len, version))
    ring_etcd_note_version(w->c, *version, kvs.revision);
  else if (kvs.n == 1) {
    ring_error bad;
    ring__err(&bad, RING_EVERSION, "version: value \"%.24s\" is not a version",
              kvs.kvs[0].value ? (const char *)kvs.kvs[0].value : "");
    refuse(w, 0, "version", &bad);
  }
  ring_kvs_clear(&kvs);
  return RING_OK;
}

/* Reads of tables/<v> and deltas/<v> by watchers that share a client are
 * joined while one is in flight: those values never change once written
 * (the coordinator writes each key once, in the txn that publishes the
 * version), so one reply serves every watcher that asks meanwhile, and
 * 100 watchers in a process cost etcd one read, not 100. A flight leaves
 * the list when its reply is in, so a later read goes to etcd again. */
typedef struct flight {
  struct flight *next; /* in flights.head while in the air */
  ring_etcd *c;
  char key[KEY_MAX];
  size_t key_len;
  unsigned refs; /* the reader and every joiner not yet done with it */
  bool done;     /* rc, err, value and len are set */
  int rc;
  ring_error err;
  char *value; /* malloc()'ed, NUL-terminated; NULL unless rc is RING_OK */
  size_t len;
  int64_t create_rev, mod_rev; /* the key's, as read */
} flight;

static struct {
  pthread_mutex_t lock;  /* guards head and every flight's refs, done and result */
  pthread_cond_t landed; /* broadcast when any flight is done */
  flight *head;
} flights = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};

static void flight_release(flight *f) {
  pthread_mutex_lock(&flights.lock);
  bool last = --f->refs == 0;
  pthread_mutex_unlock(&flights.lock);
  if (last) {
    free(f->value);
    free(f);
  }
}

/* Reads the flight's key from etcd into its result. */
static void flight_fly(flight *f) {
  ring_kvs kvs;
  f->rc = ring_etcd_range(f->c, f->key, f->key_len, NULL, &kvs, &f->err);
  if (f->rc != RING_OK)
    return; /* kvs holds nothing */
  if (kvs.n == 0) {
    f->rc = ring__err(&f->err, RING_ENOTFOUND, "%s: not found", f->key);
  } else {
    f->value = (char *)kvs.kvs[0].value; /* taken over */
    f->len = kvs.kvs[0].value_len;
    f->create_rev = kvs.kvs[0].create_revision;
    f->mod_rev = kvs.kvs[0].mod_revision;
    kvs.kvs[0].value = NULL;
    if (f->value == NULL && (f->value = calloc(1, 1)) == NULL) /* an empty value */
      f->rc = ring__err(&f->err, RING_ENOMEM, "%s", f->key);
  }
  ring_kvs_clear(&kvs);
}

/* Reads key "<what><v>" of w's cluster. On RING_OK *out holds the value
 * (f->value, f->len; read-only, shared) until flight_release(*out).
 * RING_ENOTFOUND when the key is absent; else an etcd error in err. */
static int read_shared(ring_watcher *w, const char *what, uint64_t v, flight **out,
                       ring_error *err) {
  char key[KEY_MAX];
  size_t key_len = make_key(w, key, what, v);
  pthread_mutex_lock(&flights.lock);
  flight *f = flights.head;
  while (f && !(f->c == w->c && f->key_len == key_len && memcmp(f->key, key, key_len) == 0))
    f = f->next;
  if (f != NULL) { /* join it */
    f->refs++;
    while (!f->done)
      pthread_cond_wait(&flights.landed, &flights.lock);
    pthread_mutex_unlock(&flights.lock);
  } else {
    pthread_mutex_unlock(&flights.lock);
    if ((f = calloc(1, sizeof *f)) == NULL)
      return ring__err(err, RING_ENOMEM, "%s", key);
    f->c = w->c;
    memcpy(f->key, key, key_len + 1);
    f->key_len = key_len;
    f->refs = 1;
    pthread_mutex_lock(&flights.lock);
    f->next = flights.head;
    flights.head = f;
    pthread_mutex_unlock(&flights.lock);
    flight_fly(f);
    pthread_mutex_lock(&flights.lock);
    flight **pp = &flights.head;
    while (*pp != f)
      pp = &(*pp)->next;
    *pp = f->next;
    f->done = true;
    pthread_cond_broadcast(&flights.landed);
    pthread_mutex_unlock(&flights.lock);
  }
  if (f->rc == RING_OK) {
    *out = f;
    return RING_OK;
  }
  int rc = ring__err(err, f->rc, "%s", f->err.message);
  flight_release(f);
  return rc;
}

/* Whether JSON text nests deeper than max (strings skipped). */
static bool too_deep(const char *p, size_t len, int max) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < len; i++) {
    char ch = p[i];
    if (in_string) {
      if (ch == '\\')
        i++;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if ((ch == '{' || ch == '[') && ++depth > max) {
      return true;
    } else if (ch == '}' || ch == ']') {
      depth--;
    }
  }
  return false;
}

/* ------------------------------------------------ 3. installing a version */

/* The table version v from a delta's bytes (value, len) applied to the
 * table in service. RING_OK with *out; RING_ENOTFOUND when the table in
 * service is not (or no longer) v-1; RING_EINVAL when the delta was refused
 * (logged, counted). */
static int apply_delta(ring_watcher *w, uint64_t v, const char *value, size_t len,
                       ring_table **out) {
  ring_error why = {0};
  int rc;
  if (too_deep(value, len, NESTING_MAX)) {
    rc = ring__err(&why, RING_EJSON, "nested deeper than %d", NESTING_MAX);
  } else {
    /* A reference to the base, and the read section is over: a swap
     * anywhere in the process waits for every open section, and building
     * (or waiting for another watcher of the process to build, the same
     * delta on the same table: delta_cache.c) takes far longer. */
    const ring_table *in = ring_live_enter(w->live);
    ring_table *base = in && ring_table_version(in) == v - 1 ? ring__table_ref(in) : NULL;
    ring_live_exit(w->live);
    rc = base ? ring__delta_apply_shared(base, value, len, out, &why) : RING_ENOTFOUND;
    ring_table_free(base);
  }
  if (rc == RING_ENOTFOUND) /* another writer swapped meanwhile: read the table */
    return rc;
  if (rc == RING_OK && ring_table_version(*out) != v) {
    rc = ring__err(&why, RING_EVERSION, "version: delta gives %" PRIu64 ", key is %" PRIu64,
                   ring_table_version(*out), v);
    ring_table_free(*out);
  }
  if (rc == RING_OK)
    return RING_OK;
  refuse(w, v, "delta", &why);
  return RING_EINVAL;
}

/* The table version v from deltas/<v> (read once per client, section 2).
 * As apply_delta; RING_ENOTFOUND also without a delta; else an etcd error. */
static int from_delta(ring_watcher *w, uint64_t v, ring_table **out, ring_error *err) {
  flight *f;
  int rc = read_shared(w, "deltas/", v, &f, err);
  if (rc != RING_OK)
    return rc;
  rc = apply_delta(w, v, f->value, f->len, out);
  flight_release(f);
  return rc;
}

/* A table kept by another watcher of the process (table_reads.c) for
 * tables/<v> as etcd holds it now: RING_OK with *out, RING_ENOTFOUND when
 * none is (or the key is gone), else an etcd error. id gets the key and
 * the etcd cluster id, for keeping what the caller reads instead. */
static int kept_table(ring_watcher *w, uint64_t v, ring__read_id *id, ring_table **out,
                      ring_error *err) {
  ring_etcd_history h;
  ring_etcd_history_get(w->c, &h);
  *id = (ring__read_id){.etcd = h.went_back ? 0 : h.cluster_id};
  id->key_len = make_key(w, id->key, "tables/", v);
  if (!ring__table_reads_known(id))
    return RING_ENOTFOUND;
  ring_range_opts ro = {.keys_only = true};
  ring_kvs kvs;
  int rc = ring_etcd_range(w->c, id->key, id->key_len, &ro, &kvs, err);
  if (rc != RING_OK)
    return rc;
  if (kvs.n == 1) {
    id->create_rev = kvs.kvs[0].create_revision;
    id->mod_rev = kvs.kvs[0].mod_revision;
  }
  ring_kvs_clear(&kvs);
  ring_table *t = id->mod_rev > 0 ? ring__table_reads_find(id) : NULL;
  if (t && (strcmp(ring_table_cluster(t), w->cluster) != 0 || ring_table_version(t) != v)) {
    ring_table_free(t); /* kept for another cluster's watcher: not ours */
    t = NULL;
  }
  *out = t;
  return t ? RING_OK : RING_ENOTFOUND;
}

/* The table version v from tables/<v>: another watcher's of the process
 * when it read the same value, else read (once per client, section 2) and
 * kept for the others. RING_OK with *out; RING_EINVAL when it was refused
 * (logged, counted); else an etcd error (RING_ENOTFOUND when the key is
 * absent). */
static int from_table(ring_watcher *w, uint64_t v, ring_table **out, ring_error *err) {
  ring__read_id id;
  int rc = kept_table(w, v, &id, out, err);
  if (rc != RING_ENOTFOUND)
    return rc;
  flight *f;
  if ((rc = read_shared(w, "tables/", v, &f, err)) != RING_OK)
    return rc;
  ring_error why = {0};
  ring_table *t = NULL;
  rc = too_deep(f->value, f->len, NESTING_MAX)
           ? ring__err(&why, RING_EJSON, "nested deeper than %d", NESTING_MAX)
           : ring_table_decode(f->value, f->len, &t, &why);
  id.create_rev = f->create_rev;
  id.mod_rev = f->mod_rev;
  flight_release(f);
  if (rc == RING_OK && strcmp(ring_table_cluster(t), w->cluster) != 0)
    rc = ring__err(&why, RING_EFIELD, "cluster: table is for \"%s\"", ring_table_cluster(t));
  else if (rc == RING_OK && ring_table_version(t) != v)
    rc = ring__err(&why, RING_EVERSION, "version: table says %" PRIu64 ", key is %" PRIu64,
                   ring_table_version(t), v);
  if (rc == RING_OK) {
    ring__table_reads_keep(&id, t);
    *out = t;
    return RING_OK;
  }
  ring_table_free(t);
  refuse(w, v, "table", &why);
  return RING_EINVAL;
}

/* Installs version v: swap, count, call back. carried: v's delta from the
 * watch response, or NULL. A carried delta that is refused is not read
 * again from deltas/<v> (the same txn wrote both): the table is. RING_OK
 * also when v was refused or something newer is already in service; else
 * an etcd error to retry (RING_ENOTFOUND: tables/<v> is missing). */
static int install(ring_watcher *w, uint64_t v, const ring_kv *carried, ring_error *err) {
  ring_table *t = NULL;
  bool delta = false;
  int rc = RING_ENOTFOUND;
  uint64_t have = ring_live_version(w->live);
  if (have > 0 && have == v - 1) {
    rc = carried ? apply_delta(w, v, carried->value ? (const char *)carried->value : "",
                               carried->value_len, &t)
                 : from_delta(w, v, &t, err);
    if (rc != RING_OK && rc != RING_ENOTFOUND && rc != RING_EINVAL)
      return rc; /* etcd trouble: retry later rather than fetch the whole table */
    delta = rc == RING_OK;
  }
  if (t == NULL && (rc = from_table(w, v, &t, err)) != RING_OK) {
    if (rc == RING_EINVAL)
      w->refused = v;
    return rc == RING_EINVAL ? RING_OK : rc;
  }
  if (ring_live_swap(w->live, t) != RING_OK) { /* someone installed a newer one */
    ring_table_free(t);
    return RING_OK;
  }
  atomic_fetch_add(&w->swaps, 1);
  if (delta)
    atomic_fetch_add(&w->deltas, 1);
  if (w->on_table) {
    const ring_table *now = ring_live_enter(w->live);
    w->on_table(w->ud, now);
    ring_live_exit(w->live);
  }
  return RING_OK;
}

/* ------------------------------------------------------- 4. following */

/* Raises w->acked to v (the watcher and the hub's flush both write it). */
static void acked_at_least(ring_watcher *w, uint64_t v) {
  uint64_t was = atomic_load(&w->acked);
  while (was < v && !atomic_compare_exchange_weak(&w->acked, &was, v))
    ;
}

/* The put of acks/<id> = v for w, written into key (KEY_MAX bytes) and
 * value (24). key_len is 0 only if the key did not fit, which the checks
 * of ring_watcher_start (ids of at most 63 bytes) rule out. */
static ring_op ack_op(const ring_watcher *w, uint64_t v, char *key, char *value) {
  int klen = ring__key(key, KEY_MAX, w->cluster, "acks/", w->ack_id);
  int vlen = snprintf(value, 24, "%" PRIu64, v);
  return (ring_op){.type = RING_OP_PUT,
                   .key = key,
                   .key_len = klen > 0 ? (size_t)klen : 0,
                   .value = value,
                   .value_len = (size_t)vlen};
}

static int put_op(ring_etcd *c, const ring_op *op, ring_error *err) {
  return ring_etcd_put(c, op->key, op->key_len, op->value, op->value_len, 0, NULL, NULL, err);
}

/* Writes acks/<id> = the version in service, if newer than the last ack;
 * defer: leaves it due (ack_due), for the hub's flush to write with the
 * acks of the client's other watchers (flush_acks). */
static int ack(ring_watcher *w, bool defer, ring_error *err) {
  uint64_t v = ring_live_version(w->live);
  if (w->ack_id[0] == '\0' || v <= atomic_load(&w->acked))
    return RING_OK;
  if (defer) {
    w->ack_due = v;
    return RING_OK;
  }
  char key[KEY_MAX], value[24];
  ring_op op = ack_op(w, v, key, value);
  if (op.key_len == 0)
    return ring__err(err, RING_EINVAL, "acks/%s: key too long", w->ack_id);
  int rc = put_op(w->c, &op, err);
  if (rc == RING_OK)
    acked_at_least(w, v);
  return rc;
}

/* Sleeps ms unless stopped first; false when stopped. */
static bool pause_unless_stopped(ring_watcher *w, long ms) {
  struct timespec until = ring__deadline_ms(ms);
  pthread_mutex_lock(&w->lock);
  while (!atomic_load(&w->stop) && pthread_cond_timedwait(&w->wake, &w->lock, &until) != ETIMEDOUT)
    ;
  pthread_mutex_unlock(&w->lock);
  return !atomic_load(&w->stop);
}

/* Errors worth retrying: etcd could not be reached or did not answer. */
static bool transient(int rc) {
  return rc == RING_ECONNECT || rc == RING_ETIMEDOUT || rc == RING_EUNKNOWN || rc == RING_EPROTO ||
         rc == RING_ENOMEM;
}

/* Whether etcd's history went back (etcd_history.c): then nothing is
 * installed or acked, so the table in service stays (the restored store
 * names older versions, or reuses their numbers for other tables), until
 * the operator's `recovered` record settles it (ring_etcd_history_resume).
 * Logs the change once each way. */
static bool held_back(ring_watcher *w) {
  if (!w->held_back && !ring__history_back(w->c))
    return false; /* the usual answer, without the history's lock */
  ring_etcd_history h;
  ring_etcd_history_get(w->c, &h);
  if (h.went_back && ring_etcd_history_resume(w->c, w->cluster, NULL, NULL) == RING_OK)
    ring_etcd_history_get(w->c, &h); /* the operator's `recovered` may have settled it */
  if (h.went_back != w->held_back) {
    char why[RING_HISTORY_WHY_MAX];
    ring_etcd_history_text(&h, why, sizeof why);
    log_line(h.went_back ? RING_LOG_ERROR : RING_LOG_INFO,
             h.went_back ? "watcher stopped following: etcd history went back"
                         : "watcher follows again: the restore was settled",
             w, ring_live_version(w->live), "history", why);
    w->held_back = h.went_back;
  }
  return h.went_back;
}

/* Brings the holder to the newest version and acks it (defer: ack()).
 * hint: a version seen in an event, or 0 to read the version key; carried:
 * hint's delta from the same event batch, or NULL (used on the first try
 * only). Retries etcd errors with backoff until stopped, or `tries` times
 * when tries > 0. Returns RING_OK or the last error. */
static int follow(ring_watcher *w, uint64_t hint, const ring_kv *carried, int tries, bool defer,
                  ring_error *err) {
  long backoff = RING_WATCHER_BACKOFF_MIN_MS;
  int rc = RING_OK;
  for (int attempt = 1; !atomic_load(&w->stop); attempt++) {
    uint64_t v = hint;
    rc = hint ? RING_OK : read_version(w, &v, err);
    if (rc == RING_OK && held_back(w))
      return RING_OK;
    if (rc == RING_OK && v > ring_live_version(w->live) && v != w->refused)
      rc = install(w, v, hint ? carried : NULL, err);
    if (rc == RING_ENOTFOUND && hint == 0) { /* the key names a table that is not there */
      refuse(w, v, "table", err);
      w->refused = v;
      rc = RING_OK;
    }
    if (rc == RING_OK)
      rc = ack(w, defer, err);
    if (rc == RING_OK)
      return RING_OK;
    hint = 0; /* after any trouble, read the version afresh: it may have moved on */
    if (rc == RING_ENOTFOUND)
      continue; /* a newer version replaced the table: no backoff */
    atomic_fetch_add(&w->errors, 1);
    if (!transient(rc)) { /* auth, permissions: waiting will not help; the next event retries */
      log_line(RING_LOG_ERROR, "etcd refused the watcher", w, v, "etcd", err->message);
      return rc;
    }
    if ((tries > 0 && attempt >= tries) || !pause_unless_stopped(w, backoff))
      return rc;
    backoff = backoff * 2 < RING_WATCHER_BACKOFF_MAX_MS ? backoff * 2 : RING_WATCHER_BACKOFF_MAX_MS;
  }
  return rc;
}

/* ------------------------------------------ 5. callback, public calls */

static bool is_put(const ring_event *ev, const char *key, size_t len) {
  return ev->type == RING_EVENT_PUT && ev->kv.key_len == len && memcmp(ev->kv.key, key, len) == 0;
}

/* The newest version put in a batch of events (0: none), and in *carried
 * the version/delta put at that version's revision (NULL: none). A delta
 * put at any other revision belongs to another txn, so it is not v's and
 * is never used. Other keys under the prefix are not the watcher's:
 * ignored. Deleted keys: keep serving what we have. */
static uint64_t scan(ring_watcher *w, const ring_event *events, uint32_t n,
                     const ring_kv **carried) {
  uint64_t newest = 0;
  int64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t v;
    if (!is_put(&events[i], w->vkey, w->vkey_len))
      continue;
    if (ring__parse_version(events[i].kv.value, events[i].kv.value_len, &v)) {
      if (v > newest) {
        newest = v;
        at = events[i].kv.mod_revision;
      }
      ring_etcd_note_version(w->c, v, events[i].kv.mod_revision); /* the history's rule */
    } else {
      refuse(w, 0, "version",
             &(ring_error){RING_EVERSION, "version: the key's new value is not a version"});
    }
  }
  *carried = NULL;
  for (uint32_t i = 0; i < n && newest > 0; i++)
    if (is_put(&events[i], w->dkey, w->dkey_len) && events[i].kv.mod_revision == at)
      *carried = &events[i].kv;
  return newest;
}

#define WATCHER_OF(mp) ((ring_watcher *)(void *)((char *)(mp)-offsetof(ring_watcher, m)))

/* What the hub hands the watcher (watch_hub.h): a batch of the stream's
 * events, or none (n == 0: read afresh). On the hub's thread (defer) one
 * try, its ack left due for the flush: the hub retries with backoff. On
 * the watcher's own thread, after starting: the start's tries. */
static ring__heard heard(ring__hub_member *m, const ring_event *events, uint32_t n, bool defer) {
  ring_watcher *w = WATCHER_OF(m);
  const ring_kv *carried = NULL;
  uint64_t newest = n ? scan(w, events, n, &carried) : 0;
  if (atomic_load(&w->stop) || (n > 0 && newest == 0)) /* other keys under the prefix */
    return RING__HEARD_DONE;
  ring_error err = {0};
  w->ack_due = 0;
  int rc = follow(w, newest, carried, defer ? 1 : RING_WATCHER_START_TRIES, defer, &err);
  if (rc == RING_OK &&
      w->ack_due != 0) { /* only when deferred: on the hub's thread, its lock held */
    m->due = w->ack_due;
    return RING__HEARD_FLUSH;
  }
  if (rc == RING_OK)
    return RING__HEARD_DONE;
  return transient(rc) ? RING__HEARD_RETRY : RING__HEARD_DONE;
}

#define ACK_BATCH 128 /* puts per txn: etcd's default --max-txn-ops */

/* Records how writing w's due ack (w->m.due) went. */
static void ack_done(ring_watcher *w, int rc, const ring_error *err) {
  if (rc == RING_OK)
    acked_at_least(w, w->m.due);
  else
    atomic_fetch_add(&w->errors, 1);
  if (rc != RING_OK && !transient(rc))
    log_line(RING_LOG_ERROR, "etcd refused the watcher", w, w->m.due, "etcd", err->message);
  w->m.owed = rc != RING_OK && transient(rc); /* auth, permissions: the next event retries */
  w->m.due = 0;
}

/* One txn (one put when alone) of the acks due on batch[0..n). A txn etcd
 * refuses as such (a --max-txn-ops below ACK_BATCH, a request size limit,
 * one key it will not take) is written again as a put each, so a refusal
 * holds up no other watcher's ack. */
static void ack_batch(ring_etcd *c, ring_watcher **batch, uint32_t n, ring_op *ops,
                      char (*keys)[KEY_MAX], char (*values)[24]) {
  for (uint32_t i = 0; i < n; i++)
    ops[i] = ack_op(batch[i], batch[i]->m.due, keys[i], values[i]);
  ring_error err = {0};
  int rc = RING_OK;
  bool apart = n == 1;
  if (!apart) {
    rc = ring_etcd_txn(c, NULL, 0, ops, n, NULL, 0, NULL, &err);
    apart = rc != RING_OK && !transient(rc);
  }
  for (uint32_t i = 0; i < n; i++)
    ack_done(batch[i], apart ? put_op(c, &ops[i], &err) : rc, &err);
}

/* Whether batch[0..n) already writes w's ack key (etcd refuses a txn that
 * names a key twice: two watchers with one ack id go in separate txns). */
static bool same_key_in(ring_watcher *const *batch, uint32_t n, const ring_watcher *w) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(batch[i]->ack_id, w->ack_id) == 0 && strcmp(batch[i]->cluster, w->cluster) == 0)
      return true;
  return false;
}

/* The hub's flush (watch_hub.h): the acks due of the client's watchers on
 * the list, in txns of up to ACK_BATCH puts, so a process that speaks for
 * many clients writes once per version and not once per client. */
static void flush_acks(ring_etcd *c, ring__hub_member *list) {
  ring_op *ops = malloc(ACK_BATCH * sizeof *ops);
  char(*keys)[KEY_MAX] = malloc(ACK_BATCH * sizeof *keys);
  char(*values)[24] = malloc(ACK_BATCH * sizeof *values);
  ring_watcher **batch = malloc(ACK_BATCH * sizeof *batch);
  for (bool more = true; more;) {
    uint32_t n = 0;
    more = false;
    for (ring__hub_member *m = list; m; m = m->flush_next) {
      ring_watcher *w = WATCHER_OF(m);
      if (m->due == 0)
        continue;
      if (!ops || !keys || !values || !batch) { /* out of memory: retried with backoff */
        m->owed = true;
        m->due = 0;
      } else if (n < ACK_BATCH && !same_key_in(batch, n, w)) {
        batch[n++] = w;
      } else {
        more = true;
      }
    }
    if (n > 0)
      ack_batch(c, batch, n, ops, keys, values);
  }
  free(batch);
  free(values);
  free(keys);
  free(ops);
}

static void watcher_free(ring_watcher *w) {
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  free(w);
}

static int check_opts(const ring_etcd *c, const ring_watcher_opts *o, const ring_live *live,
                      ring_watcher **out, ring_error *err) {
  if (c == NULL || o == NULL || live == NULL || out == NULL)
    return ring__err(err, RING_EINVAL, "ring_watcher_start: NULL argument");
  if (o->cluster == NULL || !ring_id_valid(o->cluster))
    return ring__err(err, RING_EINVAL, "cluster \"%.63s\" must match [a-z0-9._-]{1,63}",
                     o->cluster ? o->cluster : "");
  if (o->ack_id && *o->ack_id && !ring_id_valid(o->ack_id))
    return ring__err(err, RING_EINVAL, "ack_id \"%.63s\" must match [a-z0-9._-]{1,63}", o->ack_id);
  return RING_OK;
}

int ring_watcher_start(ring_etcd *c, const ring_watcher_opts *o, ring_live *live,
                       ring_watcher **out, ring_error *err) {
  int rc = check_opts(c, o, live, out, err);
  if (rc != RING_OK)
    return rc;
  ring_watcher *w = calloc(1, sizeof *w);
  if (w == NULL)
    return ring__err(err, RING_ENOMEM, "ring_watcher_start");
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->lock, NULL);
  w->c = c;
  w->live = live;
  strcpy(w->cluster, o->cluster);
  strcpy(w->ack_id, o->ack_id ? o->ack_id : "");
  w->on_table = o->on_table;
  w->ud = o->ud;
  w->log = o->log ? o->log : stderr_line;
  w->log_ud = o->log_ud;
  w->vkey_len = make_key(w, w->vkey, "version", 0);
  w->dkey_len = make_key(w, w->dkey, RING__VERSION_DELTA, 0);
  w->m.heard = heard;
  w->m.flush = flush_acks;
  /* The stream first (the prefix: version and version/delta; scan picks
   * them out), then the current table: a change after the read reaches
   * this watcher through the hub, held or not (watch_hub.c, "Ordering"). */
  rc = ring__hub_join(c, w->vkey, w->vkey_len, o->own_stream, &w->m, &w->hub, err);
  if (rc != RING_OK) {
    watcher_free(w);
    return rc;
  }
  uint64_t v = 0;
  for (int i = 1; (rc = read_version(w, &v, err)) != RING_OK && transient(rc) &&
                  i < RING_WATCHER_START_TRIES && pause_unless_stopped(w, 100L << i);
       i++)
    ;
  if (rc == RING_OK)
    rc = follow(w, v, NULL, RING_WATCHER_START_TRIES, false, err);
  if (rc != RING_OK)
    atomic_store(&w->stop, true); /* heard() does nothing from here on */
  ring__hub_release(&w->m);
  if (rc != RING_OK) {
    ring__hub_leave(w->hub, &w->m);
    watcher_free(w);
    return rc;
  }
  *out = w;
  return RING_OK;
}

void ring_watcher_stop(ring_watcher *w) {
  if (w == NULL)
    return;
  pthread_mutex_lock(&w->lock);
  atomic_store(&w->stop, true);
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->lock);
  ring__hub_leave(w->hub, &w->m); /* waits for a round in progress: none uses w after it */
  watcher_free(w);
}

bool ring_watcher_restored(ring_watcher *w, ring_etcd_history *out) {
  ring_etcd_history h;
  ring_etcd_history_get(w ? w->c : NULL, &h);
  if (out)
    *out = h;
  return h.went_back;
}

void ring_watcher_stats_get(ring_watcher *w, ring_watcher_stats *out) {
  if (w == NULL || out == NULL)
    return;
  *out = (ring_watcher_stats){.version = ring_live_version(w->live),
                              .swaps = atomic_load(&w->swaps),
                              .deltas = atomic_load(&w->deltas),
                              .rejected = atomic_load(&w->rejected),
                              .errors = atomic_load(&w->errors)};
}
