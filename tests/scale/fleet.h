/*
 * fleet.h: the parts of fleet_sim (tests/scale/README.md), a fleet of
 * simulated hosts and clients, many per process, each real to etcd and the
 * coordinator.
 *
 *   fleet_sim.c     options, the processes (one slice of the fleet each),
 *                   their reports
 *   fleet_lease.c   the slice's leases, kept alive by one thread in turns
 *   fleet_hosts.c   the slice's hosts: alive/<id>, one watcher for all of
 *                   them, acks/<id> and progress/<id> in batched txns
 *   fleet_clients.c the slice's clients: one real ring_watcher each
 *
 * Every version a watcher installs is noted in a fleet_seq, so the report
 * says whether any went back or skipped a version with pending moves (the
 * barrier: a pending version must be acked by all before the next one).
 * Errors: functions return a ring_errno and fill err; a failed start
 * leaves nothing running.
 */
#ifndef RING_FLEET_H
#define RING_FLEET_H

#include "ring.h"
#include "ring_etcd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define FLEET_HOSTS_MAX 60000u /* a table names at most 65535 nodes; room for joins */
#define FLEET_CLIENTS_MAX 60000u
#define FLEET_PROCS_MAX 64u
#define FLEET_TXN_OPS 100u         /* etcd refuses a txn of more than 128 ops */
#define FLEET_TXN_BYTES (1u << 20) /* under etcd's 1.5 MiB request limit */
#define FLEET_GAPS 4u              /* skipped ranges a fleet_seq keeps */
#define FLEET_KEY_MAX 160

typedef struct fleet_opts {
  const char *endpoints; /* comma-separated etcd URLs */
  const char *cluster;   /* [a-z0-9._-]{1,63} */
  uint32_t hosts;        /* hosts h<id_base> .. h<id_base+hosts-1> */
  uint32_t clients;      /* clients c<client_base> .. */
  uint32_t procs;        /* slices; host k belongs to slice (k - id_base) % procs */
  uint32_t id_base;
  uint32_t client_base;
  uint32_t zones;          /* zone label z<k % zones> */
  uint32_t transfer_ms;    /* simulated arc transfer before progress */
  uint32_t per_conn;       /* clients sharing one ring_etcd (its pool; each its own watch) */
  uint32_t client_acks;    /* 1: clients register and ack (the barrier); 0: they stamp */
  uint32_t shared_streams; /* 1: a group's clients share one watch stream and ack txn */
  int64_t ttl_s;           /* every lease's TTL */
  uint32_t proc;           /* this process's slice */
} fleet_opts;

/* The versions one watcher installed, in order of installation. */
typedef struct fleet_seq {
  uint64_t first, last; /* 0 before the first */
  uint64_t installed;   /* versions noted */
  uint64_t backs;       /* a version not above the last (never allowed) */
  uint32_t n_gaps;      /* skipped ranges kept (at most FLEET_GAPS) */
  uint64_t gap_lo[FLEET_GAPS], gap_hi[FLEET_GAPS];
  uint64_t gaps_dropped; /* skipped ranges beyond FLEET_GAPS (each a violation) */
} fleet_seq;

void fleet_seq_note(fleet_seq *s, uint64_t version);

/* What one slice did; summed by the parent. */
typedef struct fleet_report {
  uint64_t hosts, clients;
  uint64_t host_tables;     /* tables the slice's host watcher installed */
  uint64_t host_last;       /* its last version */
  uint64_t client_last_min; /* lowest last version among clients (0: none) */
  uint64_t client_last_max;
  uint64_t client_swaps, client_deltas; /* ring_watcher_stats, summed */
  uint64_t txns, txn_ops;               /* batched writes: acks, progress, alive */
  uint64_t progress_values;             /* progress/<id> values written */
  uint64_t requests;                    /* etcd requests the slice sent (ring_etcd_requests) */
  uint64_t lease_refreshes, leases_lost;
  uint64_t errors; /* etcd calls that failed after their retries */
  uint64_t backs, skipped_pending, gaps_unchecked;
  uint64_t gaps; /* skipped versions without pending moves (allowed) */
} fleet_report;

/* --------------------------------------------------------- fleet_lease.c */

typedef struct fleet_leases {
  ring_etcd *c; /* borrowed */
  int64_t ttl_s;
  int64_t *ids; /* granted leases, malloc()'ed */
  uint32_t n, cap;
  pthread_t thread;
  bool running;
  pthread_mutex_t mu; /* with wake: the thread's sleep, cut short by stop */
  pthread_cond_t wake;
  bool stop; /* guarded by mu */
  _Atomic uint64_t refreshes, lost, errors;
} fleet_leases;

int fleet_leases_init(fleet_leases *l, ring_etcd *c, int64_t ttl_s, uint32_t cap);
/* Grants one more lease (kept alive once started). */
int fleet_leases_grant(fleet_leases *l, int64_t *lease, ring_error *err);
int fleet_leases_start(fleet_leases *l, ring_error *err);
/* Stops the thread and revokes every lease (their keys go at once). */
void fleet_leases_free(fleet_leases *l);

/* --------------------------------------------------------- fleet_hosts.c */

typedef struct fleet_hosts fleet_hosts;

/* Grants the slice's leases, creates alive/<id> (only where absent) and
 * starts the slice's watcher, acking and reporting progress. */
int fleet_hosts_start(const fleet_opts *o, ring_etcd *c, fleet_leases *l, fleet_hosts **out,
                      ring_error *err);
/* Stops the watcher and the progress writer; adds to r; frees. */
void fleet_hosts_stop(fleet_hosts *h, fleet_report *r, fleet_seq *seq);

/* ------------------------------------------------------- fleet_clients.c */

typedef struct fleet_clients fleet_clients;

int fleet_clients_start(const fleet_opts *o, fleet_leases *l, fleet_clients **out, ring_error *err);
/* Stops every watcher; adds to r; calls check(ud, seq) on each client's
 * sequence; frees. */
void fleet_clients_stop(fleet_clients *cl, fleet_report *r,
                        void (*check)(void *ud, const fleet_seq *s), void *ud);

/* --------------------------------------------------------- shared helpers */

/* Runs n put ops as txns of at most FLEET_TXN_OPS ops and FLEET_TXN_BYTES,
 * each retried on transient errors; counts into *txns and *errors. */
int fleet_put_batched(ring_etcd *c, const ring_op *ops, uint32_t n, uint64_t *txns,
                      ring_error *err);
/* "/ringkeeper/<cluster>/<dir><name>"; its length, or -1 when too long. */
int fleet_key(char *key, size_t cap, const char *cluster, const char *dir, const char *name);
uint64_t fleet_now_ms(void); /* monotonic */
/* A condition variable whose timed waits take CLOCK_MONOTONIC deadlines. */
void fleet_cond_init(pthread_cond_t *cond);

#endif /* RING_FLEET_H */
