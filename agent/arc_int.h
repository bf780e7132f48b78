/*
 * arc_int.h: what the files of ringarc share (arc__ names): the
 * file-system helpers of arc_fs.c and the pieces below. The limits, name
 * and token syntax of arcs are the manifest's (proto/arc_manifest.h).
 */
#ifndef RING_AGENT_ARC_INT_H
#define RING_AGENT_ARC_INT_H

#include "arc.h"
#include "ring.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <xxhash.h>
#if defined(__x86_64__) && !defined(XXH_INLINE_ALL)
/* Files are hashed with AVX2 or AVX-512 where the CPU has them (libxxhash
 * picks at run time; xxhash.h alone means SSE2, half the speed). */
#include <xxh_x86dispatch.h>
#endif

/* ---------------------------------------------------------- arc_auth.c */

/* Wall-clock Unix ms. Only for request times, which are other hosts' wall
 * clocks: compared within a bound to decide accept or refuse, never used
 * to wait or to measure an interval. */
int64_t arc__wall_ms(void);

/* ------------------------------------------------------------ arc_fs.c */

/* fsync(2) of a directory by path; 0 or a negative errno. */
int arc__fsync_dir(const char *path);
/* Removes path and everything below it (no symlinks followed); 0 or a
 * negative errno of the first failure (the rest is still attempted). */
int arc__rmtree(const char *path);
/* Feeds the first len bytes of fd (from offset 0, with pread) to st;
 * 0, or a negative errno (-EIO if the file is shorter). */
int arc__hash_fd(int fd, uint64_t len, XXH3_state_t *st);
/* Opens name under dfd for reading, only a regular file: O_NOFOLLOW (a
 * symbolic link is refused) and O_NONBLOCK (a FIFO or a device cannot
 * block the open), then the type is checked on the descriptor itself, so
 * nothing can be swapped in between a check and the open. O_NONBLOCK is
 * cleared before returning. The descriptor (*st its fstat), -ENOTSUP when
 * the name is not a regular file (a FIFO, socket, device, directory or
 * symbolic link: the caller counts it as refused), or another negative
 * errno. */
int arc__open_regular(int dfd, const char *name, struct stat *st);
/* A negative errno as a ring_errno: ENOSPC/EDQUOT -> RING_ENOSPC, EEXIST
 * and ENOTEMPTY -> RING_EEXIST, ENOMEM -> RING_ENOMEM, else RING_EIO. */
int arc__errno_code(int neg_errno);

/* ----------------------------------------------------------- arc_sink.c */

#ifndef ARC_SINK_BUF
#define ARC_SINK_BUF (1u << 20) /* the O_DIRECT staging buffer, bytes */
#endif
#define ARC_SINK_ALIGN 4096u /* offsets, lengths and buffer of direct writes */

/* Where a received file's bytes go: appended at size, through O_DIRECT
 * when the file is written from a block boundary and the file system takes
 * it, else through the page cache (arc_sink.c says why). Staged bytes are
 * written when the buffer is full or has waited 50 ms. Not durable until
 * the caller fsyncs. */
typedef struct arc_sink {
  int fd;             /* borrowed: the caller opens and closes it */
  bool direct;        /* O_DIRECT is set on fd */
  unsigned char *buf; /* ARC_SINK_BUF bytes, ARC_SINK_ALIGN-aligned, once direct */
  size_t staged;      /* bytes in buf, not yet written */
  int64_t staged_ms;  /* when the oldest of them came (CLOCK_MONOTONIC_COARSE) */
  uint64_t size;      /* bytes written to fd: where the next ones go */
  uint64_t synced;    /* writeback started up to here */
} arc_sink;

void arc__sink_init(arc_sink *s);
/* Appends from now on to fd, which holds size bytes (a sink that cannot go
 * direct writes through the page cache). */
void arc__sink_start(arc_sink *s, int fd, uint64_t size);
/* 0 or a negative errno; bytes may stay staged until arc__sink_flush. */
int arc__sink_write(arc_sink *s, const void *p, size_t n);
/* Everything staged written to fd (size then counts it) and its writeback
 * started; 0 or a negative errno. */
int arc__sink_flush(arc_sink *s);
/* Drops what is staged and empties the file. 0 or a negative errno. */
int arc__sink_truncate(arc_sink *s);
/* Bytes taken so far: written to fd or staged. */
static inline uint64_t arc__sink_bytes(const arc_sink *s) { return s->size + s->staged; }
/* Frees the staging buffer; the sink may be started again. */
void arc__sink_free(arc_sink *s);

/* --------------------------------------------------------- arc_store.c */

/* <data-dir>/arcs and <data-dir>/tmp, borrowed from the store. */
const char *arc__store_arcs(const arc_store *s);
const char *arc__store_tmp(const arc_store *s);
/* Opens arcs/<token>/ (O_DIRECTORY | O_NOFOLLOW: a symbolic link is not an
 * arc). The descriptor (caller closes), RING_ENOTFOUND when the arc is not
 * held, RING_EUNAVAIL when arcs/ itself cannot be opened, RING_EIO. */
int arc__store_open_arc(arc_store *s, uint32_t token, ring_error *err);
/* Counts a name in arcs/<token>/ refused as not a regular file and keeps
 * it as the last one (arc_store_refused). */
void arc__store_refuse(arc_store *s, uint32_t token, const char *name);
/* Renames the (fsynced) directory tmpdir to arcs/<token>/ without replacing
 * anything (RING_EEXIST), then fsyncs arcs/ and tmp/. */
int arc__install_dir(arc_store *s, const char *tmpdir, uint32_t token, ring_error *err);

#endif /* RING_AGENT_ARC_INT_H */
