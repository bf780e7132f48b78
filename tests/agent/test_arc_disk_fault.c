/*
 * test_arc_disk_fault.c: a disk that fails the fetcher's writes, for real.
 *
 * The destination store lives on ext4 on a loop device whose backing file
 * sits on a tmpfs with almost no room left, so the device fails every write
 * it cannot place, as thin-provisioned storage does when its pool runs
 * out. The kernel takes that as it takes a dying disk's EIO: a writeback
 * error that fsync reports once, after which the pages stay, clean, holding
 * bytes the disk never got, and a later open, read or fsync sees nothing
 * wrong. The fetch must fail and install nothing, and the next attempt must
 * not trust what it left behind: it copies the arc again, and the installed
 * arc, read back from the device after a remount, is the source's.
 *
 * The same disk, healthy, stands in for a power cut: its device's bytes,
 * copied after each install, must hold every arc installed so far.
 *
 * Needs root, a loop device and mkfs.ext4; says "skipped" otherwise, or
 * fails when RING_REQUIRE_LOOP is set (tests/run.sh sets it: CI has them).
 */
#include "arc_env.h"
#include "check_main.h"

#include <check.h>
#include <errno.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#define DISK_BYTES (64u << 20)
#define TOKEN 40u
#define FILE_BYTES ((8u << 20) + 123u) /* a tail that is not a whole block */
#define PREFIX_BYTES 1000001u          /* unaligned: the resumed rest goes through the page cache */

static arc_env env;

/* The failing disk: backing/ (a tmpfs holding disk.img), mnt/ (ext4 on a
 * loop device over disk.img). */
typedef struct disk {
  char *base;
  char backing[4200], img[4300], mnt[4200];
} disk;

static void setup(void) { env_start(&env); }
static void teardown(void) { env_stop(&env); }

static bool skip(const char *why) {
  ck_assert_msg(getenv("RING_REQUIRE_LOOP") == NULL, "%s (%s)", why, strerror(errno));
  fprintf(stderr, "test_arc_disk_fault: skipped, %s (%s)\n", why, strerror(errno));
  return false;
}

/* Mounts the ext4 image at mnt through a free loop device (detached
 * again by the kernel when its last user, the mount, lets go). */
static bool mount_image(const char *image, const char *mnt, bool ro) {
  int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  int n = ctl < 0 ? -1 : ioctl(ctl, LOOP_CTL_GET_FREE);
  if (ctl >= 0)
    close(ctl);
  if (n < 0)
    return skip("no free loop device");
  char path[32];
  snprintf(path, sizeof path, "/dev/loop%d", n);
  int mode = ro ? O_RDONLY : O_RDWR;
  int dev = open(path, mode | O_CLOEXEC), img = open(image, mode | O_CLOEXEC);
  struct loop_config c = {.fd = (uint32_t)img,
                          .info = {.lo_flags = LO_FLAGS_AUTOCLEAR | (ro ? LO_FLAGS_READ_ONLY : 0)}};
  bool ok = dev >= 0 && img >= 0 && ioctl(dev, LOOP_CONFIGURE, &c) == 0;
  int e = errno;
  if (img >= 0)
    close(img);
  if (ok && mount(path, mnt, "ext4", ro ? MS_RDONLY : 0, "errors=continue") != 0) {
    e = errno;
    ok = false;
  }
  if (dev >= 0)
    close(dev); /* with the mount up, the device stays; without, it goes */
  errno = e;
  return ok || skip("cannot mount ext4 on a loop device");
}

static bool disk_make(disk *d) {
  d->base = scratch_dir();
  snprintf(d->backing, sizeof d->backing, "%s/backing", d->base);
  snprintf(d->img, sizeof d->img, "%s/disk.img", d->backing);
  snprintf(d->mnt, sizeof d->mnt, "%s/mnt", d->base);
  ck_assert_int_eq(mkdir(d->backing, 0755), 0);
  ck_assert_int_eq(mkdir(d->mnt, 0755), 0);
  if (mount("tmpfs", d->backing, "tmpfs", 0, "size=64m") != 0)
    return skip("cannot mount a tmpfs");
  int fd = open(d->img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, DISK_BYTES), 0);
  close(fd);
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "mkfs.ext4 -q -F -O ^has_journal -E nodiscard %s", d->img);
  if (system(cmd) != 0)
    return errno = ENOENT, skip("mkfs.ext4 failed");
  return mount_image(d->img, d->mnt, false);
}

static void disk_free(disk *d) {
  umount2(d->mnt, MNT_DETACH);
  umount2(d->backing, MNT_DETACH);
  scratch_free(d->base);
}

/* Leaves the tmpfs under the disk `slack` bytes of room beyond what it
 * holds now (every write of the file system so far on it first, as far as
 * the disk takes them). */
static void disk_room(disk *d, uint64_t slack) {
  int fd = open(d->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  (void)syncfs(fd); /* fails while the disk is full: that is the point */
  close(fd);
  struct statvfs v;
  ck_assert_int_eq(statvfs(d->backing, &v), 0);
  uint64_t used = (uint64_t)(v.f_blocks - v.f_bfree) * v.f_frsize;
  char opts[64];
  snprintf(opts, sizeof opts, "size=%" PRIu64 "k", (used + slack) / 1024 + 1);
  ck_assert_int_eq(mount(NULL, d->backing, NULL, MS_REMOUNT, opts), 0);
}

/* Unmounts and mounts the disk again: what is read next comes from the
 * device, not from pages this mount kept. */
static void disk_remount(disk *d) {
  ck_assert_int_eq(umount(d->mnt), 0);
  ck_assert(mount_image(d->img, d->mnt, false));
}

/* A store on a new disk; NULL when this host cannot make one (said). */
static arc_store *disk_store(disk *d) {
  if (!disk_make(d)) {
    disk_free(d);
    return NULL;
  }
  arc_store *s;
  ring_error err;
  ck_assert_msg(arc_store_open(d->mnt, &s, &err) == RING_OK, "%s", err.message);
  return s;
}

/* Fetches TOKEN onto a disk with 256 KiB of room, then with room again.
 * With `prefix`, an earlier attempt left a good prefix of the file: the
 * rest goes through the page cache and the failure shows at fsync, after
 * which nothing of the attempt may be resumed. Without, the file goes with
 * O_DIRECT and the failure shows at a write (what stays is read back from
 * the device by the resume, so it may stay). */
static void fails_then_heals(bool prefix) {
  disk d = {0};
  arc_store *s = disk_store(&d);
  if (s == NULL)
    return;
  ring_error err;
  make_arc(env.src_dir, TOKEN, 1, FILE_BYTES);
  char tmp[4400], src[4200], cmd[9000];
  snprintf(tmp, sizeof tmp, "%s/tmp/%u.1", d.mnt, TOKEN);
  snprintf(src, sizeof src, "%s/arcs/%u/f0", env.src_dir, TOKEN);
  if (prefix) {
    ck_assert_int_eq(mkdir(tmp, 0755), 0);
    snprintf(cmd, sizeof cmd, "head -c %u %s > %s/f0", PREFIX_BYTES, src, tmp);
    ck_assert_int_eq(system(cmd), 0);
  }

  disk_room(&d, 256u << 10);
  arc_fetch_opts o = test_fetch_opts();
  arc_fetch_result res;
  int rc = arc_fetch(s, env.source, TOKEN, 1, &o, &res, &err);
  ck_assert_msg(rc == RING_EIO || rc == RING_ENOSPC, "%d: %s", rc, err.message);
  fprintf(stderr, "test_arc_disk_fault: the failing disk gave: %s\n", err.message);
  ck_assert(!arc_store_has(s, TOKEN));
  if (prefix)
    ck_assert_msg(access(tmp, F_OK) != 0, "%s kept after a failed fsync", tmp);

  /* room again: after the failed fsync the arc is copied whole */
  disk_room(&d, 32u << 20);
  ck_assert_msg(arc_fetch(s, env.source, TOKEN, 1, &o, &res, &err) == RING_OK, "%s", err.message);
  if (prefix) {
    ck_assert_uint_eq(res.resumed_files, 0);
    ck_assert_uint_eq(res.bytes, FILE_BYTES);
  }
  arc_store_close(s);

  disk_remount(&d);
  char got[4400];
  snprintf(got, sizeof got, "%s/arcs/%u/f0", d.mnt, TOKEN);
  ck_assert_msg(same_bytes(src, got), "the installed arc is not on the disk as it was sent");
  disk_free(&d);
}

START_TEST(a_failed_writeback_is_never_resumed) { fails_then_heals(true); }
END_TEST

START_TEST(a_failed_direct_write) { fails_then_heals(false); }
END_TEST

/* ---------------------------------------------------------- a power cut */

/* Whether arc `token` under root (a data directory) holds n files with
 * exactly the bytes of the source's. */
static bool arc_is_sources(const char *root, uint32_t token, uint32_t n) {
  bool same = true;
  for (uint32_t i = 0; same && i < n; i++) {
    char a[4200], b[4400];
    snprintf(a, sizeof a, "%s/arcs/%" PRIu32 "/f%" PRIu32, env.src_dir, token, i);
    snprintf(b, sizeof b, "%s/arcs/%" PRIu32 "/f%" PRIu32, root, token, i);
    same = access(b, F_OK) == 0 && same_bytes(a, b);
  }
  return same;
}

#define CUT_ARCS 8u
#define CUT_FILES 3u

/* After each fetch returns, the device's bytes are copied as a power cut
 * would leave them (the loop device writes into its backing file as a
 * disk takes writes; nothing of the page cache above it is in the copy),
 * and the copy is mounted read-only: every arc fetched so far is there,
 * whole. This puts the install's fsyncs and rename to the test: without
 * the fsync of arcs/ after the rename, the first arc is already lost. */
START_TEST(installed_arcs_survive_a_power_cut) {
  disk d = {0};
  arc_store *s = disk_store(&d);
  if (s == NULL)
    return;
  ring_error err;
  char snap[4300], snap_mnt[4300], cmd[9000];
  snprintf(snap, sizeof snap, "%s/snapshot.img", d.base);
  snprintf(snap_mnt, sizeof snap_mnt, "%s/snapshot", d.base);
  ck_assert_int_eq(mkdir(snap_mnt, 0755), 0);
  snprintf(cmd, sizeof cmd, "cp --sparse=always %s %s", d.img, snap);
  for (uint32_t t = 0; t < CUT_ARCS; t++) {
    make_arc(env.src_dir, 60 + t, CUT_FILES, 100000u + t * 40961u); /* tails of every size */
    arc_fetch_opts o = test_fetch_opts();
    ck_assert_msg(arc_fetch(s, env.source, 60 + t, 1, &o, NULL, &err) == RING_OK, "%s",
                  err.message);
    ck_assert_int_eq(system(cmd), 0); /* the cut */
    ck_assert(mount_image(snap, snap_mnt, true));
    for (uint32_t k = 0; k <= t; k++)
      ck_assert_msg(arc_is_sources(snap_mnt, 60 + k, CUT_FILES),
                    "arc %u, fetched before the cut after arc %u, is not whole on the device",
                    60 + k, 60 + t);
    ck_assert_int_eq(umount(snap_mnt), 0);
  }
  arc_store_close(s);
  disk_free(&d);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("arc_disk_fault");
  TCase *tc = tcase_create("disk_fault");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, a_failed_writeback_is_never_resumed);
  tcase_add_test(tc, a_failed_direct_write);
  tcase_add_test(tc, installed_arcs_survive_a_power_cut);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
