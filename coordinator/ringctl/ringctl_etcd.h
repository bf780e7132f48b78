/*
 * ringctl_etcd.h: what ringctl's etcd commands share: a client opened from
 * the global options, runtime-failure messages, reading the cluster, and
 * compare-and-swap of one key. Internal to the ringctl binary.
 *
 * Sections: the session; failures; reading; writing; plans; throttle
 * options.
 *
 * Every function that returns an int here returns a ringctl exit code
 * (RINGCTL_EXIT_*), having printed why on stderr when it is not OK.
 */
#ifndef RINGCTL_ETCD_H
#define RINGCTL_ETCD_H

#include "cluster.h"
#include "journal.h"
#include "ringctl.h"

/* ------------------------------------------------------------ the session */

/* One command's connection to one cluster. */
typedef struct ringctl_audit_entry {
  bool pending;                         /* set by ringctl_audit, cleared once written */
  char what[RING_ID_MAX + 1];           /* "plan.approve", "node.drain", ... */
  char node[RING_ID_MAX + 1];           /* the node concerned, or "" */
  char detail[RK_EVENT_DETAIL_MAX + 1]; /* one line */
  char key[RK_KEY_MAX];                 /* journal/<name>, made at the write */
} ringctl_audit_entry;

typedef struct ringctl_ctx {
  ringctl_args *a;           /* the command's arguments: prog for messages, globals */
  ring_etcd *etcd;           /* open client */
  const char *cluster;       /* the cluster name (validated) */
  ringctl_audit_entry audit; /* the change being written, for the journal */
  int64_t deadline_ms;       /* --timeout's end, CLOCK_MONOTONIC ms; 0: none */
  char *unreachable;         /* non-NULL: ringctl_fail keeps an unreachable etcd's message
                                here (RINGCTL_UNREACHABLE_MAX) instead of printing it */
} ringctl_ctx;

#define RINGCTL_UNREACHABLE_MAX 512

/* A command body that runs with an open session; returns an exit code. */
typedef int (*ringctl_body_fn)(ringctl_ctx *ctx, void *ud);

/* Opens a client from the global options (--endpoints, default
 * http://127.0.0.1:2379; --cluster, required; auth, TLS, --timeout), runs
 * body and closes the client. Bad global options give RINGCTL_EXIT_USAGE.
 * --timeout (default 10s; none when globals->until_done and not given) is
 * one deadline for the whole command: every etcd call gets what is left,
 * and rides out an unreachable etcd until then (ring_etcd_set_deadline). */
int ringctl_with_etcd(ringctl_args *a, ringctl_body_fn body, void *ud);

/* A command without options or arguments of its own: parses (help, global
 * options, usage errors), then runs body through ringctl_with_etcd. */
int ringctl_run_plain(ringctl_args *a, const char *help, ringctl_body_fn body, void *ud);
/* --all, the option of status and members: list removed nodes too
 * (ringctl_nodes.c). ringctl_run_all reads a's --all (nothing else) and
 * runs body with a bool (--all given) as its ud; else as ringctl_run_plain. */
extern const ringctl_opt ringctl_all_opts[];
int ringctl_run_all(ringctl_args *a, const char *help, ringctl_body_fn body);

/* ---------------------------------------------------------------- failures */

/* Prints "PROG: WHAT: DETAIL" (DETAIL err's message, else
 * ring_strerror(rc)) and returns RINGCTL_EXIT_FAILURE, or
 * RINGCTL_EXIT_UNKNOWN when etcd could not be reached or did not answer
 * (then ctx->unreachable, when set, gets the message instead of stderr). */
int ringctl_fail(const ringctl_ctx *ctx, int rc, const ring_error *err, const char *what);

/* Prints "PROG: MESSAGE" and returns code. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int ringctl_say(const ringctl_ctx *ctx, int code, const char *fmt, ...);

/* ------------------------------------------------------------------ reading */

/* The key "/ringkeeper/<cluster>/<what>" (what fits: names are checked). */
void ringctl_key(const ringctl_ctx *ctx, const char *what, char key[RK_KEY_MAX]);

/* Reads `what` (RK_READ_*; the config is always read) into *st; a cluster
 * that was never initialised is a failure. On failure *st holds nothing. */
int ringctl_read_state(ringctl_ctx *ctx, unsigned what, rk_state *st);

/* Reads tables/<version> into *out (ring_table_free it). */
int ringctl_read_table(ringctl_ctx *ctx, uint64_t version, ring_table **out);

/* Reads the state and, when a table is published, the live table (*table
 * NULL before the first one). On failure nothing is held. */
int ringctl_read_live(ringctl_ctx *ctx, unsigned what, rk_state *st, ring_table **table);

/* A command body over the live table (t NULL when none is published and
 * the command allows it); returns an exit code. */
typedef int (*ringctl_table_fn)(ringctl_ctx *ctx, const rk_state *st, const ring_table *t,
                                void *ud);

/* Reads the config, the version and the live table and runs fn on them.
 * Without a table: when `none` is not NULL, prints "no table is published
 * yet: <none>" and fails; else runs fn with t NULL. */
int ringctl_with_table(ringctl_ctx *ctx, const char *none, ringctl_table_fn fn, void *ud);

/* Reads one key: *found false when absent; on success with found, *kv holds
 * the key-value (ring_kv_clear it). */
int ringctl_get(ringctl_ctx *ctx, const char *key, ring_kv *kv, bool *found);
/* Reads a key that must be there: when absent, says `missing` and fails
 * (RINGCTL_EXIT_FAILURE). On success *kv holds it (ring_kv_clear it). */
int ringctl_get_required(ringctl_ctx *ctx, const char *key, ring_kv *kv, const char *missing);

/* Reads every key under a prefix (ring_kvs_clear *out). */
int ringctl_get_prefix(ringctl_ctx *ctx, const char *prefix, ring_kvs *out);

/* ------------------------------------------------------------------ writing */

/* Turns a value into its replacement: writes a malloc()'ed *out (free()d
 * by the caller; left NULL when nothing needs to change) and returns
 * RINGCTL_EXIT_OK, or returns an exit code (after a message) to stop
 * without writing. Called again with the new value after a lost race. */
typedef int (*ringctl_edit_fn)(ringctl_ctx *ctx, const ring_kv *kv, char **out, size_t *len,
                               void *ud);

/* The journal entry of the change this command is about to write
 * (proto/etcd.md, `journal/`): who (--as NAME, else login@host), what,
 * the node and a detail line. The next ringctl_txn that wins writes it in
 * the same txn as the change, so the journal holds exactly the changes
 * that happened, each once. A later call before the write replaces it. */
void ringctl_audit(ringctl_ctx *ctx, const char *what, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One txn of puts or deletes under compares: *won says whether the
 * compares held (and the ops were applied). A pending audit entry is
 * put in the same txn. A failed request prints "PROG:
 * WHAT: why" and returns RINGCTL_EXIT_FAILURE. */
int ringctl_txn(ringctl_ctx *ctx, const ring_cmp *cmps, uint32_t n_cmps, const ring_op *ops,
                uint32_t n_ops, const char *what, bool *won);

/* ringctl_txn's helper (ringctl_audit.c): ops plus the journal put, in a
 * malloc()'ed *all (n + 1 ops) whose last op points at *entry and at
 * ctx->audit.key. Both are free()d by the caller after the txn. */
int ringctl_audit_ops(ringctl_ctx *ctx, const ring_op *ops, uint32_t n, ring_op **all,
                      char **entry);

/* Compare-and-swap of one existing key: reads it, calls edit, writes the
 * result if the key's mod revision is unchanged; retries a few times when
 * it changed in between. `missing` is the message for an absent key
 * (exit 1). A lost race every time gives RINGCTL_EXIT_CONFLICT. */
int ringctl_cas(ringctl_ctx *ctx, const char *key, const char *missing, ringctl_edit_fn edit,
                void *ud);

/* Changes a node record in place (weight, desired state); returns an exit
 * code. May be called again on a newer record after a lost race. */
typedef int (*ringctl_node_fn)(ringctl_ctx *ctx, rk_node *n, void *ud);

/* Compare-and-swap of nodes/<id> through edit (ringctl_node_edit.c): an
 * absent record is "unknown node ID", exit 1. */
int ringctl_node_cas(ringctl_ctx *ctx, const char *id, ringctl_node_fn edit, void *ud);

/* Reads a node command's arguments: exactly n positionals into pos[], the
 * first a node id. Same contract as ringctl_parse. */
int ringctl_node_args(ringctl_args *a, const char *help, const char **pos, uint32_t n,
                      bool *help_shown);

/* Unix milliseconds now. */
uint64_t ringctl_now_ms(void);

/* ------------------------------------------------------------------- plans */

/* Reads a plan file saved by `ringctl plan -o` (at most 64 MiB) into *d
 * (rk_plan_doc_free it). An unreadable file or one that is not a plan is a
 * failure that says so, with *d holding nothing. The moves are not
 * read: ringctl_plan_compute_file recomputes them and checks the file's. */
int ringctl_plan_load(const ringctl_ctx *ctx, const char *path, rk_plan_doc *d);

/* Recomputes a plan document's moves from tables/<base_version> and checks
 * its digest (rk_plan_doc_compute). A refused document gives *plan NULL and
 * OK (it is shown, not run). A digest mismatch is a failure that says so. */
int ringctl_plan_compute(ringctl_ctx *ctx, const rk_plan_doc *d, ring_plan **plan);

/* ringctl_plan_compute for a document read from the file at path, which
 * must also list no other moves than those recomputed (a file without
 * "moves" is fine): a file whose moves were edited is refused, saying so. */
int ringctl_plan_compute_file(ringctl_ctx *ctx, const char *path, const rk_plan_doc *d,
                              ring_plan **plan);

/* Prints a plan: --json's shape or the summary (ringctl_out.h). */
int ringctl_plan_show(const ringctl_ctx *ctx, const rk_plan_doc *d, const ring_plan *plan,
                      const rk_config *cfg, const uint64_t *arc_bytes);

/* Writes the document with its moves to path (through a temporary file
 * renamed into place, so a reader never sees half a plan). */
int ringctl_plan_save(const ringctl_ctx *ctx, const rk_plan_doc *d, const ring_plan *plan,
                      const char *path);

/* One `plan --what-if` change (cmd_whatif.c). */
typedef enum ringctl_whatif_kind {
  RINGCTL_WHATIF_ADD,
  RINGCTL_WHATIF_REMOVE,
  RINGCTL_WHATIF_FAIL
} ringctl_whatif_kind;
typedef struct ringctl_whatif {
  ringctl_whatif_kind kind;
  char id[RING_ID_MAX + 1]; /* add, remove: the node */
  rk_labels labels;         /* add: its labels; fail: the one level=value */
  double weight;            /* add: its weight (default 1) */
} ringctl_whatif;

/* Parses "add=ID,zone=Z[,rack=R][,weight=W]", "remove=ID" or
 * "fail=LEVEL:VALUE". Returns RINGCTL_EXIT_OK, or the usage exit code after
 * a message (*out untouched). */
int ringctl_whatif_parse(const ringctl_args *a, const char *spec, ringctl_whatif *out);

/* Plans offline from the live state with the changes applied, in order;
 * shows the plan (and for fail=, the tokens that lose replicas) and saves
 * it to out_file when not NULL. Writes nothing to the cluster. */
int ringctl_plan_whatif(ringctl_ctx *ctx, const ringctl_whatif *w, uint32_t n,
                        const ring_balance *balance, const char *out_file);

/* Follows run `id` (ringctl_wait.c) until it is in plan/history/: a
 * progress bar on a terminal, progress lines otherwise. Returns 0 when it
 * is done, 1 when it failed or was cancelled (or vanished), 4 when etcd
 * stayed unreachable (or the run went on) until ctx's deadline: an etcd
 * outage before it is waited out. With
 * stuck_timeout_ms (0: none) also 1, after showing the stuck and failing
 * moves, when no move was done for that long or the coordinator reports
 * moves of the run stuck. */
int ringctl_wait_run(ringctl_ctx *ctx, const char *id, uint64_t stuck_timeout_ms,
                     uint64_t estimate_ms);

/* --stuck-timeout of `apply --wait` and `wait`: a duration up to a week.
 * Same contract as ringctl_parse_uint. */
int ringctl_stuck_timeout_opt(const ringctl_args *a, const char *value, uint64_t *out);

/* Whether s is a plan id: 16 lowercase hex digits. */
bool ringctl_is_plan_id(const char *s);

/* ------------------------------------------------------- throttle options */

/* The throttle options of `init` and `throttle`, for their option tables. */
enum {
  RINGCTL_OPT_MOVES_PER_NODE = 100,
  RINGCTL_OPT_MOVES_PER_DOMAIN,
  RINGCTL_OPT_MOVES_PER_WAVE,
  RINGCTL_OPT_BYTES_PER_SEC
};
#define RINGCTL_THROTTLE_OPTS                                                                      \
  {"moves-per-node", RINGCTL_OPT_MOVES_PER_NODE, true},                                            \
      {"moves-per-domain", RINGCTL_OPT_MOVES_PER_DOMAIN, true},                                    \
      {"moves-per-wave", RINGCTL_OPT_MOVES_PER_WAVE, true}, {                                      \
    "bytes-per-sec", RINGCTL_OPT_BYTES_PER_SEC, true                                               \
  }
#define RINGCTL_THROTTLE_HELP                                                                      \
  "  --moves-per-node N    concurrent moves one node takes part in (0: no limit)\n"                \
  "  --moves-per-domain N  concurrent moves touching one failure domain (0: no limit)\n"           \
  "  --moves-per-wave N    moves in flight cluster-wide (0: no limit)\n"                           \
  "  --bytes-per-sec N     each agent's incoming arc byte rate (0: no limit)\n"

/* Changes the cluster's config: change() is replayed onto the config as
 * read (so a concurrent change of another field is kept) and the result
 * written with ringctl_cas. An uninitialised cluster is exit 1. */
typedef void (*ringctl_config_change_fn)(const ringctl_args *a, rk_config *config, const void *ud);
int ringctl_config_cas(ringctl_ctx *ctx, ringctl_config_change_fn change, const void *ud);

/* Parses an auto-apply policy (none, repair, all) into *out. Returns
 * RINGCTL_EXIT_OK or the usage exit code after a message. */
int ringctl_auto_apply_opt(const ringctl_args *a, const char *value, rk_auto_apply *out);

/* A config field that takes one of a few names (ringctl_setting.c). */
typedef struct ringctl_setting {
  const char *help;
  const char *label;    /* in messages and text output: "auto-apply" */
  const char *json_key; /* the config field and the --json key: "auto_apply" */
  const char *choices;  /* for messages: "none, repair or all" */
  const char *const *names;
  int n_names;
  int (*get)(const rk_config *c);       /* index into names */
  void (*set)(rk_config *c, int value); /* value: an index into names */
} ringctl_setting;

/* `ringctl <setting> [NAME] [--json]`: prints the field, or changes it
 * (journalled) and prints it. */
int ringctl_setting_cmd(ringctl_args *a, const ringctl_setting *s);

/* Parses a balance objective (tokens, bytes) into *out; as above. */
int ringctl_balance_opt(const ringctl_args *a, const char *value, ring_balance *out);
/* The objectives' names, indexed by ring_balance. */
extern const char *const ringctl_balance_names[2];

/* Applies throttle option id to *t. Returns RINGCTL_EXIT_OK, the usage
 * exit code after a message, or -1 when id is not a throttle option. */
int ringctl_throttle_opt(const ringctl_args *a, int id, const char *value, rk_throttle *t);

#endif /* RINGCTL_ETCD_H */
