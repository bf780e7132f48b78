/*
 * coord_stuck.c: stuck moves (docs/DESIGN.md, "Migration": "a move that makes no
 * progress is reported stuck, never completed by guesswork").
 *
 * Sections: following the receivers; the stuck set; the `stuck` key;
 * health; the step.
 *
 * A move of the active run is in flight while its bit is in the cursor's
 * inflight set. For each receiver the loop keeps, on this leader's
 * monotonic clock (rd_now_ms), when it last made progress on the set: the
 * set's start as this leader first saw it, or the last look at which its
 * progress for the cursor's version covered more of its in-flight tokens.
 * A move whose token its receiver does not report yet is stuck once that
 * receiver has gone --stuck-after without progress. Clocks of other hosts
 * are never compared; a new leader starts counting afresh.
 *
 * Stuck moves are made loud: the gauges ring_coordinator_stuck_moves and
 * ring_coordinator_failing_moves, a degraded /healthz, and the `stuck` key
 * (proto/etcd.md), written only when the set or a reason changes.
 */
#include "coord.h"
#include "ringx.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEALTH_MOVES 3 /* stuck moves named in the /healthz line */

/* ----------------------------------------------- following the receivers */

static void track_reset(coord_stuck *k) {
  free(k->covered);
  free(k->since_ms);
  k->covered = NULL;
  k->since_ms = NULL;
  k->n_recv = 0;
  k->version = 0;
  k->plan[0] = '\0';
}

/* Starts watching run's in-flight set, n receivers, at now. False when out
 * of memory (nothing watched). */
static bool track_start(coord_stuck *k, const rk_run *run, uint32_t n, uint64_t now) {
  track_reset(k);
  k->covered = calloc(n, sizeof *k->covered);
  k->since_ms = calloc(n, sizeof *k->since_ms);
  if (k->covered == NULL || k->since_ms == NULL) {
    track_reset(k);
    return false;
  }
  for (uint32_t i = 0; i < n; i++)
    k->since_ms[i] = now;
  k->n_recv = n;
  k->version = run->cursor.version;
  snprintf(k->plan, sizeof k->plan, "%s", run->plan.id);
  return true;
}

/* A receiver's progress for `version`, NULL when it reports another (or
 * none): only that version's tokens and failures count. */
static const rk_progress *progress_at(const rk_state *s, const char *id, uint64_t version) {
  const rk_progress *p = rk_state_progress(s, id);
  return p != NULL && p->version == version ? p : NULL;
}

/* Counts per receiver the in-flight tokens its progress covers; one that
 * covers more than at the last look has made progress now. A count that
 * fell (an agent that restarted) is taken as it is, so climbing back counts.
 * RING_ENOMEM leaves everything as it was. */
static int track_progress(coord_stuck *k, const rk_state *s, const ring_plan *p, const rk_run *run,
                          uint64_t now) {
  const ring_table *t = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  uint32_t *count = calloc(k->n_recv, sizeof *count);
  if (count == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    if (!rk_bit(run->cursor.inflight, i) || m[i].to >= k->n_recv)
      continue;
    const rk_progress *pr = progress_at(s, ring_table_node_id(t, m[i].to), run->cursor.version);
    if (rk_progress_covers(pr, &m[i].token, 1))
      count[m[i].to]++;
  }
  for (uint32_t r = 0; r < k->n_recv; r++) {
    if (count[r] > k->covered[r])
      k->since_ms[r] = now;
    k->covered[r] = count[r];
  }
  free(count);
  return RING_OK;
}

/* ------------------------------------------------------------ the stuck set */

/* What one look found. */
typedef struct stuck_view {
  rk_stuck rec;        /* the first RK_STUCK_MAX stuck moves, `more` the rest */
  uint32_t n_stuck;    /* stuck moves in all */
  uint32_t n_failing;  /* in-flight moves with a failing entry, stuck or not */
  uint64_t longest_ms; /* the longest a stuck move's receiver went without progress */
} stuck_view;

/* Why a move to `to` is stuck, one line: the receiver's failing entry for
 * its token, else what else keeps it from progress (lag: the host the
 * version barrier waits for, NULL for none). */
static void move_reason(const rk_state *s, const char *to, const rk_progress *pr, uint32_t token,
                        const char *lag, char out[RK_STUCK_ERROR_MAX + 1]) {
  const rk_failing *f = rk_progress_failing(pr, token);
  if (f != NULL)
    snprintf(out, RK_STUCK_ERROR_MAX + 1, "%.*s (%" PRIu32 " attempt%s)", RK_FAIL_ERROR_MAX,
             f->error, f->attempts, f->attempts == 1 ? "" : "s");
  else if (rk_state_alive(s, to) == NULL)
    snprintf(out, RK_STUCK_ERROR_MAX + 1, "receiver %s is not alive", to);
  else if (lag != NULL)
    snprintf(out, RK_STUCK_ERROR_MAX + 1,
             "the version barrier waits for %s to ack version %" PRIu64, lag, s->version);
  else
    snprintf(out, RK_STUCK_ERROR_MAX + 1, "no progress reported by %s", to);
}

/* (token, slot, move index) in one number that sorts as the record lists. */
static uint64_t move_key(const ring_move *m, uint32_t i) {
  return (uint64_t)m->token << 35 | (uint64_t)m->slot << 32 | i;
}

static int by_key(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Fills the record's entries from the stuck moves' keys (sorted). */
static int list_moves(coord *c, const rk_state *s, const rk_run *run, const uint64_t *keys,
                      stuck_view *v, uint64_t now) {
  const ring_plan *p = c->run_plan;
  const ring_table *t = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  uint32_t n = v->n_stuck < RK_STUCK_MAX ? v->n_stuck : RK_STUCK_MAX;
  const ring_table *live =
      c->table != NULL && ring_table_version(c->table) == s->version ? c->table : NULL;
  const char *lag = rk_barrier_laggard(s, live, s->version);
  if (n > 0 && (v->rec.moves = calloc(n, sizeof *v->rec.moves)) == NULL)
    return RING_ENOMEM;
  for (uint32_t j = 0; j < n; j++) {
    const ring_move *mv = &m[(uint32_t)keys[j]];
    rk_stuck_move *e = &v->rec.moves[j];
    const char *to = ring_table_node_id(t, mv->to);
    e->token = mv->token;
    e->slot = mv->slot;
    snprintf(e->from, sizeof e->from, "%s",
             mv->from != RING_NODE_NONE ? ring_table_node_id(t, mv->from) : "");
    snprintf(e->to, sizeof e->to, "%s", to);
    move_reason(s, to, progress_at(s, to, run->cursor.version), mv->token, lag, e->error);
    e->for_ms = now - c->stuck.since_ms[mv->to];
  }
  v->rec.n_moves = n;
  v->rec.more = v->n_stuck - n;
  v->rec.version = run->cursor.version;
  snprintf(v->rec.plan, sizeof v->rec.plan, "%s", run->plan.id);
  return RING_OK;
}

/* The in-flight moves not yet reported: failing ones counted, stuck ones
 * listed. */
static int find_stuck(coord *c, const rk_state *s, const rk_run *run, stuck_view *v, uint64_t now) {
  const ring_plan *p = c->run_plan;
  const ring_table *t = ring_plan_target(p);
  const ring_move *m = ring_plan_moves(p);
  uint64_t *keys = malloc(((size_t)ring_plan_move_count(p) + 1) * sizeof *keys);
  if (keys == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    if (!rk_bit(run->cursor.inflight, i) || m[i].to >= c->stuck.n_recv)
      continue;
    const rk_progress *pr = progress_at(s, ring_table_node_id(t, m[i].to), run->cursor.version);
    if (rk_progress_covers(pr, &m[i].token, 1))
      continue;
    v->n_failing += rk_progress_failing(pr, m[i].token) != NULL;
    uint64_t quiet = now - c->stuck.since_ms[m[i].to];
    if (quiet < c->o.stuck_after_ms)
      continue;
    keys[v->n_stuck++] = move_key(&m[i], i);
    if (quiet > v->longest_ms)
      v->longest_ms = quiet;
  }
  qsort(keys, v->n_stuck, sizeof *keys, by_key);
  int rc = list_moves(c, s, run, keys, v, now);
  free(keys);
  return rc;
}

/* ------------------------------------------------------------ the stuck key */

/* The same stuck set with the same reasons (how long is not compared: it
 * grows at every look). */
static bool same_set(const rk_stuck *a, const rk_stuck *b) {
  if (a->version != b->version || strcmp(a->plan, b->plan) != 0 || a->n_moves != b->n_moves ||
      a->more != b->more)
    return false;
  for (uint32_t i = 0; i < a->n_moves; i++) {
    const rk_stuck_move *x = &a->moves[i], *y = &b->moves[i];
    if (x->token != y->token || x->slot != y->slot || strcmp(x->from, y->from) != 0 ||
        strcmp(x->to, y->to) != 0 || strcmp(x->error, y->error) != 0)
      return false;
  }
  return true;
}

static void log_written(const stuck_view *v) {
  if (v->n_stuck == 0) {
    rd_log(RD_INFO, "no moves stuck", NULL);
    return;
  }
  const rk_stuck_move *e = &v->rec.moves[0];
  char count[16], first[RK_STUCK_ERROR_MAX + 96];
  snprintf(count, sizeof count, "%" PRIu32, v->n_stuck);
  snprintf(first, sizeof first, "token %" PRIu32 " -> %s: %s", e->token, e->to, e->error);
  rd_log(RD_ERROR, "moves stuck", "count", count, "first", first, "plan", v->rec.plan, NULL);
}

/* Writes `stuck` when what it lists changed, deletes it when nothing is
 * stuck; one fenced txn. Returns 0 or a negative ring_errno. */
static int write_key(coord *c, const rk_state *s, const stuck_view *v) {
  bool want = v->n_stuck > 0;
  if ((!want && s->stuck_mod == 0) || (want && s->has_stuck && same_set(&s->stuck, &v->rec)))
    return 0;
  char key[RK_KEY_MAX], *json = NULL;
  size_t len = 0;
  int klen = coord_key(c, key, "stuck");
  ring_error err = {0};
  int rc = want ? rk_stuck_encode(&v->rec, &json, &len) : RING_OK;
  ring_op op = {.type = want ? RING_OP_PUT : RING_OP_DELETE,
                .key = key,
                .key_len = (size_t)klen,
                .value = json,
                .value_len = len};
  if (rc == RING_OK)
    rc = coord_txn(c, NULL, 0, &op, 1, &err);
  else
    ring__err(&err, rc, "encoding the stuck record: %s", ring_strerror(rc));
  free(json);
  if (rc == RING_OK)
    log_written(v);
  else if (rc != RING_ENOTLEADER)
    coord_trouble(c, "writing the stuck key", &err);
  return rc;
}

/* ------------------------------------------------------------------ health */

/* Appends to buf[cap] at *off, never past the end. */
static void append(char *buf, size_t cap, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *off, const char *fmt, ...) {
  if (*off >= cap - 1)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *off, cap - *off, fmt, ap);
  va_end(ap);
  *off = n < 0 ? *off : *off + (size_t)n < cap ? *off + (size_t)n : cap - 1;
}

/* "degraded: 64 moves stuck for 600 s (token 17 -> n2: why; ...)" or "". */
static void set_health(coord_stuck *k, const stuck_view *v) {
  char line[sizeof k->health] = "";
  size_t off = 0;
  if (v->n_stuck > 0) {
    append(line, sizeof line, &off, "degraded: %" PRIu32 " move%s stuck for %" PRIu64 " s (",
           v->n_stuck, v->n_stuck == 1 ? "" : "s", v->longest_ms / 1000);
    for (uint32_t i = 0; i < v->rec.n_moves && i < HEALTH_MOVES; i++)
      append(line, sizeof line, &off, "%stoken %" PRIu32 " -> %s: %s", i ? "; " : "",
             v->rec.moves[i].token, v->rec.moves[i].to, v->rec.moves[i].error);
    append(line, sizeof line, &off, "%s)", v->n_stuck > HEALTH_MOVES ? "; ..." : "");
  }
  pthread_mutex_lock(&k->mu);
  memcpy(k->health, line, sizeof line);
  pthread_mutex_unlock(&k->mu);
}

bool coord_stuck_health(coord *c, rd_text *t) {
  pthread_mutex_lock(&c->stuck.mu);
  bool calm = c->stuck.health[0] == '\0';
  if (!calm)
    ring__sb_printf(t, "%s", c->stuck.health);
  pthread_mutex_unlock(&c->stuck.mu);
  return calm;
}

/* ---------------------------------------------------------------- the step */

static void observe(coord *c, const stuck_view *v) {
  atomic_store(&c->m.stuck_moves, v->n_stuck);
  atomic_store(&c->m.failing_moves, v->n_failing);
  set_health(&c->stuck, v);
}

/* The active run's in-flight set as coord_run_step left it, or NULL when
 * nothing is in flight (or the run's plan is not loaded). */
static const rk_run *in_flight(const coord *c, const rk_state *s) {
  const rk_run *run = s->has_active ? &s->active : NULL;
  bool watching = run != NULL && run->cursor.pending && run->cursor.version == s->version &&
                  c->run_plan != NULL && strcmp(c->run_plan_id, run->plan.id) == 0;
  return watching ? run : NULL;
}

int coord_stuck_step(coord *c, const rk_state *s) {
  coord_stuck *k = &c->stuck;
  const rk_run *run = in_flight(c, s);
  uint64_t now = rd_now_ms();
  stuck_view v = {.rec = {0}};
  int rc = RING_OK;
  if (run == NULL)
    track_reset(k);
  else if ((k->version != run->cursor.version || strcmp(k->plan, run->plan.id) != 0) &&
           !track_start(k, run, ring_table_node_count(ring_plan_target(c->run_plan)) + 1u, now))
    rc = RING_ENOMEM;
  if (run != NULL && rc == RING_OK && (rc = track_progress(k, s, c->run_plan, run, now)) == RING_OK)
    rc = find_stuck(c, s, run, &v, now);
  if (rc != RING_OK) { /* out of memory: the gauges and the key stay as they were */
    ring_error err = {0};
    coord_trouble(c, "following stuck moves", (ring__err(&err, rc, "out of memory"), &err));
  } else {
    observe(c, &v);
    rc = write_key(c, s, &v);
  }
  rk_stuck_free(&v.rec);
  return rc;
}

void coord_stuck_forget(coord *c) {
  stuck_view none = {.rec = {0}};
  track_reset(&c->stuck);
  observe(c, &none);
}

int coord_stuck_init(coord *c) {
  memset(&c->stuck, 0, sizeof c->stuck);
  return pthread_mutex_init(&c->stuck.mu, NULL);
}

void coord_stuck_free(coord *c) {
  track_reset(&c->stuck);
  pthread_mutex_destroy(&c->stuck.mu);
}
