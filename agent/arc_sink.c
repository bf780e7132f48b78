/*
 * arc_sink.c: the bytes of one received file on their way to its
 * descriptor (arc_int.h, arc_sink).
 *
 * A file received from its start is written with O_DIRECT from a staging
 * buffer aligned to ARC_SINK_ALIGN: the received bytes are copied once,
 * into a buffer that stays in the CPU's cache, and the device takes them
 * from there. Bulk migration data then neither evicts the service's hot
 * pages from the page cache nor waits there for writeback, and the copy
 * into fresh page-cache pages (page allocation, delayed allocation,
 * writeback later) is not paid at all: on a 2-core host that copy was the
 * largest single cost of a fetch.
 *
 * The page cache takes the rest: a tail that is not a whole block, a file
 * resumed from a partial one, and file systems without O_DIRECT (fcntl
 * says EINVAL). There writeback is started every ARC_SINK_WRITEBACK bytes
 * (sync_file_range, which does not wait), so the disk writes while more
 * bytes arrive. Either way the file is durable only after fsync, which the
 * fetcher does before it installs the arc.
 */
#define _GNU_SOURCE /* O_DIRECT, sync_file_range */
#include "arc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ARC_SINK_WRITEBACK (1u << 20)
/* Staged bytes wait at most this long for the buffer to fill: a throttled
 * or slow transfer still reaches the disk as it goes (a crash loses at
 * most this much of it; a watcher sees the file grow). */
#define ARC_SINK_LINGER_MS 50

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t); /* a few ms of resolution; no syscall */
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int pwrite_all(int fd, const unsigned char *p, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t w = pwrite(fd, p, n, (off_t)off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return w < 0 ? -errno : -EIO;
    p += w, n -= (size_t)w, off += (uint64_t)w;
  }
  return 0;
}

/* Leaves O_DIRECT for the page cache (for good: later offsets need not be
 * aligned). */
static int go_buffered(arc_sink *s) {
  s->direct = false;
  int fl = fcntl(s->fd, F_GETFL);
  if (fl < 0 || fcntl(s->fd, F_SETFL, fl & ~O_DIRECT) != 0)
    return -errno;
  return 0;
}

/* Starts writeback of what was written through the page cache since the
 * last call; an error here shows again at the fsync, which decides. */
static void start_writeback(arc_sink *s) {
  if (s->size > s->synced)
    sync_file_range(s->fd, (off_t)s->synced, (off_t)(s->size - s->synced), SYNC_FILE_RANGE_WRITE);
  s->synced = s->size;
}

static int write_buffered(arc_sink *s, const unsigned char *p, size_t n) {
  int rc = pwrite_all(s->fd, p, n, s->size);
  if (rc != 0)
    return rc;
  s->size += n;
  if (s->size - s->synced >= ARC_SINK_WRITEBACK)
    start_writeback(s);
  return 0;
}

/* Writes the first n (a multiple of ARC_SINK_ALIGN) staged bytes with
 * O_DIRECT and keeps the rest staged. After a short direct write (a nearly
 * full disk: the offset is no longer aligned) or EINVAL (a file system that
 * accepted the flag but not the write), everything staged goes through the
 * page cache, and so does the rest of the file. */
static int write_staged(arc_sink *s, size_t n) {
  ssize_t w;
  do
    w = pwrite(s->fd, s->buf, n, (off_t)s->size);
  while (w < 0 && errno == EINTR);
  if (w < 0 && errno == EINVAL) /* the file system takes no direct writes after all */
    w = 0;
  else if (w < 0)
    return -errno;
  s->size += (uint64_t)w;
  s->synced = s->size; /* direct writes leave no dirty pages behind */
  s->staged -= (size_t)w;
  memmove(s->buf, s->buf + w, s->staged);
  s->staged_ms = now_ms();
  if ((size_t)w == n)
    return 0;
  int rc = go_buffered(s);
  if (rc == 0 && s->staged > 0)
    rc = write_buffered(s, s->buf, s->staged);
  s->staged = 0;
  return rc;
}

void arc__sink_init(arc_sink *s) { *s = (arc_sink){.fd = -1}; }

void arc__sink_start(arc_sink *s, int fd, uint64_t size) {
  s->fd = fd;
  s->size = s->synced = size;
  s->staged = 0;
  s->direct = false;
  if (size % ARC_SINK_ALIGN != 0)
    return;
  if (s->buf == NULL && posix_memalign((void **)&s->buf, ARC_SINK_ALIGN, ARC_SINK_BUF) != 0) {
    s->buf = NULL;
    return; /* the page cache will do */
  }
  int fl = fcntl(fd, F_GETFL);
  s->direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
}

int arc__sink_write(arc_sink *s, const void *data, size_t n) {
  const unsigned char *p = data;
  if (!s->direct)
    return write_buffered(s, p, n);
  int rc = 0;
  while (n > 0 && rc == 0) {
    if (s->staged == 0)
      s->staged_ms = now_ms();
    size_t k = ARC_SINK_BUF - s->staged < n ? ARC_SINK_BUF - s->staged : n;
    memcpy(s->buf + s->staged, p, k);
    s->staged += k, p += k, n -= k;
    if (s->staged == ARC_SINK_BUF)
      rc = write_staged(s, ARC_SINK_BUF);
  }
  size_t whole = s->staged - s->staged % ARC_SINK_ALIGN;
  if (rc == 0 && s->direct && whole > 0 && now_ms() - s->staged_ms >= ARC_SINK_LINGER_MS)
    rc = write_staged(s, whole);
  return rc;
}

int arc__sink_flush(arc_sink *s) {
  int rc = 0;
  size_t whole = s->staged - s->staged % ARC_SINK_ALIGN;
  if (s->direct && whole > 0)
    rc = write_staged(s, whole);
  if (rc == 0 && s->staged > 0) { /* the tail: not a whole block */
    rc = go_buffered(s);
    if (rc == 0)
      rc = write_buffered(s, s->buf, s->staged);
  }
  s->staged = 0;
  if (rc == 0)
    start_writeback(s);
  return rc;
}

int arc__sink_truncate(arc_sink *s) {
  if (ftruncate(s->fd, 0) != 0)
    return -errno;
  arc__sink_start(s, s->fd, 0);
  return 0;
}

void arc__sink_free(arc_sink *s) {
  free(s->buf);
  arc__sink_init(s);
}
