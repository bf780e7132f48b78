/*
 * agent_report.c: progress/<id> (ringkeeper.progress.v1): the incoming
 * arcs of the newest version whose pending entries name this host that
 * are installed and verified, with their total size. Written by the loop
 * after arcs land, at most every AGENT_PROGRESS_EVERY_MS, and only when
 * it changed; a token is reported only while its arc is on disk.
 */
#include "agent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_token(const void *x, const void *y) {
  uint32_t p = *(const uint32_t *)x, q = *(const uint32_t *)y;
  return (p > q) - (p < q);
}

static int by_failing_token(const void *x, const void *y) {
  return by_token(&((const rk_failing *)x)->token, &((const rk_failing *)y)->token);
}

/* A job whose last attempt failed, as progress names it: the coordinator
 * shows it (with the error) and, once it makes no progress for long
 * enough, reports the move stuck. Caller holds jobs_mu. */
static void add_failing(rk_progress *p, const agent_job *j) {
  if (p->n_failing == RK_FAILING_MAX)
    return; /* bounded: the first RK_FAILING_MAX found; the rest wait their turn */
  rk_failing *f = &p->failing[p->n_failing++];
  f->token = j->token;
  f->attempts = j->failures;
  snprintf(f->error, sizeof f->error, "%.*s", RK_FAIL_ERROR_MAX, j->last_error);
}

/* The done tokens, ascending, in p, and the failing ones (p->tokens and
 * p->failing malloc()'ed; rk_progress_free frees them). */
static int collect(agent *a, rk_progress *p) {
  pthread_mutex_lock(&a->jobs_mu);
  p->tokens = malloc((a->n_jobs ? a->n_jobs : 1) * sizeof *p->tokens);
  p->failing = calloc(RK_FAILING_MAX, sizeof *p->failing);
  if (p->tokens == NULL || p->failing == NULL) {
    pthread_mutex_unlock(&a->jobs_mu);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < a->n_jobs; i++) {
    agent_job *j = a->jobs[i];
    if (j->cancelled || j->refill) /* refills are owned arcs: missing/<id> reports them */
      continue;
    if (j->state == AGENT_JOB_DONE) {
      p->tokens[p->n_tokens++] = j->token;
      p->bytes += j->bytes;
    } else if (j->failures > 0) {
      add_failing(p, j);
    }
  }
  pthread_mutex_unlock(&a->jobs_mu);
  qsort(p->tokens, p->n_tokens, sizeof *p->tokens, by_token);
  qsort(p->failing, p->n_failing, sizeof *p->failing, by_failing_token);
  return RING_OK;
}

/* Drops tokens whose arc is not on disk (removed under us): never report
 * what is not there. */
static void keep_present(agent *a, rk_progress *p) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < p->n_tokens; i++)
    if (arc_store_has(a->store, p->tokens[i]))
      p->tokens[k++] = p->tokens[i];
  p->n_tokens = k;
}

static uint64_t fnv(uint64_t h, uint64_t x) { return (h ^ x) * 1099511628211ull; }

/* The bit length of x: attempts 5 and 6 digest alike, 8 anew. */
static uint64_t magnitude(uint32_t x) {
  uint64_t m = 0;
  for (; x; x >>= 1)
    m++;
  return m;
}

/* FNV-1a over what a report says: a failing entry counts by its token, its
 * error and the magnitude of its attempts, so a fetch failing with the same
 * error is rewritten at doubling counts, not on every retry (etcd writes
 * stay bounded while something is stuck). */
uint64_t agent_report_digest(const uint32_t *tokens, uint32_t n, const rk_failing *failing,
                             uint32_t n_failing) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t i = 0; i < n; i++)
    h = fnv(h, tokens[i]);
  for (uint32_t i = 0; i < n_failing; i++) {
    const rk_failing *f = &failing[i];
    h = fnv(fnv(h, f->token | 1ull << 32), magnitude(f->attempts));
    for (const char *c = f->error; *c; c++)
      h = fnv(h, (unsigned char)*c);
  }
  return h ^ n ^ (uint64_t)n_failing << 40;
}

static int write_progress(agent *a, const rk_progress *p, ring_error *err) {
  char key[RK_KEY_MAX], *json = NULL;
  size_t len = 0;
  int klen = agent_key(a, key, "progress/");
  int rc = rk_progress_encode(p, &json, &len);
  if (rc != RING_OK)
    return snprintf(err->message, sizeof err->message, "encoding: %s", ring_strerror(rc)), rc;
  rc = ring_etcd_put(a->etcd, key, (size_t)klen, json, len, 0, NULL, NULL, err);
  free(json);
  return rc;
}

/* The report is looked at once the last write is AGENT_PROGRESS_EVERY_MS
 * old, not on every turn of the loop: each look lists the jobs and stats
 * every installed arc, and the loop turns for each install, tick and
 * answer (a 256-arc move made 24000 lstat calls of it, most of them
 * inside the window where nothing could be written anyway). A change
 * within the window is written at its end, as before. */
uint64_t agent_report_tick(agent *a) {
  if (a->report_version == 0)
    return UINT64_MAX;
  uint64_t now = rd_now_ms(), wait = UINT64_MAX;
  if (now < a->report_last_ms + AGENT_PROGRESS_EVERY_MS)
    return a->report_last_ms + AGENT_PROGRESS_EVERY_MS - now; /* coalesce */
  rk_progress p = {.version = a->report_version};
  if (collect(a, &p) != RING_OK)
    return AGENT_PROGRESS_EVERY_MS;
  keep_present(a, &p);
  uint64_t digest = agent_report_digest(p.tokens, p.n_tokens, p.failing, p.n_failing);
  bool changed = a->report_dirty || p.version != a->report_written_version ||
                 digest != a->report_written_digest;
  if (changed) {
    ring_error err = {0};
    a->report_last_ms = now;
    if (write_progress(a, &p, &err) == RING_OK) {
      a->report_written_version = p.version;
      a->report_written_digest = digest;
      a->report_dirty = false;
      atomic_fetch_add(&a->m.progress_writes, 1);
      rd_log(RD_DEBUG, "progress written", NULL);
    } else {
      atomic_fetch_add(&a->m.errors, 1);
      agent_trouble(a, "writing progress", err.message);
      wait = AGENT_PROGRESS_EVERY_MS;
    }
  }
  rk_progress_free(&p);
  return wait;
}
