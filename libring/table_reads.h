/*
 * table_reads.h: the process's last few tables read whole from etcd
 * (table_reads.c), for libring's watcher and the tests. Not installed.
 */
#ifndef RING_TABLE_READS_H
#define RING_TABLE_READS_H

#include "ring_int.h"

#define RING__READ_KEY_MAX 160

/* Which value a table was built from: the etcd cluster id of the replies
 * (0: unknown, never shared), the key, and the key's create and mod
 * revisions. */
typedef struct ring__read_id {
  uint64_t etcd;
  char key[RING__READ_KEY_MAX];
  size_t key_len;
  int64_t create_rev, mod_rev;
} ring__read_id;

/* Whether a table of id's etcd cluster and key is kept (revisions aside):
 * then a keys-only read of the key, for its revisions, may save reading
 * the value. */
bool ring__table_reads_known(const ring__read_id *id);

/* A new reference to the table kept for exactly id (etcd, key and both
 * revisions), or NULL. The caller frees it with ring_table_free. */
ring_table *ring__table_reads_find(const ring__read_id *id);

/* Keeps a reference to t (sealed, read from id's value and checked) for
 * the next watcher; replaces the entry of the same key, else the least
 * recently used. Nothing when id's etcd cluster id is 0. */
void ring__table_reads_keep(const ring__read_id *id, const ring_table *t);

typedef struct ring__table_reads_stats {
  uint64_t hits, kept;
} ring__table_reads_stats;
void ring__table_reads_stats_get(ring__table_reads_stats *out);

/* Drops every kept table (for tests that count allocations, and for a
 * process done with its watchers). */
void ring__table_reads_clear(void);

#endif /* RING_TABLE_READS_H */
