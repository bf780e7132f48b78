/*
 * coord_run.c: executing plan/active one step at a time (proto/plan.md,
 * "How a run advances").
 *
 * Sections:
 *   1. the run's plan: recomputed from its document once per term
 *   2. choosing the in-flight set: rk_run_choose (cluster/run_steps.c)
 *   3. waiting: acks and progress
 *   4. writing the next cursor, finishing a run
 *   5. the step
 */
#include "coord.h"
#include "ringx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Acks come within milliseconds of a version; a host slower than this is
 * named in the log and /healthz, since it holds up every wave. Counted on
 * this leader's monotonic clock from the first look of its term that found
 * the wave waiting (`waiting` below), never from the run's updated_ms: that
 * is a wall time, possibly another host's, and the difference wraps. */
#define ACK_PATIENCE_MS 10000

/* ------------------------------------------------------ 1. the run's plan */

static int load_plan(coord *c, const rk_run *run, ring_error *err) {
  if (c->run_plan && strcmp(c->run_plan_id, run->plan.id) == 0)
    return RING_OK;
  ring_plan_free(c->run_plan);
  ring_table_free(c->run_base);
  c->run_plan = NULL;
  c->run_base = NULL;
  int rc = RING_OK;
  if (run->plan.base_version != 0)
    rc = rk_table_read(c->etcd, c->o.cluster, run->plan.base_version, &c->run_base, err);
  if (rc == RING_OK)
    rc = rk_plan_doc_compute(&run->plan, c->run_base, &c->run_plan, err);
  if (rc != RING_OK)
    return rc;
  memcpy(c->run_plan_id, run->plan.id, sizeof c->run_plan_id);
  return RING_OK;
}

/* Errors that no retry can fix: the run fails with the reason. */
static bool fatal(int rc) {
  return rc == RING_ENOTFOUND || rc == RING_ECHECKSUM || rc == RING_EVERSION || rc == RING_EPLAN ||
         rc == RING_EFORMAT || rc == RING_EFIELD;
}

/* ------------------------------------------- 3. waiting: acks, progress */

/* The wave this leader last saw waiting for acks, and since when
 * (rd_now_ms). The loop's alone; one coordinator per process, so it lives
 * here rather than in struct coord (coord.h). */
static struct {
  uint64_t term;                 /* c->m.terms */
  char plan[RK_PLAN_ID_LEN + 1]; /* the run's plan */
  uint64_t version;              /* its cursor version */
  uint64_t since_ms;             /* rd_now_ms of the first look that found it waiting */
} waiting;

/* How long the run's current wave has waited for acks, on our clock: 0 at
 * the first look of this term that finds it waiting. */
static uint64_t waiting_for(coord *c, const rk_run *run) {
  uint64_t term = atomic_load(&c->m.terms), now = rd_now_ms();
  if (waiting.term != term || waiting.version != run->cursor.version ||
      strcmp(waiting.plan, run->plan.id) != 0) {
    waiting.term = term;
    waiting.version = run->cursor.version;
    snprintf(waiting.plan, sizeof waiting.plan, "%s", run->plan.id);
    waiting.since_ms = now;
  }
  return now - waiting.since_ms;
}

/* 1 when every receiver reports all its in-flight tokens at `version`;
 * 0 to wait; -1 when a receiver is down (the run cannot finish: *down
 * names it, for the run's reason). */
static int receivers_in(const rk_state *s, const ring_plan *p, const rk_run *run,
                        const char **down) {
  const ring_table *t = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    if (!rk_bit(run->cursor.inflight, i))
      continue;
    const char *id = ring_table_node_id(t, m[i].to);
    const rk_node *n = rk_state_node(s, id);
    if (n != NULL && n->state == RING_NODE_DOWN)
      return *down = id, -1;
    const rk_progress *pr = rk_state_progress(s, id);
    if (pr == NULL || pr->version != run->cursor.version || !rk_progress_covers(pr, &m[i].token, 1))
      return 0;
  }
  return 1;
}

/* ----------------------------------- 4. the next cursor, finishing a run */

/* A copy of run sharing the plan document, with bitmaps of its own. */
typedef struct next_run {
  rk_run r;
  uint8_t *done, *inflight;
  size_t bytes;
} next_run;

static int next_begin(const rk_run *run, next_run *n) {
  n->bytes = (run->plan.moves_total + 7u) / 8u;
  n->r = *run;
  n->done = calloc(n->bytes + 1, 1);
  n->inflight = calloc(n->bytes + 1, 1);
  if (n->done == NULL || n->inflight == NULL)
    return RING_ENOMEM;
  if (run->cursor.done)
    memcpy(n->done, run->cursor.done, n->bytes);
  n->r.cursor.done = n->done;
  n->r.cursor.inflight = n->inflight;
  n->r.updated_ms = rd_wall_ms();
  return RING_OK;
}

static void next_end(next_run *n) {
  free(n->done);
  free(n->inflight);
}

/* Encodes the run as the value of an op on plan/active, or (terminal
 * state) on plan/history/<id> with a delete of plan/active. */
typedef struct run_ops {
  char kact[RK_KEY_MAX], khist[RK_KEY_MAX];
  char *value;
  ring_op ops[2];
  uint32_t n;
} run_ops;

static int run_ops_make(coord *c, const rk_run *r, run_ops *o) {
  size_t len;
  int rc = rk_run_encode(r, &o->value, &len);
  if (rc != RING_OK)
    return rc;
  coord_key(c, o->kact, "plan/active");
  rk_key2(o->khist, c->o.cluster, "plan/history/", r->plan.id[0] ? r->plan.id : "refused");
  bool terminal = r->state >= RK_RUN_DONE;
  const char *k = terminal ? o->khist : o->kact;
  o->ops[0] = (ring_op){
      .type = RING_OP_PUT, .key = k, .key_len = strlen(k), .value = o->value, .value_len = len};
  o->ops[1] = (ring_op){.type = RING_OP_DELETE, .key = o->kact, .key_len = strlen(o->kact)};
  o->n = terminal ? 2 : 1;
  return RING_OK;
}

static void log_end(coord *c, const rk_run *r) {
  _Atomic uint64_t *ctr = r->state == RK_RUN_DONE     ? &c->m.runs_done
                          : r->state == RK_RUN_FAILED ? &c->m.runs_failed
                                                      : &c->m.runs_cancelled;
  atomic_fetch_add(ctr, 1);
  rd_log(r->state == RK_RUN_FAILED ? RD_ERROR : RD_INFO, "run finished", "plan", r->plan.id,
         "state", rk_run_state_name(r->state), "reason", r->reason, NULL);
}

/* Writes the next cursor, publishing `table` with it when not NULL. */
static int commit(coord *c, const rk_state *s, next_run *n, ring_table *table) {
  run_ops o = {.value = NULL};
  ring_error err = {0};
  if (n->r.state >= RK_RUN_DONE)
    n->r.finished_ms = rd_wall_ms();
  if (table)
    n->r.cursor.version = ring_table_version(table);
  int rc = run_ops_make(c, &n->r, &o);
  if (rc != RING_OK) {
    ring_table_free(table);
    ring__err(&err, rc, "encoding the run: %s", ring_strerror(rc));
  } else if (table) {
    rc = coord_publish(c, s, table, o.ops, o.n, &err);
  } else {
    char kact[RK_KEY_MAX];
    int len = coord_key(c, kact, "plan/active");
    ring_cmp cmp = {.key = kact,
                    .key_len = (size_t)len,
                    .target = RING_CMP_MOD,
                    .op = RING_CMP_EQ,
                    .number = s->active_mod};
    rc = coord_txn(c, &cmp, 1, o.ops, o.n, &err);
  }
  free(o.value);
  if (rc == RING_OK && n->r.state >= RK_RUN_DONE)
    log_end(c, &n->r);
  else if (rc != RING_OK && rc != RING_ECONFLICT && rc != RING_ENOTLEADER)
    coord_trouble(c, "advancing the run", &err);
  return rc == RING_OK ? 1 : rc == RING_ECONFLICT ? 0 : rc;
}

/* The table after the done moves (and the in-flight ones as pending). */
static int table_at(coord *c, const rk_state *s, const next_run *n, const uint8_t *pending,
                    ring_table **out) {
  ring_error err = {0};
  int rc = rk_run_table(c->run_base, c->run_plan, n->done, pending, s->version + 1, out, &err);
  if (rc != RING_OK)
    coord_trouble(c, "building the next table", &err);
  return rc;
}

/* Ends the run in `state`; a pending set is dropped by publishing the
 * table without it (its owners never changed). */
static int finish(coord *c, const rk_state *s, const rk_run *run, rk_run_state state,
                  const char *reason) {
  next_run n;
  ring_table *t = NULL;
  int rc = next_begin(run, &n);
  if (rc == RING_OK && run->cursor.pending && c->run_plan)
    rc = table_at(c, s, &n, NULL, &t);
  if (rc == RING_OK) {
    n.r.state = state;
    n.r.cursor.pending = false;
    snprintf(n.r.reason, sizeof n.r.reason, "%s", reason);
    rc = commit(c, s, &n, t);
  }
  next_end(&n);
  return rc;
}

/* ------------------------------------------------------------- 5. the step */

static uint32_t count_bits(const uint8_t *b, size_t bytes) {
  uint32_t n = 0;
  for (size_t i = 0; i < bytes; i++)
    n += (uint32_t)__builtin_popcount(b[i]);
  return n;
}

/* Publishes the table for n's done set (with `pending` in flight, or
 * none) and the cursor that names it; next_end(n) either way. */
static int advance(coord *c, const rk_state *s, next_run *n, const uint8_t *pending,
                   uint32_t wave) {
  ring_table *t = NULL;
  int rc = table_at(c, s, n, pending, &t);
  if (rc == RING_OK) {
    n->r.cursor.pending = pending != NULL;
    n->r.cursor.moves_done = count_bits(n->done, n->bytes);
    n->r.cursor.wave = pending ? wave : rk_run_next_wave(c->run_plan, n->done, wave);
    if (n->r.cursor.moves_done == n->r.plan.moves_total)
      n->r.state = RK_RUN_DONE;
    rc = commit(c, s, n, t);
  }
  next_end(n);
  return rc;
}

/* Bytes the receivers of the in-flight set report for it (progress/<id>
 * counts, per receiver, the arcs of this version it holds). */
static uint64_t inflight_bytes(const rk_state *s, const ring_plan *p, const rk_run *run) {
  const ring_table *t = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  uint8_t *seen = calloc(ring_table_node_count(t) + 1u, 1);
  uint64_t bytes = 0;
  for (uint32_t i = 0; seen && i < ring_plan_move_count(p); i++) {
    if (!rk_bit(run->cursor.inflight, i) || seen[m[i].to])
      continue;
    seen[m[i].to] = 1;
    const rk_progress *pr = rk_state_progress(s, ring_table_node_id(t, m[i].to));
    bytes += pr && pr->version == run->cursor.version ? pr->bytes : 0;
  }
  free(seen);
  return bytes;
}

/* Pending -> cutover: the in-flight moves become done. */
static int cut_over(coord *c, const rk_state *s, const rk_run *run) {
  next_run n;
  if (next_begin(run, &n) != RING_OK)
    return next_end(&n), RING_ENOMEM;
  for (size_t i = 0; i < n.bytes; i++)
    n.done[i] |= run->cursor.inflight[i];
  n.r.cursor.bytes_done += inflight_bytes(s, c->run_plan, run);
  return advance(c, s, &n, NULL, run->cursor.wave);
}

/* Settled -> the next in-flight set (or, with migration none, its cutover). */
static int start_set(coord *c, const rk_state *s, const rk_run *run) {
  next_run n;
  uint32_t wave = rk_run_next_wave(c->run_plan, run->cursor.done, run->cursor.wave);
  if (next_begin(run, &n) != RING_OK ||
      rk_run_choose(c->run_plan, run->cursor.done, &s->config.throttle, wave, n.inflight) == 0)
    return next_end(&n), RING_ENOMEM;
  if (s->config.migration != RK_MIGRATE_NONE)
    return advance(c, s, &n, n.inflight, wave);
  for (size_t i = 0; i < n.bytes; i++)
    n.done[i] |= n.inflight[i];
  memset(n.inflight, 0, n.bytes);
  return advance(c, s, &n, NULL, wave);
}

/* A run whose moves are all done (or that has none): publish the target if
 * the table is not it yet (node records may have changed), then history. */
static int complete(coord *c, const rk_state *s, const rk_run *run) {
  next_run n;
  ring_table *t = NULL;
  int rc = next_begin(run, &n);
  bool publish = run->cursor.version == run->plan.base_version;
  for (uint32_t i = 0; rc == RING_OK && i < run->plan.moves_total; i++)
    rk_bit_set(n.done, i, true); /* a first placement is done in one step */
  if (rc == RING_OK && publish)
    rc = table_at(c, s, &n, NULL, &t);
  if (rc == RING_OK) {
    n.r.state = RK_RUN_DONE;
    n.r.cursor.moves_done = run->plan.moves_total;
    rc = commit(c, s, &n, t);
  }
  next_end(&n);
  return rc;
}

static void observe(coord *c, const rk_run *run) {
  atomic_store(&c->m.moves_total, run->plan.moves_total);
  atomic_store(&c->m.moves_done, run->cursor.moves_done);
  atomic_store(&c->m.waves_total, run->plan.waves);
  atomic_store(&c->m.wave, run->cursor.wave);
}

int coord_run_step(coord *c, const rk_state *s) {
  if (!s->has_active)
    return 0;
  const rk_run *run = &s->active;
  observe(c, run);
  ring_error err = {0};
  int rc = load_plan(c, run, &err);
  if (rc != RING_OK)
    return fatal(rc) ? finish(c, s, run, RK_RUN_FAILED, err.message)
                     : (coord_trouble(c, "loading the run's plan", &err), rc);
  if (run->cursor.version != s->version) {
    char why[RK_REASON_MAX];
    snprintf(why, sizeof why, "the table is at version %" PRIu64 ", the run at %" PRIu64,
             s->version, run->cursor.version);
    return finish(c, s, run, RK_RUN_FAILED, why);
  }
  if (run->state == RK_RUN_CANCELLING)
    return finish(c, s, run, RK_RUN_CANCELLED, "cancelled by the operator");
  if (run->cursor.pending) {
    const char *down = NULL;
    int in = receivers_in(s, c->run_plan, run, &down);
    if (in < 0) {
      char why[RK_REASON_MAX];
      snprintf(why, sizeof why, "receiving node %s went down", down);
      return finish(c, s, run, RK_RUN_FAILED, why);
    }
    const char *lag = rk_barrier_laggard(s, c->table, s->version);
    if (in == 1 && lag == NULL)
      return cut_over(c, s, run);
    if (lag != NULL && waiting_for(c, run) > ACK_PATIENCE_MS) {
      ring__err(&err, RING_ETIMEDOUT,
                "%s has not acked version %" PRIu64 " (the wave waits for it)", lag, s->version);
      coord_trouble(c, "waiting for acks", &err); /* named in the log and /healthz */
    }
    return 0;
  }
  if (run->cursor.moves_done == run->plan.moves_total || run->plan.base_version == 0)
    return complete(c, s, run);
  return run->state == RK_RUN_PAUSED ? 0 : start_set(c, s, run);
}
