/*
 * bench_lookup.c: what a key -> owners lookup costs in libring, against bare
 * XXH3 (the floor: libring hashes once and indexes a table), libmemcached's
 * ketama, jump consistent hash and rendezvous hashing. Prints figures; it
 * never passes or fails on time.
 *
 * Sections:
 *   1. options and the key set
 *   2. the systems under test, one loop each so the per-key work inlines
 *   3. the timing harness: threads behind a barrier, interleaved repeats
 *   4. per node count: build the tables, run every case, free
 *   5. the report: one table, then the derived ratios, then the ratio to
 *      XXH3 by table size (where the owners array leaves L1) and with
 *      cold keys
 *
 * Hot keys: every case walks the same pre-built array of 10,000 keys
 * ("session-0".."session-9999", ~300 KB with its index), which stays in
 * the core's L2 as a router's keys do (it hashes a key it has just parsed
 * from a request). Cold keys: the last section walks 1,000,000 keys (~31 MB,
 * streamed from memory each pass), where the key stream and the table
 * compete for the caches; both are printed. Key generation is not timed;
 * with 2 threads each thread walks the whole
 * array and the figure is aggregate throughput. Threads start together on a
 * spinning barrier, and a run walks the array as many times (passes) as it
 * takes to last BENCH_MIN_RUN_S, so that thread start-up skew stays small
 * next to the run. Results are summed per thread and folded into a volatile
 * sink so the compiler cannot drop work. Repeats are interleaved across the
 * cases of one node count (so a slow patch of the machine does not land on
 * one system) and the best is kept.
 *
 * Cheap cases (XXH3, libring, the cpu-only control) run three times as many
 * repeats as the rest: the machine is shared, and only the best runs show
 * what the code can do when it gets its cores.
 *
 *   bench_lookup [--keys N] [--repeats N] [--tokens T] [--quick]
 */
#define _GNU_SOURCE /* sysconf(_SC_LEVEL1_DCACHE_SIZE) */

#include "ring.h"
#include "ring_inline.h" /* defines XXH_INLINE_ALL and includes xxhash.h */
#include "bench_stats.h"
#include "test_tables.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#ifdef HAVE_LIBMEMCACHED
#include <libmemcached/memcached.h>
#endif

#define BENCH_TOKENS 16384u /* T for every N unless --tokens: docs/DESIGN.md's default */
#define BENCH_REPLICAS 3u
#define BENCH_ZONES 10u
#define BENCH_KEYS_DEFAULT 10000u /* hot: in L2; --quick too */
#define BENCH_COLD_KEYS 1000000u  /* cold: streamed from memory */
#define BENCH_COLD_KEYS_QUICK 200000u
#define BENCH_KEYS_MAX 50000000u
#define BENCH_REPEATS_DEFAULT 7u
#define BENCH_REPEATS_QUICK 3u
#define BENCH_REPEATS_MAX 32u
#define BENCH_CHEAP_FACTOR 3u /* repeats multiplier for cheap cases */
#define BENCH_THREADS_MAX 2u
#define BENCH_MIN_RUN_S 0.02 /* a timed run lasts at least this long */
#define BENCH_MIN_RUN_S_QUICK 0.004
#define BENCH_PASSES_MAX 1000u
/* O(N)-per-key rendezvous runs on fewer keys when N is large: at most this
 * many node visits per run (quick: a tenth of it). */
#define BENCH_RENDEZVOUS_BUDGET 100000000.0
#define BENCH_KETAMA_BIG_NODES 10000u /* the ketama replica at this N runs keys / 4 */

static const uint32_t node_counts[] = {10, 100, 1000, 10000};
#define N_SIZES (sizeof node_counts / sizeof node_counts[0])

static volatile uint64_t sink; /* every run's result ends up here */

/* ------------------------------------------------- 1. options and keys */

typedef struct bench_opts {
  size_t keys;      /* keys in the set */
  unsigned repeats; /* timed runs per case; the best is reported */
  uint32_t tokens;  /* T of the libring tables */
  int quick;        /* CI smoke run: fewer keys and repeats */
} bench_opts;

typedef struct bench_key {
  const char *p; /* into the key buffer; the systems get (p, len), no NUL */
  size_t len;
} bench_key;

typedef struct keyset {
  char *buf;      /* all keys back to back */
  bench_key *key; /* n entries */
  size_t n;
} keyset;

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_lookup [--keys N] [--repeats N] [--tokens T] [--quick]\n"
          "  --keys N     hot keys in the set (default %u)\n"
          "  --repeats N  timed runs per case, best kept (default %u, quick %u;\n"
          "               cheap cases run %u times as many)\n"
          "  --tokens T   libring table size, a power of two in [%u, %u] (default %u)\n"
          "  --quick      a CI smoke run: fewer repeats and cold keys\n",
          BENCH_KEYS_DEFAULT, BENCH_REPEATS_DEFAULT, BENCH_REPEATS_QUICK, BENCH_CHEAP_FACTOR,
          RING_TOKENS_MIN, RING_TOKENS_MAX, BENCH_TOKENS);
}

/* Parses a decimal count in [lo, hi]; returns 0 and writes *out, or -1. */
static int parse_count(const char *s, unsigned long long lo, unsigned long long hi,
                       unsigned long long *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (s[0] < '0' || s[0] > '9' || errno != 0 || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* Returns 0 on success, 1 for --help, -1 on a bad argument (reported). */
static int parse_opts(int argc, char **argv, bench_opts *o) {
  unsigned long long keys = 0, repeats = 0, v;
  o->quick = 0;
  o->tokens = BENCH_TOKENS;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      o->quick = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 1;
    } else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc) {
      if (parse_count(argv[++i], 1000, BENCH_KEYS_MAX, &v) != 0) {
        fprintf(stderr, "bench_lookup: --keys wants 1000 .. %u\n", BENCH_KEYS_MAX);
        return -1;
      }
      keys = v;
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      if (parse_count(argv[++i], 1, BENCH_REPEATS_MAX, &v) != 0) {
        fprintf(stderr, "bench_lookup: --repeats wants 1 .. %u\n", BENCH_REPEATS_MAX);
        return -1;
      }
      repeats = v;
    } else if (strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      if (parse_count(argv[++i], RING_TOKENS_MIN, RING_TOKENS_MAX, &v) != 0 || (v & (v - 1)) != 0) {
        fprintf(stderr, "bench_lookup: --tokens wants a power of two in %u .. %u\n",
                RING_TOKENS_MIN, RING_TOKENS_MAX);
        return -1;
      }
      o->tokens = (uint32_t)v;
    } else {
      usage(stderr);
      return -1;
    }
  }
  o->keys = keys ? (size_t)keys : BENCH_KEYS_DEFAULT;
  o->repeats = repeats ? (unsigned)repeats : o->quick ? BENCH_REPEATS_QUICK : BENCH_REPEATS_DEFAULT;
  return 0;
}

/* Builds "session-0".."session-<n-1>". Returns 0, or -1 with nothing held. */
static int keyset_init(keyset *ks, size_t n) {
  const size_t slot = sizeof "session-" + 20; /* prefix, 20 digits, NUL */
  ks->buf = malloc(n * slot);
  ks->key = malloc(n * sizeof *ks->key);
  ks->n = n;
  if (ks->buf == NULL || ks->key == NULL) {
    free(ks->buf);
    free(ks->key);
    return -1;
  }
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(ks->buf + off, slot, "session-%zu", i);
    ks->key[i].p = ks->buf + off;
    ks->key[i].len = (size_t)w;
    off += (size_t)w + 1;
  }
  return 0;
}

static void keyset_free(keyset *ks) {
  free(ks->buf);
  free(ks->key);
}

/* Heap bytes in use (glibc: arena + mmap'ed chunks), 0 where unknown. */
static size_t heap_in_use(void) {
#ifdef __GLIBC__
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#else
  return 0;
#endif
}

/* ------------------------------------------------ 2. systems under test */

/* What one node count's systems need; read-only while threads run. */
typedef struct bench_ctx {
  const ring_table *table;   /* libring, T = --tokens (65536), R = 3 */
  const ring_view *view;     /* its inline fast-path view */
  uint64_t seed;             /* XXH3 seed, the table's (so XXH3 = libring's hash) */
  uint32_t nodes;            /* N */
  const uint64_t *node_hash; /* rendezvous: XXH3 of each node's id */
#ifdef HAVE_LIBMEMCACHED
  memcached_st *memc;                /* libmemcached ketama, default (one-at-a-time) hash */
  memcached_st *memc_md5;            /* libmemcached weighted ketama, MD5 (libketama's) */
  const struct ketama_point *points; /* the replica's continuum, sorted */
  uint32_t n_points;
  memcached_hash_t ketama_hash; /* the replica's key and point hash */
#endif
} bench_ctx;

/* Loops that hash with XXH3 get every call inlined into them (GCC and Clang
 * otherwise leave XXH3_64bits_withSeed out of line): the baseline is then
 * truly "bare XXH3", and every system pays the same hash. */
#if defined(__GNUC__)
#define BENCH_FLATTEN __attribute__((flatten))
#else
#define BENCH_FLATTEN
#endif

/* A system: looks up keys[0..n) and returns a sum of the answers. */
typedef uint64_t (*bench_fn)(const bench_ctx *c, const bench_key *keys, size_t n);

/* SplitMix64's finalizer (Stafford variant 13), as libring mixes hashes. */
static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Jump consistent hash (Lamping & Veach 2014): a bucket in [0, buckets). */
static inline uint32_t jump_hash(uint64_t key, uint32_t buckets) {
  int64_t b = -1, j = 0;
  while (j < (int64_t)buckets) {
    b = j;
    key = key * 2862933555777941757ull + 1;
    j = (int64_t)((double)(b + 1) * (2147483648.0 / (double)((key >> 33) + 1)));
  }
  return (uint32_t)b;
}

BENCH_FLATTEN static uint64_t run_xxh3(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++)
    acc += XXH3_64bits_withSeed(k[i].p, k[i].len, c->seed);
  return acc;
}

static uint64_t run_ring_lookup(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    uint16_t o[BENCH_REPLICAS];
    int got = ring_lookup(c->table, k[i].p, k[i].len, o, (int)BENCH_REPLICAS);
    acc += (uint64_t)got + o[0] + o[1] + o[2];
  }
  return acc;
}

BENCH_FLATTEN static uint64_t run_ring_view(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    uint16_t o[BENCH_REPLICAS] = {0};
    int got = ring_view_lookup(c->view, k[i].p, k[i].len, o, (int)BENCH_REPLICAS);
    acc += (uint64_t)got + o[0] + o[1] + o[2];
  }
  return acc;
}

BENCH_FLATTEN static uint64_t run_ring_owners(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    const uint16_t *o = ring_view_owners(c->view, k[i].p, k[i].len);
    acc += (uint64_t)o[0] + o[1] + o[2];
  }
  return acc;
}

BENCH_FLATTEN static uint64_t run_ring_primary(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++)
    acc += ring_view_primary(c->view, k[i].p, k[i].len);
  return acc;
}

/* Not a lookup: a dependent multiply chain that touches no memory, as long
 * as a few XXH3 runs. Its 2-thread speedup is the most this machine gives
 * two threads that share nothing. */
static uint64_t run_cpu_only(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t x = c->seed | 1;
  (void)k;
  for (size_t i = 0; i < 4 * n; i++)
    x = x * 0x9e3779b97f4a7c15ull + i;
  return x;
}

BENCH_FLATTEN static uint64_t run_jump(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++)
    acc += jump_hash(XXH3_64bits_withSeed(k[i].p, k[i].len, c->seed), c->nodes);
  return acc;
}

BENCH_FLATTEN static uint64_t run_rendezvous(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    const uint64_t h = XXH3_64bits_withSeed(k[i].p, k[i].len, c->seed);
    uint64_t best_score = 0;
    uint32_t best = 0;
    for (uint32_t j = 0; j < c->nodes; j++) {
      const uint64_t s = mix64(h ^ c->node_hash[j]);
      if (s > best_score) {
        best_score = s;
        best = j;
      }
    }
    acc += best;
  }
  return acc;
}

#ifdef HAVE_LIBMEMCACHED
static uint64_t run_ketama(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++)
    acc += memcached_generate_hash(c->memc, k[i].p, k[i].len);
  return acc;
}

static uint64_t run_ketama_md5(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++)
    acc += memcached_generate_hash(c->memc_md5, k[i].p, k[i].len);
  return acc;
}

/* A continuum point, as libmemcached keeps them. */
typedef struct ketama_point {
  uint32_t value; /* hash of "<host>-<i>" */
  uint32_t index; /* server */
} ketama_point;

/* libmemcached's dispatch_host for ketama: the first point >= hash, wrapping. */
static inline uint32_t ketama_find(const ketama_point *pts, uint32_t n, uint32_t hash) {
  uint32_t left = 0, right = n;
  while (left < right) {
    uint32_t mid = left + (right - left) / 2;
    if (pts[mid].value < hash)
      left = mid + 1;
    else
      right = mid;
  }
  return pts[right == n ? 0 : right].index;
}

static uint64_t run_ketama_replica(const bench_ctx *c, const bench_key *k, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t h = memcached_generate_hash_value(k[i].p, k[i].len, c->ketama_hash);
    acc += ketama_find(c->points, c->n_points, h);
  }
  return acc;
}
#endif

enum {
  SYS_XXH3,
  SYS_RING_CALL,
  SYS_RING_VIEW,
  SYS_RING_OWNERS,
  SYS_RING_PRIMARY,
  SYS_KETAMA,
  SYS_KETAMA_MD5,
  SYS_KETAMA_REPLICA,
  SYS_JUMP,
  SYS_RENDEZVOUS,
  SYS_CPU_ONLY,
  N_SYS
};

static const struct {
  const char *name;
  bench_fn fn;
} systems[N_SYS] = {
    [SYS_XXH3] = {"xxh3 (baseline)", run_xxh3},
    [SYS_RING_CALL] = {"libring ring_lookup", run_ring_lookup},
    [SYS_RING_VIEW] = {"libring ring_view_lookup", run_ring_view},
    [SYS_RING_OWNERS] = {"libring ring_view_owners", run_ring_owners},
    [SYS_RING_PRIMARY] = {"libring ring_view_primary", run_ring_primary},
#ifdef HAVE_LIBMEMCACHED
    [SYS_KETAMA] = {"ketama libmemcached", run_ketama},
    [SYS_KETAMA_MD5] = {"ketama libmemcached md5", run_ketama_md5},
    [SYS_KETAMA_REPLICA] = {"ketama replica", run_ketama_replica},
#else
    [SYS_KETAMA] = {"ketama libmemcached", NULL},
    [SYS_KETAMA_MD5] = {"ketama libmemcached md5", NULL},
    [SYS_KETAMA_REPLICA] = {"ketama replica", NULL},
#endif
    [SYS_JUMP] = {"jump hash", run_jump},
    [SYS_RENDEZVOUS] = {"rendezvous O(N)", run_rendezvous},
    [SYS_CPU_ONLY] = {"cpu-only mul chain", run_cpu_only},
};

/* ------------------------------------------------------ 3. the harness */

typedef struct worker {
  bench_fn fn;
  const bench_ctx *ctx;
  const bench_key *keys;
  size_t n;
  unsigned passes;        /* walks over keys[0..n) */
  atomic_uint *arrived;   /* the spinning start barrier */
  unsigned threads;       /* how many must arrive */
  struct timespec t0, t1; /* this thread's window, after the barrier */
  uint64_t acc;
  char pad[64]; /* keeps workers' writes off each other's lines */
} worker;

static double ts_sec(const struct timespec *t) {
  return (double)t->tv_sec + (double)t->tv_nsec * 1e-9;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  /* Spin rather than sleep: a futex wake-up can cost a slow VM a
   * millisecond, which would land on one thread only. */
  atomic_fetch_add(w->arrived, 1);
  while (atomic_load(w->arrived) < w->threads)
    ;
  clock_gettime(CLOCK_MONOTONIC, &w->t0);
  uint64_t acc = 0;
  for (unsigned p = 0; p < w->passes; p++)
    acc += w->fn(w->ctx, w->keys, w->n);
  clock_gettime(CLOCK_MONOTONIC, &w->t1);
  w->acc = acc;
  return NULL;
}

/* One run: `threads` threads each look up keys[0..n) `passes` times,
 * released together. Returns the wall time from the first start to the
 * last finish, in seconds. Exits the program if a thread cannot be started
 * (no figure it could print would mean anything). */
static double run_once(bench_fn fn, const bench_ctx *c, const bench_key *keys, size_t n,
                       unsigned passes, unsigned threads) {
  atomic_uint arrived = 0;
  pthread_t tid[BENCH_THREADS_MAX];
  worker w[BENCH_THREADS_MAX];
  for (unsigned i = 0; i < threads; i++) {
    w[i] = (worker){.fn = fn,
                    .ctx = c,
                    .keys = keys,
                    .n = n,
                    .passes = passes,
                    .arrived = &arrived,
                    .threads = threads};
    if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0) {
      fprintf(stderr, "bench_lookup: cannot start threads\n");
      exit(1); /* the started ones spin at the barrier; exit ends them */
    }
  }
  double first = 0, last = 0;
  for (unsigned i = 0; i < threads; i++) {
    pthread_join(tid[i], NULL);
    sink += w[i].acc;
    double a = ts_sec(&w[i].t0), b = ts_sec(&w[i].t1);
    if (i == 0 || a < first)
      first = a;
    if (i == 0 || b > last)
      last = b;
  }
  return last - first;
}

/* One measured configuration and its results. */
typedef struct bench_case {
  int sys;          /* SYS_* */
  unsigned threads; /* 1 or 2 */
  size_t keys;      /* keys each thread looks up per pass */
  unsigned passes;  /* passes per run, set from the warm-up run */
  unsigned repeats; /* timed runs */
  double wall[BENCH_REPEATS_MAX * BENCH_CHEAP_FACTOR];
  double best_ns; /* best wall time / keys: what each thread sees per key */
  double median_ns;
  double mlps; /* aggregate Mlookups/s at the best run */
} bench_case;

static void case_summarize(bench_case *bc) {
  const unsigned repeats = bc->repeats;
  double s[BENCH_REPEATS_MAX * BENCH_CHEAP_FACTOR];
  memcpy(s, bc->wall, repeats * sizeof *s);
  double med = bench_median(s, repeats); /* sorts s: s[0] is the best */
  const double per_run = (double)bc->keys * bc->passes;
  bc->best_ns = s[0] * 1e9 / per_run;
  bc->median_ns = med * 1e9 / per_run;
  bc->mlps = per_run * bc->threads / s[0] * 1e-6;
}

static double case_run(const bench_case *bc, const bench_ctx *c, const keyset *ks) {
  return run_once(systems[bc->sys].fn, c, ks->key, bc->keys, bc->passes, bc->threads);
}

/* Wakes both cores before the first figure: a vCPU that has idled a while
 * can take a run or two to be scheduled at full speed. */
static void warm_up_machine(const keyset *ks) {
  const bench_ctx c = {.seed = 1};
  for (int i = 0; i < 5; i++)
    (void)run_once(run_cpu_only, &c, ks->key, ks->n, 1, BENCH_THREADS_MAX);
}

/* One untimed warm-up pass per case (page faults, caches, branch history)
 * that also sets its passes per run, then rounds that each run every case
 * that still wants a run, once. */
static void measure(bench_case *cases, size_t n_cases, const bench_ctx *c, const keyset *ks,
                    double min_run_s) {
  unsigned rounds = 0;
  for (size_t i = 0; i < n_cases; i++) {
    bench_case *bc = &cases[i];
    bc->passes = 1;
    double warm = case_run(bc, c, ks);
    double want = warm > 0 ? min_run_s / warm : BENCH_PASSES_MAX;
    bc->passes = want >= BENCH_PASSES_MAX ? BENCH_PASSES_MAX : want > 1 ? (unsigned)want + 1 : 1;
    if (bc->repeats > rounds)
      rounds = bc->repeats;
  }
  for (unsigned r = 0; r < rounds; r++)
    for (size_t i = 0; i < n_cases; i++)
      if (r < cases[i].repeats)
        cases[i].wall[r] = case_run(&cases[i], c, ks);
  for (size_t i = 0; i < n_cases; i++)
    case_summarize(&cases[i]);
}

/* ---------------------------------------------- 4. one node count */

/* best ns/lookup by [system][size][threads - 1]; 0 where not measured */
static double result_ns[N_SYS][N_SIZES][BENCH_THREADS_MAX];
static double result_mlps[N_SYS][N_SIZES][BENCH_THREADS_MAX];
static size_t table_heap[N_SIZES];  /* heap bytes test_table_rr left in use */
static size_t ketama_heap[N_SIZES]; /* heap bytes of the default ketama client */
#ifdef HAVE_LIBMEMCACHED
static long long ketama_agree[N_SIZES] = {-1, -1, -1, -1}; /* replica == libmemcached */
#endif

#ifdef HAVE_LIBMEMCACHED
/* libmemcached 1.1.x aborts (assert in update_continuum) when servers * 100
 * exceeds MEMCACHED_CONTINUUM_SIZE, so the real client stops at 100. */
#define KETAMA_MAX_SERVERS (MEMCACHED_CONTINUUM_SIZE / MEMCACHED_POINTS_PER_SERVER)

/* Fake server i: 127.x.y.z on the default port (never contacted). */
static void ketama_host(char *buf, size_t size, uint32_t i) {
  uint32_t a = i + 1;
  snprintf(buf, size, "127.%u.%u.%u", (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* A ketama client over n fake servers: md5 = 0 is MEMCACHED_BEHAVIOR_KETAMA
 * (libmemcached's default one-at-a-time hash, 100 points a server), md5 = 1
 * is MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED (libketama-compatible: MD5, 160
 * points a server). Returns NULL, holding nothing, on failure or when n is
 * over KETAMA_MAX_SERVERS. */
static memcached_st *ketama_new(uint32_t n, int md5) {
  memcached_server_list_st list = NULL;
  memcached_return_t rc;
  if (n > KETAMA_MAX_SERVERS)
    return NULL;
  memcached_st *m = memcached_create(NULL);
  if (m == NULL)
    return NULL;
  rc = memcached_behavior_set(
      m, md5 ? MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED : MEMCACHED_BEHAVIOR_KETAMA, 1);
  if (rc != MEMCACHED_SUCCESS)
    goto fail;
  /* One push builds the continuum once; memcached_server_add per server
   * would rebuild it N times (same continuum, slower setup). */
  for (uint32_t i = 0; i < n; i++) {
    char host[32];
    ketama_host(host, sizeof host, i);
    memcached_server_list_st next = memcached_server_list_append(list, host, 11211, &rc);
    if (next == NULL || rc != MEMCACHED_SUCCESS) {
      list = next ? next : list;
      goto fail;
    }
    list = next;
  }
  rc = memcached_server_push(m, list);
  if (rc != MEMCACHED_SUCCESS || memcached_server_count(m) != n)
    goto fail;
  memcached_server_list_free(list);
  return m;
fail:
  memcached_server_list_free(list);
  memcached_free(m);
  return NULL;
}

static int cmp_point(const void *a, const void *b) {
  const ketama_point *x = a, *y = b;
  if (x->value != y->value)
    return x->value < y->value ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/* libmemcached's unweighted continuum rebuilt outside it (so it can go past
 * 100 servers): 100 points a server, hash("<host>-<i>"), sorted by (value,
 * server). Returns a malloc()'ed array of n * 100 points that the caller
 * free()s, or NULL. */
static ketama_point *ketama_replica_new(uint32_t n, memcached_hash_t hash) {
  const uint32_t per = MEMCACHED_POINTS_PER_SERVER;
  ketama_point *pts = malloc((size_t)n * per * sizeof *pts);
  if (pts == NULL)
    return NULL;
  for (uint32_t i = 0; i < n; i++) {
    char host[32], point[48];
    ketama_host(host, sizeof host, i);
    for (uint32_t j = 0; j < per; j++) {
      int w = snprintf(point, sizeof point, "%s-%u", host, j);
      pts[(size_t)i * per + j] =
          (ketama_point){memcached_generate_hash_value(point, (size_t)w, hash), i};
    }
  }
  qsort(pts, (size_t)n * per, sizeof *pts, cmp_point);
  return pts;
}

/* Keys on which the replica and libmemcached disagree. */
static size_t ketama_replica_check(const bench_ctx *c, const keyset *ks) {
  size_t bad = 0;
  for (size_t i = 0; i < ks->n; i++) {
    const bench_key *k = &ks->key[i];
    uint32_t h = memcached_generate_hash_value(k->p, k->len, c->ketama_hash);
    bad += ketama_find(c->points, c->n_points, h) != memcached_generate_hash(c->memc, k->p, k->len);
  }
  return bad;
}
#endif

static size_t add_case(bench_case *cases, size_t n, int sys, unsigned threads, size_t keys,
                       unsigned repeats) {
  cases[n] = (bench_case){.sys = sys, .threads = threads, .keys = keys, .repeats = repeats};
  return n + 1;
}

/* Rendezvous keys for N nodes: all of them while the budget allows. */
static size_t rendezvous_keys(const bench_opts *o, uint32_t nodes) {
  double budget = BENCH_RENDEZVOUS_BUDGET / (o->quick ? 10 : 1);
  double k = budget / nodes;
  if (k >= (double)o->keys)
    return o->keys;
  return k < 1000 ? 1000 : (size_t)k;
}

static void print_header(void) {
  printf("%-26s %6s %3s %8s %4s %4s %10s %10s %11s %8s\n", "system", "nodes", "thr", "keys", "pass",
         "runs", "ns/lookup", "median ns", "Mlookups/s", "x xxh3");
  printf("%-26s %6s %3s %8s %4s %4s %10s %10s %11s %8s\n", "--------------------------", "------",
         "---", "--------", "----", "----", "----------", "----------", "-----------", "--------");
}

/* The 1-minute load average, or a negative value where unknown. Other work
 * on the machine shows up in the figures, in the 2-thread ones above all. */
static double load_average(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f != NULL) {
    if (fscanf(f, "%lf", &l) != 1)
      l = -1;
    fclose(f);
  }
  return l;
}

#ifdef HAVE_LIBMEMCACHED
/* The ketama clients for node_counts[si] (NULL past 100 servers) and the
 * replica continuum (*points, the caller free()s it), checked key by key
 * against libmemcached where both exist. Returns 0, or -1 (reported) with
 * nothing held. */
static int ketama_setup(bench_ctx *c, ketama_point **points, size_t si, const keyset *ks) {
  const uint32_t nodes = node_counts[si];
  size_t before = heap_in_use();
  c->memc = ketama_new(nodes, 0);
  ketama_heap[si] = c->memc ? heap_in_use() - before : 0;
  c->memc_md5 = ketama_new(nodes, 1);
  c->ketama_hash = MEMCACHED_HASH_DEFAULT;
  if (c->memc != NULL)
    c->ketama_hash = (memcached_hash_t)memcached_behavior_get(c->memc, MEMCACHED_BEHAVIOR_HASH);
  *points = ketama_replica_new(nodes, c->ketama_hash);
  if (*points == NULL || (nodes <= KETAMA_MAX_SERVERS && (!c->memc || !c->memc_md5))) {
    fprintf(stderr, "bench_lookup: ketama setup for %u nodes failed\n", nodes);
    memcached_free(c->memc);
    memcached_free(c->memc_md5);
    free(*points);
    return -1;
  }
  c->points = *points;
  c->n_points = nodes * MEMCACHED_POINTS_PER_SERVER;
  if (c->memc != NULL)
    ketama_agree[si] = (long long)(ks->n - ketama_replica_check(c, ks));
  return 0;
}
#endif

/* Runs every case for one node count and prints its rows. Returns 0, or -1
 * if a table or client could not be built (reported). */
static int bench_size(size_t si, const bench_opts *o, const keyset *ks) {
  const uint32_t nodes = node_counts[si];
  bench_ctx c = {.nodes = nodes};

  size_t before = heap_in_use();
  ring_table *t = test_table_rr(o->tokens, BENCH_REPLICAS, nodes, BENCH_ZONES, NULL, 1);
  table_heap[si] = heap_in_use() - before;
  c.table = t;
  c.view = ring_table_view(t);
  c.seed = ring_table_seed(t);

  uint64_t *node_hash = malloc(nodes * sizeof *node_hash);
  if (node_hash == NULL) {
    ring_table_free(t);
    fprintf(stderr, "bench_lookup: out of memory\n");
    return -1;
  }
  for (uint32_t i = 0; i < nodes; i++) {
    const char *id = ring_table_node_id(t, (uint16_t)i);
    node_hash[i] = XXH3_64bits(id, strlen(id));
  }
  c.node_hash = node_hash;

  bench_case cases[24];
  size_t n = 0;
  const unsigned rep = o->repeats, cheap = o->repeats * BENCH_CHEAP_FACTOR;
  for (unsigned th = 1; th <= BENCH_THREADS_MAX; th++) {
    n = add_case(cases, n, SYS_XXH3, th, ks->n, cheap);
    n = add_case(cases, n, SYS_RING_CALL, th, ks->n, cheap);
    n = add_case(cases, n, SYS_RING_VIEW, th, ks->n, cheap);
    n = add_case(cases, n, SYS_RING_OWNERS, th, ks->n, cheap);
    n = add_case(cases, n, SYS_RING_PRIMARY, th, ks->n, cheap);
    n = add_case(cases, n, SYS_JUMP, th, ks->n, rep);
    n = add_case(cases, n, SYS_CPU_ONLY, th, ks->n, cheap);
  }
#ifdef HAVE_LIBMEMCACHED
  ketama_point *points = NULL;
  if (ketama_setup(&c, &points, si, ks) != 0) {
    free(node_hash);
    ring_table_free(t);
    return -1;
  }
  const size_t ketama_keys = nodes >= BENCH_KETAMA_BIG_NODES ? ks->n / 4 : ks->n;
  if (c.memc != NULL)
    n = add_case(cases, n, SYS_KETAMA, 1, ks->n, rep);
  if (c.memc_md5 != NULL)
    n = add_case(cases, n, SYS_KETAMA_MD5, 1, ks->n, rep);
  n = add_case(cases, n, SYS_KETAMA_REPLICA, 1, ketama_keys, rep);
#endif
  n = add_case(cases, n, SYS_RENDEZVOUS, 1, rendezvous_keys(o, nodes), rep);

  measure(cases, n, &c, ks, o->quick ? BENCH_MIN_RUN_S_QUICK : BENCH_MIN_RUN_S);

  for (size_t i = 0; i < n; i++) {
    bench_case *bc = &cases[i];
    result_ns[bc->sys][si][bc->threads - 1] = bc->best_ns;
    result_mlps[bc->sys][si][bc->threads - 1] = bc->mlps;
  }
  /* Print grouped by thread count, baseline first. */
  for (unsigned th = 1; th <= BENCH_THREADS_MAX; th++)
    for (int s = 0; s < N_SYS; s++)
      for (size_t i = 0; i < n; i++) {
        const bench_case *bc = &cases[i];
        if (bc->sys != s || bc->threads != th || s == SYS_CPU_ONLY)
          continue;
        double base = result_ns[SYS_XXH3][si][th - 1];
        printf("%-26s %6u %3u %8zu %4u %4u %10.2f %10.2f %11.1f %7.2fx\n", systems[s].name, nodes,
               th, bc->keys, bc->passes, bc->repeats, bc->best_ns, bc->median_ns, bc->mlps,
               base > 0 ? bc->best_ns / base : 0.0);
      }
  printf("\n");

#ifdef HAVE_LIBMEMCACHED
  memcached_free(c.memc);
  memcached_free(c.memc_md5);
  free(points);
#endif
  free(node_hash);
  ring_table_free(t);
  return 0;
}

/* Best ns per key of XXH3, ring_lookup, ring_view_lookup and
 * ring_view_owners at 100 nodes, T tokens, 1 thread, on keyset ks.
 * Returns 0, or -1 (reported). */
static int ratio_case(const bench_opts *o, const keyset *ks, uint32_t T, double ns[4]) {
  ring_table *t = test_table_rr(T, BENCH_REPLICAS, 100, BENCH_ZONES, NULL, 1);
  if (t == NULL) {
    fprintf(stderr, "bench_lookup: no table for T=%u\n", T);
    return -1;
  }
  bench_ctx c = {.table = t, .view = ring_table_view(t), .seed = ring_table_seed(t), .nodes = 100};
  bench_case cases[4];
  const unsigned cheap = o->repeats * BENCH_CHEAP_FACTOR;
  size_t n = add_case(cases, 0, SYS_XXH3, 1, ks->n, cheap);
  n = add_case(cases, n, SYS_RING_CALL, 1, ks->n, cheap);
  n = add_case(cases, n, SYS_RING_VIEW, 1, ks->n, cheap);
  n = add_case(cases, n, SYS_RING_OWNERS, 1, ks->n, cheap);
  measure(cases, n, &c, ks, o->quick ? BENCH_MIN_RUN_S_QUICK : BENCH_MIN_RUN_S);
  for (int i = 0; i < 4; i++)
    ns[i] = cases[i].best_ns;
  ring_table_free(t);
  return 0;
}

static void print_ratio_header(void) {
  printf("  %8s %12s %10s %12s %17s %17s\n", "T", "owners bytes", "xxh3 ns", "ring_lookup",
         "ring_view_lookup", "ring_view_owners");
}

static void print_ratio_case(uint32_t T, const double ns[4]) {
  printf("  %8u %12zu %10.2f %11.2fx %16.2fx %16.2fx\n", T,
         (size_t)T * BENCH_REPLICAS * sizeof(uint16_t), ns[0], ns[1] / ns[0], ns[2] / ns[0],
         ns[3] / ns[0]);
}

/* The lookup against XXH3 as the table grows, at 100 nodes: the owners
 * array (T*R*2 bytes) leaves the L1 data cache somewhere in this range,
 * and from there every lookup pays an L1 miss on top of the hash. */
static const uint32_t token_counts[] = {256, 1024, 4096, 16384, 65536};
#define N_TOKEN_COUNTS (sizeof token_counts / sizeof token_counts[0])

static int bench_tokens(const bench_opts *o, const keyset *ks) {
  printf("libring / xxh3 time ratio by table size, hot keys, N=100, 1 thread (L1d %ld bytes, "
         "L2 %ld bytes per core):\n",
         sysconf(_SC_LEVEL1_DCACHE_SIZE), sysconf(_SC_LEVEL2_CACHE_SIZE));
  print_ratio_header();
  for (size_t ti = 0; ti < N_TOKEN_COUNTS; ti++) {
    double ns[4];
    if (ratio_case(o, ks, token_counts[ti], ns) != 0)
      return -1;
    print_ratio_case(token_counts[ti], ns);
  }
  printf("\n");
  return 0;
}

/* The same ratio with keys streamed from memory, at T = --tokens. */
static int bench_cold(const bench_opts *o) {
  keyset cold;
  const size_t n = o->quick ? BENCH_COLD_KEYS_QUICK : BENCH_COLD_KEYS;
  if (keyset_init(&cold, n) != 0) {
    fprintf(stderr, "bench_lookup: out of memory for %zu keys\n", n);
    return -1;
  }
  double ns[4];
  int rc = ratio_case(o, &cold, o->tokens, ns);
  if (rc == 0) {
    printf("libring / xxh3 time ratio with cold keys (%zu keys, streamed from memory), N=100, "
           "1 thread:\n",
           n);
    print_ratio_header();
    print_ratio_case(o->tokens, ns);
    printf("\n");
  }
  keyset_free(&cold);
  return rc;
}

/* ------------------------------------------------------- 5. the report */

static void print_ratio_row(const char *label, int sys) {
  printf("  %-30s", label);
  for (size_t si = 0; si < N_SIZES; si++) {
    double base = result_ns[SYS_XXH3][si][0], x = result_ns[sys][si][0];
    if (base > 0 && x > 0)
      printf(" %8.2f", x / base);
    else
      printf(" %8s", "-");
  }
  printf("\n");
}

static void print_speedup_row(int sys) {
  printf("  %-30s", systems[sys].name);
  for (size_t si = 0; si < N_SIZES; si++) {
    double one = result_mlps[sys][si][0], two = result_mlps[sys][si][1];
    if (one > 0 && two > 0)
      printf(" %7.2fx", two / one);
    else
      printf(" %8s", "-");
  }
  printf("\n");
}

static void print_sizes_header(const char *title) {
  printf("  %-30s", title);
  for (size_t si = 0; si < N_SIZES; si++)
    printf(" %8u", node_counts[si]);
  printf("\n");
}

static size_t size_index(uint32_t nodes) {
  for (size_t si = 0; si < N_SIZES; si++)
    if (node_counts[si] == nodes)
      return si;
  return 0;
}

static void print_derived(const bench_opts *o, size_t keys_total) {
  const size_t s10 = size_index(10), s10k = size_index(10000);
  printf("derived figures (best runs; 1 thread unless noted)\n\n");

  printf("libring / xxh3 time ratio, hot keys, T = %u (target <= 1.6; ring_view_owners is the\n"
         "inline lookup of the R owners, read in place; ring_view_lookup copies them out):\n",
         o->tokens);
  print_sizes_header("nodes");
  print_ratio_row("ring_lookup (library call)", SYS_RING_CALL);
  print_ratio_row("ring_view_lookup (inline)", SYS_RING_VIEW);
  print_ratio_row("ring_view_owners (inline, 3)", SYS_RING_OWNERS);
  print_ratio_row("ring_view_primary (inline, 1)", SYS_RING_PRIMARY);
  print_ratio_row("(jump hash, for reference)", SYS_JUMP);
  printf("\n");

  printf("ketama / libring at 100 nodes (target >= 30x):\n");
#ifdef HAVE_LIBMEMCACHED
  const size_t s100 = size_index(100);
  for (int k = SYS_KETAMA; k <= SYS_KETAMA_REPLICA; k++) {
    double ket = result_ns[k][s100][0];
    if (ket <= 0)
      continue;
    for (int r = SYS_RING_CALL; r <= SYS_RING_VIEW; r++)
      printf("  %-24s / %-25s %7.1fx  (%.1f ns vs %.2f ns)\n", systems[k].name, systems[r].name,
             ket / result_ns[r][s100][0], ket, result_ns[r][s100][0]);
  }
  printf("  ketama over N (replica, ns):");
  for (size_t si = 0; si < N_SIZES; si++)
    printf("  N=%u %.1f", node_counts[si], result_ns[SYS_KETAMA_REPLICA][si][0]);
  printf("\n");
  for (size_t si = 0; si < N_SIZES; si++)
    if (ketama_agree[si] >= 0)
      printf("  replica check N=%u: %lld of %zu keys map to the server libmemcached "
             "picks\n",
             node_counts[si], ketama_agree[si], keys_total);
  printf("  (libmemcached asserts servers * %d <= MEMCACHED_CONTINUUM_SIZE = %d and aborts,\n"
         "   so the real client stops at %d servers; past that only the replica runs)\n",
         MEMCACHED_POINTS_PER_SERVER, MEMCACHED_CONTINUUM_SIZE, KETAMA_MAX_SERVERS);
#else
  (void)keys_total;
  printf("  not measured (built without libmemcached)\n");
#endif
  printf("\n");

  printf("libring flat in N (T = %u for every N): ns at 10 vs 10000 nodes\n", o->tokens);
  for (int s = SYS_RING_CALL; s <= SYS_RING_VIEW; s++) {
    double a = result_ns[s][s10][0], b = result_ns[s][s10k][0];
    printf("  %-30s %6.2f ns -> %6.2f ns  (x%.2f)\n", systems[s].name, a, b, b / a);
  }
  printf("\n");

  printf("2-thread speedup, aggregate Mlookups/s 2T / 1T (target >= 1.8x):\n");
  print_sizes_header("nodes");
  print_speedup_row(SYS_XXH3);
  print_speedup_row(SYS_RING_CALL);
  print_speedup_row(SYS_RING_VIEW);
  print_speedup_row(SYS_RING_OWNERS);
  print_speedup_row(SYS_RING_PRIMARY);
  print_speedup_row(SYS_JUMP);
  print_speedup_row(SYS_CPU_ONLY);
  printf("  (the cpu-only row touches no memory: it is the most this machine gave two\n"
         "   threads while that node count ran; near 1.0x, something else held a core)\n\n");

  const size_t owners = (size_t)o->tokens * BENCH_REPLICAS * sizeof(uint16_t);
  printf("memory:\n");
  printf("  libring owners array T*R*2 = %u*%u*2 = %zu bytes (%.0f KiB), any N\n", o->tokens,
         BENCH_REPLICAS, owners, (double)owners / 1024);
  for (size_t si = 0; si < N_SIZES; si++) {
    if (table_heap[si] == 0)
      continue; /* no mallinfo2 */
    printf("  N=%-6u libring table heap %10zu bytes (node list etc. %zu bytes, "
           "%.0f B/node)",
           node_counts[si], table_heap[si], table_heap[si] > owners ? table_heap[si] - owners : 0,
           table_heap[si] > owners ? (double)(table_heap[si] - owners) / node_counts[si] : 0.0);
    if (ketama_heap[si] > 0)
      printf("; ketama client %zu bytes", ketama_heap[si]);
#ifdef HAVE_LIBMEMCACHED
    printf("; ketama continuum %zu bytes",
           (size_t)node_counts[si] * MEMCACHED_POINTS_PER_SERVER * sizeof(ketama_point));
#endif
    printf("\n");
  }
}

int main(int argc, char **argv) {
  bench_opts o;
  setvbuf(stdout, NULL, _IOLBF, 0); /* rows survive a crash in a system under test */
  int rc = parse_opts(argc, argv, &o);
  if (rc != 0)
    return rc > 0 ? 0 : 2;

  keyset ks;
  if (keyset_init(&ks, o.keys) != 0) {
    fprintf(stderr, "bench_lookup: out of memory for %zu keys\n", o.keys);
    return 1;
  }
  printf("bench_lookup: %zu keys \"session-0\"..\"session-%zu\", best of %u runs "
         "(cheap cases %u)%s\n",
         ks.n, ks.n - 1, o.repeats, o.repeats * BENCH_CHEAP_FACTOR, o.quick ? " (quick)" : "");
  printf("libring tables: test_table_rr(T=%u, R=%u, N, zones=%u); XXH3 seed = table "
         "seed\n",
         o.tokens, BENCH_REPLICAS, BENCH_ZONES);
  printf("keys = keys per pass, pass = passes per run (a run lasts >= %.0f ms), runs = "
         "timed runs;\n"
         "ns/lookup = best run's wall time / (keys * passes), per thread; Mlookups/s = "
         "aggregate\nover threads; x xxh3 = ns/lookup over xxh3's at the same N and "
         "thread count\n",
         (o.quick ? BENCH_MIN_RUN_S_QUICK : BENCH_MIN_RUN_S) * 1e3);
  printf("load average at start: %.2f\n\n", load_average());
  print_header();

  warm_up_machine(&ks);
  int failed = 0;
  for (size_t si = 0; si < N_SIZES && !failed; si++)
    failed = bench_size(si, &o, &ks) != 0;
  if (!failed)
    print_derived(&o, ks.n);
  if (!failed)
    failed = bench_tokens(&o, &ks) != 0;
  if (!failed)
    failed = bench_cold(&o) != 0;
  printf("\nload average at end: %.2f\n", load_average());
  printf("(sink %llu)\n", (unsigned long long)sink);
  keyset_free(&ks);
  return failed;
}
