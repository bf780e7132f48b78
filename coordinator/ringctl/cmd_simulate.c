/*
 * cmd_simulate.c: `ringctl simulate`: options, validation, and which
 * report to print. The model is in simulate*.c.
 *
 * Usage: ringctl simulate [--nodes N] [--keys K] [--tokens T] [--json]
 */
#include "ringctl.h"
#include "simulate.h"

#include <stdio.h>

enum { OPT_NODES, OPT_KEYS, OPT_TOKENS };

static const ringctl_opt simulate_opts[] = {
    {"nodes", OPT_NODES, true},
    {"keys", OPT_KEYS, true},
    {"tokens", OPT_TOKENS, true},
    {NULL, 0, false},
};

/* The limits are written out so the help is one constant the manual page
 * and completion read too; the asserts keep them the parser's. */
_Static_assert(SIM_NODES_MAX == 10000u && SIM_KEYS_MAX == 100000000u, "simulate's help");
_Static_assert(RING_TOKENS_MIN == 64u && RING_TOKENS_MAX == 65536u, "simulate's help");

static const char help_text[] =
    "Usage: ringctl simulate [--nodes N] [--keys K] [--tokens T] [--json]\n"
    "\n"
    "Compares placement schemes on the keys session-0 .. session-<K-1>: modulo\n"
    "hashing, a hashed ring with 1, 10, 100 and 500 virtual nodes per node,\n"
    "rendezvous, jump consistent hash, Maglev (its lookup table rebuilt whole),\n"
    "and Ringkeeper's fixed tokens placed by the planner (R = 1). For each: the\n"
    "share of keys that move when a node joins N nodes and when one leaves, and\n"
    "keys per node over the mean. Then bounded-load routing on the fixed-token\n"
    "table at caps 1.05 and 1.25 on a skewed (Zipf) request stream, plain and\n"
    "with hysteresis and the sticky map: affinity, churn and max/mean load.\n"
    "Last, weighted rendezvous with top-k replicas: a weight-3 node's share of\n"
    "keys (ideal 30%) next to the seed's 29.9%. Offline: no cluster is\n"
    "contacted. Output is deterministic.\n"
    "\n"
    "Options:\n"
    "  --nodes N   nodes before the change, 1 .. 10000 (default 8)\n"
    "  --keys K    keys, 1 .. 100000000 (default 100000)\n"
    "  --tokens T  fixed tokens, a power of two in [64, 65536] (default 65536)\n"
    "  --json      one line of JSON instead of tables\n";

/* --tokens must be a power of two in [64, 65536], as a table's T. */
static int parse_tokens(const ringctl_args *a, const char *value, uint32_t *out) {
  uint64_t t;
  int rc = ringctl_parse_uint(a, "tokens", value, RING_TOKENS_MIN, RING_TOKENS_MAX, &t);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if ((t & (t - 1)) != 0)
    return ringctl_usage_error(a, "--tokens must be a power of two, got %s", value);
  *out = (uint32_t)t;
  return RINGCTL_EXIT_OK;
}

/* Applies one option to p; returns an exit code (OK to go on). */
static int apply_opt(const ringctl_args *a, int id, const char *value, sim_params *p) {
  uint64_t v;
  int rc;
  switch (id) {
  case OPT_NODES:
    /* N+1 nodes must fit a table's uint16 indexes; 10000 is far inside. */
    if ((rc = ringctl_parse_uint(a, "nodes", value, 1, SIM_NODES_MAX, &v)) == 0)
      p->nodes = (uint32_t)v;
    return rc;
  case OPT_KEYS:
    if ((rc = ringctl_parse_uint(a, "keys", value, 1, SIM_KEYS_MAX, &v)) == 0)
      p->keys = v;
    return rc;
  case OPT_TOKENS:
    return parse_tokens(a, value, &p->tokens);
  default:
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  }
}

/* Reads the options into p. Returns RINGCTL_EXIT_OK to go on, or the exit
 * code to stop with (OK after printing --help). */
static int parse(ringctl_args *a, sim_params *p, bool *help) {
  const char *value = NULL;
  for (;;) {
    int id = ringctl_next_opt(a, simulate_opts, &value);
    if (id == RINGCTL_ARG_END)
      return RINGCTL_EXIT_OK;
    if (id == RINGCTL_ARG_HELP) {
      *help = true;
      return RINGCTL_EXIT_OK;
    }
    if (id == RINGCTL_ARG_ERROR)
      return RINGCTL_EXIT_USAGE;
    int rc = apply_opt(a, id, value, p); /* a positional lands in default: */
    if (rc != RINGCTL_EXIT_OK)
      return rc;
  }
}

int ringctl_cmd_simulate(ringctl_args *a) {
  sim_params p = {.nodes = 8, .keys = 100000, .tokens = RING_TOKENS_MAX};
  bool help = false;
  int rc = parse(a, &p, &help);
  if (rc != RINGCTL_EXIT_OK || help) {
    if (help)
      fputs(help_text, stdout);
    return rc;
  }
  sim_report r;
  ring_error err = {RING_OK, ""};
  int ring_rc = sim_run(&p, &r, &err);
  if (ring_rc == RING_OK && a->globals->json)
    ring_rc = sim_report_json(&r, stdout);
  else if (ring_rc == RING_OK)
    sim_report_text(&r, stdout);
  if (ring_rc != RING_OK) {
    fprintf(stderr, "%s: %s\n", a->prog,
            err.code != RING_OK ? err.message : ring_strerror(ring_rc));
    return RINGCTL_EXIT_FAILURE;
  }
  return RINGCTL_EXIT_OK;
}

const ringctl_command ringctl_command_simulate = {
    "simulate", ringctl_cmd_simulate,
    "compare placement schemes: keys moved on a join or leave, balance", simulate_opts, help_text};
