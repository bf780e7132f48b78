/*
 * agent_own.c: explicit ownership (docs/DESIGN.md, "Arcs on a host").
 *
 * An owner holds arcs/<token>/ for every token it owns, from the version
 * that gives it the token, possibly empty: a source's "not held" is then
 * never a fact about the data, only about the host (a data disk not
 * mounted, a wiped dir), and a receiver installs an empty arc only on a
 * signed manifest that lists no files.
 *
 * Tokens come to an owner in one of three ways:
 *   - copied: a pending entry names us, the fetch installs the arc, the
 *     coordinator cuts over only once we reported it (agent_fetchers.c);
 *   - the cluster's first placement, when nothing exists anywhere yet;
 *   - migration "none" (rebuildable caches), where nothing is ever copied.
 * The last two are granted with nothing to copy, and the owner creates the
 * empty arcs itself ("adopts" them) here. It can tell a first placement by
 * the data dir's marker `placed`: a data dir that has never owned anything
 * in this cluster can only come to own tokens it was not pending for by
 * the first placement, because any later grant needs a copy it reported.
 * Once it owns anything the marker is written (fsynced), and from then on,
 * under migration "stream", an owned token with no arc is never adopted:
 * it is missing, shown in /metrics and /healthz, reported in missing/<id>,
 * served as "not held" (an error at every receiver), and refilled from the
 * token's other owners (agent_refill.c); only the operator's `loss` record
 * lets it be installed empty when no owner holds it.
 *
 * A data dir without the marker is not always new to the cluster: a disk
 * wiped or replaced under a host that keeps its id has none either. So at
 * start, before following, an agent without the marker looks for its id's
 * acks/<id>: an id that has acked a table before has owned what that table
 * gave it, and this data dir is a replacement. The marker is then written
 * at once (with wiped=1): nothing is adopted, every owned token is missing
 * and reported, never served as an empty arc.
 *
 * The check runs after every table and every few seconds (the disk can go
 * away under a running agent); its findings are raised on every pass of
 * the loop while they last.
 */
#define _GNU_SOURCE
#include "agent.h"
#include "arc_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK_EVERY_MS 5000

/* --------------------------------------------------------- the marker */

static void marker_path(const agent *a, char *path, size_t cap) {
  snprintf(path, cap, "%s/" ARC_DIR_PLACED, arc_store_dir(a->store));
}

static bool placed(const agent *a) {
  char path[4096];
  marker_path(a, path, sizeof path);
  struct stat st;
  return stat(path, &st) == 0;
}

/* Writes the marker durably (file, then the data dir). 0 or -errno. */
static int write_marker(agent *a, uint64_t version, bool wiped) {
  char path[4096], text[256];
  marker_path(a, path, sizeof path);
  int n = snprintf(text, sizeof text, "cluster=%s id=%s version=%" PRIu64 " wiped=%d\n",
                   a->o.cluster, a->o.id, version, wiped);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int rc = fd >= 0 && write(fd, text, (size_t)n) == n && fsync(fd) == 0 ? 0 : -errno;
  if (fd >= 0)
    close(fd);
  int dfd = rc == 0 ? open(arc_store_dir(a->store), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (rc == 0)
    rc = dfd >= 0 && fsync(dfd) == 0 ? 0 : -errno;
  if (dfd >= 0)
    close(dfd);
  return rc;
}

/* ------------------------------------------------------------ the check */

/* Owned tokens we are not pending for and hold no arc of, into out (T
 * entries); returns how many. */
static uint32_t find_missing(agent *a, uint32_t *out, uint32_t *owned) {
  uint32_t n = 0;
  *owned = 0;
  for (uint32_t t = 0; t < a->tokens; t++) {
    if (!agent_bit(a->owned, t))
      continue;
    (*owned)++;
    if (!agent_bit(a->pending, t) && !arc_store_has(a->store, t))
      out[n++] = t;
  }
  return n;
}

/* Creates the empty arcs of tokens granted with nothing to copy. */
static void adopt(agent *a, const uint32_t *tokens, uint32_t n, uint64_t version) {
  uint32_t made = 0;
  ring_error err = {0};
  int rc = arc_store_adopt_empty(a->store, tokens, n, &made, &err);
  atomic_fetch_add(&a->m.adopted, made);
  atomic_fetch_add(&a->m.held, made);
  rd_logf(rc == RING_OK ? RD_INFO : RD_ERROR,
          "version %" PRIu64 ": %" PRIu32 " owned tokens granted with nothing to copy (%s): "
          "%" PRIu32 " empty arcs made%s%s",
          version, n, a->config.migration == RK_MIGRATE_NONE ? "migration none" : "first placement",
          made, rc == RING_OK ? "" : "; ", rc == RING_OK ? "" : err.message);
}

void agent_own_check(agent *a) {
  a->own_checked_ms = rd_now_ms();
  a->own_store_ok = arc_store_usable(a->store);
  if (!a->own_store_ok || a->tokens == 0 || !a->has_config)
    return; /* no store, no table or no config yet: nothing can be decided */
  uint32_t *missing = malloc(a->tokens * sizeof *missing), owned = 0;
  if (missing == NULL)
    return;
  uint32_t n = find_missing(a, missing, &owned);
  bool first = a->own_decided && !placed(a);
  if (n > 0 && (first || a->config.migration == RK_MIGRATE_NONE)) {
    adopt(a, missing, n, a->seen_version);
    n = find_missing(a, missing, &owned);
  }
  if (first && owned > 0 && n == 0) { /* decided, new, and now holding what it owns */
    int e = write_marker(a, a->seen_version, false);
    if (e != 0)
      rd_logf(RD_ERROR, "%s/" ARC_DIR_PLACED ": %s", arc_store_dir(a->store), strerror(-e));
  }
  a->own_missing = n;
  a->own_missing_first = n ? missing[0] : 0;
  atomic_store(&a->m.missing, n);
  agent_refill_sync(a, missing, n); /* refilled from the other owners, reported in missing/ */
  free(missing);
}

/* The version acks/<id> holds: 0 when absent; -1 when etcd cannot say. */
static int64_t acked_before(agent *a) {
  char key[RK_KEY_MAX];
  int klen = agent_key(a, key, "acks/");
  ring_kvs r = {0};
  ring_error err = {0};
  if (ring_etcd_range(a->etcd, key, (size_t)klen, NULL, &r, &err) != RING_OK)
    return -1;
  uint64_t v = 0;
  if (r.n == 1 &&
      rk_ack_decode((const char *)r.kvs[0].value, r.kvs[0].value_len, &v, NULL) != RING_OK)
    v = 1; /* something is there: the id has been in the cluster */
  ring_kvs_clear(&r);
  return (int64_t)v;
}

void agent_own_start(agent *a) {
  if (a->own_decided || placed(a)) {
    a->own_decided = true;
    return;
  }
  int64_t v = acked_before(a);
  if (v < 0)
    return; /* etcd cannot say: nothing is adopted until it can (agent_own_tick asks again) */
  if (v > 0) {
    rd_logf(RD_WARN,
            "data dir %s is new, but id %s acked version %" PRId64 " before: a replaced or "
            "wiped disk. Owned tokens will be reported missing, never made empty",
            arc_store_dir(a->store), a->o.id, v);
    int e = write_marker(a, (uint64_t)v, true);
    if (e != 0) {
      rd_logf(RD_ERROR, "%s/" ARC_DIR_PLACED ": %s", arc_store_dir(a->store), strerror(-e));
      return; /* undecided: adopt nothing */
    }
  }
  a->own_decided = true; /* v == 0: new to the cluster, a first placement may give it tokens */
}

uint64_t agent_own_tick(agent *a) {
  if (!a->own_decided)
    agent_own_start(a);
  uint64_t now = rd_now_ms();
  if (now - a->own_checked_ms >= CHECK_EVERY_MS)
    agent_own_check(a);
  atomic_store(&a->m.store_ok, a->own_store_ok);
  char why[200];
  if (!a->own_store_ok) {
    snprintf(why, sizeof why, "%.120s: arcs/ or tmp/ is missing (data disk not mounted?)",
             arc_store_dir(a->store));
    agent_trouble(a, "arc store unavailable", why);
  } else if (a->own_missing > 0) {
    snprintf(why, sizeof why,
             "%" PRIu32 " owned tokens have no arc here (first: %" PRIu32
             "); served as not held, never as empty; %s",
             a->own_missing, a->own_missing_first,
             a->refill_held ? "the refill waits: auto-apply is none (ringctl auto-apply repair)"
                            : "refilling from the other owners");
    agent_trouble(a, "owned arcs missing", why);
  }
  uint64_t since = now - a->own_checked_ms;
  return since >= CHECK_EVERY_MS ? 0 : CHECK_EVERY_MS - since;
}
