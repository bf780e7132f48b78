/*
 * kv_load.c: ring-kv-load, a load generator for ring-kv (PROTOCOL.md,
 * "Load tool"). Threads share one kv_client; each operation is a GET
 * (with probability --read-ratio) or a PUT of a random key k<i>, i <
 * --keys, whose value is a function of i alone, so any later --verify
 * knows what every key must hold. Prints ops/s, p50/p99/p99.9 latency and
 * errors (per --interval too, for before/during/after comparisons).
 *
 *   --load    write k0..k<N-1> once each, then report
 *   --verify  read k0..k<N-1> back; exit 1 on any mismatch or error
 */
#define _GNU_SOURCE
#include "daemon.h"
#include "kv_client.h"
#include "ring.h"
#include "ring_etcd.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------- histogram */

/* Latencies in microseconds, log-linear: 64 sub-buckets per power of two
 * (under 1.6% error), up to 2^36 us. */
#define SUB 64
#define POWERS 36
typedef struct histo {
  uint64_t n[POWERS * SUB];
  uint64_t count;
} histo;

static void histo_add(histo *h, uint64_t us) {
  int p = 0;
  while (p < POWERS - 1 && us >= ((uint64_t)SUB << p))
    p++;
  uint64_t sub = p == 0 ? us : (us >> p);
  if (sub >= SUB)
    sub = SUB - 1;
  h->n[p * SUB + (int)sub]++;
  h->count++;
}

static uint64_t histo_quantile(const histo *h, double q) {
  uint64_t want = (uint64_t)ceil(q * (double)h->count), seen = 0;
  for (int i = 0; i < POWERS * SUB; i++) {
    seen += h->n[i];
    if (seen >= want && h->n[i])
      return (uint64_t)(i % SUB) << (i / SUB);
  }
  return 0;
}

static void histo_merge(histo *into, const histo *h) {
  for (int i = 0; i < POWERS * SUB; i++)
    into->n[i] += h->n[i];
  into->count += h->count;
}

/* ----------------------------------------------------------------- options */

typedef struct load_opts {
  rd_etcd_conf etcd; /* --endpoints, --user, --password-file, TLS */
  char *cluster, *mode;
  uint64_t keys, ops, duration_ms, value_size, threads, interval_ms, timeout_ms;
  double read_ratio;
  bool load, verify, no_follow;
} load_opts;

typedef enum { RUN_MIXED, RUN_LOAD, RUN_VERIFY } run_kind;

typedef struct worker {
  struct shared *sh;
  unsigned id;
  uint64_t rng;
  histo h;      /* this thread's latencies (merged at the end) */
  histo window; /* since the last interval line; guarded by sh->mu */
} worker;

typedef struct shared {
  load_opts o;
  run_kind kind;
  kv_client *c;
  atomic_uint_fast64_t next; /* the next key (load, verify) or op number (mixed) */
  atomic_uint_fast64_t done, errors, mismatches, not_found;
  atomic_bool stop;
  uint64_t end_ms;
  pthread_mutex_t mu; /* guards every worker's window */
} shared;

/* The value key i must hold: value_size bytes, "k<i>:" then a pattern. */
static void value_of(uint64_t i, uint8_t *buf, size_t len) {
  int n = snprintf((char *)buf, len, "k%" PRIu64 ":", i);
  for (size_t j = (size_t)(n < 0 ? 0 : n); j < len; j++)
    buf[j] = (uint8_t)('a' + (i * 31 + j * 7) % 26);
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* The next operation number for this worker, or UINT64_MAX when done. */
static uint64_t next_op(shared *sh) {
  if (atomic_load(&sh->stop))
    return UINT64_MAX;
  uint64_t i = atomic_fetch_add(&sh->next, 1);
  uint64_t limit = sh->kind == RUN_MIXED ? sh->o.ops : sh->o.keys;
  if ((limit && i >= limit) || (sh->end_ms && rd_now_ms() >= sh->end_ms))
    return UINT64_MAX;
  return i;
}

/* One operation; returns false when it failed. */
static bool one_op(shared *sh, worker *w, uint64_t op, uint8_t *buf, uint8_t *want) {
  uint64_t i = sh->kind == RUN_MIXED ? xorshift(&w->rng) % sh->o.keys : op;
  bool read =
      sh->kind == RUN_VERIFY ||
      (sh->kind == RUN_MIXED && (double)(xorshift(&w->rng) % 1000000) / 1e6 < sh->o.read_ratio);
  char key[32];
  int klen = snprintf(key, sizeof key, "k%" PRIu64, i);
  size_t vs = (size_t)sh->o.value_size;
  if (!read) {
    value_of(i, buf, vs);
    return kv_client_put(sh->c, key, (size_t)klen, buf, vs) == RING_OK;
  }
  uint8_t *got = NULL;
  size_t glen = 0;
  int rc = kv_client_get(sh->c, key, (size_t)klen, &got, &glen);
  bool ok = rc == RING_OK || (rc == RING_ENOTFOUND && sh->kind == RUN_MIXED);
  if (rc == RING_ENOTFOUND)
    atomic_fetch_add(&sh->not_found, 1);
  if (rc == RING_OK && sh->kind == RUN_VERIFY) {
    value_of(i, want, vs);
    if (glen != vs || memcmp(got, want, vs) != 0) {
      atomic_fetch_add(&sh->mismatches, 1);
      fprintf(stderr, "mismatch: %s holds %zu bytes \"%.*s...\"\n", key, glen,
              (int)(glen < 24 ? glen : 24), (const char *)got);
    }
  } else if (rc != RING_OK && sh->kind == RUN_VERIFY) {
    fprintf(stderr, "verify: %s: %s\n", key, ring_strerror(rc));
  }
  free(got);
  return ok;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  shared *sh = w->sh;
  uint8_t *buf = malloc(sh->o.value_size + 1), *want = malloc(sh->o.value_size + 1);
  for (uint64_t op; buf && want && (op = next_op(sh)) != UINT64_MAX;) {
    uint64_t t0 = now_us();
    bool ok = one_op(sh, w, op, buf, want);
    uint64_t us = now_us() - t0;
    histo_add(&w->h, us);
    pthread_mutex_lock(&sh->mu);
    histo_add(&w->window, us);
    pthread_mutex_unlock(&sh->mu);
    atomic_fetch_add(ok ? &sh->done : &sh->errors, 1);
  }
  free(buf);
  free(want);
  return NULL;
}

/* ------------------------------------------------------------------ report */

static void print_line(const char *what, double secs, uint64_t ops, uint64_t errors,
                       const histo *h) {
  printf("%s ops=%" PRIu64 " errors=%" PRIu64 " secs=%.2f ops_per_sec=%.0f p50_us=%" PRIu64
         " p99_us=%" PRIu64 " p999_us=%" PRIu64 " max_bucket_us=%" PRIu64 "\n",
         what, ops, errors, secs, secs > 0 ? (double)ops / secs : 0.0, histo_quantile(h, 0.5),
         histo_quantile(h, 0.99), histo_quantile(h, 0.999), histo_quantile(h, 1.0));
  fflush(stdout);
}

/* Prints one interval line: the windows of every worker, emptied. */
static void interval_line(shared *sh, worker *w, unsigned n, double since_start, double secs,
                          uint64_t *last_ops, uint64_t *last_err) {
  histo *h = calloc(1, sizeof *h);
  if (h == NULL)
    return;
  pthread_mutex_lock(&sh->mu);
  for (unsigned i = 0; i < n; i++) {
    histo_merge(h, &w[i].window);
    memset(&w[i].window, 0, sizeof w[i].window);
  }
  pthread_mutex_unlock(&sh->mu);
  uint64_t ops = atomic_load(&sh->done), err = atomic_load(&sh->errors);
  char what[48];
  snprintf(what, sizeof what, "interval t=%.1f", since_start);
  print_line(what, secs, ops - *last_ops, err - *last_err, h);
  *last_ops = ops, *last_err = err;
  free(h);
}

static rd_opt *opts_table(load_opts *o) {
  const rd_opt table[] = {
      {"cluster", RD_OPT_STRING, &o->cluster, 0, 0, "cluster name"},
      {"keys", RD_OPT_UINT, &o->keys, 1, 1e12, "keys k0..k<N-1>"},
      {"ops", RD_OPT_UINT, &o->ops, 0, 0, "operations in a mixed run (0: until --duration)"},
      {"duration", RD_OPT_MS, &o->duration_ms, 0, 0, "length of a mixed run, e.g. 30s"},
      {"read-ratio", RD_OPT_DOUBLE, &o->read_ratio, 0, 1, "share of GETs in a mixed run"},
      {"value-size", RD_OPT_UINT, &o->value_size, 16, 1048576, "bytes per value"},
      {"threads", RD_OPT_UINT, &o->threads, 1, 1024, "concurrent clients"},
      {"interval", RD_OPT_MS, &o->interval_ms, 0, 0, "print a line per interval (0: none)"},
      {"timeout", RD_OPT_MS, &o->timeout_ms, 100, 600000, "per operation, retries included"},
      {"load", RD_OPT_BOOL, &o->load, 0, 0, "write every key once"},
      {"verify", RD_OPT_BOOL, &o->verify, 0, 0, "read every key back; exit 1 on a mismatch"},
      {"no-follow", RD_OPT_BOOL, &o->no_follow, 0, 0,
       "re-read the table only when a server says it is stale"},
      {NULL, 0, NULL, 0, 0, NULL},
  };
  return rd_opts_with_etcd(&o->etcd, table);
}

static int run(shared *sh, const char *what) {
  unsigned n = (unsigned)sh->o.threads;
  worker *w = calloc(n, sizeof *w);
  pthread_t *th = calloc(n, sizeof *th);
  if (w == NULL || th == NULL) {
    free(w);
    free(th);
    return 1;
  }
  atomic_store(&sh->next, 0);
  atomic_store(&sh->done, 0);
  atomic_store(&sh->errors, 0);
  uint64_t t0 = rd_now_ms();
  sh->end_ms = sh->kind == RUN_MIXED && sh->o.duration_ms ? t0 + sh->o.duration_ms : 0;
  for (unsigned i = 0; i < n; i++) {
    w[i] = (worker){.sh = sh, .id = i, .rng = 0x9E3779B97F4A7C15ull * (i + 1)};
    pthread_create(&th[i], NULL, worker_main, &w[i]);
  }
  uint64_t last_ops = 0, last_err = 0, last_ms = t0;
  /* A mixed run bounded by --duration alone has no op count (ops is 0):
   * its end is the deadline. */
  uint64_t limit = sh->kind == RUN_MIXED ? (sh->o.ops ? sh->o.ops : UINT64_MAX) : sh->o.keys;
  while (sh->o.interval_ms && atomic_load(&sh->done) + atomic_load(&sh->errors) < limit) {
    if (sh->end_ms && rd_now_ms() >= sh->end_ms)
      break;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    uint64_t now = rd_now_ms();
    if (now - last_ms >= sh->o.interval_ms) {
      interval_line(sh, w, n, (double)(now - t0) / 1000, (double)(now - last_ms) / 1000, &last_ops,
                    &last_err);
      last_ms = now;
    }
  }
  histo *all = calloc(1, sizeof *all);
  for (unsigned i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    if (all)
      histo_merge(all, &w[i].h);
  }
  double secs = (double)(rd_now_ms() - t0) / 1000;
  if (all)
    print_line(what, secs, atomic_load(&sh->done), atomic_load(&sh->errors), all);
  free(all);
  free(w);
  free(th);
  return 0;
}

int main(int argc, char **argv) {
  static shared sh = {
      .o = {
          .keys = 10000, .read_ratio = 0.9, .value_size = 100, .threads = 8, .timeout_ms = 10000}};
  char msg[512];
  rd_opt *table = opts_table(&sh.o);
  if (table == NULL)
    return 1;
  int p = rd_opts_parse(argc, argv, "ring-kv-load: load and latency for ring-kv", table, msg,
                        sizeof msg);
  if (p == RD_OPTS_HELP)
    return (rd_opts_release(table), 0);
  if (p != RD_OPTS_ERROR && rd_etcd_check(&sh.o.etcd, msg, sizeof msg) != 0)
    p = RD_OPTS_ERROR;
  if (p == RD_OPTS_ERROR || !sh.o.cluster ||
      (!sh.o.load && !sh.o.verify && !sh.o.ops && !sh.o.duration_ms)) {
    fprintf(stderr, "ring-kv-load: %s\n",
            p == RD_OPTS_ERROR ? msg
                               : "--endpoints, --cluster and one of --load, --verify, --ops, "
                                 "--duration are required");
    rd_opts_release(table);
    return 2;
  }
  pthread_mutex_init(&sh.mu, NULL);
  ring_etcd *etcd = NULL;
  kv_client_opts co = {.cluster = sh.o.cluster,
                       .timeout_ms = (uint32_t)sh.o.timeout_ms,
                       .no_follow = sh.o.no_follow};
  if (rd_etcd_open(&sh.o.etcd, &etcd, msg, sizeof msg) != 0 ||
      (co.etcd = etcd, kv_client_open(&co, &sh.c, msg, sizeof msg)) != RING_OK) {
    fprintf(stderr, "ring-kv-load: %s\n", msg);
    ring_etcd_close(etcd);
    rd_opts_release(table);
    return 1;
  }
  printf("cluster=%s version=%" PRIu64 " keys=%" PRIu64 " value_size=%" PRIu64 " threads=%" PRIu64
         "\n",
         sh.o.cluster, kv_client_version(sh.c), sh.o.keys, sh.o.value_size, sh.o.threads);
  int rc = 0;
  uint64_t errors = 0;
  if (sh.o.load) {
    sh.kind = RUN_LOAD;
    rc |= run(&sh, "load");
    errors += atomic_load(&sh.errors);
  }
  if (sh.o.ops || sh.o.duration_ms) {
    sh.kind = RUN_MIXED;
    rc |= run(&sh, "mixed");
    errors += atomic_load(&sh.errors);
  }
  if (sh.o.verify) {
    sh.kind = RUN_VERIFY;
    rc |= run(&sh, "verify");
    errors += atomic_load(&sh.errors);
    printf("verify mismatches=%" PRIu64 " not_found=%" PRIu64 "\n", atomic_load(&sh.mismatches),
           atomic_load(&sh.not_found));
    if (atomic_load(&sh.mismatches) || atomic_load(&sh.errors))
      rc = 1;
  }
  kv_client_stats cs;
  kv_client_stats_get(sh.c, &cs);
  printf("client version=%" PRIu64 " stale_409=%" PRIu64 " misdirected_421=%" PRIu64
         " refreshes=%" PRIu64 " fallbacks=%" PRIu64 " retries=%" PRIu64 " errors=%" PRIu64 "\n",
         kv_client_version(sh.c), cs.stale, cs.misdirected, cs.refreshes, cs.fallbacks, cs.retries,
         errors);
  kv_client_close(sh.c);
  ring_etcd_close(etcd);
  rd_opts_release(table);
  return rc;
}
