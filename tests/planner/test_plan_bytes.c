/*
 * test_plan_bytes.c: property tests of bytes balance (ring_plan_config
 * .balance = RING_BALANCE_BYTES).
 *
 * Random clusters (2 per zone .. 26 nodes in 2..5 zones, R 2..3, weights 0.5..3) are
 * placed by tokens, given arc sizes drawn uniform, heavy-tailed (Pareto
 * 1.2, capped at 200x the scale) or with half the arcs empty, then changed
 * (nothing, joins, a drain, a node down, a weight change) and planned by
 * bytes. Every plan must pass ring_plan_verify under bytes balance (hard
 * domains at every wave, each serving node within the largest arc of its
 * byte share, moves replaying to the target, moves >= the lower bound),
 * be deterministic and state its nodes off tolerance (ring_plan_verify
 * recounts them).
 * Figures: how often a plan meets its bound exactly, moves over it, the
 * byte spread under each rule, and moves under each rule.
 * RING_PROPERTY_CASES (default 400) and RING_PROPERTY_SEED tune a run.
 */
#include "check_main.h"
#include "ring.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES_MAX 32

typedef struct cluster {
  uint32_t n, zones, T, R;
  char id[NODES_MAX][16], addr[NODES_MAX][32], zone[NODES_MAX][16];
  const char *key[1], *val[NODES_MAX][1];
  double weight[NODES_MAX];
  ring_node_state state[NODES_MAX];
} cluster;

static uint64_t rnd(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double unit(uint64_t *s) { return (double)(rnd(s) >> 11) / 9007199254740992.0; }

static void add_node(cluster *c, uint32_t zone, double weight) {
  uint32_t i = c->n++;
  snprintf(c->id[i], sizeof c->id[i], "n%u", i);
  snprintf(c->addr[i], sizeof c->addr[i], "127.0.0.1:%u", 7000 + i);
  snprintf(c->zone[i], sizeof c->zone[i], "z%u", zone);
  c->val[i][0] = c->zone[i];
  c->weight[i] = weight;
  c->state[i] = RING_NODE_ACTIVE;
}

static void specs(const cluster *c, ring_node_spec *out) {
  for (uint32_t i = 0; i < c->n; i++)
    out[i] =
        (ring_node_spec){c->id[i], c->addr[i], c->key, c->val[i], 1, c->weight[i], c->state[i]};
}

static uint64_t case_seed; /* for messages: the case being run */

static ring_plan *plan(const ring_table *base, const cluster *c, const ring_plan_config *cfg) {
  ring_node_spec s[NODES_MAX];
  specs(c, s);
  ring_plan *p = NULL;
  ring_error err = {0};
  int rc = ring_plan_compute(base, s, c->n, cfg, &p, &err);
  ck_assert_msg(rc == RING_OK, "seed %llu: plan: %s (rc %d)", (unsigned long long)case_seed,
                err.message, rc);
  return p;
}

/* A token-balanced first placement of c, sealed, owned by the caller. */
static ring_table *place(const cluster *c) {
  ring_plan_config cfg = {.cluster = "bytes", .tokens = c->T, .replicas = c->R, .seed = 7};
  cfg.failure_domain = "zone";
  ring_plan *p = plan(NULL, c, &cfg);
  ring_table *t = NULL;
  ck_assert_int_eq(ring_table_clone(ring_plan_target(p), 1, &t), RING_OK);
  ring_error err = {0};
  ck_assert_int_eq(ring_table_seal(t, &err), RING_OK);
  ring_plan_free(p);
  return t;
}

static void draw_sizes(uint64_t *s, uint32_t T, uint64_t *sizes) {
  uint32_t kind = (uint32_t)(rnd(s) % 3);
  for (uint32_t t = 0; t < T; t++) {
    double u = unit(s), v;
    if (kind == 0)
      v = 1000 + 1e6 * u;
    else if (kind == 1)
      v = fmin(1e5 * pow(1 - u, -1.0 / 1.2), 2e7); /* Pareto, capped at 200x */
    else
      v = u < 0.5 ? 0 : 1e6 * unit(s);
    sizes[t] = (uint64_t)v;
  }
  sizes[rnd(s) % T] += 1; /* never all empty */
}

static void draw_change(uint64_t *s, cluster *c) {
  switch (rnd(s) % 5) {
  case 0: /* no membership change: rebalance by bytes alone */
    break;
  case 1:
    for (uint32_t k = 1 + (uint32_t)(rnd(s) % 3); k > 0 && c->n < NODES_MAX; k--)
      add_node(c, (uint32_t)(rnd(s) % c->zones), 1.0);
    break;
  case 2:
    c->state[rnd(s) % c->n] = RING_NODE_DRAINING;
    break;
  case 3:
    c->state[rnd(s) % c->n] = RING_NODE_DOWN;
    break;
  default:
    c->weight[rnd(s) % c->n] = 0.5 + 2.5 * unit(s);
    break;
  }
}

/* The widest gap between a serving node's bytes and its share, in units
 * of the largest arc. */
static double spread(const ring_plan *p, const uint64_t *sizes) {
  const ring_table *t = ring_plan_target(p);
  uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t), n = ring_table_node_count(t);
  double held[NODES_MAX] = {0}, one = 0, top = 0, worst = 0;
  for (uint32_t k = 0; k < T; k++) {
    one += (double)sizes[k];
    top = fmax(top, (double)sizes[k]);
    for (uint32_t r = 0; r < R; r++)
      held[ring_table_owner(t, k, r)] += (double)sizes[k];
  }
  for (uint16_t i = 0; i < n; i++) {
    ring_plan_load l;
    ck_assert_int_eq(ring_plan_node_load(p, i, &l), RING_OK);
    if (l.target > 0)
      worst = fmax(worst, fabs(held[i] - l.target * one / T) / top);
  }
  return worst;
}

/* Per node: bytes before and after against the share (RING_PROPERTY_SHOW). */
static void show(const ring_table *base, const ring_plan *p, const uint64_t *sizes) {
  const ring_table *t = ring_plan_target(p);
  uint32_t T = ring_table_tokens(t), R = ring_table_replicas(t), n = ring_table_node_count(t);
  double before[NODES_MAX] = {0}, after[NODES_MAX] = {0}, one = 0, top = 0;
  for (uint32_t k = 0; k < T; k++) {
    one += (double)sizes[k];
    top = fmax(top, (double)sizes[k]);
    for (uint32_t r = 0; r < R; r++) {
      before[ring_table_find_node(t, ring_table_node_id(base, ring_table_owner(base, k, r)))] +=
          (double)sizes[k];
      after[ring_table_owner(t, k, r)] += (double)sizes[k];
    }
  }
  printf("T %u R %u largest %.0f moves %u bound %u\n", T, R, top, ring_plan_move_count(p),
         ring_plan_lower_bound(p));
  for (uint16_t i = 0; i < n; i++) {
    ring_plan_load l;
    ring_plan_node_load(p, i, &l);
    printf("  %-4s %-9s %s w %.2f share %12.0f before %12.0f after %12.0f (%+.2f arcs)\n",
           ring_table_node_id(t, i), ring_node_state_name(ring_table_node_state(t, i)),
           ring_table_node_label(t, i, "zone"), ring_table_node_weight(t, i), l.target * one / T,
           before[i], after[i], (after[i] - l.target * one / T) / top);
  }
}

static void same_plan(const ring_plan *a, const ring_plan *b) {
  ck_assert_uint_eq(ring_plan_move_count(a), ring_plan_move_count(b));
  ck_assert(memcmp(ring_plan_moves(a), ring_plan_moves(b),
                   ring_plan_move_count(a) * sizeof(ring_move)) == 0);
}

typedef struct tally {
  uint32_t cases, refused, exact, extra, worst_extra, worst_bound;
  uint64_t worst_seed, moves_bytes, moves_tokens;
  double worst_spread, token_spread_sum, byte_spread_sum;
} tally;

static void run_case(uint64_t seed, tally *tl) {
  uint64_t s = case_seed = seed;
  cluster c = {.key = {"zone"}};
  c.zones = 2 + (uint32_t)(rnd(&s) % 4);
  c.R = c.zones >= 3 && rnd(&s) % 2 ? 3 : 2;
  c.T = 256u << (rnd(&s) % 3);
  uint32_t n = 2 * c.zones + (uint32_t)(rnd(&s) % 17); /* a down node leaves R zones */
  static const double weights[] = {1, 1, 1, 2, 0.5, 3};
  for (uint32_t i = 0; i < n; i++)
    add_node(&c, i % c.zones, weights[rnd(&s) % 6]);
  ring_table *base = place(&c);
  uint64_t *sizes = malloc(c.T * sizeof *sizes);
  ck_assert_ptr_nonnull(sizes);
  draw_sizes(&s, c.T, sizes);
  draw_change(&s, &c);
  ring_plan_config cfg = {.failure_domain = "zone", .arc_bytes = sizes};
  ring_plan *tokens = plan(base, &c, &cfg);
  cfg.balance = RING_BALANCE_BYTES;
  ring_node_spec sp[NODES_MAX];
  specs(&c, sp);
  ring_plan *bytes = NULL;
  ring_error err = {0};
  int rc = ring_plan_compute(base, sp, c.n, &cfg, &bytes, &err);
  if (rc == RING_EPLAN) { /* a clean refusal that names the node; counted */
    ck_assert_ptr_nonnull(strstr(err.message, "balance bytes: node "));
    if (getenv("RING_PROPERTY_SHOW"))
      printf("seed %llu refused: %s\n", (unsigned long long)seed, err.message);
    tl->refused++;
    ring_plan_free(tokens);
    ring_table_free(base);
    free(sizes);
    return;
  }
  ck_assert_msg(rc == RING_OK, "seed %llu: %s", (unsigned long long)seed, err.message);
  ring_plan *again = plan(base, &c, &cfg);
  char *report = NULL;
  int bad = ring_plan_verify(base, bytes, &cfg, &report);
  ck_assert_msg(bad == 0, "seed %llu: %d findings:\n%s", (unsigned long long)seed, bad,
                report ? report : "");
  same_plan(bytes, again);
  uint32_t moves = ring_plan_move_count(bytes), lb = ring_plan_lower_bound(bytes);
  uint32_t extra = moves - lb; /* verify checked moves >= lb */
  if (getenv("RING_PROPERTY_SHOW"))
    show(base, bytes, sizes);
  /* The bound is not always reachable (plan_bytes.c): how far plans pass
   * it is a figure (printed below), as the tolerance's aim costs moves. */
  double sb = spread(bytes, sizes), st = spread(tokens, sizes);
  ck_assert_msg(sb <= 1.0 + 1e-9, "seed %llu: spread %.3f arcs", (unsigned long long)seed, sb);
  tl->cases++;
  tl->moves_bytes += moves;
  tl->moves_tokens += ring_plan_move_count(tokens);
  tl->exact += extra == 0;
  tl->extra += extra;
  if (extra > tl->worst_extra) {
    tl->worst_extra = extra;
    tl->worst_seed = seed;
    tl->worst_bound = lb;
  }
  tl->worst_spread = fmax(tl->worst_spread, sb);
  tl->byte_spread_sum += sb;
  tl->token_spread_sum += st;
  free(report);
  ring_plan_free(tokens);
  ring_plan_free(bytes);
  ring_plan_free(again);
  ring_table_free(base);
  free(sizes);
}

START_TEST(random_cases) {
  const char *e = getenv("RING_PROPERTY_CASES"), *sd = getenv("RING_PROPERTY_SEED");
  uint32_t cases = e ? (uint32_t)strtoul(e, NULL, 10) : 400;
  uint64_t seed = sd ? strtoull(sd, NULL, 10) : 0x6279746573ull;
  tally tl = {0};
  for (uint32_t k = 0; k < cases; k++)
    run_case(seed + k * 0x100000001b3ull, &tl);
  printf("bytes balance: %u cases planned, %u refused (EPLAN, named); %u (%.1f%%) at the lower "
         "bound, %u moves over it in all "
         "(worst %u over %u, seed %llu); spread (|bytes - share| / largest arc) worst %.3f, mean "
         "%.3f bytes vs "
         "%.3f tokens balance\n",
         tl.cases, tl.refused, tl.exact, 100.0 * tl.exact / (tl.cases ? tl.cases : 1), tl.extra,
         tl.worst_extra, tl.worst_bound, (unsigned long long)tl.worst_seed, tl.worst_spread,
         tl.byte_spread_sum / (tl.cases ? tl.cases : 1),
         tl.token_spread_sum / (tl.cases ? tl.cases : 1));
  printf("bytes balance: %llu moves in all, token balance %llu on the same inputs\n",
         (unsigned long long)tl.moves_bytes, (unsigned long long)tl.moves_tokens);
  ck_assert_uint_le(tl.refused * 50, tl.cases + tl.refused); /* at most 2% refused */
}
END_TEST

/* Four equal nodes, one arc 10x the others: its holders take fewer tokens,
 * so the bytes even out where token balance leaves them 9 arcs apart. */
START_TEST(big_arc_counts_ten_times) {
  cluster c = {.key = {"zone"}, .zones = 4, .R = 1, .T = 256};
  for (uint32_t i = 0; i < 4; i++)
    add_node(&c, i, 1.0);
  ring_table *base = place(&c);
  uint64_t sizes[256];
  uint32_t big = 0;
  for (uint32_t t = 0; t < 256; t++) /* node 0's first eight arcs are 10x */
    sizes[t] = ring_table_owner(base, t, 0) == 0 && big++ < 8 ? 10000 : 1000;
  ck_assert_uint_eq(ring_table_node_replicas(base, 0), 64);
  ring_plan_config cfg = {
      .failure_domain = "zone", .arc_bytes = sizes, .balance = RING_BALANCE_BYTES};
  ring_plan *p = plan(base, &c, &cfg);
  char *rep = NULL;
  ck_assert_msg(ring_plan_verify(base, p, &cfg, &rep) == 0, "%s", rep ? rep : "");
  ck_assert(spread(p, sizes) <= 1.0);
  /* node 0 held 136,000 bytes against a share of 82,000 +- 10,000: it
   * sheds at least four 10x arcs' worth, and holds fewer tokens now */
  ck_assert_uint_lt(ring_table_node_replicas(ring_plan_target(p), 0), 64);
  ck_assert_uint_ge(ring_plan_move_count(p), ring_plan_lower_bound(p));
  ck_assert_uint_ge(ring_plan_lower_bound(p), 5);
  /* bytes: node 0 sheds at least 136,000 - (82,000 + its aim 3,280), and
   * the moves carry at least the bound */
  ck_assert_uint_ge(ring_plan_bytes_bound(p), 50720);
  ck_assert_uint_le(ring_plan_bytes_bound(p), ring_plan_bytes(p));
  /* the same plan verified against sizes a tenth as large (so every share
   * and band shrinks alike): only the bytes its moves carry fall short */
  uint64_t tenth[256];
  for (uint32_t t = 0; t < 256; t++)
    tenth[t] = sizes[t] / 10;
  ring_plan_config small = cfg;
  small.balance_sizes = tenth;
  ck_assert_int_eq(ring_plan_verify(base, p, &small, &rep), 1);
  ck_assert_ptr_nonnull(strstr(rep, "below the bytes bound"));
  free(rep);
  ring_plan_config tok = {.failure_domain = "zone"};
  ring_plan *q = plan(base, &c, &tok); /* already token-balanced: nothing moves */
  ck_assert_uint_eq(ring_plan_move_count(q), 0);
  ck_assert_int_eq(ring_table_verify_bytes(ring_plan_target(p), NULL, sizes, NULL), 0);
  ck_assert_int_eq(ring_table_verify_bytes(base, NULL, sizes, NULL), 4); /* 0 over, 3 under */
  ring_plan_free(p);
  ring_plan_free(q);
  ring_table_free(base);
}
END_TEST

START_TEST(refusals) {
  cluster c = {.key = {"zone"}, .zones = 3, .R = 2, .T = 256};
  for (uint32_t i = 0; i < 6; i++)
    add_node(&c, i % 3, 1.0);
  ring_node_spec s[NODES_MAX];
  specs(&c, s);
  ring_plan *p = NULL;
  ring_error err = {0};
  ring_plan_config first = {
      .cluster = "x", .tokens = 256, .replicas = 2, .balance = RING_BALANCE_BYTES};
  ck_assert_int_eq(ring_plan_compute(NULL, s, c.n, &first, &p, &err), RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "first placement"));
  ring_table *base = place(&c);
  ring_plan_config none = {.failure_domain = "zone", .balance = RING_BALANCE_BYTES};
  ck_assert_int_eq(ring_plan_compute(base, s, c.n, &none, &p, &err), RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "no arc sizes"));
  uint64_t sizes[256] = {0};
  none.arc_bytes = sizes;
  ck_assert_int_eq(ring_plan_compute(base, s, c.n, &none, &p, &err), RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "every arc is empty"));
  sizes[3] = 1ull << 48;
  ck_assert_int_eq(ring_plan_compute(base, s, c.n, &none, &p, &err), RING_EINVAL);
  ck_assert_int_eq(ring_table_verify_bytes(base, NULL, sizes, NULL), RING_EINVAL);
  ck_assert_int_eq(ring_table_verify_bytes(base, NULL, NULL, NULL), RING_EINVAL);
  none.balance = (ring_balance)7;
  ck_assert_int_eq(ring_plan_compute(base, s, c.n, &none, &p, &err), RING_EINVAL);
  ring_table_free(base);
}
END_TEST

int main(void) {
  Suite *s = suite_create("plan_bytes");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, random_cases);
  tcase_add_test(tc, big_arc_counts_ten_times);
  tcase_add_test(tc, refusals);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
