/*
 * etcd_history.c: the client's high-water marks of etcd's history
 * (ring_etcd.h, "History"), the one place that decides whether etcd went
 * back to an older state.
 *
 * Why here: every etcd reply passes through the client (etcd.c's attempt),
 * so the revision and cluster id checks cost each caller nothing and no
 * caller can forget them; the `version` key is the cluster's, so callers
 * that read it note it (ring_etcd_note_version) and the rule stays here.
 *
 * What is compared, and why these: etcd 3.4's `snapshot restore` keeps the
 * snapshot's revision, so a restored store answers with a revision below
 * one already seen; the cluster id changes only when the restore names
 * another initial cluster or token, so it is a check that may not fire;
 * the `version` key dropping below one seen is the cluster's own clock.
 * Wall clocks are never compared. A watch header's revision is not judged:
 * a member behind the leader may send it, and a watch resumed above the
 * restored revision waits silently instead of failing, so the watch asks
 * the client for a linearizable read instead (etcd_watch.c, behind()).
 *
 * Locking: hist_lock guards c->hist; nothing else is taken under it. Its
 * went_back is mirrored in an atomic at each unlock, so the watcher's check
 * at every version heard takes no lock (ring__history_back).
 */
#define _POSIX_C_SOURCE 200809L
#include "etcd_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Releases hist_lock, mirroring went_back first (ring__history_back). */
static void unlock(ring_etcd *c) {
  atomic_store_explicit(&c->hist_back, c->hist.went_back, memory_order_release);
  pthread_mutex_unlock(&c->hist_lock);
}

bool ring__history_back(ring_etcd *c) {
  return c != NULL && atomic_load_explicit(&c->hist_back, memory_order_acquire);
}

uint64_t ring__header_cluster_id(const cJSON *header) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(header, "cluster_id");
  if (cJSON_IsNumber(it)) /* a test double may send a number; etcd sends a string */
    return it->valuedouble >= 1 && it->valuedouble < 9e15 ? (uint64_t)it->valuedouble : 0;
  if (!cJSON_IsString(it) || it->valuestring[0] < '0' || it->valuestring[0] > '9')
    return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(it->valuestring, &end, 10);
  return errno == 0 && *end == '\0' ? (uint64_t)v : 0;
}

/* Judges a reply's revision against the mark as it stood when the request
 * left (floor): linearizability promises a revision at or above every
 * write completed before the request, not above replies to requests that
 * ran alongside it, so comparing with the mark at reply time would call
 * two concurrent readers a restore. Caller holds hist_lock. */
static void judge_revision(ring_etcd_history *h, int64_t revision, int64_t floor) {
  if (revision <= 0)
    return;
  if (revision < floor) {
    h->went_back = true;
    if (revision > h->back_revision)
      h->back_revision = revision;
  } else if (h->went_back && h->back_revision != 0) {
    if (revision > h->back_revision)
      h->back_revision = revision; /* the restored store moves on; the mark stays */
  } else if (revision > h->revision) {
    h->revision = revision;
  }
}

/* A cluster id other than the first one seen. Caller holds hist_lock. */
static void judge_cluster(ring_etcd_history *h, uint64_t cluster_id) {
  if (cluster_id == 0)
    return;
  if (h->cluster_id == 0) {
    h->cluster_id = cluster_id;
  } else if (cluster_id != h->cluster_id) {
    h->went_back = true;
    h->back_cluster_id = cluster_id;
  }
}

int64_t ring__history_floor(ring_etcd *c) {
  pthread_mutex_lock(&c->hist_lock);
  int64_t floor = c->hist.went_back && c->hist.back_revision ? 0 : c->hist.revision;
  unlock(c);
  return floor;
}

void ring__history_header(ring_etcd *c, const cJSON *resp, int64_t floor) {
  const cJSON *hdr = cJSON_GetObjectItemCaseSensitive(resp, "header");
  int64_t rev = 0;
  if (!cJSON_IsObject(hdr) || !ring__json_i64(hdr, "revision", &rev))
    return;
  pthread_mutex_lock(&c->hist_lock);
  judge_revision(&c->hist, rev, floor);
  judge_cluster(&c->hist, ring__header_cluster_id(hdr));
  unlock(c);
}

void ring__history_watch_header(ring_etcd *c, uint64_t cluster_id) {
  pthread_mutex_lock(&c->hist_lock);
  judge_cluster(&c->hist, cluster_id);
  unlock(c);
}

void ring_etcd_history_get(ring_etcd *c, ring_etcd_history *out) {
  if (out == NULL)
    return;
  if (c == NULL) {
    memset(out, 0, sizeof *out);
    return;
  }
  pthread_mutex_lock(&c->hist_lock);
  *out = c->hist;
  unlock(c);
}

bool ring_etcd_note_version(ring_etcd *c, uint64_t version, int64_t revision) {
  if (c == NULL)
    return false;
  pthread_mutex_lock(&c->hist_lock);
  ring_etcd_history *h = &c->hist;
  /* Lower than the mark, read at or after the mark's revision: the key went
   * back. A lower value read at an older revision is a reply that crossed a
   * newer one (two readers at once) and says nothing; if the store itself
   * went back, its revision did too and judge_revision says so. Once gone
   * back, a lower value is what the restored store says now (for the
   * reason shown: "version 65 -> 1"); the mark stays. */
  if (version == 0) {
    /* nothing read */
  } else if (h->went_back) {
    if (version < h->version)
      h->back_version = version;
  } else if (version < h->version && revision >= h->version_revision) {
    h->went_back = true;
    h->back_version = version;
  } else if (version > h->version) {
    h->version = version;
    h->version_revision = revision;
  }
  bool back = h->went_back;
  unlock(c);
  return back;
}

void ring_etcd_history_seed(ring_etcd *c, const ring_etcd_history *from) {
  if (c == NULL || from == NULL)
    return;
  pthread_mutex_lock(&c->hist_lock);
  ring_etcd_history *h = &c->hist;
  if (from->went_back && !h->went_back) {
    h->went_back = true;
    h->back_revision = from->back_revision;
    h->back_version = from->back_version;
    h->back_cluster_id = from->back_cluster_id;
  }
  /* A seed above what this process saw already is the history going back. */
  if (from->revision > h->revision) {
    if (h->revision != 0)
      h->went_back = true, h->back_revision = h->revision;
    h->revision = from->revision;
  }
  if (from->version > h->version) {
    if (h->version != 0)
      h->went_back = true, h->back_version = h->version;
    h->version = from->version;
    h->version_revision = from->version_revision;
  }
  judge_cluster(h, from->cluster_id);
  unlock(c);
}

bool ring_etcd_history_settle(ring_etcd *c, uint64_t recovered_version, uint64_t current_version) {
  if (c == NULL)
    return false;
  pthread_mutex_lock(&c->hist_lock);
  ring_etcd_history *h = &c->hist;
  /* Above every version this process saw: the operator's recover counted
   * them all (an older `recovered` settles nothing). */
  bool ok = h->went_back && recovered_version > h->version && current_version >= recovered_version;
  if (ok)
    *h = (ring_etcd_history){.version = current_version, .version_revision = 0};
  unlock(c);
  return ok;
}

/* The value of a version key (ring__parse_version), else 0. */
static uint64_t version_value(const ring_kvs *r) {
  uint64_t v = 0;
  if (r->n != 1 || !ring__parse_version(r->kvs[0].value, r->kvs[0].value_len, &v))
    return 0;
  return v;
}

int ring_etcd_history_resume(ring_etcd *c, const char *cluster, bool *settled, ring_error *err) {
  if (settled)
    *settled = false;
  ring_etcd_history h;
  ring_etcd_history_get(c, &h);
  if (c == NULL || cluster == NULL || !h.went_back)
    return c && cluster ? RING_OK : ring__err(err, RING_EINVAL, "history_resume: NULL argument");
  char keys[2][160];
  if (ring__key(keys[0], sizeof keys[0], cluster, "recovered", "") < 0 ||
      ring__key(keys[1], sizeof keys[1], cluster, "version", "") < 0)
    return ring__err(err, RING_EINVAL, "cluster \"%.63s\" is not valid", cluster);
  ring_op ops[2] = {{.type = RING_OP_RANGE, .key = keys[0], .key_len = strlen(keys[0])},
                    {.type = RING_OP_RANGE, .key = keys[1], .key_len = strlen(keys[1])}};
  ring_txn_result r;
  int rc = ring_etcd_txn(c, NULL, 0, ops, 2, NULL, 0, &r, err);
  if (rc != RING_OK)
    return rc;
  ring__recovered rec = {0};
  if (r.n_ranges == 2 && r.ranges[0].n == 1 &&
      ring__recovered_decode((const char *)r.ranges[0].kvs[0].value, r.ranges[0].kvs[0].value_len,
                             &rec, NULL) == RING_OK) {
    bool done = ring_etcd_history_settle(c, rec.version, version_value(&r.ranges[1]));
    if (settled)
      *settled = done;
  }
  ring_txn_result_clear(&r);
  return RING_OK;
}

const char *ring_etcd_history_text(const ring_etcd_history *h, char *buf, size_t size) {
  if (buf == NULL || size == 0)
    return buf;
  buf[0] = '\0';
  if (h == NULL || !h->went_back)
    return buf;
  size_t n = (size_t)snprintf(buf, size, "etcd history went back:");
  const char *sep = " ";
  if (h->back_version != 0 && n < size)
    n += (size_t)snprintf(buf + n, size - n, "%sversion %" PRIu64 " -> %" PRIu64, sep, h->version,
                          h->back_version),
        sep = ", ";
  if (h->back_revision != 0 && n < size)
    n += (size_t)snprintf(buf + n, size - n, "%srevision %" PRId64 " -> %" PRId64, sep, h->revision,
                          h->back_revision),
        sep = ", ";
  if (h->back_cluster_id != 0 && n < size)
    n += (size_t)snprintf(buf + n, size - n, "%scluster id %" PRIx64 " -> %" PRIx64, sep,
                          h->cluster_id, h->back_cluster_id),
        sep = ", ";
  if (*sep == ' ' && n < size) /* latched from a seed with no detail */
    snprintf(buf + n, size - n, " (seen before this process started)");
  return buf;
}
