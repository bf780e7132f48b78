/*
 * journal.h: the cluster's journal (proto/etcd.md, `journal/`): one
 * record per event that changes what the cluster is without being a plan,
 * such as a node's address following its agent to another host. Plans
 * have their own history (plan/history/); the journal says who changed
 * what else, and when.
 * Internal to Ringkeeper: part of the ringproto library (proto/CMakeLists.txt),
 * which the daemons and ringctl link; never part of libring.
 *
 * The decoder validates every rule, names the offending field in err,
 * never reads past len and leaves *out untouched on failure. The encoder
 * writes canonical compact JSON into a malloc()'ed, NUL-terminated string
 * the caller free()s, and refuses (RING_EINVAL) what its decoder refuses.
 */
#ifndef RING_PROTO_JOURNAL_H
#define RING_PROTO_JOURNAL_H

#include "records.h"

#include <stddef.h>
#include <stdint.h>

#define RK_EVENT_VALUE_MAX 1024u /* a journal value's cap, checked before parsing */
#define RK_EVENT_BY_MAX 127      /* bytes of `by` */
#define RK_EVENT_DETAIL_MAX 240  /* bytes of `detail` */
#define RK_JOURNAL_KEEP 1000     /* entries the leader keeps; older ones are deleted */
#define RK_JOURNAL_NAME_LEN 30   /* "<13-digit ms>-<16 hex digits>" */

typedef struct rk_event {
  uint64_t at_ms;                       /* when (Unix ms, the writer's clock: display only) */
  char by[RK_EVENT_BY_MAX + 1];         /* who: "coordinator/<id>", "<user>@<host>" */
  char what[RING_ID_MAX + 1];           /* the kind, [a-z0-9._-]{1,63}, e.g. "node.addr" */
  char node[RING_ID_MAX + 1];           /* the node concerned, or "" */
  char detail[RK_EVENT_DETAIL_MAX + 1]; /* one printable line, e.g. "a:1 -> b:2" */
} rk_event;

int rk_event_decode(const char *json, size_t len, rk_event *out, ring_error *err);
int rk_event_encode(const rk_event *e, char **json, size_t *len);

/* Fills e from its parts: detail and by are cut to fit, and bytes outside
 * printable ASCII become '?', so any text a caller has makes a valid
 * event. Returns RING_EINVAL when what or node is not a valid id (node may
 * be NULL or ""). */
int rk_event_make(rk_event *e, uint64_t at_ms, const char *by, const char *what, const char *node,
                  const char *detail);

/* The key of a new entry, "/ringkeeper/<cluster>/journal/<ms>-<nonce>",
 * from a random 64-bit nonce: entries are ordered by their create
 * revision, never by the name (writers' clocks differ). Returns the key's
 * length or RING_EINVAL. */
int rk_journal_key(char key[RK_KEY_MAX], const char *cluster, uint64_t at_ms, uint64_t nonce);

/* A new entry, ready to put: its key (as rk_journal_key, with a random
 * nonce) and its encoded value (malloc()'ed, *value free()d by the
 * caller). Returns the key's length, or RING_EINVAL when what or node is
 * not an id (rk_event_make), RING_ENOMEM. */
int rk_journal_entry(const char *cluster, uint64_t at_ms, const char *by, const char *what,
                     const char *node, const char *detail, char key[RK_KEY_MAX], char **value,
                     size_t *len);

#endif /* RING_PROTO_JOURNAL_H */
