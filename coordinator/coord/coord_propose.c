/*
 * coord_propose.c: plan/proposed. Whenever the desired membership (node
 * records, config) differs from the table and no run is active, the plan
 * for it is computed and stored, replacing one made for an older
 * membership or base version. When the auto-apply policy approves the
 * plan (every plan, or repairs only) the run starts in the same txn. The
 * planner runs only when its input changed (a hash of it), and the input
 * is built and checked against the table only when the state or the table
 * changed (coord_memo), so an idle look costs no read and O(1) CPU here.
 */
#include "coord.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* A hash of everything the planner reads, plus the base version. */
static uint64_t input_hash(const rk_plan_input *in, uint64_t base) {
  XXH3_state_t *h = XXH3_createState();
  if (h == NULL)
    return 0; /* 0 never matches a cached hash: the plan is just recomputed */
  XXH3_64bits_reset(h);
  uint64_t nums[] = {base,
                     in->tokens,
                     in->replicas,
                     in->seed,
                     in->moves_per_node,
                     in->moves_per_domain,
                     in->moves_per_wave,
                     in->n_nodes,
                     (uint64_t)in->balance}; /* sizes are not hashed: they drift */
  XXH3_64bits_update(h, nums, sizeof nums);
  XXH3_64bits_update(h, in->failure_domain, strlen(in->failure_domain) + 1);
  XXH3_64bits_update(h, in->best_effort, strlen(in->best_effort) + 1);
  for (uint32_t i = 0; i < in->n_nodes; i++) {
    const rk_node *n = &in->nodes[i];
    XXH3_64bits_update(h, n->id, strlen(n->id) + 1);
    XXH3_64bits_update(h, n->addr, strlen(n->addr) + 1);
    for (uint32_t k = 0; k < n->labels.n; k++) {
      XXH3_64bits_update(h, n->labels.key[k], strlen(n->labels.key[k]) + 1);
      XXH3_64bits_update(h, n->labels.value[k], strlen(n->labels.value[k]) + 1);
    }
    uint64_t st[2] = {(uint64_t)n->state, n->labels.n};
    XXH3_64bits_update(h, st, sizeof st);
    XXH3_64bits_update(h, &n->weight, sizeof n->weight);
  }
  uint64_t v = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  return v ? v : 1;
}

/* Deletes a proposal that no longer applies. */
static int withdraw(coord *c, const rk_state *s) {
  char key[RK_KEY_MAX];
  int len = coord_key(c, key, "plan/proposed");
  ring_cmp cmp = {.key = key,
                  .key_len = (size_t)len,
                  .target = RING_CMP_MOD,
                  .op = RING_CMP_EQ,
                  .number = s->proposed_mod};
  ring_op op = {.type = RING_OP_DELETE, .key = key, .key_len = (size_t)len};
  ring_error err = {0};
  int rc = coord_txn(c, &cmp, 1, &op, 1, &err);
  if (rc == RING_OK)
    rd_log(RD_INFO, "proposal withdrawn: the table already matches", "plan", s->proposed.id, NULL);
  return rc == RING_OK ? 1 : rc == RING_ECONFLICT ? 0 : rc;
}

/* A repair only restores redundancy: every move takes a replica off a down
 * node and streams it from a live one; a plan that moves nothing (a
 * removed node leaving the table) is one too. Anything else (a join, a
 * drain, a weight, a move whose data is gone, the first placement) is a
 * change an operator approves. */
static bool is_repair(const ring_plan *p) {
  if (ring_plan_base_version(p) == 0)
    return false;
  const ring_table *target = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  uint32_t n = ring_plan_move_count(p);
  for (uint32_t i = 0; i < n; i++)
    if (ring_table_node_state(target, m[i].from) != RING_NODE_DOWN || m[i].source == RING_NODE_NONE)
      return false;
  return true;
}

/* Whether the plan for the current input runs without `ringctl apply`:
 * the cluster's policy, raised to all by the daemon's --auto-apply. */
static bool auto_apply(const coord *c, const rk_state *s, const rk_plan_doc *d) {
  rk_auto_apply policy = c->o.auto_apply ? RK_AUTO_ALL : s->config.auto_apply;
  if (d->n_violations != 0 || policy == RK_AUTO_NONE)
    return false;
  return policy == RK_AUTO_ALL || c->input_repair;
}

/* Writes the proposal, and with auto-apply the run of it too, in one txn
 * that also checks the base version and that no run exists. */
static int store(coord *c, const rk_state *s, const rk_plan_doc *d) {
  char kprop[RK_KEY_MAX], kact[RK_KEY_MAX], kver[RK_KEY_MAX];
  int lprop = coord_key(c, kprop, "plan/proposed"), lact = coord_key(c, kact, "plan/active");
  int lver = coord_key(c, kver, "version");
  ring_cmp cmps[3] = {
      {.key = kver,
       .key_len = (size_t)lver,
       .target = RING_CMP_MOD,
       .op = RING_CMP_EQ,
       .number = s->version_mod},
      {.key = kact, .key_len = (size_t)lact, .target = RING_CMP_CREATE, .op = RING_CMP_EQ},
      {.key = kprop,
       .key_len = (size_t)lprop,
       .target = RING_CMP_MOD,
       .op = RING_CMP_EQ,
       .number = s->has_proposed ? s->proposed_mod : 0},
  };
  char *value = NULL;
  size_t vlen = 0;
  char *run_value = NULL;
  size_t run_len = 0;
  ring_op ops[2];
  uint32_t n_ops = 0;
  int rc = rk_plan_doc_encode(d, NULL, &value, &vlen);
  ops[n_ops++] = (ring_op){.type = RING_OP_PUT,
                           .key = kprop,
                           .key_len = (size_t)lprop,
                           .value = value,
                           .value_len = vlen};
  rk_run run;
  if (rc == RING_OK && auto_apply(c, s, d) &&
      (rc = rk_run_start(d, rd_wall_ms(), &run)) == RING_OK) {
    rc = rk_run_encode(&run, &run_value, &run_len);
    rk_run_free(&run);
    ops[n_ops++] = (ring_op){.type = RING_OP_PUT,
                             .key = kact,
                             .key_len = (size_t)lact,
                             .value = run_value,
                             .value_len = run_len};
  }
  ring_error err = {0};
  if (rc == RING_OK)
    rc = coord_txn(c, cmps, 3, ops, n_ops, &err);
  free(value);
  free(run_value);
  if (rc == RING_OK)
    rd_log(RD_INFO, auto_apply(c, s, d) ? "plan approved (auto-apply)" : "plan proposed", "plan",
           d->id[0] ? d->id : "refused", "kind", c->input_repair ? "repair" : "change",
           "violations", d->n_violations ? d->violations[0] : "none", NULL);
  else if (rc != RING_ECONFLICT && rc != RING_ENOTLEADER)
    coord_trouble(c, "storing the plan", &err);
  return rc == RING_OK ? 1 : rc == RING_ECONFLICT ? 0 : rc;
}

/* The bytes p moves, from the hosts' sizes/ reports: 0 (unknown) when there
 * are none or etcd cannot say now; an estimate is never worth failing a
 * proposal over. Read only here, when a plan is made, not at every step. */
static uint64_t plan_bytes(coord *c, const ring_plan *p) {
  rk_state z;
  ring_error err = {0};
  if (c->table == NULL || rk_state_read(c->etcd, c->o.cluster, RK_READ_SIZES, &z, &err) != RING_OK)
    return 0;
  uint64_t *arc = NULL, bytes = 0;
  uint32_t known = 0;
  if (rk_arc_bytes(&z, c->table, &arc, &known) == RING_OK)
    bytes = rk_plan_bytes_in(p, arc, NULL);
  free(arc);
  rk_state_free(&z);
  return bytes;
}

/* Under bytes balance, the hosts' sizes for the planner (rk_input_weigh);
 * why[] says when the plan falls back to tokens. Sizes are read only here,
 * when a plan is made. */
static int weigh(coord *c, rk_plan_input *in, char *why, size_t cap) {
  why[0] = '\0';
  if (in->balance != RING_BALANCE_BYTES)
    return RING_OK;
  rk_state z;
  ring_error err = {0};
  if (rk_state_read(c->etcd, c->o.cluster, RK_READ_SIZES, &z, &err) != RING_OK) {
    in->balance = RING_BALANCE_TOKENS;
    snprintf(why, cap, "balance bytes: sizes unreadable (%.80s); planned by tokens", err.message);
    return RING_OK;
  }
  int rc = rk_input_weigh(&z, c->table, in, why, cap);
  rk_state_free(&z);
  return rc;
}

/* The desired membership judged against the table at one look: whether
 * they match, else the input's hash. Both are pure functions of the
 * state and the table (the planner's input and ring_table_verify cost
 * O(hosts + tokens)), so they are kept while the look's key is the same.
 * The loop's alone; one coordinator per process. */
static struct {
  coord_memo key;
  bool matches;  /* no plan is needed */
  uint64_t hash; /* else input_hash of the input and version */
} judged;

/* The planner's input for s into *in (rk_plan_input_free it). */
static int desired(coord *c, const rk_state *s, rk_plan_input *in) {
  ring_error err = {0};
  int rc = rk_desired_input(s, c->table, in, &err);
  if (rc != RING_OK)
    coord_trouble(c, "building the planner's input", &err);
  return rc;
}

/* Fills `judged` for this look unless it holds already; RING_OK or the
 * input's error (nothing kept then). */
static int judge(coord *c, const rk_state *s) {
  coord_memo key = coord_memo_of(c, s);
  if (coord_memo_same(&judged.key, &key))
    return RING_OK;
  rk_plan_input in;
  int rc = desired(c, s, &in);
  if (rc != RING_OK)
    return rc;
  judged.matches = in.n_nodes == 0 || rk_input_matches_table(&in, c->table);
  judged.hash = judged.matches ? 0 : input_hash(&in, s->version);
  judged.key = judged.matches || judged.hash != 0 ? key : (coord_memo){0};
  rk_plan_input_free(&in);
  return RING_OK;
}

int coord_propose(coord *c, const rk_state *s) {
  int rc = judge(c, s);
  if (rc != RING_OK)
    return rc;
  if (judged.matches) {
    c->input_hash = 0;
    return s->has_proposed ? withdraw(c, s) : 0;
  }
  uint64_t h = judged.hash;
  bool fresh = s->has_proposed && s->proposed.base_version == s->version;
  if (h == c->input_hash && fresh && !auto_apply(c, s, &s->proposed))
    return 0; /* proposed for exactly this input already */
  rk_plan_input in;
  if ((rc = desired(c, s, &in)) != RING_OK)
    return rc;
  ring_error err = {0};
  rk_plan_doc d;
  ring_plan *p = NULL;
  char why[160];
  rc = weigh(c, &in, why, sizeof why);
  if (rc == RING_OK)
    rc = rk_plan_doc_make(c->table, c->o.cluster, &in, rd_wall_ms(), &d, &p, &err);
  else
    ring__err(&err, rc, "planner: out of memory");
  rk_plan_input_free(&in);
  if (rc == RING_OK && why[0])
    rd_log(RD_WARN, "plan by tokens", "why", why, NULL);
  if (rc != RING_OK) {
    coord_trouble(c, "planning", &err);
    return rc;
  }
  c->input_repair = is_repair(p);
  d.bytes = plan_bytes(c, p);
  ring_plan_free(p);              /* the run recomputes it from the document */
  c->input_hash = why[0] ? 0 : h; /* a fallback is retried at the next step */
  bool same =
      fresh && strcmp(s->proposed.id, d.id) == 0 && s->proposed.n_violations == d.n_violations;
  rc = same && !auto_apply(c, s, &d) ? 0 : store(c, s, &d);
  rk_plan_doc_free(&d);
  return rc;
}
