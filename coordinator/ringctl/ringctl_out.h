/*
 * ringctl_out.h: what ringctl prints, shared by its commands: JSON
 * building and emitting, human units, node rows (status, members), plan
 * summaries (plan, plan --what-if, apply), the list of finished plans
 * (status, history), stuck moves (status, apply --wait) and bad records
 * (status). Internal to the ringctl binary.
 *
 * Sections: JSON; units; files; nodes; plans; runs; stuck moves; bad
 * records; pictures.
 *
 * JSON builders return a new cJSON tree the caller deletes (or hands to
 * ringctl_json_emit), NULL when out of memory.
 */
#ifndef RINGCTL_OUT_H
#define RINGCTL_OUT_H

#include "cluster.h"
#include "ringctl.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* -------------------------------------------------------------------- JSON */

/* Prints o compactly with a newline on stdout and deletes it. Returns
 * RINGCTL_EXIT_OK, or RINGCTL_EXIT_FAILURE when o is NULL (out of memory). */
int ringctl_json_emit(cJSON *o);
/* Whether ringctl_json_emit printed (the one object a command prints). */
bool ringctl_json_emitted(void);

/* {"key":"value",...} of a node's labels. */
cJSON *ringctl_json_labels(const rk_labels *l);

/* A node id of table t, or JSON null for RING_NODE_NONE. */
cJSON *ringctl_json_node(const ring_table *t, uint16_t index);

/* Adds name: id (or null) to o. */
void ringctl_json_add_node(cJSON *o, const char *name, const ring_table *t, uint16_t index);

/* ------------------------------------------------------------------- units */

/* "1.5 GiB", "512 B" into buf. */
const char *ringctl_bytes(uint64_t bytes, char buf[32]);
/* "68.0/67.1 MiB": a part of a whole in one unit (the larger's). */
const char *ringctl_bytes_of(uint64_t part, uint64_t whole, char buf[64]);
/* "s" unless n is 1: "1 wave", "2 waves". */
const char *ringctl_s(uint64_t n);
/* "2h03m", "4m10s", "12s" into buf. */
const char *ringctl_duration(uint64_t seconds, char buf[32]);
/* "zone=z1,rack=r1" (or "-") into buf. */
const char *ringctl_labels(const rk_labels *l, char *buf, size_t size);
/* "2026-11-30 08:00:00Z" into buf; "-" for 0. */
const char *ringctl_time(uint64_t ms, char buf[32]);

/* ------------------------------------------------------------------- files */

/* Writes path whole or not at all: fill writes into a temporary file
 * beside it (returning 0, or -1 on failure), which is then renamed into
 * place with the mode a new file gets (0666 less the umask). Returns 0,
 * or -1 with errno set and nothing left behind. */
int ringctl_write_file(const char *path, int (*fill)(FILE *f, void *ud), void *ud);

/* ------------------------------------------------------------------- nodes */

/* One node record as status and members show it. */
typedef struct ringctl_node_row {
  const rk_node *node; /* borrowed from the state */
  uint32_t replicas;   /* token-replicas it owns in the live table */
  double target;       /* its weighted target in the live table, domain caps applied */
  bool alive;          /* its alive/ key exists */
  uint64_t acked;      /* acks/<id>, 0 when absent */
  const char *state;   /* as shown: "drained" for a drain done, else the record's */
  bool agent_running;  /* removed, and its agent still holds alive/<id> */
  uint64_t bytes;      /* bytes held: the sum of its sizes/ report (read with RK_READ_SIZES) */
  bool bytes_reported; /* it wrote a sizes/ report (bytes 0 otherwise means unknown) */
} ringctl_node_row;

/* One row per node record of st (in its order) into *rows (malloc()'ed),
 * their count into *n: removed nodes are left out unless `all`, except one
 * whose agent still runs. table may be NULL (no table yet: nothing owned,
 * no target). */
int ringctl_node_rows(const rk_state *st, const ring_table *table, bool all,
                      ringctl_node_row **rows, uint32_t *n);
/* The note under a node table: removed nodes hidden, removed nodes whose
 * agent still runs. */
void ringctl_node_notes(FILE *f, const rk_state *st, const ringctl_node_row *rows, uint32_t n);
/* Token-replicas node `id` owns in t plus those it is to receive (pending
 * entries naming it); 0 when t is NULL or does not name it. */
uint32_t ringctl_node_holds(const ring_table *t, const char *id);
/* "sizes:" line when only `known` of t's tokens have a reported size (the
 * bytes shown count the others as 0); nothing when all do or none. */
void ringctl_sizes_partial(FILE *f, const ring_table *t, uint32_t known);

/* {"id","state","labels","weight","replicas","target","bytes","bytes_reported"},
 * "agent_running" for a removed node whose agent still runs; with full also
 * "addr","desired","alive","acked". */
cJSON *ringctl_node_json(const ringctl_node_row *r, bool full);

/* The node table; with full the address, desired state, liveness and ack. */
void ringctl_node_table(FILE *f, const ringctl_node_row *rows, uint32_t n, bool full);

/* ------------------------------------------------------------------- plans */

/* ringctl plan --json's shape (docs/DESIGN.md): id, base_version, moves_total,
 * lower_bound, waves, bytes, moves (from plan, [] when NULL), violations;
 * with arc sizes (arc_bytes: T entries, rk_arc_bytes; NULL: none known)
 * also "bytes_in" {node: bytes} and, with a byte rate in cfg, "eta_s". */
cJSON *ringctl_plan_json(const rk_plan_doc *d, const ring_plan *plan, const rk_config *cfg,
                         const uint64_t *arc_bytes);

/* The readable summary: moves and bytes per node in and out, waves, bytes
 * and time at the config's byte rate (the busiest receiver's bytes over
 * it), balance before and after, moves against the lower bound,
 * violations. plan NULL for a refused document. */
void ringctl_plan_text(FILE *f, const rk_plan_doc *d, const ring_plan *plan, const rk_config *cfg,
                       const uint64_t *arc_bytes);

/* --------------------------------------------------------------------- runs */

/* The runs under plan/history/, newest first. *runs is malloc()'ed; free
 * with ringctl_runs_free. Values that do not parse are skipped with a
 * warning on stderr. Returns a ring_errno. */
int ringctl_history_read(ring_etcd *c, const char *cluster, rk_run **runs, uint32_t *n,
                         ring_error *err);
void ringctl_runs_free(rk_run *runs, uint32_t n);

/* {"id","state","moves_total","moves_done"} of a run (status's "plan"). */
cJSON *ringctl_run_json(const rk_run *r);

/* ------------------------------------------------------------- stuck moves */

/* The coordinator's `stuck` report in st when it is about st's version
 * (and the active run, when plans were read); NULL otherwise. */
const rk_stuck *ringctl_stuck_of(const rk_state *st);

/* [{"token","slot","from","to","error","for_ms"}] of that report ([] when
 * none). */
cJSON *ringctl_stuck_json(const rk_state *st);

/* [{"node","token","attempts","error"}]: every failing entry the receivers
 * report in progress/ for st's version, stuck or not yet. */
cJSON *ringctl_failing_json(const rk_state *st);

/* The sections "stuck moves" (the report) and "failing, not yet stuck"
 * (failing entries it does not list), each after a blank line; nothing
 * when both are empty. Returns whether it printed anything. */
bool ringctl_stuck_text(FILE *f, const rk_state *st);

/* ------------------------------------------------------------- bad records */

/* The section "bad records" (host, key kind, why) of the records the read
 * ignored (rk_state's bad; --json: rk_bad_json), after a blank line;
 * nothing when there are none. Returns whether it printed anything. */
bool ringctl_bad_text(FILE *f, const rk_state *st);

/* -------------------------------------------------------- missing replicas */

/* The section "missing replicas" (host, count, first tokens, the refill's
 * last error; then the lost tokens) of v, after a blank line; nothing when
 * v is empty; refill_waits: the policy (none) keeps the refill from running.
 * Returns whether it printed anything (ringctl_missing.c). */
bool ringctl_missing_text(FILE *f, const rk_missing_view *v, bool refill_waits);
/* Appends verify's violations for v to arr: one line per host, one for
 * the lost tokens. Returns how many it appended. */
int ringctl_missing_violations(const rk_missing_view *v, cJSON *arr);

/* ------------------------------------------------------ labels that differ */

/* Hosts whose alive/ key reports other labels than their node record
 * (ringctl_labels.c): [{"node","record":{K:V},"host":{K:V}}]. */
cJSON *ringctl_label_mismatch_json(const rk_state *st);
/* The section "labels that differ", after a blank line; nothing if none. */
void ringctl_label_mismatch_text(FILE *f, const rk_state *st);
/* Appends one verify violation per such host to arr; returns how many. */
int ringctl_label_violations(const rk_state *st, cJSON *arr);

/* ------------------------------------------------------- untrusted keys */

/* Nodes whose agent publishes another signing key than the pinned one
 * (ringctl_keys.c): [{"node","pinned","host"}], and the text section. */
cJSON *ringctl_untrusted_keys_json(const rk_state *st);
void ringctl_untrusted_keys_text(FILE *f, const rk_state *st);

/* ----------------------------------------------------------------- pictures */

/* `ringctl render`'s pictures have a header of their own: render.h. */

/* A restored etcd (ringctl_restore.c): whether c's history went back once
 * st is judged (rk_state_history; why gets the reason); st's view of it as
 * `ringctl status --json` shows it (NULL when it did not go back, else
 * {"why","seen_version","hosts":[{"id","seen_version","table_version","tokens"}]});
 * and the banner the text status starts with (false: nothing printed). */
bool ringctl_restored(ring_etcd *c, const rk_state *st, char *why, size_t cap);
cJSON *ringctl_restore_json(ring_etcd *c, const rk_state *st);
bool ringctl_restore_text(FILE *f, ring_etcd *c, const rk_state *st);

#endif /* RINGCTL_OUT_H */
