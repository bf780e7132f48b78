/*
 * state_cache.h: a cluster's state kept current by one etcd watch on the
 * cluster's prefix, so that a look costs O(changed records) instead of a
 * full read (issue 18; proto/etcd.md, "The coordinator's cache").
 *
 * The cache holds an rk_state (cluster.h) as rk_state_read(RK_READ_ALL)
 * would return it. It is built by a full read and then moved forward by
 * the watch's events, each record judged by the full read's own parser
 * (cluster_int.h), so a cached state and a full read of the same store
 * revision are equal (rk_state_diff). It reads whole again, saying why:
 * at the first look and after rk_cache_drop (a new leader starts from a
 * full read), when etcd compacted past the watch, when the events queued
 * between two looks pass their bounds, when an event arrives out of
 * revision order, when its own last write has not come back through the
 * watch in time, when applying an event failed, and every
 * RK_CACHE_RESYNC_MS as a check that counts a divergence loudly.
 *
 * Threads: rk_cache_look, rk_cache_drop, rk_cache_wrote and rk_cache_free
 * belong to one thread (the coordinator's loop); the watch's thread only
 * queues; rk_cache_stats may be called from any thread.
 */
#ifndef RING_COORD_STATE_CACHE_H
#define RING_COORD_STATE_CACHE_H

#include "cluster.h"

/* Events queued between two looks, at most (count and bytes of keys and
 * values). A burst past either drops the queue and the next look reads
 * whole: memory stays bounded and the watch's thread never waits. 64 Ki
 * events is six per host at 10,000 hosts; a full read costs about as much
 * as applying that many. */
#define RK_CACHE_EVENTS_MAX 65536u
#define RK_CACHE_BYTES_MAX (64u << 20)

/* A full read this often, compared with the cache (a divergence is counted
 * and logged at error). Five minutes: at 10,000 hosts a full read is about
 * 0.1 s of CPU, so this costs 0.03% of a core, and a bug in the cache lives
 * at most this long. */
#define RK_CACHE_RESYNC_MS 300000u

/* How a look waits for the caller's own last write to come back through
 * the watch. A watch on loopback delivers in about a millisecond, but when
 * etcd is saturated (10,000 clients acking a version, each ack an event
 * the cluster watch carries) it lags by seconds while plainly moving, and
 * a full read then costs far more than waiting (0.7 s of CPU and a read
 * of every host record at 10,000 hosts; measured 12.6 s on that saturated
 * etcd) and lands no sooner. A stream that breaks is resumed by the watch
 * from its next revision, so nothing is lost by waiting; the full read is
 * the net for what cannot come (a write outside the prefix, a bug).
 *
 * So a look waits RK_CACHE_WAIT_MS at most; if the write is still not
 * back, rk_cache_catching_up tells the caller to skip the look (and come
 * back on the next event or tick) while the watch passed a new revision
 * within RK_CACHE_STALL_MS and the write is younger than
 * RK_CACHE_CATCHUP_MS; past those a look reads whole ("behind"). */
#define RK_CACHE_WAIT_MS 250u
#define RK_CACHE_STALL_MS 10000u
#define RK_CACHE_CATCHUP_MS 30000u

/* Why a look read whole (ring_coordinator_cache_resyncs_total{why}). */
typedef enum rk_resync_why {
  RK_RESYNC_START,     /* the first look */
  RK_RESYNC_DROPPED,   /* rk_cache_drop: leadership (re)gained, the watch restarted */
  RK_RESYNC_NO_WATCH,  /* no watch is running: every look reads whole */
  RK_RESYNC_COMPACTED, /* etcd compacted past the watch (or its history went back) */
  RK_RESYNC_OVERFLOW,  /* the queue passed RK_CACHE_EVENTS_MAX or RK_CACHE_BYTES_MAX */
  RK_RESYNC_GAP,       /* an event older than one already queued */
  RK_RESYNC_BEHIND, /* its own last write did not come back (RK_CACHE_STALL_MS, RK_CACHE_CATCHUP_MS)
                     */
  RK_RESYNC_ERROR,  /* applying an event failed (a record the full read refuses, memory) */
  RK_RESYNC_PERIODIC, /* the RK_CACHE_RESYNC_MS check */
  RK_RESYNC_DIVERGED, /* a check found the cache differed (counted besides periodic) */
  RK_RESYNC_OFF,      /* rk_cache_full_reads: every look reads whole (logged at debug) */
  RK_RESYNC_KINDS
} rk_resync_why;

/* "start", "dropped", "no_watch", "compacted", "overflow", "gap", "behind",
 * "error", "periodic", "diverged", "off". */
const char *rk_resync_why_name(rk_resync_why why);

typedef struct rk_cache_stats {
  uint64_t full[RK_RESYNC_KINDS]; /* full reads by why (diverged: checks that differed) */
  uint64_t incremental;           /* looks served from the cache */
  uint64_t events;                /* events applied */
  uint64_t waits;                 /* looks skipped: the watch was bringing the own write */
} rk_cache_stats;

typedef struct rk_cache rk_cache;

/* A cache for `cluster` (not yet watching). RING_OK with *out (rk_cache_free
 * it), RING_EINVAL for a bad name, RING_ENOMEM. */
int rk_cache_new(const char *cluster, rk_cache **out);
/* Cancels the watch and frees everything, including the state a look lent. */
void rk_cache_free(rk_cache *k);

/* Starts the cache's one watch on the cluster's prefix, from the store's
 * revision now + 1 (a count-only read first, so every full read after it
 * is covered without a gap); wake(ud) is called from the watch's thread on
 * every batch (the loop's waker). Restarting it drops the cache. Returns
 * the client's error, and the cache reads whole at every look until a
 * watch runs. */
int rk_cache_watch(rk_cache *k, ring_etcd *c, void (*wake)(void *), void *ud, ring_error *err);
bool rk_cache_watching(const rk_cache *k);

/* Forgets the state: the next look reads whole (why RK_RESYNC_DROPPED),
 * and no event is queued until then. Called when leadership ends, so a new
 * term starts from a full read. */
void rk_cache_drop(rk_cache *k);

/* Notes a write of the caller's that etcd applied at `revision` (a txn's
 * header revision): no look returns a state older than it. */
void rk_cache_wrote(rk_cache *k, int64_t revision);

/* Whether the caller should skip this look: the cache is behind the
 * caller's own last write (after waiting RK_CACHE_WAIT_MS for it), and the
 * watch is still moving and within its bounds (RK_CACHE_STALL_MS,
 * RK_CACHE_CATCHUP_MS). Counted in rk_cache_stats.waits. False when a look
 * would be served now, or must read whole. When true, *behind_ms (if not
 * NULL) is how long ago that write was made. */
bool rk_cache_catching_up(rk_cache *k, uint64_t *behind_ms);

/* The state the last look returned (lent as by rk_cache_look), or NULL
 * when the cache holds none: what a caller that skips a look (above) can
 * still show, at its revision. */
const rk_state *rk_cache_held(const rk_cache *k);

/* The cluster's state now: the cache moved forward by what the watch
 * queued, or a full read (logged with why). *out is lent until the next
 * look, rk_cache_drop or rk_cache_free; never free it. On failure (the
 * full read's error: etcd, or a control-plane record that does not parse)
 * *out is untouched and the next look reads whole again. (*out)->stamp is
 * new for every full read and every look that applied an event, and never
 * 0: what the caller computes from the state alone may be kept while the
 * stamp stays the same. */
int rk_cache_look(rk_cache *k, ring_etcd *c, const rk_state **out, ring_error *err);

/* on: every look reads whole (ring-coordinator --full-reads), as before the
 * cache: for comparison, and a way out should the cache misbehave. */
void rk_cache_full_reads(rk_cache *k, bool on);

/* Makes the next look the periodic check (a full read the cache is
 * compared with) without waiting for it: for tests. */
void rk_cache_check_soon(rk_cache *k);

/* Test knobs (only the test build ring-coordinator-faults sets them, from
 * its environment; tests/coordinator/test_coord_cache.c). rk_cache_check_every: the periodic check
 * every ms instead of RK_CACHE_RESYNC_MS (0: that again). rk_cache_corrupt: the first look served
 * from the watch that holds node `id`'s record alters that record's weight in the cache alone (etcd
 * keeps the true one), once, as a bug in the cache would; the look's state gets a new stamp. */
void rk_cache_check_every(rk_cache *k, uint64_t ms);
void rk_cache_corrupt(rk_cache *k, const char *id);

/* The highest revision the watch has passed while the cache was kept (0
 * before): how far the next look can reach without reading whole. */
int64_t rk_cache_seen(rk_cache *k);

void rk_cache_stats_get(rk_cache *k, rk_cache_stats *out);

#endif /* RING_COORD_STATE_CACHE_H */
