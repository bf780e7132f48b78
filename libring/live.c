/*
 * live.c: the live holder: the current table for lock-free readers.
 *
 * Read-copy-update with an epoch scheme of our own (C11 atomics, so that
 * ThreadSanitizer can check it; liburcu's membarrier-based fences are
 * invisible to it). Each reader thread owns one cache-line-sized record in
 * thread-local storage, linked into a global registry on its first read.
 *
 *   enter: record.epoch = global_epoch  (seq_cst store to its own line)
 *          table = holder.current       (seq_cst load)
 *   exit:  record.epoch = 0             (release store)
 *   swap:  holder.current = new; target = ++global_epoch;
 *          wait until every record's epoch is 0 or >= target; free old.
 *
 * Why it is safe: a reader that loaded the old pointer stored its epoch
 * before that load, and the load came before the writer's exchange in the
 * single seq_cst order, so the writer's scan sees an epoch < target and
 * waits for the reader's exit. A reader that enters later may still see the
 * old epoch value, which only makes the writer wait longer.
 *
 * Locking: registry.lock guards the registry list (threads arriving and
 * leaving, and writers scanning); a holder's write_lock orders its writers.
 * Readers take neither once registered.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "ring_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

typedef struct reader {
  _Alignas(64) _Atomic uint64_t epoch; /* 0 outside a section, else epoch at entry */
  unsigned nest;                       /* section depth; owner thread only */
  bool registered;                     /* linked in the registry; owner thread only */
  struct reader *next;                 /* registry list; guarded by registry.lock */
  struct reader *prev;                 /* registry list; guarded by registry.lock */
} reader;

static struct {
  pthread_mutex_t lock;      /* guards head and every reader's next/prev */
  reader *head;              /* registered readers */
  _Atomic uint64_t epoch;    /* starts at 1: a reader's 0 means "outside" */
  _Atomic uint64_t fallback; /* readers inside that could not register */
  pthread_key_t key;         /* thread exit -> unregister */
  pthread_once_t once;
  bool key_ok;
} registry = {PTHREAD_MUTEX_INITIALIZER, NULL, 1, 0, 0, PTHREAD_ONCE_INIT, false};

static _Thread_local reader self;

struct ring_live {
  _Atomic(ring_table *) current; /* the table readers see; NULL before the first swap */
  _Atomic uint64_t version;      /* current's version, readable without a section */
  pthread_mutex_t write_lock;    /* makes a swap's version check and exchange one step */
};

static void reader_unregister(void *arg) {
  reader *r = arg;
  atomic_store_explicit(&r->epoch, 0, memory_order_release);
  pthread_mutex_lock(&registry.lock);
  if (r->prev)
    r->prev->next = r->next;
  else
    registry.head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  pthread_mutex_unlock(&registry.lock);
  r->registered = false;
}

static void registry_init(void) {
  registry.key_ok = pthread_key_create(&registry.key, reader_unregister) == 0;
}

/* Links this thread's record so writers wait for it. Without a working
 * thread-exit hook the record would dangle, so then the thread reads
 * through the shared fallback counter instead. */
static void reader_register(reader *r) {
  pthread_once(&registry.once, registry_init);
  if (!registry.key_ok || pthread_setspecific(registry.key, r) != 0)
    return;
  pthread_mutex_lock(&registry.lock);
  r->prev = NULL;
  r->next = registry.head;
  if (registry.head)
    registry.head->prev = r;
  registry.head = r;
  pthread_mutex_unlock(&registry.lock);
  r->registered = true;
}

const ring_table *ring_live_enter(ring_live *l) {
  reader *r = &self;
  if (r->nest++ == 0) {
    if (!r->registered)
      reader_register(r);
    if (r->registered)
      atomic_store(&r->epoch, atomic_load(&registry.epoch));
    else
      atomic_fetch_add(&registry.fallback, 1);
  }
  return l ? atomic_load(&l->current) : NULL;
}

void ring_live_exit(ring_live *l) {
  (void)l;
  reader *r = &self;
  if (r->nest == 0 || --r->nest > 0)
    return;
  if (r->registered)
    atomic_store_explicit(&r->epoch, 0, memory_order_release);
  else
    atomic_fetch_sub(&registry.fallback, 1);
}

/* Readers hold sections for nanoseconds: spin briefly, then yield, then
 * sleep, so a writer stuck behind a slow reader does not burn a core. */
static void backoff(unsigned *spins) {
  if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (*spins < 256) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Waits until no reader can still hold a table unlinked before the call. */
static void synchronize(void) {
  const uint64_t target = atomic_fetch_add(&registry.epoch, 1) + 1;
  unsigned spins = 0;
  pthread_mutex_lock(&registry.lock);
  for (reader *r = registry.head; r != NULL; r = r->next) {
    for (;;) {
      uint64_t e = atomic_load(&r->epoch);
      if (e == 0 || e >= target)
        break;
      backoff(&spins);
    }
  }
  pthread_mutex_unlock(&registry.lock);
  while (atomic_load(&registry.fallback) != 0)
    backoff(&spins);
}

int ring_live_new(ring_live **out) {
  if (out == NULL)
    return RING_EINVAL;
  ring_live *l = calloc(1, sizeof *l);
  if (l == NULL)
    return RING_ENOMEM;
  if (pthread_mutex_init(&l->write_lock, NULL) != 0) {
    free(l);
    return RING_ENOMEM;
  }
  atomic_init(&l->current, NULL);
  atomic_init(&l->version, 0);
  *out = l;
  return RING_OK;
}

void ring_live_free(ring_live *l) {
  if (l == NULL)
    return;
  ring_table_free(atomic_load(&l->current));
  pthread_mutex_destroy(&l->write_lock);
  free(l);
}

int ring_live_swap(ring_live *l, ring_table *t) {
  if (l == NULL || t == NULL || !t->sealed)
    return RING_EINVAL;
  if (self.nest > 0)
    return RING_EBUSY;
  pthread_mutex_lock(&l->write_lock);
  ring_table *old = atomic_load(&l->current);
  if (old != NULL && t->version <= old->version) {
    pthread_mutex_unlock(&l->write_lock);
    return RING_ESTALE;
  }
  atomic_store(&l->current, t);
  atomic_store(&l->version, t->version);
  pthread_mutex_unlock(&l->write_lock);
  if (old != NULL) {
    synchronize();
    ring_table_free(old);
  }
  return RING_OK;
}

uint64_t ring_live_version(ring_live *l) { return l ? atomic_load(&l->version) : 0; }
