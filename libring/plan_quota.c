/*
 * plan_quota.c: how many token-replicas each node should hold.
 *
 * A node's weighted target is T*R*w/W. One token can put at most one
 * replica in a hard failure domain, so a domain holds at most T; a domain
 * whose share would pass T is capped there and the excess is shared by the
 * other domains by weight (water-filling). Inside a domain, nodes share by
 * weight. Integer quotas are the floor or the ceiling of each target and sum
 * to exactly T*R; where rounding has a choice it favours nodes that hold more
 * today, so fewer replicas move.
 */
#include "plan_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- domains */

typedef struct label_ref {
  const char *value;
  uint32_t node;
} label_ref;

static int cmp_label_ref(const void *a, const void *b) {
  const label_ref *x = a, *y = b;
  int c = strcmp(x->value, y->value);
  return c ? c : (x->node > y->node) - (x->node < y->node);
}

int ring__label_ids(const ring_table *t, const char *key, uint32_t *out) {
  const uint32_t n = t->n_nodes;
  if (key == NULL || *key == '\0') {
    for (uint32_t i = 0; i < n; i++)
      out[i] = i;
    return (int)n;
  }
  label_ref *refs = malloc((n ? n : 1) * sizeof *refs);
  if (refs == NULL)
    return RING_ENOMEM;
  uint32_t m = 0, unlabelled = 0;
  for (uint32_t i = 0; i < n; i++) {
    const char *v = ring_table_node_label(t, (uint16_t)i, key);
    if (v)
      refs[m++] = (label_ref){v, i};
  }
  qsort(refs, m, sizeof *refs, cmp_label_ref);
  uint32_t ids = 0;
  for (uint32_t j = 0; j < m; j++) {
    if (j > 0 && strcmp(refs[j].value, refs[j - 1].value) != 0)
      ids++;
    out[refs[j].node] = ids;
  }
  ids = m ? ids + 1 : 0;
  for (uint32_t i = 0; i < n; i++)
    if (ring_table_node_label(t, (uint16_t)i, key) == NULL)
      out[i] = ids + unlabelled++;
  free(refs);
  return (int)ids;
}

/* Renumbers domains so eligible nodes' domains are 0..D-1 (in label order)
 * and the others follow; returns D. `map` has n entries of scratch. */
static uint32_t compact_domains(ring__shares *s, uint32_t *map) {
  const uint32_t n = s->n;
  for (uint32_t i = 0; i < n; i++)
    map[i] = DOMAIN_NONE;
  for (uint32_t i = 0; i < n; i++) /* raw ids are < n: mark eligible ones */
    if (s->eligible[i])
      map[s->dom[i]] = 0;
  uint32_t d = 0;
  for (uint32_t raw = 0; raw < n; raw++)
    if (map[raw] == 0)
      map[raw] = d++; /* assigned in raw (label) order */
  uint32_t next = d;
  for (uint32_t raw = 0; raw < n; raw++)
    if (map[raw] == DOMAIN_NONE)
      map[raw] = next++;
  for (uint32_t i = 0; i < n; i++)
    s->dom[i] = map[s->dom[i]];
  return d;
}

/* ----------------------------------------------------------------- targets */

/* Water-filling: each domain's share of total by weight, none above cap. */
static void domain_shares(const double *weight, uint32_t d, double total, double cap, bool *capped,
                          double *share) {
  for (bool again = true; again;) {
    again = false;
    double left = total, w = 0;
    for (uint32_t i = 0; i < d; i++) {
      if (capped[i])
        left -= cap;
      else
        w += weight[i];
    }
    for (uint32_t i = 0; i < d; i++) {
      share[i] = capped[i] ? cap : left * weight[i] / w;
      if (!capped[i] && share[i] > cap * (1 + 1e-12)) {
        capped[i] = true;
        again = true;
      }
    }
  }
}

/* -------------------------------------------------------------- rounding */

typedef struct round_cand {
  uint32_t node;
  bool whole;      /* the target is a whole number: the floor is exact */
  bool holds_more; /* holds more than the floor today: rounding up saves a move */
  double frac;
} round_cand;

static int cmp_round(const void *a, const void *b) {
  const round_cand *x = a, *y = b;
  if (x->whole != y->whole)
    return x->whole ? 1 : -1;
  if (x->holds_more != y->holds_more)
    return x->holds_more ? -1 : 1;
  if (x->frac != y->frac)
    return x->frac > y->frac ? -1 : 1;
  return (x->node > y->node) - (x->node < y->node);
}

/* Quotas for the nodes in `group` summing to `total`: floors, then +1 for
 * the best candidates whose domain has room (room[d]: token-replicas the
 * domain may still take, at most T in all). Nodes with fractional targets
 * go first, so a whole target is never rounded up while another can be. */
static void apportion(ring__shares *s, const uint32_t *group, uint32_t n_group, uint32_t total,
                      const uint32_t *load, uint32_t *room, round_cand *scratch) {
  uint32_t sum = 0;
  for (uint32_t j = 0; j < n_group; j++) {
    uint32_t i = group[j];
    double fl = floor(s->target[i] + 1e-9), frac = s->target[i] - fl;
    s->quota[i] = (uint32_t)fl;
    sum += s->quota[i];
    room[s->dom[i]] -= room[s->dom[i]] >= s->quota[i] ? s->quota[i] : room[s->dom[i]];
    scratch[j] = (round_cand){i, frac < 1e-9, load && load[i] > s->quota[i], frac};
  }
  qsort(scratch, n_group, sizeof *scratch, cmp_round);
  /* Two passes at most: the second ignores room, a guard against rounding
   * error that exact arithmetic never needs. */
  for (int pass = 0; pass < 2 && sum < total; pass++)
    for (uint32_t j = 0; j < n_group && sum < total; j++) {
      uint32_t i = scratch[j].node, d = s->dom[i];
      if (s->quota[i] > floor(s->target[i] + 1e-9) || (pass == 0 && room[d] == 0))
        continue;
      s->quota[i]++;
      room[d] -= room[d] > 0;
      sum++;
    }
}

/* Sets target and quota of every node: water-filled domain shares, then
 * rounding. Returns RING_OK or RING_ENOMEM. */
static int fill_quotas(ring__shares *s, const ring_table *t, const double *dw, bool *capped,
                       const uint32_t *load, uint32_t *group, round_cand *scratch) {
  const uint32_t T = t->view.tokens, D = s->n_dom;
  double *share = malloc((D ? D : 1) * sizeof *share);
  uint32_t *room = malloc((D ? D : 1) * sizeof *room);
  if (share == NULL || room == NULL) {
    free(share);
    free(room);
    return RING_ENOMEM;
  }
  domain_shares(dw, D, (double)T * t->view.replicas, (double)T, capped, share);
  uint32_t n_cap = 0, m = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    uint32_t d = s->dom[i];
    s->target[i] = s->eligible[i] ? share[d] * t->nodes[i].weight / dw[d] : 0;
    s->quota[i] = 0;
  }
  for (uint32_t d = 0; d < D; d++)
    room[d] = T;
  for (uint32_t d = 0; d < D; d++) { /* a capped domain shares exactly T */
    if (!capped[d])
      continue;
    n_cap++;
    m = 0;
    for (uint32_t i = 0; i < s->n; i++)
      if (s->eligible[i] && s->dom[i] == d)
        group[m++] = i;
    apportion(s, group, m, T, load, room, scratch);
  }
  m = 0;
  for (uint32_t i = 0; i < s->n; i++)
    if (s->eligible[i] && !capped[s->dom[i]])
      group[m++] = i;
  apportion(s, group, m, T * t->view.replicas - T * n_cap, load, room, scratch);
  free(share);
  free(room);
  return RING_OK;
}

/* -------------------------------------------------------------- entry */

void ring__shares_free(ring__shares *s) {
  free(s->dom);
  free(s->target);
  free(s->quota);
  free(s->eligible);
  memset(s, 0, sizeof *s);
}

static int check_rules(const ring__shares *s, const ring_table *t, const char *fd,
                       ring_error *err) {
  uint32_t eligible = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    if (!s->eligible[i])
      continue;
    eligible++;
    if (*fd && ring_table_node_label(t, (uint16_t)i, fd) == NULL)
      return ring__err(err, RING_EPLAN, "node %s has no \"%s\" label", t->nodes[i].id, fd);
  }
  const uint32_t R = t->view.replicas;
  if (eligible < R)
    return ring__err(err, RING_EPLAN, "%u active or joining nodes, R=%u needs %u", eligible, R, R);
  if (s->n_dom < R)
    return ring__err(err, RING_EPLAN,
                     "only %u distinct \"%s\" values among active nodes, R=%u needs %u", s->n_dom,
                     fd, R, R);
  return RING_OK;
}

int ring__shares_compute(const ring_table *t, const char *fd, const uint32_t *load, ring__shares *s,
                         ring_error *err) {
  const uint32_t n = t->n_nodes, n1 = n ? n : 1;
  fd = fd ? fd : "";
  memset(s, 0, sizeof *s);
  s->n = n;
  s->dom = malloc(n1 * sizeof *s->dom);
  s->target = calloc(n1, sizeof *s->target);
  s->quota = calloc(n1, sizeof *s->quota);
  s->eligible = calloc(n1, sizeof *s->eligible);
  uint32_t *scratch = malloc(n1 * sizeof *scratch);
  round_cand *rc = malloc(n1 * sizeof *rc);
  double *dw = calloc(n1, sizeof *dw);
  bool *capped = calloc(n1, sizeof *capped);
  int code = RING_ENOMEM;
  if (!s->dom || !s->target || !s->quota || !s->eligible || !scratch || !rc || !dw || !capped ||
      ring__label_ids(t, fd, s->dom) < 0)
    goto done;
  for (uint32_t i = 0; i < n; i++)
    s->eligible[i] = ring__eligible(t->nodes[i].state);
  s->n_dom = compact_domains(s, scratch);
  if ((code = check_rules(s, t, fd, err)) != RING_OK)
    goto done;
  for (uint32_t i = 0; i < n; i++)
    if (s->eligible[i])
      dw[s->dom[i]] += t->nodes[i].weight;
  code = fill_quotas(s, t, dw, capped, load, scratch, rc);
done:
  free(scratch);
  free(rc);
  free(dw);
  free(capped);
  if (code != RING_OK) {
    ring__shares_free(s);
    if (code == RING_ENOMEM)
      ring__err(err, code, "planner: out of memory");
  }
  return code;
}
