/*
 * ringctl_wait.c: `ringctl apply --wait`: follows a run from plan/active
 * to plan/history/<id> and shows its progress (ringctl_etcd.h).
 *
 * Sections: one look; progress; the loop.
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
#define VANISHED_POLLS 40 /* 10 s in neither place: give up */
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
  ring_kv_free(&kv);
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
  char bytes[32], all[32], rate[64];
  ringctl_bytes(r->cursor.bytes_done, bytes);
  rate_eta(p, r, rate, sizeof rate);
  if (r->plan.bytes > 0)
    snprintf(bytes + strlen(bytes), sizeof bytes - strlen(bytes), "/%s",
             ringctl_bytes(r->plan.bytes, all));
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

/* The final line; the exit code of the run's end. */
static int finish(progress *p, const rk_run *r) {
  if (p->tty)
    putchar('\n');
  printf("plan %s %s: %u of %u moves%s%s\n", r->plan.id, rk_run_state_name(r->state),
         r->cursor.moves_done, r->plan.moves_total, r->reason[0] ? ": " : "", r->reason);
  return r->state == RK_RUN_DONE ? RINGCTL_EXIT_OK : RINGCTL_EXIT_FAILURE;
}

/* ---------------------------------------------------------------- the loop */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int ringctl_wait_run(ringctl_ctx *ctx, const char *id) {
  progress p = {isatty(STDOUT_FILENO) == 1, now_s(), 0, 0, UINT32_MAX, -1};
  bool first = true;
  for (int nowhere = 0; nowhere < VANISHED_POLLS;) {
    rk_run r;
    where w;
    int rc = look(ctx, id, &r, &w);
    if (rc != RINGCTL_EXIT_OK)
      return rc;
    if (w == RUN_FINISHED) {
      rc = finish(&p, &r);
      rk_run_free(&r);
      return rc;
    }
    nowhere = w == RUN_NOWHERE ? nowhere + 1 : 0;
    if (w == RUN_ACTIVE && first) {
      p.start_done = r.cursor.moves_done;
      p.start_bytes = r.cursor.bytes_done;
      first = false;
    }
    if (w == RUN_ACTIVE) {
      show(&p, &r);
      rk_run_free(&r);
    }
    sleep_ms(POLL_MS);
  }
  return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                     "plan %s is neither active nor in plan/history/: was it removed?", id);
}
