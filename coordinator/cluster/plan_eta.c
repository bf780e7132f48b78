/*
 * plan_eta.c: how long a plan's data takes to move (cluster.h, "the
 * estimate"), modelled as the coordinator runs it: step by step, each
 * step's set chosen by the run's own chooser (rk_run_choose) under the
 * throttle, and each step lasting until its slowest transfer ends, since
 * the next step starts only after the whole set is done.
 *
 * A step's time is the largest of:
 *   - each receiver's bytes in the step over bytes_per_sec (its fetches
 *     share one limiter);
 *   - each source's bytes in the step over what it can send: it streams at
 *     most moves_per_node arcs at once, each at most at a receiver's rate,
 *     so min(moves_per_node, its receivers in the step) times the rate.
 * The node whose bound takes the most time over all steps bounds the ETA.
 * Not modelled: the time a step's barrier (acks, progress) takes, and the
 * disk; both are small next to a byte-limited transfer.
 */
#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-node tallies of one step, and of the whole run (spent). */
typedef struct tally {
  uint64_t *in, *out; /* bytes of the step into / out of each node */
  uint32_t *fan;      /* receivers a source serves in the step */
  uint16_t *last;     /* the last receiver counted in fan, per source */
  uint64_t *spent;    /* ms each node bounded over the run: [i] receiving, [nodes + i] sending */
} tally;

static uint64_t ms_at(uint64_t bytes, uint64_t rate) { return (bytes * 1000u + rate - 1) / rate; }

/* A step's time (ms), charged to the node whose bound it is. */
static uint64_t step_ms(const tally *y, uint32_t nodes, const rk_throttle *th) {
  uint64_t most = 0, rate = th->bytes_per_sec;
  uint32_t who = 0;
  for (uint32_t i = 0; i < nodes; i++) {
    uint32_t par = y->fan[i];
    if (th->moves_per_node && par > th->moves_per_node)
      par = th->moves_per_node;
    uint64_t r = ms_at(y->in[i], rate), s = par ? ms_at(y->out[i], rate * par) : 0;
    if (r > most)
      most = r, who = i;
    if (s > most)
      most = s, who = nodes + i;
  }
  y->spent[who] += most;
  return most;
}

/* Tallies the moves in pick, then clears the step's counters. */
static uint64_t run_step(const ring_plan *p, const uint64_t *arc, const uint8_t *pick,
                         const rk_throttle *th, tally *y) {
  uint32_t nodes = ring_table_node_count(ring_plan_target(p));
  const ring_move *m = ring_plan_moves(p);
  for (uint32_t i = 0; i < ring_plan_move_count(p); i++) {
    if (!rk_bit(pick, i))
      continue;
    if (m[i].to < nodes)
      y->in[m[i].to] += arc[m[i].token];
    uint16_t s = m[i].source != RING_NODE_NONE ? m[i].source : m[i].from;
    if (s < nodes) { /* a source's receivers: counted once each, as moves come by receiver */
      y->out[s] += arc[m[i].token];
      if (y->last[s] != m[i].to)
        y->fan[s]++, y->last[s] = m[i].to;
    }
  }
  uint64_t ms = step_ms(y, nodes, th);
  memset(y->in, 0, nodes * sizeof *y->in);
  memset(y->out, 0, nodes * sizeof *y->out);
  memset(y->fan, 0, nodes * sizeof *y->fan);
  memset(y->last, 0xff, nodes * sizeof *y->last);
  return ms;
}

static int tally_new(uint32_t nodes, tally *y) {
  y->in = calloc(nodes + 1u, sizeof *y->in);
  y->out = calloc(nodes + 1u, sizeof *y->out);
  y->fan = calloc(nodes + 1u, sizeof *y->fan);
  y->last = malloc((nodes + 1u) * sizeof *y->last);
  y->spent = calloc(2u * nodes + 1u, sizeof *y->spent);
  if (y->last != NULL)
    memset(y->last, 0xff, (nodes + 1u) * sizeof *y->last);
  return y->in && y->out && y->fan && y->last && y->spent ? RING_OK : RING_ENOMEM;
}

static void tally_free(tally *y) {
  free(y->in), free(y->out), free(y->fan), free(y->last), free(y->spent);
}

/* Runs p's steps to the end; the sum of their times into out. */
static int simulate(const ring_plan *p, const uint64_t *arc, const rk_throttle *th, tally *y,
                    rk_eta *out) {
  uint32_t moves = ring_plan_move_count(p);
  size_t bytes = moves / 8u + 1u;
  uint8_t *done = calloc(bytes, 1), *pick = calloc(bytes, 1);
  if (done == NULL || pick == NULL) {
    free(done), free(pick);
    return RING_ENOMEM;
  }
  for (uint32_t w = rk_run_next_wave(p, done, 0); w < ring_plan_wave_count(p);
       w = rk_run_next_wave(p, done, w)) {
    memset(pick, 0, bytes);
    rk_run_choose(p, done, th, w, pick);
    out->ms += run_step(p, arc, pick, th, y);
    out->steps++;
    for (size_t b = 0; b < bytes; b++)
      done[b] |= pick[b];
  }
  free(done), free(pick);
  return RING_OK;
}

int rk_plan_eta(const ring_plan *p, const uint64_t *arc_bytes, const rk_throttle *th, rk_eta *out) {
  *out = (rk_eta){.bound = RING_NODE_NONE};
  uint32_t nodes = ring_table_node_count(ring_plan_target(p));
  if (th->bytes_per_sec == 0 || arc_bytes == NULL)
    return RING_OK;
  tally y;
  int rc = tally_new(nodes, &y);
  if (rc == RING_OK)
    rc = simulate(p, arc_bytes, th, &y, out);
  uint32_t best = 0;
  for (uint32_t i = 1; rc == RING_OK && i < 2u * nodes; i++)
    best = y.spent[i] > y.spent[best] ? i : best;
  if (rc == RING_OK && out->ms > 0) {
    out->bound = (uint16_t)(best % nodes);
    out->bound_sends = best >= nodes;
    rk_plan_bytes_in(p, arc_bytes, y.in);
    for (uint32_t i = 0; i < nodes; i++) {
      uint64_t ms = ms_at(y.in[i], th->bytes_per_sec);
      out->ideal_ms = ms > out->ideal_ms ? ms : out->ideal_ms;
    }
  }
  tally_free(&y);
  return rc;
}

const char *rk_eta_text(const ring_plan *p, const rk_eta *e, char *buf, size_t cap) {
  if (e->bound == RING_NODE_NONE)
    snprintf(buf, cap, "nothing to move");
  else
    snprintf(buf, cap, "%u step%s; bounded by %s, %s", e->steps, e->steps == 1 ? "" : "s",
             ring_table_node_id(ring_plan_target(p), e->bound),
             e->bound_sends ? "sending" : "receiving");
  return buf;
}
