/*
 * fake_agent.h: a stand-in for ring-agent in coordinator tests. It does
 * what the coordinator sees of an agent, through libring, and nothing else
 * (no arc server, no data):
 *   - a lease kept alive, and alive/<id> (ringkeeper.alive.v1) under it;
 *   - a ring watcher with ack id <id>, so acks/<id> follows each swap;
 *   - on each table whose pending entries name this node, progress/<id>
 *     (ringkeeper.progress.v1) with those tokens, ascending, as if every
 *     incoming arc had been streamed and verified; at once, after a delay,
 *     or only when the test releases it (to hold a wave open);
 *   - or, while failing (fake_agent_fail), progress/<id> with no token held
 *     and each wanted token (the first RK_FAILING_MAX = 64) in `failing`
 *     with the test's error, as an agent whose sources answer "not held".
 * Killing it revokes the lease (alive/<id> goes at once) and stops the
 * watcher; a flap drops alive/<id> for a while and puts it back.
 *
 * The values are written as proto/etcd.md spells them, independently of
 * proto/records.c, so the coordinator's decoders meet them from outside.
 * Errors: functions return a ring_errno and fill err; a failed start leaves
 * nothing running. The agent borrows the ring_etcd handle (which must
 * outlive it); the caller owns the struct.
 */
#ifndef RING_FAKE_AGENT_H
#define RING_FAKE_AGENT_H

#include "ring.h"
#include "ring_etcd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct fake_agent_opts {
  const char *cluster; /* [a-z0-9._-]{1,63} */
  const char *id;      /* node id */
  const char *zone;    /* label zone, or NULL */
  const char *rack;    /* label rack, or NULL */
  double weight;       /* 0: 1.0 */
  int64_t ttl_s;       /* lease TTL; 0: 2 */
  bool hold;           /* start with progress withheld */
  uint32_t delay_ms;   /* wait this long before each progress write */
  uint32_t arc_bytes;  /* bytes reported per token; 0: 4096 */
} fake_agent_opts;

typedef struct fake_agent {
  char cluster[RING_ID_MAX + 1];
  char id[RING_ID_MAX + 1];
  char addr[32];    /* 127.0.0.1:<port>, nothing listens there */
  char *alive_json; /* the alive/<id> value, malloc()'ed */
  int64_t ttl_s;
  uint32_t delay_ms;
  uint32_t arc_bytes;
  ring_etcd *c;        /* borrowed */
  int64_t lease;       /* 0 while dead */
  ring_keeper *keeper; /* NULL while dead */
  ring_live *live;
  ring_watcher *watcher; /* NULL once killed */

  pthread_mutex_t mu;    /* guards the fields below and progress writes */
  bool hold;             /* progress withheld until fake_agent_hold(false) */
  uint64_t want_version; /* newest table with pending entries naming us */
  uint32_t *want_tokens; /* their tokens, ascending (malloc()'ed) */
  uint32_t n_want;
  uint64_t written_version; /* version of the last progress written, 0: none */
  char fail_error[161];     /* "" : fetches succeed; else every one fails with this */
  uint64_t failed_version;  /* version of the last failing progress written, 0: none */

  _Atomic uint64_t tables;   /* tables called back */
  _Atomic uint64_t progress; /* progress values written */
  _Atomic uint64_t errors;   /* etcd writes that failed */
  _Atomic bool lost;         /* the keeper reported the lease lost */
} fake_agent;

/* The alive/<id> value of proto/etcd.md (labels zone and rack when not
 * NULL, started_ms now); malloc()'ed (the caller frees it), NULL on no
 * memory. Shared with tests/scale/fleet_sim, which speaks for many hosts. */
char *fake_alive_encode(const char *id, const char *addr, const char *zone, const char *rack,
                        double weight);

/* The progress/<id> value: {"format","version","tokens":[...],"bytes"},
 * with the n tokens (ascending) held or (error not NULL) nothing held and
 * the first 64 of them in "failing", one attempt each; malloc()'ed (the
 * caller frees it), NULL on no memory. */
char *fake_progress_encode(uint64_t version, const uint32_t *tokens, uint32_t n, uint64_t bytes,
                           const char *error);

/* Starts an agent: grants a lease, puts alive/<id>, starts keeping the
 * lease alive and watching the version. RING_OK, or an error with nothing
 * left running and *a unusable. */
int fake_agent_start(fake_agent *a, ring_etcd *c, const fake_agent_opts *o, ring_error *err);

/* Withholds progress (true) or releases it (false): on release, the
 * progress of the newest table naming this node is written now, unless it
 * already was. Returns the write's ring_errno (RING_OK when nothing to do). */
int fake_agent_hold(fake_agent *a, bool hold);

/* Makes every fetch fail with `error` (at most 160 bytes, no quote or
 * backslash): the progress of the newest table naming this node is written
 * now (and for each new one) with nothing held and its tokens failing, one
 * attempt each. NULL: fetches succeed again, and the full progress is
 * written as fake_agent_hold(false) would (unless held). Returns the
 * write's ring_errno. */
int fake_agent_fail(fake_agent *a, const char *error);

/* The agent dies: the keeper stops, the lease is revoked (alive/<id> goes
 * at once), the watcher stops (no more acks or progress). Idempotent. */
int fake_agent_kill(fake_agent *a);

/* Lets the lease lapse without revoking it: the keeper and the watcher
 * stop, alive/<id> goes when the TTL runs out. */
void fake_agent_abandon(fake_agent *a);

/* alive/<id> disappears for gap_ms (the lease is revoked), then comes back
 * under a new lease; the watcher keeps running. */
int fake_agent_flap(fake_agent *a, uint32_t gap_ms, ring_error *err);

/* Stops everything (killing the agent if alive) and frees what it holds. */
void fake_agent_free(fake_agent *a);

/* The table version the agent serves (0 before the first). */
uint64_t fake_agent_version(fake_agent *a);
/* Version of the last progress it wrote (0: none). */
uint64_t fake_agent_progress_version(fake_agent *a);
/* True while a progress value is waiting for release. */
bool fake_agent_withheld(fake_agent *a);

#endif /* RING_FAKE_AGENT_H */
