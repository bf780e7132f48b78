/*
 * state_diff.c: whether two cluster states hold the same records
 * (rk_state_diff, cluster.h): the watch-fed cache's consistency check
 * against a full read (state_cache.c) and the tests that hold the cache to
 * the full read use this one comparison.
 *
 * Records are compared by what their encoders write, not by their bytes in
 * memory (padding and what follows a string's NUL are not the record), and
 * a record that cannot be encoded (a malformed host value read as zeroes)
 * equals another only when neither encodes.
 *
 * Sections: one record; one list; the state.
 */
#include "cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ one record */

typedef int (*encoder)(const void *rec, char **json, size_t *len);

/* Whether a and b encode alike (or both fail to). */
static bool same_encoding(encoder enc, const void *a, const void *b) {
  char *ja = NULL, *jb = NULL;
  size_t la = 0, lb = 0;
  int ra = enc(a, &ja, &la), rb = enc(b, &jb, &lb);
  bool same = ra == rb && (ra != RING_OK || (la == lb && memcmp(ja, jb, la) == 0));
  free(ja);
  free(jb);
  return same;
}

static int enc_config(const void *r, char **j, size_t *n) { return rk_config_encode(r, j, n); }
static int enc_node(const void *r, char **j, size_t *n) { return rk_node_encode(r, j, n); }
static int enc_alive(const void *r, char **j, size_t *n) {
  const rk_alive_entry *e = r;
  return e->valid ? rk_alive_encode(&e->a, j, n) : RING_EINVAL;
}
static int enc_progress(const void *r, char **j, size_t *n) {
  return rk_progress_encode(&((const rk_agent_progress *)r)->p, j, n);
}
static int enc_missing(const void *r, char **j, size_t *n) {
  return rk_missing_encode(&((const rk_agent_missing *)r)->m, j, n);
}
static int enc_recovery(const void *r, char **j, size_t *n) {
  return rk_recovery_encode(&((const rk_agent_recovery *)r)->r, j, n);
}
static int enc_leader(const void *r, char **j, size_t *n) { return rk_leader_encode(r, j, n); }
static int enc_stuck(const void *r, char **j, size_t *n) { return rk_stuck_encode(r, j, n); }
static int enc_run(const void *r, char **j, size_t *n) { return rk_run_encode(r, j, n); }
static int enc_recovered(const void *r, char **j, size_t *n) {
  return ring__recovered_encode(r, j, n);
}

/* -------------------------------------------------------------- one list */

/* A list of a state: n entries of `size` bytes, each starting with its id
 * (the lists' shared rule, cluster.h). */
typedef struct list {
  const char *name;
  const void *a, *b;
  uint32_t na, nb;
  size_t size;
  encoder enc; /* NULL: the id alone, plus `extra` */
  bool (*extra)(const void *a, const void *b);
} list;

static bool same_ack(const void *a, const void *b) {
  return ((const rd_ack *)a)->version == ((const rd_ack *)b)->version;
}
static bool same_alive(const void *a, const void *b) {
  const rk_alive_entry *x = a, *y = b;
  return x->valid == y->valid && x->lease == y->lease && same_encoding(enc_alive, a, b);
}

/* Writes the first difference of l into why; false when there is one. */
static bool same_list(const list *l, char *why, size_t cap) {
  if (l->na != l->nb)
    return snprintf(why, cap, "%s: %u entries, %u", l->name, l->na, l->nb), false;
  for (uint32_t i = 0; i < l->na; i++) {
    const char *x = (const char *)l->a + i * l->size, *y = (const char *)l->b + i * l->size;
    bool same = strcmp(x, y) == 0 && (l->extra == NULL || l->extra(x, y)) &&
                (l->enc == NULL || same_encoding(l->enc, x, y));
    if (!same)
      return snprintf(why, cap, "%s/%.63s differs (%.63s)", l->name, x, y), false;
  }
  return true;
}

/* ------------------------------------------------------------- the state */

/* A single key of the state: present in both or neither, the same mod
 * revision where the state keeps one, the same record. */
static bool same_single(const char *name, bool ha, bool hb, int64_t ma, int64_t mb, encoder enc,
                        const void *a, const void *b, char *why, size_t cap) {
  if (ha != hb || ma != mb || (ha && enc != NULL && !same_encoding(enc, a, b)))
    return snprintf(why, cap, "%s differs (mod revision %" PRId64 ", %" PRId64 ")", name, ma, mb),
           false;
  return true;
}

static bool same_singles(const rk_state *a, const rk_state *b, char *why, size_t cap) {
  return same_single("config", a->has_config, b->has_config, a->config_mod, b->config_mod,
                     enc_config, &a->config, &b->config, why, cap) &&
         same_single("version", a->version != b->version, false, a->version_mod, b->version_mod,
                     NULL, NULL, NULL, why, cap) &&
         same_single("plan/proposed", a->has_proposed, b->has_proposed, a->proposed_mod,
                     b->proposed_mod, NULL, NULL, NULL, why, cap) &&
         same_single("plan/active", a->has_active, b->has_active, a->active_mod, b->active_mod,
                     enc_run, &a->active, &b->active, why, cap) &&
         same_single("leader", a->has_leader, b->has_leader, 0, 0, enc_leader, &a->leader,
                     &b->leader, why, cap) &&
         same_single("stuck", a->has_stuck, b->has_stuck, a->stuck_mod, b->stuck_mod, enc_stuck,
                     &a->stuck, &b->stuck, why, cap) &&
         same_single("recovered", a->has_recovered, b->has_recovered, 0, 0, enc_recovered,
                     &a->recovered, &b->recovered, why, cap);
}

static bool same_node_mods(const rk_state *a, const rk_state *b, char *why, size_t cap) {
  for (uint32_t i = 0; i < a->n_nodes && i < b->n_nodes; i++)
    if (a->node_mod[i] != b->node_mod[i])
      return snprintf(why, cap, "nodes/%s: mod revision differs", a->nodes[i].id), false;
  return true;
}

static bool same_bad(const rk_state *a, const rk_state *b, char *why, size_t cap) {
  if (a->n_bad != b->n_bad)
    return snprintf(why, cap, "bad records: %u, %u", a->n_bad, b->n_bad), false;
  for (uint32_t i = 0; i < a->n_bad; i++) {
    const rk_bad_record *x = &a->bad[i], *y = &b->bad[i];
    if (x->kind != y->kind || x->mod_revision != y->mod_revision || strcmp(x->host, y->host) ||
        strcmp(x->why, y->why)) {
      char t[RK_BAD_WHY_MAX + 80];
      return snprintf(why, cap, "bad record differs: %s", rk_bad_text(x, t, sizeof t)), false;
    }
  }
  return true;
}

bool rk_state_diff(const rk_state *a, const rk_state *b, char *why, size_t cap) {
  const list lists[] = {
      {"nodes", a->nodes, b->nodes, a->n_nodes, b->n_nodes, sizeof *a->nodes, enc_node, NULL},
      {"alive", a->alive, b->alive, a->n_alive, b->n_alive, sizeof *a->alive, NULL, same_alive},
      {"acks", a->acks, b->acks, a->n_acks, b->n_acks, sizeof *a->acks, NULL, same_ack},
      {"progress", a->progress, b->progress, a->n_progress, b->n_progress, sizeof *a->progress,
       enc_progress, NULL},
      {"clients", a->clients, b->clients, a->n_clients, b->n_clients, sizeof *a->clients, NULL,
       NULL},
      {"missing", a->missing, b->missing, a->n_missing, b->n_missing, sizeof *a->missing,
       enc_missing, NULL},
      {"recovery", a->recovery, b->recovery, a->n_recovery, b->n_recovery, sizeof *a->recovery,
       enc_recovery, NULL},
  };
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    if (!same_list(&lists[i], why, cap))
      return false;
  return same_node_mods(a, b, why, cap) && same_singles(a, b, why, cap) && same_bad(a, b, why, cap);
}
