/*
 * e2e_cluster.h: a whole Ringkeeper cluster on loopback for the acceptance
 * suites (tests/e2e, tests/fault, the join benchmark): etcd (1 or 3
 * members), one or two ring-coordinators, up to ENV_AGENTS nodes, each a
 * real ring-agent (data dir, secret file, zone z<slot>) with a ring-kv
 * beside it (same --id, same data dir), ringctl for every operator step,
 * and ring-kv-load for the data set.
 *
 * Built on tests/agent/test_agent_env.h (etcd, agents, data dirs, the
 * secret, env_get/env_put, ENV_WAIT): this file adds what a cluster needs
 * on top. Every wait is bounded. A failed test shows the tail of every
 * daemon's log and keeps the directory (RING_TEST_KEEP=1 keeps it after a
 * pass too).
 *
 * Sections: the world; config; daemons; ringctl; tables and plans;
 * the data set; replicas on disk; the final check; tmpfs; steps; suites.
 *
 * Checks read etcd and the data dirs with cJSON and their own segment
 * reader, independently of the daemons' codecs.
 */
#ifndef RING_E2E_CLUSTER_H
#define RING_E2E_CLUSTER_H

#include "test_agent_env.h" /* env: etcd, agents, the directory, ENV_WAIT */

#include <inttypes.h>
#include <sys/mount.h>
#include <xxhash.h>

#if !defined(RING_COORDINATOR_BIN) || !defined(RINGCTL_BIN) || !defined(RING_KV_BIN) ||            \
    !defined(RING_KV_LOAD_BIN)
#error "the daemons' paths: tests/e2e/CMakeLists.txt (e2e_target)"
#endif

#define E2E_COORDS 2

/* ------------------------------------------------------------- the world */

/* The cluster's settings; zero fields take the defaults in e2e_defaults. */
typedef struct e2e_opts {
  uint32_t tokens;        /* T: 256 */
  uint32_t replicas;      /* R: 2 */
  const char *migration;  /* "stream" */
  uint32_t down_after_ms; /* 1500 */
  uint32_t per_node;      /* moves per node: 8 */
  uint32_t per_wave;      /* moves per wave: 32 */
  uint64_t bytes_per_sec; /* each agent's incoming rate: 0 (no limit) */
  uint32_t keys;          /* the data set: k0..k<keys-1>; 2000 (RING_LONG: 20000) */
  uint32_t value_size;    /* bytes per value: 100 */
  bool no_data;           /* e2e_bootstrap loads no data set */
} e2e_opts;

typedef struct e2e_world {
  e2e_opts o;
  proc kv[ENV_AGENTS]; /* ring-kv beside agent slot i */
  char kv_listen[ENV_AGENTS][32];
  char kv_log[ENV_AGENTS][220];
  bool kv_up[ENV_AGENTS]; /* started and not stopped on purpose */
  proc coord[E2E_COORDS];
  char coord_id[E2E_COORDS][16];
  char coord_listen[E2E_COORDS][32];
  bool coord_used[E2E_COORDS];
  proc reader; /* a ring-kv-load reading while faults happen */
  char reader_log[200];
  bool mounted[ENV_AGENTS]; /* slot i's data dir is a tmpfs of ours */
} e2e_world;

extern e2e_world w;

bool e2e_long(void);

/* RING_E2E_AUTH=1: etcd runs with auth on (`ringctl auth setup`) and every
 * process is an etcd user of its own with its kind's role (`ringctl auth
 * add`): agents host.<id>, ring-kv client.kv.<id>, coordinators
 * coordinator.<id>, ringctl operator.e2e, ring-kv-load and status reads
 * reader.*; the test's own client is root. */
bool e2e_auth(void);

/* "--endpoints E --cluster C" into buf, with `--user U --password-file F`
 * of actor kind/name (service: a client's, or NULL) under RING_E2E_AUTH,
 * the user made on first use. Returns buf. */
const char *e2e_etcd(const char *kind, const char *name, const char *service, char *buf,
                     size_t cap);

void e2e_defaults(e2e_opts *o);

/* ------------------------------------------------------------------ config */

/* Writes the cluster config from w.o (auto-apply off: every plan is
 * approved with ringctl apply). */
void e2e_config_put(void);

/* ----------------------------------------------------------------- daemons */

/* The string field `field` of the JSON at <prefix><what> into out[cap]
 * ("" when the key or the field is not there). */
void e2e_field(const char *what, const char *field, char *out, size_t cap);

/* Waits up to 15 s until daemon p (`what`, for messages) answers HTTP on
 * hostport; its exit fails the test. */
void e2e_wait_listening(proc *p, const char *hostport, const char *what);

/* Starts (or restarts) slot i's ring-kv: same id and data dir as its
 * agent, its own port (kept across restarts); waits until it listens. */
void e2e_kv_start(int i);

/* A node: agent slot i as `id` (extra agent flags, may be NULL) and its
 * ring-kv. */
void e2e_node_start(int i, const char *id, const char *extra);

/* kill -9 slot i's agent and ring-kv: the host is gone. */
void e2e_node_kill(int i);

/* SIGTERM slot i's agent and ring-kv; each must exit 0. */
void e2e_node_stop(int i);

/* Slot of node id (-1 when none of ours). */
int e2e_slot(const char *id);

/* Starts coordinator k (coord-a, coord-b), or restarts it with the same id
 * and port; waits until its listener answers. */
void e2e_coord_start(int k);

/* The coordinator that holds the leader key (-1: none of ours). */
int e2e_leader(void);

/* ----------------------------------------------------------------- ringctl */

/* Runs `ringctl --endpoints E --cluster C ARGS`; output into out (may be
 * NULL). Returns the exit code; one that takes over 60 s fails the test. */
int e2e_ringctl(char *out, size_t cap, const char *fmt, ...);

/* --------------------------------------------------------- tables and plans */

/* The table in service (ring_table_free it), NULL before the first. */
ring_table *e2e_table(void);

uint64_t e2e_version(void);

/* The id of the proposed plan into id[24] ("" when none, or nothing to
 * do); *moves its moves_total. */
bool e2e_proposed(char id[24], uint32_t *moves);

/* plan/history/<id>'s state into state[16] ("" when not there); reason
 * (may be NULL) into reason[256]. */
void e2e_history_state(const char *id, char state[16], char *reason);

/* A proposed plan that has not run yet (right after a run ends, its plan
 * may still be proposed for a moment): id[24] gets it. */
bool e2e_new_proposal(char id[24]);

bool e2e_active(void);

/* Waits up to timeout_s for a proposed plan with moves, approves it with
 * `ringctl apply ID` (a plan replaced meanwhile is read again) and
 * returns its id in id[24]. */
void e2e_apply(char id[24], double timeout_s);

/* Waits until the agents of slots 0..slots-1 (nodes n<slot>) wrote
 * sizes/ and then changed nothing for three measures (--sizes-every 1s):
 * the records hold the loaded data set's sizes. */
void e2e_sizes_fresh(int slots);

/* A plan's estimate (`ringctl plan --json`: eta_s, eta_ideal_s, eta_bound)
 * and the time `apply --wait` took to run it to done. */
typedef struct e2e_eta {
  double eta, ideal, took; /* s */
  char bound[96];
} e2e_eta;

/* Reads the estimate of proposed plan id, then applies it with `apply
 * --wait` and times it into e; the run must end done. */
void e2e_apply_timed(const char *id, e2e_eta *e);

/* The estimate's case (test_e2e_engine drain_estimate, bench_eta): four
 * nodes, one zone each, R 3, T 1024, 2,000 keys of value_size bytes, 256
 * moves a step, 40 x value_size B/s per agent (about 20 s of transfer
 * whatever the size), sizes measured after the load; then n0 is drained
 * (or, repair, killed) and the plan that moves its 768 token-replicas to
 * the three others is run by e2e_apply_timed into e. */
void e2e_eta_case(bool repair, uint32_t value_size, e2e_eta *e);

/* Whether slot i's agent (when running) acked version v. */
bool e2e_acked_all(uint64_t v);

/* Waits up to timeout_s for run `id` to be done; a failed or cancelled
 * run fails the test with its reason. Then waits for every running agent
 * to ack the version in service. */
void e2e_wait_done(const char *id, double timeout_s);

/* Applies proposed plans until nothing is proposed or active (at most
 * `plans` of them), each done within timeout_s. */
void e2e_settle(int plans, double timeout_s);

/* The state of node `id` in the table in service (-1 when absent). */
int e2e_node_state(const char *id);

/* Token-replicas node `id` owns in the table in service. */
uint32_t e2e_replicas_of(const char *id);

/* nodes/<id>'s state into st[16] ("" when no record). */
void e2e_record_state(const char *id, char st[16]);

bool e2e_record_is(const char *id, const char *state);

/* ------------------------------------------------------------ the data set */

/* Fails the test when a ring-kv that should run has exited, with how. */
void e2e_kv_alive(void);

/* e2e_kv_alive, killing p first when it fails. */
void e2e_kv_alive_or_kill(proc *p);

/* Runs ring-kv-load with `args` (after endpoints, cluster, keys, value
 * size); its output into out. Returns its exit code. Every ring-kv must
 * stay up meanwhile (a dead one would only show as timeouts). */
int e2e_kv_load(char *out, size_t cap, double timeout_s, const char *args);

/* Writes every key of the data set once; every write must succeed. */
void e2e_load(void);

/* Every key of the data set reads back its value. */
void e2e_verify_keys(void);

/* Starts a reader: ring-kv-load reading random keys (printing a line a
 * second) while the test does harm elsewhere, until e2e_reader_check. */
void e2e_reader_start(void);

/* Stops the reader; every read it made (its interval lines: a read that
 * was still retrying when it stopped is not counted) must have succeeded. */
void e2e_reader_check(void);

/* ------------------------------------------------------- replicas on disk */

/* One record of a ring-kv segment (PROTOCOL.md, "Storage"). */
typedef struct e2e_rec {
  char *key;         /* NUL-terminated copy */
  uint64_t ts;       /* hybrid timestamp */
  uint64_t checksum; /* XXH3-64 of the record after its checksum: covers the value */
  uint8_t kind;      /* 0 value, 1 tombstone */
} e2e_rec;

typedef struct e2e_recs {
  e2e_rec *r;
  size_t n, cap;
} e2e_recs;

void e2e_recs_free(e2e_recs *s);

uint64_t e2e_le(const uint8_t *p, int n);

/* Appends the records of one segment file; a damaged record fails. */
void e2e_segment_read(const char *path, e2e_recs *s);

/* The newest record of each key under slot i's arcs/<token>/, sorted by
 * key (PROTOCOL.md: the newest timestamp wins, ties to the larger
 * checksum). No directory: no records. */
void e2e_token_records(int i, uint32_t token, e2e_recs *out);

/* Whether every owner of every token in the table in service holds the
 * same records, byte for byte (key, timestamp, checksum over the value);
 * *keys (may be NULL) gets the keys held over all tokens. Differences
 * are printed. */
bool e2e_replicas_same(uint64_t *keys);

/* ----------------------------------------------------------- the final check */

/* What every trial ends with: the cluster settled (no pending entry,
 * every running agent acked), `ringctl verify` clean, every owner of
 * every token holding the same records, all w.o.keys keys among them
 * (unless `lossy`: migration none may leave a replica short; then every
 * key must still read back), and every key reading back its value. */
void e2e_check(bool lossy);

/* ------------------------------------------------------------------- tmpfs */

/* Mounts a tmpfs of `bytes` on slot i's data dir (before its agent
 * starts); false when this process may not mount (not root). */
bool e2e_mount_tmpfs(int i, const char *id, uint64_t bytes);

void e2e_unmount(int i);

/* ------------------------------------------------------------------- steps */

/* A node joins in slot i as `nid`; its plan is approved; id[24] gets it. */
void e2e_join(int i, const char *nid, char id[24]);

/* Run `id` done, the plans after it too, then the final check. */
void e2e_finish(const char *id, bool lossy);

/* ------------------------------------------------------------------ suites */

/* A test case with the whole fixture (etcd of `members`), nofork. */
TCase *e2e_tcase(const char *name, int members, int timeout_s);

void e2e_add(Suite *s, const char *name, int members, int timeout_s, const TTest *test);

/* The usual start: config from `o`, agents + ring-kv in slots 0..n-1
 * (ids n0, n1, ...), `coords` coordinators, the first placement applied,
 * the data set loaded (unless o->no_data). */
void e2e_bootstrap(const e2e_opts *o, int n, int coords);

/* -------------------------------------------------------------- with flags */

/* e2e_coord_start with `extra` coordinator flags (space-separated, may be
 * NULL), e.g. "--stuck-after 2s". */
void e2e_coord_start_with(int k, const char *extra);

/* e2e_bootstrap with flags: agent slot i starts with agent_extra[i] (the
 * array and each of its n entries may be NULL), every coordinator with
 * coord_extra (may be NULL). */
void e2e_bootstrap_with(const e2e_opts *o, int n, int coords, const char *const *agent_extra,
                        const char *coord_extra);

/* The tokens node `id` owns a replica of in the table in service,
 * ascending, into tokens[0..cap); returns how many (0 for no table or
 * node). */
uint32_t e2e_tokens_of(const char *id, uint32_t *tokens, uint32_t cap);

/* `ringctl status --json`, parsed (cJSON_Delete it); NULL when ringctl
 * fails or prints no JSON. */
cJSON *e2e_status_json(void);

#endif /* RING_E2E_CLUSTER_H */
