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

/* The done tokens, ascending, in p (p->tokens malloc()'ed, may be NULL). */
static int collect(agent *a, rk_progress *p) {
  pthread_mutex_lock(&a->jobs_mu);
  p->tokens = malloc((a->n_jobs ? a->n_jobs : 1) * sizeof *p->tokens);
  if (p->tokens == NULL) {
    pthread_mutex_unlock(&a->jobs_mu);
    return RING_ENOMEM;
  }
  for (uint32_t i = 0; i < a->n_jobs; i++) {
    agent_job *j = a->jobs[i];
    if (j->cancelled || j->state != AGENT_JOB_DONE)
      continue;
    p->tokens[p->n_tokens++] = j->token;
    p->bytes += j->bytes;
  }
  pthread_mutex_unlock(&a->jobs_mu);
  qsort(p->tokens, p->n_tokens, sizeof *p->tokens, by_token);
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

/* FNV-1a over the tokens: tells whether the set changed since the last write. */
static uint64_t tokens_digest(const rk_progress *p) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t i = 0; i < p->n_tokens; i++)
    h = (h ^ p->tokens[i]) * 1099511628211ull;
  return h ^ p->n_tokens;
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

uint64_t agent_report_tick(agent *a) {
  if (a->report_version == 0)
    return UINT64_MAX;
  rk_progress p = {.version = a->report_version};
  if (collect(a, &p) != RING_OK)
    return AGENT_PROGRESS_EVERY_MS;
  keep_present(a, &p);
  uint64_t now = rd_now_ms(), wait = UINT64_MAX;
  uint64_t digest = tokens_digest(&p);
  bool changed = a->report_dirty || p.version != a->report_written_version ||
                 digest != a->report_written_digest;
  if (changed && now < a->report_last_ms + AGENT_PROGRESS_EVERY_MS) {
    wait = a->report_last_ms + AGENT_PROGRESS_EVERY_MS - now; /* coalesce */
  } else if (changed) {
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
  free(p.tokens);
  return wait;
}
