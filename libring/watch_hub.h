/*
 * watch_hub.h: one watch stream shared by the watchers of one client
 * (watch_hub.c). Internal to libring; watcher.c is its only user.
 */
#ifndef RING_WATCH_HUB_H
#define RING_WATCH_HUB_H

#include "etcd_int.h"

typedef struct ring__hub ring__hub;
typedef struct ring__hub_member ring__hub_member;

/* What hearing a batch left a member with. */
typedef enum ring__heard {
  RING__HEARD_DONE,  /* nothing more to do */
  RING__HEARD_FLUSH, /* its ack is due: the round's flush writes it */
  RING__HEARD_RETRY  /* etcd failed it: the hub asks again after a backoff */
} ring__heard;

/* Called with a batch of the stream's events, or with n == 0 (a progress
 * notification, compaction, a missed batch, a retry: read afresh). defer:
 * an ack may be left due (RING__HEARD_FLUSH, with m->due set) rather than
 * written. Runs with the member held, never two at once for one member. */
typedef ring__heard (*ring__hub_heard_fn)(ring__hub_member *m, const ring_event *events, uint32_t n,
                                          bool defer);
/* Writes the acks due (m->due) of the members on the list (linked by
 * flush_next; all of the hub's, under its lock but not held: a round
 * holds one member at a time); sets owed on each it could not write. */
typedef void (*ring__hub_flush_fn)(ring_etcd *c, ring__hub_member *list);

/* Embedded in a member; the hub's fields are its own. */
struct ring__hub_member {
  ring__hub_heard_fn heard;
  ring__hub_flush_fn flush;
  /* the hub's: */
  ring__hub_member *next;       /* in the hub's list */
  ring__hub_member *flush_next; /* in one round's flush list */
  uint64_t due;                 /* what heard left for the flush; under the hub's lock */
  pthread_mutex_t busy;         /* held while the member hears anything */
  _Atomic bool missed;          /* a batch arrived while it was held elsewhere */
  bool owed;                    /* etcd failed it; retried by the hub's thread */
};

/* Joins the hub watching the prefix key of client c (alone: a hub of its
 * own, shared with no one), starting its stream if it is the first. On
 * return m is held: the caller reads what it needs, then calls
 * ring__hub_release. Every batch the stream sends after the return, and
 * after the stream's "created", reaches m. Fails (leaving nothing) when no
 * stream could be started. */
int ring__hub_join(ring_etcd *c, const char *key, size_t key_len, bool alone, ring__hub_member *m,
                   ring__hub **out, ring_error *err);
/* Lets go of m after the caller's own reading; hears what it missed meanwhile. */
void ring__hub_release(ring__hub_member *m);
/* Leaves; the last member stops the stream and frees the hub. Not from a
 * callback of the hub's own thread. Waits for a round in progress. */
void ring__hub_leave(ring__hub *h, ring__hub_member *m);

#endif /* RING_WATCH_HUB_H */
