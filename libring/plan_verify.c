/*
 * plan_verify.c: independent checks of tables and plans, used by the tests
 * and by `ringctl verify`. They recompute everything from the table and
 * the moves; the only planner code they share is the target arithmetic
 * (plan_quota.c), which the tests check on its own.
 */
#include "plan_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_LINES_MAX 100

typedef struct findings {
  ring__sbuf out;
  int count;
  uint32_t off_tolerance; /* bytes balance: serving nodes outside the objective */
} findings;

static void finding(findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void finding(findings *f, const char *fmt, ...) {
  if (f->count++ >= REPORT_LINES_MAX)
    return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  ring__sb_printf(&f->out, "%s\n", line);
}

/* Hands the report to the caller (or frees it) and returns the count. */
static int finish(findings *f, char **report) {
  if (f->out.oom) {
    free(f->out.p);
    return RING_ENOMEM;
  }
  if (report)
    *report = f->count ? f->out.p : (free(f->out.p), NULL);
  else
    free(f->out.p);
  return f->count;
}

/* ------------------------------------------------------------------ table */

static void check_domains(const ring_table *t, const ring__shares *sh, findings *f) {
  const uint32_t R = t->view.replicas;
  for (uint32_t tok = 0; tok < t->view.tokens; tok++) {
    const uint16_t *o = &t->owners[(size_t)tok * R];
    for (uint32_t r = 1; r < R; r++)
      for (uint32_t q = 0; q < r; q++)
        if (sh->dom[o[q]] == sh->dom[o[r]])
          finding(f, "token %u: %s and %s share %s %s", tok, t->nodes[o[q]].id, t->nodes[o[r]].id,
                  t->failure_domain, ring_table_node_label(t, o[q], t->failure_domain));
  }
}

/* Nodes that give everything up must hold nothing, whatever else fails. */
static void check_leavers(const ring_table *t, findings *f) {
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const ring__node *n = &t->nodes[i];
    if (!ring__eligible(n->state) && n->replicas > 0)
      finding(f, "node %s is %s but owns %u token-replicas", n->id, ring_node_state_name(n->state),
              n->replicas);
  }
}

static void check_balance(const ring_table *t, const ring__shares *sh, findings *f) {
  for (uint32_t i = 0; i < t->n_nodes; i++) {
    const ring__node *n = &t->nodes[i];
    if (sh->eligible[i] && fabs((double)n->replicas - sh->target[i]) >= 1.0 - 1e-9)
      finding(f, "node %s owns %u token-replicas, target %.3f", n->id, n->replicas, sh->target[i]);
  }
}

void ring__bytes_held(const uint16_t *owners, uint32_t T, uint32_t R, uint32_t n,
                      const uint64_t *sizes, const double *tol, double *held, double *small) {
  memset(held, 0, n * sizeof *held);
  memset(small, 0, n * sizeof *small);
  for (uint32_t tok = 0; tok < T; tok++)
    for (uint32_t r = 0; r < R; r++) {
      uint16_t o = owners[(size_t)tok * R + r];
      held[o] += (double)sizes[tok];
      small[o] += (double)sizes[tok] <= tol[o] ? (double)sizes[tok] : 0;
    }
}

void ring__bytes_targets(const uint16_t *owners, uint32_t T, uint32_t R, const ring__shares *sh,
                         const uint64_t *sizes, double *want, double *tol, double *held,
                         double *small) {
  const uint32_t n = sh->n;
  double one = 0, pinned = 0, free_target = 0, top = 0;
  for (uint32_t tok = 0; tok < T; tok++) {
    one += (double)sizes[tok];
    top = fmax(top, (double)sizes[tok]);
  }
  memset(small, 0, n * sizeof *small); /* first: each node's largest arc */
  for (size_t k = 0; k < (size_t)T * R; k++)
    small[owners[k]] = fmax(small[owners[k]], (double)sizes[k / R]);
  for (uint32_t i = 0; i < n; i++) {
    want[i] = sh->target[i] * one / T;
    held[i] = sh->eligible[i] && small[i] > want[i] * (1 + RING_BALANCE_TOLERANCE) ? small[i] : 0;
    pinned += held[i];
    free_target += sh->eligible[i] && held[i] == 0 ? sh->target[i] : 0;
  }
  double rest = one * R - pinned;
  for (uint32_t i = 0; i < n; i++) {
    if (pinned > 0 && sh->eligible[i])
      want[i] = held[i] > 0                   ? held[i]
                : free_target > 0 && rest > 0 ? sh->target[i] * rest / free_target
                                              : want[i];
    tol[i] = fmin(RING_BALANCE_TOLERANCE * want[i], top);
  }
  ring__bytes_held(owners, T, R, n, sizes, tol, held, small);
}

/* Bytes balance: each serving node within the largest arc of its target
 * (ring__bytes_targets: its weighted share of one replica of every token
 * times R, the shares scaled from T token-replicas per replica set to
 * bytes, as plan_bytes.c says, or the arc it is pinned at): the floor. Nodes outside the objective
 * (RING_BALANCE_TOLERANCE, plan_int.h) are counted into f->off_tolerance (against
 * ring__bytes_targets), which a plan states. */
static void check_bytes(const ring_table *t, const ring__shares *sh, const uint64_t *sizes,
                        findings *f) {
  const uint32_t T = t->view.tokens, n = t->n_nodes;
  double limit = 0, *held = calloc(4 * (size_t)n + 1, sizeof *held);
  if (held == NULL) {
    f->out.oom = true;
    return;
  }
  double *small = held + n, *tol = held + 2 * (size_t)n, *aim = held + 3 * (size_t)n;
  for (uint32_t tok = 0; tok < T; tok++)
    limit = (double)sizes[tok] > limit ? (double)sizes[tok] : limit;
  ring__bytes_targets(t->owners, T, t->view.replicas, sh, sizes, aim, tol, held, small);
  for (uint32_t i = 0; i < n; i++) {
    double want = aim[i];
    if (sh->eligible[i] && (held[i] - want > limit || want - held[i] > limit))
      finding(f, "node %s holds %.0f bytes, its target is %.0f +- %.0f (the largest arc)",
              t->nodes[i].id, held[i], want, limit);
    f->off_tolerance += sh->eligible[i] && ring__bytes_off(aim[i], tol[i], held[i], small[i]);
  }
  free(held);
}

/* What verify_table holds node loads to. */
typedef enum balance_check { CHECK_TOKENS, CHECK_BYTES, CHECK_NONE } balance_check;

static int verify_table(const ring_table *t, const char *fd, balance_check bc,
                        const uint64_t *sizes, findings *f) {
  ring_table *copy = NULL; /* shares are computed under the level asked for */
  if (fd && strcmp(fd, t->failure_domain) != 0) {
    if (ring_table_clone(t, t->version, &copy) != RING_OK)
      return RING_ENOMEM;
    strcpy(copy->failure_domain, fd);
    ring__table_freeze(copy);
    t = copy;
  }
  ring__shares sh;
  ring_error err;
  check_leavers(t, f);
  int rc = ring__shares_compute(t, t->failure_domain, NULL, &sh, &err);
  if (rc == RING_EPLAN) {
    finding(f, "%s", err.message);
  } else if (rc == RING_OK) {
    if (*t->failure_domain)
      check_domains(t, &sh, f);
    if (bc == CHECK_BYTES)
      check_bytes(t, &sh, sizes, f);
    else if (bc == CHECK_TOKENS)
      check_balance(t, &sh, f);
    ring__shares_free(&sh);
  }
  ring_table_free(copy);
  return rc == RING_ENOMEM ? rc : RING_OK;
}

static int table_report(const ring_table *t, const char *fd, balance_check bc,
                        const uint64_t *sizes, char **report) {
  if (t == NULL || !t->sealed || (fd && *fd && !ring_id_valid(fd)))
    return RING_EINVAL;
  for (uint32_t tok = 0; sizes && tok < t->view.tokens; tok++)
    if (sizes[tok] >= 1ull << 48)
      return RING_EINVAL;
  findings f = {{0}, 0, 0};
  int rc = verify_table(t, fd, bc, sizes, &f);
  if (rc != RING_OK) {
    free(f.out.p);
    return rc;
  }
  return finish(&f, report);
}

int ring_table_verify(const ring_table *t, const char *failure_domain, char **report) {
  return table_report(t, failure_domain, CHECK_TOKENS, NULL, report);
}

int ring_table_verify_rules(const ring_table *t, const char *failure_domain, char **report) {
  return table_report(t, failure_domain, CHECK_NONE, NULL, report);
}

int ring_table_verify_bytes(const ring_table *t, const char *failure_domain, const uint64_t *sizes,
                            char **report) {
  return sizes ? table_report(t, failure_domain, CHECK_BYTES, sizes, report) : RING_EINVAL;
}

/* ------------------------------------------------------------------- plan */

typedef struct replay {
  const ring_table *target;
  const ring_plan_config *cfg;
  uint32_t R;
  uint16_t *work;       /* base owners in target indexes, moves applied so far */
  uint16_t *base;       /* base owners in target indexes */
  uint32_t *dom;        /* target nodes' hard domains (label ids) */
  uint32_t *wave_token; /* per token: 1 + the last wave that moved it */
  uint32_t *node_use;   /* per node: moves in the current wave */
  uint32_t *dom_use;    /* per domain: moves in the current wave */
} replay;

static bool base_clash(const replay *rp, uint32_t tok) {
  const uint16_t *o = &rp->base[(size_t)tok * rp->R];
  for (uint32_t r = 1; r < rp->R; r++)
    for (uint32_t q = 0; q < r; q++)
      if (rp->dom[o[q]] == rp->dom[o[r]])
        return true;
  return false;
}

static void check_source(const replay *rp, const ring_move *m, findings *f) {
  const ring_table *t = rp->target;
  const uint16_t *o = &rp->base[(size_t)m->token * rp->R];
  bool from_alive = ring__alive(t->nodes[m->from].state), live_other = false;
  bool source_ok = m->source == m->from && from_alive;
  for (uint32_t q = 0; q < rp->R; q++) {
    if (q == m->slot || !ring__alive(t->nodes[o[q]].state))
      continue;
    live_other = true;
    source_ok |= !from_alive && o[q] == m->source;
  }
  if (m->source == RING_NODE_NONE ? from_alive || live_other : !source_ok)
    finding(f, "move token %u slot %u: source %s is not a live holder of the data", m->token,
            m->slot, m->source == RING_NODE_NONE ? "none" : t->nodes[m->source].id);
}

/* Counts the move against the wave's limits. */
static void check_limits(replay *rp, const ring_move *m, uint32_t wave_moves, findings *f) {
  const ring_plan_config *c = rp->cfg;
  uint16_t nodes[2] = {m->to, m->source};
  uint32_t k = m->source == RING_NODE_NONE ? 1 : 2;
  for (uint32_t i = 0; i < k; i++)
    if (++rp->node_use[nodes[i]] > c->max_moves_per_node && c->max_moves_per_node)
      finding(f, "wave %u: node %s in more than %u moves", m->wave, rp->target->nodes[nodes[i]].id,
              c->max_moves_per_node);
  uint32_t d0 = rp->dom[nodes[0]], d1 = k > 1 ? rp->dom[nodes[1]] : d0;
  if (++rp->dom_use[d0] > c->max_moves_per_domain && c->max_moves_per_domain)
    finding(f, "wave %u: a domain in more than %u moves", m->wave, c->max_moves_per_domain);
  if (d1 != d0 && ++rp->dom_use[d1] > c->max_moves_per_domain && c->max_moves_per_domain)
    finding(f, "wave %u: a domain in more than %u moves", m->wave, c->max_moves_per_domain);
  if (c->max_moves_per_wave && wave_moves > c->max_moves_per_wave)
    finding(f, "wave %u: more than %u moves", m->wave, c->max_moves_per_wave);
}

/* Whether neither node is leaving: a leaving owner's replica takes no part
 * in the domain rule while its own move is in flight (see plan_assign.c). */
static bool both_stay(const replay *rp, uint16_t a, uint16_t b) {
  return ring__eligible(rp->target->nodes[a].state) && ring__eligible(rp->target->nodes[b].state);
}

/* Owners distinct and, unless the base already broke it, the domains of
 * owners that stay distinct. */
static void check_token_state(const replay *rp, uint32_t tok, uint32_t wave, findings *f) {
  const uint16_t *w = &rp->work[(size_t)tok * rp->R];
  bool domains = *rp->target->failure_domain && !base_clash(rp, tok);
  for (uint32_t r = 1; r < rp->R; r++)
    for (uint32_t q = 0; q < r; q++)
      if (w[q] == w[r] || (domains && both_stay(rp, w[q], w[r]) && rp->dom[w[q]] == rp->dom[w[r]]))
        finding(f, "after wave %u: token %u slots %u and %u share a %s", wave, tok, q, r,
                w[q] == w[r] ? "node" : "domain");
}

static void replay_wave(replay *rp, const ring_move *m, uint32_t n, findings *f) {
  const uint32_t nodes = rp->target->n_nodes;
  memset(rp->node_use, 0, nodes * sizeof *rp->node_use);
  memset(rp->dom_use, 0, nodes * sizeof *rp->dom_use);
  for (uint32_t i = 0; i < n; i++) {
    size_t s = (size_t)m[i].token * rp->R + m[i].slot;
    if (m[i].slot >= rp->R || m[i].token >= rp->target->view.tokens) {
      finding(f, "move %u: token %u slot %u out of range", i, m[i].token, m[i].slot);
      continue;
    }
    if (rp->wave_token[m[i].token] > m[i].wave)
      finding(f, "wave %u: token %u moves twice", m[i].wave, m[i].token);
    rp->wave_token[m[i].token] = m[i].wave + 1;
    if (rp->work[s] != m[i].from)
      finding(f, "move token %u slot %u: from is not the owner", m[i].token, m[i].slot);
    check_source(rp, &m[i], f);
    check_limits(rp, &m[i], i + 1, f);
    rp->work[s] = m[i].to;
  }
  for (uint32_t i = 0; i < n; i++)
    if (m[i].token < rp->target->view.tokens)
      check_token_state(rp, m[i].token, m[i].wave, f);
}

static int replay_init(replay *rp, const ring_table *base, const ring_plan *p,
                       const ring_plan_config *cfg, findings *f) {
  const ring_table *t = p->target;
  const size_t S = (size_t)t->view.tokens * t->view.replicas;
  const uint32_t n1 = t->n_nodes ? t->n_nodes : 1;
  *rp = (replay){t,
                 cfg,
                 t->view.replicas,
                 malloc(S * sizeof *rp->work),
                 malloc(S * sizeof *rp->base),
                 malloc(n1 * sizeof *rp->dom),
                 calloc(t->view.tokens, sizeof *rp->wave_token),
                 malloc(n1 * sizeof(uint32_t)),
                 malloc(n1 * sizeof(uint32_t))};
  if (!rp->work || !rp->base || !rp->dom || !rp->wave_token || !rp->node_use || !rp->dom_use ||
      ring__label_ids(t, t->failure_domain, rp->dom) < 0)
    return RING_ENOMEM;
  for (size_t s = 0; s < S; s++) {
    int idx = ring_table_find_node(t, base->nodes[base->owners[s]].id);
    if (idx < 0) {
      finding(f, "base owner %s of token %zu is missing from the target",
              base->nodes[base->owners[s]].id, s / t->view.replicas);
      idx = 0;
    }
    rp->work[s] = rp->base[s] = (uint16_t)idx;
  }
  return RING_OK;
}

static void replay_free(replay *rp) {
  free(rp->work);
  free(rp->base);
  free(rp->dom);
  free(rp->wave_token);
  free(rp->node_use);
  free(rp->dom_use);
}

static void verify_moves(replay *rp, const ring_plan *p, findings *f) {
  for (uint32_t i = 0, start = 0; i <= p->n_moves; i++) {
    if (i < p->n_moves && p->moves[i].wave >= p->n_waves)
      finding(f, "move %u: wave %u of %u", i, p->moves[i].wave, p->n_waves);
    if (i > 0 && i < p->n_moves && p->moves[i].wave < p->moves[i - 1].wave)
      finding(f, "moves are not in wave order at %u", i);
    if (i == p->n_moves || (i > start && p->moves[i].wave != p->moves[start].wave)) {
      replay_wave(rp, &p->moves[start], i - start, f);
      start = i;
    }
  }
  const ring_table *t = p->target;
  const size_t S = (size_t)t->view.tokens * t->view.replicas;
  for (size_t s = 0; s < S; s++)
    if (rp->work[s] != t->owners[s]) {
      finding(f, "token %zu slot %zu: the moves leave %s, the target says %s", s / rp->R, s % rp->R,
              t->nodes[rp->work[s]].id, t->nodes[t->owners[s]].id);
      break;
    }
  if (p->n_moves < p->lower_bound)
    finding(f, "%u moves, below the lower bound %u", p->n_moves, p->lower_bound);
}

/* Bytes balance: the moves carry at least the bytes bound the plan states
 * (ring_plan_bytes_bound), in the sizes it weighed. */
static void check_bytes_bound(const ring_plan *p, const uint64_t *sizes, findings *f) {
  uint64_t moved = 0;
  for (uint32_t k = 0; k < p->n_moves; k++)
    moved += sizes[p->moves[k].token];
  if (moved < p->bytes_bound)
    finding(f, "the moves carry %llu bytes, below the bytes bound %llu", (unsigned long long)moved,
            (unsigned long long)p->bytes_bound);
}

int ring_plan_verify(const ring_table *base, const ring_plan *p, const ring_plan_config *cfg,
                     char **report) {
  static const ring_plan_config none;
  if (p == NULL || (base && !base->sealed))
    return RING_EINVAL;
  const uint64_t *sizes = NULL;
  if (cfg && cfg->balance == RING_BALANCE_BYTES)
    sizes = cfg->balance_sizes ? cfg->balance_sizes : cfg->arc_bytes;
  if (cfg && cfg->balance == RING_BALANCE_BYTES && sizes == NULL)
    return RING_EINVAL;
  findings f = {{0}, 0, 0};
  int rc = verify_table(p->target, NULL, sizes ? CHECK_BYTES : CHECK_TOKENS, sizes, &f);
  if (rc == RING_OK && sizes && f.off_tolerance != p->off_tolerance)
    finding(&f, "the plan states %u nodes off the bytes tolerance, the target has %u",
            p->off_tolerance, f.off_tolerance);
  replay rp = {0};
  if (rc == RING_OK && base) {
    if (base->view.tokens != p->target->view.tokens ||
        base->view.replicas != p->target->view.replicas)
      finding(&f, "base and target differ in T or R");
    else if ((rc = replay_init(&rp, base, p, cfg ? cfg : &none, &f)) == RING_OK)
      verify_moves(&rp, p, &f);
    if (rc == RING_OK && sizes)
      check_bytes_bound(p, sizes, &f);
  } else if (rc == RING_OK && p->n_moves > 0) {
    finding(&f, "%u moves without a base table", p->n_moves);
  }
  replay_free(&rp);
  if (rc != RING_OK) {
    free(f.out.p);
    return rc;
  }
  return finish(&f, report);
}
