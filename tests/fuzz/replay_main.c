/*
 * replay_main.c: runs a fuzz target over corpus files without libFuzzer,
 * so builds with gcc still replay every seed and every crash found before.
 * Usage: fuzz_X FILE_OR_DIR...
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0)
    if ((len += n) == cap)
      buf = realloc(buf, cap *= 2);
  fclose(f);
  if (buf == NULL)
    return 1;
  uint8_t *exact = malloc(len ? len : 1); /* exact size, so overreads are caught */
  memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int replay(const char *path, int *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return 1;
  }
  if (!S_ISDIR(st.st_mode)) {
    ++*count;
    return replay_file(path);
  }
  DIR *d = opendir(path);
  int rc = d == NULL;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    rc |= replay(sub, count);
  }
  if (d)
    closedir(d);
  return rc;
}

int main(int argc, char **argv) {
  int rc = 0, count = 0;
  for (int i = 1; i < argc; i++)
    rc |= replay(argv[i], &count);
  printf("replayed %d inputs\n", count);
  return rc || count == 0;
}
