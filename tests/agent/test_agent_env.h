/*
 * test_agent_env.h: the world of one ring-agent acceptance test: its own
 * etcd, real ring-agent processes (each with a data dir, an arc server and
 * /metrics on free loopback ports, a 2 s lease, a 1 s drop grace), tables
 * published by hand through libring, arcs written and compared on disk,
 * and readers of what the agents wrote (alive/, acks/, progress/). Every
 * wait is bounded. A test that fails shows each agent's log tail and keeps
 * the directory (RING_TEST_KEEP=1 keeps it after a pass too).
 *
 * Sections: the environment; agents; arcs on disk; tables; reading etcd;
 * waiting.
 *
 * Values are read with cJSON, independently of the daemon's codecs.
 */
#ifndef RING_TEST_AGENT_ENV_H
#define RING_TEST_AGENT_ENV_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "check_main.h"
#include "etcd_client.h"
#include "etcd_harness.h"
#include "proc_harness.h"
#include "ring.h"
#include "ring_etcd.h"

#include <check.h>
#include <errno.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>

#ifndef RING_AGENT_BIN
#error "RING_AGENT_BIN: the ring-agent binary (tests/agent/agent_tests.cmake)"
#endif

#define ENV_CLUSTER "ag"
#define ENV_PREFIX "/ringkeeper/" ENV_CLUSTER "/"
#define ENV_AGENTS 6
#ifndef ENV_TOKENS
#define ENV_TOKENS 64 /* a benchmark may want more */
#endif

/* ------------------------------------------------------- the environment */

typedef struct env_agent {
  char id[16];
  char listen[32];  /* the arc server, 127.0.0.1:<port> */
  char metrics[32]; /* /metrics and /healthz */
  char data[200];   /* --data-dir */
  char log[200];
  char zone[8];
  proc p;
  bool used;
} env_agent;

typedef struct agent_env {
  etcd_cluster etcd;
  ring_etcd *c;
  char dir[128]; /* data dirs, logs, the secret */
  char secret[160];
  env_agent a[ENV_AGENTS];
  bool passed;
  /* With etcd auth on (tests/e2e, RING_E2E_AUTH): the etcd user flags of
   * agent `id` into flags (made on first use); NULL: no user. */
  void (*agent_creds)(const char *id, char *flags, size_t cap);
  /* The ring-agent binary to run; NULL: RING_AGENT_BIN (a benchmark may
   * run another build's, to set two builds side by side). */
  const char *agent_bin;
} agent_env;

extern agent_env env;

/* Checked fixture: etcd, a client, a directory and the arc secret per test. */
void env_setup(void);

/* A test's last line: what it checked held. */
void env_pass(void);

/* Stops every agent still running with SIGTERM; one that does not exit 0
 * in time, or whose log shows a sanitizer report, fails the test. */
void env_teardown(void);

/* A test case with the fixture, nofork (it holds processes). */
TCase *env_tcase(const char *name, int timeout_s);

/* Adds one test to s in a case of its own with the fixture. */
void env_add(Suite *s, const char *name, int timeout_s, const TTest *test);

/* Puts a raw value at <prefix><what>. */
void env_put(const char *what, const char *value);

/* The cluster config: T 64, the given replicas, parallel fetches and byte rate. */
void env_config(uint32_t replicas, uint32_t per_node, uint64_t bytes_per_sec);

/* ------------------------------------------------------------------ agents */

/* Splits a command line at spaces into argv (PROC_ARGS_MAX entries, NULL
 * terminated), in place. */
void env_argv(char *line, char **argv);

/* Agent slot i gets id, ports, dirs (only the first time). */
env_agent *env_agent_init(int i, const char *id);

/* Starts (or restarts) agent i with `extra` flags (space-separated, may be
 * NULL); waits until its /healthz answers. */
void env_agent_start(int i, const char *id, const char *extra);

/* A metric of agent i (NaN when absent or not answering). */
double env_metric(int i, const char *name);

/* ------------------------------------------------------------ arcs on disk */

/* Byte k of file `f` of arc `token` seeded by `seed`: reproducible data. */
uint8_t env_byte(uint32_t token, int f, uint64_t k, uint32_t seed);

/* Writes arc `token` into agent i's data dir: n files f0..f<n-1> of
 * `size` bytes each (the last of size / 3 + 1). */
void env_arc_write(int i, uint32_t token, int n, uint64_t size, uint32_t seed);

/* Seals a new file of n bytes into arcs/<token>/ on agent i, as the data
 * plane does (docs/DESIGN.md: written aside, renamed in, immutable after). */
void env_arc_seal(int i, uint32_t token, const char *name, size_t n);

bool env_arc_has(int i, uint32_t token);

/* Whether two files hold the same bytes. */
bool env_same_file(const char *p, const char *q);

/* Whether arc `token` is byte-identical on agents i and j (same names,
 * same bytes, at least one file). */
bool env_arc_same(int i, int j, uint32_t token);

/* Whether agent i's arc `token` holds exactly what env_arc_write(.., n,
 * size, seed) wrote. */
bool env_arc_valid(int i, uint32_t token, int n, uint64_t size, uint32_t seed);

/* Bytes under agent i's tmp/ (partial transfers). */
uint64_t env_tmp_bytes(int i);

/* ------------------------------------------------------------------ tables */

/* A new unsealed table at version v with agents 0..n-1 as nodes (their
 * arc server addresses and zones) and R replicas; owners round-robin:
 * owner(t, r) = (t*R + r) % n. Tests then move owners and add pending
 * entries, and seal. */
ring_table *env_table(uint64_t v, int n, uint32_t replicas);

void env_seal(ring_table *t);

/* Pins (nodes/<id> with its key, as the coordinator would) every node of
 * t registered without a record yet, then puts tables/<v> and version in
 * one txn. */
void env_publish(const ring_table *t);

/* Seals, publishes and frees t. */
void env_publish_free(ring_table *t);

/* ------------------------------------------------------------ reading etcd */

/* The lease and the mod revision of <prefix><what> (0 and 0 when absent;
 * either pointer may be NULL). */
void env_key_meta(const char *what, int64_t *lease, int64_t *mod_revision);

/* The value at <prefix><what> (malloc()'ed), NULL when absent. */
char *env_get(const char *what);

/* The table in service (ring_table_free it), NULL before the first. */
ring_table *env_current_table(void);

/* acks/<id> as a number, 0 when absent. */
uint64_t env_ack(const char *id);

/* Whether progress/<id> reports `version` with exactly tokens[0..n). */
bool env_progress_is(const char *id, uint64_t version, const uint32_t *tokens, int n);

/* alive/<id> parsed (cJSON_Delete it), NULL when absent. */
cJSON *env_alive(const char *id);

/* Whether alive/<id> names addr. */
bool env_alive_is(const char *id, const char *addr);

/* ----------------------------------------------------------------- waiting */

/* Waits up to timeout_s for cond; evaluates to whether it held. */
#define ENV_WAIT(cond, timeout_s) HARNESS_WAIT(cond, timeout_s)

#endif /* RING_TEST_AGENT_ENV_H */
