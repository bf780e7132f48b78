/*
 * state_cache.c: the cluster state kept by one watch (state_cache.h).
 *
 * Sections:
 *   1. the queue: what the watch's thread hands to the loop, bounded
 *   2. a full read, and the check of the cache against it
 *   3. a look
 *   4. life: new, watch, drop, free, stats
 *
 * Why a look is safe. A full read at revision R, then the watch's events
 * above R applied in revision order, is the store at the last revision
 * applied: etcd sends a revision's events together and in order, and the
 * watch starts before any full read (rk_cache_watch reads the revision
 * first and watches from the next), so nothing above R is missed; events at
 * or below R are dropped. A gap the client cannot bridge (compaction, a
 * restored etcd) comes as `compacted` and the cache reads whole. The queue
 * is bounded and never waits: past its bounds it is dropped and the next
 * look reads whole. A look never returns a state older than the caller's
 * own last write (rk_cache_wrote), and every write the coordinator makes
 * is fenced on the leader key and on the mod revisions it was computed
 * from, so a state that is behind can make a write fail its compare, never
 * land wrongly: the same guarantee as a full read that is stale by the
 * time the write arrives.
 */
#define _GNU_SOURCE /* pthread_condattr_setclock */
#include "state_cache.h"
#include "cluster_int.h"
#include "daemon.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct queued {
  ring_event ev; /* key and value owned by the queue */
  int part;      /* rk__parts index */
} queued;

struct rk_cache {
  char cluster[RING_ID_MAX + 1];
  char prefix[RK_KEY_MAX]; /* "/ringkeeper/<cluster>/" */
  size_t plen;

  pthread_mutex_t mu; /* guards the queue: q..seen */
  pthread_cond_t cv;  /* signalled when events arrive */
  queued *q;
  uint32_t nq, capq;
  size_t qbytes;
  bool armed;       /* events are queued: the cache is, or is being, built */
  int due;          /* a full read is due: its rk_resync_why; -1 none */
  int64_t seen;     /* the highest revision the watch passed while armed */
  uint64_t seen_ms; /* rd_now_ms when seen last moved (or the cache was armed) */
  ring_watch *watch;
  void (*wake)(void *);
  void *wake_ud;

  /* The loop's. */
  rk_state s;                    /* valid while `valid` */
  bool valid, ever;              /* ever: a state was built once (start vs dropped) */
  bool off;                      /* rk_cache_full_reads */
  int64_t wrote;                 /* the caller's last write's revision */
  uint64_t wrote_ms;             /* rd_now_ms when it was noted */
  uint64_t full_ms;              /* when the last full read was */
  uint64_t stamps;               /* the last rk_state.stamp given */
  uint64_t check_ms;             /* the periodic check's period (RK_CACHE_RESYNC_MS) */
  char corrupt[RING_ID_MAX + 1]; /* rk_cache_corrupt's node; "": none (done) */

  _Atomic uint64_t full[RK_RESYNC_KINDS], incremental, events, waits;
};

static const char *const why_names[RK_RESYNC_KINDS] = {
    "start",  "dropped", "no_watch", "compacted", "overflow", "gap",
    "behind", "error",   "periodic", "diverged",  "off"};

const char *rk_resync_why_name(rk_resync_why why) {
  return (unsigned)why < RK_RESYNC_KINDS ? why_names[why] : "?";
}

/* ---------------------------------------------------------------- 1. the queue */

static void queued_free(queued *e) {
  free(e->ev.kv.key);
  free(e->ev.kv.value);
}

/* Empties the queue (mu held); a full read of reason `why` is due (-1: none). */
static void queue_clear(rk_cache *k, int why) {
  for (uint32_t i = 0; i < k->nq; i++)
    queued_free(&k->q[i]);
  k->nq = 0;
  k->qbytes = 0;
  if (why >= 0 && k->due < 0)
    k->due = why;
}

/* A copy of ev for the queue. A host value over its kind's cap is dropped
 * here as rd_host_pages drops it (value NULL, length kept); any other value
 * is kept, even empty, as a range returns it. */
static bool copy_event(queued *e, const ring_event *ev, int part) {
  const ring_kv *kv = &ev->kv;
  int host = rk__parts[part].host;
  bool keep = ev->type == RING_EVENT_PUT &&
              (host < 0 || kv->value_len <= rk_host_value_max((rk_host_kind)host));
  *e = (queued){.ev = {.type = ev->type, .kv = *kv}, .part = part};
  e->ev.kv.key = malloc(kv->key_len + 1);
  e->ev.kv.value = keep ? malloc(kv->value_len + 1) : NULL;
  if (e->ev.kv.key == NULL || (keep && e->ev.kv.value == NULL)) {
    queued_free(e);
    return false;
  }
  memcpy(e->ev.kv.key, kv->key, kv->key_len);
  e->ev.kv.key[kv->key_len] = '\0';
  if (keep) {
    if (kv->value_len > 0)
      memcpy(e->ev.kv.value, kv->value, kv->value_len);
    e->ev.kv.value[kv->value_len] = '\0';
  }
  return true;
}

/* Queues one event (mu held, armed); past a bound, or out of memory, the
 * queue is dropped and a full read is due. */
static void enqueue(rk_cache *k, const ring_event *ev, int part) {
  if (ev->kv.mod_revision < k->seen) {
    queue_clear(k, RK_RESYNC_GAP);
    return;
  }
  k->seen = ev->kv.mod_revision;
  size_t bytes = ev->kv.key_len + ev->kv.value_len;
  if (k->nq >= RK_CACHE_EVENTS_MAX || k->qbytes + bytes > RK_CACHE_BYTES_MAX) {
    queue_clear(k, RK_RESYNC_OVERFLOW);
    return;
  }
  if (k->nq == k->capq) {
    uint32_t cap = k->capq ? 2 * k->capq : 64;
    queued *more = realloc(k->q, (size_t)cap * sizeof *more);
    if (more == NULL) {
      queue_clear(k, RK_RESYNC_OVERFLOW);
      return;
    }
    k->q = more;
    k->capq = cap;
  }
  if (!copy_event(&k->q[k->nq], ev, part)) {
    queue_clear(k, RK_RESYNC_OVERFLOW);
    return;
  }
  k->nq++;
  k->qbytes += bytes;
}

/* The watch's callback: queue what the cache holds, wake the loop. */
static int on_events(void *ud, const ring_event *ev, uint32_t n, int64_t rev, bool compacted) {
  rk_cache *k = ud;
  pthread_mutex_lock(&k->mu);
  int64_t before = k->seen;
  if (k->armed && compacted)
    queue_clear(k, RK_RESYNC_COMPACTED), k->seen = rev - 1 < k->seen ? rev - 1 : k->seen;
  for (uint32_t i = 0; k->armed && !compacted && i < n; i++) {
    int part = rk__part_of(ev[i].kv.key, ev[i].kv.key_len, k->plen);
    if (part >= 0)
      enqueue(k, &ev[i], part);
    else if (ev[i].kv.mod_revision > k->seen)
      k->seen = ev[i].kv.mod_revision;
  }
  if (k->armed && n == 0 && !compacted && rev > k->seen)
    k->seen = rev; /* a progress notification: nothing up to rev */
  if (k->seen != before)
    k->seen_ms = rd_now_ms();
  pthread_cond_broadcast(&k->cv);
  pthread_mutex_unlock(&k->mu);
  if ((n > 0 || compacted) && k->wake != NULL)
    k->wake(k->wake_ud);
  return 0;
}

/* Takes the queue (mu held): *out gets its events, the queue is empty. */
static void queue_take(rk_cache *k, queued **out, uint32_t *n) {
  *out = k->q;
  *n = k->nq;
  k->q = NULL;
  k->nq = k->capq = 0;
  k->qbytes = 0;
}

static void taken_free(queued *q, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    queued_free(&q[i]);
  free(q);
}

/* Applies the events of q[from..n) with a revision in (after, upto] to s;
 * returns the index of the first one not applied (n when all were), or -1
 * after a failure (err says why; s must be dropped). */
static int64_t apply_range(rk_cache *k, rk_state *s, const queued *q, uint32_t from, uint32_t n,
                           int64_t after, int64_t upto, ring_error *err) {
  uint32_t i = from;
  for (; i < n && q[i].ev.kv.mod_revision <= upto; i++) {
    if (q[i].ev.kv.mod_revision <= after)
      continue;
    if (rk__state_apply(s, q[i].part, k->plen, &q[i].ev, err) != RING_OK)
      return -1;
    atomic_fetch_add(&k->events, 1);
  }
  return i;
}

/* ------------------------------------------- 2. a full read, and the check */

/* CLOCK_MONOTONIC (the condition's clock) ms from now. */
static struct timespec after_ms(uint64_t ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += (time_t)(ms / 1000);
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L)
    t.tv_sec++, t.tv_nsec -= 1000000000L;
  return t;
}

/* Waits (mu held) until the watch passed rev, or until a full read became
 * due, or until the watch passed no new revision for stall_ms, or after
 * cap_ms in all; returns whether it passed. */
static bool wait_seen(rk_cache *k, int64_t rev, uint64_t stall_ms, uint64_t cap_ms) {
  uint64_t now = rd_now_ms(), end = now + cap_ms, quiet_until = now + stall_ms;
  int64_t last = k->seen;
  while (k->seen < rev && k->due < 0 && k->armed && now < end) {
    struct timespec t = after_ms((quiet_until < end ? quiet_until : end) - now);
    pthread_cond_timedwait(&k->cv, &k->mu, &t);
    now = rd_now_ms();
    if (k->seen > last) { /* moving: the quiet window starts again */
      last = k->seen;
      quiet_until = now + stall_ms;
    } else if (now >= quiet_until) {
      break;
    }
  }
  return k->seen >= rev;
}

/* Appends what the watch queued since to *q (n entries). */
static void take_more(rk_cache *k, queued **q, uint32_t *n) {
  queued *more;
  uint32_t m;
  pthread_mutex_lock(&k->mu);
  queue_take(k, &more, &m);
  pthread_mutex_unlock(&k->mu);
  queued *all = m ? realloc(*q, (size_t)(*n + m) * sizeof *all) : *q;
  if (all == NULL) {
    taken_free(more, m); /* the check goes without them: it may report a lag */
    return;
  }
  memcpy(all + *n, more, (size_t)m * sizeof *more);
  free(more);
  *q = all;
  *n += m;
}

/* Whether the cache, moved up to fresh's revision by the events of *q,
 * holds what fresh holds. A watch lagging behind the read gets a second
 * of grace before a difference counts; a difference that stays is
 * counted (diverged) and logged at error. *q may grow. */
static void check_cache(rk_cache *k, const rk_state *fresh, queued **q, uint32_t *n) {
  ring_error err = {RING_OK, ""};
  char why[256] = "";
  int64_t at = apply_range(k, &k->s, *q, 0, *n, k->s.revision, fresh->revision, &err);
  bool same = at >= 0 && rk_state_diff(&k->s, fresh, why, sizeof why);
  if (!same && at >= 0) {
    pthread_mutex_lock(&k->mu);
    wait_seen(k, fresh->revision, 1000, 1000);
    pthread_mutex_unlock(&k->mu);
    take_more(k, q, n);
    at = apply_range(k, &k->s, *q, (uint32_t)at, *n, k->s.revision, fresh->revision, &err);
    same = at >= 0 && rk_state_diff(&k->s, fresh, why, sizeof why);
  }
  if (same)
    return;
  atomic_fetch_add(&k->full[RK_RESYNC_DIVERGED], 1);
  char rev[24];
  snprintf(rev, sizeof rev, "%" PRId64, fresh->revision);
  rd_log(RD_ERROR, "the cluster state cache differed from a full read: replaced", "revision", rev,
         "diff", at >= 0 ? why : err.message, NULL);
}

static void log_full(rk_resync_why why, const rk_state *s, uint64_t ms) {
  char rev[24], took[24];
  snprintf(rev, sizeof rev, "%" PRId64, s->revision);
  snprintf(took, sizeof took, "%" PRIu64, ms);
  rd_log(why == RK_RESYNC_PERIODIC || why == RK_RESYNC_OFF ? RD_DEBUG : RD_INFO,
         "full read of the cluster state", "why", rk_resync_why_name(why), "revision", rev, "ms",
         took, NULL);
}

/* Reads whole into k->s, then applies what the watch queued above the
 * read. A periodic read first checks the cache against it; any other
 * reason means the cache is not to be trusted, so there is nothing to
 * check. */
static int full_read(rk_cache *k, ring_etcd *c, rk_resync_why why, ring_error *err) {
  bool check = k->valid && why == RK_RESYNC_PERIODIC;
  pthread_mutex_lock(&k->mu);
  if (!check)
    queue_clear(k, -1);
  k->armed = k->watch != NULL;
  k->seen_ms = rd_now_ms();
  k->due = -1;
  pthread_mutex_unlock(&k->mu);
  atomic_fetch_add(&k->full[why], 1);
  uint64_t t0 = rd_now_ms();
  rk_state fresh;
  queued *q = NULL;
  uint32_t n = 0;
  int rc = rk_state_read(c, k->cluster, RK_READ_ALL, &fresh, err);
  take_more(k, &q, &n);
  if (rc == RING_OK && check)
    check_cache(k, &fresh, &q, &n);
  rk_state_free(&k->s);
  k->valid = false;
  if (rc == RING_OK) {
    k->s = fresh;
    k->s.stamp = ++k->stamps;
    k->full_ms = rd_now_ms();
    log_full(why, &fresh, k->full_ms - t0);
    if (apply_range(k, &k->s, q, 0, n, fresh.revision, INT64_MAX, err) < 0)
      rc = err->code;
  }
  taken_free(q, n);
  k->valid = k->ever = rc == RING_OK;
  if (rc != RING_OK) {
    rk_state_free(&k->s);
    pthread_mutex_lock(&k->mu);
    queue_clear(k, why); /* the next look reads whole again */
    pthread_mutex_unlock(&k->mu);
  }
  return rc;
}

/* ---------------------------------------------------------------- 3. a look */

/* Why this look must read whole, -1 when the cache serves it. Waits up to
 * RK_CACHE_CATCHUP_MS for the caller's own last write to come back, while
 * the watch is moving (wait_seen). */
static int full_why(rk_cache *k) {
  pthread_mutex_lock(&k->mu);
  int why = k->off ? RK_RESYNC_OFF : k->due;
  if (why < 0 && !k->valid)
    why = k->ever ? RK_RESYNC_DROPPED : RK_RESYNC_START;
  if (why < 0 && k->watch == NULL)
    why = RK_RESYNC_NO_WATCH;
  if (why < 0 && rd_now_ms() - k->full_ms >= k->check_ms)
    why = RK_RESYNC_PERIODIC;
  if (why < 0 && k->s.revision < k->wrote &&
      !wait_seen(k, k->wrote, RK_CACHE_WAIT_MS, RK_CACHE_WAIT_MS))
    why = k->due >= 0 ? k->due : RK_RESYNC_BEHIND;
  pthread_mutex_unlock(&k->mu);
  return why;
}

/* Moves the cache forward by what the watch queued; false when an event
 * could not be applied (a record the full read refuses, or memory): the
 * cache is dropped. */
static bool step_forward(rk_cache *k, ring_error *err) {
  queued *q = NULL;
  uint32_t n = 0;
  take_more(k, &q, &n);
  uint64_t before = atomic_load(&k->events);
  int64_t at = apply_range(k, &k->s, q, 0, n, k->s.revision, INT64_MAX, err);
  taken_free(q, n);
  if (atomic_load(&k->events) != before)
    k->s.stamp = ++k->stamps; /* the content moved: what was kept for the old stamp goes */
  if (at < 0) {
    rk_state_free(&k->s);
    k->valid = false;
  }
  return at >= 0;
}

/* rk_cache_corrupt's alteration, at a look served from the watch. */
static void corrupt_once(rk_cache *k) {
  rk_node *n = k->corrupt[0] != '\0' ? rk_state_node(&k->s, k->corrupt) : NULL;
  if (n == NULL)
    return;
  n->weight = n->weight * 2 + 1;
  k->s.stamp = ++k->stamps;
  rd_log(RD_WARN, "test knob: altered a cached record", "node", k->corrupt, NULL);
  k->corrupt[0] = '\0';
}

int rk_cache_look(rk_cache *k, ring_etcd *c, const rk_state **out, ring_error *err) {
  ring_error local = {RING_OK, ""};
  ring_error *e = err != NULL ? err : &local;
  int why = full_why(k), rc = RING_OK;
  if (why < 0 && step_forward(k, e))
    atomic_fetch_add(&k->incremental, 1), corrupt_once(k);
  else
    rc = full_read(k, c, why >= 0 ? (rk_resync_why)why : RK_RESYNC_ERROR, e);
  if (rc == RING_OK)
    *out = &k->s;
  return rc;
}

/* ------------------------------------------------------------------ 4. life */

int rk_cache_new(const char *cluster, rk_cache **out) {
  rk_cache *k = calloc(1, sizeof *k);
  if (k == NULL)
    return RING_ENOMEM;
  int len = rk_key(k->prefix, cluster, "");
  if (len < 0) {
    free(k);
    return RING_EINVAL;
  }
  k->plen = (size_t)len;
  snprintf(k->cluster, sizeof k->cluster, "%s", cluster);
  k->due = -1;
  k->check_ms = RK_CACHE_RESYNC_MS;
  pthread_mutex_init(&k->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&k->cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = k;
  return RING_OK;
}

/* Cancels the running watch, if any (never with mu held: the watch's
 * callback takes it). */
static void stop_watch(rk_cache *k) {
  pthread_mutex_lock(&k->mu);
  ring_watch *w = k->watch;
  k->watch = NULL;
  pthread_mutex_unlock(&k->mu);
  if (w != NULL)
    ring_watch_cancel(w);
}

void rk_cache_drop(rk_cache *k) {
  pthread_mutex_lock(&k->mu);
  k->armed = false;
  queue_clear(k, -1);
  k->due = -1;
  pthread_mutex_unlock(&k->mu);
  if (k->valid)
    rk_state_free(&k->s);
  k->valid = false;
}

int rk_cache_watch(rk_cache *k, ring_etcd *c, void (*wake)(void *), void *ud, ring_error *err) {
  stop_watch(k);
  rk_cache_drop(k);
  k->wake = wake;
  k->wake_ud = ud;
  ring_range_opts o = {.prefix = true, .count_only = true};
  ring_kvs r;
  int rc = ring_etcd_range(c, k->prefix, k->plen, &o, &r, err);
  if (rc != RING_OK)
    return rc;
  int64_t from = r.revision + 1; /* every full read from now on is at or above r.revision */
  ring_kvs_clear(&r);
  ring_watch *w = NULL;
  rc = ring_etcd_watch(c, k->prefix, k->plen, true, from, on_events, k, &w, err);
  pthread_mutex_lock(&k->mu);
  k->watch = w;
  k->seen = from - 1;
  k->seen_ms = rd_now_ms();
  pthread_mutex_unlock(&k->mu);
  return rc;
}

bool rk_cache_watching(const rk_cache *k) { return k->watch != NULL; }

void rk_cache_wrote(rk_cache *k, int64_t revision) {
  if (revision > k->wrote) {
    k->wrote = revision;
    k->wrote_ms = rd_now_ms();
  }
}

bool rk_cache_catching_up(rk_cache *k, uint64_t *behind_ms) {
  if (!k->valid || k->off || k->s.revision >= k->wrote)
    return false;
  pthread_mutex_lock(&k->mu);
  bool back = wait_seen(k, k->wrote, RK_CACHE_WAIT_MS, RK_CACHE_WAIT_MS);
  uint64_t now = rd_now_ms();
  bool wait = !back && k->due < 0 && k->armed && k->watch != NULL &&
              now - k->seen_ms < RK_CACHE_STALL_MS && now - k->wrote_ms < RK_CACHE_CATCHUP_MS;
  pthread_mutex_unlock(&k->mu);
  if (wait)
    atomic_fetch_add(&k->waits, 1);
  if (wait && behind_ms != NULL)
    *behind_ms = now - k->wrote_ms;
  return wait;
}

const rk_state *rk_cache_held(const rk_cache *k) { return k->valid ? &k->s : NULL; }

void rk_cache_full_reads(rk_cache *k, bool on) { k->off = on; }

void rk_cache_check_soon(rk_cache *k) { k->full_ms = rd_now_ms() - k->check_ms; }

void rk_cache_check_every(rk_cache *k, uint64_t ms) {
  k->check_ms = ms != 0 ? ms : RK_CACHE_RESYNC_MS;
}

void rk_cache_corrupt(rk_cache *k, const char *id) {
  snprintf(k->corrupt, sizeof k->corrupt, "%s", id != NULL ? id : "");
}

void rk_cache_free(rk_cache *k) {
  if (k == NULL)
    return;
  stop_watch(k);
  rk_cache_drop(k);
  free(k->q);
  pthread_cond_destroy(&k->cv);
  pthread_mutex_destroy(&k->mu);
  free(k);
}

int64_t rk_cache_seen(rk_cache *k) {
  pthread_mutex_lock(&k->mu);
  int64_t seen = k->seen;
  pthread_mutex_unlock(&k->mu);
  return seen;
}

void rk_cache_stats_get(rk_cache *k, rk_cache_stats *out) {
  for (int i = 0; i < RK_RESYNC_KINDS; i++)
    out->full[i] = atomic_load(&k->full[i]);
  out->incremental = atomic_load(&k->incremental);
  out->events = atomic_load(&k->events);
  out->waits = atomic_load(&k->waits);
}
