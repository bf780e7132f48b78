/*
 * coord_missing.c: token-replicas the hosts report missing (missing/<id>,
 * proto/etcd.md), as the leader shows them: the gauges
 * ring_coordinator_missing_replicas and ring_coordinator_lost_tokens, a
 * "degraded: ..." line for /healthz, and the "missing" object of the
 * status page. The view itself is cluster_missing.c's, shared with
 * ringctl.
 *
 * Nothing here plans: a missing replica stays owned by its node, which
 * refills it from the other owners on its own (agent_refill.c); the
 * coordinator only names it until it is back, or until the operator
 * accepts its loss.
 *
 * The state lives here as one set per process, as coord_metrics.c's bad
 * records do: one coordinator runs in a process. The loop writes it; the
 * HTTP thread reads it under `mu`.
 */
#include "coord.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards health and shown */
static char health[512];                               /* "" when nothing is missing */
static cJSON *shown;                                   /* the view as JSON; NULL: none */
static _Atomic uint64_t replicas, lost;                /* the gauges */
static char last_logged[512];                          /* the loop's: logged when it changes */

static void set(const char *line, cJSON *json, uint64_t n_replicas, uint64_t n_lost) {
  pthread_mutex_lock(&mu);
  snprintf(health, sizeof health, "%s", line);
  cJSON_Delete(shown);
  shown = json;
  pthread_mutex_unlock(&mu);
  atomic_store(&replicas, n_replicas);
  atomic_store(&lost, n_lost);
}

/* Logs the line when it changed since the last look (warn while anything
 * is missing, info once it is all back). */
static void log_change(const char *line) {
  if (strcmp(line, last_logged) == 0)
    return;
  if (line[0] != '\0')
    rd_log(RD_WARN, "hosts report owned arcs missing", "detail", line, NULL);
  else
    rd_log(RD_INFO, "no host reports owned arcs missing any more", NULL);
  snprintf(last_logged, sizeof last_logged, "%s", line);
}

void coord_missing_observe(coord *c, const rk_state *s) {
  /* right after a publish c->table is ahead of s: the next look counts */
  const ring_table *t =
      c->table != NULL && ring_table_version(c->table) == s->version ? c->table : NULL;
  if (t == NULL && s->version != 0)
    return;
  static coord_memo shown_at; /* the look the view was made at: the same look makes the same */
  coord_memo key = coord_memo_of(c, s);
  if (coord_memo_same(&shown_at, &key))
    return;
  rk_missing_view v;
  if (rk_missing_view_make(s, t, &v) != RING_OK)
    return; /* out of memory: what was shown stays until the next look */
  char line[512] = "", text[480];
  if (v.replicas > 0)
    snprintf(line, sizeof line, "degraded: %s", rk_missing_text(&v, text, sizeof text));
  log_change(line);
  set(line, rk_missing_json(&v), v.replicas, v.n_lost);
  rk_missing_view_free(&v);
  shown_at = key;
}

void coord_missing_forget(void) { set("", NULL, 0, 0); }

uint64_t coord_missing_count(void) { return atomic_load(&replicas); }

bool coord_missing_health(rd_text *t, bool after) {
  pthread_mutex_lock(&mu);
  bool calm = health[0] == '\0';
  if (!calm)
    ring__sb_printf(t, "%s%s", after ? "; " : "", health);
  pthread_mutex_unlock(&mu);
  return calm;
}

struct cJSON *coord_missing_json(void) {
  pthread_mutex_lock(&mu);
  cJSON *o = shown != NULL ? cJSON_Duplicate(shown, true) : NULL;
  pthread_mutex_unlock(&mu);
  if (o == NULL) { /* nothing observed yet: the empty view's shape */
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "replicas", 0);
    cJSON_AddItemToObject(o, "hosts", cJSON_CreateArray());
    cJSON_AddItemToObject(o, "lost", cJSON_CreateArray());
  }
  return o;
}

void coord_missing_metrics(rd_text *t) {
  rd_metric(t, "ring_coordinator_missing_replicas", "gauge",
            "token-replicas their owners report missing (missing/<id>)",
            (double)atomic_load(&replicas));
  rd_metric(t, "ring_coordinator_lost_tokens", "gauge",
            "tokens every owner reports missing: no replica left to refill from",
            (double)atomic_load(&lost));
}
