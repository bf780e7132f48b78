/*
 * coord_member.c: node records (nodes/<id>) from what agents and
 * operators say. The coordinator is the only writer of `state` and
 * `lost_ms`; ringctl writes `desired` and `weight`; every write compares
 * the record's mod revision, so neither overwrites the other.
 *
 * States (proto/etcd.md):
 *   new alive/<id>                     -> record created, joining
 *   alive gone                         -> lost_ms = now (state unchanged: a flap is not a change)
 *   alive back                         -> lost_ms = 0; a down node rejoins as joining
 *   gone for down_after                -> down (the planner then moves its replicas away)
 *
 * How long a node has been gone is measured on this leader's monotonic
 * clock, from the first look of this term that found its alive/ key gone
 * (the `gone` table below), never from lost_ms: lost_ms is a wall time,
 * possibly another host's, and `now - lost_ms` wraps to "gone for ever"
 * when that clock was ahead or this one stepped back. A new leader starts
 * the count again, so a node is never down earlier than down_after after
 * the current leader saw it gone (a failover delays a down by at most
 * down_after). lost_ms stays in the record for people to read.
 *   joining, in the table, no run      -> active
 *   desired removed, owns nothing      -> removed
 *   removed, alive again               -> stays removed while desired is removed
 *                                         (a replaced host's agent still running:
 *                                         logged once, counted, shown by status)
 *
 * Mass loss: while fewer than half of the nodes that are not down have an
 * alive/ key, no node is marked down. Such a loss is a partition between
 * the agents and etcd (or a fleet-wide restart), not failed machines, and
 * re-replicating half the cluster would do more harm than waiting.
 */
#include "coord.h"
#include "journal.h"
#include "ringx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64 /* records per txn: well under etcd's 128 ops per txn */

/* ------------------------------------------------- gone, on our clock */

/* Nodes whose alive/ key this leader has seen gone, and since when
 * (rd_now_ms). The loop's alone; one coordinator per process, so it lives
 * here rather than in struct coord (coord.h). Reset when the term changes
 * (c->m.terms), so a term never inherits another's count. */
typedef struct gone_entry {
  char id[RING_ID_MAX + 1];
  uint64_t since_ms; /* rd_now_ms of the first look that found it gone */
  bool seen;         /* still gone at this look (pruning) */
} gone_entry;

static struct {
  uint64_t term; /* c->m.terms the entries belong to */
  gone_entry *e; /* malloc()'ed */
  uint32_t n, cap;
} gone;

/* Starts a look: forgets another term's entries, marks all unseen. */
static void gone_begin(uint64_t term) {
  if (gone.term != term)
    gone.n = 0, gone.term = term;
  for (uint32_t i = 0; i < gone.n; i++)
    gone.e[i].seen = false;
}

/* How long `id` has been gone on our clock: 0 at the first look that
 * finds it gone. Out of memory it reads 0 (no entry), which delays a down
 * rather than hastening one. */
static uint64_t gone_for(const char *id, uint64_t now) {
  for (uint32_t i = 0; i < gone.n; i++)
    if (strcmp(gone.e[i].id, id) == 0) {
      gone.e[i].seen = true;
      return now - gone.e[i].since_ms;
    }
  if (gone.n == gone.cap) {
    uint32_t cap = gone.cap ? 2 * gone.cap : 16;
    gone_entry *e = realloc(gone.e, cap * sizeof *e);
    if (e == NULL)
      return 0;
    gone.e = e, gone.cap = cap;
  }
  gone_entry *g = &gone.e[gone.n++];
  snprintf(g->id, sizeof g->id, "%s", id);
  g->since_ms = now;
  g->seen = true;
  return 0;
}

/* Ends a look: drops nodes that are back (or have no record). */
static void gone_end(void) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < gone.n; i++)
    if (gone.e[i].seen)
      gone.e[k++] = gone.e[i];
  gone.n = k;
}

/* Node records to write in one txn, each compared on its mod revision,
 * with the journal entries that explain them (an address change): a
 * record and its entry land together or not at all. */
typedef struct batch {
  ring_cmp cmps[BATCH];
  ring_op ops[2 * BATCH];
  char keys[2 * BATCH][RK_KEY_MAX];
  char *values[2 * BATCH];
  uint32_t n, n_ops; /* records (compares), operations */
} batch;

static int flush(coord *c, batch *b) {
  ring_error err = {0};
  int rc = b->n ? coord_txn(c, b->cmps, b->n, b->ops, b->n_ops, &err) : RING_OK;
  if (rc != RING_OK && rc != RING_ECONFLICT && rc != RING_ENOTLEADER)
    coord_trouble(c, "writing node records", &err);
  for (uint32_t i = 0; i < b->n_ops; i++)
    free(b->values[i]);
  b->n = b->n_ops = 0;
  return rc == RING_ECONFLICT ? RING_OK : rc; /* a conflict: re-read and look again */
}

/* Adds a put of an encoded value (taken) under a key made in its slot. */
static void add_put(batch *b, int klen, char *value, size_t vlen) {
  uint32_t i = b->n_ops++;
  b->values[i] = value;
  b->ops[i] = (ring_op){.type = RING_OP_PUT,
                        .key = b->keys[i],
                        .key_len = (size_t)klen,
                        .value = value,
                        .value_len = vlen};
}

/* The journal entry of a node record whose address changes. */
static int queue_addr_event(coord *c, batch *b, const rk_node *n, const char *from) {
  char by[RK_EVENT_BY_MAX + 1], detail[2 * RING_ADDR_MAX + 64];
  snprintf(by, sizeof by, "coordinator/%.100s", c->o.id);
  /* rk_event_make cuts it to RK_EVENT_DETAIL_MAX: two addresses fit unless both are huge */
  snprintf(detail, sizeof detail, "address %s -> %s (followed its alive/ key)", from, n->addr);
  char *v = NULL;
  size_t vlen;
  int klen = rk_journal_entry(c->o.cluster, rd_wall_ms(), by, "node.addr", n->id, detail,
                              b->keys[b->n_ops], &v, &vlen);
  if (klen < 0)
    return -1;
  add_put(b, klen, v, vlen);
  return 0;
}

/* Queues a compare-and-put of a record (mod 0 means "create only"), and
 * its journal entry when it moves the node from the address `old_addr`. */
static int queue(coord *c, batch *b, const rk_node *n, int64_t mod, const char *old_addr) {
  if (b->n == BATCH && flush(c, b) != RING_OK)
    return -1;
  size_t vlen;
  char *v = NULL;
  uint32_t i = b->n_ops;
  int klen = rk_key2(b->keys[i], c->o.cluster, "nodes/", n->id);
  if (klen < 0 || rk_node_encode(n, &v, &vlen) != RING_OK)
    return -1;
  b->cmps[b->n++] = (ring_cmp){.key = b->keys[i],
                               .key_len = (size_t)klen,
                               .target = mod ? RING_CMP_MOD : RING_CMP_CREATE,
                               .op = RING_CMP_EQ,
                               .number = mod};
  add_put(b, klen, v, vlen);
  if (old_addr != NULL && strcmp(old_addr, n->addr) != 0)
    return queue_addr_event(c, b, n, old_addr);
  return 0;
}

static void log_state(const rk_node *n, const char *why) {
  rd_log(RD_INFO, "node state", "node", n->id, "state", ring_node_state_name(n->state), "why", why,
         NULL);
}

static void new_record(const rk_alive *a, uint64_t now, rk_node *n) {
  *n = (rk_node){.labels = a->labels,
                 .weight = a->weight > 0 ? a->weight : 1.0,
                 .state = RING_NODE_JOINING,
                 .desired = RK_WANT_ACTIVE,
                 .since_ms = now};
  memcpy(n->id, a->id, sizeof n->id);
  memcpy(n->addr, a->addr, sizeof n->addr);
  memcpy(n->key, a->key, sizeof n->key); /* pinned at the first join */
}

/* A node whose agent signs with a key other than the one pinned for it:
 * its peers refuse what it signs until an operator approves the new key
 * (ringctl trust). Named in the trouble /healthz shows. */
static void key_refused(coord *c, const rk_node *old, const rk_alive_entry *a, uint32_t *n) {
  if (a == NULL || !a->valid || !rk_key_untrusted(old, a->a.key))
    return;
  ring_error why;
  ring__err(&why, RING_EAUTH,
            "%s signs arcs with a key not pinned for it: refused by its peers until "
            "`ringctl trust %s`",
            old->id, old->id);
  coord_trouble(c, "node keys", &why);
  (*n)++;
}

/* Still named by the table? A removed node leaves it through a plan that
 * drops it once it owns nothing; only then is its record `removed`. */
static bool in_table(const ring_table *t, const char *id) {
  return t != NULL && ring_table_find_node(t, id) >= 0;
}

/* Removed nodes whose agent still runs (a replaced host not stopped yet):
 * the record stays removed, each is logged once per process (the first
 * REMOVED_LOGGED of them), and the gauge counts them. The loop's alone. */
#define REMOVED_LOGGED 64
static char removed_logged[REMOVED_LOGGED][RING_ID_MAX + 1];
static uint32_t n_removed_logged;

static void removed_alive(const rk_state *s, const rk_node *n, uint32_t *count) {
  if (!rk_removed_alive(s, n))
    return;
  (*count)++;
  for (uint32_t i = 0; i < n_removed_logged; i++)
    if (strcmp(removed_logged[i], n->id) == 0)
      return;
  rd_log(RD_WARN, "a removed node's agent is still running: refused, not re-joined", "node", n->id,
         "hint", "stop its agent, or wipe it to join as a new node", NULL);
  if (n_removed_logged < REMOVED_LOGGED)
    snprintf(removed_logged[n_removed_logged++], RING_ID_MAX + 1, "%s", n->id);
}

/* False while a mass loss is going on (see the top of the file). */
static bool may_mark_down(const rk_state *s) {
  uint32_t up = 0, alive = 0;
  for (uint32_t i = 0; i < s->n_nodes; i++) {
    if (s->nodes[i].state == RING_NODE_DOWN || s->nodes[i].state == RING_NODE_REMOVED)
      continue;
    up++;
    alive += rk_state_alive(s, s->nodes[i].id) != NULL;
  }
  return 2 * alive >= up;
}

/* The record n should be now; returns true when it differs from *old.
 * now: wall time for the record's fields; mono: rd_now_ms for decisions.
 * *due is lowered to when a node gone now would be marked down (mono). */
static bool next_record(const coord *c, const rk_state *s, const rk_node *old, rk_node *n,
                        uint64_t now, uint64_t mono, bool down_ok, uint64_t *due) {
  *n = *old;
  if (rk_removed_alive(s, old))
    return false; /* refused calmly (removed_alive below): never re-joined, never followed */
  const rk_alive_entry *a = rk_state_alive(s, old->id);
  int ti = c->table ? ring_table_find_node(c->table, old->id) : -1;
  if (a != NULL) {
    n->lost_ms = 0;
    if (a->valid && strcmp(a->a.addr, old->addr) != 0)
      memcpy(n->addr, a->a.addr, sizeof n->addr); /* restarted elsewhere: follow it */
    if (a->valid && old->key[0] == '\0')
      memcpy(n->key, a->a.key, sizeof n->key); /* the first key it shows is pinned */
    if (a->valid && old->next_key[0] != '\0' && strcmp(a->a.key, old->next_key) == 0) {
      memcpy(n->key, old->next_key, sizeof n->key); /* a rotation done: the next key is it */
      n->next_key[0] = '\0';
    }
    if (old->state == RING_NODE_DOWN ||
        (old->state == RING_NODE_REMOVED && old->desired != RK_WANT_REMOVED))
      n->state = RING_NODE_JOINING;
  } else {
    uint64_t gone_ms = gone_for(old->id, mono);
    if (old->lost_ms == 0)
      n->lost_ms = now != 0 ? now : 1; /* display only; 0 would say "alive" */
    bool may_go = old->state != RING_NODE_DOWN && old->state != RING_NODE_REMOVED;
    if (down_ok && gone_ms >= s->config.down_after_ms && may_go)
      n->state = RING_NODE_DOWN;
    else if (may_go && mono - gone_ms + s->config.down_after_ms < *due)
      *due = mono - gone_ms + s->config.down_after_ms;
  }
  if (n->state == RING_NODE_JOINING && ti >= 0 && !s->has_active && !s->has_proposed &&
      ring_table_node_state(c->table, (uint16_t)ti) == RING_NODE_ACTIVE)
    n->state = RING_NODE_ACTIVE;
  if (n->state == RING_NODE_ACTIVE && n->desired == RK_WANT_DRAINED)
    n->state = RING_NODE_DRAINING;
  if (n->state == RING_NODE_DRAINING && n->desired == RK_WANT_ACTIVE)
    n->state = RING_NODE_ACTIVE;
  if (n->desired == RK_WANT_REMOVED && n->state != RING_NODE_REMOVED && !s->has_active &&
      !in_table(c->table, n->id))
    n->state = RING_NODE_REMOVED;
  if (n->state != old->state)
    n->since_ms = now;
  return n->state != old->state || n->lost_ms != old->lost_ms || strcmp(n->addr, old->addr) != 0 ||
         strcmp(n->key, old->key) != 0 || strcmp(n->next_key, old->next_key) != 0;
}

/* A look that found nothing to write, and until when (rd_now_ms) the
 * same state and table still ask for nothing: the first time a node gone
 * then reaches down_after. Everything else a record becomes is a pure
 * function of the state and the table. The loop's alone. */
static struct {
  coord_memo key;
  uint64_t until_ms;
} calm;

int coord_membership(coord *c, const rk_state *s) {
  batch b = {.n = 0};
  uint64_t now = rd_wall_ms(), mono = rd_now_ms(), due = UINT64_MAX;
  coord_memo key = coord_memo_of(c, s);
  if (coord_memo_same(&calm.key, &key) && mono < calm.until_ms)
    return 0;
  calm.key = (coord_memo){0};
  int wrote = 0;
  for (uint32_t i = 0; i < s->n_alive; i++) {
    const rk_alive_entry *a = &s->alive[i];
    if (!a->valid || rk_state_node(s, a->a.id) != NULL)
      continue;
    rk_node n;
    new_record(&a->a, now, &n);
    log_state(&n, "agent registered");
    if (queue(c, &b, &n, 0, NULL) != 0)
      return RING_EINVAL;
    wrote = 1;
  }
  bool down_ok = may_mark_down(s);
  if (!down_ok) {
    ring_error why;
    ring__err(&why, RING_EUNAVAIL,
              "fewer than half of the nodes are alive: holding down detection");
    coord_trouble(c, "membership", &why);
  }
  gone_begin(atomic_load(&c->m.terms));
  uint32_t refused = 0, removed = 0;
  for (uint32_t i = 0; i < s->n_nodes; i++) {
    rk_node n;
    removed_alive(s, &s->nodes[i], &removed);
    key_refused(c, &s->nodes[i], rk_state_alive(s, s->nodes[i].id), &refused);
    if (!next_record(c, s, &s->nodes[i], &n, now, mono, down_ok, &due))
      continue;
    if (n.state != s->nodes[i].state)
      log_state(&n, n.lost_ms ? "lease gone past down_after" : "membership");
    if (strcmp(n.addr, s->nodes[i].addr) != 0) /* a move: logged, and journaled by queue() */
      rd_log(RD_WARN, "node address changed: following its alive/ key", "node", n.id, "from",
             s->nodes[i].addr, "to", n.addr, NULL);
    if (queue(c, &b, &n, s->node_mod[i], s->nodes[i].addr) != 0)
      return RING_EINVAL;
    wrote = 1;
  }
  gone_end();
  atomic_store(&c->m.key_refused, refused);
  atomic_store(&c->m.removed_alive, removed);
  int rc = flush(c, &b);
  if (rc == RING_OK && wrote == 0 && down_ok && refused == 0) /* trouble is reported each look */
    calm.key = key, calm.until_ms = due;
  return rc != RING_OK ? rc : wrote;
}
