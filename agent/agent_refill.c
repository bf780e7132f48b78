/*
 * agent_refill.c: owned arcs this host lacks (a wiped or replaced data
 * dir, agent_own.c) are refilled from the token's other owners, in place,
 * and reported in missing/<id> (proto/etcd.md) until they are back.
 *
 * Sections: jobs; the record; the tick.
 *
 * Ownership does not move, so no plan and no table change are needed: this
 * is a repair, and runs when the cluster's auto-apply policy allows
 * repairs (repair, the default, or all). Under `none` the tokens are
 * reported and nothing is fetched until an operator allows it
 * (`ringctl auto-apply repair`). Each missing token gets one job in the fetch machinery
 * (agent_fetchers.c) marked `refill`: the same workers, byte-rate limiter,
 * fetch concurrency, signed manifests, checksums and atomic install as a
 * move. Its sources are the token's other owners in the table in service,
 * live ones first, self excluded (job_sources, filled when the loop
 * requeues the job). A signed "not held" from one owner sends the fetch to
 * the next; when none holds it the job retries with backoff and the token
 * stays reported, with the reason. It is never installed empty, except on
 * the operator's `loss` record for the table in service listing it
 * (ringctl accept-loss). A refill never removes or replaces an arc: if one
 * appears meanwhile it is left as it is.
 *
 * The record lists the owned tokens, not pending, with no arc at the last
 * check (every CHECK_EVERY_MS and after each table), for that check's
 * version, and the refill's failing reasons. It is written only when that
 * changes (attempts counted by magnitude, as progress/ does), at most
 * every RECORD_EVERY_MS, and deleted once nothing is missing. A data-plane
 * reader uses it to read such a token from another owner.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_EVERY_MS 1000 /* missing/<id> is written at most this often */

/* What a->refill_written knows of missing/<id>. */
enum { RECORD_UNKNOWN = 0, RECORD_ABSENT, RECORD_WRITTEN };

/* ------------------------------------------------------------------- jobs */

static int by_token(const void *x, const void *y) {
  uint32_t p = *(const uint32_t *)x, q = *(const uint32_t *)y;
  return (p > q) - (p < q);
}

static bool listed(const uint32_t *t, uint32_t n, uint32_t token) {
  return n > 0 && bsearch(&token, t, n, sizeof *t, by_token) != NULL;
}

/* Cancels refills whose token is no longer missing (its arc is there, or
 * the table gave it away). Caller holds jobs_mu. */
static void cancel_done(agent *a, const uint32_t *missing, uint32_t n) {
  for (uint32_t i = 0; i < a->n_jobs; i++) {
    agent_job *j = a->jobs[i];
    if (j->refill && !j->cancelled && !listed(missing, n, j->token)) {
      j->cancelled = true;
      atomic_store(&j->stop, true);
    }
  }
  agent_jobs_reap(a);
}

/* Adds a job for each missing token without one, due at once: the loop's
 * requeue gives it its sources, read afresh. Caller holds jobs_mu. */
static uint32_t add_missing(agent *a, const uint32_t *missing, uint32_t n) {
  uint32_t added = 0;
  for (uint32_t i = 0; i < n; i++) {
    agent_job *j = agent_job_find(a, missing[i]);
    if (j != NULL) {
      if (j->refill && j->cancelled) /* missing again before it was reaped */
        j->cancelled = false, j->state = AGENT_JOB_RETRY, j->retry_at_ms = 0;
      continue; /* a pending token's job is a move, not ours */
    }
    if ((j = agent_job_add(a, missing[i], a->seen_version)) == NULL)
      break; /* out of memory: the next check tries again */
    j->refill = true;
    j->state = AGENT_JOB_RETRY;
    j->retry_at_ms = 0;
    added++;
  }
  return added;
}

void agent_refill_sync(agent *a, const uint32_t *missing, uint32_t n) {
  uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
  if (copy == NULL)
    return; /* the last set stands until the next check */
  memcpy(copy, missing, n * sizeof *copy);
  free(a->refill_missing);
  a->refill_missing = copy;
  a->n_refill_missing = n;
  a->refill_version = a->seen_version;
  /* A refill is a repair: the cluster's policy allows it (repair, all), or
   * under `none` it waits, reported, for the operator's word. */
  bool allowed = a->has_config && a->config.auto_apply != RK_AUTO_NONE;
  a->refill_held = !allowed && n > 0;
  pthread_mutex_lock(&a->jobs_mu);
  cancel_done(a, allowed ? missing : NULL, allowed ? n : 0);
  uint32_t added = allowed ? add_missing(a, missing, n) : 0;
  pthread_mutex_unlock(&a->jobs_mu);
  if (added > 0)
    rd_logf(RD_WARN,
            "version %" PRIu64 ": %" PRIu32 " owned arcs missing here (first: %" PRIu32
            "): refilling them from the other owners",
            a->seen_version, added, missing[0]);
  rd_waker_wake(&a->waker); /* the requeue gives the new jobs their sources */
}

/* ----------------------------------------------------------------- the record */

/* The refills' failing reasons, ascending, in m (at most RK_FAILING_MAX),
 * for tokens of m. Asks for a check when a refill is done (its token has
 * its arc now: the next check clears it). */
static int collect(agent *a, rk_missing *m) {
  m->failing = calloc(RK_FAILING_MAX, sizeof *m->failing);
  if (m->failing == NULL)
    return RING_ENOMEM;
  pthread_mutex_lock(&a->jobs_mu);
  for (uint32_t i = 0; i < a->n_jobs; i++) {
    const agent_job *j = a->jobs[i];
    if (!j->refill || j->cancelled)
      continue;
    if (j->state == AGENT_JOB_DONE)
      a->own_checked_ms = 0;
    else if (j->failures > 0 && m->n_failing < RK_FAILING_MAX &&
             listed(m->tokens, m->n_tokens, j->token)) {
      rk_failing *f = &m->failing[m->n_failing++];
      f->token = j->token;
      f->attempts = j->failures;
      snprintf(f->error, sizeof f->error, "%.*s", RK_FAIL_ERROR_MAX, j->last_error);
    }
  }
  pthread_mutex_unlock(&a->jobs_mu);
  qsort(m->failing, m->n_failing, sizeof *m->failing, by_token); /* rk_failing starts with it */
  return RING_OK;
}

/* Puts the record, or deletes the key when m lists nothing. */
static int write_record(agent *a, const rk_missing *m, ring_error *err) {
  char key[RK_KEY_MAX], *json = NULL;
  size_t len = 0;
  int klen = agent_key(a, key, "missing/");
  if (m->n_tokens == 0)
    return ring_etcd_delete(a->etcd, key, (size_t)klen, false, NULL, NULL, err);
  int rc = rk_missing_encode(m, &json, &len);
  if (rc != RING_OK)
    return snprintf(err->message, sizeof err->message, "encoding: %s", ring_strerror(rc)), rc;
  rc = ring_etcd_put(a->etcd, key, (size_t)klen, json, len, 0, NULL, NULL, err);
  free(json);
  return rc;
}

/* ------------------------------------------------------------------- the tick */

uint64_t agent_refill_tick(agent *a) {
  if (a->refill_missing == NULL)
    return UINT64_MAX; /* no check has run yet: nothing is known, nothing written */
  rk_missing m = {
      .version = a->refill_version, .n_tokens = a->n_refill_missing, .tokens = a->refill_missing};
  if (collect(a, &m) != RING_OK)
    return RECORD_EVERY_MS;
  uint64_t digest = agent_report_digest(m.tokens, m.n_tokens, m.failing, m.n_failing) ^
                    m.version * 0x9e3779b97f4a7c15ull;
  int want = m.n_tokens > 0 ? RECORD_WRITTEN : RECORD_ABSENT;
  uint64_t now = rd_now_ms(), wait = UINT64_MAX;
  bool changed =
      a->refill_written != want || (want == RECORD_WRITTEN && digest != a->refill_digest);
  if (changed && a->refill_last_ms != 0 && now - a->refill_last_ms < RECORD_EVERY_MS) {
    wait = RECORD_EVERY_MS - (now - a->refill_last_ms); /* coalesce */
  } else if (changed) { /* at start (unknown) an empty set deletes what an earlier life wrote */
    ring_error err = {0};
    a->refill_last_ms = now;
    if (write_record(a, &m, &err) == RING_OK) {
      a->refill_written = want;
      a->refill_digest = digest;
      rd_logf(RD_INFO, "missing/%s %s: %" PRIu32 " owned arcs missing", a->o.id,
              want == RECORD_WRITTEN ? "written" : "deleted", m.n_tokens);
    } else {
      atomic_fetch_add(&a->m.errors, 1);
      agent_trouble(a, "writing missing/", err.message);
      wait = RECORD_EVERY_MS;
    }
  }
  free(m.failing);
  return wait;
}
