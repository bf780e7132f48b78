/*
 * test_cluster.h: desired-membership lists for planner tests and benches.
 * A cluster is an array of node specs whose strings live in the struct.
 */
#ifndef RING_TEST_CLUSTER_H
#define RING_TEST_CLUSTER_H

#include "ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct test_node {
  char id[32], addr[32], zone[16], rack[16];
  const char *keys[2], *values[2];
} test_node;

typedef struct test_cluster {
  test_node *nodes;
  ring_node_spec *specs;
  uint32_t n, cap;
} test_cluster;

/* Appends node "<prefix><i>" in zone/rack with a weight and state. */
static inline void cluster_add(test_cluster *c, const char *id, const char *zone, const char *rack,
                               double weight, ring_node_state state) {
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 16;
    c->nodes = realloc(c->nodes, c->cap * sizeof *c->nodes);
    c->specs = realloc(c->specs, c->cap * sizeof *c->specs);
    if (!c->nodes || !c->specs)
      abort();
    for (uint32_t i = 0; i < c->n; i++) { /* re-point into the moved storage */
      test_node *t = &c->nodes[i];
      t->values[0] = t->zone, t->values[1] = t->rack;
      c->specs[i].id = t->id, c->specs[i].addr = t->addr;
      c->specs[i].label_keys = t->keys, c->specs[i].label_values = t->values;
    }
  }
  test_node *t = &c->nodes[c->n];
  snprintf(t->id, sizeof t->id, "%s", id);
  snprintf(t->addr, sizeof t->addr, "127.0.0.1:%u", 7000 + c->n % 50000);
  snprintf(t->zone, sizeof t->zone, "%s", zone);
  snprintf(t->rack, sizeof t->rack, "%s", rack);
  t->keys[0] = "zone", t->keys[1] = "rack";
  t->values[0] = t->zone, t->values[1] = t->rack;
  c->specs[c->n] = (ring_node_spec){t->id, t->addr, t->keys, t->values, 2, weight, state};
  c->n++;
}

/* n nodes "n<i>" spread round-robin over `zones` zones and 2 racks each. */
static inline test_cluster cluster_make(uint32_t n, uint32_t zones) {
  test_cluster c = {0};
  for (uint32_t i = 0; i < n; i++) {
    char id[32], zone[16], rack[16];
    snprintf(id, sizeof id, "n%u", i);
    snprintf(zone, sizeof zone, "z%u", i % zones);
    snprintf(rack, sizeof rack, "z%u-r%u", i % zones, (i / zones) % 2);
    cluster_add(&c, id, zone, rack, 1.0, RING_NODE_ACTIVE);
  }
  return c;
}

static inline ring_node_spec *cluster_find(test_cluster *c, const char *id) {
  for (uint32_t i = 0; i < c->n; i++)
    if (strcmp(c->specs[i].id, id) == 0)
      return &c->specs[i];
  return NULL;
}

static inline void cluster_free(test_cluster *c) {
  free(c->nodes);
  free(c->specs);
  memset(c, 0, sizeof *c);
}

#endif /* RING_TEST_CLUSTER_H */
