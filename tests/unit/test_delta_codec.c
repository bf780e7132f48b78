/*
 * test_delta_codec.c: the ringkeeper.delta.v1 codec (libring/delta_codec.c,
 * proto/delta.md): round trips (a named pair, random pairs with dropped,
 * reordered, changed and appended nodes, and the versions a coordinator
 * publishes while executing planner plans wave by wave), the encoder's
 * refusals, a wrong base, and one test per validation error checking the
 * code and that the message names the offending field. A property test
 * holds ring_delta_apply's short seal (only the tokens a delta changes
 * are checked again, replica counts kept from the base) to the full one
 * (ring__table_validate over the whole result, counts recounted) on random
 * and hostile deltas.
 */
#include "ring.h"
#include "delta_int.h"
#include "json_edit.h"
#include "test_cluster.h"
#include "check_main.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* --------------------------------------------------------------- helpers */

static char *encode_table(const ring_table *t, size_t *len) {
  char *json = NULL;
  ck_assert_int_eq(ring_table_encode(t, &json, len), RING_OK);
  return json;
}

/* apply(encode(a, b)) encodes to b's bytes, and re-encoding from a gives
 * the same delta (the encoder is canonical). Returns the delta's size. */
static size_t check_round_trip(const ring_table *a, const ring_table *b) {
  char *delta = NULL, *again = NULL;
  size_t dlen = 0, alen = 0;
  ck_assert_int_eq(ring_delta_encode(a, b, &delta, &dlen), RING_OK);
  ck_assert_uint_eq(strlen(delta), dlen);
  ring_table *c = NULL;
  ring_error err = {0};
  ck_assert_msg(ring_delta_apply(a, delta, dlen, &c, &err) == RING_OK, "%s\n%.400s", err.message,
                delta);
  size_t blen, clen;
  char *bj = encode_table(b, &blen), *cj = encode_table(c, &clen);
  ck_assert_uint_eq(blen, clen);
  ck_assert_msg(memcmp(bj, cj, blen) == 0, "result differs from the target");
  ck_assert_int_eq(ring_delta_encode(a, c, &again, &alen), RING_OK);
  ck_assert_uint_eq(alen, dlen);
  ck_assert(memcmp(again, delta, dlen) == 0);
  free(bj);
  free(cj);
  free(again);
  free(delta);
  ring_table_free(c);
  return dlen;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint32_t below(uint64_t *s, uint32_t n) { return (uint32_t)(splitmix(s) % n); }

/* ----------------------------------------------------- a table as a model */

typedef struct mnode {
  char id[32], addr[32], keys[3][16], values[3][16];
  const char *kp[3], *vp[3];
  uint32_t n_labels;
  double weight;
  ring_node_state state;
} mnode;

typedef struct model {
  uint32_t T, R, n;
  uint64_t version, seed;
  mnode nodes[80];
  uint16_t *owners; /* T*R */
  uint32_t pend[64][3];
  uint32_t n_pend;
} model;

static ring_table *model_build(model *m) {
  ring_table_params p = {"rand", "zone", m->version, m->seed, m->T, m->R};
  ring_table *t;
  ring_error err = {0};
  ck_assert_msg(ring_table_new(&p, &t, &err) == RING_OK, "%s", err.message);
  for (uint32_t i = 0; i < m->n; i++) {
    mnode *n = &m->nodes[i];
    for (uint32_t l = 0; l < n->n_labels; l++)
      n->kp[l] = n->keys[l], n->vp[l] = n->values[l];
    ring_node_spec s = {n->id, n->addr, n->kp, n->vp, n->n_labels, n->weight, n->state};
    ck_assert_msg(ring_table_add_node(t, &s, NULL, &err) == RING_OK, "%s", err.message);
  }
  for (uint32_t tok = 0; tok < m->T; tok++)
    for (uint32_t r = 0; r < m->R; r++)
      ring_table_set_owner(t, tok, r, m->owners[tok * m->R + r]);
  for (uint32_t i = 0; i < m->n_pend; i++)
    ring_table_add_pending(t, m->pend[i][0], m->pend[i][1], (uint16_t)m->pend[i][2]);
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

static void random_node(uint64_t *s, mnode *n, uint32_t serial) {
  static const char *const keys[] = {"zone", "rack", "host"};
  static const double weights[] = {1.0, 0.5, 2.0, 1.5, 0.1, 1e6, 3.25};
  memset(n, 0, sizeof *n);
  snprintf(n->id, sizeof n->id, "node-%u", serial);
  snprintf(n->addr, sizeof n->addr, "10.0.%u.%u:%u", below(s, 256), below(s, 256),
           1 + below(s, 65535));
  n->n_labels = below(s, 4);
  for (uint32_t l = 0; l < n->n_labels; l++) {
    snprintf(n->keys[l], sizeof n->keys[l], "%s", keys[l]);
    snprintf(n->values[l], sizeof n->values[l], "%c%u", "zrh"[l], below(s, 5));
  }
  n->weight = weights[below(s, 7)];
  n->state = (ring_node_state)below(s, 3); /* joining, active, draining */
}

static bool owns(const model *m, uint32_t tok, uint16_t node) {
  for (uint32_t r = 0; r < m->R; r++)
    if (m->owners[tok * m->R + r] == node)
      return true;
  return false;
}

/* A node not owning (or pending on) token tok. */
static uint16_t free_node(uint64_t *s, const model *m, uint32_t tok) {
  for (;;) {
    uint16_t c = (uint16_t)below(s, m->n);
    bool busy = owns(m, tok, c);
    for (uint32_t i = 0; i < m->n_pend && !busy; i++)
      busy = m->pend[i][0] == tok && m->pend[i][2] == c;
    if (!busy)
      return c;
  }
}

static void random_pending(uint64_t *s, model *m) {
  m->n_pend = 0;
  if (m->n <= m->R)
    return;
  uint32_t want = below(s, 6);
  uint32_t tok = below(s, 8);
  for (uint32_t i = 0; i < want && tok < m->T; i++, tok += 1 + below(s, m->T / 4)) {
    uint32_t slot = below(s, m->R);
    m->pend[m->n_pend][0] = tok;
    m->pend[m->n_pend][1] = slot;
    m->pend[m->n_pend][2] = free_node(s, m, tok);
    m->n_pend++;
  }
}

static void random_model(uint64_t *s, model *m, uint32_t *serial) {
  memset(m, 0, sizeof *m);
  m->T = 64u << below(s, 5);
  m->R = 1 + below(s, 4);
  m->n = m->R + below(s, 12);
  m->version = 1 + below(s, 1000);
  m->seed = splitmix(s) >> 11;
  for (uint32_t i = 0; i < m->n; i++)
    random_node(s, &m->nodes[i], (*serial)++);
  m->owners = malloc((size_t)m->T * m->R * sizeof *m->owners);
  for (uint32_t tok = 0; tok < m->T; tok++) {
    uint32_t start = below(s, m->n);
    for (uint32_t r = 0; r < m->R; r++)
      m->owners[tok * m->R + r] = (uint16_t)((start + r) % m->n);
  }
  random_pending(s, m);
}

/* The next version of m: nodes dropped, changed, swapped and appended,
 * owners renumbered, orphaned and random slots reassigned, new pending. */
static void random_successor(uint64_t *s, const model *a, model *b, uint32_t *serial) {
  *b = *a;
  b->owners = malloc((size_t)a->T * a->R * sizeof *b->owners);
  b->version = a->version + 1 + (below(s, 4) == 0 ? below(s, 100) : 0);
  uint16_t map[80];
  b->n = 0;
  for (uint32_t i = 0; i < a->n; i++) {
    if (a->n - i + b->n > a->R && below(s, 6) == 0) {
      map[i] = RING_NODE_NONE; /* dropped */
      continue;
    }
    map[i] = (uint16_t)b->n;
    b->nodes[b->n] = a->nodes[i];
    if (below(s, 5) == 0) /* a changed record, same id */
      b->nodes[b->n].weight = b->nodes[b->n].weight == 1.0 ? 2.0 : 1.0;
    if (below(s, 9) == 0)
      b->nodes[b->n].state = RING_NODE_DOWN;
    b->n++;
  }
  if (b->n >= 2 && below(s, 4) == 0) { /* swap two: not the planner's way, still a delta */
    uint32_t x = below(s, b->n), y = below(s, b->n);
    mnode tmp = b->nodes[x];
    b->nodes[x] = b->nodes[y];
    b->nodes[y] = tmp;
    for (uint32_t i = 0; i < a->n; i++)
      if (map[i] == x || map[i] == y)
        map[i] = (uint16_t)(map[i] == x ? y : x);
  }
  for (uint32_t k = below(s, 4); k > 0 && b->n < 80; k--)
    random_node(s, &b->nodes[b->n++], (*serial)++);
  const uint32_t slots = a->T * a->R;
  for (uint32_t i = 0; i < slots; i++)
    b->owners[i] = map[a->owners[i]];
  b->n_pend = 0;
  for (uint32_t tok = 0; tok < a->T; tok++)
    for (uint32_t r = 0; r < a->R; r++) {
      uint16_t *o = &b->owners[tok * a->R + r];
      if (*o == RING_NODE_NONE || below(s, 20) == 0) {
        *o = RING_NODE_NONE; /* not counted by owns() while choosing */
        *o = free_node(s, b, tok);
      }
    }
  random_pending(s, b);
}

/* ------------------------------------------------------------ round trips */

/* base: T=64 R=3, n0..n3 own (tok+r)%4, n4 pending on two slots, n5
 * removed and idle. next: n5 dropped, n1 reweighted, n6 appended, n4 takes
 * its pending slots over, n6 pending on token 5. */
static ring_table *pair_base(void) {
  ring_table_params p = {"demo", "zone", 7, 42, 64, 3};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  for (int i = 0; i < 6; i++) {
    char id[16], addr[32], zone[16];
    snprintf(id, sizeof id, "n%d", i);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 7101 + i);
    snprintf(zone, sizeof zone, "z%d", i % 3);
    const char *k[] = {"zone"}, *v[] = {zone};
    ring_node_spec s = {id, addr, k, v, 1, 1.0, i == 5 ? RING_NODE_REMOVED : RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  }
  for (uint32_t tok = 0; tok < 64; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(t, tok, r, (uint16_t)((tok + r) % 4));
  ring_table_add_pending(t, 3, 1, 4);
  ring_table_add_pending(t, 9, 2, 4);
  ring_error err;
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

static ring_table *pair_next(const ring_table *base) {
  ring_table_params p = {"demo", "zone", 8, 42, 64, 3};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  for (uint16_t i = 0; i < 7; i++) {
    if (i == 5)
      continue;
    char id[16], addr[32], zone[16];
    snprintf(id, sizeof id, "n%u", i);
    snprintf(addr, sizeof addr, "127.0.0.1:%u", 7101u + i);
    snprintf(zone, sizeof zone, "z%u", i % 3u);
    const char *k[] = {"zone"}, *v[] = {zone};
    ring_node_spec s = {
        id, addr, k, v, 1, i == 1 ? 2.5 : 1.0, i == 6 ? RING_NODE_JOINING : RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  }
  for (uint32_t tok = 0; tok < 64; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(t, tok, r, ring_table_owner(base, tok, r));
  ring_table_set_owner(t, 3, 1, 4);
  ring_table_set_owner(t, 9, 2, 4);
  ring_table_add_pending(t, 5, 0, 5); /* n6 is index 5 now */
  ring_error err;
  ck_assert_msg(ring_table_seal(t, &err) == RING_OK, "%s", err.message);
  return t;
}

static char *pair_delta(size_t *len) {
  ring_table *a = pair_base(), *b = pair_next(a);
  char *json;
  ck_assert_int_eq(ring_delta_encode(a, b, &json, len), RING_OK);
  ring_table_free(a);
  ring_table_free(b);
  return json;
}

START_TEST(round_trip_pair) {
  ring_table *a = pair_base(), *b = pair_next(a);
  check_round_trip(a, b);
  ring_table_free(a);
  ring_table_free(b);
}
END_TEST

START_TEST(encoding_shape) {
  ring_table *a = pair_base(), *b = pair_next(a);
  char *json;
  size_t len;
  ck_assert_int_eq(ring_delta_encode(a, b, &json, &len), RING_OK);
  char want[512];
  snprintf(want, sizeof want,
           "{\"format\":\"ringkeeper.delta.v1\",\"cluster\":\"demo\",\"base_version\":7,"
           "\"version\":8,\"base_checksum\":\"xxh3-64:%016llx\",\"node_count\":6,"
           "\"dropped\":[5],\"nodes\":[[1,{\"id\":\"n1\",\"addr\":\"127.0.0.1:7102\","
           "\"labels\":{\"zone\":\"z1\"},\"weight\":2.5,\"state\":\"active\"}],"
           "[5,{\"id\":\"n6\",\"addr\":\"127.0.0.1:7107\",\"labels\":{\"zone\":\"z0\"},"
           "\"weight\":1.0,\"state\":\"joining\"}]],\"owners\":\"",
           (unsigned long long)XXH3_64bits(ring_table_view(a)->owners, 64 * 3 * 2));
  ck_assert_msg(strncmp(json, want, strlen(want)) == 0, "%s", json);
  /* two records: slot 3*3+1 -> node 4, slot 9*3+2 -> node 4 */
  const uint8_t raw[] = {10, 0, 0, 0, 4, 0, 29, 0, 0, 0, 4, 0};
  char b64[17], tail[128];
  ring__base64_encode(raw, sizeof raw, b64);
  snprintf(tail, sizeof tail, "%s\",\"pending\":[[5,0,5]],\"checksum\":\"xxh3-64:%016llx\"}", b64,
           (unsigned long long)XXH3_64bits(ring_table_view(b)->owners, 64 * 3 * 2));
  ck_assert_str_eq(json + strlen(want), tail);
  free(json);
  ring_table_free(a);
  ring_table_free(b);
}
END_TEST

START_TEST(round_trip_random) {
  uint64_t s = 0x5eed0000u + (uint64_t)_i;
  uint32_t serial = 0;
  model a, b;
  random_model(&s, &a, &serial);
  ring_table *ta = model_build(&a);
  for (int step = 0; step < 4; step++) {
    random_successor(&s, &a, &b, &serial);
    ring_table *tb = model_build(&b);
    check_round_trip(ta, tb);
    free(a.owners);
    ring_table_free(ta);
    a = b;
    ta = tb;
  }
  free(a.owners);
  ring_table_free(ta);
}
END_TEST

START_TEST(round_trip_identical_nodes_and_owners) {
  ring_table *a = pair_base(), *b;
  ck_assert_int_eq(ring_table_clone(a, 100, &b), RING_OK);
  ck_assert_int_eq(ring_table_seal(b, NULL), RING_OK);
  size_t n = check_round_trip(a, b);
  char *json;
  ck_assert_int_eq(ring_delta_encode(a, b, &json, NULL), RING_OK);
  ck_assert_ptr_nonnull(strstr(json, "\"dropped\":[],\"nodes\":[],\"owners\":\"\","));
  ck_assert_uint_lt(n, 300);
  free(json);
  ring_table_free(a);
  ring_table_free(b);
}
END_TEST

/* -------------------------------------------- versions a coordinator makes */

/* Publishes the versions of executing plan p from cur, wave by wave: one
 * table with the wave's pending owners, then its cutover. Each consecutive
 * pair must round-trip, and a delta must be far smaller than the table when
 * few slots move. *cur becomes the last table; *v the last version. */
static void execute_plan(ring_table **cur, const ring_plan *p, uint64_t *v) {
  const ring_table *target = ring_plan_target(p);
  const uint32_t T = ring_table_tokens(target), R = ring_table_replicas(target);
  uint16_t *state = malloc((size_t)T * R * sizeof *state);
  for (uint32_t tok = 0; tok < T; tok++)
    for (uint32_t r = 0; r < R; r++) { /* current owners in the target's numbering */
      int i =
          ring_table_find_node(target, ring_table_node_id(*cur, ring_table_owner(*cur, tok, r)));
      ck_assert_int_ge(i, 0);
      state[tok * R + r] = (uint16_t)i;
    }
  const ring_move *mv = ring_plan_moves(p);
  const uint32_t n_moves = ring_plan_move_count(p), waves = ring_plan_wave_count(p);
  for (uint32_t w = 0; w < (waves ? 2 * waves : 1); w++) {
    ring_table *next;
    ck_assert_int_eq(ring_table_clone(target, ++*v, &next), RING_OK);
    ring_table_clear_pending(next);
    for (uint32_t m = 0; m < n_moves; m++)
      if (mv[m].wave == w / 2 && w % 2 == 1) /* cutover */
        state[mv[m].token * R + mv[m].slot] = mv[m].to;
    for (uint32_t s = 0; s < T * R; s++)
      ring_table_set_owner(next, s / R, s % R, state[s]);
    for (uint32_t m = 0; m < n_moves; m++)
      if (mv[m].wave == w / 2 && w % 2 == 0 && waves)
        ring_table_add_pending(next, mv[m].token, mv[m].slot, mv[m].to);
    ring_error err;
    ck_assert_msg(ring_table_seal(next, &err) == RING_OK, "%s", err.message);
    size_t tlen, dlen = check_round_trip(*cur, next);
    free(encode_table(next, &tlen));
    uint32_t wave_moves = 0;
    for (uint32_t m = 0; m < n_moves; m++)
      wave_moves += mv[m].wave == w / 2;
    /* bytes in proportion to the moves: ~8 per record or ~12 per pending triple */
    ck_assert_msg(dlen < 1000 + 16 * (size_t)wave_moves, "delta %zu bytes for %u moves", dlen,
                  wave_moves);
    ck_assert_uint_lt(dlen, tlen);
    ring_table_free(*cur);
    *cur = next;
  }
  for (uint32_t s = 0; s < T * R; s++) /* all waves done: the target's owners */
    ck_assert_uint_eq(state[s], ring_table_view(target)->owners[s]);
  free(state);
}

static void plan_step(ring_table **cur, test_cluster *c, const ring_plan_config *cfg, uint64_t *v) {
  ring_plan *p;
  ring_error err = {0};
  ck_assert_msg(ring_plan_compute(*cur, c->specs, c->n, cfg, &p, &err) == RING_OK, "%s",
                err.message);
  execute_plan(cur, p, v);
  ring_plan_free(p);
}

START_TEST(round_trip_planner_versions) {
  test_cluster c = cluster_make(9, 3);
  ring_plan_config cfg = {"demo", 1024, 3, 7, "zone", "rack", 0, 0, 40, NULL, RING_BALANCE_TOKENS,
                          NULL};
  ring_plan *p0;
  ring_error err;
  ck_assert_msg(ring_plan_compute(NULL, c.specs, c.n, &cfg, &p0, &err) == RING_OK, "%s",
                err.message);
  ring_table *cur;
  ck_assert_int_eq(ring_table_clone(ring_plan_target(p0), 1, &cur), RING_OK);
  ck_assert_int_eq(ring_table_seal(cur, NULL), RING_OK);
  ring_plan_free(p0);
  uint64_t v = 1;
  cluster_add(&c, "n9", "z0", "z0-r1", 1.0, RING_NODE_JOINING); /* a join */
  plan_step(&cur, &c, &cfg, &v);
  cluster_find(&c, "n4")->state = RING_NODE_DRAINING; /* a drain */
  plan_step(&cur, &c, &cfg, &v);
  ck_assert_uint_eq(ring_table_node_replicas(cur, (uint16_t)ring_table_find_node(cur, "n4")), 0);
  uint32_t before = ring_table_node_count(cur);
  test_cluster d = {0}; /* n4 leaves the membership: the planner drops it */
  for (uint32_t i = 0; i < c.n; i++)
    if (strcmp(c.specs[i].id, "n4") != 0)
      cluster_add(&d, c.nodes[i].id, c.nodes[i].zone, c.nodes[i].rack, c.specs[i].weight,
                  c.specs[i].state);
  plan_step(&cur, &d, &cfg, &v);
  ck_assert_uint_eq(ring_table_node_count(cur), before - 1);
  ck_assert_int_eq(ring_table_find_node(cur, "n4"), RING_ENOTFOUND);
  cluster_find(&d, "n0")->weight = 2.0; /* a weight change */
  cluster_add(&d, "n10", "z1", "z1-r1", 1.0, RING_NODE_JOINING);
  plan_step(&cur, &d, &cfg, &v);
  ck_assert_uint_gt(v, 6);
  ring_table_free(cur);
  cluster_free(&c);
  cluster_free(&d);
}
END_TEST

/* R=3 on three nodes n0..n2 (*base, version 1), and a delta that drops n2
 * and gives its slots to n0: R exceeds the node count (a seal checks that
 * before distinctness). Returns the malloc()'ed delta. */
static char *too_few_nodes_delta(ring_table **base) {
  ring_table_params p = {"demo", "", 1, 0, 64, 3};
  ring_table *a, *b;
  ck_assert_int_eq(ring_table_new(&p, &a, NULL), RING_OK);
  for (int i = 0; i < 3; i++) {
    char id[8];
    snprintf(id, sizeof id, "n%d", i);
    ring_node_spec s = {id, "h:1", NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(a, &s, NULL, NULL), RING_OK);
  }
  for (uint32_t tok = 0; tok < 64; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(a, tok, r, (uint16_t)r);
  ck_assert_int_eq(ring_table_seal(a, NULL), RING_OK);
  ck_assert_int_eq(ring_table_clone(a, 2, &b), RING_OK);
  ck_assert_int_eq(ring_table_seal(b, NULL), RING_OK);
  char *json;
  ck_assert_int_eq(ring_delta_encode(a, b, &json, NULL), RING_OK);
  cJSON *root = cJSON_Parse(json);
  free(json);
  cJSON_ReplaceItemInObjectCaseSensitive(root, "dropped", cJSON_CreateRaw("[2]"));
  cJSON_ReplaceItemInObjectCaseSensitive(root, "node_count", cJSON_CreateNumber(2));
  uint8_t raw[64 * 6];
  uint16_t owners[64 * 3];
  for (uint32_t tok = 0; tok < 64; tok++) {
    uint32_t s = tok * 3 + 2;
    uint8_t *r = raw + 6 * tok;
    r[0] = (uint8_t)s, r[1] = 0, r[2] = 0, r[3] = 0, r[4] = 0, r[5] = 0;
    owners[tok * 3] = 0, owners[tok * 3 + 1] = 1, owners[tok * 3 + 2] = 0;
  }
  char b64[600], sum[64];
  ring__base64_encode(raw, sizeof raw, b64);
  snprintf(sum, sizeof sum, "xxh3-64:%016llx",
           (unsigned long long)XXH3_64bits(owners, sizeof owners));
  cJSON_ReplaceItemInObjectCaseSensitive(root, "owners", cJSON_CreateString(b64));
  cJSON_ReplaceItemInObjectCaseSensitive(root, "checksum", cJSON_CreateString(sum));
  json = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  ring_table_free(b);
  *base = a;
  return json;
}

/* ------------------------------------- the short seal against the full one */

/* What check_seals_agree saw, summed over a run, to show that the hostile
 * deltas reach the seal's checks rather than stopping earlier. */
typedef struct seal_tally {
  uint32_t accepted, dup_owner, pending, replicas, other;
} seal_tally;

/* Applies json to base both ways: ring_delta_apply (the short seal) and
 * ring__delta_build then ring__table_validate over the whole result (what
 * ring_table_seal checks) and ring__table_freeze (its recount). They must
 * accept alike, refuse with the same code and message, and accepted, give
 * the same table with the same replica counts and serving nodes. */
static void check_seals_agree(const ring_table *base, const char *json, size_t len,
                              seal_tally *tally) {
  ring_table *fast = (ring_table *)0x1, *full = NULL;
  ring_error ef = {0}, eb = {0};
  int rf = ring_delta_apply(base, json, len, &fast, &ef);
  int rb = ring__delta_build(base, json, len, &full, &eb);
  bool built = rb == RING_OK;
  if (built && (rb = ring__table_validate(full, &eb)) == RING_OK)
    ring__table_freeze(full);
  ck_assert_msg(rf == rb, "short seal %d (%s), full %d (%s)\n%.600s", rf, ef.message, rb,
                eb.message, json);
  ck_assert_str_eq(ef.message, eb.message);
  if (rf != RING_OK) {
    ck_assert_ptr_eq(fast, (ring_table *)0x1);
    if (built)
      ring_table_free(full);
    *(rf == RING_EDUPOWNER   ? &tally->dup_owner
      : rf == RING_EPENDING  ? &tally->pending
      : rf == RING_EREPLICAS ? &tally->replicas
                             : &tally->other) += built;
    return;
  }
  tally->accepted++;
  ck_assert(ring__table_same(fast, full));
  ck_assert_int_eq(ring__table_validate(fast, NULL), RING_OK);
  for (uint16_t i = 0; i < ring_table_node_count(full); i++)
    ck_assert_uint_eq(ring_table_node_replicas(fast, i), ring_table_node_replicas(full, i));
  ck_assert_uint_eq(fast->n_serving, full->n_serving);
  ck_assert_uint_eq(ring__owners_checksum(fast), ring__owners_checksum(full));
  ring_table_free(fast);
  ring_table_free(full);
}

typedef struct record {
  uint32_t slot;
  uint16_t node;
} record;

/* Sets slot s of the result to node x in a delta's owner records (n of
 * them, sorted, room for one more), and in res, the owners it gives. */
static void set_record(record *r, uint32_t *n, uint16_t *res, uint32_t s, uint16_t x) {
  uint32_t i = 0;
  while (i < *n && r[i].slot < s)
    i++;
  if (i == *n || r[i].slot != s) { /* none yet: the renumbered base owner is res[s] */
    if (res[s] == x)
      return;
    memmove(&r[i + 1], &r[i], (*n - i) * sizeof *r);
    (*n)++;
  }
  r[i] = (record){s, x};
  res[s] = x;
}

/* A node for slot (tok, r) of the result that breaks a rule, or not:
 * another slot's owner of the token (a duplicate), an index past the
 * node count, or any node. */
static uint16_t hostile_owner(uint64_t *s, const uint16_t *res, uint32_t R, uint32_t n,
                              uint32_t tok, uint32_t r) {
  switch (below(s, 4)) {
  case 0:
  case 1:
    if (R > 1) {
      uint32_t q = (r + 1 + below(s, R - 1)) % R;
      return res[tok * R + q];
    }
    return (uint16_t)below(s, n);
  case 2:
    return (uint16_t)(n + below(s, 3));
  default:
    return (uint16_t)below(s, n);
  }
}

/* Rewrites the delta's owner records and checksum (so the result's
 * checksum matches and the seal is reached) with k hostile changes. */
static void hostile_owners(uint64_t *s, cJSON *root, const ring_table *target, uint32_t k) {
  const uint32_t T = ring_table_tokens(target), R = ring_table_replicas(target);
  const uint32_t n = ring_table_node_count(target);
  const char *b64 = cJSON_GetObjectItemCaseSensitive(root, "owners")->valuestring;
  size_t have = strlen(b64), nrec = have / 8;
  uint8_t *raw = malloc(nrec * 6 + 6 * k + 6);
  ck_assert_int_eq(ring__base64_decode(b64, have, raw, nrec * 6), (long)(nrec * 6));
  record *rec = malloc((nrec + k + 1) * sizeof *rec);
  uint16_t *res = malloc((size_t)T * R * sizeof *res);
  memcpy(res, ring_table_view(target)->owners, (size_t)T * R * sizeof *res);
  uint32_t nr = (uint32_t)nrec;
  for (uint32_t i = 0; i < nr; i++) {
    const uint8_t *p = raw + 6 * i;
    rec[i] =
        (record){(uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24,
                 (uint16_t)(p[4] | p[5] << 8)};
  }
  for (uint32_t j = 0; j < k; j++) {
    uint32_t tok = below(s, T), r = below(s, R);
    set_record(rec, &nr, res, tok * R + r, hostile_owner(s, res, R, n, tok, r));
  }
  for (uint32_t i = 0; i < nr; i++) {
    uint8_t *p = raw + 6 * i;
    p[0] = (uint8_t)rec[i].slot, p[1] = (uint8_t)(rec[i].slot >> 8);
    p[2] = (uint8_t)(rec[i].slot >> 16), p[3] = (uint8_t)(rec[i].slot >> 24);
    p[4] = (uint8_t)rec[i].node, p[5] = (uint8_t)(rec[i].node >> 8);
  }
  char *text = malloc(ring__base64_encoded_len(6 * nr) + 1), sum[64];
  ring__base64_encode(raw, 6 * nr, text);
  cJSON_ReplaceItemInObjectCaseSensitive(root, "owners", cJSON_CreateString(text));
  snprintf(sum, sizeof sum, "xxh3-64:%016llx",
           (unsigned long long)XXH3_64bits(res, (size_t)T * R * sizeof *res));
  cJSON_ReplaceItemInObjectCaseSensitive(root, "checksum", cJSON_CreateString(sum));
  free(text);
  free(res);
  free(rec);
  free(raw);
}

/* Replaces the pending list with a few random entries: in order or not,
 * on owners, repeated nodes, indexes past the node count. */
static void hostile_pending(uint64_t *s, cJSON *root, const ring_table *target) {
  const uint32_t T = ring_table_tokens(target), R = ring_table_replicas(target);
  const uint32_t n = ring_table_node_count(target);
  char list[1024] = "[";
  uint32_t tok = below(s, 4), want = 1 + below(s, 6);
  for (uint32_t i = 0; i < want && tok < T; i++) {
    uint32_t slot = below(s, R);
    uint32_t node = below(s, 8) == 0 ? n + below(s, 2) : below(s, n);
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s[%u,%u,%u]", i ? "," : "", tok,
             slot, node);
    uint32_t step = below(s, 4);
    tok += step == 0 ? 0 : step == 1 ? 1 : below(s, T / 2);
  }
  strcat(list, "]");
  cJSON_ReplaceItemInObjectCaseSensitive(root, "pending", cJSON_CreateRaw(list));
}

START_TEST(short_seal_matches_full) {
  seal_tally tally = {0};
  uint64_t s = 0x5ea15eedu;
  uint32_t serial = 0;
  for (int round = 0; round < 150; round++) {
    model a, b;
    random_model(&s, &a, &serial);
    random_successor(&s, &a, &b, &serial);
    ring_table *ta = model_build(&a), *tb = model_build(&b);
    char *json;
    size_t len;
    ck_assert_int_eq(ring_delta_encode(ta, tb, &json, &len), RING_OK);
    check_seals_agree(ta, json, len, &tally); /* as encoded: valid */
    for (int variant = 0; variant < 6; variant++) {
      cJSON *root = cJSON_Parse(json);
      uint32_t kind = below(&s, 3);
      if (kind != 1)
        hostile_owners(&s, root, tb, 1 + below(&s, 3));
      if (kind != 0)
        hostile_pending(&s, root, tb);
      char *text = cJSON_PrintUnformatted(root);
      cJSON_Delete(root);
      check_seals_agree(ta, text, strlen(text), &tally);
      free(text);
    }
    free(json);
    free(a.owners);
    free(b.owners);
    ring_table_free(ta);
    ring_table_free(tb);
  }
  /* the run reached the seal's checks, each way */
  ck_assert_uint_gt(tally.accepted, 150);
  ck_assert_uint_gt(tally.dup_owner, 50);
  ck_assert_uint_gt(tally.pending, 50);
}
END_TEST

/* R against the node count, the first check of a seal: both seals refuse. */
START_TEST(short_seal_replicas) {
  seal_tally tally = {0};
  ring_table *a;
  char *json = too_few_nodes_delta(&a);
  check_seals_agree(a, json, strlen(json), &tally);
  ck_assert_uint_eq(tally.replicas, 1);
  free(json);
  ring_table_free(a);
}
END_TEST

/* ------------------------------------------------------ encoder refusals */

START_TEST(encode_refusals) {
  ring_table *a = pair_base(), *b = pair_next(a);
  char *json = (char *)0x1;
  size_t len = 99;
  ck_assert_int_eq(ring_delta_encode(b, a, &json, &len), RING_ESTALE);
  ck_assert_int_eq(ring_delta_encode(a, a, &json, &len), RING_ESTALE);
  ck_assert_int_eq(ring_delta_encode(NULL, b, &json, &len), RING_EINVAL);
  ck_assert_int_eq(ring_delta_encode(a, b, NULL, &len), RING_EINVAL);
  struct {
    ring_table_params p;
    int code;
  } cases[] = {
      {{"other", "zone", 9, 42, 64, 3}, RING_EFIELD},
      {{"demo", "rack", 9, 42, 64, 3}, RING_EFIELD},
      {{"demo", "zone", 9, 42, 128, 3}, RING_ETOKENS},
      {{"demo", "zone", 9, 42, 64, 2}, RING_EREPLICAS},
      {{"demo", "zone", 9, 43, 64, 3}, RING_EHASH},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ring_table *t;
    ck_assert_int_eq(ring_table_new(&cases[i].p, &t, NULL), RING_OK);
    ck_assert_int_eq(ring_delta_encode(a, t, &json, &len), RING_EINVAL); /* unsealed */
    const char *k[] = {"zone"}, *v[] = {"z"};
    for (int n = 0; n < 3; n++) {
      char id[8];
      snprintf(id, sizeof id, "x%d", n);
      ring_node_spec s = {id, "h:1", k, v, 1, 1.0, RING_NODE_ACTIVE};
      ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
    }
    for (uint32_t tok = 0; tok < cases[i].p.tokens; tok++)
      for (uint32_t r = 0; r < cases[i].p.replicas; r++)
        ring_table_set_owner(t, tok, r, (uint16_t)r);
    ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
    ck_assert_msg(ring_delta_encode(a, t, &json, &len) == cases[i].code, "case %zu", i);
    ring_table_free(t);
  }
  ck_assert_ptr_eq(json, (char *)0x1); /* untouched on failure */
  ck_assert_uint_eq(len, 99);
  ring_table_free(a);
  ring_table_free(b);
}
END_TEST

/* ------------------------------------------------------------ error cases */

/* Applies text to the pair's base; checks the code and a message fragment. */
static void expect_on(const ring_table *base, const char *text, int code, const char *fragment) {
  ring_table *t = (ring_table *)0x1; /* must stay untouched on failure */
  ring_error err = {0};
  int rc = ring_delta_apply(base, text, strlen(text), &t, &err);
  ck_assert_msg(rc == code, "want %s, got %s (%s) for %.300s", ring_strerror(code),
                ring_strerror(rc), err.message, text);
  ck_assert_int_eq(err.code, code);
  ck_assert_ptr_eq(t, (ring_table *)0x1);
  ck_assert_msg(strstr(err.message, fragment) != NULL, "message \"%s\" lacks \"%s\"", err.message,
                fragment);
}

static void expect(const char *text, int code, const char *fragment) {
  ring_table *base = pair_base();
  expect_on(base, text, code, fragment);
  ring_table_free(base);
}

/* The pair's delta with one top-level field replaced (value NULL: removed). */
static char *with_field(const char *name, const char *value) {
  size_t len;
  return json_with_field(pair_delta(&len), name, value);
}

static void expect_field(const char *name, const char *value, int code, const char *frag) {
  char *text = with_field(name, value);
  expect(text, code, frag);
  free(text);
}

/* The pair's delta with the owner changes given as records (slot, node)
 * and, when fix is set, a checksum matching the owners they produce. */
static void expect_records(const uint32_t (*rec)[2], size_t n, bool fix, const char *extra_field,
                           const char *extra_value, int code, const char *frag) {
  ring_table *base = pair_base();
  uint8_t raw[64];
  uint16_t owners[64 * 3];
  memcpy(owners, ring_table_view(base)->owners, sizeof owners);
  for (size_t i = 0; i < n; i++) {
    uint8_t *r = raw + 6 * i;
    r[0] = (uint8_t)rec[i][0], r[1] = (uint8_t)(rec[i][0] >> 8), r[2] = (uint8_t)(rec[i][0] >> 16);
    r[3] = (uint8_t)(rec[i][0] >> 24), r[4] = (uint8_t)rec[i][1], r[5] = (uint8_t)(rec[i][1] >> 8);
    if (rec[i][0] < 192)
      owners[rec[i][0]] = (uint16_t)rec[i][1];
  }
  char b64[100], quoted[120], sum[64];
  ring__base64_encode(raw, 6 * n, b64);
  snprintf(quoted, sizeof quoted, "\"%s\"", b64);
  char *json = with_field("owners", quoted);
  cJSON *root = cJSON_Parse(json);
  free(json);
  if (fix) {
    snprintf(sum, sizeof sum, "xxh3-64:%016llx",
             (unsigned long long)XXH3_64bits(owners, sizeof owners));
    cJSON_ReplaceItemInObjectCaseSensitive(root, "checksum", cJSON_CreateString(sum));
  }
  if (extra_field)
    cJSON_ReplaceItemInObjectCaseSensitive(root, extra_field, cJSON_CreateRaw(extra_value));
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  expect_on(base, text, code, frag);
  free(text);
  ring_table_free(base);
}

START_TEST(err_arguments) {
  ring_table *base = pair_base(), *t = (ring_table *)0x1;
  size_t len;
  char *json = pair_delta(&len);
  ring_error err;
  ck_assert_int_eq(ring_delta_apply(NULL, json, len, &t, &err), RING_EINVAL);
  ck_assert_int_eq(ring_delta_apply(base, NULL, len, &t, &err), RING_EINVAL);
  ck_assert_int_eq(ring_delta_apply(base, json, len, NULL, &err), RING_EINVAL);
  ck_assert_int_eq(ring_delta_apply(base, "{}", (size_t)RING_TABLE_JSON_MAX + 1, &t, &err),
                   RING_ETOOBIG);
  ring_table *unsealed;
  ck_assert_int_eq(ring_table_clone(base, 7, &unsealed), RING_OK);
  ck_assert_int_eq(ring_delta_apply(unsealed, json, len, &t, &err), RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "not sealed"));
  ck_assert_ptr_eq(t, (ring_table *)0x1);
  /* the base is never modified, and err may be NULL */
  size_t l1, l2;
  char *before = encode_table(base, &l1);
  ck_assert_int_eq(ring_delta_apply(base, json, len, &t, NULL), RING_OK);
  ring_table_free(t);
  ck_assert_int_eq(ring_delta_apply(base, json, len / 2, &t, NULL), RING_EJSON);
  char *after = encode_table(base, &l2);
  ck_assert_str_eq(before, after);
  free(before);
  free(after);
  free(json);
  ring_table_free(unsealed);
  ring_table_free(base);
}
END_TEST

START_TEST(err_json) {
  expect("", RING_EJSON, "malformed JSON");
  expect("not json", RING_EJSON, "malformed JSON");
  expect("[1,2]", RING_EJSON, "top level must be an object");
  size_t len;
  char *json = pair_delta(&len);
  char *trailing = malloc(len + 8);
  sprintf(trailing, "%s {}", json);
  expect(trailing, RING_EJSON, "malformed JSON");
  json[len / 2] = '\0';
  expect(json, RING_EJSON, "malformed JSON");
  free(json);
  free(trailing);
}
END_TEST

START_TEST(err_format_and_fields) {
  expect_field("format", "\"ringkeeper.table.v1\"", RING_EFORMAT, "format");
  expect_field("format", "1", RING_EFIELD, "format: must be a string");
  expect_field("owners", NULL, RING_EFIELD, "owners: missing");
  expect_field("dropped", NULL, RING_EFIELD, "dropped: missing");
  expect_field("nodes", "{}", RING_EFIELD, "nodes: must be an array");
  expect_field("pending", "null", RING_EFIELD, "pending: must be an array");
  expect_field("extra", "1", RING_EFIELD, "unknown field \"extra\"");
  expect_field("node_count", "\"6\"", RING_EFIELD, "node_count");
  expect_field("cluster", "\"other\"", RING_EFIELD, "cluster: delta is for \"other\"");
  size_t len;
  char *json = pair_delta(&len);
  char *dup = malloc(len + 32);
  sprintf(dup, "{\"version\":8,%s", json + 1);
  expect(dup, RING_EFIELD, "field \"version\" given twice");
  free(json);
  free(dup);
}
END_TEST

START_TEST(err_version) {
  expect_field("base_version", "6", RING_EVERSION, "delta applies to version 6");
  expect_field("base_version", "0", RING_EVERSION, "base_version");
  expect_field("base_version", "\"7\"", RING_EFIELD, "base_version");
  expect_field("version", "7", RING_EVERSION, "version: must be an integer in [8,");
  expect_field("version", "9007199254740992", RING_EVERSION, "version");
  expect_field("version", "8.5", RING_EVERSION, "version");
  expect_field("version", NULL, RING_EFIELD, "version: missing");
}
END_TEST

START_TEST(err_checksums) {
  expect_field("base_checksum", "\"xxh3-64:0000000000000000\"", RING_ECHECKSUM,
               "base_checksum: base table's owners hash to");
  expect_field("base_checksum", "\"crc32:00000000\"", RING_ECHECKSUM, "base_checksum");
  expect_field("checksum", "\"xxh3-64:0000000000000000\"", RING_ECHECKSUM,
               "checksum: result owners hash to");
  expect_field("checksum", "\"xxh3-64:ABCDEF0000000000\"", RING_ECHECKSUM, "lowercase");
  expect_field("checksum", NULL, RING_EFIELD, "checksum: missing");
}
END_TEST

START_TEST(err_wrong_base) {
  size_t len;
  char *json = pair_delta(&len);
  ring_table *base = pair_base();
  /* another table of the same version: same nodes, one slot moved */
  ring_table *other;
  ck_assert_int_eq(ring_table_clone(base, 7, &other), RING_OK);
  ring_table_set_owner(other, 0, 0, 5);
  ck_assert_int_eq(ring_table_seal(other, NULL), RING_OK);
  expect_on(other, json, RING_ECHECKSUM, "base_checksum");
  ring_table_free(other);
  /* a different version of the same table */
  ck_assert_int_eq(ring_table_clone(base, 6, &other), RING_OK);
  ck_assert_int_eq(ring_table_seal(other, NULL), RING_OK);
  expect_on(other, json, RING_EVERSION, "base_version");
  ring_table_free(other);
  /* the target itself is not its own base */
  ring_table *next = pair_next(base);
  expect_on(next, json, RING_EVERSION, "base table is 8");
  ring_table_free(next);
  ring_table_free(base);
  free(json);
}
END_TEST

START_TEST(err_node_list) {
  expect_field("node_count", "0", RING_ENODE, "node_count");
  expect_field("node_count", "4", RING_ENODE, "node_count: 4, but 5 base nodes remain");
  expect_field("node_count", "7", RING_ENODE, "no record for appended index 6");
  expect_field("dropped", "[6]", RING_ENODE, "dropped[0]: not a base node index");
  expect_field("dropped", "[-1]", RING_ENODE, "dropped[0]");
  expect_field("dropped", "[\"5\"]", RING_ENODE, "dropped[0]");
  expect_field("dropped", "[4,2]", RING_ENODE, "dropped[1]: not in ascending order");
  expect_field("dropped", "[5,5]", RING_ENODE, "dropped[1]");
  /* not canonical but valid: n6 replaces n5 at index 5 instead of n5 being
   * dropped and n6 appended; the result is the same table */
  char *text = with_field("dropped", "[]");
  ring_table *base = pair_base(), *next = pair_next(base), *t;
  ring_error err;
  ck_assert_msg(ring_delta_apply(base, text, strlen(text), &t, &err) == RING_OK, "%s", err.message);
  size_t l1, l2;
  char *a = encode_table(t, &l1), *b = encode_table(next, &l2);
  ck_assert_str_eq(a, b);
  free(a);
  free(b);
  free(text);
  ring_table_free(t);
  ring_table_free(next);
  ring_table_free(base);
}
END_TEST

/* The pair's delta with `nodes` replaced. */
static void expect_nodes(const char *nodes, int code, const char *frag) {
  expect_field("nodes", nodes, code, frag);
}

#define N1 "{\"id\":\"n1\",\"addr\":\"127.0.0.1:7102\",\"labels\":{\"zone\":\"z1\"},"
#define N6                                                                                         \
  "[5,{\"id\":\"n6\",\"addr\":\"127.0.0.1:7107\",\"labels\":{\"zone\":\"z0\"},"                    \
  "\"weight\":1.0,\"state\":\"joining\"}]"

START_TEST(err_node_entries) {
  expect_nodes("[7]", RING_ENODE, "nodes[0]: must be [index, node_record]");
  expect_nodes("[[1]]", RING_ENODE, "nodes[0]: must be [index, node_record]");
  expect_nodes("[[1,{},2]]", RING_ENODE, "nodes[0]: must be [index, node_record]");
  expect_nodes("[[6,{}]]", RING_ENODE, "nodes[0][0]: not a node index below node_count 6");
  expect_nodes("[[-1,{}]]", RING_ENODE, "nodes[0][0]");
  expect_nodes("[" N6 "," N6 "]", RING_ENODE, "nodes[1]: index 5 not in ascending order");
  expect_nodes("[[1," N1 "\"weight\":1.0,\"state\":\"active\"}]," N6 "]", RING_ENODE,
               "nodes[0]: index 1: record of n1 unchanged");
  expect_nodes("[[1,7]," N6 "]", RING_ENODE, "nodes[0]: must be an object");
  expect_nodes("[[1," N1 "\"weight\":0,\"state\":\"active\"}]," N6 "]", RING_ENODE,
               "nodes[0]: node n1: weight");
  expect_nodes("[[1," N1 "\"weight\":2.5,\"state\":\"zombie\"}]," N6 "]", RING_ENODE,
               "nodes[0]: state: \"zombie\"");
  expect_nodes("[[1," N1 "\"weight\":2.5,\"state\":\"active\",\"x\":1}]," N6 "]", RING_EFIELD,
               "nodes[0]: unknown field \"x\"");
  expect_nodes("[[1,{\"id\":\"N1\",\"addr\":\"h:1\",\"labels\":{},\"weight\":1.0,"
               "\"state\":\"active\"}]," N6 "]",
               RING_ENODEID, "nodes[0]: id \"N1\"");
  expect_nodes("[[1,{\"addr\":\"h:1\",\"labels\":{},\"weight\":1.0,\"state\":\"active\"}]," N6 "]",
               RING_ENODEID, "nodes[0]: id: missing");
  expect_nodes("[[1," N1 "\"weight\":2.5,\"state\":\"active\"}],[5,{\"id\":\"n0\","
               "\"addr\":\"h:1\",\"labels\":{},\"weight\":1.0,\"state\":\"active\"}]]",
               RING_EDUPNODE, "nodes[1]: duplicate id \"n0\"");
  /* a record taking the id of a base node that comes after it */
  expect_nodes("[[1,{\"id\":\"n3\",\"addr\":\"h:1\",\"labels\":{},\"weight\":1.0,"
               "\"state\":\"active\"}]," N6 "]",
               RING_EDUPNODE, "nodes: base node 3 (now 3): duplicate id \"n3\"");
  expect_nodes("[[1," N1 "\"weight\":2.5,\"state\":\"active\"}]]", RING_ENODE,
               "no record for appended index 5");
}
END_TEST

START_TEST(err_owner_records) {
  expect_field("owners", "\"AAAA\"", RING_EOWNERS, "owners: 4 base64 characters");
  expect_field("owners", "\"AAAAAAA#\"", RING_EOWNERS, "not canonical base64");
  expect_field("owners", "7", RING_EFIELD, "owners: must be a string");
  const uint32_t out_of_range[][2] = {{192, 1}};
  expect_records(out_of_range, 1, false, NULL, NULL, RING_EOWNERS,
                 "record 0: slot index 192, T*R is 192");
  const uint32_t descending[][2] = {{29, 4}, {10, 4}};
  expect_records(descending, 2, false, NULL, NULL, RING_EOWNERS,
                 "record 1: slot index 10 not ascending");
  const uint32_t repeated[][2] = {{10, 4}, {10, 4}};
  expect_records(repeated, 2, false, NULL, NULL, RING_EOWNERS, "record 1");
  const uint32_t no_change[][2] = {{10, 4}, {11, 1}}; /* token 3 is owned by n3, n0, n1 */
  expect_records(no_change, 2, false, NULL, NULL, RING_EOWNERS,
                 "record 1: owners[3][2] is already node 1");
  const uint32_t bad_node[][2] = {{10, 6}};
  expect_records(bad_node, 1, false, NULL, NULL, RING_EINDEX,
                 "record 0: owners[3][1]: node index 6, 6 nodes");
  const uint32_t none[][2] = {{10, 0xffff}};
  expect_records(none, 1, false, NULL, NULL, RING_EINDEX, "node index 65535");
}
END_TEST

START_TEST(err_owner_rules) {
  /* n0 (index 0) dropped: its slots are left unset */
  ring_table *base = pair_base();
  char *json = with_field("dropped", "[0,5]");
  cJSON *root = cJSON_Parse(json);
  free(json);
  cJSON_ReplaceItemInObjectCaseSensitive(root, "node_count", cJSON_CreateNumber(5));
  cJSON_ReplaceItemInObjectCaseSensitive(
      root, "nodes",
      cJSON_CreateRaw("[[4,{\"id\":\"n6\",\"addr\":\"h:1\",\"labels\":{},"
                      "\"weight\":1.0,\"state\":\"joining\"}]]"));
  cJSON_ReplaceItemInObjectCaseSensitive(root, "pending", cJSON_CreateRaw("[]"));
  json = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  expect_on(base, json, RING_EINDEX, "owned by dropped node n0 and given no new owner");
  free(json);
  ring_table_free(base);
  /* one node in two slots of a token, with a matching checksum: seal refuses */
  const uint32_t dup[][2] = {{10, 4}, {11, 4}};
  expect_records(dup, 2, true, "pending", "[]", RING_EDUPOWNER, "token 3");
}
END_TEST

START_TEST(err_pending) {
  expect_field("pending", "[[5,0,5],[3,1,4]]", RING_EPENDING, "ascending");
  expect_field("pending", "[[5,0]]", RING_EPENDING, "pending[0]: must be");
  expect_field("pending", "[[64,0,5]]", RING_EPENDING, "out of range");
  expect_field("pending", "[[5,3,5]]", RING_EPENDING, "out of range");
  expect_field("pending", "[[5,0,6]]", RING_EPENDING, "node index 6");
  expect_field("pending", "[[5,0,1]]", RING_EPENDING, "already owns token 5");
  expect_field("pending", "[7]", RING_EPENDING, "pending[0]");
}
END_TEST

START_TEST(err_replicas) {
  ring_table *a;
  char *json = too_few_nodes_delta(&a);
  expect_on(a, json, RING_EREPLICAS, "replicas: 3 exceeds the 2 nodes");
  free(json);
  ring_table_free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("delta");
  TCase *tc = tcase_create("round_trip");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, round_trip_pair);
  tcase_add_test(tc, encoding_shape);
  tcase_add_loop_test(tc, round_trip_random, 0, 60);
  tcase_add_test(tc, round_trip_identical_nodes_and_owners);
  tcase_add_test(tc, round_trip_planner_versions);
  tcase_add_test(tc, encode_refusals);
  suite_add_tcase(s, tc);
  TCase *ts = tcase_create("short_seal");
  tcase_set_timeout(ts, 120);
  tcase_add_test(ts, short_seal_matches_full);
  tcase_add_test(ts, short_seal_replicas);
  suite_add_tcase(s, ts);
  TCase *te = tcase_create("errors");
  tcase_add_test(te, err_arguments);
  tcase_add_test(te, err_json);
  tcase_add_test(te, err_format_and_fields);
  tcase_add_test(te, err_version);
  tcase_add_test(te, err_checksums);
  tcase_add_test(te, err_wrong_base);
  tcase_add_test(te, err_node_list);
  tcase_add_test(te, err_node_entries);
  tcase_add_test(te, err_owner_records);
  tcase_add_test(te, err_owner_rules);
  tcase_add_test(te, err_pending);
  tcase_add_test(te, err_replicas);
  suite_add_tcase(s, te);
  return run_suite(s);
}
