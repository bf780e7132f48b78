/*
 * bench_arc.c: moving arcs between two stores over loopback, unthrottled,
 * next to `cp -r` of the same files on the same disk in the same run, and
 * the process's peak RSS (server and fetchers share this process, so a
 * fetcher that buffered whole files would show here). Prints figures next
 * to the targets (>= 0.7x cp, <= 32 MiB RSS); it never passes or
 * fails on them.
 *
 *   bench_arc [--quick] [--dir DIR] [--threads N] [--rounds N]
 *
 * Default: 1 GiB in 256 arcs of 4 files, 3 rounds; --quick (the CI smoke
 * run): 64 MiB in the same 256 arcs, 1 round. DIR (default /tmp) holds
 * src/ and each round's cp<i>/, dst<i>/ and ceiling<i>/, and is removed
 * at the end.
 * The source is written and sync()ed first. Each round times
 * `cp -r src/arcs cp<i>/` (then the `sync` after it) and the fetch of
 * every arc from an arc server on 127.0.0.1 serving src/ into the new
 * store dst<i>/ (each file checksummed and fsync()ed, as the agent does),
 * by N threads (default 4: ring-agent's parallel fetches when the throttle
 * sets no moves_per_node, AGENT_WORKERS_DEFAULT), each with its own
 * arc_fetcher, sharing one unlimited limiter; cp goes first in odd rounds
 * and second in even ones. Both read a warm source (bench_warm). Rounds
 * are printed, then their medians: the cost of creating files drifts with
 * what was deleted in the last minutes (both sides pay it) and, on a VM,
 * with whether the host still backs the guest's free memory (cp's new
 * page-cache pages pay for that, the fetch's O_DIRECT writes do not), so
 * the median fetch is also set against cp's fastest round, the hardest
 * comparison. `cp -r + sync` is printed as well, since the fetch fsyncs
 * and cp does not, and so is the disk's ceiling for a durable copy of
 * these files (bench_disk.h): the same bytes written from memory by as
 * many threads, fsync()ed and renamed into place. A fetch cannot beat it;
 * where it is below 0.7x cp, no durable copy reaches the target, and the
 * ratio to the ceiling says how much of the disk the fetch uses.
 */
#define _GNU_SOURCE
#include "arc_int.h"
#include "bench_disk.h" /* and bench_stats.h */

#include <stdatomic.h>

#define ARCS 256u
#define FILES 4u
#define SECRET "bench-secret"

/* The keys of SECRET; every request is signed and every manifest
 * verified, as between agents. */
static arc_keyring *keys;

static uint32_t pin_self(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  if (pk == NULL)
    return 0; /* a failed pin: nothing to look at again here */
  (void)node;
  arc_keyring_public(ctx, pk[0]);
  return 1;
}

/* -------------------------------------------------------------- fetching */

typedef struct fetchers {
  arc_store *dst;
  const char *source;
  arc_limiter *lim;
  atomic_uint next; /* the next token to take */
  atomic_uint failures;
} fetchers;

static void *fetch_loop(void *p) {
  fetchers *w = p;
  arc_fetch_opts o = {.keys = keys,
                      .self_id = "dst",
                      .source_id = "src",
                      .limiter = w->lim,
                      .fetcher = arc_fetcher_new()};
  if (o.fetcher == NULL)
    bench_die("fetcher", "out of memory");
  for (uint32_t t; (t = atomic_fetch_add(&w->next, 1)) < ARCS;) {
    ring_error err;
    if (arc_fetch(w->dst, w->source, t, 1, &o, NULL, &err) != RING_OK) {
      fprintf(stderr, "bench_arc: arc %" PRIu32 ": %s\n", t, err.message);
      atomic_fetch_add(&w->failures, 1);
    }
  }
  arc_fetcher_free(o.fetcher);
  return NULL;
}

/* Wall seconds of the fetch; the process's CPU seconds in it in *cpu. */
static double fetch_all(arc_store *src, arc_store *dst, unsigned threads, double *cpu) {
  arc_server *srv;
  ring_error err;
  arc_server_opts so = {
      .listen = "127.0.0.1:0", .keys = keys, .node_id = "src", .open_to_all = true};
  if (arc_server_start(src, &so, &srv, &err) != RING_OK)
    bench_die("arc server", err.message);
  char source[64];
  snprintf(source, sizeof source, "127.0.0.1:%u", (unsigned)arc_server_port(srv));
  fetchers w = {.dst = dst, .source = source};
  arc_limiter_new(0, &w.lim);
  pthread_t th[BENCH_DISK_THREADS_MAX];
  double t0 = bench_now_s(), c0 = bench_cpu_s(RUSAGE_SELF);
  for (unsigned i = 0; i < threads; i++)
    if (pthread_create(&th[i], NULL, fetch_loop, &w) != 0)
      bench_die("fetch", "cannot start a thread");
  for (unsigned i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  double dt = bench_now_s() - t0;
  *cpu = bench_cpu_s(RUSAGE_SELF) - c0;
  if (atomic_load(&w.failures) > 0)
    bench_die("fetch", "some arcs failed");
  arc_limiter_free(w.lim);
  arc_server_stop(srv);
  return dt;
}

/* ---------------------------------------------------------------- report */

/* Every arc of the store at src fetched into a new store at dir. The
 * source store is opened for the round, so its server computes every
 * checksum once, as on an arc's first serve, rather than finding them
 * cached by an earlier round. */
static void time_fetch(const char *src, const char *dir, unsigned threads, bench_round *r) {
  arc_store *s = NULL, *d = NULL;
  ring_error err;
  char arcs[BENCH_PATH];
  bench_pathf(arcs, "%s/arcs", src);
  bench_warm(arcs); /* as cp's */
  if (arc_store_open(src, &s, &err) != RING_OK || arc_store_open(dir, &d, &err) != RING_OK)
    bench_die("store", err.message);
  r->move = fetch_all(s, d, threads, &r->cpu_move);
  uint32_t *tokens = NULL, n = 0;
  if (arc_store_list(d, &tokens, &n) != RING_OK || n != ARCS)
    bench_die("fetch", "not every arc is installed");
  free(tokens);
  arc_store_close(d);
  arc_store_close(s);
}

static void report(const bench_round *rs, unsigned n, double mb, unsigned threads) {
  printf("bench_arc: %.0f MB in %u arcs of %u files, loopback, unthrottled, %u fetch threads, "
         "%u rounds\n",
         mb, ARCS, FILES, threads, n);
  bench_report_rounds(rs, n, mb, "fetch", "server and fetchers; checksums, fsync, install");
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf(
      "  peak RSS           %7.1f MiB   (target <= 32 MiB; server and fetchers in this process)\n",
      (double)ru.ru_maxrss / 1024.0);
}

int main(int argc, char **argv) {
  uint64_t total = 1ull << 30;
  const char *base = "/tmp";
  unsigned threads = BENCH_AGENT_WORKERS, rounds = 3;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      total = 64ull << 20, rounds = 1;
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
      base = argv[++i];
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
      threads = (unsigned)atoi(argv[++i]);
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = (unsigned)atoi(argv[++i]);
    else
      bench_die("usage", "bench_arc [--quick] [--dir DIR] [--threads N] [--rounds N]");
  }
  const char *secrets[] = {SECRET};
  if (arc_keyring_new(secrets, 1, &keys, NULL) != RING_OK)
    bench_die("keys", "cannot make them");
  arc_keyring_set_pins(keys, pin_self, keys); /* both ends are this process, one key */
  if (threads < 1 || threads > BENCH_DISK_THREADS_MAX)
    bench_die("--threads", "1 to 16");
  if (rounds < 1 || rounds > BENCH_ROUNDS_MAX)
    bench_die("--rounds", "1 to 16");
  char root[BENCH_PATH], src[BENCH_PATH], arcs[BENCH_PATH], cpdir[BENCH_PATH], dstdir[BENCH_PATH],
      ceildir[BENCH_PATH];
  bench_pathf(root, "%s/bench-arc-XXXXXX", base);
  if (mkdtemp(root) == NULL)
    bench_die(root, strerror(errno));
  bench_pathf(src, "%s/src", root);
  arc_store *s = NULL;
  ring_error err;
  if (arc_store_open(src, &s, &err) != RING_OK) /* makes src/arcs */
    bench_die("store", err.message);
  arc_store_close(s);
  uint64_t per_file = total / (ARCS * FILES);
  bench_pathf(arcs, "%s/arcs", src);
  bench_make_arcs(arcs, ARCS, FILES, per_file);
  bench_round rs[BENCH_ROUNDS_MAX] = {0};
  for (unsigned i = 0; i < rounds; i++) {
    bench_pathf(cpdir, "%s/cp%u", root, i);
    bench_pathf(dstdir, "%s/dst%u", root, i);
    bench_pathf(ceildir, "%s/ceiling%u", root, i);
    if (i % 2 == 0) { /* rounds 1, 3, ...: cp first */
      rs[i].cp = bench_time_cp(arcs, cpdir);
      time_fetch(src, dstdir, threads, &rs[i]);
    } else {
      time_fetch(src, dstdir, threads, &rs[i]);
      rs[i].cp = bench_time_cp(arcs, cpdir);
    }
    rs[i].disk = bench_time_ceiling(ceildir, ARCS, FILES, per_file, threads);
  }
  report(rs, rounds, (double)(per_file * ARCS * FILES) / 1e6, threads);
  arc__rmtree(root);
  arc_keyring_free(keys);
  return 0;
}
