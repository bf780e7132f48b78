/*
 * arc_int.h: what the files of ringarc share (arc__ names): limits, name
 * and token syntax, and the file-system helpers of arc_fs.c.
 */
#ifndef RING_AGENT_ARC_INT_H
#define RING_AGENT_ARC_INT_H

#include "arc.h"
#include "ring.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

/* Limits. An embedder may lower them at build time. */
#ifndef ARC_FILES_MAX
#define ARC_FILES_MAX 65536u /* files in one arc */
#endif
#ifndef ARC_MANIFEST_JSON_MAX
#define ARC_MANIFEST_JSON_MAX (16u << 20) /* bytes of one manifest document */
#endif
#define ARC_TOKEN_MAX (RING_TOKENS_MAX - 1u)
#define ARC_SIZE_MAX RING_VERSION_MAX /* 2^53-1: exact in every JSON reader */
#define ARC_MANIFEST_FORMAT "ringkeeper.arc-manifest.v1"

/* A file name inside an arc: 1..ARC_NAME_MAX of [A-Za-z0-9._-], not
 * starting with '.' (so never ".", ".." nor hidden). */
bool arc__valid_name(const char *s);
/* A token as the decimal s[0..n): digits only, no leading zero (but "0"),
 * at most ARC_TOKEN_MAX. */
bool arc__parse_token(const char *s, size_t n, uint32_t *out);

/* ------------------------------------------------------------ arc_fs.c */

/* fsync(2) of a directory by path; 0 or a negative errno. */
int arc__fsync_dir(const char *path);
/* Removes path and everything below it (no symlinks followed); 0 or a
 * negative errno of the first failure (the rest is still attempted). */
int arc__rmtree(const char *path);
/* Feeds the first len bytes of fd (from offset 0, with pread) to st;
 * 0, or a negative errno (-EIO if the file is shorter). */
int arc__hash_fd(int fd, uint64_t len, XXH3_state_t *st);
/* A negative errno as a ring_errno: ENOSPC/EDQUOT -> RING_ENOSPC, EEXIST
 * and ENOTEMPTY -> RING_EEXIST, ENOMEM -> RING_ENOMEM, else RING_EIO. */
int arc__errno_code(int neg_errno);

/* --------------------------------------------------------- arc_store.c */

/* <data-dir>/arcs and <data-dir>/tmp, borrowed from the store. */
const char *arc__store_arcs(const arc_store *s);
const char *arc__store_tmp(const arc_store *s);
/* Renames the (fsynced) directory tmpdir to arcs/<token>/ without replacing
 * anything (RING_EEXIST), then fsyncs arcs/ and tmp/. */
int arc__install_dir(arc_store *s, const char *tmpdir, uint32_t token, ring_error *err);

#endif /* RING_AGENT_ARC_INT_H */
