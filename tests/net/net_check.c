/*
 * net_check.c: the fleet's checker, as Jepsen's (tests/net/README.md).
 *
 *   net_check --endpoints E --cluster C --stop FILE [--writers N]
 *             [--keys-per-writer K] [--value-size B] [--watchers N]
 *             [--max-seconds S]
 *
 * Writers put rising sequence numbers to keys of their own through the
 * ring-kv client library (examples/kv/kv_client.h) and remember, per key,
 * the last sequence acknowledged and the last one sent. Watchers, each a
 * client of its own following the ring, sample the ring version their
 * client routes by and read the writers' keys: the version must only go
 * forward. Writers stop once FILE exists (the harness makes it after the
 * faults healed and the cluster settled) or at --max-seconds; then every
 * key must hold its last acknowledged value or a later one it was sent.
 *
 * Prints one line of counts (acked, failed, lost, versions_back,
 * reads_back) and exits 1 on any lost write or version gone back, 2 on a
 * usage error or a client that cannot open. A read going back is counted,
 * not failed: a write that was not acknowledged may sit on one replica
 * only, so a read may see it and a later read from another replica not.
 */
#define _GNU_SOURCE
#include "kv_client.h"
#include "ring.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WRITERS_MAX 64
#define WATCHERS_MAX 16
#define KEYS_MAX 4096 /* per writer */

typedef struct key_state {
  uint64_t acked; /* last sequence acknowledged (0: none) */
  uint64_t sent;  /* last sequence sent */
} key_state;

typedef struct opts {
  const char *endpoints, *cluster, *stop;
  unsigned writers, keys, value_size, watchers, max_seconds;
} opts;

typedef struct shared {
  opts o;
  atomic_bool stop;
  atomic_uint_fast64_t acked, failed, versions_back, reads_back, watch_reads;
  key_state (*keys)[KEYS_MAX]; /* [writer][key]; each writer its own row */
} shared;

typedef struct worker {
  shared *sh;
  unsigned id;
  kv_client *c;
} worker;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int key_of(unsigned writer, unsigned k, char *buf, size_t cap) {
  return snprintf(buf, cap, "net-w%u-k%u", writer, k);
}

/* Value "s<seq>:" padded to len bytes with a pattern of seq. */
static void value_of(uint64_t seq, uint8_t *buf, size_t len) {
  int n = snprintf((char *)buf, len, "s%" PRIu64 ":", seq);
  for (size_t j = (size_t)(n < 0 ? 0 : n); j < len; j++)
    buf[j] = (uint8_t)('a' + (seq * 31 + j * 7) % 26);
}

/* The sequence a value read back holds, 0 when it is no value of ours
 * (wrong form or length, or a pattern that does not match its number). */
static uint64_t seq_of(const uint8_t *v, size_t vlen, size_t want_len) {
  if (vlen != want_len || vlen < 3 || v[0] != 's')
    return 0;
  uint64_t seq = 0;
  size_t i = 1;
  for (; i < vlen && i < 21 && v[i] >= '0' && v[i] <= '9'; i++)
    seq = seq * 10 + (uint64_t)(v[i] - '0');
  if (i == 1 || i >= vlen || v[i] != ':')
    return 0;
  uint8_t *expect = malloc(vlen);
  if (!expect)
    return 0;
  value_of(seq, expect, vlen);
  bool same = memcmp(expect, v, vlen) == 0;
  free(expect);
  return same ? seq : 0;
}

static bool stop_now(shared *sh, double end) {
  return atomic_load(&sh->stop) || access(sh->o.stop, F_OK) == 0 || now_s() >= end;
}

static void *writer_main(void *arg) {
  worker *w = arg;
  shared *sh = w->sh;
  uint8_t *buf = malloc(sh->o.value_size);
  double end = now_s() + sh->o.max_seconds;
  uint64_t seq = 0;
  for (unsigned k = 0; buf && !stop_now(sh, end); k = (k + 1) % sh->o.keys) {
    char key[48];
    int klen = key_of(w->id, k, key, sizeof key);
    key_state *ks = &sh->keys[w->id][k];
    ks->sent = ++seq; /* rising over all the writer's keys, so per key too */
    value_of(seq, buf, sh->o.value_size);
    if (kv_client_put(w->c, key, (size_t)klen, buf, sh->o.value_size) == RING_OK) {
      ks->acked = seq;
      atomic_fetch_add(&sh->acked, 1);
    } else {
      atomic_fetch_add(&sh->failed, 1);
    }
  }
  free(buf);
  return NULL;
}

/* A watcher: its client's ring version only goes forward; its reads of a
 * key are counted when they go back. */
static void *watcher_main(void *arg) {
  worker *w = arg;
  shared *sh = w->sh;
  uint64_t last_v = 0, rng = 0x9e3779b97f4a7c15ull * (w->id + 1);
  uint64_t *seen = calloc((size_t)sh->o.writers * sh->o.keys, sizeof *seen);
  double end = now_s() + sh->o.max_seconds;
  while (seen && !stop_now(sh, end)) {
    uint64_t v = kv_client_version(w->c);
    if (v < last_v)
      atomic_fetch_add(&sh->versions_back, 1);
    last_v = v > last_v ? v : last_v;
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    unsigned wr = (unsigned)(rng % sh->o.writers), k = (unsigned)((rng >> 20) % sh->o.keys);
    char key[48];
    int klen = key_of(wr, k, key, sizeof key);
    uint8_t *val = NULL;
    size_t vlen = 0;
    if (kv_client_get(w->c, key, (size_t)klen, &val, &vlen) == RING_OK) {
      uint64_t s = seq_of(val, vlen, sh->o.value_size), *prev = &seen[wr * sh->o.keys + k];
      if (s && s < *prev)
        atomic_fetch_add(&sh->reads_back, 1);
      *prev = s > *prev ? s : *prev;
      atomic_fetch_add(&sh->watch_reads, 1);
      free(val);
    }
  }
  free(seen);
  return NULL;
}

/* Reads every key back: it must hold its last acknowledged sequence or a
 * later one sent. Returns how many do not; *unread those not read. */
static uint64_t verify_all(shared *sh, kv_client *c, uint64_t *unread) {
  uint64_t lost = 0;
  for (unsigned wr = 0; wr < sh->o.writers; wr++)
    for (unsigned k = 0; k < sh->o.keys; k++) {
      key_state *ks = &sh->keys[wr][k];
      if (!ks->sent)
        continue;
      char key[48];
      int klen = key_of(wr, k, key, sizeof key);
      uint8_t *val = NULL;
      size_t vlen = 0;
      int rc = kv_client_get(c, key, (size_t)klen, &val, &vlen);
      uint64_t s = rc == RING_OK ? seq_of(val, vlen, sh->o.value_size) : 0;
      free(val);
      if (rc != RING_OK && rc != RING_ENOTFOUND)
        (*unread)++;
      if (s < ks->acked || s > ks->sent) {
        lost++;
        fprintf(stderr,
                "net_check: %s holds s%" PRIu64 " (%s); acked s%" PRIu64 ", sent s%" PRIu64 "\n",
                key, s, ring_strerror(rc), ks->acked, ks->sent);
      }
    }
  return lost;
}

static int usage(void) {
  fprintf(stderr, "usage: net_check --endpoints E --cluster C --stop FILE [--writers N]\n"
                  "  [--keys-per-writer K] [--value-size B] [--watchers N] [--max-seconds S]\n");
  return 2;
}

static bool num_arg(const char *s, unsigned lo, unsigned hi, unsigned *out) {
  char *end;
  unsigned long v = strtoul(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi)
    return false;
  *out = (unsigned)v;
  return true;
}

static int parse(int argc, char **argv, opts *o) {
  *o = (opts){.writers = 4, .keys = 64, .value_size = 100, .watchers = 2, .max_seconds = 600};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *f = argv[i], *v = argv[i + 1];
    bool ok = true;
    if (!strcmp(f, "--endpoints"))
      o->endpoints = v;
    else if (!strcmp(f, "--cluster"))
      o->cluster = v;
    else if (!strcmp(f, "--stop"))
      o->stop = v;
    else if (!strcmp(f, "--writers"))
      ok = num_arg(v, 1, WRITERS_MAX, &o->writers);
    else if (!strcmp(f, "--keys-per-writer"))
      ok = num_arg(v, 1, KEYS_MAX, &o->keys);
    else if (!strcmp(f, "--value-size"))
      ok = num_arg(v, 24, 1 << 20, &o->value_size);
    else if (!strcmp(f, "--watchers"))
      ok = num_arg(v, 0, WATCHERS_MAX, &o->watchers);
    else if (!strcmp(f, "--max-seconds"))
      ok = num_arg(v, 1, 3600, &o->max_seconds);
    else
      ok = false;
    if (!ok)
      return fprintf(stderr, "net_check: bad option %s %s\n", f, v), -1;
  }
  return (argc % 2 == 1 && o->endpoints && o->cluster && o->stop) ? 0 : -1;
}

static int open_client(const opts *o, kv_client **c) {
  char msg[256];
  kv_client_opts co = {.endpoints = o->endpoints, .cluster = o->cluster, .timeout_ms = 5000};
  if (kv_client_open(&co, c, msg, sizeof msg) != RING_OK)
    return fprintf(stderr, "net_check: %s\n", msg), -1;
  return 0;
}

/* Starts n workers from `first` with fn; returns how many started. */
static unsigned start(shared *sh, worker *ws, pthread_t *ts, unsigned n, void *(*fn)(void *)) {
  unsigned i = 0;
  for (; i < n; i++) {
    ws[i] = (worker){.sh = sh, .id = i};
    if (open_client(&sh->o, &ws[i].c) != 0 || pthread_create(&ts[i], NULL, fn, &ws[i]) != 0) {
      kv_client_close(ws[i].c);
      atomic_store(&sh->stop, true);
      break;
    }
  }
  return i;
}

static void join_all(worker *ws, pthread_t *ts, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    pthread_join(ts[i], NULL);
    kv_client_close(ws[i].c);
  }
}

int main(int argc, char **argv) {
  static shared sh;
  if (parse(argc, argv, &sh.o) != 0)
    return usage();
  sh.keys = calloc(sh.o.writers, sizeof *sh.keys);
  static worker wws[WRITERS_MAX], vws[WATCHERS_MAX];
  static pthread_t wts[WRITERS_MAX], vts[WATCHERS_MAX];
  unsigned nw = sh.keys ? start(&sh, wws, wts, sh.o.writers, writer_main) : 0;
  unsigned nv = nw == sh.o.writers ? start(&sh, vws, vts, sh.o.watchers, watcher_main) : 0;
  join_all(wws, wts, nw);
  atomic_store(&sh.stop, true);
  join_all(vws, vts, nv);
  kv_client *c = NULL;
  if (nw != sh.o.writers || nv != sh.o.watchers || open_client(&sh.o, &c) != 0) {
    free(sh.keys);
    return 2;
  }
  uint64_t unread = 0, lost = verify_all(&sh, c, &unread);
  kv_client_close(c);
  uint64_t back = atomic_load(&sh.versions_back);
  printf("net_check: acked=%" PRIu64 " failed=%" PRIu64 " lost=%" PRIu64 " unread=%" PRIu64
         " versions_back=%" PRIu64 " reads_back=%" PRIu64 " watch_reads=%" PRIu64 "\n",
         (uint64_t)atomic_load(&sh.acked), (uint64_t)atomic_load(&sh.failed), lost, unread, back,
         (uint64_t)atomic_load(&sh.reads_back), (uint64_t)atomic_load(&sh.watch_reads));
  free(sh.keys);
  return lost || back ? 1 : 0;
}
