/*
 * bench_disk.h: what a benchmark that moves arcs sets its figures against,
 * measured on the same disk in the same run: `cp -r` of the same files,
 * the `sync` after it, and the disk's ceiling for a durable copy (the same
 * bytes written by the same number of threads straight from memory, with
 * O_DIRECT, each file fsync()ed, each directory fsync()ed and renamed into
 * place, as an agent installs an arc, but with no network and no reading).
 * Nothing that receives arcs durably can beat the ceiling; `cp -r` can,
 * since it leaves its bytes in the page cache.
 *
 * Also the source every such benchmark moves: `arcs` arc directories of
 * `files` files named part-<f>, of pseudo-random bytes.
 */
#ifndef RING_BENCH_DISK_H
#define RING_BENCH_DISK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT */
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"

#define BENCH_DISK_BUF (1u << 20) /* bytes per write; a multiple of the block size */
#define BENCH_DISK_THREADS_MAX 16u
/* ring-agent's parallel fetches when the throttle sets none (agent.h,
 * AGENT_WORKERS_DEFAULT, which benchmarks cannot include: it brings the
 * daemon's headers). */
#define BENCH_AGENT_WORKERS 4u

static inline double bench_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline _Noreturn void bench_die(const char *what, const char *detail) {
  fprintf(stderr, "bench: %s: %s\n", what, detail);
  exit(1);
}

/* CPU seconds (user + system) of this process (RUSAGE_SELF) or of its
 * waited-for children (RUSAGE_CHILDREN) so far. */
static inline double bench_cpu_s(int who) {
  struct rusage ru;
  getrusage(who, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

#define BENCH_PATH 4096

/* A path (or command) from fmt into buf of BENCH_PATH bytes; dies rather
 * than truncates. */
__attribute__((format(printf, 2, 3))) static inline void bench_pathf(char *buf, const char *fmt,
                                                                     ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, BENCH_PATH, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= BENCH_PATH)
    bench_die("path too long", fmt);
}

/* Wall seconds of a shell command, which must succeed. */
static inline double bench_run_s(const char *cmd) {
  double t0 = bench_now_s();
  if (system(cmd) != 0)
    bench_die("command failed", cmd);
  return bench_now_s() - t0;
}

/* n pseudo-random bytes (xorshift from seed) into buf, n a multiple of 8. */
static inline void bench_fill(uint64_t *buf, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n / 8; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = x;
  }
}

static inline void bench_write_file(const char *path, uint64_t size, uint64_t seed, uint64_t *buf) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    bench_die(path, strerror(errno));
  for (uint64_t off = 0; off < size;) {
    size_t n = size - off < BENCH_DISK_BUF ? (size_t)(size - off) : BENCH_DISK_BUF;
    bench_fill(buf, (n + 7) & ~(size_t)7, seed + off);
    if (write(fd, buf, n) != (ssize_t)n)
      bench_die(path, strerror(errno));
    off += n;
  }
  close(fd);
}

/* The source: arcs_dir/<t>/part-<f> for t < arcs, f < files, each of
 * per_file bytes, written and sync()ed. arcs_dir must exist. */
static inline void bench_make_arcs(const char *arcs_dir, uint32_t arcs, uint32_t files,
                                   uint64_t per_file) {
  uint64_t *buf = malloc(BENCH_DISK_BUF + 8);
  if (buf == NULL)
    bench_die("source", "out of memory");
  char path[BENCH_PATH];
  for (uint32_t t = 0; t < arcs; t++) {
    bench_pathf(path, "%s/%" PRIu32, arcs_dir, t);
    if (mkdir(path, 0755) != 0)
      bench_die(path, strerror(errno));
    for (uint32_t f = 0; f < files; f++) {
      bench_pathf(path, "%s/%" PRIu32 "/part-%" PRIu32, arcs_dir, t, f);
      bench_write_file(path, per_file, (uint64_t)t * files + f + 1, buf);
    }
  }
  free(buf);
  sync();
}

/* Reads every file under dir (cat), so that what copies it next finds it
 * in the page cache whoever wrote it and however (a file received with
 * O_DIRECT is not cached): every copy a round compares reads a warm source. */
static inline void bench_warm(const char *dir) {
  char cmd[BENCH_PATH];
  bench_pathf(cmd, "find '%s' -type f -exec cat {} + >/dev/null", dir);
  bench_run_s(cmd);
}

/* ------------------------------------------------------------- cp -r */

typedef struct bench_cp {
  double cp, sync; /* wall seconds of `cp -r` and of the `sync` after it */
  double cpu;      /* CPU seconds of the cp */
} bench_cp;

/* `cp -r arcs_dir` into dir (made here) from a warm source, then the sync
 * of what it left dirty. */
static inline bench_cp bench_time_cp(const char *arcs_dir, const char *dir) {
  char cmd[BENCH_PATH];
  bench_cp r;
  mkdir(dir, 0755);
  bench_warm(arcs_dir);
  bench_pathf(cmd, "cp -r '%s' '%s/'", arcs_dir, dir);
  double c0 = bench_cpu_s(RUSAGE_CHILDREN);
  r.cp = bench_run_s(cmd);
  r.cpu = bench_cpu_s(RUSAGE_CHILDREN) - c0;
  r.sync = bench_run_s("sync");
  return r;
}

/* ------------------------------------------------------------- the ceiling */

typedef struct bench_ceiling {
  const char *dir; /* tmp/ and arcs/ below it */
  uint32_t arcs, files;
  uint64_t per_file;
  const unsigned char *data; /* BENCH_DISK_BUF bytes, aligned for O_DIRECT */
  atomic_uint next;
} bench_ceiling;

static inline void bench_fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fsync(fd) != 0)
    bench_die(path, strerror(errno));
  close(fd);
}

/* One file: written from memory (O_DIRECT where the file system takes it)
 * and fsync()ed. */
static inline void bench_ceiling_file(const bench_ceiling *c, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL)
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    bench_die(path, strerror(errno));
  for (uint64_t off = 0; off < c->per_file;) {
    size_t n = c->per_file - off < BENCH_DISK_BUF ? (size_t)(c->per_file - off) : BENCH_DISK_BUF;
    if (n % 4096 != 0) /* a tail O_DIRECT cannot take */
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT);
    if (pwrite(fd, c->data, n, (off_t)off) != (ssize_t)n)
      bench_die(path, strerror(errno));
    off += n;
  }
  if (fsync(fd) != 0)
    bench_die(path, strerror(errno));
  close(fd);
}

static inline void *bench_ceiling_loop(void *p) {
  bench_ceiling *c = p;
  char tmp[BENCH_PATH], dst[BENCH_PATH], file[BENCH_PATH], arcs[BENCH_PATH], tmproot[BENCH_PATH];
  bench_pathf(arcs, "%s/arcs", c->dir);
  bench_pathf(tmproot, "%s/tmp", c->dir);
  for (uint32_t t; (t = atomic_fetch_add(&c->next, 1)) < c->arcs;) {
    bench_pathf(tmp, "%s/%" PRIu32, tmproot, t);
    if (mkdir(tmp, 0755) != 0)
      bench_die(tmp, strerror(errno));
    for (uint32_t f = 0; f < c->files; f++) {
      bench_pathf(file, "%s/part-%" PRIu32, tmp, f);
      bench_ceiling_file(c, file);
    }
    bench_fsync_path(tmp);
    bench_pathf(dst, "%s/%" PRIu32, arcs, t);
    if (rename(tmp, dst) != 0)
      bench_die(dst, strerror(errno));
    bench_fsync_path(arcs);
    bench_fsync_path(tmproot);
  }
  return NULL;
}

/* Wall seconds of the durable copy of arcs x files x per_file bytes into
 * dir (made here) by `threads` threads. */
static inline double bench_time_ceiling(const char *dir, uint32_t arcs, uint32_t files,
                                        uint64_t per_file, unsigned threads) {
  bench_ceiling c = {.dir = dir, .arcs = arcs, .files = files, .per_file = per_file};
  void *data;
  if (posix_memalign(&data, 4096, BENCH_DISK_BUF) != 0)
    bench_die("ceiling", "out of memory");
  bench_fill(data, BENCH_DISK_BUF, 7);
  c.data = data;
  char path[BENCH_PATH];
  mkdir(dir, 0755);
  bench_pathf(path, "%s/arcs", dir);
  mkdir(path, 0755);
  bench_pathf(path, "%s/tmp", dir);
  mkdir(path, 0755);
  pthread_t th[BENCH_DISK_THREADS_MAX];
  threads = threads > BENCH_DISK_THREADS_MAX ? BENCH_DISK_THREADS_MAX : threads;
  double t0 = bench_now_s();
  for (unsigned i = 0; i < threads; i++)
    if (pthread_create(&th[i], NULL, bench_ceiling_loop, &c) != 0)
      bench_die("ceiling", "cannot start a thread");
  for (unsigned i = 0; i < threads; i++)
    pthread_join(th[i], NULL);
  double dt = bench_now_s() - t0;
  free(data);
  return dt;
}

/* ------------------------------------------------------------- reporting */

#define BENCH_ROUNDS_MAX 16u

/* One round: the references and the move measured against them. */
typedef struct bench_round {
  bench_cp cp;           /* cp -r and the sync after it */
  double disk;           /* the ceiling: wall seconds of the durable copy from memory */
  double move, cpu_move; /* wall and CPU seconds of the move being measured */
  double cpu_user;       /* the user part of cpu_move; 0: not measured apart */
} bench_round;

/* ", user 0.41 s" when the user part was measured apart, else "". */
static inline const char *bench_user_part(double user, char out[32]) {
  out[0] = '\0';
  if (user > 0)
    snprintf(out, 32, ", user %.2f s", user);
  return out;
}

static inline void bench_print_round(unsigned i, const bench_round *r, double mb,
                                     const char *move) {
  char user[32];
  printf("  round %u: cp -r %6.0f MB/s (CPU %.2f s), +sync %6.0f MB/s, ceiling %6.0f MB/s, %s "
         "%6.0f MB/s (CPU %.2f s%s): %.2fx cp, %.2fx cp+sync, %.2fx ceiling\n",
         i + 1, mb / r->cp.cp, r->cp.cpu, mb / (r->cp.cp + r->cp.sync), mb / r->disk, move,
         mb / r->move, r->cpu_move, bench_user_part(r->cpu_user, user), r->cp.cp / r->move,
         (r->cp.cp + r->cp.sync) / r->move, r->disk / r->move);
}

static inline void bench_print_ratio(const char *a, const char *b, double x, const char *why) {
  char label[64];
  snprintf(label, sizeof label, "%s / %s", a, b);
  printf("  %-18s %7.2fx      (%s)\n", label, x, why);
}

/* Each round, then the medians of the rounds and the ratios (the move
 * named `move`, e.g. "fetch"), against the target of >= 0.7x cp. Rounds
 * vary with what the machine did in the last minutes (on a VM, cp's new
 * page-cache pages are slow while the host backs memory it had taken
 * back), so the median move is also set against cp's fastest round, and
 * the ceiling's ratio to cp shows what any durable copy could reach. */
static inline void bench_report_rounds(const bench_round *rs, unsigned n, double mb,
                                       const char *move, const char *cpu_of) {
  double cp[BENCH_ROUNDS_MAX], cps[BENCH_ROUNDS_MAX], disk[BENCH_ROUNDS_MAX];
  double mv[BENCH_ROUNDS_MAX], cpu_cp[BENCH_ROUNDS_MAX], cpu_mv[BENCH_ROUNDS_MAX];
  double cpu_user[BENCH_ROUNDS_MAX];
  double r_cp[BENCH_ROUNDS_MAX], r_cps[BENCH_ROUNDS_MAX], r_disk[BENCH_ROUNDS_MAX];
  double best_cp = 0;
  for (unsigned i = 0; i < n; i++) {
    const bench_round *r = &rs[i];
    bench_print_round(i, r, mb, move);
    cp[i] = mb / r->cp.cp, cps[i] = mb / (r->cp.cp + r->cp.sync), disk[i] = mb / r->disk;
    mv[i] = mb / r->move, cpu_cp[i] = r->cp.cpu, cpu_mv[i] = r->cpu_move;
    cpu_user[i] = r->cpu_user;
    r_cp[i] = r->cp.cp / r->move, r_cps[i] = (r->cp.cp + r->cp.sync) / r->move;
    r_disk[i] = r->disk / r->move;
    best_cp = cp[i] > best_cp ? cp[i] : best_cp;
  }
  double m_disk = bench_median(disk, n), m_cp = bench_median(cp, n), m_mv = bench_median(mv, n);
  printf("  median of the rounds:\n");
  printf("  cp -r              %7.0f MB/s  (CPU %.2f s)\n", m_cp, bench_median(cpu_cp, n));
  printf("  cp -r + sync       %7.0f MB/s\n", bench_median(cps, n));
  printf("  durable ceiling    %7.0f MB/s  (same files from memory: O_DIRECT, fsync, rename)\n",
         m_disk);
  char user[32];
  printf("  %-18s %7.0f MB/s  (CPU %.2f s%s: %s)\n", move, m_mv, bench_median(cpu_mv, n),
         bench_user_part(bench_median(cpu_user, n), user), cpu_of);
  bench_print_ratio(move, "cp -r", bench_median(r_cp, n), "target >= 0.70x");
  bench_print_ratio(move, "cp+sync", bench_median(r_cps, n), "both durable");
  bench_print_ratio(move, "ceiling", bench_median(r_disk, n), "of what this disk takes durably");
  bench_print_ratio(move, "best cp", m_mv / best_cp, "against cp's fastest round");
  bench_print_ratio("ceiling", "cp -r", m_disk / m_cp,
                    "the most any durable copy reaches against cp here");
}

#endif /* RING_BENCH_DISK_H */
