/*
 * node_colour.c: the colours of Ringkeeper's pictures (cluster.h): one
 * palette, and a node's colour fixed by its id, so a node looks the same in
 * every `ringctl render` view, on the coordinator's status page and from
 * one run to the next (a colour by rank or by index changes as shares do).
 */
#include "cluster.h"

#include <string.h>
#include <xxhash.h>

/* Tableau's 20 colours: distinguishable side by side and in print. */
static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                      "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#1f77b4",
                                      "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                      "#e377c2", "#17becf", "#bcbd22", "#aec7e8", "#98df8a"};
#define PALETTE_N (sizeof palette / sizeof palette[0])

const char *rk_colour(uint32_t i) { return palette[i % PALETTE_N]; }

const char *rk_node_colour(const char *id) {
  /* XXH3 (libring's hash) mixes ids that differ in one character, as
   * n1, n2 ... do, across the whole palette. */
  return palette[XXH3_64bits(id, id != NULL ? strlen(id) : 0) % PALETTE_N];
}
