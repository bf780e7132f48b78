/*
 * fleet_run.c: the fleet scale run (README.md). Starts its own etcd on
 * loopback (temporary data dir), `ringctl init`, a fleet of simulated hosts
 * and clients (fleet_sim), a real ring-coordinator; approves the first
 * placement; then one more host joins and its plan is approved with
 * `ringctl apply`. Prints the figures of the join and checks that every
 * watcher followed every version it had to ack (fleet_sim's report) and
 * that `ringctl verify` passes. Every wait is bounded; everything started
 * is stopped and the directory removed (kept on failure or with --keep).
 *
 * Sections: options; the cluster's processes; waits; figures; the run.
 * Exit 0 when the checks hold, 1 when one fails, 64 on a usage error.
 * Timings are printed, never judged.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "etcd_harness.h"
#include "proc_harness.h"
#include "ring_etcd.h"
#include "scale_util.h"

#include <inttypes.h>
#include <math.h>

#define CLUSTER "fleet"
#define PREFIX "/ringkeeper/" CLUSTER "/"

/* ------------------------------------------------------------ options */

typedef struct run_opts {
  unsigned hosts, clients, procs, tokens, replicas, transfer_ms, idle_s, per_conn;
  unsigned client_acks;       /* 0: clients stamp their requests, no registration, no acks */
  unsigned shared_streams;    /* 1: the clients of one ring_etcd share a stream and ack txn */
  unsigned max_request_bytes; /* etcd's --max-request-bytes; 0: etcd's default (1.5 MiB) */
  unsigned full_reads;        /* 1: the coordinator reads whole at every look (--full-reads) */
  bool keep;
  bool clients_late; /* --clients-after-placement: clients start once the first table is out */
} run_opts;

static const char usage[] =
    "usage: fleet_run [--hosts N (10000)] [--clients M (0)] [--procs P (4)] [--tokens T (65536)]\n"
    "                 [--replicas R (3)] [--transfer-ms MS (0)] [--idle-s S (10)] [--keep]\n"
    "                 [--etcd-max-request-bytes N (etcd's default)] [--full-reads 0|1 (0)]\n"
    "                 [--clients-per-conn K (1)] [--clients-after-placement]\n"
    "                 [--client-acks 0|1 (1)] [--shared-streams 0|1 (0)]\n";

static bool parse_opts(int argc, char **argv, run_opts *o) {
  *o = (run_opts){.hosts = 10000,
                  .procs = 4,
                  .tokens = 65536,
                  .replicas = 3,
                  .idle_s = 10,
                  .per_conn = 1,
                  .client_acks = 1};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--keep") == 0 || strcmp(argv[i], "--clients-after-placement") == 0) {
      *(argv[i][2] == 'k' ? &o->keep : &o->clients_late) = true;
      continue;
    }
    struct {
      const char *flag;
      unsigned *v, lo, hi;
    } f[] = {{"--hosts", &o->hosts, 3, 50000},
             {"--clients", &o->clients, 0, 50000},
             {"--procs", &o->procs, 1, 64},
             {"--tokens", &o->tokens, 64, 65536},
             {"--replicas", &o->replicas, 1, 7},
             {"--transfer-ms", &o->transfer_ms, 0, 600000},
             {"--idle-s", &o->idle_s, 1, 600},
             {"--etcd-max-request-bytes", &o->max_request_bytes, 0, 1u << 30},
             {"--full-reads", &o->full_reads, 0, 1},
             {"--clients-per-conn", &o->per_conn, 1, 1000},
             {"--client-acks", &o->client_acks, 0, 1},
             {"--shared-streams", &o->shared_streams, 0, 1}};
    size_t k = 0;
    while (k < sizeof f / sizeof f[0] && strcmp(argv[i], f[k].flag) != 0)
      k++;
    char *end = NULL;
    unsigned long v = k < sizeof f / sizeof f[0] && i + 1 < argc ? strtoul(argv[++i], &end, 10) : 0;
    if (end == NULL || *end || v < f[k].lo || v > f[k].hi) {
      fprintf(stderr, "fleet_run: bad or unknown option %s\n%s", argv[i], usage);
      return false;
    }
    *f[k].v = (unsigned)v;
  }
  return true;
}

/* -------------------------------------------------- the cluster's processes */

static etcd_cluster ec;
static ring_etcd *etcd;
static char dir[64];
static proc coord, fleet, joiner, late; /* late: the clients, with --clients-after-placement */
static uint64_t final_version;          /* the join's last: every client must end on it */
static char coord_listen[32];
static bool failed;

static void stop_all(void) {
  proc_signal(&coord, SIGTERM);
  if (proc_wait(&coord, 20) < 0)
    proc_kill(&coord);
  /* a fleet revokes its leases on the way out: 20,000 take a while */
  proc_signal(&fleet, SIGTERM);
  proc_signal(&joiner, SIGTERM);
  proc_signal(&late, SIGTERM);
  if (proc_wait(&fleet, 300) < 0)
    proc_kill(&fleet);
  if (proc_wait(&late, 300) < 0)
    proc_kill(&late);
  if (proc_wait(&joiner, 60) < 0)
    proc_kill(&joiner);
  ring_etcd_close(etcd);
  etcd = NULL;
  etcd_cluster_stop(&ec);
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  file_tail(coord.log, 30);
  file_tail(fleet.log, 20);
  stop_all();
  fprintf(stderr, "logs kept in %s\n", dir);
  exit(1);
}

static void spawn_fleet(proc *p, const char *name, const run_opts *o, unsigned hosts,
                        unsigned clients, unsigned procs, unsigned id_base) {
  char log[128], h[16], c[16], pr[16], base[16], tr[16], pc[16], ca[4], ss[4];
  snprintf(log, sizeof log, "%s/%s.log", dir, name);
  snprintf(h, sizeof h, "%u", hosts);
  snprintf(c, sizeof c, "%u", clients);
  snprintf(pr, sizeof pr, "%u", procs);
  snprintf(base, sizeof base, "%u", id_base);
  snprintf(tr, sizeof tr, "%u", o->transfer_ms);
  snprintf(pc, sizeof pc, "%u", o->per_conn);
  snprintf(ca, sizeof ca, "%u", o->client_acks);
  snprintf(ss, sizeof ss, "%u", o->shared_streams);
  char *argv[] = {FLEET_SIM_BIN,
                  "--endpoints",
                  ec.endpoints,
                  "--cluster",
                  CLUSTER,
                  "--hosts",
                  h,
                  "--clients",
                  c,
                  "--procs",
                  pr,
                  "--id-base",
                  base,
                  "--transfer-ms",
                  tr,
                  "--clients-per-conn",
                  pc,
                  "--client-acks",
                  ca,
                  "--shared-streams",
                  ss,
                  NULL};
  if (proc_spawn(p, log, argv) != 0)
    die("cannot start fleet_sim");
}

/* full_reads: the coordinator without its state cache, for comparison. */
static void spawn_coordinator(bool full_reads) {
  snprintf(coord_listen, sizeof coord_listen, "127.0.0.1:%d", harness_free_port());
  char log[128];
  snprintf(log, sizeof log, "%s/coord.log", dir);
  /* --tick 1s (the default) so an idle look is what production pays;
   * --etcd-timeout 30s: a look at 20,000 host records takes more than 5 s */
  char *argv[] = {RING_COORDINATOR_BIN,
                  "--endpoints",
                  ec.endpoints,
                  "--cluster",
                  CLUSTER,
                  "--id",
                  "coord",
                  "--listen",
                  coord_listen,
                  "--tick",
                  "1s",
                  "--etcd-timeout",
                  "30s",
                  "--log-level",
                  "info",
                  full_reads ? "--full-reads" : NULL,
                  NULL};
  if (proc_spawn(&coord, log, argv) != 0)
    die("cannot start ring-coordinator");
}

/* --------------------------------------------------------------- waits */

static void wait_count(const char *what, uint32_t n, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (scale_count(etcd, PREFIX, what) < n) {
    if (harness_now() > end)
      die("%u of %u %s keys after %.0f s", scale_count(etcd, PREFIX, what), n, what, timeout_s);
    if (!proc_running(&fleet) || (joiner.pid && !proc_running(&joiner)) ||
        (late.pid && !proc_running(&late)))
      die("fleet_sim exited");
    harness_sleep_ms(250);
  }
}

/* Waits until every slice of fleet_sim p said it is ready (its hosts and
 * clients started: clients that do not register leave no key to count). */
static void wait_ready(proc *p, unsigned procs, double timeout_s) {
  double end = harness_now() + timeout_s;
  for (;;) {
    char *log = file_slurp(p->log);
    unsigned n = 0;
    for (const char *at = log; at && (at = strstr(at, " ready: ")) != NULL; at++)
      n++;
    free(log);
    if (n >= procs)
      return;
    if (harness_now() > end)
      die("%u of %u fleet slices ready after %.0f s", n, procs, timeout_s);
    if (!proc_running(p))
      die("fleet_sim exited");
    harness_sleep_ms(250);
  }
}

static void wait_proposed(int nodes, char id[24], uint32_t *moves, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (!scale_proposed(etcd, PREFIX, nodes, id, moves)) {
    if (harness_now() > end)
      die("no plan for %d nodes proposed in %.0f s", nodes, timeout_s);
    if (!proc_running(&coord))
      die("ring-coordinator exited");
    harness_sleep_ms(200);
  }
}

/* Acks at version v or above, from one read of acks/ (*bytes: what it read). */
static uint32_t acked(uint64_t v, uint64_t *bytes) {
  ring_range_opts ro = {.prefix = true};
  ring_kvs r = {0};
  const char *key = PREFIX "acks/";
  if (ring_etcd_range(etcd, key, strlen(key), &ro, &r, NULL) != RING_OK)
    return 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < r.n; i++) {
    n += strtoull((const char *)r.kvs[i].value, NULL, 10) >= v;
    *bytes += r.kvs[i].key_len + r.kvs[i].value_len;
  }
  ring_kvs_clear(&r);
  return n;
}

/* Waits until `everyone` acked version v (polling acks/ every 50 ms). */
static void wait_acked(uint64_t v, unsigned everyone, double timeout_s, uint64_t *polled) {
  double end = harness_now() + timeout_s;
  while (acked(v, polled) < everyone) {
    if (harness_now() > end)
      die("version %" PRIu64 " acked by %u of %u", v, acked(v, polled), everyone);
    harness_sleep_ms(50);
  }
}

/* Approves plan id; returns once its run is done (t_done) and `everyone`
 * acked the final version (returned; its time in *t_acked). *polled:
 * bytes of acks/ this driver read meanwhile. */
static uint64_t apply_and_wait(const char *id, unsigned everyone, double *t_done, double *t_acked,
                               uint64_t *polled) {
  char out[2048], hist[64];
  int rc = proc_runf(120, out, sizeof out, "%s --endpoints %s --cluster " CLUSTER " apply %s",
                     RINGCTL_BIN, ec.endpoints, id);
  if (rc != 0)
    die("ringctl apply %s exited %d: %s", id, rc, out);
  snprintf(hist, sizeof hist, "plan/history/%s", id);
  double end = harness_now() + 900;
  char *h;
  while ((h = scale_get(etcd, PREFIX, hist)) == NULL) {
    if (harness_now() > end)
      die("plan %s not done in 900 s (version %" PRIu64 ")", id,
          scale_get_u64(etcd, PREFIX, "version"));
    harness_sleep_ms(50);
  }
  bool done = strstr(h, "\"state\":\"done\"") != NULL;
  free(h);
  if (!done)
    die("plan %s did not end done", id);
  *t_done = harness_now();
  uint64_t v = scale_get_u64(etcd, PREFIX, "version");
  wait_acked(v, everyone, end - harness_now(), polled);
  *t_acked = harness_now();
  return v;
}

/* -------------------------------------------------------------- figures */

typedef struct etcd_counts {
  double reads, writes, ops, sent, received, coord_requests;
} etcd_counts;

/* etcd's own count of the KV requests it answered (scale_etcd_kv_requests)
 * and of the operations in them (scale_etcd_kv_ops: a txn of 100 acks is
 * one request, 101 operations), its gRPC bytes, which the gateway's
 * traffic goes through; and the coordinator's count of what it sent. */
static etcd_counts counts_now(void) {
  etcd_counts c = {0};
  char *text = scale_etcd_metrics(&ec.m[0]);
  scale_etcd_kv_requests(text, &c.reads, &c.writes);
  c.ops = scale_etcd_kv_ops(text);
  c.sent = scale_metric_sum(text, "etcd_network_client_grpc_sent_bytes_total");
  c.received = scale_metric_sum(text, "etcd_network_client_grpc_received_bytes_total");
  free(text);
  c.coord_requests = metric_get(coord_listen, "ring_coordinator_etcd_requests_total", "");
  return c;
}

/* CPU seconds (user + system) of a process, from /proc/<pid>/stat. */
static double cpu_s(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  char *s = file_slurp(path);
  const char *p = strrchr(s, ')');
  unsigned long long ut = 0, st = 0;
  /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
   */
  if (p == NULL ||
      sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    ut = st = 0;
  free(s);
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A field of /proc/<pid>/status in KiB (VmRSS, VmHWM). */
static double status_kib(pid_t pid, const char *field) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  char *s = file_slurp(path);
  const char *p = strstr(s, field);
  double v = p ? strtod(p + strlen(field) + 1, NULL) : NAN;
  free(s);
  return v;
}

/* Mean size of deltas/<v> for v in (v0, v1]: what a client one version
 * behind fetches for each version (the table itself when a delta is gone). */
static double delta_bytes(uint64_t v0, uint64_t v1) {
  double sum = 0;
  unsigned n = 0;
  for (uint64_t v = v0 + 1; v <= v1; v++) {
    char what[40];
    snprintf(what, sizeof what, "deltas/%" PRIu64, v);
    char *d = scale_get(etcd, PREFIX, what);
    if (d == NULL) {
      snprintf(what, sizeof what, "tables/%" PRIu64, v);
      d = scale_get(etcd, PREFIX, what);
    }
    sum += d ? (double)strlen(d) : 0;
    n += d != NULL;
    free(d);
  }
  return n ? sum / n : 0;
}

/* fleet_sim's summary line from its log; false when it has none or it
 * reports a watcher that went back or skipped a pending version. */
static bool fleet_report_ok(const proc *p, const char *name) {
  char *log = file_slurp(p->log);
  const char *line = strstr(log, "fleet_sim hosts=");
  unsigned long long back = 1, skipped = 1, clients = 0, last = 0;
  if (line) {
    const char *b = strstr(line, "went_back="), *s = strstr(line, "skipped_pending=");
    const char *c = strstr(line, " clients="), *l = strstr(line, "client_last_min=");
    back = b ? strtoull(b + 10, NULL, 10) : 1;
    skipped = s ? strtoull(s + 16, NULL, 10) : 1;
    clients = c ? strtoull(c + 9, NULL, 10) : 0;
    last = l ? strtoull(l + 16, NULL, 10) : 0;
    const char *eol = strchr(line, '\n');
    printf("fleet_run %s: %.*s\n", name, eol ? (int)(eol - line) : (int)strlen(line), line);
  } else {
    fprintf(stderr, "fleet_run: %s printed no report\n", name);
  }
  free(log);
  if (line && clients > 0 && last < final_version)
    fprintf(stderr, "fleet_run: %s: a client ended on version %llu, not %llu\n", name, last,
            (unsigned long long)final_version);
  return line && back == 0 && skipped == 0 && (clients == 0 || last >= final_version);
}

/* ---------------------------------------------------------------- the run */

int main(int argc, char **argv) {
  run_opts o;
  if (!parse_opts(argc, argv, &o))
    return 64;
  setvbuf(stdout, NULL, _IOLBF, 0);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  snprintf(dir, sizeof dir, "/tmp/ringkeeper-fleet-XXXXXX");
  if (mkdtemp(dir) == NULL)
    return perror("mkdtemp"), 1;
  /* an 8 GiB quota: 20,000 host records rewritten each version add up */
  char extra[128];
  snprintf(extra, sizeof extra, "--quota-backend-bytes 8589934592%s%.0u",
           o.max_request_bytes ? " --max-request-bytes " : "", o.max_request_bytes);
  etcd_cluster_start(&ec, 1, extra);
  ring_etcd_opts eo = {.endpoints = ec.endpoints, .timeout_ms = 30000};
  ring_error err;
  if (ring_etcd_open(&eo, &etcd, &err) != RING_OK)
    die("etcd client: %s", err.message);
  char out[4096];
  int rc = proc_runf(60, out, sizeof out,
                     "%s --endpoints %s --cluster " CLUSTER " init --tokens %u --replicas %u"
                     " --failure-domain zone --auto-apply none",
                     RINGCTL_BIN, ec.endpoints, o.tokens, o.replicas);
  if (rc != 0)
    die("ringctl init exited %d: %s", rc, out);

  double t = harness_now();
  unsigned early = o.clients_late ? 0 : o.clients; /* clients started with the hosts */
  unsigned acking = o.client_acks ? o.clients : 0; /* clients in the barrier */
  spawn_fleet(&fleet, "fleet", &o, o.hosts, early, o.procs, 0);
  wait_count("alive/", o.hosts, 120 + o.hosts / 50.0);
  wait_ready(&fleet, o.procs, 120 + early / 20.0);
  printf("fleet_run registered hosts=%u clients=%u procs=%u in_s=%.1f\n", o.hosts, early, o.procs,
         harness_now() - t);

  spawn_coordinator(o.full_reads != 0);
  char id[24];
  uint32_t moves = 0;
  uint64_t polled = 0;
  double t_done, t_acked;
  wait_proposed((int)o.hosts, id, &moves, 300);
  t = harness_now();
  uint64_t v =
      apply_and_wait(id, o.hosts + (o.clients_late ? 0 : acking), &t_done, &t_acked, &polled);
  printf("fleet_run first_placement tokens=%u replicas=%u apply_to_all_acked_s=%.2f\n", o.tokens,
         o.replicas, t_acked - t);
  if (o.clients_late) { /* each reads the table once as it starts, not all at one moment */
    t = harness_now();
    spawn_fleet(&late, "clients", &o, 0, o.clients, o.procs, 0);
    wait_ready(&late, o.procs, 120 + o.clients / 20.0);
    wait_acked(v, o.hosts + acking, 600, &polled);
    printf("fleet_run clients started=%u all_acked_s=%.1f\n", o.clients, harness_now() - t);
  }

  spawn_fleet(&joiner, "joiner", &o, 1, 0, 1, o.hosts);
  wait_count("alive/", o.hosts + 1, 60);
  wait_proposed((int)o.hosts + 1, id, &moves, 300);
  uint64_t v0 = scale_get_u64(etcd, PREFIX, "version");
  uint64_t req0 = ring_etcd_requests(etcd);
  polled = 0;
  etcd_counts c0 = counts_now();
  t = harness_now();
  uint64_t v1 = apply_and_wait(id, o.hosts + 1 + acking, &t_done, &t_acked, &polled);
  final_version = v1;
  etcd_counts c1 = counts_now();
  uint64_t own = ring_etcd_requests(etcd) - req0; /* this driver's reads, not the fleet's */
  double versions = (double)(v1 - v0), hosts = o.hosts + 1.0;
  double reads = c1.reads - c0.reads - (double)own; /* the driver only reads */
  double writes = c1.writes - c0.writes, reqs = reads + writes;
  printf("fleet_run join hosts=%.0f clients=%u moves=%u versions=%.0f apply_to_done_s=%.2f"
         " apply_to_all_acked_s=%.2f\n",
         hosts, o.clients, moves, versions, t_done - t, t_acked - t);
  double coord_reqs = c1.coord_requests - c0.coord_requests;
  printf("fleet_run join etcd_requests=%.0f per_version=%.0f reads_per_version=%.0f"
         " writes_per_version=%.0f per_host_per_version=%.3f coordinator_requests_per_version=%.1f"
         " others_requests_per_version=%.1f kv_ops_per_version=%.0f\n",
         reqs, reqs / versions, reads / versions, writes / versions, reqs / versions / hosts,
         coord_reqs / versions, (reqs - coord_reqs) / versions,
         (c1.ops - c0.ops - (double)own) / versions);
  printf("fleet_run join etcd_sent_bytes_per_version=%.0f etcd_received_bytes_per_version=%.0f"
         " (the driver's own acks/ polls: %" PRIu64 " value bytes in all)\n",
         (c1.sent - c0.sent) / versions, (c1.received - c0.received) / versions, polled);
  printf("fleet_run join delta_value_bytes_per_version=%.0f (what one client reads per version,"
         " before the gateway's base64)\n",
         delta_bytes(v0, v1));

  /* idle: the run is over, nothing changes; one look per --tick. Pacing
   * the measurement: 3 s for the run's trailing writes (acks, retention)
   * to pass, which show no end of their own */
  harness_sleep_ms(3000);
  etcd_counts i0 = counts_now();
  double cpu0 = cpu_s(coord.pid), ti = harness_now();
  bool up = HARNESS_HOLDS(proc_running(&coord), o.idle_s); /* the idle window measured */
  failed |= !up;
  double cpu1 = cpu_s(coord.pid), steps = (harness_now() - ti) / 1.0; /* --tick 1s */
  etcd_counts i1 = counts_now();
  printf("fleet_run coordinator idle_cpu_ms_per_step=%.1f idle_requests_per_step=%.1f"
         " rss_mib=%.1f peak_rss_mib=%.1f\n",
         (cpu1 - cpu0) * 1000 / steps, (i1.coord_requests - i0.coord_requests) / steps,
         status_kib(coord.pid, "VmRSS:") / 1024, status_kib(coord.pid, "VmHWM:") / 1024);

  rc = proc_runf(300, out, sizeof out, "%s --endpoints %s --cluster " CLUSTER " verify",
                 RINGCTL_BIN, ec.endpoints);
  printf("fleet_run verify exit=%d: %.200s", rc, out);
  failed |= rc != 0;
  stop_all();
  failed |= !fleet_report_ok(&fleet, "fleet") || !fleet_report_ok(&joiner, "joiner") ||
            (late.log[0] && !fleet_report_ok(&late, "clients"));
  printf("fleet_run %s\n", failed ? "FAILED" : "ok");
  proc_dir_done(dir, !failed && !o.keep, "RING_TEST_KEEP_LOGS");
  curl_global_cleanup();
  return failed ? 1 : 0;
}
