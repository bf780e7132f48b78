/*
 * arc_fs.c: the file-system chores of the store and the fetcher: fsync of
 * a directory, removing a tree, hashing a file's prefix, errno mapping.
 */
#define _GNU_SOURCE /* O_NOFOLLOW, O_DIRECTORY, O_CLOEXEC */
#include "arc_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Small enough that each chunk is still in L2 when XXH3 reads it after
 * the copy, and below malloc's mmap threshold (no fresh pages per call). */
#define HASH_CHUNK (64u << 10)

int arc__fsync_dir(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rc;
}

/* Empties the directory open as dfd (consumed) below path. */
static int rmtree_at(int dfd, const char *path) {
  DIR *d = fdopendir(dfd);
  if (d == NULL) {
    int rc = -errno;
    close(dfd);
    return rc;
  }
  int first = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0)
      continue;
    if (errno != EISDIR && errno != EPERM) {
      first = first ? first : -errno;
      continue;
    }
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    int rc = arc__rmtree(sub);
    first = first ? first : rc;
  }
  closedir(d);
  return first;
}

int arc__rmtree(const char *path) {
  if (unlink(path) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return -errno;
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0)
    return -errno;
  int rc = rmtree_at(dfd, path);
  if (rmdir(path) != 0 && errno != ENOENT)
    rc = rc ? rc : -errno;
  return rc;
}

int arc__hash_fd(int fd, uint64_t len, XXH3_state_t *st) {
  unsigned char *buf = len ? malloc(HASH_CHUNK) : NULL;
  if (len && buf == NULL)
    return -ENOMEM;
  uint64_t off = 0;
  int rc = 0;
  while (off < len && rc == 0) {
    size_t want = len - off < HASH_CHUNK ? (size_t)(len - off) : HASH_CHUNK;
    ssize_t n = pread(fd, buf, want, (off_t)off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      rc = n < 0 ? -errno : -EIO; /* EIO: shorter than the caller believed */
      break;
    }
    XXH3_64bits_update(st, buf, (size_t)n);
    off += (uint64_t)n;
  }
  free(buf);
  return rc;
}

int arc__open_regular(int dfd, const char *name, struct stat *st) {
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return errno == ELOOP ? -ENOTSUP : -errno; /* ELOOP: a symbolic link at name */
  int rc = fstat(fd, st) != 0 ? -errno : !S_ISREG(st->st_mode) ? -ENOTSUP : 0;
  /* O_NONBLOCK is the only flag F_SETFL can change that the open set:
   * clearing them all clears it, one call per file instead of two. */
  if (rc == 0 && fcntl(fd, F_SETFL, 0) != 0)
    rc = -errno;
  if (rc == 0)
    return fd;
  close(fd);
  return rc;
}

int arc__errno_code(int neg_errno) {
  switch (-neg_errno) {
  case ENOSPC:
  case EDQUOT:
    return RING_ENOSPC;
  case EEXIST:
  case ENOTEMPTY:
    return RING_EEXIST;
  case ENOMEM:
    return RING_ENOMEM;
  default:
    return RING_EIO;
  }
}
