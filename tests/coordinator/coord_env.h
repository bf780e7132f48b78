/*
 * coord_env.h: the world of one coordinator acceptance test: its own etcd,
 * ring-coordinator processes, fake agents, ringctl runs, and readers of
 * what the coordinator wrote (version, tables, node records, plans, runs).
 * Every wait is bounded by a deadline. A test that fails shows the tail of
 * each coordinator's log and keeps the log directory (so does every test
 * when RING_TEST_KEEP_LOGS is set).
 *
 * Sections: the environment; config; coordinators; agents; ringctl;
 * reading etcd; runs and history; tables; waiting.
 *
 * Values are read with cJSON and written as proto/etcd.md spells them,
 * independently of the daemon's codecs.
 */
#ifndef RING_COORD_ENV_H
#define RING_COORD_ENV_H

#include "etcd_harness.h"
#include "proc_harness.h"
#include "check_main.h"
#include "etcd_client.h"
#include "fake_agent.h"
#include "ring.h"
#include "ring_etcd.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#ifndef RING_COORDINATOR_BIN
#error "RING_COORDINATOR_BIN: the ring-coordinator binary (tests/coordinator/CMakeLists.txt)"
#endif
#ifndef RINGCTL_BIN
#error "RINGCTL_BIN: the ringctl binary (tests/coordinator/CMakeLists.txt)"
#endif

#define ENV_CLUSTER "ck"
#define ENV_PREFIX "/ringkeeper/" ENV_CLUSTER "/"
#define ENV_COORDS 3
#define ENV_AGENTS 112 /* test_coord_versions runs 101 */
#define RK_KEY_MAX_TEST 256

/* ------------------------------------------------------- the environment */

typedef struct coord_env {
  etcd_cluster etcd;
  ring_etcd *c;
  char dir[128];                 /* logs and plan files */
  proc coord[ENV_COORDS];        /* ring-coordinator instances */
  char coord_id[ENV_COORDS][16]; /* their --id */
  char listen[ENV_COORDS][32];   /* their --listen, 127.0.0.1:<port> */
  const char *coord_bin;         /* the binary env_coord_start runs; NULL: ring-coordinator */
  fake_agent agent[ENV_AGENTS];
  bool agent_used[ENV_AGENTS];
  bool passed; /* set by env_pass() at a test's end */
} coord_env;

extern coord_env env;

/* A test's last line: what it checked held. */
void env_pass(void);

/* One test and its timeout. */
typedef struct env_test {
  const TTest *test;
  int timeout_s;
} env_test;

/* Runs each test in a case of its own, with the fixture (its own etcd),
 * nofork (fixtures hold processes); returns the exit status. */
int env_main(const char *suite, const env_test *tests, int n);

/* ------------------------------------------------------------------ config */

typedef struct env_config {
  uint32_t tokens, replicas;
  const char *failure_domain; /* NULL: "zone" */
  const char *migration;      /* NULL: "stream" */
  uint64_t down_after_ms;     /* 0: 1500 */
  bool auto_apply;
  uint32_t per_node, per_domain, per_wave; /* throttle; 0 = no limit */
  uint32_t keep_versions;                  /* 0: 64, so a test can read every version of a run */
  uint32_t keep_plans;                     /* 0: 32 */
} env_config;

/* The config value of proto/etcd.md; malloc()'ed. */
char *env_config_json(const env_config *k);

/* Puts a raw value at <prefix><what>. */
void env_put(const char *what, const char *value);
/* sizes/<id> for every node of t, as its agent reports them: each token it
 * owns, sized size(t, token, owner). */
void env_put_sizes(const ring_table *t,
                   uint64_t (*size)(const ring_table *t, uint32_t token, uint16_t owner));

/* Creates (or rewrites) the cluster's config. */
void env_config_put(const env_config *k);

/* ------------------------------------------------------------ coordinators */

/* /healthz of coordinator i: the HTTP status (0: no answer) and the body
 * into body[cap]. */
long env_healthz(int i, char *body, size_t cap);

/* Starts coordinator i with --id id, --listen on a free port, a 2 s lease,
 * debug logs and `extra` flags (space-separated, may be NULL); its log goes
 * to <dir>/<id>.log. Waits until its HTTP listener answers. */
void env_coord_start(int i, const char *id, const char *extra);
/* The same without waiting: the process may exit at once (its log is
 * <dir>/<id>.log). */
void env_coord_spawn(int i, const char *id, const char *extra);

/* A metric of coordinator i (NaN when absent or not answering). */
double env_metric(int i, const char *name, const char *labels);

/* ------------------------------------------------------------------ agents */

/* Starts fake agent `id` in `zone` (weight 1 unless given) with a 2 s
 * lease; hold: its progress waits for fake_agent_hold(false). */
fake_agent *env_agent_w(const char *id, const char *zone, double weight, bool hold);

fake_agent *env_agent(const char *id, const char *zone);

fake_agent *env_agent_find(const char *id);

/* Holds (or releases) every agent's progress. */
void env_hold_all(bool hold);

/* ----------------------------------------------------------------- ringctl */

/* Runs `ringctl --endpoints E --cluster C ARGS` (args printf-formatted,
 * space-separated); output into out. Returns the exit code; a run that
 * takes over 60 s fails the test. */
int env_ringctl(char *out, size_t cap, const char *fmt, ...);

/* ------------------------------------------------------------ reading etcd */

/* The value of <prefix><what>, malloc()'ed, NULL when absent; *mod (if not
 * NULL) its mod revision (0 when absent). */
char *env_get(const char *what, int64_t *mod);

bool env_exists(const char *what);

/* <prefix><what> parsed as JSON (cJSON_Delete it), NULL when absent; a
 * value that is not JSON fails the test. */
cJSON *env_json(const char *what);

/* Small cJSON readers: a missing field reads as "" / NaN. */
const char *jstr(const cJSON *o, const char *name);
double jnum(const cJSON *o, const char *name);
const cJSON *jobj(const cJSON *o, const char *name);

/* The `version` key (0 when absent). */
uint64_t env_version(void);

/* acks/<id> (0 when absent). */
uint64_t env_ack(const char *id);

/* nodes/<id>: state, desired and weight; false when there is no record. */
typedef struct env_node {
  char state[16], desired[16];
  char addr[64];
  double weight;
  double lost_ms;
} env_node;

bool env_node_read(const char *id, env_node *out);

/* True when nodes/<id> exists with this state. */
bool env_node_is(const char *id, const char *state);

/* The leader key's id ("" when nobody leads). */
void env_leader(char id[64]);

/* Index of the coordinator whose id leads, -1 when none of ours. */
int env_leader_index(void);

/* ------------------------------------------------------ runs and history */

/* A run (plan/active or plan/history/<id>) as the tests read it. */
typedef struct env_run {
  char id[24];
  char state[16];
  char phase[16];
  double base_version, moves_total, lower_bound, waves, lost;
  double moves_done, wave, cursor_version, finished_ms;
} env_run;

void env_run_from(const cJSON *o, env_run *r);

/* plan/active; false when there is none. */
bool env_active(env_run *r);

/* Every plan/history/ entry, in key order (at most max). Returns the count. */
int env_history(env_run *out, int max);

/* History entries in `state`; *last (if not NULL) gets the one that
 * finished last. */
int env_history_count(const char *state, env_run *last);

/* ------------------------------------------------------------------ tables */

/* tables/<v> decoded (v 0: the current version); NULL when absent. */
ring_table *env_table(uint64_t v);

/* ring_table_verify on the current table is clean; returns the table. */
ring_table *env_verify_clean(void);

/* Token-replicas of node `id` in t (0 when it is not in the table). */
uint32_t env_replicas(const ring_table *t, const char *id);

/* Owner ids of (token, slot) in t ("" for none). */
const char *env_owner(const ring_table *t, uint32_t token, uint32_t slot);
const char *env_pending(const ring_table *t, uint32_t token, uint32_t slot);

/* Replays versions from..to (each must exist) and checks how the owners
 * moved: every owner change from v to v+1 goes to the node pending on that
 * slot in v when `stream` (new owner first, cutover after), and no slot
 * changes owner twice. Returns the number of owner changes. */
uint32_t env_replay(uint64_t from, uint64_t to, bool stream);

/* ----------------------------------------------------------------- waiting */

/* Evaluates cond every 50 ms until it holds; after timeout_s the test
 * fails with the message. */
#define WAIT_UNTIL(cond, timeout_s, ...) ck_assert_msg(HARNESS_WAIT(cond, timeout_s), __VA_ARGS__)

/* Waits until `done` runs are in history as done and nothing is active or
 * proposed; returns the run that finished last. */
env_run env_wait_done(int done, double timeout_s);

/* Every running agent has acked at least v. */
bool env_all_acked(uint64_t v);

/* ---------------------------------------------------------- bootstrapping */

/* Writes config k, starts agents a1..a<n> in zones z0..z<zones-1> (round
 * robin) and coordinators coord-a, coord-b, ... with `extra` flags, and
 * waits for the first placement to be done and acked (approving it with
 * `ringctl apply` when neither k nor the flags auto-apply it). Returns its
 * version. */
uint64_t env_bootstrap(const env_config *k, int agents, int zones, int coords, const char *extra);

/* Neither the version nor plan/active moves for ms milliseconds (from
 * version v): a proposal that waits for `ringctl apply`. */
void env_assert_nothing_runs(uint64_t v, long ms);

/* Whether the leading coordinator's /status.json shows k's auto_apply and
 * throttle: it has read the config k describes. */
bool env_config_heard(const env_config *k);

/* env_config_put, then waits until the leader has read it. */
void env_config_put_heard(const env_config *k);

/* Changes the throttle in config and waits until the leader has read it
 * (the next plans use it). */
void env_throttle(env_config *k, uint32_t per_node, uint32_t per_wave);

/* ------------------------------------------------------- weighted targets */

/* The weighted target of every node of t (docs/DESIGN.md, invariant 2): serving
 * nodes (joining, active) share T*R by weight; a hard domain holds at most T
 * token-replicas and its excess goes to the other domains by weight; inside
 * a domain, nodes share by weight. target[i] is 0 for nodes that serve not. */
void env_targets(const ring_table *t, double *target);

/* Every node of t holds within one token-replica of its weighted target. */
void env_assert_balanced(const ring_table *t);

/* -------------------------------------------------- recomputing a run's plan */

/* The history entry whose plan id is `id`, as JSON (cJSON_Delete it). */
cJSON *env_history_json(const char *id);

/* Recomputes the plan of history entry `id` with libring's planner from
 * its recorded input and base table (proto/plan.md: the document is the
 * planner's input), so a test can look at the moves. *base (NULL for a
 * first placement) and the plan are the caller's to free. */
ring_plan *env_plan_of(const char *id, ring_table **base);

#endif /* RING_COORD_ENV_H */
