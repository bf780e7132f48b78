/*
 * watch_hub.c: one watch stream per client and prefix, shared by the
 * watchers of a process (watch_hub.h).
 *
 * Why: a watcher per stream makes etcd encode and send every event once
 * per watcher, and the gateway does that work on the same cores as the
 * rest. 100 watchers on one client cost 100 streams; with a hub they cost
 * one, and the hub's thread hands each batch to every member in turn
 * (installing is cheap after the first: delta_cache.c builds a table once
 * per process). And the acks the members owe after one batch are written
 * together (the member's flush: one etcd txn per batch of acks), so a
 * process that speaks for many clients writes once per version, not once
 * per client.
 *
 * A round: under the hub's lock, each member hears the batch, unless it is
 * held elsewhere (its own start, which reads afresh after joining): then
 * it is marked `missed` and hears a fresh read when it is let go. What a
 * member leaves due (its ack) the round's flush writes, for all at once.
 * Members etcd failed are `owed`: after the round the hub's thread waits
 * out a backoff (monotonic clock; a closing hub cuts it short) and asks
 * them again, until they are done; each retry reads afresh, so what the
 * stream holds meanwhile is covered, and comes after. The thread never
 * spins and never sleeps with the lock held, so a member leaving waits at
 * most for one round.
 *
 * Ordering: a member joins (held), then the stream is started if it is
 * not yet ("created" before ring_etcd_watch returns), then the member reads
 * the version itself. Any change after that read is in a batch the stream
 * sends after the join: it reaches the member, or marks it missed. So
 * nothing is lost between the read and the stream, as with a stream of its
 * own started at the read's revision.
 *
 * Isolation: members of one hub share a thread. One whose on_table is slow
 * delays the others of the same client; a watcher that must not wait for
 * others asks for a stream of its own (ring_watcher_opts.own_stream).
 *
 * Locks: hubs.lock (the list and refs) is never held with a hub's lock
 * waited for; a hub's lock is held for a round; a member's busy is only
 * tried (never waited for) under the hub's lock, and held for one member's
 * hearing at a time, so no order can deadlock.
 */
#define _POSIX_C_SOURCE 200809L
#include "watch_hub.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef RING_HUB_BACKOFF_MIN_MS
#define RING_HUB_BACKOFF_MIN_MS 50L
#endif
#ifndef RING_HUB_BACKOFF_MAX_MS
#define RING_HUB_BACKOFF_MAX_MS 2000L
#endif
#define HUB_KEY_MAX 160

struct ring__hub {
  ring__hub *next; /* in hubs.head */
  ring_etcd *c;
  char key[HUB_KEY_MAX];
  size_t key_len;
  bool alone;                /* never found by another member */
  unsigned refs;             /* members joined or joining; hubs.lock */
  pthread_mutex_t lock;      /* members and their owed; held for a round */
  ring__hub_member *members; /* the list */
  pthread_mutex_t start;     /* held while the stream is started */
  ring_watch *watch;         /* NULL until started */
  pthread_mutex_t wait_lock; /* with wake and closing: the backoff pause */
  pthread_cond_t wake;
  bool closing;
};

static struct {
  pthread_mutex_t lock;
  ring__hub *head;
} hubs = {PTHREAD_MUTEX_INITIALIZER, NULL};

/* -------------------------------------------------------------- rounds */

/* Lets m go after it heard; one whose ack is due goes on the flush list.
 * A member is held only while it hears: a round never holds more than one
 * (what it leaves for the flush is in m->due, under the hub's lock). */
static void settle(ring__hub_member *m, ring__heard heard, ring__hub_member **flush) {
  m->owed = heard == RING__HEARD_RETRY;
  if (heard == RING__HEARD_FLUSH) {
    m->flush_next = *flush;
    *flush = m;
  }
  pthread_mutex_unlock(&m->busy);
}

/* Every member (only_owed: every member owed) hears the batch; then the
 * acks due are flushed. Returns whether any member is owed after it. */
static bool round_of(ring__hub *h, const ring_event *ev, uint32_t n, bool only_owed) {
  ring__hub_member *flush = NULL;
  bool owed = false;
  pthread_mutex_lock(&h->lock);
  for (ring__hub_member *m = h->members; m; m = m->next) {
    if (only_owed && !m->owed)
      continue;
    bool missed = atomic_exchange(&m->missed, true); /* before trying: see ring__hub_release */
    if (pthread_mutex_trylock(&m->busy) != 0)
      continue; /* held by its start: it hears a fresh read when let go */
    atomic_store(&m->missed, false);
    bool fresh = missed || m->owed; /* what it missed or failed, this batch cannot stand for */
    settle(m, m->heard(m, fresh ? NULL : ev, fresh ? 0 : n, true), &flush);
  }
  if (flush)
    flush->flush(h->c, flush);
  for (ring__hub_member *m = h->members; m; m = m->next)
    owed |= m->owed;
  pthread_mutex_unlock(&h->lock);
  return owed;
}

/* Sleeps ms unless the hub is closing; false when it is. */
static bool pause_unless_closing(ring__hub *h, long ms) {
  struct timespec until = ring__deadline_ms(ms);
  pthread_mutex_lock(&h->wait_lock);
  while (!h->closing && pthread_cond_timedwait(&h->wake, &h->wait_lock, &until) != ETIMEDOUT)
    ;
  bool open = !h->closing;
  pthread_mutex_unlock(&h->wait_lock);
  return open;
}

/* The stream's callback: a round, then retries of the owed with backoff.
 * A compaction or a progress notification makes every member read afresh. */
static int on_stream(void *ud, const ring_event *ev, uint32_t n, int64_t revision, bool compacted) {
  (void)revision;
  ring__hub *h = ud;
  bool owed = round_of(h, compacted ? NULL : ev, compacted ? 0 : n, false);
  long backoff = RING_HUB_BACKOFF_MIN_MS;
  while (owed && pause_unless_closing(h, backoff)) {
    owed = round_of(h, NULL, 0, true);
    backoff = backoff * 2 < RING_HUB_BACKOFF_MAX_MS ? backoff * 2 : RING_HUB_BACKOFF_MAX_MS;
  }
  return 0; /* the last member's leave stops the stream */
}

/* ------------------------------------------------------- joining, leaving */

static ring__hub *hub_new(ring_etcd *c, const char *key, size_t key_len, bool alone) {
  ring__hub *h = calloc(1, sizeof *h);
  if (h == NULL)
    return NULL;
  h->c = c;
  memcpy(h->key, key, key_len);
  h->key_len = key_len;
  h->alone = alone;
  pthread_mutex_init(&h->lock, NULL);
  pthread_mutex_init(&h->start, NULL);
  pthread_mutex_init(&h->wait_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->wake, &ca);
  pthread_condattr_destroy(&ca);
  return h;
}

static void hub_free(ring__hub *h) {
  pthread_mutex_lock(&h->wait_lock);
  h->closing = true; /* cuts a backoff pause short, so the cancel's join is prompt */
  pthread_cond_broadcast(&h->wake);
  pthread_mutex_unlock(&h->wait_lock);
  ring_watch_cancel(h->watch);
  pthread_cond_destroy(&h->wake);
  pthread_mutex_destroy(&h->wait_lock);
  pthread_mutex_destroy(&h->start);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

/* The hub for (c, key), found or made, with a reference for the caller. */
static ring__hub *hub_get(ring_etcd *c, const char *key, size_t key_len, bool alone) {
  pthread_mutex_lock(&hubs.lock);
  ring__hub *h = hubs.head;
  while (h && (alone || h->alone || h->c != c || h->key_len != key_len ||
               memcmp(h->key, key, key_len) != 0))
    h = h->next;
  if (h == NULL && (h = hub_new(c, key, key_len, alone)) != NULL) {
    h->next = hubs.head;
    hubs.head = h;
  }
  if (h)
    h->refs++;
  pthread_mutex_unlock(&hubs.lock);
  return h;
}

int ring__hub_join(ring_etcd *c, const char *key, size_t key_len, bool alone, ring__hub_member *m,
                   ring__hub **out, ring_error *err) {
  if (key_len >= HUB_KEY_MAX)
    return ring__err(err, RING_EINVAL, "watch key too long");
  ring__hub *h = hub_get(c, key, key_len, alone);
  if (h == NULL)
    return ring__err(err, RING_ENOMEM, "ring__hub_join");
  pthread_mutex_init(&m->busy, NULL);
  atomic_store(&m->missed, false);
  m->owed = false;
  pthread_mutex_lock(&m->busy);
  pthread_mutex_lock(&h->lock);
  m->next = h->members;
  h->members = m;
  pthread_mutex_unlock(&h->lock);
  int rc = RING_OK;
  pthread_mutex_lock(&h->start); /* the first starts it; one whose start failed, the next */
  if (h->watch == NULL)
    rc = ring_etcd_watch(c, h->key, h->key_len, true, 0, on_stream, h, &h->watch, err);
  pthread_mutex_unlock(&h->start);
  if (rc != RING_OK) {
    pthread_mutex_unlock(&m->busy);
    ring__hub_leave(h, m);
    return rc;
  }
  *out = h;
  return RING_OK;
}

/* A round that found m held marked it missed before trying its lock; so
 * after letting go, either we see the mark, or that round's try came after
 * our unlock and took m itself. A member etcd failed here stays marked:
 * the next round reads afresh for it. */
void ring__hub_release(ring__hub_member *m) {
  pthread_mutex_unlock(&m->busy);
  bool retry = false;
  while (!retry && atomic_load(&m->missed) && pthread_mutex_trylock(&m->busy) == 0) {
    if (atomic_exchange(&m->missed, false))
      retry = m->heard(m, NULL, 0, false) == RING__HEARD_RETRY;
    pthread_mutex_unlock(&m->busy);
  }
  if (retry)
    atomic_store(&m->missed, true);
}

void ring__hub_leave(ring__hub *h, ring__hub_member *m) {
  pthread_mutex_lock(&h->lock); /* no round uses m after it is off the list */
  ring__hub_member **pp = &h->members;
  while (*pp && *pp != m)
    pp = &(*pp)->next;
  if (*pp)
    *pp = m->next;
  pthread_mutex_unlock(&h->lock);
  pthread_mutex_destroy(&m->busy);
  pthread_mutex_lock(&hubs.lock);
  bool last = --h->refs == 0;
  if (last) {
    ring__hub **hp = &hubs.head;
    while (*hp != h)
      hp = &(*hp)->next;
    *hp = h->next;
  }
  pthread_mutex_unlock(&hubs.lock);
  if (last)
    hub_free(h);
}
