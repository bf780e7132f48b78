/*
 * simulate_maglev.c: Maglev hashing (Eisenbud et al., NSDI 2016, section
 * 3.4) as a scheme of `ringctl simulate`.
 *
 * Sections: the table size; one lookup table; the scheme.
 *
 * Each node has a permutation of the M entries (an offset and a skip from
 * two hashes of its name); nodes take turns claiming their next free entry
 * until the table is full, so every node holds M/N entries give or take
 * one. A key's owner is entry hash % M. A membership change rebuilds the
 * whole table, which is the seed's point: the rebuild is global, and some
 * keys move between nodes that stayed.
 */
#include "simulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

/* ---------------------------------------------------------- the table size */

/* The paper's smaller size, and its advice of M >= 100 N for balance. */
#define MAGLEV_M_MIN 65537u
#define MAGLEV_PER_NODE 100u

static bool is_prime(uint32_t m) {
  if (m < 2)
    return false;
  for (uint32_t d = 2; d <= m / d; d++)
    if (m % d == 0)
      return false;
  return true;
}

/* Sized for n+1 nodes so the three memberships share one M (a key's entry
 * is the same in all three tables; only the owners differ). */
uint32_t sim_maglev_size(uint32_t n) {
  uint32_t m = MAGLEV_PER_NODE * (n + 1);
  m = m > MAGLEV_M_MIN ? m : MAGLEV_M_MIN;
  while (!is_prime(m))
    m++;
  return m;
}

/* ------------------------------------------------------- one lookup table */

/* A node's permutation: entry j of node i is (offset + j * skip) % M. */
typedef struct perm {
  uint32_t next; /* the entry it tries next */
  uint32_t skip; /* in [1, M-1]: M is prime, so every entry comes up */
} perm;

static perm perm_of(uint32_t node, uint32_t m) {
  char name[24];
  const int len = snprintf(name, sizeof name, "node-%u", node);
  const uint32_t offset = (uint32_t)(XXH3_64bits_withSeed(name, (size_t)len, 0xa11ce) % m);
  const uint32_t skip = (uint32_t)(XXH3_64bits_withSeed(name, (size_t)len, 0xb0b) % (m - 1)) + 1;
  return (perm){offset, skip};
}

/* Fills tab[0..m) for nodes 0..n-1 (n >= 1); RING_OK or RING_ENOMEM. The
 * loop ends: each turn claims one free entry, and there are m. */
static int populate(uint16_t *tab, uint32_t m, uint32_t n) {
  perm *p = malloc(n * sizeof *p);
  if (p == NULL)
    return RING_ENOMEM;
  for (uint32_t i = 0; i < n; i++)
    p[i] = perm_of(i, m);
  for (uint32_t e = 0; e < m; e++)
    tab[e] = RING_NODE_NONE;
  for (uint32_t filled = 0; filled < m;)
    for (uint32_t i = 0; i < n && filled < m; i++) {
      while (tab[p[i].next] != RING_NODE_NONE)
        p[i].next = (uint32_t)(((uint64_t)p[i].next + p[i].skip) % m);
      tab[p[i].next] = (uint16_t)i;
      filled++;
    }
  free(p);
  return RING_OK;
}

/* ------------------------------------------------------------- the scheme */

typedef struct maglev_state {
  uint32_t m;
  uint16_t *tab[SIM_MEMBERSHIPS]; /* [SIM_LEAVE] NULL when N = 1 */
} maglev_state;

static void maglev_owners(const sim_scheme *s, const sim_key *k, uint32_t out[SIM_MEMBERSHIPS]) {
  const maglev_state *g = s->state;
  const uint32_t e = (uint32_t)(k->hash % g->m);
  for (int i = 0; i < SIM_MEMBERSHIPS; i++)
    if (g->tab[i] != NULL)
      out[i] = g->tab[i][e];
}

static void maglev_destroy(sim_scheme *s) {
  maglev_state *g = s->state;
  for (int i = 0; g != NULL && i < SIM_MEMBERSHIPS; i++)
    free(g->tab[i]);
  free(g);
  s->state = NULL;
}

int sim_maglev_init(sim_scheme *s, uint32_t n) {
  *s = (sim_scheme){
      .name = "maglev", .nodes = n, .owners = maglev_owners, .destroy = maglev_destroy};
  maglev_state *g = calloc(1, sizeof *g);
  if (g == NULL)
    return RING_ENOMEM;
  s->state = g;
  g->m = sim_maglev_size(n);
  const uint32_t members[SIM_MEMBERSHIPS] = {n - 1, n, n + 1};
  for (int i = 0; i < SIM_MEMBERSHIPS; i++) {
    if (members[i] == 0)
      continue; /* no table of no nodes: N = 1 has no leave */
    if ((g->tab[i] = malloc(g->m * sizeof *g->tab[i])) == NULL)
      return RING_ENOMEM;
    int rc = populate(g->tab[i], g->m, members[i]);
    if (rc != RING_OK)
      return rc;
  }
  return RING_OK;
}
