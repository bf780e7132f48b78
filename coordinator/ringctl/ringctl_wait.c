/*
 * ringctl_wait.c: `ringctl apply --wait`: follows a run from plan/active
 * to plan/history/<id> and shows its progress (ringctl_etcd.h).
 *
 * Sections: one look; progress; stuck moves; the loop.
 *
 * With a stuck timeout it gives up (exit 1, the stuck and failing moves
 * shown) when moves_done has not grown for that long on this process's
 * monotonic clock (time spent paused does not count), or when the
 * coordinator's `stuck` key lists moves of the run. The run itself goes on
 * either way.
 *
 * It polls (both keys, every POLL_MS) rather than watching: a poll needs no
 * thread, survives an etcd failover the way every read does, and a second
 * of latency is nothing next to a migration. The coordinator moves a run to
 * history in the txn that ends it, so one read sees it in one place.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 250
#define OUTAGE_POLL_MS 1000     /* while etcd is away: no hurry, it is not answering */
#define RINGCTL_EXIT_DONE_ (-1) /* poll_once: the run is done (exit 0 after the loop) */
#define VANISHED_POLLS 40       /* 10 s in neither place: give up */
#define BAR_WIDTH 30

/* ---------------------------------------------------------------- one look */

/* Where the run is: still active (or paused, cancelling), or finished. */
typedef enum where { RUN_ACTIVE, RUN_FINISHED, RUN_NOWHERE } where;

/* Reads key into *run if it holds run `id`. */
static int read_run(ringctl_ctx *ctx, const char *key, const char *id, rk_run *run, bool *found) {
  ring_kv kv;
  int rc = ringctl_get(ctx, key, &kv, found);
  if (rc != RINGCTL_EXIT_OK || !*found)
    return rc;
  ring_error err = {RING_OK, ""};
  int ring_rc = rk_run_decode((const char *)kv.value, kv.value_len, run, &err);
  ring_kv_clear(&kv);
  if (ring_rc != RING_OK)
    return ringctl_fail(ctx, ring_rc, &err, key);
  *found = strcmp(run->plan.id, id) == 0;
  if (!*found)
    rk_run_free(run);
  return RINGCTL_EXIT_OK;
}

static int look(ringctl_ctx *ctx, const char *id, rk_run *run, where *w) {
  char active[RK_KEY_MAX], done[RK_KEY_MAX];
  ringctl_key(ctx, "plan/active", active);
  if (rk_key2(done, ctx->cluster, "plan/history/", id) < 0)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "bad plan id %s", id);
  bool found = false;
  int rc = read_run(ctx, done, id, run, &found); /* history first: it is final */
  if (rc == RINGCTL_EXIT_OK && found) {
    *w = RUN_FINISHED;
    return rc;
  }
  if (rc == RINGCTL_EXIT_OK)
    rc = read_run(ctx, active, id, run, &found);
  *w = found ? RUN_ACTIVE : RUN_NOWHERE;
  return rc;
}

/* ---------------------------------------------------------------- progress */

typedef struct progress {
  bool tty;            /* redraw one line in place */
  double start_s;      /* monotonic time of the first look */
  uint32_t start_done; /* moves done then */
  uint64_t start_bytes;
  uint32_t last_done; /* what was last printed (lines mode) */
  int last_state;
  bool started; /* start_* are set (at the first look that found the run active) */
} progress;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "12.0 MiB/s, ETA 3m10s" (or moves/s without sizes) into buf. */
static void rate_eta(const progress *p, const rk_run *r, char *buf, size_t size) {
  double dt = now_s() - p->start_s;
  uint32_t done = r->cursor.moves_done, total = r->plan.moves_total;
  double mps = dt > 0.5 ? (double)(done - p->start_done) / dt : 0;
  double bps = dt > 0.5 ? (double)(r->cursor.bytes_done - p->start_bytes) / dt : 0;
  char b[32], t[32];
  if (r->state != RK_RUN_ACTIVE) { /* no ETA while it does not move */
    snprintf(buf, size, "no ETA while %s", rk_run_state_name(r->state));
    return;
  }
  if (mps <= 0) {
    snprintf(buf, size, "ETA unknown");
    return;
  }
  ringctl_duration((uint64_t)((double)(total - done) / mps + 0.5), t);
  if (r->plan.bytes > 0)
    snprintf(buf, size, "%s/s, ETA %s", ringctl_bytes((uint64_t)bps, b), t);
  else
    snprintf(buf, size, "%.1f moves/s, ETA %s", mps, t);
}

static void show(progress *p, const rk_run *r) {
  uint32_t done = r->cursor.moves_done, total = r->plan.moves_total;
  char bytes[64], rate[64];
  if (r->plan.bytes > 0)
    ringctl_bytes_of(r->cursor.bytes_done, r->plan.bytes, bytes);
  else
    ringctl_bytes(r->cursor.bytes_done, bytes);
  rate_eta(p, r, rate, sizeof rate);
  if (p->tty) {
    int fill = total ? (int)((uint64_t)done * BAR_WIDTH / total) : BAR_WIDTH;
    printf("\r\033[K[%.*s%*s] %u/%u moves  %s  %s  %s", fill, "##############################",
           BAR_WIDTH - fill, "", done, total, bytes, rate, rk_run_state_name(r->state));
  } else if (done != p->last_done || (int)r->state != p->last_state) {
    printf("plan %s: %s, wave %u of %u, %u/%u moves, %s, %s\n", r->plan.id,
           rk_run_state_name(r->state), rk_run_wave_shown(r), r->plan.waves, done, total, bytes,
           rate);
  }
  p->last_done = done;
  p->last_state = (int)r->state;
  fflush(stdout);
}

/* The final lines (with the time taken against the estimate made at
 * approval, when there was one); the exit code of the run's end. */
static int finish(progress *p, const rk_run *r, uint64_t estimate_ms) {
  if (p->tty)
    putchar('\n');
  printf("plan %s %s: %u of %u moves%s%s\n", r->plan.id, rk_run_state_name(r->state),
         r->cursor.moves_done, r->plan.moves_total, r->reason[0] ? ": " : "", r->reason);
  double took = now_s() - p->start_s;
  char t[32], e[32];
  if (estimate_ms > 0 && r->state == RK_RUN_DONE)
    printf("took %s, estimated %s at approval (%+.0f%%)\n", ringctl_duration((uint64_t)took, t),
           ringctl_duration((estimate_ms + 999) / 1000, e),
           100.0 * (took * 1000.0 - (double)estimate_ms) / (double)estimate_ms);
  return r->state == RK_RUN_DONE ? RINGCTL_EXIT_OK : RINGCTL_EXIT_FAILURE;
}

/* ------------------------------------------------------------ stuck moves */

/* Moves of run r the coordinator's `stuck` key lists (0 when none or it is
 * about another run or version). */
static int reported_stuck(ringctl_ctx *ctx, const rk_run *r, uint32_t *n) {
  char key[RK_KEY_MAX];
  ring_kv kv;
  bool found = false;
  ringctl_key(ctx, "stuck", key);
  *n = 0;
  int rc = ringctl_get(ctx, key, &kv, &found);
  if (rc != RINGCTL_EXIT_OK || !found)
    return rc;
  rk_stuck k;
  if (rk_stuck_decode((const char *)kv.value, kv.value_len, &k, NULL) == RING_OK) {
    if (strcmp(k.plan, r->plan.id) == 0 && k.version == r->cursor.version)
      *n = k.n_moves + k.more;
    rk_stuck_free(&k);
  } /* a value that does not parse is the leader's to rewrite: nothing reported */
  ring_kv_clear(&kv);
  return RINGCTL_EXIT_OK;
}

/* Gives up on a stuck run: says why, shows the stuck and failing moves,
 * returns RINGCTL_EXIT_FAILURE (the run itself goes on). */
static int give_up(ringctl_ctx *ctx, const progress *p, const rk_run *r, uint32_t reported,
                   uint64_t timeout_ms) {
  char d[32];
  if (p->tty)
    putchar('\n');
  if (reported > 0)
    printf("plan %s: the coordinator reports %u move%s stuck\n", r->plan.id, reported,
           reported == 1 ? "" : "s");
  else
    printf("plan %s: no move done for %s (--stuck-timeout)\n", r->plan.id,
           ringctl_duration(timeout_ms / 1000, d));
  rk_state st;
  if (ringctl_read_state(ctx, RK_READ_VERSION | RK_READ_PLANS | RK_READ_PROGRESS | RK_READ_STUCK,
                         &st) == RINGCTL_EXIT_OK) {
    if (!ringctl_stuck_text(stdout, &st))
      puts("no move is reported stuck or failing yet (the coordinator reports a move stuck\n"
           "after its --stuck-after; ringctl status shows it then)");
    rk_state_free(&st);
  }
  fflush(stdout); /* the tables before the verdict, also when both go to one file */
  return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                     "plan %s is stuck at %u of %u moves: the run goes on; deploy/STUCK.md says "
                     "what to do",
                     r->plan.id, r->cursor.moves_done, r->plan.moves_total);
}

/* When moves_done last grew, on this process's monotonic clock. */
typedef struct watchdog {
  uint64_t timeout_ms; /* 0: no --stuck-timeout */
  double since_s;
  uint32_t done;
} watchdog;

/* RINGCTL_EXIT_OK to keep waiting, else the exit code of a stuck run. */
static int check_stuck(ringctl_ctx *ctx, const progress *p, watchdog *wd, const rk_run *r) {
  if (wd->timeout_ms == 0)
    return RINGCTL_EXIT_OK;
  if (r->cursor.moves_done > wd->done || wd->done == UINT32_MAX || r->state != RK_RUN_ACTIVE) {
    /* a paused run is not stuck: its clock starts again when it resumes */
    wd->done = r->cursor.moves_done;
    wd->since_s = now_s();
  }
  uint32_t reported = 0;
  int rc = reported_stuck(ctx, r, &reported);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (reported > 0 || (now_s() - wd->since_s) * 1000.0 >= (double)wd->timeout_ms)
    return give_up(ctx, p, r, reported, wd->timeout_ms);
  return RINGCTL_EXIT_OK;
}

/* ---------------------------------------------------------------- the loop */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* An etcd outage being waited out: when it began (0: none). */
typedef struct outage {
  double since_s;
  char why[RINGCTL_UNREACHABLE_MAX];
} outage;

static bool past_deadline(const ringctl_ctx *ctx, long ahead_ms) {
  return ctx->deadline_ms != 0 && now_s() * 1000.0 + (double)ahead_ms >= (double)ctx->deadline_ms;
}

/* A look that failed with etcd unreachable: says so once, and whether to
 * keep waiting (until the deadline; the run goes on without us). */
static bool ride_out(const ringctl_ctx *ctx, const progress *p, outage *o) {
  if (past_deadline(ctx, 0))
    return false;
  if (o->since_s == 0) {
    o->since_s = now_s();
    if (p->tty)
      putchar('\n');
    fprintf(stderr, "%s: %s: waiting for etcd (the run goes on without it)\n", ctx->a->prog,
            o->why);
  }
  return true;
}

/* etcd answers again: says so, and the stuck clock starts afresh (the
 * coordinator could not move the run without etcd either). */
static void back_again(const ringctl_ctx *ctx, outage *o, watchdog *wd) {
  if (o->since_s == 0)
    return;
  wd->since_s = now_s();
  char d[32];
  fprintf(stderr, "%s: etcd answers again after %s\n", ctx->a->prog,
          ringctl_duration((uint64_t)(now_s() - o->since_s + 0.5), d));
  o->since_s = 0;
}

/* One poll: RINGCTL_EXIT_OK to poll again (w says where the run is), else
 * the exit code to end with. */
static int poll_run(ringctl_ctx *ctx, const char *id, progress *p, watchdog *wd, outage *o,
                    uint64_t estimate_ms, where *w) {
  rk_run r;
  int rc = look(ctx, id, &r, w);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  back_again(ctx, o, wd);
  if (*w == RUN_FINISHED) {
    rc = finish(p, &r, estimate_ms);
    rk_run_free(&r);
    return rc == RINGCTL_EXIT_OK ? RINGCTL_EXIT_DONE_ : rc;
  }
  if (*w == RUN_ACTIVE) {
    if (!p->started) {
      p->started = true;
      p->start_done = r.cursor.moves_done;
      p->start_bytes = r.cursor.bytes_done;
    }
    show(p, &r);
    rc = check_stuck(ctx, p, wd, &r);
    rk_run_free(&r);
  }
  return rc;
}

/* poll_run through an etcd outage: an unreachable etcd is waited for
 * until the deadline (the run goes on without us). */
static int poll_once(ringctl_ctx *ctx, const char *id, progress *p, watchdog *wd, outage *o,
                     uint64_t estimate_ms, where *w) {
  int rc = poll_run(ctx, id, p, wd, o, estimate_ms, w);
  if (rc != RINGCTL_EXIT_UNKNOWN)
    return rc;
  *w = RUN_ACTIVE; /* not known otherwise: not counted as vanished */
  if (ride_out(ctx, p, o))
    return RINGCTL_EXIT_OK;
  return ringctl_say(ctx, rc,
                     "%s: etcd did not answer before the end of --timeout: could not tell how "
                     "plan %s ends",
                     o->why, id);
}

int ringctl_wait_run(ringctl_ctx *ctx, const char *id, uint64_t stuck_timeout_ms,
                     uint64_t estimate_ms) {
  progress p = {isatty(STDOUT_FILENO) == 1, now_s(), 0, 0, UINT32_MAX, -1, false};
  watchdog wd = {stuck_timeout_ms, now_s(), UINT32_MAX};
  outage o = {0, ""};
  ctx->unreachable = o.why; /* an outage is reported once, by ride_out */
  int rc = RINGCTL_EXIT_OK;
  for (int nowhere = 0; nowhere < VANISHED_POLLS && rc == RINGCTL_EXIT_OK;) {
    where w = RUN_ACTIVE;
    rc = poll_once(ctx, id, &p, &wd, &o, estimate_ms, &w);
    nowhere = w == RUN_NOWHERE ? nowhere + 1 : 0;
    if (rc == RINGCTL_EXIT_OK && past_deadline(ctx, POLL_MS))
      rc = ringctl_say(ctx, RINGCTL_EXIT_UNKNOWN,
                       "plan %s goes on at the end of --timeout; "
                       "ringctl wait %s follows it again",
                       id, id);
    if (rc == RINGCTL_EXIT_OK)
      sleep_ms(o.since_s != 0 ? OUTAGE_POLL_MS : POLL_MS);
  }
  ctx->unreachable = NULL;
  if (rc == RINGCTL_EXIT_DONE_)
    return RINGCTL_EXIT_OK;
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                     "plan %s is neither active nor in plan/history/: was it removed?", id);
}

int ringctl_stuck_timeout_opt(const ringctl_args *a, const char *value, uint64_t *out) {
  return ringctl_parse_duration(a, "stuck-timeout", value, 1, 7ull * 24 * 3600 * 1000, out);
}

bool ringctl_is_plan_id(const char *s) {
  return strlen(s) == RK_PLAN_ID_LEN && strspn(s, "0123456789abcdef") == RK_PLAN_ID_LEN;
}
