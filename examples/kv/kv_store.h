/*
 * kv_store.h: ring-kv's storage (PROTOCOL.md, "Storage"). Values live in
 * immutable segment files inside the arc directories the agents move:
 *
 *   <data-dir>/arcs/<token>/seg-<ms>-<seq>-<node>.kv    tokens this node owns
 *   <data-dir>/kv/staging/<token>/seg-...kv              tokens it is pending for
 *   <data-dir>/kv/tmp/                                   segments being written
 *
 * A segment is written to kv/tmp/, fsynced and renamed into its directory,
 * so every file an agent may stream is whole. Writes that arrive together
 * are committed together (group commit): one segment per token touched,
 * one round of syncs for the batch. kv_store_put returns once its record
 * is durable in a sealed file.
 *
 * While this node is only pending for a token its writes go to staging,
 * not arcs/<token>/: the agent replaces that directory whole when it
 * installs the arc it fetches, and removes a copy it did not verify.
 * kv_store_adopt moves staging into the arc once the node owns the token.
 *
 * The index (key -> segment, offset, timestamp) is in memory, one map per
 * token, rebuilt from the files at open and whenever the arc directory is
 * replaced (a new inode: an agent installed or removed it). Values are not
 * cached: a read is one pread. Records merge by timestamp, newest wins
 * (kv_rec_newer), so segments from other nodes merge by being read.
 *
 * Threads: every function may be called from any thread. Each token has a
 * mutex held for its index updates, reads, rebuilds and compactions; one
 * committer thread writes segments, one compactor thread merges them.
 *
 * Errors are ring_errno values (ring.h): RING_OK, RING_ENOTFOUND,
 * RING_EINVAL, RING_ENOMEM, RING_EIO, RING_ENOSPC.
 */
#ifndef RING_KV_STORE_H
#define RING_KV_STORE_H

#include "kv_segment.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_TOKENS_MAX 65536u
#define KV_NO_TOKEN UINT32_MAX

typedef struct kv_store kv_store;

/* Optional log sink: level 0 info, 1 warning; path may be NULL. */
typedef void (*kv_log_fn)(void *ud, int level, const char *msg, const char *path);

typedef struct kv_store_opts {
  const char *data_dir;      /* shared with the host's ring-agent */
  const char *node_id;       /* goes into segment names ([a-z0-9._-]{1,63}) */
  uint32_t commit_window_us; /* after a first write, wait this long for more; 0: none */
  uint32_t max_batch;        /* writes per group commit; 0: 256 */
  uint32_t max_segments;     /* per token directory before it is compacted; 0: 8 */
  kv_log_fn log;             /* or NULL */
  void *log_ud;
} kv_store_opts;

/* Opens the store: creates arcs/, kv/tmp/ and kv/staging/ as needed,
 * removes what kv/tmp/ holds (writes a crash cut short: never acknowledged,
 * never visible) and indexes every segment under arcs/ and kv/staging/.
 * Starts the committer and compactor threads. On failure msg says why and
 * nothing is left running. */
int kv_store_open(const kv_store_opts *o, kv_store **out, char *msg, size_t cap);
/* Stops the threads (queued writes are committed first) and frees all. */
void kv_store_close(kv_store *s);

typedef enum kv_where { KV_ARC = 0, KV_STAGING = 1 } kv_where;

/* Writes a value (or, with tombstone, a deletion) of key with timestamp
 * ts into token's arc or staging directory; returns RING_OK once it is
 * durable in a sealed segment, or RING_EIO / RING_ENOSPC / RING_ENOMEM
 * (then nothing is visible). RING_EINVAL for an empty or oversized key or
 * value, or a token >= KV_TOKENS_MAX. */
int kv_store_put(kv_store *s, uint32_t token, kv_where where, const void *key, size_t klen,
                 const void *value, size_t vlen, bool tombstone, uint64_t ts);

typedef struct kv_value {
  uint8_t *data; /* malloc()'ed value (NULL for a tombstone); kv_value_free it */
  size_t len;
  uint64_t ts;
  bool tombstone; /* the newest record deletes the key */
} kv_value;

/* Reads the newest record of key in token. RING_OK with *out filled (a
 * value or a tombstone), RING_ENOTFOUND when the token holds no record of
 * the key, RING_EIO/RING_ENOMEM on failure. Unless the arguments are
 * invalid (RING_EINVAL, *out untouched), *out is initialised on every
 * return, so kv_value_free(out) is always safe after the call. */
int kv_store_get(kv_store *s, uint32_t token, const void *key, size_t klen, kv_value *out);
void kv_value_free(kv_value *v);

/* Rebuilds token's index if arcs/<token>/ is not the directory indexed
 * last (an agent installed, replaced or removed it). RING_OK either way. */
int kv_store_refresh(kv_store *s, uint32_t token);
/* Rebuilds token's index from its files now. */
int kv_store_rebuild(kv_store *s, uint32_t token);
/* Whether arcs/<token>/ is missing on a data dir the agent has placed:
 * the agent's marker `placed` is there (it has owned arcs here, or found
 * this dir replacing a wiped one) and arcs/<token>/ is not. Without the
 * marker (a first placement under way, or no agent) an absent arc is not
 * missing: a write makes it. */
bool kv_store_arc_missing(kv_store *s, uint32_t token);
/* Whether kv/staging/<token>/ holds segments. */
bool kv_store_has_staging(kv_store *s, uint32_t token);
/* Moves token's staging segments into arcs/<token>/ (made if missing),
 * fsyncing both directories; a crash midway leaves each file in one of
 * the two, and calling it again finishes. */
int kv_store_adopt(kv_store *s, uint32_t token);
/* Removes token's staging segments (a cancelled move). */
int kv_store_drop_staging(kv_store *s, uint32_t token);
/* Merges token's segments in one directory into one segment holding the
 * newest record of each key (tombstones kept: an older value may still
 * arrive from another node), renamed in before the old files are
 * unlinked. A no-op with fewer than two segments. */
int kv_store_compact(kv_store *s, uint32_t token, kv_where where);
/* The first token >= from that the store holds anything for (index or
 * directories), or KV_NO_TOKEN. */
uint32_t kv_store_next_token(kv_store *s, uint32_t from);

typedef struct kv_store_stats {
  uint64_t keys;        /* index entries, all tokens */
  uint64_t segments;    /* segment files indexed */
  uint64_t commits;     /* group commits */
  uint64_t writes;      /* records committed */
  uint64_t bytes;       /* segment bytes written by commits */
  uint64_t compactions; /* directories compacted */
  uint64_t rebuilds;    /* token indexes rebuilt */
  uint64_t torn;        /* segments found torn (their good prefix is used) */
  uint64_t io_errors;   /* failed commits and reads */
} kv_store_stats;
void kv_store_stats_get(kv_store *s, kv_store_stats *out);

#endif /* RING_KV_STORE_H */
