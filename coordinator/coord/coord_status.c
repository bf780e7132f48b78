/*
 * coord_status.c: the status page: GET / (or /status) is a self-contained
 * HTML page (inline CSS and JS, nothing fetched from elsewhere) that polls
 * GET /status.json every second and shows the nodes, each one's
 * token-replicas against its weighted target, the plan in progress and
 * the last runs.
 *
 * Sections: /status.json; the leader's view; a follower's view; the page.
 *
 * Threads. The loop builds the JSON (coord_status_observe while leading,
 * coord_status_follow otherwise) and swaps it in under c->status.mu; the
 * HTTP thread only copies the current string under that mutex, so a slow
 * client never holds up the loop and the loop never waits on etcd for a
 * client. Without --listen nothing is built.
 *
 * Cost. The leader's view is O(hosts) to build, so it is built only when
 * someone reads it: a GET that finds it stale (a second old, or older
 * than the loop's last look at a changed state and 200 ms old) sets
 * `wanted`, wakes the loop and waits at most STATUS_WAIT_MS for the new
 * one, so every field (generated_ms, health, rates) is as fresh as when
 * the loop rebuilt it every second; while the page was read in the last
 * STATUS_WATCHED_MS the loop also rebuilds it ahead, on the old rule.
 * The "nodes" array, the O(hosts) part, is kept as text for the state
 * stamp, table and targets it shows (coord_memo), so a rebuild of an
 * unchanged state copies it. At most one build per 200 ms whatever
 * asks; the memory is the JSON and that text. An idle look that nobody
 * reads builds nothing; the progress samples and the flow are still
 * taken at every look.
 *
 * /status.json (application/json), "format":"ringkeeper.status.v1":
 *   {"format","cluster","self":ID,"role":"starting"|"follower"|"leader",
 *    "leader":null|{"id","addr"},"generated_ms":UNIX_MS,
 *   from the lease's lapse to the loop's step down, "role":"follower",
 *    "leader":null, "health":"the leadership lease lapsed: ..." and nothing
 *    else (whatever view the loop built last);
 *   from winning the election to the first look (coord_status_took_over)
 *    "health":"taking over: ..." and nothing else; from then on, leading,
 *    "revision":N (the etcd revision shown), "health":"ok"|REASON,
 *    "config":null|{"tokens","replicas","failure_domain","migration",
 *                   "auto_apply" ("none"|"repair"|"all"),"throttle":{"moves_per_node",
 *                   "moves_per_domain","moves_per_wave","bytes_per_sec"}},
 *    "version":N (0: no table yet),
 *    "nodes":[{"id","addr","state" ("drained" for a drain done),"desired",
 *              "labels":{K:V},"weight","alive":BOOL,"acked":V,"replicas":N,
 *              "target":X,"colour":"#rrggbb", and "agent_running":true for a
 *              removed node whose agent still runs}],
 *    "plan":null|{"id" ("" when refused),"state":"proposed"|"active"|
 *              "paused"|"cancelling"|"done"|"failed"|"cancelled",
 *              "base_version","moves_total","moves_done","lower_bound",
 *              "waves","wave" (1-based; 0 without waves or not started),
 *              "bytes_total","bytes_done","moves_per_s","bytes_per_s"
 *              (averages since approval),"approved_ms","finished_ms",
 *              "reason","violations":[TEXT], and for an active run balanced by
 *              bytes "bytes_balance":{ID:{"before","after","target"}}},
 *    "history":[{"id","state","base_version","moves_total","moves_done",
 *                "waves","approved_ms","finished_ms","reason"}],
 *    "bad_records":[{"kind","host","why"}],
 *    "missing":{"replicas":N,"hosts":[{"host","count","tokens","failing"}],
 *               "lost":[TOKEN]},
 *    "flow", "rates": the active (or last) run's flow and progress rates,
 *               as coord_status_plan.c describes}
 * "nodes" holds every node record, by id; "replicas" is what it owns in
 * the table at "version" and "target" its weighted target there
 * (rk_node_targets, the same figures as `ringctl status`; both 0 for a
 * node not in the table); "colour" is its colour in every picture
 * (rk_node_colour: `ringctl render`'s too). "plan" is, as in `ringctl status`, the active
 * run, else the proposed plan, else the last finished run; its
 * "bytes_balance" is each node's bytes held before and after the run and
 * its byte target (ring_plan_node_bytes), shown in the page's node table. "history" is
 * plan/history/ newest first, at most STATUS_HISTORY_MAX entries.
 * "bad_records" are the records the read ignored (rk_state's bad: over
 * their cap or malformed), by kind and host, at most STATUS_BAD_MAX. Strings
 * are JSON-escaped by cJSON; the page puts every value into the document
 * as text (textContent), never as markup. "missing" is the token-replicas
 * their owners report missing (coord_missing.c; cluster.h's view): per
 * host its count, first tokens and the refill's failing reasons, and the
 * tokens every owner lacks.
 */
#define _GNU_SOURCE /* pthread_condattr_setclock, strdup */
#include "coord.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#ifndef STATUS_HISTORY_MAX
#define STATUS_HISTORY_MAX 10 /* finished runs listed */
#endif
#ifndef STATUS_BAD_MAX
#define STATUS_BAD_MAX 100 /* bad records listed */
#endif
#ifndef STATUS_REFRESH_MS
#define STATUS_REFRESH_MS 1000 /* rebuild at least this often (rates, clocks) */
#endif
#ifndef STATUS_GAP_MS
#define STATUS_GAP_MS 200 /* and at most this often: agents' writes change the state a lot */
#endif
#ifndef STATUS_HISTORY_EVERY_MS
#define STATUS_HISTORY_EVERY_MS 30000 /* re-read history even when its keys look the same */
#endif
#ifndef STATUS_WAIT_MS
#define STATUS_WAIT_MS 1000 /* a GET waits this long at most for the loop's new view */
#endif
/* Who may read the page unless --status-allow says: it names every node's
 * address, labels and the runs, so it is not for every host that reaches
 * /metrics. */
#define STATUS_ALLOW_DEFAULT "127.0.0.1,::1"
#ifndef STATUS_WATCHED_MS
#define STATUS_WATCHED_MS 5000 /* after a GET, the loop rebuilds ahead this long */
#endif

#define JSON_TYPE "application/json"
#define HTML_TYPE "text/html; charset=utf-8"

/* ------------------------------------------------------------ /status.json */

/* Swaps o's text in as the published JSON of the state stamp `stamp` (0:
 * not the leader's view) and wakes a GET waiting for it (o is deleted
 * either way); on a failed print the old text stays. */
static void publish(coord *c, cJSON *o, uint64_t stamp) {
  char *json = o != NULL ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (json == NULL)
    return;
  coord_status *st = &c->status;
  pthread_mutex_lock(&st->mu);
  char *old = st->json;
  st->json = json;
  st->serial++;
  st->json_ms = rd_now_ms();
  st->json_stamp = stamp;
  atomic_fetch_add(&st->builds, 1);
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
  cJSON_free(old);
}

/* What every view starts with; leader NULL when nobody leads (or it is
 * not known yet). */
static cJSON *head(const coord *c, const char *role, const rk_leader *leader) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "format", "ringkeeper.status.v1");
  cJSON_AddStringToObject(o, "cluster", c->o.cluster);
  cJSON_AddStringToObject(o, "self", c->o.id);
  cJSON_AddStringToObject(o, "role", role);
  if (leader != NULL) {
    cJSON *l = cJSON_AddObjectToObject(o, "leader");
    cJSON_AddStringToObject(l, "id", leader->id);
    cJSON_AddStringToObject(l, "addr", leader->addr);
  } else {
    cJSON_AddNullToObject(o, "leader");
  }
  cJSON_AddNumberToObject(o, "generated_ms", (double)rd_wall_ms());
  return o;
}

/* ------------------------------------------------------- the leader's view */

static cJSON *config_json(const rk_state *s) {
  if (!s->has_config)
    return cJSON_CreateNull();
  const rk_config *k = &s->config;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "tokens", k->tokens);
  cJSON_AddNumberToObject(o, "replicas", k->replicas);
  cJSON_AddStringToObject(o, "failure_domain", k->failure_domain);
  cJSON_AddStringToObject(o, "migration", rk_migration_name(k->migration));
  cJSON_AddStringToObject(o, "auto_apply", rk_auto_apply_name(k->auto_apply));
  cJSON *t = cJSON_AddObjectToObject(o, "throttle");
  cJSON_AddNumberToObject(t, "moves_per_node", k->throttle.moves_per_node);
  cJSON_AddNumberToObject(t, "moves_per_domain", k->throttle.moves_per_domain);
  cJSON_AddNumberToObject(t, "moves_per_wave", k->throttle.moves_per_wave);
  cJSON_AddNumberToObject(t, "bytes_per_sec", (double)k->throttle.bytes_per_sec);
  return o;
}

/* Node record i of s against t (NULL: no table) and t's targets (NULL:
 * none known). */
static cJSON *node_json(const rk_state *s, uint32_t i, const ring_table *t, const double *targets) {
  const rk_node *n = &s->nodes[i];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", n->id);
  cJSON_AddStringToObject(o, "addr", n->addr);
  cJSON_AddStringToObject(o, "state", rk_node_state_shown(s, t, n));
  cJSON_AddStringToObject(o, "desired", rk_desired_name(n->desired));
  cJSON *labels = cJSON_AddObjectToObject(o, "labels");
  for (uint32_t k = 0; k < n->labels.n; k++)
    cJSON_AddStringToObject(labels, n->labels.key[k], n->labels.value[k]);
  cJSON_AddNumberToObject(o, "weight", n->weight);
  cJSON_AddBoolToObject(o, "alive", rk_state_alive(s, n->id) != NULL);
  if (rk_removed_alive(s, n))
    cJSON_AddBoolToObject(o, "agent_running", true);
  cJSON_AddNumberToObject(o, "acked", (double)rk_state_ack(s, n->id));
  int index = t != NULL ? ring_table_find_node(t, n->id) : RING_ENOTFOUND;
  cJSON_AddNumberToObject(o, "replicas",
                          index < 0 ? 0 : ring_table_node_replicas(t, (uint16_t)index));
  cJSON_AddNumberToObject(o, "target", index < 0 || targets == NULL ? 0 : targets[index]);
  cJSON_AddStringToObject(o, "colour", rk_node_colour(n->id));
  return o;
}

/* n per second over [from_ms, to_ms] (wall clock); 0 without a span. */
static double per_s(double n, uint64_t from_ms, uint64_t to_ms) {
  return from_ms != 0 && to_ms > from_ms ? n * 1000.0 / (double)(to_ms - from_ms) : 0;
}

/* A run: what the history lists, and with `panel` what the plan panel
 * shows besides. */
static cJSON *run_json(const rk_run *r, bool panel) {
  const rk_plan_doc *p = &r->plan;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", p->id);
  cJSON_AddStringToObject(o, "state", rk_run_state_name(r->state));
  cJSON_AddNumberToObject(o, "base_version", (double)p->base_version);
  cJSON_AddNumberToObject(o, "moves_total", p->moves_total);
  cJSON_AddNumberToObject(o, "moves_done", r->cursor.moves_done);
  cJSON_AddNumberToObject(o, "waves", p->waves);
  cJSON_AddNumberToObject(o, "approved_ms", (double)r->approved_ms);
  cJSON_AddNumberToObject(o, "finished_ms", (double)r->finished_ms);
  cJSON_AddStringToObject(o, "reason", r->reason);
  if (!panel)
    return o;
  uint32_t wave = r->state == RK_RUN_DONE ? p->waves : r->cursor.wave + 1;
  uint64_t end = r->finished_ms != 0 ? r->finished_ms : rd_wall_ms();
  cJSON_AddNumberToObject(o, "lower_bound", p->lower_bound);
  cJSON_AddNumberToObject(o, "wave", p->waves == 0 ? 0 : wave < p->waves ? wave : p->waves);
  cJSON_AddNumberToObject(o, "bytes_total", (double)p->bytes);
  cJSON_AddNumberToObject(o, "bytes_done", (double)r->cursor.bytes_done);
  cJSON_AddNumberToObject(o, "moves_per_s", per_s(r->cursor.moves_done, r->approved_ms, end));
  cJSON_AddNumberToObject(o, "bytes_per_s",
                          per_s((double)r->cursor.bytes_done, r->approved_ms, end));
  cJSON_AddArrayToObject(o, "violations");
  return o;
}

/* The proposed plan, in the shape of a run that has not started. */
static cJSON *proposed_json(const rk_plan_doc *d) {
  rk_run r = {.plan = *d, .state = RK_RUN_ACTIVE}; /* borrows d: never freed here */
  cJSON *o = run_json(&r, true);
  cJSON_ReplaceItemInObject(o, "state", cJSON_CreateString("proposed"));
  cJSON_ReplaceItemInObject(o, "wave", cJSON_CreateNumber(0)); /* not started */
  cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "violations");
  for (uint32_t i = 0; i < d->n_violations && i < RK_VIOLATIONS_MAX; i++)
    cJSON_AddItemToArray(v, cJSON_CreateString(d->violations[i]));
  return o;
}

/* As `ringctl status`: the active run, else the proposed plan, else the
 * last finished run (a copy of the history's first entry). */
static cJSON *plan_json(coord *c, const rk_state *s) {
  if (s->has_active) {
    cJSON *o = run_json(&s->active, true);
    coord_status_bytes(c, s, o);
    return o;
  }
  if (s->has_proposed)
    return proposed_json(&s->proposed);
  const cJSON *last = c->status.last_run;
  return last != NULL ? cJSON_Duplicate(last, true) : cJSON_CreateNull();
}

/* A key for what a table's targets depend on: T, R, the domain level and
 * each node's id, weight, state and domain. */
static uint64_t targets_key(const ring_table *t) {
  XXH3_state_t *h = XXH3_createState();
  if (h == NULL)
    return 0;
  XXH3_64bits_reset(h);
  uint32_t n = ring_table_node_count(t),
           dims[3] = {ring_table_tokens(t), ring_table_replicas(t), n};
  const char *level = ring_table_failure_domain(t);
  XXH3_64bits_update(h, dims, sizeof dims);
  XXH3_64bits_update(h, level, strlen(level) + 1);
  for (uint32_t i = 0; i < n; i++) {
    uint16_t k = (uint16_t)i;
    const char *id = ring_table_node_id(t, k),
               *dom = level[0] ? ring_table_node_label(t, k, level) : NULL;
    double w = ring_table_node_weight(t, k);
    int st = (int)ring_table_node_state(t, k);
    XXH3_64bits_update(h, id, strlen(id) + 1);
    XXH3_64bits_update(h, &w, sizeof w);
    XXH3_64bits_update(h, &st, sizeof st);
    XXH3_64bits_update(h, dom != NULL ? dom : "", dom != NULL ? strlen(dom) + 1 : 0);
  }
  uint64_t key = XXH3_64bits_digest(h);
  XXH3_freeState(h);
  return key | 1; /* never 0, which means "none" */
}

/* Recomputes the targets when t's membership changed: a no-change plan
 * is not free on a large table, and versions change on every wave. Out of
 * memory, st->targets is NULL (targets show as 0) until the next try. */
static void refresh_targets(coord_status *st, const ring_table *t) {
  uint64_t key = t != NULL ? targets_key(t) : 0;
  if (key == st->targets_key)
    return;
  uint32_t n = t != NULL ? ring_table_node_count(t) : 0;
  free(st->targets);
  st->targets = calloc(n ? n : 1, sizeof *st->targets);
  st->targets_key = st->targets != NULL ? key : 0;
  if (t != NULL && st->targets != NULL)
    rk_node_targets(t, st->targets);
}

static uint64_t run_time(const rk_run *r) {
  return r->finished_ms != 0 ? r->finished_ms : r->updated_ms;
}

static int newest_first(const void *pa, const void *pb) {
  uint64_t a = run_time(pa), b = run_time(pb);
  if (a != b)
    return a > b ? -1 : 1;
  return strcmp(((const rk_run *)pa)->plan.id, ((const rk_run *)pb)->plan.id);
}

/* Rebuilds the history's JSON from plan/history/'s values (r), newest
 * first; values that do not decode are left out (and logged at debug). */
static void history_from(coord_status *st, const ring_kvs *r) {
  rk_run *runs = calloc(r->n ? r->n : 1, sizeof *runs);
  cJSON *list = cJSON_CreateArray();
  uint32_t n = 0;
  for (uint32_t i = 0; runs != NULL && i < r->n; i++) {
    ring_error e = {0};
    const ring_kv *kv = &r->kvs[i];
    if (rk_run_decode((const char *)kv->value, kv->value_len, &runs[n], &e) == RING_OK)
      n++;
    else
      rd_log(RD_DEBUG, "status page: skipping a history entry", "key", (const char *)kv->key, "err",
             e.message, NULL);
  }
  if (runs == NULL || list == NULL) {
    cJSON_Delete(list);
    free(runs);
    return; /* out of memory: the old history stays */
  }
  qsort(runs, n, sizeof *runs, newest_first);
  for (uint32_t i = 0; i < n && i < STATUS_HISTORY_MAX; i++)
    cJSON_AddItemToArray(list, run_json(&runs[i], false));
  cJSON_Delete(st->history);
  cJSON_Delete(st->last_run);
  st->history = list;
  st->last_run = n > 0 ? run_json(&runs[0], true) : NULL;
  for (uint32_t i = 0; i < n; i++)
    rk_run_free(&runs[i]);
  free(runs);
}

/* Reads plan/history/ again when its keys changed (a run ended, retention
 * trimmed it) or STATUS_HISTORY_EVERY_MS passed. The keys are looked at
 * when the plan keys changed (a run ends in the txn that deletes
 * plan/active) and otherwise once every STATUS_REFRESH_MS, keys only, so
 * the values are fetched only when needed. A failed read keeps what was
 * shown. */
static void refresh_history(coord *c, const rk_state *s, uint64_t now_ms) {
  coord_status *st = &c->status;
  int64_t plans = (s->has_active ? s->active_mod : 0) ^ (s->has_proposed ? s->proposed_mod : -1);
  if (st->history != NULL && plans == st->plans_mod &&
      now_ms - st->history_checked_ms < STATUS_REFRESH_MS)
    return;
  st->plans_mod = plans;
  st->history_checked_ms = now_ms;
  char prefix[RK_KEY_MAX];
  int len = coord_key(c, prefix, "plan/history/");
  ring_range_opts o = {.prefix = true, .keys_only = true};
  ring_kvs r;
  if (len < 0 || ring_etcd_range(c->etcd, prefix, (size_t)len, &o, &r, NULL) != RING_OK)
    return;
  int64_t newest = 0;
  for (uint32_t i = 0; i < r.n; i++)
    newest = r.kvs[i].mod_revision > newest ? r.kvs[i].mod_revision : newest;
  uint32_t count = r.n;
  ring_kvs_clear(&r);
  if (st->history != NULL && count == st->history_keys && newest == st->history_mod &&
      now_ms - st->history_ms < STATUS_HISTORY_EVERY_MS)
    return;
  o.keys_only = false;
  if (ring_etcd_range(c->etcd, prefix, (size_t)len, &o, &r, NULL) != RING_OK)
    return;
  history_from(st, &r);
  ring_kvs_clear(&r);
  st->history_keys = count;
  st->history_mod = newest;
  st->history_ms = now_ms;
}

/* The "nodes" array of s against t as JSON text, made again only when
 * the look's key (coord_memo: the state, the table) or the targets
 * changed; a raw cJSON item to add, NULL when out of memory. */
static cJSON *nodes_json(coord *c, const rk_state *s, const ring_table *t) {
  coord_status *st = &c->status;
  coord_memo key = coord_memo_of(c, s);
  if (st->nodes == NULL || !coord_memo_same(&st->nodes_key, &key) ||
      st->nodes_targets != st->targets_key) {
    cJSON *nodes = cJSON_CreateArray();
    for (uint32_t i = 0; nodes != NULL && i < s->n_nodes; i++)
      cJSON_AddItemToArray(nodes, node_json(s, i, t, st->targets));
    char *text = nodes != NULL ? cJSON_PrintUnformatted(nodes) : NULL;
    cJSON_Delete(nodes);
    if (text == NULL)
      return NULL;
    free(st->nodes);
    st->nodes = strdup(text); /* cJSON's allocator may not be free()'s */
    cJSON_free(text);
    st->nodes_key = st->nodes != NULL ? key : (coord_memo){0};
    st->nodes_targets = st->targets_key;
  }
  return st->nodes != NULL ? cJSON_CreateRaw(st->nodes) : NULL;
}

static cJSON *leader_json(coord *c, const rk_state *s, const ring_table *t) {
  cJSON *o = head(c, "leader", s->has_leader ? &s->leader : NULL);
  rd_text health = {0};
  coord_health_text(c, &health);
  if (health.len > 0 && health.p[health.len - 1] == '\n')
    health.p[--health.len] = '\0';
  cJSON_AddNumberToObject(o, "revision", (double)s->revision);
  cJSON_AddStringToObject(o, "health", health.p != NULL ? health.p : "");
  free(health.p);
  cJSON_AddItemToObject(o, "config", config_json(s));
  cJSON_AddNumberToObject(o, "version", (double)s->version);
  cJSON *nodes = nodes_json(c, s, t);
  if (nodes == NULL) { /* out of memory: no view this time, the old one stays */
    cJSON_Delete(o);
    return NULL;
  }
  cJSON_AddItemToObject(o, "nodes", nodes);
  cJSON_AddItemToObject(o, "plan", plan_json(c, s));
  cJSON_AddItemToObject(o, "history",
                        c->status.history != NULL ? cJSON_Duplicate(c->status.history, true)
                                                  : cJSON_CreateArray());
  cJSON_AddItemToObject(o, "bad_records", rk_bad_json(s, STATUS_BAD_MAX));
  cJSON_AddItemToObject(o, "missing", coord_missing_json());
  coord_status_plan(c, o); /* "flow" and "rates" */
  return o;
}

/* Whether a view built at built_ms of stamp `shown` is stale at now when
 * the loop's last look was at stamp `latest`: the rule the loop rebuilt
 * by at every look before the view was built on demand. */
static bool stale(uint64_t now, uint64_t built_ms, uint64_t shown, uint64_t latest) {
  uint64_t age = now - built_ms;
  return built_ms == 0 || age >= STATUS_REFRESH_MS || (shown != latest && age >= STATUS_GAP_MS);
}

/* Whether the page was read lately (the loop then rebuilds ahead). */
static bool watched(coord_status *st, uint64_t now) {
  uint64_t asked = atomic_load(&st->asked_ms);
  return asked != 0 && now - asked < STATUS_WATCHED_MS;
}

void coord_status_observe(coord *c, const rk_state *s) {
  coord_status *st = &c->status;
  if (c->o.listen == NULL)
    return;
  coord_status_plan_follow(c, s);
  atomic_store(&st->latest, s->stamp);
  uint64_t now = rd_now_ms();
  bool wanted = atomic_exchange(&st->wanted, false);
  if (st->leading && !wanted &&
      !(watched(st, now) && stale(now, st->built_ms, st->stamp, s->stamp)))
    return;
  /* right after a publish c->table is ahead of s: show no table rather
   * than another version's */
  const ring_table *t =
      c->table != NULL && ring_table_version(c->table) == s->version ? c->table : NULL;
  refresh_targets(st, t);
  refresh_history(c, s, now);
  cJSON *o = leader_json(c, s, t);
  if (o == NULL)
    return;
  publish(c, o, s->stamp);
  st->leading = true;
  st->stamp = s->stamp;
  st->built_ms = now;
}

/* The page between winning an election and the first look: the role is
 * the leader's from the moment it is (an operator who asks must not read
 * "starting" from a leader that may already have published), the view
 * still to come is said as the health, and the next look builds the
 * leader's view whoever asks. */
void coord_status_took_over(coord *c) {
  coord_status *st = &c->status;
  if (c->o.listen == NULL)
    return;
  rk_leader me = {0};
  snprintf(me.id, sizeof me.id, "%s", c->o.id);
  snprintf(me.addr, sizeof me.addr, "%s", c->o.listen);
  cJSON *o = head(c, "leader", &me);
  cJSON_AddStringToObject(o, "health", "taking over: the first look at the cluster is under way");
  publish(c, o, 0);
  st->leading = false; /* the next look builds, wanted or not */
  st->stamp = 0;
  st->built_ms = 0;
}

/* ------------------------------------------------------ a follower's view */

void coord_status_follow(coord *c) {
  coord_status *st = &c->status;
  uint64_t now = rd_now_ms();
  if (c->o.listen == NULL)
    return;
  atomic_store(&st->latest, 0);
  bool wanted = atomic_exchange(&st->wanted, false);
  if (!st->leading && !wanted && st->built_ms != 0 && now - st->built_ms < STATUS_REFRESH_MS)
    return;
  char key[RK_KEY_MAX];
  int len = coord_key(c, key, "leader");
  ring_kv kv = {0};
  rk_leader leader;
  bool known = false;
  if (len >= 0 && ring_etcd_leader(c->etcd, key, &kv, NULL) == RING_OK) {
    known = rk_leader_decode((const char *)kv.value, kv.value_len, &leader, NULL) == RING_OK;
    ring_kv_clear(&kv);
  }
  publish(c, head(c, "follower", known ? &leader : NULL), 0);
  st->leading = false;
  st->stamp = 0;
  st->built_ms = now;
}

/* ---------------------------------------------------------------- the page */

/* Whether a GET that found the view stale waits for a new one: when a
 * build is already asked for, or this GET asks (wakes the loop), which it
 * does at most once per STATUS_GAP_MS whatever the number of GETs, so a
 * flood of reads cannot keep the loop building; a GET in between serves
 * the view there is. */
static bool ask_loop(coord *c, uint64_t now) {
  coord_status *st = &c->status;
  if (atomic_load(&st->wanted))
    return true;
  uint64_t last = atomic_load(&st->woken_ms);
  if (last != 0 && now - last < STATUS_GAP_MS)
    return false;
  if (!atomic_compare_exchange_strong(&st->woken_ms, &last, now))
    return true; /* another GET asked just now */
  atomic_store(&st->wanted, true);
  atomic_fetch_add(&st->wakes, 1);
  rd_waker_wake(&c->waker);
  return true;
}

/* The view while the lease has lapsed and the loop has not stepped down
 * yet: a follower's, the leader unknown, the reason as the health. */
static void lapsed_view(coord *c, rd_text *t) {
  cJSON *o = head(c, "follower", NULL);
  cJSON_AddStringToObject(o, "health", "the leadership lease lapsed: stepping down");
  char *json = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  ring__sb_printf(t, "%s", json != NULL ? json : "{}");
  cJSON_free(json);
}

unsigned coord_status_page(void *ud, const char *path, rd_text *t, const char **type) {
  coord *c = ud;
  if (strcmp(path, "/status.json") != 0) {
    *type = HTML_TYPE;
    ring__sb_printf(t, "%s", coord_status_html);
    return 200;
  }
  *type = JSON_TYPE;
  if (coord_lease_lapsed(c)) { /* whatever the loop built last: it cannot lead now */
    lapsed_view(c, t);
    return 200;
  }
  coord_status *st = &c->status;
  uint64_t now = rd_now_ms();
  atomic_store(&st->asked_ms, now);
  pthread_mutex_lock(&st->mu);
  if (stale(now, st->json_ms, st->json_stamp, atomic_load(&st->latest)) && ask_loop(c, now)) {
    uint64_t serial = st->serial;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += STATUS_WAIT_MS / 1000;
    until.tv_nsec += (long)(STATUS_WAIT_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
      until.tv_sec++, until.tv_nsec -= 1000000000L;
    while (st->serial == serial)
      if (pthread_cond_timedwait(&st->cv, &st->mu, &until) != 0)
        break; /* the loop is busy: what there is */
  }
  ring__sb_printf(t, "%s", st->json != NULL ? st->json : "{}");
  pthread_mutex_unlock(&st->mu);
  return 200;
}

const rd_http_route *coord_status_routes(coord *c, char *msg, size_t cap) {
  coord_status *st = &c->status;
  const char *list = c->o.status_allow != NULL ? c->o.status_allow : STATUS_ALLOW_DEFAULT;
  char why[200];
  if (rd_addrs_parse(list, &st->allow, why, sizeof why) != 0)
    return snprintf(msg, cap, "--status-allow: %s", why), NULL;
  const char *paths[] = {"/", "/status", "/status.json"};
  for (size_t i = 0; i < 3; i++)
    st->routes[i] = (rd_http_route){paths[i], coord_status_page, c, st->allow, &st->denied};
  st->routes[3] = (rd_http_route){0};
  return st->routes;
}

int coord_status_init(coord *c) {
  coord_status *st = &c->status;
  memset(st, 0, sizeof *st);
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc != 0)
    return rc;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* rd_now_ms's clock */
  rc = pthread_cond_init(&st->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc == 0 && (rc = pthread_mutex_init(&st->mu, NULL)) != 0)
    pthread_cond_destroy(&st->cv);
  if (rc == 0)
    publish(c, head(c, "starting", NULL), 0);
  return rc;
}

void coord_status_free(coord *c) {
  coord_status *st = &c->status;
  pthread_mutex_destroy(&st->mu);
  pthread_cond_destroy(&st->cv);
  free(st->nodes);
  cJSON_free(st->json);
  cJSON_Delete(st->history);
  cJSON_Delete(st->last_run);
  free(st->targets);
  rd_addrs_free(st->allow);
  coord_status_plan_free(c);
  coord_status_bytes_free(c);
  memset(st, 0, sizeof *st);
}
