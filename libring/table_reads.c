/*
 * table_reads.c: tables read from etcd, shared by the watchers of one
 * process (table_reads.h).
 *
 * A watcher that starts, or falls two versions behind, reads tables/<v>
 * whole: at T 65536 and 10,000 nodes that is 1.5 MB, 2 MB of JSON through
 * etcd's gateway, and about as much CPU again to parse and validate. Every
 * watcher of a process that starts on the same cluster reads the same
 * value. This keeps the last few tables read, so the next watcher asks
 * etcd only for the key's revisions (a keys-only read: no value) and, when
 * they match, takes a reference to the table already built.
 *
 * What proves a hit is the same table: etcd's MVCC gives a key one value
 * per (create revision, mod revision) within one etcd cluster's history,
 * so an entry is keyed by the etcd cluster id the replies carry, the key
 * and both revisions, and a hit needs a fresh keys-only read that returns
 * them. A history that went back (a restored etcd, etcd_history.c) could
 * reuse a revision for another value; the watcher follows nothing while
 * its client's history went back, and an unknown cluster id (0) never
 * matches. The table's own checks (cluster name, version) ran when it was
 * kept; the caller checks them again on a hit, which costs nothing.
 *
 * Bounds: READ_SLOTS entries, the least recently used replaced. Each holds
 * a reference to a table the watchers hold anyway while it is current.
 * Locking: reads.lock guards the slots, the tick and the counters; no
 * etcd call and no build runs under it.
 */
#define _POSIX_C_SOURCE 200809L
#include "table_reads.h"

#include <pthread.h>
#include <string.h>

#define READ_SLOTS 4 /* a few versions of a few clusters */

typedef struct slot {
  ring__read_id id;
  ring_table *table; /* a reference; NULL: the slot is free */
  uint64_t used;     /* reads.tick when kept or hit: the oldest is replaced */
} slot;

static struct {
  pthread_mutex_t lock;
  slot slots[READ_SLOTS];
  uint64_t tick;
  ring__table_reads_stats stats;
} reads = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool same_key(const ring__read_id *a, const ring__read_id *b) {
  return a->etcd == b->etcd && a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

bool ring__table_reads_known(const ring__read_id *id) {
  bool known = false;
  pthread_mutex_lock(&reads.lock);
  for (int i = 0; i < READ_SLOTS && !known && id->etcd != 0; i++)
    known = reads.slots[i].table != NULL && same_key(&reads.slots[i].id, id);
  pthread_mutex_unlock(&reads.lock);
  return known;
}

ring_table *ring__table_reads_find(const ring__read_id *id) {
  ring_table *t = NULL;
  pthread_mutex_lock(&reads.lock);
  for (int i = 0; i < READ_SLOTS && t == NULL && id->etcd != 0; i++) {
    slot *s = &reads.slots[i];
    if (s->table != NULL && same_key(&s->id, id) && s->id.create_rev == id->create_rev &&
        s->id.mod_rev == id->mod_rev) {
      t = ring__table_ref(s->table);
      s->used = ++reads.tick;
      reads.stats.hits++;
    }
  }
  pthread_mutex_unlock(&reads.lock);
  return t;
}

void ring__table_reads_keep(const ring__read_id *id, const ring_table *t) {
  if (id->etcd == 0 || id->mod_rev <= 0)
    return;
  ring_table *ref = ring__table_ref(t), *old = NULL;
  pthread_mutex_lock(&reads.lock);
  slot *s = &reads.slots[0];
  for (int i = 0; i < READ_SLOTS; i++) { /* the same key's entry, else a free or the oldest */
    slot *c = &reads.slots[i];
    if (c->table != NULL && same_key(&c->id, id)) {
      s = c;
      break;
    }
    if (s->table != NULL && (c->table == NULL || c->used < s->used))
      s = c;
  }
  old = s->table;
  s->id = *id;
  s->table = ref;
  s->used = ++reads.tick;
  reads.stats.kept++;
  pthread_mutex_unlock(&reads.lock);
  ring_table_free(old); /* outside the lock: the last reference frees a table */
}

void ring__table_reads_stats_get(ring__table_reads_stats *out) {
  pthread_mutex_lock(&reads.lock);
  *out = reads.stats;
  pthread_mutex_unlock(&reads.lock);
}

void ring__table_reads_clear(void) {
  ring_table *old[READ_SLOTS];
  pthread_mutex_lock(&reads.lock);
  for (int i = 0; i < READ_SLOTS; i++) {
    old[i] = reads.slots[i].table;
    reads.slots[i].table = NULL;
  }
  pthread_mutex_unlock(&reads.lock);
  for (int i = 0; i < READ_SLOTS; i++)
    ring_table_free(old[i]);
}
