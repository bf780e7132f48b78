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
 * src/ and each round's cp<i>/ and dst<i>/, and is removed at the end.
 * The source is written and sync()ed first. Each round times
 * `cp -r src/arcs cp<i>/` (then the `sync` after it) and the fetch of
 * every arc from an arc server on 127.0.0.1 serving src/ into the new
 * store dst<i>/ (each file checksummed and fsync()ed, as the agent does),
 * by N threads (default 4: ring-agent's parallel fetches when the throttle
 * sets no moves_per_node, AGENT_WORKERS_DEFAULT), each with its own
 * arc_fetcher, sharing one unlimited limiter; cp goes first in odd rounds
 * and second in even ones. The page cache is not dropped: both read a warm
 * source. Rounds are printed, then their medians: the cost of creating
 * files drifts with what was deleted in the last minutes (both sides pay
 * it) and, on a VM, with whether the host still backs the guest's free
 * memory (cp's new page-cache pages pay for that, the fetch's O_DIRECT
 * writes do not), so the median fetch is also set against cp's fastest
 * round, the hardest comparison. `cp -r + sync` is printed as well, since
 * the fetch fsyncs and cp does not.
 */
#define _GNU_SOURCE
#include "arc_int.h"
#include "bench_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ARCS 256u
#define FILES 4u
#define SECRET "bench-secret"
#define THREADS_DEFAULT 4 /* as ring-agent unthrottled (agent.h, AGENT_WORKERS_DEFAULT) */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static _Noreturn void die(const char *what, const char *detail) {
  fprintf(stderr, "bench_arc: %s: %s\n", what, detail);
  exit(1);
}

/* ------------------------------------------------------------ the source */

static void write_file(const char *path, uint64_t size, uint64_t seed, uint64_t *buf, size_t cap) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    die(path, strerror(errno));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t off = 0; off < size;) {
    size_t n = size - off < cap ? (size_t)(size - off) : cap;
    for (size_t i = 0; i < (n + 7) / 8; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      buf[i] = x;
    }
    if (write(fd, buf, n) != (ssize_t)n)
      die(path, strerror(errno));
    off += n;
  }
  close(fd);
}

static void make_source(const char *src, uint64_t per_file) {
  size_t cap = 1 << 20;
  uint64_t *buf = malloc(cap);
  char path[4200 + 64];
  for (uint32_t t = 0; t < ARCS; t++) {
    snprintf(path, sizeof path, "%s/arcs/%" PRIu32, src, t);
    if (mkdir(path, 0755) != 0)
      die(path, strerror(errno));
    for (uint32_t f = 0; f < FILES; f++) {
      snprintf(path, sizeof path, "%s/arcs/%" PRIu32 "/part-%" PRIu32, src, t, f);
      write_file(path, per_file, t * FILES + f + 1, buf, cap);
    }
  }
  free(buf);
  sync();
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
  arc_fetch_opts o = {.secret = SECRET, .limiter = w->lim, .fetcher = arc_fetcher_new()};
  if (o.fetcher == NULL)
    die("fetcher", "out of memory");
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

/* CPU seconds (user + system) of this process or (RUSAGE_CHILDREN) its
 * waited-for children so far. */
static double cpu_s(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Wall seconds of the fetch; the process's CPU seconds in it in *cpu. */
static double fetch_all(arc_store *src, arc_store *dst, unsigned threads, double *cpu) {
  arc_server *srv;
  ring_error err;
  arc_server_opts so = {.listen = "127.0.0.1:0", .secret = SECRET};
  if (arc_server_start(src, &so, &srv, &err) != RING_OK)
    die("arc server", err.message);
  char source[64];
  snprintf(source, sizeof source, "127.0.0.1:%u", (unsigned)arc_server_port(srv));
  fetchers w = {.dst = dst, .source = source};
  arc_limiter_new(0, &w.lim);
  pthread_t th[16];
  double t0 = now_s(), c0 = cpu_s(RUSAGE_SELF);
  for (unsigned i = 0; i < threads; i++)
    pthread_create(&th[i], NULL, fetch_loop, &w);
  for (unsigned i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  double dt = now_s() - t0;
  *cpu = cpu_s(RUSAGE_SELF) - c0;
  if (atomic_load(&w.failures) > 0)
    die("fetch", "some arcs failed");
  arc_limiter_free(w.lim);
  arc_server_stop(srv);
  return dt;
}

/* ---------------------------------------------------------------- report */

static double run(const char *cmd) {
  double t0 = now_s();
  if (system(cmd) != 0)
    die("command failed", cmd);
  return now_s() - t0;
}

typedef struct round {
  double cp, sync, fetch;   /* wall seconds: cp -r, the sync after it, the fetch */
  double cpu_cp, cpu_fetch; /* CPU seconds of each */
} round;

/* `cp -r src/arcs` into dir, then the sync of what it left dirty. */
static void time_cp(const char *src, const char *dir, round *r) {
  char cmd[9000];
  mkdir(dir, 0755);
  snprintf(cmd, sizeof cmd, "cp -r '%s/arcs' '%s/'", src, dir);
  double c0 = cpu_s(RUSAGE_CHILDREN);
  r->cp = run(cmd);
  r->cpu_cp = cpu_s(RUSAGE_CHILDREN) - c0;
  r->sync = run("sync");
}

/* Every arc of the store at src fetched into a new store at dir. The
 * source store is opened for the round, so its server computes every
 * checksum once, as on an arc's first serve, rather than finding them
 * cached by an earlier round. */
static void time_fetch(const char *src, const char *dir, unsigned threads, round *r) {
  arc_store *s = NULL, *d = NULL;
  ring_error err;
  if (arc_store_open(src, &s, &err) != RING_OK || arc_store_open(dir, &d, &err) != RING_OK)
    die("store", err.message);
  r->fetch = fetch_all(s, d, threads, &r->cpu_fetch);
  uint32_t *tokens = NULL, n = 0;
  if (arc_store_list(d, &tokens, &n) != RING_OK || n != ARCS)
    die("fetch", "not every arc is installed");
  free(tokens);
  arc_store_close(d);
  arc_store_close(s);
}

static void print_round(unsigned i, const round *r, double mb) {
  printf("  round %u: cp -r %7.1f MB/s (CPU %.2f s), + sync %7.1f MB/s, fetch %7.1f MB/s (CPU "
         "%.2f s): %.2fx cp, %.2fx cp+sync\n",
         i + 1, mb / r->cp, r->cpu_cp, mb / (r->cp + r->sync), mb / r->fetch, r->cpu_fetch,
         r->cp / r->fetch, (r->cp + r->sync) / r->fetch);
}

static void report(const round *rs, unsigned n, double mb, unsigned threads) {
  double cp[16], cps[16], fe[16], ratio[16], ratio_s[16], cpu_cp[16], cpu_fe[16];
  printf("bench_arc: %.0f MB in %u arcs of %u files, loopback, unthrottled, %u fetch threads, "
         "%u rounds\n",
         mb, ARCS, FILES, threads, n);
  for (unsigned i = 0; i < n; i++) {
    print_round(i, &rs[i], mb);
    cp[i] = mb / rs[i].cp, cps[i] = mb / (rs[i].cp + rs[i].sync), fe[i] = mb / rs[i].fetch;
    ratio[i] = rs[i].cp / rs[i].fetch, ratio_s[i] = (rs[i].cp + rs[i].sync) / rs[i].fetch;
    cpu_cp[i] = rs[i].cpu_cp, cpu_fe[i] = rs[i].cpu_fetch;
  }
  printf("  median of the rounds:\n");
  printf("  cp -r             %8.1f MB/s  (CPU %.2f s)\n", bench_median(cp, n),
         bench_median(cpu_cp, n));
  printf("  cp -r + sync      %8.1f MB/s\n", bench_median(cps, n));
  printf("  arc fetch         %8.1f MB/s  (CPU %.2f s, server and fetchers; checksums, fsync, "
         "install)\n",
         bench_median(fe, n), bench_median(cpu_fe, n));
  printf("  ratio fetch/cp    %8.2fx      (target >= 0.70x)\n", bench_median(ratio, n));
  printf("  ratio fetch/cp+sync %6.2fx      (both durable)\n", bench_median(ratio_s, n));
  double best_cp = 0;
  for (unsigned i = 0; i < n; i++)
    best_cp = cp[i] > best_cp ? cp[i] : best_cp;
  printf("  fetch / fastest cp %7.2fx      (the median fetch against cp's best round)\n",
         bench_median(fe, n) / best_cp);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf(
      "  peak RSS          %8.1f MiB   (target <= 32 MiB; server and fetchers in this process)\n",
      (double)ru.ru_maxrss / 1024.0);
}

int main(int argc, char **argv) {
  uint64_t total = 1ull << 30;
  const char *base = "/tmp";
  unsigned threads = THREADS_DEFAULT, rounds = 3;
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
      die("usage", "bench_arc [--quick] [--dir DIR] [--threads N] [--rounds N]");
  }
  if (threads < 1 || threads > 16)
    die("--threads", "1 to 16");
  if (rounds < 1 || rounds > 16)
    die("--rounds", "1 to 16");
  char root[4096], src[4200], cpdir[4300], dstdir[4300];
  snprintf(root, sizeof root, "%s/bench-arc-XXXXXX", base);
  if (mkdtemp(root) == NULL)
    die(root, strerror(errno));
  snprintf(src, sizeof src, "%s/src", root);
  arc_store *s = NULL;
  ring_error err;
  if (arc_store_open(src, &s, &err) != RING_OK) /* makes src/arcs */
    die("store", err.message);
  arc_store_close(s);
  uint64_t per_file = total / (ARCS * FILES);
  make_source(src, per_file);
  round rs[16];
  for (unsigned i = 0; i < rounds; i++) {
    snprintf(cpdir, sizeof cpdir, "%s/cp%u", root, i);
    snprintf(dstdir, sizeof dstdir, "%s/dst%u", root, i);
    if (i % 2 == 0) { /* rounds 1, 3, ...: cp first */
      time_cp(src, cpdir, &rs[i]);
      time_fetch(src, dstdir, threads, &rs[i]);
    } else {
      time_fetch(src, dstdir, threads, &rs[i]);
      time_cp(src, cpdir, &rs[i]);
    }
  }
  report(rs, rounds, (double)(per_file * ARCS * FILES) / 1e6, threads);
  arc__rmtree(root);
  return 0;
}
