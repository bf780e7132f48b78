/*
 * agent_gc.c: dropping arcs and temporary leftovers.
 *
 * After each table the loop looks at every installed arc: one this host
 * neither owns nor is pending for gets a drop time of now + --drop-grace
 * (readers that still use the old table, and agents still streaming from
 * us, get that long); one that is owned or pending again loses it. The
 * timers live in memory only: after a restart the grace starts over.
 *
 * Temporary directories tmp/<token>.<version> that a previous run left are
 * listed at start; at the first table, those whose token is still pending
 * for us become that job's directory (the fetch resumes), and every other
 * tmp/ entry is swept.
 */
#define _GNU_SOURCE
#include "agent.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- leftovers */

/* Parses "<token>.<version>" (both decimal); false for anything else. */
static bool parse_tmp_name(const char *name, agent_leftover *out) {
  char *end = NULL;
  if (name[0] < '0' || name[0] > '9')
    return false;
  unsigned long long token = strtoull(name, &end, 10);
  if (*end != '.' || end[1] < '0' || end[1] > '9' || token >= RING_TOKENS_MAX)
    return false;
  unsigned long long version = strtoull(end + 1, &end, 10);
  if (*end != '\0' || version == 0 || version > RING_VERSION_MAX)
    return false;
  out->token = (uint32_t)token;
  out->version = version;
  return true;
}

void agent_gc_scan_leftovers(agent *a) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tmp", arc_store_dir(a->store));
  DIR *d = opendir(path);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    agent_leftover l;
    if (!parse_tmp_name(e->d_name, &l))
      continue;
    agent_leftover *grown = realloc(a->leftovers, (a->n_leftovers + 1) * sizeof *grown);
    if (grown == NULL)
      break; /* not resumed, only refetched */
    a->leftovers = grown;
    a->leftovers[a->n_leftovers++] = l;
    char token[16], version[24];
    snprintf(token, sizeof token, "%" PRIu32, l.token);
    snprintf(version, sizeof version, "%" PRIu64, l.version);
    rd_log(RD_INFO, "partial arc from a previous run", "token", token, "version", version, NULL);
  }
  if (d)
    closedir(d);
}

/* Sweeps tmp/ of everything no job uses; forgets the leftovers after. */
static void sweep_tmp(agent *a) {
  pthread_mutex_lock(&a->jobs_mu);
  uint32_t n = a->n_jobs;
  char(*names)[48] = malloc((n ? n : 1) * sizeof *names);
  const char **keep = malloc((n ? n : 1) * sizeof *keep);
  for (uint32_t i = 0; names && keep && i < n; i++) {
    snprintf(names[i], sizeof names[i], "%" PRIu32 ".%" PRIu64, a->jobs[i]->token,
             a->jobs[i]->version);
    keep[i] = names[i];
  }
  pthread_mutex_unlock(&a->jobs_mu);
  /* Unlocked: only this thread adds or frees jobs, so every directory a
   * worker may be writing is in keep. */
  if (names && keep)
    arc_store_sweep_tmp(a->store, keep, n);
  free(names);
  free(keep);
  free(a->leftovers);
  a->leftovers = NULL;
  a->n_leftovers = 0;
}

/* ------------------------------------------------------------ drop timers */

static bool wanted(agent *a, uint32_t token) {
  return agent_bit(a->owned, token) || agent_bit(a->pending, token);
}

void agent_gc_retime(agent *a) {
  uint32_t *tokens = NULL, n = 0;
  if (arc_store_list(a->store, &tokens, &n) != 0) {
    agent_trouble(a, "listing arcs", "cannot read the data dir");
    return;
  }
  uint64_t now = rd_now_ms();
  bool *held = calloc(a->tokens ? a->tokens : 1, sizeof *held);
  pthread_mutex_lock(&a->jobs_mu); /* a->verified */
  for (uint32_t i = 0; i < n; i++) {
    uint32_t t = tokens[i];
    if (t >= a->tokens)
      continue; /* not a token of this cluster: left alone */
    if (held)
      held[t] = true;
    if (wanted(a, t)) {
      a->drop_at[t] = 0;
    } else {
      agent_bit_set(a->verified, t, false); /* a later pending entry fetches afresh */
      if (a->drop_at[t] == 0)
        a->drop_at[t] = now + a->o.drop_grace_ms;
    }
  }
  pthread_mutex_unlock(&a->jobs_mu);
  a->next_drop_ms = 0;
  for (uint32_t t = 0; t < a->tokens; t++) {
    if (held && !held[t])
      a->drop_at[t] = 0; /* gone from disk */
    if (a->drop_at[t] && (a->next_drop_ms == 0 || a->drop_at[t] < a->next_drop_ms))
      a->next_drop_ms = a->drop_at[t];
  }
  atomic_store(&a->m.held, n);
  free(held);
  free(tokens);
  sweep_tmp(a);
}

/* Drops token t's arc; true when it is gone (*bytes: what it held). The
 * line per arc is debug: a drain drops thousands, summed up by the caller. */
static bool drop(agent *a, uint32_t t, uint64_t *bytes) {
  char token[16];
  snprintf(token, sizeof token, "%" PRIu32, t);
  *bytes = agent_arc_bytes(a, t);
  int rc = arc_store_remove(a->store, t);
  rd_log(rc == 0 ? RD_DEBUG : RD_WARN,
         rc == 0 ? "arc dropped after the grace" : "dropping an arc failed", "token", token,
         rc == 0 ? NULL : "err", ring_strerror(rc), NULL);
  if (rc != 0)
    return false;
  /* counted at once, not after the sweep: /metrics lags the disk by one arc at most */
  atomic_fetch_add(&a->m.dropped, 1);
  atomic_fetch_sub(&a->m.held, 1);
  return true;
}

uint64_t agent_gc_tick(agent *a) {
  uint64_t now = rd_now_ms();
  if (agent_restored(a)) /* etcd went back: nothing is dropped on its word (agent_restore.c) */
    return UINT64_MAX;
  if (a->next_drop_ms == 0)
    return UINT64_MAX;
  if (now < a->next_drop_ms)
    return a->next_drop_ms - now;
  uint64_t next = 0, bytes = 0;
  uint32_t dropped = 0;
  for (uint32_t t = 0; t < a->tokens; t++) {
    uint64_t b = 0;
    if (a->drop_at[t] == 0)
      continue;
    if (wanted(a, t)) { /* cannot happen: retime clears it; kept as a guard */
      a->drop_at[t] = 0;
    } else if (a->drop_at[t] <= now) {
      a->drop_at[t] = 0;
      dropped += drop(a, t, &b);
      bytes += b;
    } else if (next == 0 || a->drop_at[t] < next) {
      next = a->drop_at[t];
    }
  }
  if (dropped > 0) /* one line for the arcs a version's change let go of */
    rd_logf(RD_INFO,
            "version %" PRIu64 ": %" PRIu32 " arc%s dropped after the grace (%" PRIu64 " bytes)",
            atomic_load(&a->m.version), dropped, dropped == 1 ? "" : "s", bytes);
  a->next_drop_ms = next;
  return next ? next - now : UINT64_MAX;
}
