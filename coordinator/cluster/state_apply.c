/*
 * state_apply.c: one watch event applied to a cluster state
 * (rk__state_apply, cluster_int.h), for the watch-fed cache
 * (state_cache.c).
 *
 * Nothing here judges a record: a put is parsed by the full read's own
 * parser (rk__part_parse) into a scratch state of one key, and what that
 * yields (the key's entry, its bad record) replaces what the key gave
 * before. What is dropped is freed by rk_state_free, the full read's own
 * release. So a value is accepted, tolerated, counted bad or refused
 * exactly as a full read would.
 *
 * Sections: where each part lives in rk_state; single keys; lists; bad
 * records; the event.
 */
#include "cluster_int.h"
#include "ringx.h"

#include <xxhash.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------- where each part lives in rk_state */

/* A single key's fields are the bytes [lo, hi) of rk_state; a list is an
 * array pointer, its count and its element size (every element starts with
 * its id, sorted by it: cluster.h). */
typedef struct layout {
  bool single;
  size_t lo, hi;
  size_t arr, count, size;
} layout;

#define FIELD_END(f) (offsetof(rk_state, f) + sizeof(((rk_state *)0)->f))
#define SINGLE(first, last)                                                                        \
  { true, offsetof(rk_state, first), FIELD_END(last), 0, 0, 0 }
#define LIST(a, n)                                                                                 \
  { false, 0, 0, offsetof(rk_state, a), offsetof(rk_state, n), sizeof(*((rk_state *)0)->a) }

/* In the order of rk__parts (cluster.c). */
static const layout layouts[RK_N_PARTS] = {
    SINGLE(has_config, config_mod),
    SINGLE(version, version_mod),
    LIST(nodes, n_nodes),
    LIST(alive, n_alive),
    SINGLE(has_proposed, proposed_mod),
    SINGLE(has_active, active_mod),
    LIST(acks, n_acks),
    LIST(progress, n_progress),
    SINGLE(has_leader, leader),
    LIST(clients, n_clients),
    SINGLE(has_stuck, stuck_mod),
    LIST(missing, n_missing),
    SINGLE(has_recovered, recovered),
    LIST(recovery, n_recovery),
    LIST(sizes, n_sizes),
};

int rk__part_of(const uint8_t *key, size_t len, size_t plen) {
  if (len < plen)
    return -1;
  const char *rest = (const char *)key + plen;
  size_t n = len - plen;
  for (int i = 0; i < RK_N_PARTS; i++) {
    const rk_part *p = &rk__parts[i];
    size_t w = strlen(p->what);
    if ((p->bit & RK_READ_ALL) && (p->prefix ? n >= w : n == w) && memcmp(rest, p->what, w) == 0)
      return i;
  }
  return -1;
}

static char **arr_of(rk_state *s, const layout *l) { return (char **)((char *)s + l->arr); }
static uint32_t *count_of(rk_state *s, const layout *l) {
  return (uint32_t *)((char *)s + l->count);
}

/* ------------------------------------------------------------ single keys */

/* Moves tmp's fields of the key into s and s's old ones out, freed. */
static void swap_single(rk_state *s, rk_state *tmp, const layout *l) {
  rk_state old = {0};
  memcpy((char *)&old + l->lo, (char *)s + l->lo, l->hi - l->lo);
  memcpy((char *)s + l->lo, (char *)tmp + l->lo, l->hi - l->lo);
  memset((char *)tmp + l->lo, 0, l->hi - l->lo);
  rk_state_free(&old);
}

/* ------------------------------------------------------------------ lists */

/* Where id sits, or would, in a sorted list; *found says which. */
static uint32_t find_id(const char *base, uint32_t n, size_t size, const char *id, bool *found) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (strcmp(base + (size_t)mid * size, id) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = lo < n && strcmp(base + (size_t)lo * size, id) == 0;
  return lo;
}

/* Removes entry `at` of a list of s (and its node_mod, for nodes/). The
 * entry is released by rk_state_free on a state that holds it alone. */
static int remove_at(rk_state *s, const layout *l, uint32_t at, ring_error *err) {
  char *base = *arr_of(s, l);
  uint32_t *n = count_of(s, l);
  rk_state old = {0};
  char *copy = malloc(l->size);
  if (copy == NULL)
    return ring__err(err, RING_ENOMEM, "out of memory applying a change");
  memcpy(copy, base + (size_t)at * l->size, l->size);
  *arr_of(&old, l) = copy;
  *count_of(&old, l) = 1;
  rk_state_free(&old);
  memmove(base + (size_t)at * l->size, base + (size_t)(at + 1) * l->size,
          (size_t)(*n - at - 1) * l->size);
  if (l->arr == offsetof(rk_state, nodes))
    memmove(&s->node_mod[at], &s->node_mod[at + 1], (size_t)(*n - at - 1) * sizeof *s->node_mod);
  (*n)--;
  return RING_OK;
}

/* Grows one array of n elements by one, opening a hole at `at`. */
static int open_hole(char **arr, uint32_t n, size_t size, uint32_t at) {
  char *more = realloc(*arr, (size_t)(n + 1) * size);
  if (more == NULL)
    return RING_ENOMEM;
  memmove(more + (size_t)(at + 1) * size, more + (size_t)at * size, (size_t)(n - at) * size);
  *arr = more;
  return RING_OK;
}

/* Moves tmp's one entry of the list (if its parse made one) into s, in id
 * order. tmp keeps the array, emptied. */
static int insert_from(rk_state *s, rk_state *tmp, const layout *l, ring_error *err) {
  if (*count_of(tmp, l) == 0)
    return RING_OK;
  const char *elem = *arr_of(tmp, l);
  uint32_t n = *count_of(s, l);
  bool found;
  uint32_t at = find_id(*arr_of(s, l), n, l->size, elem, &found);
  bool nodes = l->arr == offsetof(rk_state, nodes);
  if (open_hole(arr_of(s, l), n, l->size, at) != RING_OK ||
      (nodes && open_hole((char **)&s->node_mod, n, sizeof *s->node_mod, at) != RING_OK))
    return ring__err(err, RING_ENOMEM, "out of memory applying a change");
  memcpy(*arr_of(s, l) + (size_t)at * l->size, elem, l->size);
  if (nodes)
    s->node_mod[at] = tmp->node_mod[0];
  (*count_of(s, l))++;
  *count_of(tmp, l) = 0;
  return RING_OK;
}

/* Swaps n bytes of a and b. */
static void swap_bytes(char *a, char *b, size_t n) {
  char buf[256];
  for (size_t at = 0; at < n; at += sizeof buf) {
    size_t k = n - at < sizeof buf ? n - at : sizeof buf;
    memcpy(buf, a + at, k);
    memcpy(a + at, b + at, k);
    memcpy(b + at, buf, k);
  }
}

/* A put of a key s holds an entry for, whose parse made an entry of the
 * same id: swaps it in place of the old one (nothing moves, so a burst of
 * updates costs O(log n) each, not O(n)); tmp keeps the old entry, for
 * rk_state_free. False (nothing done) when it is not that case. */
static bool replace_in_place(rk_state *s, rk_state *tmp, const layout *l, const char *id) {
  bool found;
  if (*count_of(tmp, l) != 1 || strcmp(*arr_of(tmp, l), id) != 0)
    return false;
  uint32_t at = find_id(*arr_of(s, l), *count_of(s, l), l->size, id, &found);
  if (!found)
    return false;
  swap_bytes(*arr_of(s, l) + (size_t)at * l->size, *arr_of(tmp, l), l->size);
  if (l->arr == offsetof(rk_state, nodes))
    s->node_mod[at] = tmp->node_mod[0];
  return true;
}

/* ------------------------------------------------------------ bad records */

/* Removes s's bad record of the key whose hash is h (a key makes one at
 * most). */
static void drop_bad(rk_state *s, uint64_t h) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < s->n_bad; i++)
    if (s->bad[i].key_hash != h)
      s->bad[k++] = s->bad[i];
  s->n_bad = k;
}

/* Adds tmp's bad records to s's, in rk__bad_cmp order. */
static int add_bad(rk_state *s, const rk_state *tmp, ring_error *err) {
  for (uint32_t i = 0; i < tmp->n_bad; i++) {
    rk_bad_record *more = realloc(s->bad, (size_t)(s->n_bad + 1) * sizeof *more);
    if (more == NULL)
      return ring__err(err, RING_ENOMEM, "out of memory applying a change");
    s->bad = more;
    uint32_t at = s->n_bad;
    while (at > 0 && rk__bad_cmp(&s->bad[at - 1], &tmp->bad[i]) > 0)
      at--;
    memmove(&s->bad[at + 1], &s->bad[at], (size_t)(s->n_bad - at) * sizeof *s->bad);
    s->bad[at] = tmp->bad[i];
    s->n_bad++;
  }
  return RING_OK;
}

/* -------------------------------------------------------------- the event */

/* Takes the key's old entry out of a list of s; none when the key names no
 * id (such a key gave a bad record alone). */
static int remove_key(rk_state *s, const layout *l, const ring_kv *kv, size_t prefix_len,
                      ring_error *err) {
  char id[RING_ID_MAX + 1];
  bool found;
  if (!rd_host_key_id(kv, prefix_len, id))
    return RING_OK;
  uint32_t at = find_id(*arr_of(s, l), *count_of(s, l), l->size, id, &found);
  return found ? remove_at(s, l, at, err) : RING_OK;
}

int rk__state_apply(rk_state *s, int part, size_t plen, const ring_event *ev, ring_error *err) {
  const layout *l = &layouts[part];
  size_t prefix_len = plen + strlen(rk__parts[part].what);
  bool put = ev->type == RING_EVENT_PUT;
  ring_kvs one = {.kvs = (ring_kv *)&ev->kv, .n = put, .count = put};
  rk_state tmp = {0};
  char id[RING_ID_MAX + 1];
  drop_bad(s, XXH3_64bits(ev->kv.key, ev->kv.key_len));
  int rc = put || l->single ? rk__part_parse(&tmp, (size_t)part, &one, prefix_len, err) : RING_OK;
  if (rc == RING_OK && l->single)
    swap_single(s, &tmp, l);
  else if (rc == RING_OK &&
           !(put && rd_host_key_id(&ev->kv, prefix_len, id) && replace_in_place(s, &tmp, l, id)) &&
           (rc = remove_key(s, l, &ev->kv, prefix_len, err)) == RING_OK)
    rc = insert_from(s, &tmp, l, err);
  if (rc == RING_OK)
    rc = add_bad(s, &tmp, err);
  rk_state_free(&tmp);
  if (ev->kv.mod_revision > s->revision)
    s->revision = ev->kv.mod_revision;
  return rc;
}
