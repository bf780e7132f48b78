/*
 * bench_state_cache.c: what a look at a cluster's state costs the
 * coordinator, read whole (rk_state_read) and from the watch-fed cache
 * (coordinator/cluster/state_cache.c), at N hosts.
 *
 * Starts one etcd member on loopback, writes N hosts' records (nodes/,
 * alive/, acks/, progress/: four keys a host, txns of 100 puts), then
 * prints the CPU time of this process (every thread: the watch's too) and
 * the wall time per look for: a full read; an idle look at the cache; a
 * look after one host's ack changed. Figures only, never pass/fail.
 *
 * Usage: bench_state_cache [HOSTS (10000)] [LOOKS (50)]
 */
#include "etcd_harness.h" /* first: it defines _GNU_SOURCE */
#include "cluster.h"
#include "ring_etcd.h"
#include "state_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const CL = "bench";

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void die(const char *what, const ring_error *err) {
  fprintf(stderr, "bench_state_cache: %s: %s\n", what, err ? err->message : "");
  exit(1);
}

/* Host i's record of `dir` (a JSON or decimal value) into buf. */
static size_t record(char *buf, size_t cap, const char *dir, unsigned i) {
  char *json = NULL;
  size_t len = 0;
  if (strcmp(dir, "nodes/") == 0) {
    rk_node n = {.weight = 1, .state = RING_NODE_ACTIVE};
    snprintf(n.id, sizeof n.id, "h%u", i);
    snprintf(n.addr, sizeof n.addr, "127.0.0.1:%u", 10000 + i % 50000);
    rk_node_encode(&n, &json, &len);
  } else if (strcmp(dir, "alive/") == 0) {
    rk_alive a = {.weight = 1, .started_ms = 1};
    snprintf(a.id, sizeof a.id, "h%u", i);
    snprintf(a.addr, sizeof a.addr, "127.0.0.1:%u", 10000 + i % 50000);
    rk_alive_encode(&a, &json, &len);
  } else if (strcmp(dir, "progress/") == 0) {
    uint32_t tokens[4] = {i % 60000, i % 60000 + 1, i % 60000 + 2, i % 60000 + 3};
    rk_progress p = {.version = 3, .n_tokens = 4, .tokens = tokens, .bytes = 4096};
    rk_progress_encode(&p, &json, &len);
  } else {
    return (size_t)snprintf(buf, cap, "%u", 3 + i % 2);
  }
  len = len < cap ? len : cap - 1;
  memcpy(buf, json, len);
  free(json);
  return len;
}

/* Writes the hosts' records, 100 puts a txn. */
static void seed(ring_etcd *c, unsigned hosts) {
  static const char *const dirs[] = {"nodes/", "alive/", "acks/", "progress/"};
  enum { BATCH = 100 };
  static char keys[BATCH][RK_KEY_MAX], vals[BATCH][512];
  ring_op ops[BATCH];
  ring_error err = {0};
  for (size_t d = 0; d < 4; d++)
    for (unsigned i = 0; i < hosts; i += BATCH) {
      uint32_t n = 0;
      for (unsigned h = i; h < hosts && n < BATCH; h++, n++) {
        char what[64];
        snprintf(what, sizeof what, "%sh%u", dirs[d], h);
        int klen = rk_key(keys[n], CL, what);
        size_t vlen = record(vals[n], sizeof vals[n], dirs[d], h);
        ops[n] = (ring_op){.type = RING_OP_PUT, keys[n], (size_t)klen, vals[n], vlen, 0, false};
      }
      if (ring_etcd_txn(c, NULL, 0, ops, n, NULL, 0, NULL, &err) != RING_OK)
        die("seeding", &err);
    }
  rk_config cfg;
  rk_config_defaults(&cfg);
  char *json = NULL, key[RK_KEY_MAX];
  size_t len = 0;
  rk_config_encode(&cfg, &json, &len);
  int klen = rk_key(key, CL, "config");
  if (ring_etcd_put(c, key, (size_t)klen, json, len, 0, NULL, NULL, &err) != RING_OK)
    die("config", &err);
  free(json);
}

static void print(const char *what, unsigned hosts, double cpu, double wall, unsigned n) {
  printf("bench_state_cache hosts=%u %s cpu_ms_per_look=%.3f wall_ms_per_look=%.3f looks=%u\n",
         hosts, what, cpu / n, wall / n, n);
}

static void bench_full(ring_etcd *c, unsigned hosts, unsigned looks) {
  double c0 = cpu_ms(), t0 = harness_now();
  ring_error err = {0};
  for (unsigned i = 0; i < looks; i++) {
    rk_state s;
    if (rk_state_read(c, CL, RK_READ_ALL, &s, &err) != RING_OK)
      die("full read", &err);
    rk_state_free(&s);
  }
  print("full_read", hosts, cpu_ms() - c0, (harness_now() - t0) * 1e3, looks);
}

/* Idle looks, then looks after one ack each (the put is not timed: it is
 * the host's; its event arriving and being applied is). */
static void bench_cache(ring_etcd *c, unsigned hosts, unsigned looks) {
  rk_cache *k = NULL;
  ring_error err = {0};
  const rk_state *s;
  if (rk_cache_new(CL, &k) != RING_OK || rk_cache_watch(k, c, NULL, NULL, &err) != RING_OK ||
      rk_cache_look(k, c, &s, &err) != RING_OK)
    die("cache", &err);
  double c0 = cpu_ms(), t0 = harness_now();
  for (unsigned i = 0; i < looks; i++)
    if (rk_cache_look(k, c, &s, &err) != RING_OK)
      die("idle look", &err);
  print("cache_idle", hosts, cpu_ms() - c0, (harness_now() - t0) * 1e3, looks);
  double cpu = 0, wall = 0;
  for (unsigned i = 0; i < looks; i++) {
    char key[RK_KEY_MAX], what[64], v[24];
    snprintf(what, sizeof what, "acks/h%u", i % hosts);
    int klen = rk_key(key, CL, what), vlen = snprintf(v, sizeof v, "%u", 10 + i);
    int64_t rev = 0;
    if (ring_etcd_put(c, key, (size_t)klen, v, (size_t)vlen, 0, &rev, NULL, &err) != RING_OK)
      die("ack", &err);
    rk_cache_wrote(k, rev);
    c0 = cpu_ms(), t0 = harness_now();
    if (rk_cache_look(k, c, &s, &err) != RING_OK || rk_state_ack(s, what + 5) != 10 + i)
      die("look after an ack", &err);
    cpu += cpu_ms() - c0, wall += (harness_now() - t0) * 1e3;
  }
  print("cache_one_change", hosts, cpu, wall, looks);
  rk_cache_stats st;
  rk_cache_stats_get(k, &st);
  printf("bench_state_cache hosts=%u cache full_reads=%llu incremental=%llu events=%llu\n", hosts,
         (unsigned long long)(st.full[RK_RESYNC_START] + st.full[RK_RESYNC_BEHIND]),
         (unsigned long long)st.incremental, (unsigned long long)st.events);
  rk_cache_free(k);
}

int main(int argc, char **argv) {
  /* --quick (tests/run.sh runs every benchmark so): 1,000 hosts, 10 looks */
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  unsigned hosts = quick ? 1000 : argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 10000;
  unsigned looks = quick ? 10 : argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 50;
  if (hosts == 0 || looks == 0)
    return fprintf(stderr, "usage: bench_state_cache [--quick | HOSTS [LOOKS]]\n"), 2;
  etcd_cluster ec;
  etcd_cluster_start(&ec, 1, NULL);
  ring_etcd *c = NULL;
  ring_etcd_opts o = {.endpoints = ec.endpoints, .timeout_ms = 30000};
  ring_error err = {0};
  if (ring_etcd_open(&o, &c, &err) != RING_OK)
    die("client", &err);
  seed(c, hosts);
  bench_full(c, hosts, looks < 10 ? looks : 10);
  bench_cache(c, hosts, looks);
  ring_etcd_close(c);
  etcd_cluster_stop(&ec);
  return 0;
}
