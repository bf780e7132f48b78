/*
 * coord_health.c: the reasons of cluster_health.c (a token below R and
 * what its repair waits for, every plan refused, a refill waiting for
 * policy, labels that differ from their record) as the leader shows them:
 * one gauge each on /metrics (below R: ring_coordinator_down_replicas), a "degraded: ..." part of
 * /healthz, and a log line when a reason comes or goes.
 *
 * The state lives here as one set per process, as coord_missing.c's does:
 * one coordinator runs in a process. The loop writes it; the HTTP thread
 * reads it under `mu`.
 */
#include "coord.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;    /* guards line */
static char line[RK_HEALTH_KINDS * (RK_HEALTH_TEXT + 2)]; /* "" when every reason is clear */
static _Atomic uint64_t counts[RK_HEALTH_KINDS];          /* the gauges */
static char logged[RK_HEALTH_KINDS][RK_HEALTH_TEXT];      /* the loop's: the reasons last logged */

static const char *const gauge_help[RK_HEALTH_KINDS][2] = {
    {NULL, NULL}, /* below R: ring_coordinator_down_replicas (coord_metrics.c) says it */
    {"ring_coordinator_plans_refused", "1 while plan/proposed is a refusal: every plan is refused"},
    {"ring_coordinator_refill_waiting_replicas",
     "missing token-replicas nobody refills: the refill waits for auto-apply policy none"},
    {"ring_coordinator_label_mismatch_nodes",
     "nodes whose agent reports other labels than their record"},
};

/* Logs each reason that came, changed or went since the last look. */
static void log_changes(const rk_health_view *v) {
  for (int k = 0; k < RK_HEALTH_KINDS; k++) {
    if (strcmp(v->text[k], logged[k]) == 0)
      continue;
    if (v->text[k][0] != '\0')
      rd_log(RD_WARN, "cluster degraded", "reason", rk_health_kind_name((rk_health_kind)k),
             "detail", v->text[k], NULL);
    else
      rd_log(RD_INFO, "cluster reason cleared", "reason", rk_health_kind_name((rk_health_kind)k),
             NULL);
    snprintf(logged[k], sizeof logged[k], "%s", v->text[k]);
  }
}

static void set(const rk_health_view *v) {
  char next[sizeof line] = "";
  size_t at = 0;
  for (int k = 0; k < RK_HEALTH_KINDS; k++) {
    atomic_store(&counts[k], v->count[k]);
    if (v->text[k][0] != '\0' && at < sizeof next)
      at += (size_t)snprintf(next + at, sizeof next - at, "%s%s", at ? "; " : "", v->text[k]);
  }
  pthread_mutex_lock(&mu);
  memcpy(line, next, sizeof line);
  pthread_mutex_unlock(&mu);
}

void coord_health_observe(coord *c, const rk_state *s) {
  const ring_table *t =
      c->table != NULL && ring_table_version(c->table) == s->version ? c->table : NULL;
  if (t == NULL && s->version != 0)
    return;               /* right after a publish c->table is ahead of s: the next look counts */
  static coord_memo seen; /* the look the view was made at: the same look makes the same */
  coord_memo key = coord_memo_of(c, s);
  if (coord_memo_same(&seen, &key))
    return;
  rk_health_view v;
  if (rk_health_make(s, t, coord_missing_count(), &v) != RING_OK)
    return; /* out of memory: what was shown stays until the next look */
  log_changes(&v);
  set(&v);
  atomic_store(&c->m.down_replicas, v.count[RK_HEALTH_BELOW_R]);
  seen = key;
}

void coord_health_forget(void) {
  rk_health_view v;
  memset(&v, 0, sizeof v);
  set(&v);
  memset(logged, 0, sizeof logged);
}

bool coord_health_reasons(rd_text *t, bool after) {
  pthread_mutex_lock(&mu);
  bool calm = line[0] == '\0';
  if (!calm)
    ring__sb_printf(t, "%sdegraded: %s", after ? "; " : "", line);
  pthread_mutex_unlock(&mu);
  return calm;
}

void coord_health_metrics(rd_text *t) {
  for (int k = 0; k < RK_HEALTH_KINDS; k++)
    if (gauge_help[k][0] != NULL)
      rd_metric(t, gauge_help[k][0], "gauge", gauge_help[k][1], (double)atomic_load(&counts[k]));
}
