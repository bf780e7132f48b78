/*
 * fleet_sim.c: a fleet of simulated hosts and clients for one Ringkeeper
 * cluster, many per process (tests/scale/README.md). Sections: options;
 * the checks of the versions seen; one slice (a child process); the
 * parent: fork, signals, reports.
 *
 *   fleet_sim --endpoints URL --cluster NAME [--hosts N] [--clients M]
 *             [--procs P] [--transfer-ms MS] [--zones Z] [--lease-ttl S]
 *             [--id-base K] [--client-base K]
 *
 * Runs until SIGTERM or SIGINT, then revokes every lease (the fleet's
 * alive/ and clients/ keys go at once), prints one summary line on stdout
 * and exits 0, or 1 when a watcher went back a version or skipped one with
 * pending moves, 2 when the fleet could not start (usage: 64).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fleet.h"

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ options */

static const char usage[] =
    "usage: fleet_sim --endpoints URL --cluster NAME [--hosts N (10000)] [--clients M (0)]\n"
    "                 [--procs P (4)] [--transfer-ms MS (0)] [--zones Z (8)]\n"
    "                 [--lease-ttl S (600)] [--id-base K (0)] [--client-base K (0)]\n"
    "                 [--clients-per-conn K (1)] [--client-acks 0|1 (1)]\n"
    "                 [--shared-streams 0|1 (0)]\n"
    "Hosts are h<K>, K from --id-base; clients c<K>. Stops on SIGTERM/SIGINT.\n";

/* A decimal in [lo, hi] into *out; false otherwise. */
static bool parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
    return false;
  *out = (uint32_t)v;
  return true;
}

static int parse_args(int argc, char **argv, fleet_opts *o) {
  *o = (fleet_opts){.endpoints = "http://127.0.0.1:2379",
                    .hosts = 10000,
                    .procs = 4,
                    .zones = 8,
                    .ttl_s = 600,
                    .per_conn = 1,
                    .client_acks = 1};
  uint32_t ttl = 600;
  for (int i = 1; i < argc; i += 2) { /* every option takes a value */
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = v != NULL;
    if (ok && strcmp(f, "--endpoints") == 0)
      o->endpoints = v;
    else if (ok && strcmp(f, "--cluster") == 0)
      o->cluster = v;
    else if (ok && strcmp(f, "--hosts") == 0)
      ok = parse_u32(v, 0, FLEET_HOSTS_MAX, &o->hosts);
    else if (ok && strcmp(f, "--clients") == 0)
      ok = parse_u32(v, 0, FLEET_CLIENTS_MAX, &o->clients);
    else if (ok && strcmp(f, "--procs") == 0)
      ok = parse_u32(v, 1, FLEET_PROCS_MAX, &o->procs);
    else if (ok && strcmp(f, "--transfer-ms") == 0)
      ok = parse_u32(v, 0, 600000, &o->transfer_ms);
    else if (ok && strcmp(f, "--zones") == 0)
      ok = parse_u32(v, 1, 64, &o->zones);
    else if (ok && strcmp(f, "--lease-ttl") == 0)
      ok = parse_u32(v, 10, 3600, &ttl);
    else if (ok && strcmp(f, "--id-base") == 0)
      ok = parse_u32(v, 0, 99999, &o->id_base);
    else if (ok && strcmp(f, "--client-base") == 0)
      ok = parse_u32(v, 0, 99999, &o->client_base);
    else if (ok && strcmp(f, "--clients-per-conn") == 0)
      ok = parse_u32(v, 1, 1000, &o->per_conn);
    else if (ok && strcmp(f, "--client-acks") == 0)
      ok = parse_u32(v, 0, 1, &o->client_acks);
    else if (ok && strcmp(f, "--shared-streams") == 0)
      ok = parse_u32(v, 0, 1, &o->shared_streams);
    else
      ok = false;
    if (!ok) {
      fprintf(stderr, "fleet_sim: bad or unknown option %s%s%s\n%s", f, v ? " " : "", v ? v : "",
              usage);
      return 64;
    }
  }
  o->ttl_s = ttl;
  if (o->cluster == NULL || !ring_id_valid(o->cluster) || o->id_base + o->hosts > 100000 ||
      o->client_base + o->clients > 100000) {
    fprintf(stderr, "fleet_sim: --cluster [a-z0-9._-]{1,63} is required; ids stay below 100000\n%s",
            usage);
    return 64;
  }
  return 0;
}

/* ------------------------------------------- checks of the versions seen */

#define CHECK_VERSIONS 256 /* distinct skipped versions looked up; more: unchecked */

/* The versions watchers skipped, with how many skipped each. */
typedef struct checker {
  uint64_t v[CHECK_VERSIONS], count[CHECK_VERSIONS];
  uint32_t n;
  fleet_report *r;
} checker;

static void check_seq(void *ud, const fleet_seq *s) {
  checker *k = ud;
  k->r->backs += s->backs;
  k->r->skipped_pending += s->gaps_dropped; /* too many gaps to look up: counted against */
  for (uint32_t g = 0; g < s->n_gaps; g++)
    for (uint64_t v = s->gap_lo[g]; v <= s->gap_hi[g]; v++) {
      uint32_t i = 0;
      while (i < k->n && k->v[i] != v)
        i++;
      if (i == k->n && k->n == CHECK_VERSIONS) {
        k->r->gaps_unchecked++;
        continue;
      }
      if (i == k->n)
        k->v[k->n++] = v;
      k->count[i]++;
    }
}

/* Whether tables/<v> has pending moves: a watcher that skipped it skipped
 * a version the barrier says it must ack. Unknown (retention deleted it,
 * etcd failed) counts as unchecked. */
static void check_versions(checker *k, ring_etcd *c, const char *cluster) {
  for (uint32_t i = 0; i < k->n; i++) {
    char key[FLEET_KEY_MAX], num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)k->v[i]);
    int klen = fleet_key(key, sizeof key, cluster, "tables/", num);
    ring_kvs r = {0};
    ring_table *t = NULL;
    if (klen > 0 && ring_etcd_range(c, key, (size_t)klen, NULL, &r, NULL) == RING_OK && r.n == 1 &&
        ring_table_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &t, NULL) == RING_OK) {
      if (ring_table_pending_count(t) > 0) {
        k->r->skipped_pending += k->count[i];
        fprintf(stderr, "fleet_sim: %llu watchers skipped version %llu, which has pending moves\n",
                (unsigned long long)k->count[i], (unsigned long long)k->v[i]);
      } else {
        k->r->gaps += k->count[i];
      }
    } else {
      k->r->gaps_unchecked += k->count[i];
    }
    ring_table_free(t);
    ring_kvs_clear(&r);
  }
}

/* ------------------------------------------------------------ one slice */

static int slice_run(fleet_opts *o, fleet_report *r) {
  ring_error err = {0};
  ring_etcd *c = NULL;
  fleet_leases l;
  fleet_hosts *h = NULL;
  fleet_clients *cl = NULL;
  uint64_t t0 = fleet_now_ms();
  ring_etcd_opts eo = {.endpoints = o->endpoints, .timeout_ms = 30000};
  int rc = ring_etcd_open(&eo, &c, &err);
  if (rc != RING_OK)
    goto fail_open;
  rc = fleet_leases_init(&l, c, o->ttl_s, o->hosts / o->procs + o->clients / o->procs + 2);
  if (rc != RING_OK)
    goto fail_leases;
  if ((rc = fleet_hosts_start(o, c, &l, &h, &err)) != RING_OK ||
      (rc = fleet_clients_start(o, &l, &cl, &err)) != RING_OK ||
      (rc = fleet_leases_start(&l, &err)) != RING_OK)
    goto fail_start;
  uint64_t took = fleet_now_ms() - t0;
  fprintf(stderr, "fleet_sim: slice %u ready: %u leases in %.1f s%s\n", o->proc, l.n,
          (double)took / 1000,
          took / 1000 > (uint64_t)o->ttl_s / 3 ? " (over a third of the TTL)" : "");

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  int sig;
  sigwait(&stop, &sig); /* blocked in every thread (the parent blocked it before fork) */

  checker *k = calloc(1, sizeof *k);
  if (k == NULL)
    return 2;
  k->r = r;
  fleet_clients_stop(cl, r, check_seq, k);
  fleet_seq hs;
  fleet_hosts_stop(h, r, &hs);
  check_seq(k, &hs);
  check_versions(k, c, o->cluster);
  free(k);
  r->lease_refreshes = atomic_load(&l.refreshes);
  r->leases_lost = atomic_load(&l.lost);
  r->errors += atomic_load(&l.errors);
  r->requests += ring_etcd_requests(c);
  fleet_leases_free(&l);
  ring_etcd_close(c);
  return r->backs || r->skipped_pending ? 1 : 0;

fail_start:
  fleet_clients_stop(cl, NULL, NULL, NULL);
  fleet_hosts_stop(h, NULL, NULL);
  fleet_leases_free(&l);
fail_leases:
  ring_etcd_close(c);
fail_open:
  fprintf(stderr, "fleet_sim: slice %u: %s (%s)\n", o->proc, err.message, ring_strerror(rc));
  return 2;
}

/* ---------------------------------------------------------- the parent */

static void on_child(int sig) { (void)sig; } /* SIGCHLD must not be ignored for sigwait */

static void sum(fleet_report *t, const fleet_report *r) {
  uint64_t min = t->client_last_min;
  t->client_last_min =
      r->clients && (min == 0 || r->client_last_min < min) ? r->client_last_min : min;
  if (r->client_last_max > t->client_last_max)
    t->client_last_max = r->client_last_max;
  if (r->host_last > t->host_last)
    t->host_last = r->host_last;
  t->hosts += r->hosts, t->clients += r->clients, t->host_tables += r->host_tables;
  t->client_swaps += r->client_swaps, t->client_deltas += r->client_deltas;
  t->txns += r->txns, t->txn_ops += r->txn_ops, t->progress_values += r->progress_values;
  t->requests += r->requests, t->lease_refreshes += r->lease_refreshes;
  t->leases_lost += r->leases_lost, t->errors += r->errors, t->backs += r->backs;
  t->skipped_pending += r->skipped_pending, t->gaps_unchecked += r->gaps_unchecked;
  t->gaps += r->gaps;
}

static void print_report(const fleet_report *t) {
  printf("fleet_sim hosts=%llu clients=%llu host_tables=%llu host_last=%llu client_last_min=%llu "
         "client_last_max=%llu client_swaps=%llu client_deltas=%llu txns=%llu txn_ops=%llu "
         "progress_values=%llu requests=%llu lease_refreshes=%llu leases_lost=%llu errors=%llu "
         "went_back=%llu skipped_pending=%llu skipped_other=%llu skipped_unchecked=%llu\n",
         (unsigned long long)t->hosts, (unsigned long long)t->clients,
         (unsigned long long)t->host_tables, (unsigned long long)t->host_last,
         (unsigned long long)t->client_last_min, (unsigned long long)t->client_last_max,
         (unsigned long long)t->client_swaps, (unsigned long long)t->client_deltas,
         (unsigned long long)t->txns, (unsigned long long)t->txn_ops,
         (unsigned long long)t->progress_values, (unsigned long long)t->requests,
         (unsigned long long)t->lease_refreshes, (unsigned long long)t->leases_lost,
         (unsigned long long)t->errors, (unsigned long long)t->backs,
         (unsigned long long)t->skipped_pending, (unsigned long long)t->gaps,
         (unsigned long long)t->gaps_unchecked);
  fflush(stdout);
}

/* Forks one child per slice; each writes its report to its pipe. */
static int spawn(fleet_opts *o, pid_t *pids, int *fds) {
  for (uint32_t p = 0; p < o->procs; p++) {
    int pipefd[2];
    if (pipe(pipefd) != 0)
      return -1;
    pid_t pid = fork();
    if (pid < 0)
      return -1;
    if (pid == 0) {
      close(pipefd[0]);
      /* dies with the parent: a fleet whose parent was killed is of no use */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      o->proc = p;
      curl_global_init(CURL_GLOBAL_DEFAULT);
      fleet_report r = {0};
      int rc = slice_run(o, &r);
      if (write(pipefd[1], &r, sizeof r) != (ssize_t)sizeof r)
        rc = 2;
      curl_global_cleanup();
      _exit(rc);
    }
    close(pipefd[1]);
    pids[p] = pid;
    fds[p] = pipefd[0];
  }
  return 0;
}

int main(int argc, char **argv) {
  fleet_opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc != 0)
    return rc;
  if (o.procs > o.hosts + o.clients && o.hosts + o.clients > 0)
    o.procs = o.hosts + o.clients; /* no empty slice */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  signal(SIGCHLD, on_child);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* children inherit it: their threads too */
  pid_t pids[FLEET_PROCS_MAX] = {0};
  int fds[FLEET_PROCS_MAX];
  uint32_t alive = 0;
  if (spawn(&o, pids, fds) != 0) {
    perror("fleet_sim: fork");
    rc = 2;
  }
  for (uint32_t p = 0; p < o.procs; p++)
    alive += pids[p] > 0;
  bool stopping = rc != 0;
  for (uint32_t p = 0; stopping && p < o.procs; p++)
    if (pids[p] > 0)
      kill(pids[p], SIGTERM);
  while (alive > 0) {
    int sig;
    sigwait(&set, &sig);
    if (sig != SIGCHLD && !stopping) { /* asked to stop: every slice stops */
      stopping = true;
      for (uint32_t p = 0; p < o.procs; p++)
        if (pids[p] > 0)
          kill(pids[p], SIGTERM);
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 2;
      rc = code > rc ? code : rc;
      alive--;
      if (!stopping) { /* a slice died on its own: the fleet is no longer whole */
        fprintf(stderr, "fleet_sim: a slice exited (%d) before being asked to; stopping\n", code);
        rc = rc ? rc : 2;
        stopping = true;
        for (uint32_t p = 0; p < o.procs; p++)
          if (pids[p] > 0 && pids[p] != pid)
            kill(pids[p], SIGTERM);
      }
      for (uint32_t p = 0; p < o.procs; p++)
        if (pids[p] == pid)
          pids[p] = -pid;
    }
  }
  fleet_report total = {0};
  for (uint32_t p = 0; p < o.procs; p++) {
    fleet_report r;
    if (pids[p] != 0 && read(fds[p], &r, sizeof r) == (ssize_t)sizeof r)
      sum(&total, &r);
    if (pids[p] != 0)
      close(fds[p]);
  }
  print_report(&total);
  return rc;
}
