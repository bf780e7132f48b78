/*
 * agent_follow.c: following the table and the config.
 *
 * Sections: watches; the config; who is alive; sources; from a table to
 * jobs; retries.
 *
 * The live watcher swaps each new version into a->live, acks it
 * (acks/<id>) and calls on_table, which only wakes the loop. The loop then
 * reads the newest table once (a short read section) and turns the pending
 * entries naming this host into jobs: one per token, with the sources to
 * fetch it from, best first. An arc already installed that this host does
 * not own and did not fetch for the current pending entries is stale (left
 * by an old ownership within its grace period): it is taken out of service
 * and fetched again, never reported as it is. Whether it was owned all
 * along is known only over versions the loop saw one after another: after
 * a gap nothing counts as verified (forget_unseen). The fetch checks its files
 * against the source's checksums and sends only those that differ.
 *
 * After a restart nothing counts as verified: an installed arc that is
 * pending for us is rechecked the same way (a copy from before may have
 * missed writes while this host was down); partial temporary directories
 * are resumed. Either way only what changed is sent again.
 *
 * Fetches of a new pending version wait for the version barrier: every
 * live host and every registered data-plane client has acked it, so all
 * of them send writes to the pending owners too before the source's arc
 * is copied, and no write can land on the source after the copy without
 * reaching us as well.
 *
 * The config key is watched too: throttle.moves_per_node bounds the fetches
 * running at once and throttle.bytes_per_sec the shared byte rate; a change
 * applies within one pass of the loop.
 */
#define _GNU_SOURCE
#include "agent.h"
#include "barrier.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_MIN_MS 500
#define RETRY_MAX_MS 10000

/* ------------------------------------------------------------- watches */

static void on_table(void *ud, const ring_table *t) {
  agent *a = ud;
  (void)t; /* the loop reads the newest table from a->live itself */
  atomic_store(&a->table_changed, true);
  rd_waker_wake(&a->waker);
}

static int on_config(void *ud, const ring_event *ev, uint32_t n, int64_t rev, bool compacted) {
  agent *a = ud;
  (void)ev, (void)rev;
  if (n > 0 || compacted) {
    atomic_store(&a->config_changed, true);
    rd_waker_wake(&a->waker);
  }
  return 0;
}

static int start_watcher(agent *a, ring_error *err) {
  ring_watcher_opts wo = {.cluster = a->o.cluster,
                          .ack_id = a->o.id,
                          .on_table = on_table,
                          .ud = a,
                          .log = rd_ring_log};
  return ring_watcher_start(a->etcd, &wo, a->live, &a->watcher, err);
}

static int start_config_watch(agent *a, ring_error *err) {
  char key[RK_KEY_MAX];
  int len = rk_key(key, a->o.cluster, "config");
  int rc =
      ring_etcd_watch(a->etcd, key, (size_t)len, false, 0, on_config, a, &a->config_watch, err);
  if (rc == RING_OK)
    atomic_store(&a->config_changed, true); /* read it once now that no change can be missed */
  return rc;
}

int agent_follow_start(agent *a, char *msg, size_t cap) {
  if (ring_live_new(&a->live) != RING_OK)
    return snprintf(msg, cap, "out of memory"), -1;
  ring_error err = {0};
  /* Without etcd now, both are retried by the loop. */
  if (start_watcher(a, &err) != RING_OK)
    agent_trouble(a, "watching the table", err.message);
  if (start_config_watch(a, &err) != RING_OK)
    agent_trouble(a, "watching the config", err.message);
  return 0;
}

void agent_follow_stop(agent *a) {
  if (a->watcher)
    ring_watcher_stop(a->watcher);
  a->watcher = NULL;
  if (a->config_watch)
    ring_watch_cancel(a->config_watch);
  a->config_watch = NULL;
  ring_live_free(a->live);
  a->live = NULL;
}

/* ----------------------------------------------------------- the config */

static void apply_config(agent *a, const rk_config *c) {
  bool first = !a->has_config;
  const rk_throttle *old = &a->config.throttle, *now = &c->throttle;
  if (first || old->bytes_per_sec != now->bytes_per_sec ||
      old->moves_per_node != now->moves_per_node || a->config.migration != c->migration)
    rd_logf(RD_INFO, "config: migration %s, %" PRIu32 " moves per node, %" PRIu64 " bytes/s",
            rk_migration_name(c->migration), now->moves_per_node, now->bytes_per_sec);
  arc_limiter_set_rate(a->limiter, now->bytes_per_sec);
  atomic_store(&a->m.rate_limit, now->bytes_per_sec);
  agent_fetchers_limit(a, now->moves_per_node);
  arc_server_limit(a->server, now->moves_per_node); /* the source side of the same limit */
  bool mode = first || a->config.migration != c->migration;
  a->config = *c;
  a->has_config = true;
  if (mode)
    a->own_checked_ms = 0; /* what owners adopt depends on it: check at the next pass */
}

void agent_follow_config(agent *a) {
  ring_error err = {0};
  if (a->config_watch == NULL && start_config_watch(a, &err) != RING_OK)
    return agent_trouble(a, "watching the config", err.message);
  if (!atomic_exchange(&a->config_changed, false))
    return;
  char key[RK_KEY_MAX];
  int len = rk_key(key, a->o.cluster, "config");
  ring_kvs r = {0};
  int rc = ring_etcd_range(a->etcd, key, (size_t)len, NULL, &r, &err);
  rk_config c;
  if (rc == RING_OK && r.n == 1)
    rc = rk_config_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &c, &err);
  if (rc == RING_OK && r.n == 1)
    apply_config(a, &c);
  ring_kvs_clear(&r);
  if (rc != RING_OK) {
    atomic_store(&a->config_changed, true); /* read again at the next pass */
    atomic_fetch_add(&a->m.errors, 1);
    agent_trouble(a, "reading the config", err.message);
  }
}

/* --------------------------------------------------------- who is alive */

typedef struct alive_host {
  char id[RING_ID_MAX + 1];
  char addr[RING_ADDR_MAX + 1]; /* "" when the value did not parse */
} alive_host;

typedef struct alive_set {
  alive_host *h; /* sorted by id */
  uint32_t n;
  bool known; /* false when etcd could not be read: every owner counts as alive */
} alive_set;

static int by_id(const void *x, const void *y) {
  return strcmp(((const alive_host *)x)->id, ((const alive_host *)y)->id);
}

/* Counts and names (once per new refusal) an alive/ value refused by the
 * checks the coordinator applies: over the cap, or a key naming no id. */
static void refuse_alive(agent *a, const char *id, const char *why) {
  atomic_fetch_add(&a->m.alive_refused, 1);
  if (strcmp(a->alive_refused_last, id) == 0)
    return;
  snprintf(a->alive_refused_last, sizeof a->alive_refused_last, "%s", id);
  rd_log(RD_WARN, "refused an alive/ value: the host counts as not alive", "host", id, "why", why,
         NULL);
}

/* Reads the records under dir, each value bounded by cap as it arrives
 * (rd_host_pages: a value over it is dropped, so etcd holding garbage cannot
 * make this agent hold megabytes). Returns the prefix's length, or -1 with
 * err set (counted). */
int agent_read_dir(agent *a, const char *dir, size_t cap, ring_kvs *r, ring_error *err) {
  char prefix[RK_KEY_MAX];
  int plen = rk_key(prefix, a->o.cluster, dir);
  *r = (ring_kvs){0};
  if (rd_host_pages(a->etcd, prefix, (size_t)plen, 0, cap, r, err) != RING_OK) {
    atomic_fetch_add(&a->m.errors, 1);
    return -1;
  }
  return plen;
}

/* Reads alive/, bounded as the coordinator reads it (rd_host_pages: a
 * value over its cap is dropped as it arrives, so a host cannot make this
 * agent hold megabytes of it). A failed read leaves the set unknown (not
 * an error: the sources are then tried in slot order). */
static void read_alive(agent *a, alive_set *out) {
  memset(out, 0, sizeof *out);
  ring_kvs r;
  ring_error err = {0};
  int plen = agent_read_dir(a, rk_host_kind_dir(RK_HOST_ALIVE), rk_host_value_max(RK_HOST_ALIVE),
                            &r, &err);
  if (plen < 0) {
    rd_log(RD_WARN, "reading alive/ failed: trying sources in slot order", "err", err.message,
           NULL);
    return;
  }
  out->h = calloc(r.n ? r.n : 1, sizeof *out->h);
  for (uint32_t i = 0; out->h && i < r.n; i++) {
    alive_host *h = &out->h[out->n];
    const ring_kv *kv = &r.kvs[i];
    char why[RING_ERROR_MESSAGE_MAX];
    int ok = rd_host_check(RK_HOST_ALIVE, kv, (size_t)plen, h->id, why, sizeof why);
    if (ok <= 0)
      refuse_alive(a, h->id, why);
    if (ok < 0) {
      memset(h->id, 0, sizeof h->id);
      continue; /* names no host */
    }
    rk_alive v;
    if (ok > 0 && rk_alive_decode((const char *)kv->value, kv->value_len, &v, NULL) == RING_OK)
      snprintf(h->addr, sizeof h->addr, "%s", v.addr);
    out->n++;
  }
  out->known = out->h != NULL;
  if (out->n > 1)
    qsort(out->h, out->n, sizeof *out->h, by_id);
  ring_kvs_clear(&r);
}

static const alive_host *alive_find(const alive_set *s, const char *id) {
  alive_host key;
  snprintf(key.id, sizeof key.id, "%s", id);
  return s->n ? bsearch(&key, s->h, s->n, sizeof *s->h, by_id) : NULL;
}

/* --------------------------------------------------------------- sources */

/* Adds node `n` as a source of job j: its alive/ address when it has one,
 * else the table's. */
static void add_source(agent_job *j, const ring_table *t, uint16_t n, const alive_host *h) {
  const char *addr = h && h->addr[0] ? h->addr : ring_table_node_addr(t, n);
  if (j->n_sources >= RING_REPLICAS_MAX || addr == NULL || addr[0] == '\0')
    return;
  snprintf(j->sources[j->n_sources], sizeof j->sources[0], "%s", addr);
  snprintf(j->source_ids[j->n_sources], sizeof j->source_ids[0], "%s", ring_table_node_id(t, n));
  j->n_sources++;
}

static bool serving(const ring_table *t, uint16_t n) {
  ring_node_state s = ring_table_node_state(t, n);
  return s != RING_NODE_DOWN && s != RING_NODE_REMOVED;
}

/* The sources of token for pending owner me, best first: the owner of the
 * slot we take if it is alive and not down, then the token's other owners
 * that are alive and not down, then (a last resort, in case alive/ is
 * behind) the owners that seem gone. Caller holds jobs_mu. */
static void job_sources(agent_job *j, const ring_table *t, uint16_t me, const alive_set *al) {
  uint32_t r = ring_table_replicas(t), slot = 0;
  for (uint32_t s = 0; s < r; s++)
    if (ring_table_pending(t, j->token, s) == me)
      slot = s;
  uint16_t order[RING_REPLICAS_MAX];
  uint32_t n = 0;
  order[n++] = ring_table_owner(t, j->token, slot);
  for (uint32_t s = 0; s < r; s++)
    if (s != slot)
      order[n++] = ring_table_owner(t, j->token, s);
  j->n_sources = 0;
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t i = 0; i < n; i++) {
      uint16_t o = order[i];
      if (o == RING_NODE_NONE || o == me)
        continue;
      const alive_host *h = al->known ? alive_find(al, ring_table_node_id(t, o)) : NULL;
      bool good = (!al->known || h != NULL) && serving(t, o);
      if (good == (pass == 0))
        add_source(j, t, o, h);
    }
}

/* ------------------------------------------------------------ admission */

/* The hosts of the table (their table addresses and, for those alive,
 * their alive/ addresses), as the arc server's admitted clients. */
typedef struct peer_addrs {
  char (*addr)[RING_ADDR_MAX + 1];
  uint32_t n;
} peer_addrs;

/* Collects them from t; nothing on no memory (the last list stays). */
static void collect_peers(const ring_table *t, const alive_set *al, peer_addrs *out) {
  uint32_t nodes = ring_table_node_count(t);
  out->n = 0;
  out->addr = malloc((2u * nodes + 1) * sizeof *out->addr);
  for (uint32_t i = 0; out->addr != NULL && i < nodes; i++) {
    const char *addr = ring_table_node_addr(t, (uint16_t)i);
    if (addr != NULL && addr[0] != '\0')
      snprintf(out->addr[out->n++], sizeof out->addr[0], "%s", addr);
    const alive_host *h = al->known ? alive_find(al, ring_table_node_id(t, (uint16_t)i)) : NULL;
    if (h != NULL && h->addr[0] != '\0')
      snprintf(out->addr[out->n++], sizeof out->addr[0], "%s", h->addr);
  }
}

/* Hands the list to the arc server (outside any lock: names resolve). */
static void admit_peers(agent *a, peer_addrs *p) {
  if (p->addr == NULL)
    return;
  const char **list = malloc((p->n ? p->n : 1) * sizeof *list);
  for (uint32_t i = 0; list != NULL && i < p->n; i++)
    list[i] = p->addr[i];
  int skipped = list ? arc_server_allow(a->server, list, p->n) : -1;
  if (skipped != 0)
    rd_logf(RD_WARN, "arc server: %d of %" PRIu32 " peer addresses not admitted (unresolved?)",
            skipped, p->n);
  free(list);
  free(p->addr);
}

/* ---------------------------------------------------- from a table to jobs */

/* Sizes the per-token sets for T tokens (T never changes in a cluster; a
 * new T starts them afresh). Caller holds jobs_mu. */
static int size_sets(agent *a, uint32_t tokens) {
  if (a->tokens == tokens)
    return RING_OK;
  size_t bytes = (tokens + 7) / 8;
  uint8_t *owned = calloc(bytes, 1), *pending = calloc(bytes, 1), *verified = calloc(bytes, 1);
  uint8_t *loss_ok = calloc(bytes, 1);
  uint64_t *drop_at = calloc(tokens, sizeof *drop_at);
  if (!owned || !pending || !verified || !loss_ok || !drop_at) {
    free(owned), free(pending), free(verified), free(loss_ok), free(drop_at);
    return RING_ENOMEM;
  }
  free(a->owned), free(a->pending), free(a->verified), free(a->loss_ok), free(a->drop_at);
  a->owned = owned, a->pending = pending, a->verified = verified, a->drop_at = drop_at;
  a->loss_ok = loss_ok;
  a->loss_version = 0;
  a->tokens = tokens;
  a->next_drop_ms = 0;
  return RING_OK;
}

static uint64_t leftover_version(const agent *a, uint32_t token) {
  for (uint32_t i = 0; i < a->n_leftovers; i++)
    if (a->leftovers[i].token == token)
      return a->leftovers[i].version;
  return 0;
}

/* Marks the tokens we own and are pending for in t. */
static void mark_sets(agent *a, const ring_table *t, int me) {
  size_t bytes = (a->tokens + 7) / 8;
  memset(a->owned, 0, bytes);
  memset(a->pending, 0, bytes);
  if (me < 0)
    return;
  const ring_view *v = ring_table_view(t);
  for (uint32_t i = 0; i < v->tokens * v->replicas; i++)
    if (v->owners[i] == (uint16_t)me)
      agent_bit_set(a->owned, i / v->replicas, true);
  uint32_t n = ring_table_pending_count(t);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t token, slot;
    uint16_t node;
    if (ring_table_pending_at(t, i, &token, &slot, &node) == RING_OK && node == (uint16_t)me)
      agent_bit_set(a->pending, token, true);
  }
}

/* Makes the job list match a->pending. Tokens whose arc must first be
 * removed as stale are written to stale[] (their jobs wait). Caller holds
 * jobs_mu. Returns how many pending tokens there are. */
static uint32_t match_jobs(agent *a, const ring_table *t, uint16_t me, const alive_set *al,
                           uint32_t *stale, uint32_t *n_stale) {
  for (uint32_t i = 0; i < a->n_jobs; i++) {
    agent_job *j = a->jobs[i];
    if (!agent_bit(a->pending, j->token) && !j->refill) { /* refills: agent_refill_sync */
      j->cancelled = true;
      atomic_store(&j->stop, true);
    }
  }
  agent_jobs_reap(a);
  uint32_t n_pending = 0;
  for (uint32_t token = 0; token < a->tokens; token++) {
    if (!agent_bit(a->pending, token))
      continue;
    n_pending++;
    agent_job *j = agent_job_find(a, token);
    if (j != NULL) {
      j->cancelled = false; /* pending again: a stopped fetch comes back as a retry */
      j->refill = false;    /* a refill whose token is now pending here: a move from now on */
      if (j->state == AGENT_JOB_QUEUED || j->state == AGENT_JOB_RETRY)
        job_sources(j, t, me, al);
      continue;
    }
    bool have = arc_store_has(a->store, token), fresh = agent_bit(a->verified, token);
    uint64_t v = leftover_version(a, token);
    if ((j = agent_job_add(a, token, v ? v : ring_table_version(t))) == NULL)
      continue; /* out of memory: the next table or retry pass tries again */
    job_sources(j, t, me, al);
    if (have && fresh) {
      j->state = AGENT_JOB_DONE;
      j->bytes = agent_arc_bytes(a, token);
    } else if (have) {
      j->state = AGENT_JOB_RETRY;
      j->retry_at_ms = UINT64_MAX; /* queued once the stale copy is gone */
      stale[(*n_stale)++] = token;
    }
  }
  return n_pending;
}

/* Takes stale copies out of service as their jobs' leftovers (the fetch
 * checks each file against the source's and sends only what differs),
 * then lets the jobs run. */
static void recheck_stale(agent *a, const uint32_t *stale, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    pthread_mutex_lock(&a->jobs_mu);
    agent_job *j = agent_job_find(a, stale[i]);
    uint64_t version = j ? j->version : 0;
    pthread_mutex_unlock(&a->jobs_mu);
    int rc = j ? arc_store_recheck(a->store, stale[i], version) : RING_ENOTFOUND;
    char token[16];
    snprintf(token, sizeof token, "%" PRIu32, stale[i]);
    rd_log(rc == 0 ? RD_INFO : RD_WARN, "unverified arc taken out of service to be rechecked",
           "token", token, rc == 0 ? NULL : "err", ring_strerror(rc), NULL);
    if (rc == 0)
      atomic_fetch_add(&a->m.stale_removed, 1);
    pthread_mutex_lock(&a->jobs_mu);
    j = agent_job_find(a, stale[i]);
    if (j && j->state == AGENT_JOB_RETRY)
      j->retry_at_ms = rc == 0 ? 0 : rd_now_ms() + RETRY_MAX_MS;
    pthread_mutex_unlock(&a->jobs_mu);
  }
}

/* "Verified" means owned or pending in every version since the fetch, and
 * only the versions this loop reconciles are looked at. When the table in
 * service is not the next one after the last reconciled (the watcher read
 * the newest table after a gap, or the loop woke once for several
 * versions), the versions in between went unseen: one may have taken a
 * token from this host, whose writes then went elsewhere (a host cut from
 * etcd, marked down, repaired and given its tokens back). So nothing
 * counts as verified any more: a pending token we hold is rechecked
 * against its source, which sends only what differs. Caller holds
 * jobs_mu. */
static void forget_unseen(agent *a, uint64_t v) {
  if (a->seen_version == 0 || v == a->seen_version || v == a->seen_version + 1)
    return;
  memset(a->verified, 0, (a->tokens + 7) / 8);
  rd_logf(RD_INFO, "version %" PRIu64 " after %" PRIu64 ": held arcs count as unverified", v,
          a->seen_version);
}

/* Recomputes everything that depends on the table in service. */
static void reconcile(agent *a) {
  alive_set al;
  read_alive(a, &al);
  agent_pins_refresh(a); /* a new table may name nodes pinned since */
  uint32_t *stale = NULL, n_stale = 0, n_pending = 0;
  const ring_table *t = ring_live_enter(a->live);
  pthread_mutex_lock(&a->jobs_mu); /* workers read a->verified */
  if (t == NULL || size_sets(a, ring_table_tokens(t)) != RING_OK ||
      (stale = malloc(((size_t)ring_table_tokens(t)) * sizeof *stale)) == NULL) {
    pthread_mutex_unlock(&a->jobs_mu);
    ring_live_exit(a->live);
    free(al.h);
    return; /* no table yet (or no memory: retried at the next change) */
  }
  uint64_t v = ring_table_version(t);
  int me = ring_table_find_node(t, a->o.id);
  forget_unseen(a, v);
  mark_sets(a, t, me);
  n_pending = match_jobs(a, t, (uint16_t)me, &al, stale, &n_stale);
  pthread_cond_broadcast(&a->jobs_cv);
  pthread_mutex_unlock(&a->jobs_mu);
  peer_addrs peers;
  collect_peers(t, &al, &peers);
  ring_live_exit(a->live);
  free(al.h);
  admit_peers(a, &peers);

  if (n_pending > 0 && v > a->report_version) {
    pthread_mutex_lock(&a->jobs_mu);
    a->barrier_version = v; /* closed until barrier_tick sees every ack */
    pthread_mutex_unlock(&a->jobs_mu);
    a->report_version = v;
    a->report_dirty = true;
    atomic_store(&a->m.pending_version, v);
    rd_logf(RD_INFO, "version %" PRIu64 ": %" PRIu32 " incoming arcs", v, n_pending);
  } else if (n_pending == 0) { /* the coordinator has moved on: the last report stands */
    a->report_version = 0;
    atomic_store(&a->m.pending_version, 0);
  }
  a->seen_version = v;
  recheck_stale(a, stale, n_stale);
  free(stale);
  agent_own_check(a);
  agent_gc_retime(a);
}

/* ------------------------------------------------------- accepted losses */

/* Reads the `loss` key into loss_ok when it is for the table in service:
 * the pending tokens the operator wrote off (ringctl accept-loss), and the
 * owned ones this host lacks (refills: an owned token that has its arc
 * has no job, so the bit is never acted on for it). Read
 * only while a fetch is failing; anything unreadable or malformed counts
 * as no word from the operator. */
static void read_loss(agent *a) {
  char key[RK_KEY_MAX];
  int len = rk_key(key, a->o.cluster, "loss");
  ring_kvs r = {0};
  ring_error err = {0};
  rk_loss l = {0};
  int rc = ring_etcd_range(a->etcd, key, (size_t)len, NULL, &r, &err);
  if (rc == RING_OK && r.n == 1)
    rc = rk_loss_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &l, &err);
  ring_kvs_clear(&r);
  if (rc != RING_OK) {
    atomic_fetch_add(&a->m.errors, 1);
    rd_log(RD_WARN, "reading the loss key failed: no loss counts as accepted", "err", err.message,
           NULL);
  }
  pthread_mutex_lock(&a->jobs_mu);
  if (a->loss_ok != NULL) {
    memset(a->loss_ok, 0, (a->tokens + 7) / 8);
    a->loss_version = rc == RING_OK && l.version == a->seen_version ? l.version : 0;
    for (uint32_t i = 0; a->loss_version && i < l.n_tokens; i++) /* pending, or owned and */
      if (l.tokens[i] < a->tokens &&                             /* missing (a refill) */
          (agent_bit(a->pending, l.tokens[i]) || agent_bit(a->owned, l.tokens[i])))
        agent_bit_set(a->loss_ok, l.tokens[i], true);
  }
  pthread_mutex_unlock(&a->jobs_mu);
  rk_loss_free(&l);
}

/* -------------------------------------------------------------- retries */

/* Requeues failed jobs whose backoff is over, with sources read afresh (a
 * dead source has usually lost its alive/ key by then). Returns the ms
 * until the next one is due. */
static uint64_t requeue(agent *a) {
  uint64_t now = rd_now_ms(), next = UINT64_MAX;
  bool due = false, failing = false;
  pthread_mutex_lock(&a->jobs_mu);
  agent_jobs_reap(a);
  for (uint32_t i = 0; i < a->n_jobs; i++) {
    agent_job *j = a->jobs[i];
    if (j->state == AGENT_JOB_RETRY && !j->cancelled) {
      if (j->retry_at_ms <= now)
        due = true, failing |= j->failures > 0;
      else if (j->retry_at_ms - now < next)
        next = j->retry_at_ms - now;
    }
  }
  pthread_mutex_unlock(&a->jobs_mu);
  if (!due)
    return next;
  if (failing)
    read_loss(a);
  alive_set al;
  read_alive(a, &al);
  agent_pins_refresh(a); /* a key approved since (ringctl trust) */
  const ring_table *t = ring_live_enter(a->live);
  int me = t ? ring_table_find_node(t, a->o.id) : -1;
  pthread_mutex_lock(&a->jobs_mu);
  for (uint32_t i = 0; me >= 0 && i < a->n_jobs; i++) {
    agent_job *j = a->jobs[i];
    if (j->state != AGENT_JOB_RETRY || j->cancelled || j->retry_at_ms > now)
      continue;
    job_sources(j, t, (uint16_t)me, &al);
    j->state = AGENT_JOB_QUEUED;
    atomic_store(&j->stop, false);
  }
  pthread_cond_broadcast(&a->jobs_cv);
  pthread_mutex_unlock(&a->jobs_mu);
  ring_live_exit(a->live);
  free(al.h);
  return next;
}

/* While the barrier is closed, checks it; returns the ms until the next
 * check (UINT64_MAX when open). */
static uint64_t barrier_tick(agent *a) {
  pthread_mutex_lock(&a->jobs_mu);
  uint64_t v = a->barrier_version;
  pthread_mutex_unlock(&a->jobs_mu);
  if (v == 0)
    return UINT64_MAX;
  rd_barrier b;
  ring_error err = {0};
  if (rd_barrier_read(a->etcd, a->o.cluster, &b, &err) != RING_OK) {
    agent_trouble(a, "reading acks for the version barrier", err.message);
    return 500;
  }
  rd_barrier_view view = rd_barrier_view_of(&b);
  const ring_table *t = ring_live_enter(a->live);
  bool open = t != NULL && ring_table_version(t) >= v && rd_barrier_laggard(&view, t, v) == NULL;
  ring_live_exit(a->live);
  rd_barrier_free(&b);
  if (!open)
    return 100; /* acks come within milliseconds of a version: poll briefly */
  pthread_mutex_lock(&a->jobs_mu);
  if (a->barrier_version == v)
    a->barrier_version = 0;
  pthread_cond_broadcast(&a->jobs_cv);
  pthread_mutex_unlock(&a->jobs_mu);
  rd_logf(RD_INFO, "version %" PRIu64 ": every host acked, fetching", v);
  return UINT64_MAX;
}

uint64_t agent_follow_tick(agent *a) {
  ring_error err = {0};
  if (a->watcher == NULL && start_watcher(a, &err) != RING_OK)
    agent_trouble(a, "watching the table", err.message);
  uint64_t v = ring_live_version(a->live);
  atomic_store(&a->m.version, v);
  if (atomic_exchange(&a->table_changed, false) || v != a->seen_version)
    reconcile(a);
  uint64_t next = requeue(a), barrier = barrier_tick(a);
  return next < barrier ? next : barrier;
}

/* The backoff after `failures` failed attempts in a row. */
uint64_t agent_retry_delay(uint32_t failures) {
  uint64_t ms = RETRY_MIN_MS;
  for (uint32_t i = 1; i < failures && ms < RETRY_MAX_MS; i++)
    ms *= 2;
  return ms < RETRY_MAX_MS ? ms : RETRY_MAX_MS;
}
