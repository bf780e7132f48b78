/*
 * test_arc_sink.c: a received file's way to disk (arc_sink.c). Every path
 * ends with the file byte-identical to what was written: direct writes from
 * the staging buffer with a tail through the page cache, a resumed file at
 * an unaligned size, a slow stream that must not linger in memory, a
 * restart from empty, a direct write the disk cuts short, and a full disk.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "arc_int.h"
#include "check_main.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/arc-sink-XXXXXX";

static void setup(void) {
  strcpy(dir, "/tmp/arc-sink-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) { arc__rmtree(dir); }

static unsigned char byte_at(uint64_t i) { return (unsigned char)(i * 2654435761u >> 13); }

static int open_in(const char *d, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", d, name);
  int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ck_assert_int_ge(fd, 0);
  return fd;
}

/* Writes bytes [from, to) of the pattern in chunks of `chunk` bytes. */
static void put(arc_sink *s, uint64_t from, uint64_t to, size_t chunk) {
  unsigned char *b = malloc(chunk);
  for (uint64_t off = from; off < to;) {
    size_t n = to - off < chunk ? (size_t)(to - off) : chunk;
    for (size_t i = 0; i < n; i++)
      b[i] = byte_at(off + i);
    ck_assert_int_eq(arc__sink_write(s, b, n), 0);
    off += n;
  }
  free(b);
}

/* The file holds exactly bytes [0, size) of the pattern. Read through a
 * descriptor of its own: the sink's may have O_DIRECT set. */
static void check_file(const char *d, uint64_t size) {
  char p[4096];
  snprintf(p, sizeof p, "%s/f", d);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  struct stat st;
  ck_assert_int_eq(fstat(fd, &st), 0);
  ck_assert_int_eq((long long)st.st_size, (long long)size);
  static unsigned char b[65536], want[65536];
  for (uint64_t off = 0; off < size;) {
    ssize_t n = pread(fd, b, sizeof b, (off_t)off);
    ck_assert_int_gt(n, 0);
    for (ssize_t i = 0; i < n; i++)
      want[i] = byte_at(off + (uint64_t)i);
    ck_assert_msg(memcmp(b, want, (size_t)n) == 0, "bytes differ in [%llu, +%zd)",
                  (unsigned long long)off, n);
    off += (uint64_t)n;
  }
  close(fd);
}

/* Whether this directory's file system takes O_DIRECT at all. */
static bool takes_direct(const char *d) {
  char p[4096];
  snprintf(p, sizeof p, "%s/probe", d);
  int fd = open(p, O_WRONLY | O_CREAT | O_DIRECT, 0644);
  if (fd >= 0)
    close(fd);
  unlink(p);
  return fd >= 0;
}

/* A sink on a new file d/f, started empty; returns the file's descriptor. */
static int open_sink(const char *d, arc_sink *s) {
  int fd = open_in(d, "f");
  arc__sink_init(s);
  arc__sink_start(s, fd, 0);
  return fd;
}

/* Flushes, checks the file holds bytes [0, size), frees and closes. */
static void finish(arc_sink *s, const char *d, int fd, uint64_t size) {
  ck_assert_int_eq(arc__sink_flush(s), 0);
  check_file(d, size);
  arc__sink_free(s);
  close(fd);
}

START_TEST(direct_then_tail) {
  arc_sink s;
  int fd = open_sink(dir, &s);
  bool direct = takes_direct(dir);
  ck_assert(s.direct == direct);
  uint64_t total = 2 * ARC_SINK_BUF + 5 * ARC_SINK_ALIGN + 123;
  put(&s, 0, 2 * ARC_SINK_BUF + 1000, 7777); /* odd chunks across the buffer's end */
  if (direct) { /* two full buffers (or, on a slow machine, more whole blocks) went to disk */
    ck_assert_uint_ge(s.size, 2 * ARC_SINK_BUF);
    ck_assert_uint_eq(s.size % ARC_SINK_ALIGN, 0);
    ck_assert_uint_eq(s.size + s.staged, 2 * ARC_SINK_BUF + 1000);
  }
  put(&s, 2 * ARC_SINK_BUF + 1000, total, 7777);
  ck_assert_int_eq(arc__sink_flush(&s), 0);
  ck_assert_uint_eq(s.size, total);
  ck_assert_uint_eq(s.staged, 0);
  ck_assert(!s.direct || total % ARC_SINK_ALIGN == 0); /* the tail left O_DIRECT */
  check_file(dir, total);
  arc__sink_free(&s);
  close(fd);
}
END_TEST

START_TEST(resume_at_an_unaligned_size) {
  arc_sink s;
  int fd = open_sink(dir, &s);
  put(&s, 0, 5000, 5000);
  ck_assert_int_eq(arc__sink_flush(&s), 0);
  arc__sink_free(&s);
  /* as a later attempt finds it: 5000 bytes, not a whole block */
  arc__sink_init(&s);
  arc__sink_start(&s, fd, 5000);
  ck_assert(!s.direct);
  put(&s, 5000, 3 * ARC_SINK_BUF, 65536);
  ck_assert_int_eq(arc__sink_flush(&s), 0);
  check_file(dir, 3 * ARC_SINK_BUF);
  /* at an aligned size it may go direct again */
  arc__sink_start(&s, fd, 3 * ARC_SINK_BUF);
  ck_assert(s.direct == takes_direct(dir));
  put(&s, 3 * ARC_SINK_BUF, 3 * ARC_SINK_BUF + 4096, 4096);
  finish(&s, dir, fd, 3 * ARC_SINK_BUF + 4096);
}
END_TEST

START_TEST(a_slow_stream_reaches_the_disk) {
  arc_sink s;
  int fd = open_sink(dir, &s);
  put(&s, 0, 3 * ARC_SINK_ALIGN + 10, 4096);
  /* a fixed time is the point: the sink writes held bytes once they have
   * waited longer than it lets them (its next put), whatever their count */
  usleep(80 * 1000);
  put(&s, 3 * ARC_SINK_ALIGN + 10, 3 * ARC_SINK_ALIGN + 20, 10);
  struct stat st;
  ck_assert_int_eq(fstat(fd, &st), 0);
  ck_assert_int_ge(st.st_size, 3 * ARC_SINK_ALIGN); /* whole blocks written, not held */
  finish(&s, dir, fd, 3 * ARC_SINK_ALIGN + 20);
}
END_TEST

START_TEST(truncate_starts_over) {
  arc_sink s;
  int fd = open_sink(dir, &s);
  put(&s, 0, ARC_SINK_BUF + 777, 100000);
  ck_assert_int_eq(arc__sink_truncate(&s), 0); /* staged bytes dropped with the rest */
  ck_assert_uint_eq(s.size, 0);
  ck_assert_uint_eq(s.staged, 0);
  put(&s, 0, 9999, 3333);
  finish(&s, dir, fd, 9999);
}
END_TEST

/* A tmpfs of `size` at a new directory in mnt (a template); false (and
 * said) when this process may not mount one. */
static bool mount_tmpfs(char *mnt, const char *size, const char *test) {
  ck_assert_ptr_nonnull(mkdtemp(mnt));
  char opts[32];
  snprintf(opts, sizeof opts, "size=%s", size);
  if (mount("tmpfs", mnt, "tmpfs", 0, opts) == 0)
    return true;
  fprintf(stderr, "%s: skipped, cannot mount a tmpfs (%s)\n", test, strerror(errno));
  rmdir(mnt);
  return false;
}

static void unmount_tmpfs(char *mnt) {
  umount2(mnt, MNT_DETACH);
  rmdir(mnt);
}

/* Writes 4 MiB more into s, which has less room than that: -ENOSPC. */
static void overfill(arc_sink *s) {
  int rc = 0;
  static const unsigned char b[65536];
  for (int i = 0; i < 64 && rc == 0; i++)
    rc = arc__sink_write(s, b, sizeof b);
  if (rc == 0)
    rc = arc__sink_flush(s);
  ck_assert_int_eq(rc, -ENOSPC);
}

/* A tmpfs: O_DIRECT on kernels that take it there, the page cache on the
 * others; either way the bytes are right, and a full one says ENOSPC
 * (here through the page cache: the unaligned tail left O_DIRECT). */
START_TEST(tmpfs_and_a_full_disk) {
  char mnt[] = "/tmp/arc-sink-mnt-XXXXXX";
  if (!mount_tmpfs(mnt, "2m", "tmpfs_and_a_full_disk"))
    return;
  arc_sink s;
  int fd = open_sink(mnt, &s);
  put(&s, 0, 1000 * 1000 + 1, 65536);
  ck_assert_int_eq(arc__sink_flush(&s), 0);
  check_file(mnt, 1000 * 1000 + 1);
  overfill(&s);
  arc__sink_free(&s);
  close(fd);
  unmount_tmpfs(mnt);
}
END_TEST

/* A direct write the disk can take only part of: the rest of the staged
 * bytes go through the page cache, which then says ENOSPC; nothing written
 * before is lost. */
START_TEST(a_direct_write_cut_short) {
  char mnt[] = "/tmp/arc-sink-mnt-XXXXXX";
  if (!mount_tmpfs(mnt, "2m", "a_direct_write_cut_short"))
    return;
  arc_sink s;
  int fd = open_sink(mnt, &s);
  if (!s.direct) {
    fprintf(stderr, "a_direct_write_cut_short: skipped, this tmpfs takes no O_DIRECT\n");
  } else {
    put(&s, 0, 3 * ARC_SINK_BUF / 2, 65536); /* whole blocks: the sink stays direct */
    ck_assert_int_eq(arc__sink_flush(&s), 0);
    ck_assert(s.direct);
    check_file(mnt, 3 * ARC_SINK_BUF / 2);
    overfill(&s); /* a full buffer into half a buffer of room */
    ck_assert(!s.direct);
  }
  arc__sink_free(&s);
  close(fd);
  unmount_tmpfs(mnt);
}
END_TEST

int main(void) {
  Suite *s = suite_create("arc_sink");
  TCase *tc = tcase_create("sink");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, direct_then_tail);
  tcase_add_test(tc, resume_at_an_unaligned_size);
  tcase_add_test(tc, a_slow_stream_reaches_the_disk);
  tcase_add_test(tc, truncate_starts_over);
  tcase_add_test(tc, tmpfs_and_a_full_disk);
  tcase_add_test(tc, a_direct_write_cut_short);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
