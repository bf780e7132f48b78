/*
 * bench_plan.c: what the planner (ring_plan_compute) costs on a large
 * cluster: time, moves against the lower bound, balance, best-effort
 * violations, waves and memory, per kind of change. Prints figures next to
 * the targets; it never passes or fails on them.
 *
 * Sections:
 *   1. options and the cluster
 *   2. measuring: time (best of a few runs) and memory (peak RSS)
 *   3. the cases and the report
 *
 * The cluster: 1000 nodes of weight 1 in 10 zones x 10 racks (hard level
 * zone, best-effort level rack), T = 65536, R = 3, at most 4 concurrent
 * moves per node. Every change is planned from the initial placement's
 * target, so each row is one change to a balanced ring. `--quick` (the CI
 * smoke run of tests/run.sh) uses 100 nodes in 10 zones x 2 racks,
 * T = 16384, and a new zone of 10 nodes. Bytes balance: the initial
 * target re-planned by bytes (arc sizes Pareto(1.2) capped at 200x their
 * mean, half empty), then a 1-node join of that, by bytes (issue 27's
 * target: 50 ms at 1,000 nodes).
 *
 * Memory: there is no malloc counter, so RSS stands in. Before each case
 * the heap is trimmed (glibc malloc_trim) and the process's peak-RSS mark
 * is reset (writing "5" to /proc/self/clear_refs, Linux >= 4.0), so
 * ru_maxrss after the case's first run is that case's own peak. A row
 * prints RSS before, ru_maxrss after, and the delta: what the planner's
 * working state and its plan took on top of the cluster and the base
 * table. Without clear_refs ru_maxrss is the process's high-water mark,
 * and the footer says so.
 *
 *   bench_plan [--quick] [--runs N]
 */
#define _POSIX_C_SOURCE 200809L

#include "cluster.h" /* rk_plan_eta: what the estimate of such a plan costs */
#include "ring.h"
#include "test_cluster.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#define BENCH_RUNS_DEFAULT 5u /* timed runs per change; the best is kept */
#define BENCH_RUNS_INITIAL 3u /* initial placement is the slow one */
#define BENCH_RUNS_MAX 50u
#define BENCH_TARGET_CHANGE_MS 100.0    /* the issue: a single join or drain */
#define BENCH_TARGET_INITIAL_MS 2000.0  /* the issue: initial placement */
#define BENCH_TARGET_MIB 64.0           /* the issue: memory */
#define BENCH_TARGET_BYTES_JOIN_MS 50.0 /* issue 27: a 1-node join by bytes at 1,000 nodes */

/* ------------------------------------------------- 1. options and cluster */

typedef struct bench_opts {
  uint32_t zones, racks, per_rack; /* nodes = zones * racks * per_rack */
  uint32_t tokens, replicas;
  uint32_t new_zone_nodes; /* the "+1 zone" case */
  unsigned runs;           /* 0: the defaults above */
  int quick;
} bench_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_plan [--quick] [--runs N]\n"
          "  --quick   a CI smoke run: 100 nodes, T=16384 (default: 1000 nodes, T=65536)\n"
          "  --runs N  timed runs per case, best kept (default %u, initial placement %u)\n",
          BENCH_RUNS_DEFAULT, BENCH_RUNS_INITIAL);
}

/* Returns 0 on success, 1 for --help, -1 on a bad argument (reported). */
static int parse_opts(int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){10, 10, 10, 65536, 3, 100, 0, 0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      o->quick = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 1;
    } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      char *end = NULL;
      errno = 0;
      unsigned long v = strtoul(argv[++i], &end, 10);
      if (errno != 0 || *end != '\0' || v < 1 || v > BENCH_RUNS_MAX) {
        fprintf(stderr, "bench_plan: --runs wants 1 .. %u\n", BENCH_RUNS_MAX);
        return -1;
      }
      o->runs = (unsigned)v;
    } else {
      usage(stderr);
      return -1;
    }
  }
  if (o->quick)
    o->racks = 2, o->per_rack = 5, o->tokens = 16384, o->new_zone_nodes = 10;
  return 0;
}

/* Appends `count` nodes of zone z, round-robin over its racks. */
static void add_zone(test_cluster *c, uint32_t z, uint32_t racks, uint32_t count) {
  for (uint32_t i = 0; i < count; i++) {
    char id[32], zone[16], rack[16];
    snprintf(id, sizeof id, "n%u", c->n);
    snprintf(zone, sizeof zone, "z%u", z);
    snprintf(rack, sizeof rack, "z%u-r%u", z, i % racks);
    cluster_add(c, id, zone, rack, 1.0, RING_NODE_ACTIVE);
  }
}

static test_cluster make_cluster(const bench_opts *o) {
  test_cluster c = {0};
  for (uint32_t z = 0; z < o->zones; z++)
    add_zone(&c, z, o->racks, o->racks * o->per_rack);
  return c;
}

/* ------------------------------------------------------------ 2. measuring */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* A "VmRSS:"-style line of /proc/self/status in MiB, or -1. */
static double status_mib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return -1;
  char line[256];
  double mib = -1;
  size_t len = strlen(field);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, field, len) == 0) {
      mib = strtod(line + len, NULL) / 1024.0; /* the kernel prints kB */
      break;
    }
  fclose(f);
  return mib;
}

/* Resets the peak-RSS mark; 0 on success. */
static int reset_peak(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL)
    return -1;
  int ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}

static double maxrss_mib(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : -1;
}

typedef struct figures {
  double best_ms, verify_ms;
  double rss_before; /* MiB, VmRSS before the case */
  double maxrss;     /* MiB, ru_maxrss after the case's first run */
} figures;

static int g_peak_reset; /* whether /proc/self/clear_refs worked */

/* Plans `runs` times (memory is read after the first run, before later
 * runs could reuse freed pages), keeps the last plan in *out. Returns the
 * first failure's code with err filled. */
static int measure(const ring_table *base, const test_cluster *c, const ring_plan_config *cfg,
                   unsigned runs, ring_plan **out, figures *fig, ring_error *err) {
#ifdef __GLIBC__
  malloc_trim(0); /* hand freed heap back, so RSS before is what is live */
#endif
  g_peak_reset = reset_peak() == 0;
  fig->rss_before = status_mib("VmRSS:");
  fig->best_ms = -1;
  *out = NULL;
  for (unsigned r = 0; r < runs; r++) {
    ring_plan_free(*out);
    *out = NULL;
    double t0 = now_ms();
    int rc = ring_plan_compute(base, c->specs, c->n, cfg, out, err);
    double ms = now_ms() - t0;
    if (rc != RING_OK)
      return rc;
    if (r == 0)
      fig->maxrss = maxrss_mib();
    if (fig->best_ms < 0 || ms < fig->best_ms)
      fig->best_ms = ms;
  }
  return RING_OK;
}

/* ------------------------------------------------- 3. the cases, the report */

/* The most loaded serving node against its weighted target. */
static double max_load_ratio(const ring_plan *p) {
  const ring_table *t = ring_plan_target(p);
  double worst = 0;
  for (uint32_t i = 0; i < ring_table_node_count(t); i++) {
    ring_plan_load l;
    ring_node_state s = ring_table_node_state(t, (uint16_t)i);
    if ((s != RING_NODE_ACTIVE && s != RING_NODE_JOINING) ||
        ring_plan_node_load(p, (uint16_t)i, &l) != RING_OK || l.target <= 0)
      continue;
    double ratio = l.after / l.target;
    worst = ratio > worst ? ratio : worst;
  }
  return worst;
}

static void print_header(const bench_opts *o, uint32_t nodes, const ring_plan_config *cfg) {
  printf("bench_plan: %u nodes in %u zones x %u racks, T=%u, R=%u, failure_domain=%s, "
         "best_effort=%s, max_moves_per_node=%u%s\n",
         nodes, o->zones, o->racks, o->tokens, o->replicas, cfg->failure_domain, cfg->best_effort,
         cfg->max_moves_per_node, o->quick ? " (--quick)" : "");
  printf("targets: initial placement <= %.0f ms, a single join or drain <= %.0f ms, "
         "memory <= %.0f MiB\n",
         BENCH_TARGET_INITIAL_MS, BENCH_TARGET_CHANGE_MS, BENCH_TARGET_MIB);
  printf("%-22s %9s %7s %7s %7s %9s %7s %6s %7s %9s %9s %9s %9s\n", "case", "ms(best)", "target",
         "moves", "lower", "maxload/", "be", "waves", "verify", "verify", "RSS", "ru_maxrss",
         "delta");
  printf("%-22s %9s %7s %7s %7s %9s %7s %6s %7s %9s %9s %9s %9s\n", "", "", "ms", "", "bound",
         "target", "viol.", "", "viol.", "ms", "before", "after", "MiB");
}

static void print_row(const char *name, double target_ms, const ring_plan *p, const figures *f,
                      int violations) {
  char target[16];
  if (target_ms > 0)
    snprintf(target, sizeof target, "%.0f", target_ms);
  else
    snprintf(target, sizeof target, "-");
  printf("%-22s %9.1f %7s %7u %7u %9.4f %7u %6u %7d %9.1f %9.1f %9.1f %9.1f\n", name, f->best_ms,
         target, ring_plan_move_count(p), ring_plan_lower_bound(p), max_load_ratio(p),
         ring_plan_best_effort_violations(p), ring_plan_wave_count(p), violations, f->verify_ms,
         f->rss_before, f->maxrss, f->maxrss - f->rss_before);
}

/* The ETA of p (cluster/plan_eta.c: the run's steps simulated with the
 * run's chooser, 256 moves a step) with every arc 1 MB at 1 MB/s: what
 * `ringctl plan` and the status page pay for it on a plan this size. */
static void print_eta_cost(const char *name, const ring_plan *p) {
  uint32_t T = ring_table_tokens(ring_plan_target(p));
  uint64_t *arc = malloc(T * sizeof *arc);
  if (arc == NULL)
    return;
  for (uint32_t t = 0; t < T; t++)
    arc[t] = 1000000;
  rk_throttle th = {.moves_per_node = 4, .moves_per_wave = 256, .bytes_per_sec = 1000000};
  rk_eta e;
  double t0 = now_ms();
  if (rk_plan_eta(p, arc, &th, &e) == RING_OK)
    printf("%-22s eta %.0f s (busiest receiver alone %.0f s) in %u steps, computed in %.1f ms\n",
           name, (double)e.ms / 1e3, (double)e.ideal_ms / 1e3, e.steps, now_ms() - t0);
  free(arc);
}

/* Plans one case from `base`, prints its row, and hands the plan back
 * (NULL when the planner refused; the refusal is printed instead). */
static ring_plan *run_case(const char *name, double target_ms, const ring_table *base,
                           const test_cluster *c, const ring_plan_config *cfg, unsigned runs) {
  ring_plan *p = NULL;
  ring_error err = {0};
  figures f = {0};
  int rc = measure(base, c, cfg, runs, &p, &f, &err);
  if (rc != RING_OK) {
    printf("%-22s planner refused: %s: %s\n", name, ring_strerror(rc), err.message);
    ring_plan_free(p);
    return NULL;
  }
  double t0 = now_ms();
  int violations = ring_plan_verify(base, p, cfg, NULL);
  f.verify_ms = now_ms() - t0;
  print_row(name, target_ms, p, &f, violations);
  print_eta_cost(name, p);
  fflush(stdout);
  return p;
}

/* One change to the initial target: the cluster is changed for the
 * call and restored after it. */
static void run_changes(const bench_opts *o, test_cluster *c, const ring_table *base,
                        const ring_plan_config *cfg, unsigned runs) {
  const uint32_t n = c->n;
  add_zone(c, 0, o->racks, 1);
  ring_plan_free(run_case("+1 node", BENCH_TARGET_CHANGE_MS, base, c, cfg, runs));
  c->n = n;
  c->specs[0].state = RING_NODE_DRAINING;
  ring_plan_free(run_case("-1 node (drain)", BENCH_TARGET_CHANGE_MS, base, c, cfg, runs));
  c->specs[0].state = RING_NODE_ACTIVE;
  add_zone(c, o->zones, o->racks, o->new_zone_nodes);
  char name[32];
  snprintf(name, sizeof name, "+1 zone of %u nodes", o->new_zone_nodes);
  ring_plan_free(run_case(name, 0, base, c, cfg, runs));
  c->n = n;
  c->specs[0].state = RING_NODE_DOWN;
  ring_plan_free(run_case("one node down", 0, base, c, cfg, runs));
  c->specs[0].state = RING_NODE_ACTIVE;
}

/* Pareto(1.2) arc sizes capped at 200x their mean, half of them empty
 * (what test_plan_bytes_scale draws). */
static uint64_t *bytes_sizes(uint32_t T) {
  uint64_t *sizes = malloc(T * sizeof *sizes), s = 0x62656e6368ull;
  double *raw = malloc(T * sizeof *raw), mean = 0;
  if (sizes == NULL || raw == NULL) {
    free(raw);
    free(sizes);
    return NULL;
  }
  for (uint32_t t = 0; t < T; t++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    raw[t] = 1e5 * pow(1 - (double)(s >> 11) / 9007199254740992.0, -1.0 / 1.2);
    mean += fmin(raw[t], 1e9) / T;
  }
  for (uint32_t t = 0; t < T; t++)
    sizes[t] = t % 2 ? 0 : (uint64_t)fmin(raw[t], 200 * mean);
  free(raw);
  return sizes;
}

/* The joiner (the last node): the bytes it holds, counted from the target
 * table, against its weighted share of all bytes and against its byte
 * target (ring_plan_node_bytes: the share, less what nodes pinned at an
 * arc larger than theirs hold beyond it), in percent, into off[2]. */
static void joiner_off(const ring_plan *p, const uint64_t *sizes, double off[2]) {
  const ring_table *t = ring_plan_target(p);
  uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t);
  uint16_t j = (uint16_t)(ring_table_node_count(t) - 1);
  double one = 0, held = 0;
  ring_plan_load l;
  ring_plan_bytes_load b;
  for (uint32_t k = 0; k < T; k++) {
    one += (double)sizes[k];
    for (uint32_t r = 0; r < R; r++)
      held += ring_table_owner(t, k, r) == j ? (double)sizes[k] : 0;
  }
  ring_plan_node_load(p, j, &l);
  off[0] = 100 * (held / (l.target * one / T) - 1);
  off[1] = ring_plan_node_bytes(p, j, &b) == RING_OK ? 100 * (held / b.target - 1) : NAN;
}

/* Bytes balance: the token-balanced target re-planned by bytes, then one
 * node joining that, planned by bytes. */
static void run_bytes(const bench_opts *o, test_cluster *c, const ring_table *tokens,
                      ring_plan_config cfg, unsigned runs) {
  uint64_t *sizes = bytes_sizes(o->tokens);
  if (sizes == NULL)
    return;
  cfg.arc_bytes = sizes;
  cfg.balance = RING_BALANCE_BYTES;
  printf("bytes balance: arc sizes Pareto(1.2) capped at 200x their mean, half empty\n");
  ring_plan *re = run_case("re-plan by bytes", 0, tokens, c, &cfg, runs);
  ring_table *balanced = NULL;
  ring_error err = {0};
  if (re && ring_table_clone(ring_plan_target(re), 2, &balanced) == RING_OK &&
      ring_table_seal(balanced, &err) == RING_OK) {
    const uint32_t n = c->n;
    add_zone(c, 0, o->racks, 1);
    ring_plan *join =
        run_case("+1 node by bytes", BENCH_TARGET_BYTES_JOIN_MS, balanced, c, &cfg, runs);
    if (join) {
      double off[2];
      joiner_off(join, sizes, off);
      printf("  the joiner holds %+.1f%% of its weighted share of the bytes, %+.1f%% of its "
             "target; %u nodes off tolerance\n",
             off[0], off[1], ring_plan_bytes_off_tolerance(join));
    }
    ring_plan_free(join);
    c->n = n;
  }
  ring_table_free(balanced);
  ring_plan_free(re);
  free(sizes);
}

int main(int argc, char **argv) {
  bench_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc != 0)
    return rc > 0 ? 0 : 2;
  test_cluster c = make_cluster(&o);
  ring_plan_config cfg = {"bench", o.tokens, o.replicas,          42,  "zone", "rack", 4, 0,
                          0,       NULL,     RING_BALANCE_TOKENS, NULL};
  const unsigned runs = o.runs ? o.runs : o.quick ? 2 : BENCH_RUNS_DEFAULT;
  const unsigned runs_initial = o.runs ? o.runs : o.quick ? 1 : BENCH_RUNS_INITIAL;
  print_header(&o, c.n, &cfg);
  ring_plan *initial =
      run_case("initial placement", BENCH_TARGET_INITIAL_MS, NULL, &c, &cfg, runs_initial);
  if (initial) {
    run_changes(&o, &c, ring_plan_target(initial), &cfg, runs);
    run_bytes(&o, &c, ring_plan_target(initial), cfg, runs);
  }
  printf("memory: RSS before the case, ru_maxrss after its first run, and their difference "
         "(%s)\n",
         g_peak_reset ? "the peak mark is reset before each case, so ru_maxrss is the case's "
                        "own peak and delta what the planner and its plan needed"
                      : "/proc/self/clear_refs unavailable: ru_maxrss is the process's "
                        "high-water mark, delta is only an upper bound for early cases");
  int ok = initial != NULL;
  ring_plan_free(initial);
  cluster_free(&c);
  return ok ? 0 : 1;
}
