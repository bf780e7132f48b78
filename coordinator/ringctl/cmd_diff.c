/*
 * cmd_diff.c: `ringctl diff V1 V2 [--all] [--json]`: what changed between
 * two retained table versions: per node the token-replicas it owned in
 * each and how many it gained and lost, then the moves (token, slot, old
 * owner, new owner). Nodes are matched by id, never by index (indexes
 * change when nodes leave a table). Pending entries are not compared:
 * ownership is what a version promises. Nodes are listed by id (n2
 * before n10), moves by token and slot.
 *
 * --json: {"from":V1,"to":V2,"moves_total":N,
 *          "nodes":[{"id","before","after","gained","lost"}],
 *          "moves":[{"token","slot","from","to"}]}   (every move)
 */
#define _GNU_SOURCE /* strverscmp: n2 before n10 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MOVES 20 /* moves printed without --all */

static const char help[] =
    "Usage: ringctl diff V1 V2 [--all] [--json]\n\n"
    "Compares two retained table versions: token-replicas per node before and\n"
    "after, gained and lost, and the moves (the first 20; --all for every one).\n";

enum { OPT_ALL };
static const ringctl_opt opts[] = {{"all", OPT_ALL, false}, {NULL, 0, false}};

typedef struct diff_args {
  uint64_t v[2];
  uint32_t n;
  bool all;
} diff_args;

static int take(const ringctl_args *a, int id, const char *value, void *ud) {
  diff_args *d = ud;
  if (id == OPT_ALL) {
    d->all = true;
    return RINGCTL_EXIT_OK;
  }
  if (d->n == 2)
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  return ringctl_parse_uint_arg(a, "version", value, 1, RING_VERSION_MAX, &d->v[d->n++]);
}

/* One node's counts, by id. */
typedef struct node_diff {
  const char *id;
  uint32_t before, after, gained, lost;
} node_diff;

typedef struct move_row {
  uint32_t token, slot;
  const char *from, *to;
} move_row;

typedef struct diff {
  node_diff *nodes;
  uint32_t n_nodes;
  move_row *moves; /* in (token, slot) order */
  uint32_t n_moves, cap_moves;
} diff;

static node_diff *node_of(diff *d, const char *id) {
  for (uint32_t i = 0; i < d->n_nodes; i++)
    if (strcmp(d->nodes[i].id, id) == 0)
      return &d->nodes[i];
  d->nodes[d->n_nodes].id = id;
  return &d->nodes[d->n_nodes++];
}

static int add_move(diff *d, uint32_t t, uint32_t s, const char *from, const char *to) {
  if (d->n_moves == d->cap_moves) {
    uint32_t cap = d->cap_moves ? 2 * d->cap_moves : 256;
    move_row *m = realloc(d->moves, (size_t)cap * sizeof *m);
    if (m == NULL)
      return RING_ENOMEM;
    d->moves = m;
    d->cap_moves = cap;
  }
  d->moves[d->n_moves++] = (move_row){t, s, from, to};
  return RING_OK;
}

static int by_id(const void *x, const void *y) {
  return strverscmp(((const node_diff *)x)->id, ((const node_diff *)y)->id);
}

/* Counts per node and moves; node ids are borrowed from the tables. At
 * most T*R moves (7 * 65536), so the list is bounded by the tables. */
static int compute(const ring_table *a, const ring_table *b, diff *d) {
  uint32_t cap = ring_table_node_count(a) + ring_table_node_count(b);
  if ((d->nodes = calloc(cap ? cap : 1, sizeof *d->nodes)) == NULL)
    return RING_ENOMEM;
  uint32_t T = ring_table_tokens(a), R = ring_table_replicas(a);
  for (uint32_t t = 0; t < T; t++)
    for (uint32_t s = 0; s < R; s++) {
      node_diff *from = node_of(d, ring_table_node_id(a, ring_table_owner(a, t, s)));
      node_diff *to = node_of(d, ring_table_node_id(b, ring_table_owner(b, t, s)));
      from->before++;
      to->after++;
      if (from != to) {
        from->lost++;
        to->gained++;
        if (add_move(d, t, s, from->id, to->id) != RING_OK)
          return RING_ENOMEM;
      }
    }
  qsort(d->nodes, d->n_nodes, sizeof *d->nodes, by_id); /* moves hold ids, not pointers */
  return RING_OK;
}

static cJSON *moves_json(const diff *d) {
  cJSON *arr = cJSON_CreateArray();
  for (uint32_t i = 0; i < d->n_moves; i++) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "token", d->moves[i].token);
    cJSON_AddNumberToObject(m, "slot", d->moves[i].slot);
    cJSON_AddStringToObject(m, "from", d->moves[i].from);
    cJSON_AddStringToObject(m, "to", d->moves[i].to);
    cJSON_AddItemToArray(arr, m);
  }
  return arr;
}

static int print_json(const diff_args *args, const diff *d) {
  cJSON *o = cJSON_CreateObject(), *nodes = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "from", (double)args->v[0]);
  cJSON_AddNumberToObject(o, "to", (double)args->v[1]);
  cJSON_AddNumberToObject(o, "moves_total", d->n_moves);
  for (uint32_t i = 0; i < d->n_nodes; i++) {
    const node_diff *n = &d->nodes[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", n->id);
    cJSON_AddNumberToObject(j, "before", n->before);
    cJSON_AddNumberToObject(j, "after", n->after);
    cJSON_AddNumberToObject(j, "gained", n->gained);
    cJSON_AddNumberToObject(j, "lost", n->lost);
    cJSON_AddItemToArray(nodes, j);
  }
  cJSON_AddItemToObject(o, "nodes", nodes);
  cJSON_AddItemToObject(o, "moves", moves_json(d));
  return ringctl_json_emit(o);
}

static void print_text(const diff_args *args, const diff *d) {
  printf("version %llu -> %llu: %u token-replicas changed owner\n\n",
         (unsigned long long)args->v[0], (unsigned long long)args->v[1], d->n_moves);
  printf("%-24s %8s %8s %8s %8s\n", "NODE", "BEFORE", "AFTER", "GAINED", "LOST");
  for (uint32_t i = 0; i < d->n_nodes; i++)
    printf("%-24s %8u %8u %+8d %8d\n", d->nodes[i].id, d->nodes[i].before, d->nodes[i].after,
           (int)d->nodes[i].gained, -(int)d->nodes[i].lost);
  if (d->n_moves == 0)
    return;
  uint32_t shown = args->all || d->n_moves < TEXT_MOVES ? d->n_moves : TEXT_MOVES;
  printf("\n%-8s %-4s  %s\n", "TOKEN", "SLOT", "FROM -> TO");
  for (uint32_t i = 0; i < shown; i++)
    printf("%-8u %-4u  %s -> %s\n", d->moves[i].token, d->moves[i].slot, d->moves[i].from,
           d->moves[i].to);
  if (shown < d->n_moves)
    printf("(%u more moves: --all)\n", d->n_moves - shown);
}

static int run(ringctl_ctx *ctx, void *ud) {
  const diff_args *args = ud;
  ring_table *a = NULL, *b = NULL;
  int rc = ringctl_read_table(ctx, args->v[0], &a);
  if (rc == RINGCTL_EXIT_OK)
    rc = ringctl_read_table(ctx, args->v[1], &b);
  if (rc == RINGCTL_EXIT_OK && (ring_table_tokens(a) != ring_table_tokens(b) ||
                                ring_table_replicas(a) != ring_table_replicas(b)))
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "versions %llu and %llu differ in T or R",
                     (unsigned long long)args->v[0], (unsigned long long)args->v[1]);
  diff d = {NULL, 0, NULL, 0, 0};
  if (rc == RINGCTL_EXIT_OK && compute(a, b, &d) != RING_OK)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  if (rc == RINGCTL_EXIT_OK && ctx->a->globals->json)
    rc = print_json(args, &d);
  else if (rc == RINGCTL_EXIT_OK)
    print_text(args, &d);
  free(d.nodes);
  free(d.moves);
  ring_table_free(a);
  ring_table_free(b);
  return rc;
}

int ringctl_cmd_diff(ringctl_args *a) {
  diff_args d = {{0, 0}, 0, false};
  bool help_shown = false;
  int rc = ringctl_parse(a, opts, help, take, &d, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (d.n < 2)
    return ringctl_usage_error(a, "want two versions: ringctl diff V1 V2");
  return ringctl_with_etcd(a, run, &d);
}

const ringctl_command ringctl_command_diff = {
    "diff", ringctl_cmd_diff, "what changed between two table versions, per node and move", opts,
    help};
