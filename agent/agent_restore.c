/*
 * agent_restore.c: the agent and a restored etcd (proto/etcd.md, "A
 * restored etcd"). libring's client judges every reply against its
 * high-water marks (etcd_history.c); this file gives those marks a life
 * across restarts and turns "the history went back" into the agent's
 * behaviour:
 *   - marks: <data-dir>/etcd-history, written fsynced (temp file, rename,
 *     directory fsync) when the version mark moves or the state changes,
 *     and at most every SAVE_EVERY_MS for the revision alone, so a
 *     restarted agent still knows what it saw (a restore found while it
 *     was down is found at its first reply);
 *   - a probe: the `version` key read every PROBE_EVERY_MS, so the version
 *     rule fires even when no watch event comes (a restored store is quiet);
 *   - while restored: the loop drops nothing, starts no fetch, writes no
 *     progress and acks nothing (the watcher holds), keeps serving what it
 *     holds, and reports recovery/<id> once: its marks, the table version
 *     it had in service and the tokens whose arcs it holds (and that table
 *     itself as recovery-table/<v>, unless another host put it first);
 *   - the operator's `recovered` record settles it (ring_etcd_history_resume).
 */
#define _GNU_SOURCE
#include "agent.h"
#include "ringx.h" /* ring__err */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MARKS_FILE "etcd-history"
#define MARKS_LINE_MAX 512
#define PROBE_EVERY_MS 1000
#define SAVE_EVERY_MS 5000
#define RETRY_MS 1000

/* ------------------------------------------------------------ the file */

static void marks_path(const agent *a, char *path, size_t cap, const char *suffix) {
  snprintf(path, cap, "%s/%s%s", a->o.data_dir, MARKS_FILE, suffix);
}

/* One logfmt-like line: the fields of ring_etcd_history. */
static int marks_format(const ring_etcd_history *h, char *line, size_t cap) {
  return snprintf(line, cap,
                  "revision=%" PRId64 " cluster_id=%" PRIu64 " version=%" PRIu64
                  " went_back=%d back_revision=%" PRId64 " back_version=%" PRIu64
                  " back_cluster_id=%" PRIu64 "\n",
                  h->revision, h->cluster_id, h->version, h->went_back ? 1 : 0, h->back_revision,
                  h->back_version, h->back_cluster_id);
}

static bool marks_parse(const char *line, ring_etcd_history *h) {
  int went = 0;
  long long rev = 0, back_rev = 0;
  unsigned long long id = 0, v = 0, back_v = 0, back_id = 0;
  if (sscanf(line,
             "revision=%lld cluster_id=%llu version=%llu went_back=%d back_revision=%lld "
             "back_version=%llu back_cluster_id=%llu",
             &rev, &id, &v, &went, &back_rev, &back_v, &back_id) != 7 ||
      rev < 0 || back_rev < 0 || v > RING_VERSION_MAX || back_v > RING_VERSION_MAX)
    return false;
  *h = (ring_etcd_history){.revision = rev,
                           .cluster_id = id,
                           .version = v,
                           .went_back = went != 0,
                           .back_revision = back_rev,
                           .back_version = back_v,
                           .back_cluster_id = back_id};
  return true;
}

/* Writes the marks whole or not at all. 0, or -1 with errno's text in why. */
static int marks_save(agent *a, const ring_etcd_history *h, char *why, size_t cap) {
  char tmp[4096], path[4096], line[MARKS_LINE_MAX];
  marks_path(a, tmp, sizeof tmp, ".tmp");
  marks_path(a, path, sizeof path, "");
  int len = marks_format(h, line, sizeof line);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write(fd, line, (size_t)len) == len && fsync(fd) == 0;
  if (fd >= 0 && close(fd) != 0)
    ok = false;
  ok = ok && rename(tmp, path) == 0;
  int dfd = ok ? open(a->o.data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  ok = ok && dfd >= 0 && fsync(dfd) == 0;
  if (dfd >= 0)
    close(dfd);
  if (!ok)
    snprintf(why, cap, "%.400s: %s", path, strerror(errno));
  return ok ? 0 : -1;
}

void agent_restore_start(agent *a) {
  char path[4096], line[MARKS_LINE_MAX] = "";
  marks_path(a, path, sizeof path, "");
  FILE *f = fopen(path, "r");
  if (f == NULL) /* a new data dir: nothing seen yet */
    return;
  bool read = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  ring_etcd_history h;
  if (!read || !marks_parse(line, &h)) {
    rd_log(RD_WARN, "etcd history marks unreadable: starting without them", "path", path, NULL);
    return;
  }
  ring_etcd_history_seed(a->etcd, &h);
  a->restore_saved = h;
}

/* ------------------------------------------------------------ the tick */

/* Reads the version key so the client judges its value and header. */
static void probe(agent *a) {
  char key[RK_KEY_MAX];
  int len = rk_key(key, a->o.cluster, "version");
  ring_kvs r;
  ring_error err = {0};
  if (ring_etcd_range(a->etcd, key, (size_t)len, NULL, &r, &err) != RING_OK)
    return; /* etcd away: the other steps say so */
  uint64_t v = 0;
  if (r.n == 1 &&
      rk_ack_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &v, NULL) == RING_OK)
    ring_etcd_note_version(a->etcd, v, r.revision);
  ring_kvs_clear(&r);
}

/* Saves the marks when the state or the version mark moved, or the
 * revision did and SAVE_EVERY_MS passed. */
static void save_if_moved(agent *a, const ring_etcd_history *h, uint64_t now) {
  const ring_etcd_history *s = &a->restore_saved;
  bool urgent = h->went_back != s->went_back || h->version != s->version ||
                h->cluster_id != s->cluster_id || h->back_version != s->back_version;
  bool moved = urgent || h->revision != s->revision || h->back_revision != s->back_revision;
  if (!moved || (!urgent && now - a->restore_saved_ms < SAVE_EVERY_MS))
    return;
  char why[512];
  if (marks_save(a, h, why, sizeof why) != 0)
    return agent_trouble(a, "saving the etcd history marks", why);
  a->restore_saved = *h;
  a->restore_saved_ms = now;
}

/* recovery/<id>: what `ringctl recover` rebuilds the table from. */
static int report(agent *a, const ring_etcd_history *h, ring_error *err) {
  rk_recovery r = {.seen_version = h->version ? h->version : 1,
                   .seen_revision = (uint64_t)h->revision,
                   .table_version = ring_live_version(a->live),
                   .at_ms = rd_wall_ms()};
  if (r.table_version > r.seen_version)
    r.seen_version = r.table_version;
  if (arc_store_list(a->store, &r.tokens, &r.n_tokens) != 0)
    return ring__err(err, RING_EIO, "listing the arcs held");
  char *json = NULL, key[RK_KEY_MAX];
  size_t len = 0;
  int rc = rk_recovery_encode(&r, &json, &len);
  int klen = agent_key(a, key, "recovery/");
  if (rc == RING_OK)
    rc = ring_etcd_put(a->etcd, key, (size_t)klen, json, len, 0, NULL, NULL, err);
  free(json);
  rk_recovery_free(&r);
  return rc;
}

/* recovery-table/<v>: the table this host had in service, for `ringctl
 * recover` to take the slot order from (the restored etcd lost it). Put
 * only when absent: every host of that version has the same bytes. */
static int report_table(agent *a, ring_error *err) {
  const ring_table *t = ring_live_enter(a->live);
  uint64_t v = t ? ring_table_version(t) : 0;
  char *json = NULL, key[RK_KEY_MAX];
  size_t len = 0;
  int rc = t ? ring_table_encode(t, &json, &len) : RING_OK;
  ring_live_exit(a->live);
  if (rc != RING_OK || v == 0)
    return rc;
  int klen = rk_key_version(key, a->o.cluster, "recovery-table/", v);
  ring_cmp absent = {key, (size_t)klen, RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0};
  ring_op put = {RING_OP_PUT, key, (size_t)klen, json, len, 0, false};
  ring_txn_result r;
  rc = ring_etcd_txn(a->etcd, &absent, 1, &put, 1, NULL, 0, &r, err);
  if (rc == RING_OK)
    ring_txn_result_clear(&r);
  free(json);
  return rc;
}

/* Settled by the operator: everything waits for the loop's next pass. */
static void resume(agent *a) {
  a->recovery_written = false;
  atomic_store(&a->table_changed, true);
  pthread_mutex_lock(&a->jobs_mu);
  pthread_cond_broadcast(&a->jobs_cv); /* fetches may start again */
  pthread_mutex_unlock(&a->jobs_mu);
}

uint64_t agent_restore_tick(agent *a) {
  uint64_t now = rd_now_ms();
  if (a->restore_probe_ms != 0 && now - a->restore_probe_ms < PROBE_EVERY_MS)
    return PROBE_EVERY_MS - (now - a->restore_probe_ms);
  a->restore_probe_ms = now;
  probe(a);
  ring_etcd_history h;
  ring_etcd_history_get(a->etcd, &h);
  bool settled = false;
  if (h.went_back && ring_etcd_history_resume(a->etcd, a->o.cluster, &settled, NULL) == RING_OK &&
      settled)
    ring_etcd_history_get(a->etcd, &h);
  rd_restore_observe(&a->restore, a->etcd,
                     "keeps serving its arcs; no drops, fetches, progress or acks until `ringctl "
                     "recover`");
  if (settled)
    resume(a); /* after the gauge clears: the workers it wakes read it */
  ring_error err = {0};
  if (h.went_back && !a->recovery_written) {
    if (report_table(a, &err) == RING_OK && report(a, &h, &err) == RING_OK)
      a->recovery_written = true;
    else
      agent_trouble(a, "reporting recovery/<id>", err.message);
  }
  save_if_moved(a, &h, now);
  return h.went_back && !a->recovery_written ? RETRY_MS : PROBE_EVERY_MS;
}

bool agent_restored(agent *a) {
  if (atomic_load(&a->restore.restored))
    return true;
  /* Any reply may find it before the loop's next look: a fetch worker or a
   * step of this pass asks the client itself. */
  ring_etcd_history h;
  ring_etcd_history_get(a->etcd, &h);
  return h.went_back;
}
