/*
 * ringctl_out.c: JSON emitting and human units for ringctl's commands
 * (ringctl_out.h). Node rows, plan summaries and runs are in
 * ringctl_nodes.c, ringctl_plansum.c and ringctl_runs.c.
 *
 * Sections: JSON; units; files; bad records.
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r, fdopen, mkstemp */
#include "ringctl_out.h"

#include <errno.h>
#include <sys/stat.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* -------------------------------------------------------------------- JSON */

static bool emitted; /* whether this process printed its JSON object */

bool ringctl_json_emitted(void) { return emitted; }

int ringctl_json_emit(cJSON *o) {
  char *s = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (s == NULL) {
    fputs("ringctl: out of memory\n", stderr);
    return RINGCTL_EXIT_FAILURE;
  }
  emitted = true;
  puts(s);
  free(s);
  return RINGCTL_EXIT_OK;
}

cJSON *ringctl_json_labels(const rk_labels *l) {
  cJSON *o = cJSON_CreateObject();
  for (uint32_t i = 0; o != NULL && i < l->n; i++)
    cJSON_AddStringToObject(o, l->key[i], l->value[i]);
  return o;
}

cJSON *ringctl_json_node(const ring_table *t, uint16_t index) {
  const char *id = index == RING_NODE_NONE ? NULL : ring_table_node_id(t, index);
  return id ? cJSON_CreateString(id) : cJSON_CreateNull();
}

void ringctl_json_add_node(cJSON *o, const char *name, const ring_table *t, uint16_t index) {
  cJSON_AddItemToObject(o, name, ringctl_json_node(t, index));
}

/* ------------------------------------------------------------------- units */

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};

/* The unit bytes is shown in: the largest that leaves at least 1. */
static size_t unit_of(uint64_t bytes) {
  size_t u = 0;
  for (double v = (double)bytes; v >= 1024 && u + 1 < sizeof units / sizeof units[0]; v /= 1024)
    u++;
  return u;
}

/* bytes in unit u, without the unit. */
static void in_unit(uint64_t bytes, size_t u, char *buf, size_t size) {
  if (u == 0)
    snprintf(buf, size, "%llu", (unsigned long long)bytes);
  else
    snprintf(buf, size, "%.1f", (double)bytes / (double)(1ull << (10 * u)));
}

const char *ringctl_bytes(uint64_t bytes, char buf[32]) {
  size_t u = unit_of(bytes);
  char n[24];
  in_unit(bytes, u, n, sizeof n);
  snprintf(buf, 32, "%s %s", n, units[u]);
  return buf;
}

const char *ringctl_bytes_of(uint64_t part, uint64_t whole, char buf[64]) {
  size_t u = unit_of(part > whole ? part : whole);
  char a[24], b[24];
  in_unit(part, u, a, sizeof a);
  in_unit(whole, u, b, sizeof b);
  snprintf(buf, 64, "%s/%s %s", a, b, units[u]);
  return buf;
}

const char *ringctl_s(uint64_t n) { return n == 1 ? "" : "s"; }

const char *ringctl_duration(uint64_t s, char buf[32]) {
  if (s >= 3600)
    snprintf(buf, 32, "%lluh%02llum", (unsigned long long)(s / 3600),
             (unsigned long long)(s % 3600 / 60));
  else if (s >= 60)
    snprintf(buf, 32, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
  else
    snprintf(buf, 32, "%llus", (unsigned long long)s);
  return buf;
}

const char *ringctl_labels(const rk_labels *l, char *buf, size_t size) {
  size_t off = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < l->n && off < size; i++) {
    int n = snprintf(buf + off, size - off, "%s%s=%s", i ? "," : "", l->key[i], l->value[i]);
    off += n > 0 ? (size_t)n : 0;
  }
  if (l->n == 0)
    snprintf(buf, size, "-");
  return buf;
}

const char *ringctl_time(uint64_t ms, char buf[32]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  if (ms == 0 || gmtime_r(&t, &tm) == NULL)
    snprintf(buf, 32, "-");
  else
    strftime(buf, 32, "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

/* ------------------------------------------------------------------- files */

/* Removes the temporary file tmp and fails with errno err (EIO if 0). */
static int undo(const char *tmp, int err) {
  unlink(tmp);
  errno = err != 0 ? err : EIO;
  return -1;
}

int ringctl_write_file(const char *path, int (*fill)(FILE *f, void *ud), void *ud) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= sizeof tmp)
    return errno = ENAMETOOLONG, -1;
  int fd = mkstemp(tmp); /* 0600: widened below as any new file would be */
  if (fd < 0)
    return -1;
  mode_t mask = umask(0);
  umask(mask);
  FILE *f = fchmod(fd, 0666 & ~mask) == 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL) {
    int err = errno;
    close(fd);
    return undo(tmp, err);
  }
  errno = 0;
  if (fill(f, ud) != 0 || ferror(f)) {
    int err = errno;
    fclose(f);
    return undo(tmp, err);
  }
  if (fclose(f) != 0 || rename(tmp, path) != 0)
    return undo(tmp, errno);
  return 0;
}

/* ------------------------------------------------------------- bad records */

bool ringctl_bad_text(FILE *f, const rk_state *st) {
  if (st->n_bad == 0)
    return false;
  fprintf(f, "\nbad records: %u (ignored: over their size cap or malformed; proto/etcd.md)\n",
          st->n_bad);
  fprintf(f, "  %-20s %-9s %s\n", "HOST", "KEY", "WHY");
  for (uint32_t i = 0; i < st->n_bad; i++) {
    char text[RK_BAD_WHY_MAX + 96];
    fprintf(f, "  %-20s %-9s %s\n", st->bad[i].host[0] ? st->bad[i].host : "-",
            rk_bad_kind_name(st->bad[i].kind), rk_bad_text(&st->bad[i], text, sizeof text));
  }
  return true;
}
