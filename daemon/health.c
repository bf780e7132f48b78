/*
 * health.c: a daemon's health for /healthz and its secrets (daemon.h,
 * "health and secrets").
 */
#define _GNU_SOURCE /* strdup */
#include "daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rd_health_init(rd_health *h) {
  memset(h, 0, sizeof *h);
  return pthread_mutex_init(&h->mu, NULL);
}

void rd_health_destroy(rd_health *h) { pthread_mutex_destroy(&h->mu); }

void rd_health_step(rd_health *h) { h->troubled = false; }

void rd_health_trouble(rd_health *h, const char *what, const char *detail) {
  const char *d = detail && detail[0] ? detail : "failed";
  char line[sizeof h->reason];
  snprintf(line, sizeof line, "%.60s: %.190s", what, d);
  h->troubled = true;
  pthread_mutex_lock(&h->mu);
  bool repeat = strcmp(line, h->reason) == 0;
  memcpy(h->reason, line, sizeof line);
  pthread_mutex_unlock(&h->mu);
  if (!repeat)
    rd_log(RD_ERROR, what, "err", d, NULL);
}

void rd_health_ok(rd_health *h) {
  if (h->troubled)
    return;
  pthread_mutex_lock(&h->mu);
  bool was = h->reason[0] != '\0';
  h->reason[0] = '\0';
  pthread_mutex_unlock(&h->mu);
  if (was)
    rd_log(RD_INFO, "recovered", NULL);
}

bool rd_health_text(rd_health *h, rd_text *t) {
  pthread_mutex_lock(&h->mu);
  bool ok = h->reason[0] == '\0';
  ring__sb_printf(t, "%s\n", ok ? "ok" : h->reason);
  pthread_mutex_unlock(&h->mu);
  return ok;
}

char *rd_read_secret(const char *path, char *msg, size_t cap) {
  FILE *f = fopen(path, "r");
  char line[1024];
  bool ok = f != NULL && fgets(line, sizeof line, f) != NULL;
  int e = errno;
  if (f)
    fclose(f);
  if (ok)
    line[strcspn(line, "\r\n")] = '\0';
  if (!ok || line[0] == '\0') {
    snprintf(msg, cap, "%s: %s", path, f ? "empty" : strerror(e));
    return NULL;
  }
  char *s = strdup(line);
  if (s == NULL)
    snprintf(msg, cap, "%s: out of memory", path);
  return s;
}
