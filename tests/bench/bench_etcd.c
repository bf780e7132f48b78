/*
 * bench_etcd.c: libring against a real single-member etcd (started here on
 * loopback ports through tests/common/etcd_harness.h). Prints figures next
 * to the targets of issue 4; it never passes or fails on time.
 *
 * Sections:
 *   1. options, clock, percentiles, memory readings
 *   2. publishing versions the way the coordinator does (one txn)
 *   3. watch latency: a `version` put -> all watchers swapped, and memory
 *      per watcher; the same put -> all of as many bare watch streams
 *      received it (the floor etcd sets)
 *   4. ops/s: ring_etcd_put and ring_etcd_txn, sequential and 4 threads,
 *      next to etcdctl doing the same puts in the same run
 *
 * Latency: the clock starts just before the publish txn (tables/<v>,
 * deltas/<v>, version/delta and version in one request: the watchers get
 * the delta in the version's watch event) and stops, per watcher, in its
 * on_table callback, which runs right after the swap. "All swapped" is the
 * slowest watcher's time; p50/p99 are over versions. Versions are spaced
 * out (each waits until all watchers swapped the previous one), so every
 * watcher is one version behind and takes the delta.
 *
 * etcdctl: it is a command, so each put is a process start, a gRPC dial and
 * one request; a shell loop of `etcdctl put` is what a script gets, and is
 * bound by process start-up, not by etcd. It is measured sequentially and
 * as 4 loops in parallel (the counterpart of 4 client threads). There is no
 * batch mode in etcdctl for puts (`etcdctl txn` takes one txn per run), and
 * etcd's own `benchmark` tool is not packaged, so no spawn-free gRPC figure
 * is printed; see the ratio line's note.
 *
 *   bench_etcd [--quick] [--watchers N] [--versions N] [--ops N] [--tokens T]
 */
#include "etcd_harness.h" /* first: it defines _GNU_SOURCE */
#include "bench_stats.h"
#include "ring_etcd.h"
#include "test_cluster.h"
#include "test_tables.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>

/* ------------------------------------------------------------ 1. basics */

typedef struct options {
  int watchers, versions, ops, ctl_ops;
  uint32_t tokens;
  bool quick;
} options;

static options parse_options(int argc, char **argv) {
  options o = {100, 50, 5000, 200, 16384, false};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      o.quick = true;
      o.versions = 10, o.ops = 400, o.ctl_ops = 20;
    } else if (i + 1 < argc && strcmp(argv[i], "--watchers") == 0) {
      o.watchers = atoi(argv[++i]);
    } else if (i + 1 < argc && strcmp(argv[i], "--versions") == 0) {
      o.versions = atoi(argv[++i]);
    } else if (i + 1 < argc && strcmp(argv[i], "--ops") == 0) {
      o.ops = atoi(argv[++i]);
    } else if (i + 1 < argc && strcmp(argv[i], "--tokens") == 0) {
      o.tokens = (uint32_t)strtoul(argv[++i], NULL, 10);
    } else {
      fprintf(stderr,
              "usage: %s [--quick] [--watchers N] [--versions N] [--ops N] "
              "[--tokens T]\n",
              argv[0]);
      exit(2);
    }
  }
  if (o.watchers < 1 || o.watchers > 1000 || o.versions < 1 || o.versions > 10000 || o.ops < 4 ||
      o.ops > 1000000) {
    fprintf(stderr, "bench_etcd: option out of range\n");
    exit(2);
  }
  return o;
}

/* The q-quantile (nearest rank) of n values; sorts v. */
static double quantile(double *v, int n, double q) {
  bench_sort(v, (size_t)n);
  int k = (int)(q * n + 0.999999) - 1;
  return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* Resident set size in KiB, from /proc/self/status. */
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
      break;
  if (f)
    fclose(f);
  return kib;
}

/* Heap bytes in use (every malloc arena plus mmap()ed chunks). */
static double heap_bytes(void) {
  struct mallinfo2 m = mallinfo2();
  return (double)m.uordblks + (double)m.hblkhd;
}

static void die(const char *what, const ring_error *err) {
  fprintf(stderr, "bench_etcd: %s: %s\n", what, err ? err->message : "failed");
  exit(1);
}

/* ---------------------------------------------------- 2. publishing */

#define CLUSTER "bench"

typedef struct writer {
  ring_etcd *c;
  uint32_t tokens; /* T of the first table */
  ring_table *cur;
  uint64_t v;
  size_t table_bytes, delta_bytes; /* of the last publish */
} writer;

static ring_table *first_table(uint32_t tokens) {
  test_cluster c = cluster_make(12, 3);
  ring_plan_config cfg = {CLUSTER, tokens, 3, 0, "zone", NULL, 0, 0, 0, NULL, RING_BALANCE_TOKENS,
                          NULL};
  ring_plan *p;
  ring_table *t;
  ring_error err;
  if (ring_plan_compute(NULL, c.specs, c.n, &cfg, &p, &err) != RING_OK)
    die("plan", &err);
  if (ring_table_clone(ring_plan_target(p), 1, &t) != RING_OK || ring_table_seal(t, &err))
    die("first table", NULL);
  ring_plan_free(p);
  cluster_free(&c);
  return t;
}

/* The next version: a few tokens swap their first two replicas. */
static ring_table *next_table(const ring_table *prev, uint64_t v) {
  ring_table *t = test_table_swapped(prev, v, 8, 977, 131);
  if (t == NULL)
    die("next table", NULL);
  return t;
}

/* Publishes the next version in one txn: tables/<v>, deltas/<v>,
 * version/delta (the same delta, carried by the version's watch event) and
 * version, as the coordinator does.
 * *t0 and *t1 (if not NULL) receive the times just before the request and
 * when etcd acknowledged it (committed). */
static void publish_next(writer *w, double *t0, double *t1) {
  ring_table *t = w->cur ? next_table(w->cur, w->v + 1) : first_table(w->tokens);
  uint64_t v = ring_table_version(t);
  char tkey[96], dkey[96], vval[24];
  const char *vkey = "/ringkeeper/" CLUSTER "/version";
  const char *ckey = "/ringkeeper/" CLUSTER "/version/delta";
  snprintf(tkey, sizeof tkey, "/ringkeeper/" CLUSTER "/tables/%llu", (unsigned long long)v);
  snprintf(dkey, sizeof dkey, "/ringkeeper/" CLUSTER "/deltas/%llu", (unsigned long long)v);
  snprintf(vval, sizeof vval, "%llu", (unsigned long long)v);
  char *tj = NULL, *dj = NULL;
  size_t tl = 0, dl = 0;
  if (ring_table_encode(t, &tj, &tl) != RING_OK ||
      (w->cur && ring_delta_encode(w->cur, t, &dj, &dl) != RING_OK))
    die("encode", NULL);
  ring_op ops[4] = {{RING_OP_PUT, tkey, strlen(tkey), tj, tl, 0, false},
                    {RING_OP_PUT, vkey, strlen(vkey), vval, strlen(vval), 0, false},
                    {RING_OP_PUT, dkey, strlen(dkey), dj, dl, 0, false},
                    {RING_OP_PUT, ckey, strlen(ckey), dj, dl, 0, false}};
  ring_error err;
  if (t0)
    *t0 = harness_now();
  if (ring_etcd_txn(w->c, NULL, 0, ops, dj ? 4 : 2, NULL, 0, NULL, &err) != RING_OK)
    die("publish", &err);
  if (t1)
    *t1 = harness_now();
  free(tj);
  free(dj);
  ring_table_free(w->cur);
  w->cur = t;
  w->v = v;
  w->table_bytes = tl;
  w->delta_bytes = dl;
}

/* ------------------------------------------ 3. watch latency, memory */

typedef struct follower {
  ring_live *live;
  ring_watcher *w;
  double *swapped_at; /* per version, written by the callback before `called` */
  int n_versions;
  _Atomic uint64_t called; /* the last version called back */
} follower;

static void on_table(void *ud, const ring_table *t) {
  double now = harness_now();
  follower *f = ud;
  uint64_t v = ring_table_version(t);
  if (v >= 1 && v <= (uint64_t)f->n_versions)
    f->swapped_at[v - 1] = now;
  atomic_store_explicit(&f->called, v, memory_order_release);
}

static void wait_called(follower *f, int n, uint64_t v) {
  double end = harness_now() + 60;
  for (int i = 0; i < n; i++)
    while (atomic_load_explicit(&f[i].called, memory_order_acquire) < v) {
      if (harness_now() > end) {
        fprintf(stderr, "bench_etcd: watcher %d stuck below version %llu\n", i,
                (unsigned long long)v);
        exit(1);
      }
      harness_sleep_ms(1);
    }
}

/* Heap bytes one decoded table of this encoding takes. */
static double table_heap(const writer *w) {
  char *j;
  size_t jl;
  ring_table *t;
  ring_table_encode(w->cur, &j, &jl);
  double before = heap_bytes();
  if (ring_table_decode(j, jl, &t, NULL) != RING_OK)
    die("decode", NULL);
  double bytes = heap_bytes() - before;
  ring_table_free(t);
  free(j);
  return bytes;
}

/* A client of ec's member, or the benchmark ends. */
static ring_etcd *open_client(const etcd_cluster *ec) {
  ring_etcd_opts eo = {.endpoints = ec->endpoints};
  ring_etcd *c;
  ring_error err;
  if (ring_etcd_open(&eo, &c, &err))
    die("open", &err);
  return c;
}

/* Latency and memory of o->watchers watchers: all on one shared client
 * (whose reads of one delta or table are joined) or each on its own
 * client (each reads for itself, as separate processes would). */
static void bench_watchers(const options *o, const etcd_cluster *ec, bool shared_client) {
  ring_etcd *wc = open_client(ec);
  ring_error err;
  writer w = {wc, o->tokens, NULL, 0, 0, 0};
  publish_next(&w, NULL, NULL); /* version 1, read by every watcher as it starts */
  const int n = o->watchers, nv = o->versions + 1;
  follower *f = calloc((size_t)n, sizeof *f);
  ring_etcd **clients = calloc((size_t)n, sizeof *clients);
  double tbl = table_heap(&w);
  long rss0 = rss_kib();
  double heap0 = heap_bytes();
  double s0 = harness_now();
  for (int i = 0; i < n; i++) {
    clients[i] = shared_client && i > 0 ? clients[0] : open_client(ec);
    f[i].n_versions = nv;
    f[i].swapped_at = calloc((size_t)nv, sizeof *f[i].swapped_at);
    ring_watcher_opts wo = {.cluster = CLUSTER, .on_table = on_table, .ud = &f[i]};
    if (ring_live_new(&f[i].live) != RING_OK ||
        ring_watcher_start(clients[i], &wo, f[i].live, &f[i].w, &err) != RING_OK)
      die("ring_watcher_start", &err);
  }
  double started = harness_now() - s0;
  wait_called(f, n, 1);
  double *all = calloc((size_t)o->versions, sizeof *all);
  double *commit = calloc((size_t)o->versions, sizeof *commit);
  double *after = calloc((size_t)o->versions, sizeof *after);
  double *each = calloc((size_t)o->versions * (size_t)n, sizeof *each);
  for (int k = 0; k < o->versions; k++) {
    double t0, t1;
    publish_next(&w, &t0, &t1);
    wait_called(f, n, w.v);
    double worst = 0;
    for (int i = 0; i < n; i++) {
      double dt = f[i].swapped_at[w.v - 1] - t0;
      each[k * n + i] = dt;
      worst = dt > worst ? dt : worst;
    }
    all[k] = worst;
    commit[k] = t1 - t0;
    after[k] = t0 + worst - t1; /* events leave etcd with the commit; may be < 0 */
    harness_sleep_ms(o->quick ? 5 : 20);
  }
  long rss1 = rss_kib();
  double heap1 = heap_bytes();
  uint64_t deltas = 0, rejected = 0;
  for (int i = 0; i < n; i++) {
    ring_watcher_stats s;
    ring_watcher_stats_get(f[i].w, &s);
    deltas += s.deltas;
    rejected += s.rejected;
  }
  const int nvs = o->versions;
  double p50 = quantile(all, nvs, 0.50), p99 = quantile(all, nvs, 0.99);
  if (shared_client)
    printf("table: T=%u R=3, 12 nodes: %zu bytes encoded, %.0f KiB in memory; a delta of "
           "8 swapped tokens: %zu bytes\n",
           ring_table_tokens(w.cur), w.table_bytes, tbl / 1024, w.delta_bytes);
  printf("\n%d watchers, %s: started in %.0f ms; %llu of %d swaps by delta, %llu refused\n", n,
         shared_client ? "one shared client" : "one client each", started * 1000,
         (unsigned long long)deltas, n * nvs, (unsigned long long)rejected);
  printf("  version put -> all %d swapped (%d versions): p50 %6.1f ms  p99 %6.1f ms   "
         "(target p99 <= 50 ms: %s)\n",
         n, nvs, p50 * 1000, p99 * 1000, p99 <= 0.050 ? "met" : "MISSED");
  printf("    of which etcd committing the publish txn:  p50 %6.1f ms  p99 %6.1f ms\n",
         quantile(commit, nvs, 0.50) * 1000, quantile(commit, nvs, 0.99) * 1000);
  printf("    put acknowledged -> all swapped:          p50 %6.1f ms  p99 %6.1f ms\n",
         quantile(after, nvs, 0.50) * 1000, quantile(after, nvs, 0.99) * 1000);
  printf("  version put -> one watcher swapped:         p50 %6.1f ms  p99 %6.1f ms\n",
         quantile(each, nvs * n, 0.50) * 1000, quantile(each, nvs * n, 0.99) * 1000);
  double per = (double)(rss1 - rss0) / n;
  if (shared_client) /* the first run: later ones reuse what it freed, and read low */
    printf("  memory per watcher: RSS %+.0f KiB (%ld -> %ld KiB for %d), heap %+.0f KiB; "
           "table %.0f KiB   (target <= 1024 KiB + table = %.0f KiB: %s)\n",
           per, rss0, rss1, n, (heap1 - heap0) / 1024 / n, tbl / 1024, 1024 + tbl / 1024,
           per <= 1024 + tbl / 1024 ? "met" : "MISSED");
  for (int i = 0; i < n; i++) {
    ring_watcher_stop(f[i].w);
    ring_live_free(f[i].live);
    free(f[i].swapped_at);
  }
  for (int i = 0; i < (shared_client ? 1 : n); i++) /* after every watcher is stopped */
    ring_etcd_close(clients[i]);
  free(clients);
  free(f);
  free(all);
  free(commit);
  free(after);
  free(each);
  ring_table_free(w.cur);
  ring_etcd_close(wc);
}

/* The floor under "put acknowledged -> all swapped" with a client each:
 * the same number of bare watch streams (ring_etcd_watch, a client each),
 * whose callback only notes when the version's event arrived. What etcd
 * and its gateway take to push one event to n streams on this machine;
 * the watchers' figure above is this plus parsing, applying and swapping. */
typedef struct bare {
  double *seen_at; /* per version */
  int n_versions;
  _Atomic uint64_t last;
} bare;

static int on_bare(void *ud, const ring_event *ev, uint32_t n, int64_t revision, bool compacted) {
  (void)revision, (void)compacted;
  double now = harness_now();
  bare *b = ud;
  static const char vkey[] = "/ringkeeper/" CLUSTER "/version";
  for (uint32_t i = 0; i < n; i++) {
    if (ev[i].kv.key_len != sizeof vkey - 1 || memcmp(ev[i].kv.key, vkey, sizeof vkey - 1) != 0)
      continue;
    uint64_t v = strtoull((const char *)ev[i].kv.value, NULL, 10);
    if (v >= 1 && v <= (uint64_t)b->n_versions)
      b->seen_at[v - 1] = now;
    atomic_store_explicit(&b->last, v, memory_order_release);
  }
  return 0;
}

static void bench_bare_streams(const options *o, const etcd_cluster *ec) {
  ring_etcd *wc = open_client(ec);
  ring_error err;
  writer w = {wc, o->tokens, NULL, 0, 0, 0};
  publish_next(&w, NULL, NULL); /* version 1; each measured one carries a delta, as above */
  const int n = o->watchers, nv = o->versions + 1;
  bare *b = calloc((size_t)n, sizeof *b);
  ring_etcd **clients = calloc((size_t)n, sizeof *clients);
  ring_watch **watches = calloc((size_t)n, sizeof *watches);
  static const char prefix[] = "/ringkeeper/" CLUSTER "/version";
  for (int i = 0; i < n; i++) {
    b[i].n_versions = nv;
    b[i].seen_at = calloc((size_t)nv, sizeof *b[i].seen_at);
    clients[i] = open_client(ec);
    if (ring_etcd_watch(clients[i], prefix, sizeof prefix - 1, true, 0, on_bare, &b[i], &watches[i],
                        &err) != RING_OK)
      die("watch", &err);
  }
  double *after = calloc((size_t)o->versions, sizeof *after);
  for (int k = 0; k < o->versions; k++) {
    double t0, t1;
    publish_next(&w, &t0, &t1);
    double end = harness_now() + 60, worst = 0;
    for (int i = 0; i < n; i++) {
      while (atomic_load_explicit(&b[i].last, memory_order_acquire) < w.v && harness_now() < end)
        harness_sleep_ms(1);
      if (atomic_load_explicit(&b[i].last, memory_order_acquire) < w.v)
        die("a bare stream missed a version", NULL);
      double dt = b[i].seen_at[w.v - 1] - t1;
      worst = dt > worst ? dt : worst;
    }
    after[k] = worst;
    harness_sleep_ms(o->quick ? 5 : 20);
  }
  printf("\n%d bare watch streams, one client each (the floor under the line above):\n", n);
  printf("    put acknowledged -> all received:         p50 %6.1f ms  p99 %6.1f ms\n",
         quantile(after, o->versions, 0.50) * 1000, quantile(after, o->versions, 0.99) * 1000);
  for (int i = 0; i < n; i++) {
    ring_watch_cancel(watches[i]);
    ring_etcd_close(clients[i]);
    free(b[i].seen_at);
  }
  free(watches);
  free(clients);
  free(b);
  free(after);
  ring_table_free(w.cur);
  ring_etcd_close(wc);
}

/* ------------------------------------------------------------ 4. ops/s */

typedef struct op_run {
  ring_etcd *c;
  bool txn;
  int first, count;
  _Atomic int failed;
} op_run;

static void *op_main(void *arg) {
  op_run *r = arg;
  char value[101];
  memset(value, 'v', 100);
  value[100] = '\0';
  for (int i = r->first; i < r->first + r->count; i++) {
    char key[48];
    int kl = snprintf(key, sizeof key, "/bench/%s/%d", r->txn ? "txn" : "put", i % 1000);
    ring_error err;
    int rc;
    if (r->txn) {
      ring_cmp cmp = {key, (size_t)kl, RING_CMP_VERSION, RING_CMP_GT, -1, NULL, 0};
      ring_op put = {RING_OP_PUT, key, (size_t)kl, value, 100, 0, false};
      rc = ring_etcd_txn(r->c, &cmp, 1, &put, 1, NULL, 0, NULL, &err);
    } else {
      rc = ring_etcd_put(r->c, key, (size_t)kl, value, 100, 0, NULL, NULL, &err);
    }
    if (rc != RING_OK)
      atomic_fetch_add(&r->failed, 1);
  }
  return NULL;
}

/* ops/s of `ops` puts or txns over `threads` threads sharing client c. */
static double client_rate(ring_etcd *c, bool txn, int threads, int ops) {
  op_run runs[4];
  pthread_t th[4];
  double t0 = harness_now();
  for (int i = 0; i < threads; i++) {
    runs[i] = (op_run){c, txn, i * (ops / threads), ops / threads, 0};
    pthread_create(&th[i], NULL, op_main, &runs[i]);
  }
  int failed = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    failed += atomic_load(&runs[i].failed);
  }
  double dt = harness_now() - t0;
  if (failed)
    fprintf(stderr, "bench_etcd: %d of %d requests failed\n", failed, ops);
  return (ops / threads) * threads / dt;
}

/* ops/s of etcdctl doing `ops` puts (or txns) in `loops` parallel shell loops. */
static double etcdctl_rate(const etcd_cluster *ec, bool txn, int loops, int ops) {
  char cmd[1024];
  const int per = ops / loops;
  char body[640];
  if (txn) /* one txn per run: create-if-absent, like a coordinator's guarded put */
    snprintf(body, sizeof body,
             "printf 'create(\"/bench/ctltxn/'$l.$i'\") = \"0\"\\n\\n"
             "put /bench/ctltxn/'$l.$i' '$v'\\n\\n\\n' | etcdctl --endpoints=%s txn",
             ec->m[0].url);
  else
    snprintf(body, sizeof body, "etcdctl --endpoints=%s put /bench/ctl/$l.$i $v", ec->m[0].url);
  snprintf(cmd, sizeof cmd,
           "v=$(printf 'v%%.0s' $(seq 1 100)); export ETCDCTL_API=3; "
           "pids=; for l in $(seq 1 %d); do (for i in $(seq 1 %d); do %s >/dev/null 2>&1 || "
           "exit 1; done) & pids=\"$pids $!\"; done; rc=0; for p in $pids; do wait $p || rc=1; "
           "done; exit $rc",
           loops, per, body);
  double t0 = harness_now();
  int rc = system(cmd);
  double dt = harness_now() - t0;
  if (rc != 0) {
    fprintf(stderr, "bench_etcd: an etcdctl loop failed (%d)\n", rc);
    return 0;
  }
  return per * loops / dt;
}

static void bench_ops(const options *o, const etcd_cluster *ec) {
  ring_etcd *c = open_client(ec);
  client_rate(c, false, 1, 50); /* warm: the connection pool, etcd's caches */
  double put1 = client_rate(c, false, 1, o->ops), put4 = client_rate(c, false, 4, o->ops);
  double txn1 = client_rate(c, true, 1, o->ops), txn4 = client_rate(c, true, 4, o->ops);
  double ctl1 = etcdctl_rate(ec, false, 1, o->ctl_ops),
         ctl4 = etcdctl_rate(ec, false, 4, o->ctl_ops);
  double ctt1 = etcdctl_rate(ec, true, 1, o->ctl_ops);
  printf("ops/s, 100-byte values, one client (%d ops) | etcdctl (%d ops):\n", o->ops, o->ctl_ops);
  printf("  put, 1 thread:   ring_etcd_put %8.0f   etcdctl put %6.0f   ratio %6.1fx\n", put1, ctl1,
         put1 / ctl1);
  printf("  put, 4 threads:  ring_etcd_put %8.0f   etcdctl put %6.0f   ratio %6.1fx\n", put4, ctl4,
         put4 / ctl4);
  printf("  txn, 1 thread:   ring_etcd_txn %8.0f   etcdctl txn %6.0f   ratio %6.1fx\n", txn1, ctt1,
         txn1 / ctt1);
  printf("  txn, 4 threads:  ring_etcd_txn %8.0f\n", txn4);
  printf("  (target client >= 0.8x etcdctl: %s; etcdctl runs one process per request, so "
         "its figure is process start-up bound)\n",
         put1 >= 0.8 * ctl1 && put4 >= 0.8 * ctl4 && txn1 >= 0.8 * ctt1 ? "met" : "MISSED");
  ring_etcd_close(c);
}

int main(int argc, char **argv) {
  options o = parse_options(argc, argv);
  etcd_cluster ec;
  etcd_cluster_start(&ec, 1, NULL);
  if (o.tokens == 0 || o.tokens > RING_TOKENS_MAX)
    o.tokens = 16384;
  printf("bench_etcd: single etcd member on 127.0.0.1%s, data dir on %s\n",
         o.quick ? " (quick)" : "", ec.base);
  bench_watchers(&o, &ec, true);
  bench_watchers(&o, &ec, false);
  bench_bare_streams(&o, &ec);
  bench_ops(&o, &ec);
  etcd_cluster_stop(&ec);
  return 0;
}
