/*
 * restore.c: how a daemon says that etcd's history went back (daemon.h,
 * "a restored etcd"). The rule that decides it is libring's
 * (etcd_history.c); this only makes it loud, once, for people and probes.
 */
#include "daemon.h"
#include "ring_etcd.h"

#include <string.h>

int rd_restore_init(rd_restore *r) {
  memset(r, 0, sizeof *r);
  return pthread_mutex_init(&r->mu, NULL);
}

void rd_restore_destroy(rd_restore *r) { pthread_mutex_destroy(&r->mu); }

bool rd_restore_observe(rd_restore *r, struct ring_etcd *c, const char *what) {
  ring_etcd_history h;
  char why[RD_RESTORE_WHY_MAX];
  ring_etcd_history_get(c, &h);
  ring_etcd_history_text(&h, why, sizeof why);
  bool was = atomic_load(&r->restored);
  pthread_mutex_lock(&r->mu);
  memcpy(r->why, why, sizeof why);
  pthread_mutex_unlock(&r->mu);
  atomic_store(&r->restored, h.went_back);
  uint64_t now = rd_now_ms();
  if (h.went_back && (!was || now - r->reminded_ms >= RD_RESTORE_REMIND_MS)) {
    r->reminded_ms = now;
    rd_log(RD_ERROR, was ? "etcd restored: still waiting for `ringctl recover`" : "etcd restored",
           "why", why, "action", what, NULL);
  } else if (!h.went_back && was) {
    rd_log(RD_INFO, "etcd restore settled by `ringctl recover`: following again", NULL);
  }
  return h.went_back;
}

bool rd_restore_health(rd_restore *r, rd_text *t) {
  if (!atomic_load(&r->restored))
    return true;
  pthread_mutex_lock(&r->mu);
  ring__sb_printf(t, "degraded: %s (run `ringctl recover`)\n", r->why);
  pthread_mutex_unlock(&r->mu);
  return false;
}
