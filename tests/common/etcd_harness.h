/*
 * etcd_harness.h: real etcd for tests. Starts 1 to 5 members of a fresh
 * cluster on free loopback ports, each with a temporary data dir, waits
 * until they serve, and stops and removes them after. Members die with the
 * test process (PR_SET_PDEATHSIG), so a crashed test leaves nothing behind.
 */
#ifndef RING_ETCD_HARNESS_H
#define RING_ETCD_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ETCD_MEMBERS_MAX 5

typedef struct etcd_member {
  pid_t pid; /* 0 when not running */
  int client_port;
  int peer_port;
  char name[16];
  char dir[300]; /* data dir and log */
  char url[64];  /* http://127.0.0.1:<client_port> */
} etcd_member;

typedef struct etcd_cluster {
  int n;
  etcd_member m[ETCD_MEMBERS_MAX];
  char base[256]; /* temporary root */
  char initial_cluster[1024];
  char endpoints[512];    /* all client URLs, comma-separated */
  char extra[256];        /* extra etcd flags, space-separated (e.g. auth TTL) */
  char root_password[64]; /* "" until etcd_cluster_auth_on; then etcdctl runs as root */
} etcd_cluster;

/* A loopback port nobody listens on right now, below the kernel's
 * ephemeral range: a port from that range (what binding port 0 gives) can
 * be taken between this check and the server's bind by any outgoing
 * connection on the machine, which is how etcd once failed to start with
 * "address already in use". Ports below the range are only ever taken by
 * listeners; each process probes from its own random start. */
int harness_free_port(void);

double harness_now(void);

void harness_sleep_ms(long ms);

/* The bounded polls every test waits with, never a fixed sleep: a test
 * waits for the exact condition it then asserts, so it is as fast as the
 * system allows and fails, rather than passes by chance, when the system
 * is slower than a guessed time.
 * HARNESS_WAIT: polls cond every 50 ms until it holds or timeout_s passed;
 * evaluates to whether it held. */
#define HARNESS_WAIT(cond, timeout_s)                                                              \
  ({                                                                                               \
    double hw_end_ = harness_now() + (timeout_s);                                                  \
    bool hw_ok_;                                                                                   \
    while (!(hw_ok_ = (cond)) && harness_now() < hw_end_)                                          \
      harness_sleep_ms(50);                                                                        \
    hw_ok_;                                                                                        \
  })

/* HARNESS_HOLDS: polls cond every 50 ms for the whole window_s; evaluates
 * to false at the first poll where it does not hold (the test of an
 * absence: "nothing may happen for N s"), true when it held throughout. */
#define HARNESS_HOLDS(cond, window_s)                                                              \
  ({                                                                                               \
    double hh_end_ = harness_now() + (window_s);                                                   \
    bool hh_ok_;                                                                                   \
    while ((hh_ok_ = (cond)) && harness_now() < hh_end_)                                           \
      harness_sleep_ms(50);                                                                        \
    hh_ok_;                                                                                        \
  })

/* libcurl's write callback that drops what it is given. */
size_t harness_sink(char *p, size_t s, size_t n, void *ud);

/* Whether a member answers a read on its client port. */
bool harness_serving(const etcd_member *m);

void harness_spawn(etcd_cluster *c, int i, const char *state);

/* Waits until member i serves; false after timeout_s. */
bool harness_wait(etcd_cluster *c, int i, double timeout_s);

/* Starts an n-member cluster (extra: more etcd flags, or NULL). Aborts if
 * etcd cannot start: a test without its etcd cannot mean anything. */
void etcd_cluster_start(etcd_cluster *c, int n, const char *extra);

/* Sends sig to member i; for SIGKILL and SIGTERM also reaps it. */
void etcd_member_signal(etcd_cluster *c, int i, int sig);

/* Restarts a stopped member with its data; waits until it serves. */
bool etcd_member_restart(etcd_cluster *c, int i);

void etcd_cluster_stop(etcd_cluster *c);

/* Runs etcdctl against the cluster (as root once auth is on); returns its
 * exit status. */
int etcdctl(const etcd_cluster *c, const char *fmt, ...);

/* Turns etcd authentication on with a root user of that password, as an
 * operator would with etcdctl (deploy/PRODUCTION.md); aborts when etcd
 * refuses. */
void etcd_cluster_auth_on(etcd_cluster *c, const char *root_password);

/* ------------------------------------------------ snapshots and restores */

/* Saves a snapshot of member i to path (`etcdctl snapshot save`); returns
 * etcdctl's exit status. */
int etcd_snapshot_save(const etcd_cluster *c, int i, const char *path);

/* What an operator does to go back to a snapshot: kill -9 member i, move
 * its data dir aside, `etcdctl snapshot restore` into a fresh one under
 * the member's name, peer URL and the cluster's initial cluster (so the
 * cluster id stays the same: only revisions and the data go back), and
 * start it on the same ports. True once it serves. */
bool etcd_member_restore(etcd_cluster *c, int i, const char *path);

#endif /* RING_ETCD_HARNESS_H */
