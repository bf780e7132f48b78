/*
 * ringctl_out.c: JSON emitting and human units for ringctl's commands
 * (ringctl_out.h). Node rows, plan summaries and runs are in
 * ringctl_nodes.c, ringctl_plansum.c and ringctl_runs.c.
 *
 * Sections: JSON; units; files; bad records.
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r, fdopen, mkstemp */
#include "ringctl_out.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* -------------------------------------------------------------------- JSON */

int ringctl_json_emit(cJSON *o) {
  char *s = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (s == NULL) {
    fputs("ringctl: out of memory\n", stderr);
    return RINGCTL_EXIT_FAILURE;
  }
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

const char *ringctl_bytes(uint64_t bytes, char buf[32]) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  size_t u = 0;
  while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
  else
    snprintf(buf, 32, "%.1f %s", v, units[u]);
  return buf;
}

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

int ringctl_write_file(const char *path, int (*fill)(FILE *f, void *ud), void *ud) {
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= sizeof tmp)
    return -1;
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL) {
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    return -1;
  }
  int rc = fill(f, ud);
  rc = fclose(f) != 0 ? -1 : rc;
  if (rc == 0 && rename(tmp, path) == 0)
    return 0;
  unlink(tmp);
  return -1;
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
