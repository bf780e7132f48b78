/*
 * test_watcher.c: the live ring watcher against real etcd. A writer
 * publishes versions the way the coordinator does (one txn putting
 * tables/<v>, deltas/<v> and version) and watchers follow: deltas when one
 * version behind, tables otherwise; corrupt tables and deltas refused,
 * logged and counted while the last good table stays; acks written; 100
 * watchers in one process; etcd killed and restarted mid-publishing (reads
 * never stop); compaction mid-publishing, and while the watchers are cut
 * off by a proxy, so that each watch resumes into a compacted past. And
 * the delta carried in the version's watch response (version/delta): taken
 * with no request when one behind; never when two behind, or when it is
 * junk (refused, counted), where the table is read instead; and built once
 * per process, the watchers following the same table sharing it.
 */
#include "etcd_harness.h"
#include "etcd_client.h"
#include "proc_harness.h"
#include "ring_etcd.h"
#include "test_cluster.h"
#include "test_tables.h"
#include "check_main.h"
#include "table_reads.h" /* ring__table_reads_clear: counted tests start clean */

#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#define CLUSTER "demo"

static etcd_cluster one;

static ring_etcd *client(const char *endpoints) { return test_client(endpoints, 3000, 0); }

/* ------------------------------------------------------------ publishing */

/* Version 1: the planner's initial placement of 6 nodes in 3 zones. */
static ring_table *first_table(uint32_t tokens) {
  test_cluster c = cluster_make(6, 3);
  ring_plan_config cfg = {CLUSTER, tokens, 3, 0, "zone", NULL, 0, 0, 0, NULL, RING_BALANCE_TOKENS,
                          NULL};
  ring_plan *p;
  ring_error err;
  ck_assert_msg(ring_plan_compute(NULL, c.specs, c.n, &cfg, &p, &err) == RING_OK, "%s",
                err.message);
  ring_table *t;
  ck_assert_int_eq(ring_table_clone(ring_plan_target(p), 1, &t), RING_OK);
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  ring_plan_free(p);
  cluster_free(&c);
  return t;
}

/* The next version: four tokens swap their first two replicas (owners stay
 * distinct), so every delta moves a few slots. NULL on failure (no asserts:
 * writer threads call it). */
static ring_table *next_table(const ring_table *prev, uint64_t v) {
  return test_table_swapped(prev, v, 4, 13, 31);
}

typedef struct writer {
  ring_etcd *c;
  ring_table *cur; /* the last table published */
  uint64_t v;      /* its version */
} writer;

/* Breaks a codec output's checksum (its last 16 hex digits). */
static void corrupt_checksum(char *json, size_t len) {
  char *p = json + len - 18; /* ...:<16 hex>"} */
  for (int i = 0; i < 16; i++)
    p[i] = p[i] == '0' ? '1' : '0';
}

/* OLD_WRITER: as a coordinator from before version/delta (deltas/<v> only);
 * GARBAGE_CARRY: version/delta holds junk, deltas/<v> the good delta. */
enum { BAD_TABLE = 1, BAD_DELTA = 2, NO_DELTA = 4, OLD_WRITER = 8, GARBAGE_CARRY = 16 };

/* Publishes table t as version v in one txn: tables/<v>, deltas/<v> and
 * version/delta (from the writer's current table when v follows it) and
 * version. Returns a ring_errno; RING_OK also when an uncertain txn turns
 * out applied. */
static int publish_table(writer *w, const ring_table *t, int flags) {
  uint64_t v = ring_table_version(t);
  char tkey[96], dkey[96], ckey[96], vkey[64], vval[24];
  snprintf(tkey, sizeof tkey, "/ringkeeper/" CLUSTER "/tables/%llu", (unsigned long long)v);
  snprintf(dkey, sizeof dkey, "/ringkeeper/" CLUSTER "/deltas/%llu", (unsigned long long)v);
  snprintf(ckey, sizeof ckey, "/ringkeeper/" CLUSTER "/version/delta");
  snprintf(vkey, sizeof vkey, "/ringkeeper/" CLUSTER "/version");
  snprintf(vval, sizeof vval, "%llu", (unsigned long long)v);
  char *tj = NULL, *dj = NULL;
  size_t tl = 0, dl = 0;
  if (ring_table_encode(t, &tj, &tl) != RING_OK)
    return RING_ENOMEM;
  if (flags & BAD_TABLE)
    corrupt_checksum(tj, tl);
  bool delta = w->cur && v == w->v + 1 && !(flags & NO_DELTA) &&
               ring_delta_encode(w->cur, t, &dj, &dl) == RING_OK;
  if (delta && (flags & BAD_DELTA))
    corrupt_checksum(dj, dl);
  static const char junk[] = "{\"format\":\"ringkeeper.delta.v1\",[[[";
  bool junk_carry = delta && (flags & GARBAGE_CARRY);
  ring_op ops[4] = {{RING_OP_PUT, tkey, strlen(tkey), tj, tl, 0, false},
                    {RING_OP_PUT, vkey, strlen(vkey), vval, strlen(vval), 0, false},
                    {RING_OP_PUT, dkey, strlen(dkey), dj, dl, 0, false},
                    {RING_OP_PUT, ckey, strlen(ckey), junk_carry ? junk : dj,
                     junk_carry ? strlen(junk) : dl, 0, false}};
  uint32_t n_ops = !delta ? 2 : (flags & OLD_WRITER) ? 3 : 4;
  ring_error err;
  int rc = ring_etcd_txn(w->c, NULL, 0, ops, n_ops, NULL, 0, NULL, &err);
  if (rc == RING_EUNKNOWN) { /* re-read, never retry blind */
    ring_kvs kv;
    if (ring_etcd_range(w->c, vkey, strlen(vkey), NULL, &kv, &err) == RING_OK) {
      if (kv.n == 1 && strcmp((char *)kv.kvs[0].value, vval) == 0)
        rc = RING_OK;
      ring_kvs_clear(&kv);
    }
  }
  free(tj);
  free(dj);
  return rc;
}

/* Publishes the next version; it becomes the writer's current table. */
static int publish_next(writer *w, int flags) {
  ring_table *t = w->cur ? next_table(w->cur, w->v + 1) : first_table(256);
  if (t == NULL)
    return RING_ENOMEM;
  int rc = publish_table(w, t, flags);
  if (rc != RING_OK) {
    ring_table_free(t);
    return rc;
  }
  ring_table_free(w->cur);
  w->cur = t;
  w->v = ring_table_version(t);
  return RING_OK;
}

/* Publishes with retries while etcd is away; false after ~60 s. */
static bool publish_retry(writer *w) {
  for (int i = 0; i < 600; i++) {
    if (publish_next(w, 0) == RING_OK)
      return true;
    harness_sleep_ms(100);
  }
  return false;
}

static void writer_free(writer *w) {
  ring_table_free(w->cur);
  w->cur = NULL;
}

/* Clears the cluster's keys so each test starts from no table. */
static void wipe(ring_etcd *c) {
  ring_error err;
  const char *prefix = "/ringkeeper/" CLUSTER "/";
  ck_assert_int_eq(ring_etcd_delete(c, prefix, strlen(prefix), true, NULL, NULL, &err), RING_OK);
}

/* ------------------------------------------------------------- watching */

/* What one watcher's callback saw. */
typedef struct seen {
  _Atomic uint64_t calls;
  _Atomic uint64_t last;  /* version of the last table called back */
  _Atomic bool backwards; /* a callback with a version not above the last */
} seen;

static void on_table(void *ud, const ring_table *t) {
  seen *s = ud;
  uint64_t v = ring_table_version(t);
  if (v <= atomic_load(&s->last))
    atomic_store(&s->backwards, true);
  atomic_store(&s->last, v);
  atomic_fetch_add(&s->calls, 1);
}

typedef struct follower {
  ring_live *live;
  ring_watcher *w;
  seen s;
} follower;

static void follower_start(follower *f, ring_etcd *c, const char *ack_id) {
  memset(f, 0, sizeof *f);
  ck_assert_int_eq(ring_live_new(&f->live), RING_OK);
  ring_watcher_opts o = {.cluster = CLUSTER, .ack_id = ack_id, .on_table = on_table, .ud = &f->s};
  ring_error err;
  ck_assert_msg(ring_watcher_start(c, &o, f->live, &f->w, &err) == RING_OK, "%s", err.message);
}

static void follower_stop(follower *f) {
  ring_watcher_stop(f->w);
  ring_live_free(f->live);
}

static void followers_stop(follower *f, int n) {
  for (int i = 0; i < n; i++)
    follower_stop(&f[i]);
}

/* Waits until every follower serves version v; false after timeout_s. */
/* Whether every follower serves exactly version v. */
static bool all_at(follower *f, int n, uint64_t v) {
  for (int i = 0; i < n; i++)
    if (ring_live_version(f[i].live) != v)
      return false;
  return true;
}

static bool wait_all(follower *f, int n, uint64_t v, double timeout_s) {
  double end = harness_now() + timeout_s;
  for (int i = 0; i < n; i++)
    while (ring_live_version(f[i].live) < v) {
      if (harness_now() > end)
        return false;
      harness_sleep_ms(2);
    }
  return true;
}

static ring_watcher_stats stats(follower *f) {
  ring_watcher_stats s;
  ring_watcher_stats_get(f->w, &s);
  return s;
}

/* Waits until f has refused at least n versions (or 30 s have passed:
 * the caller's assertions then say what is missing). */
static void wait_rejected(follower *f, uint64_t n) {
  double end = harness_now() + 30;
  while (stats(f).rejected < n && harness_now() < end)
    harness_sleep_ms(5);
}

/* The table in service encodes to the same bytes as want. */
static void assert_serving(follower *f, const ring_table *want) {
  const ring_table *t = ring_live_enter(f->live);
  ck_assert_ptr_nonnull(t);
  char *a, *b;
  size_t al, bl;
  ck_assert_int_eq(ring_table_encode(t, &a, &al), RING_OK);
  ring_live_exit(f->live);
  ck_assert_int_eq(ring_table_encode(want, &b, &bl), RING_OK);
  ck_assert_uint_eq(al, bl);
  ck_assert(memcmp(a, b, al) == 0);
  free(a);
  free(b);
}

static void assert_ack(ring_etcd *c, const char *id, uint64_t v) {
  char key[96], want[24];
  snprintf(key, sizeof key, "/ringkeeper/" CLUSTER "/acks/%s", id);
  snprintf(want, sizeof want, "%llu", (unsigned long long)v);
  double end = harness_now() + 5;
  for (;;) { /* the ack follows the swap */
    ring_kvs kv;
    ring_error err;
    ck_assert_int_eq(ring_etcd_range(c, key, strlen(key), NULL, &kv, &err), RING_OK);
    bool ok = kv.n == 1 && strcmp((char *)kv.kvs[0].value, want) == 0;
    ring_kvs_clear(&kv);
    if (ok)
      return;
    ck_assert_msg(harness_now() < end, "acks/%s is not %s", id, want);
    harness_sleep_ms(10);
  }
}

/* ------------------------------------------------------- a cuttable link */

/* A loopback TCP proxy in front of etcd, so a test can cut the watchers
 * off (a partition: etcd lives on, the writer still reaches it) and let
 * them back. Down: the listener is closed (connection refused) and every
 * open connection dropped. */
#define PROXY_PAIRS 128

typedef struct proxy {
  int port, target;        /* ours, etcd's */
  int lfd;                 /* -1 while down */
  int fds[PROXY_PAIRS][2]; /* client, upstream; -1 when free */
  pthread_t thread;
  _Atomic bool want_down, quit;
  _Atomic bool is_down; /* the proxy thread has closed everything */
  char url[64];
} proxy;

static int proxy_listen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one_ = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one_, sizeof one_);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 256) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void proxy_drop(proxy *p, int i) {
  close(p->fds[i][0]);
  close(p->fds[i][1]);
  p->fds[i][0] = p->fds[i][1] = -1;
}

static void proxy_accept(proxy *p) {
  int c = accept(p->lfd, NULL, NULL);
  if (c < 0)
    return;
  int u = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)p->target),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int i = 0;
  while (i < PROXY_PAIRS && p->fds[i][0] >= 0)
    i++;
  if (i == PROXY_PAIRS || connect(u, (struct sockaddr *)&a, sizeof a) != 0) {
    close(c);
    close(u);
    return;
  }
  p->fds[i][0] = c;
  p->fds[i][1] = u;
}

/* Moves what is readable on side `from` of pair i to the other side. */
static void proxy_pump(proxy *p, int i, int from) {
  char buf[16384];
  ssize_t n = read(p->fds[i][from], buf, sizeof buf);
  for (ssize_t off = 0; n > 0 && off < n;) {
    ssize_t w = write(p->fds[i][!from], buf + off, (size_t)(n - off));
    if (w <= 0) {
      n = -1;
      break;
    }
    off += w;
  }
  if (n <= 0)
    proxy_drop(p, i);
}

static void *proxy_main(void *arg) {
  proxy *p = arg;
  while (!atomic_load(&p->quit)) {
    bool down = atomic_load(&p->want_down);
    if (down && p->lfd >= 0) {
      close(p->lfd);
      p->lfd = -1;
      for (int i = 0; i < PROXY_PAIRS; i++)
        if (p->fds[i][0] >= 0)
          proxy_drop(p, i);
      atomic_store(&p->is_down, true);
    } else if (!down && p->lfd < 0) {
      p->lfd = proxy_listen(p->port);
      atomic_store(&p->is_down, false);
    }
    struct pollfd pf[2 * PROXY_PAIRS + 1];
    int map[2 * PROXY_PAIRS + 1], n = 0;
    if (p->lfd >= 0)
      pf[n] = (struct pollfd){p->lfd, POLLIN, 0}, map[n++] = -1;
    for (int i = 0; i < PROXY_PAIRS; i++)
      for (int side = 0; side < 2 && p->fds[i][0] >= 0; side++)
        pf[n] = (struct pollfd){p->fds[i][side], POLLIN, 0}, map[n++] = 2 * i + side;
    if (poll(pf, (nfds_t)n, 20) <= 0)
      continue;
    for (int k = 0; k < n; k++) {
      if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      if (map[k] < 0)
        proxy_accept(p);
      else if (p->fds[map[k] / 2][0] >= 0)
        proxy_pump(p, map[k] / 2, map[k] % 2);
    }
  }
  return NULL;
}

static void proxy_start(proxy *p, int target) {
  memset(p, 0, sizeof *p);
  memset(p->fds, -1, sizeof p->fds);
  p->target = target;
  p->port = harness_free_port();
  p->lfd = proxy_listen(p->port);
  ck_assert_int_ge(p->lfd, 0);
  snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->port);
  pthread_create(&p->thread, NULL, proxy_main, p);
}

static void proxy_stop(proxy *p) {
  atomic_store(&p->quit, true);
  pthread_join(p->thread, NULL);
  for (int i = 0; i < PROXY_PAIRS; i++)
    if (p->fds[i][0] >= 0)
      proxy_drop(p, i);
  if (p->lfd >= 0)
    close(p->lfd);
}

/* ---------------------------------------------------------------- tests */

START_TEST(follows_with_deltas_and_acks) {
  ring_etcd *c = client(one.endpoints);
  wipe(c);
  writer wr = {c, NULL, 0};
  follower f;
  follower_start(&f, c, "host-1"); /* no table yet: not an error */
  ck_assert_uint_eq(ring_live_version(f.live), 0);
  ck_assert_ptr_null(ring_live_enter(f.live));
  ring_live_exit(f.live);
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK); /* v1: a table, no delta */
  ck_assert(wait_all(&f, 1, 1, 10));
  for (int i = 0; i < 9; i++) /* v2..v10: deltas */
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ck_assert(wait_all(&f, 1, 10, 10));
  assert_serving(&f, wr.cur);
  assert_ack(c, "host-1", 10);
  ring_watcher_stats s = stats(&f);
  ck_assert_uint_eq(s.version, 10);
  ck_assert_uint_eq(s.rejected, 0);
  ck_assert_uint_eq(s.swaps, atomic_load(&f.s.calls));
  ck_assert_uint_ge(s.deltas, 1); /* versions published back to back may be taken in one step */
  ck_assert(!atomic_load(&f.s.backwards));
  /* spaced out, every version is one step: all by delta */
  uint64_t d0 = s.deltas;
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
    ck_assert(wait_all(&f, 1, wr.v, 10));
  }
  ck_assert_uint_eq(stats(&f).deltas, d0 + 5);
  /* a jump of two versions: the table, not the delta */
  ring_table *skip = next_table(wr.cur, wr.v + 1), *jump = next_table(skip, wr.v + 2);
  ring_table_free(wr.cur);
  wr.cur = skip;
  wr.v++;
  ck_assert_int_eq(publish_table(&wr, jump, 0), RING_OK);
  ring_table_free(wr.cur);
  wr.cur = jump;
  wr.v++;
  ck_assert(wait_all(&f, 1, wr.v, 10));
  ck_assert_uint_eq(stats(&f).deltas, d0 + 5);
  assert_serving(&f, wr.cur);
  assert_ack(c, "host-1", wr.v);
  /* a second watcher started now reads the current table before returning */
  follower g;
  follower_start(&g, c, NULL);
  ck_assert_uint_eq(ring_live_version(g.live), wr.v);
  assert_serving(&g, wr.cur);
  follower_stop(&g);
  follower_stop(&f);
  writer_free(&wr);
  ring_etcd_close(c);
}
END_TEST

/* Captures stderr into a temporary file until capture_stderr_end. */
static void capture_stderr_begin(int *saved, char *path) {
  fflush(stderr);
  *saved = dup(2);
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  dup2(fd, 2);
  close(fd);
}

static void capture_stderr_end(int saved, const char *path, char *buf, size_t cap) {
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f)
    fclose(f);
  unlink(path);
  fputs(buf, stderr); /* still shown */
}

START_TEST(refuses_corrupt_tables_and_deltas) {
  ring_etcd *c = client(one.endpoints);
  wipe(c);
  writer wr = {c, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  follower f;
  follower_start(&f, c, "host-2");
  ck_assert_uint_eq(ring_live_version(f.live), 1);
  int saved;
  char path[] = "/tmp/test_watcher_log_XXXXXX", log[8192];
  capture_stderr_begin(&saved, path);
  /* 1. consecutive, delta fine but table corrupt: the delta is used */
  ck_assert_int_eq(publish_next(&wr, BAD_TABLE), RING_OK);
  bool ok1 = wait_all(&f, 1, 2, 10);
  ring_watcher_stats s1 = stats(&f);
  /* 2. consecutive, delta corrupt: refused, the table is used */
  ck_assert_int_eq(publish_next(&wr, BAD_DELTA), RING_OK);
  bool ok2 = wait_all(&f, 1, 3, 10);
  ring_watcher_stats s2 = stats(&f);
  /* 3. both corrupt: both refused, version 3 stays in service */
  ck_assert_int_eq(publish_next(&wr, BAD_TABLE | BAD_DELTA), RING_OK);
  wait_rejected(&f, s2.rejected + 2);
  ring_watcher_stats s3 = stats(&f);
  /* 4. a corrupt table two versions ahead (no delta applies): refused */
  ck_assert_int_eq(publish_next(&wr, BAD_TABLE), RING_OK);
  wait_rejected(&f, s3.rejected + 1);
  ring_watcher_stats s4 = stats(&f);
  uint64_t v4 = wr.v;
  /* 5. a garbage version value: refused, nothing fetched */
  const char *vkey = "/ringkeeper/" CLUSTER "/version";
  ring_error err;
  ck_assert_int_eq(ring_etcd_put(c, vkey, strlen(vkey), "12x", 3, 0, NULL, NULL, &err), RING_OK);
  wait_rejected(&f, s4.rejected + 1);
  ring_watcher_stats s5 = stats(&f);
  capture_stderr_end(saved, path, log, sizeof log);
  ck_assert(ok1 && ok2);
  ck_assert_uint_eq(s1.deltas, 1);
  ck_assert_uint_eq(s1.rejected, 0);
  ck_assert_uint_eq(s2.version, 3);
  ck_assert_uint_eq(s2.deltas, 1); /* v3 came from the table */
  ck_assert_uint_eq(s2.rejected, 1);
  ck_assert_uint_eq(s3.rejected, 3);
  ck_assert_uint_eq(s3.version, 3);
  ck_assert_uint_eq(s4.rejected, 4);
  ck_assert_uint_eq(s4.version, 3);
  ck_assert_uint_eq(s5.rejected, 5);
  ck_assert_uint_eq(s5.version, 3);
  ck_assert_uint_eq(v4, 5);
  /* the last good table stays in service, acked */
  const ring_table *t = ring_live_enter(f.live);
  ck_assert_uint_eq(ring_table_version(t), 3);
  uint16_t owners[3];
  ck_assert_int_eq(ring_lookup(t, "key", 3, owners, 3), 3);
  ring_live_exit(f.live);
  assert_ack(c, "host-2", 3);
  /* logged: one logfmt line per refusal, naming version and error */
  ck_assert_msg(strstr(log, "level=warn msg=\"table refused\" cluster=demo version=3 "
                            "source=delta err=\"checksum: result owners hash to") != NULL,
                "%s", log);
  ck_assert_ptr_nonnull(strstr(log, "version=4 source=delta err=\"checksum"));
  ck_assert_ptr_nonnull(strstr(log, "version=4 source=table err=\"checksum: owners hash to"));
  ck_assert_ptr_nonnull(strstr(log, "version=5 source=table err=\"checksum"));
  ck_assert_ptr_nonnull(strstr(log, "source=version err=\"version"));
  ck_assert_ptr_nonnull(strstr(log, "ts="));
  /* a good version after all that: followed (by table: 3 is two behind) */
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ck_assert(wait_all(&f, 1, 6, 10));
  assert_serving(&f, wr.cur);
  assert_ack(c, "host-2", 6);
  ck_assert(!atomic_load(&f.s.backwards));
  follower_stop(&f);
  writer_free(&wr);
  ring_etcd_close(c);
}
END_TEST

START_TEST(refuses_wrong_cluster_and_version) {
  ring_etcd *c = client(one.endpoints);
  wipe(c);
  writer wr = {c, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  follower f;
  follower_start(&f, c, NULL);
  /* tables/2 holds version 3; tables/3 holds another cluster's table */
  ring_table *t2 = next_table(wr.cur, 3), *t3;
  char *j;
  size_t jl;
  ck_assert_int_eq(ring_table_encode(t2, &j, &jl), RING_OK);
  const char *k2 = "/ringkeeper/" CLUSTER "/tables/2", *vkey = "/ringkeeper/" CLUSTER "/version";
  ring_error err;
  ck_assert_int_eq(ring_etcd_put(c, k2, strlen(k2), j, jl, 0, NULL, NULL, &err), RING_OK);
  ck_assert_int_eq(ring_etcd_put(c, vkey, strlen(vkey), "2", 1, 0, NULL, NULL, &err), RING_OK);
  free(j);
  wait_rejected(&f, 1);
  ck_assert_uint_eq(stats(&f).rejected, 1);
  ring_table_params p = {"other", "zone", 3, 0, 256, 3};
  ck_assert_int_eq(ring_table_new(&p, &t3, NULL), RING_OK);
  for (uint16_t i = 0; i < ring_table_node_count(wr.cur); i++) {
    const char *keys[] = {"zone"}, *vals[] = {ring_table_node_label(wr.cur, i, "zone")};
    ring_node_spec s = {ring_table_node_id(wr.cur, i),
                        ring_table_node_addr(wr.cur, i),
                        keys,
                        vals,
                        1,
                        1.0,
                        RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t3, &s, NULL, NULL), RING_OK);
  }
  for (uint32_t tok = 0; tok < 256; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(t3, tok, r, ring_table_owner(wr.cur, tok, r));
  ck_assert_int_eq(ring_table_seal(t3, NULL), RING_OK);
  ck_assert_int_eq(ring_table_encode(t3, &j, &jl), RING_OK);
  const char *k3 = "/ringkeeper/" CLUSTER "/tables/3";
  ck_assert_int_eq(ring_etcd_put(c, k3, strlen(k3), j, jl, 0, NULL, NULL, &err), RING_OK);
  ck_assert_int_eq(ring_etcd_put(c, vkey, strlen(vkey), "3", 1, 0, NULL, NULL, &err), RING_OK);
  free(j);
  wait_rejected(&f, 2);
  ck_assert_uint_eq(stats(&f).rejected, 2);
  /* version 4 named with no table at all: refused too */
  ck_assert_int_eq(ring_etcd_put(c, vkey, strlen(vkey), "4", 1, 0, NULL, NULL, &err), RING_OK);
  wait_rejected(&f, 3);
  ck_assert_uint_eq(stats(&f).rejected, 3);
  ck_assert_uint_eq(ring_live_version(f.live), 1);
  assert_serving(&f, wr.cur);
  ring_table_free(t2);
  ring_table_free(t3);
  follower_stop(&f);
  writer_free(&wr);
  ring_etcd_close(c);
}
END_TEST

/* What a log callback was told (the last event, copied). */
typedef struct heard {
  pthread_mutex_t lock;
  int events;
  ring_log_level level;
  char msg[64], cluster[64], source[64], error[RING_ERROR_MESSAGE_MAX];
  uint64_t version;
} heard;

static void on_log(void *ud, const ring_log_event *ev) {
  heard *h = ud;
  pthread_mutex_lock(&h->lock);
  h->events++;
  h->level = ev->level;
  h->version = ev->version;
  snprintf(h->msg, sizeof h->msg, "%s", ev->msg);
  snprintf(h->cluster, sizeof h->cluster, "%s", ev->cluster);
  snprintf(h->source, sizeof h->source, "%s", ev->source);
  snprintf(h->error, sizeof h->error, "%s", ev->error);
  pthread_mutex_unlock(&h->lock);
}

/* With a log callback the watcher tells it, and writes nothing to stderr. */
START_TEST(logs_through_the_callback) {
  ring_etcd *c = client(one.endpoints);
  wipe(c);
  writer wr = {c, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  heard h = {.lock = PTHREAD_MUTEX_INITIALIZER};
  ring_live *live;
  ck_assert_int_eq(ring_live_new(&live), RING_OK);
  ring_watcher_opts o = {.cluster = CLUSTER, .log = on_log, .log_ud = &h};
  ring_watcher *w;
  ring_error err;
  ck_assert_int_eq(ring_watcher_start(c, &o, live, &w, &err), RING_OK);
  int saved;
  char path[] = "/tmp/test_watcher_log_XXXXXX", log[8192];
  capture_stderr_begin(&saved, path);
  const char *vkey = "/ringkeeper/" CLUSTER "/version";
  ck_assert_int_eq(ring_etcd_put(c, vkey, strlen(vkey), "x", 1, 0, NULL, NULL, &err), RING_OK);
  double end = harness_now() + 30;
  ring_watcher_stats s = {0};
  while ((ring_watcher_stats_get(w, &s), s.rejected) < 1 && harness_now() < end)
    harness_sleep_ms(20);
  ring_watcher_stop(w);
  capture_stderr_end(saved, path, log, sizeof log);
  ck_assert_int_ge(h.events, 1);
  ck_assert_int_eq(h.level, RING_LOG_WARN);
  ck_assert_str_eq(h.msg, "table refused");
  ck_assert_str_eq(h.cluster, CLUSTER);
  ck_assert_str_eq(h.source, "version");
  ck_assert_ptr_nonnull(strstr(h.error, "not a version"));
  ck_assert_msg(log[0] == '\0', "stderr: %s", log);
  ring_live_free(live);
  writer_free(&wr);
  ring_etcd_close(c);
}
END_TEST

START_TEST(start_refuses_bad_options) {
  ring_etcd *c = client(one.endpoints);
  ring_live *live;
  ck_assert_int_eq(ring_live_new(&live), RING_OK);
  ring_watcher *w = (ring_watcher *)0x1;
  ring_error err;
  ring_watcher_opts bad = {.cluster = "Bad Cluster"};
  ck_assert_int_eq(ring_watcher_start(c, &bad, live, &w, &err), RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "cluster"));
  ring_watcher_opts bad_ack = {.cluster = CLUSTER, .ack_id = "no/slash"};
  ck_assert_int_eq(ring_watcher_start(c, &bad_ack, live, &w, &err), RING_EINVAL);
  ck_assert_ptr_nonnull(strstr(err.message, "ack_id"));
  ck_assert_int_eq(ring_watcher_start(NULL, &bad, live, &w, &err), RING_EINVAL);
  ck_assert_ptr_eq(w, (ring_watcher *)0x1);
  ring_etcd_close(c);
  /* a dead etcd: start fails (it must read the current table first) */
  char ep[64];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", harness_free_port());
  c = client(ep);
  ring_watcher_opts o = {.cluster = CLUSTER};
  ck_assert_int_eq(ring_watcher_start(c, &o, live, &w, &err), RING_ECONNECT);
  ck_assert_ptr_eq(w, (ring_watcher *)0x1);
  ring_watcher_stop(NULL);
  ring_etcd_close(c);
  ring_live_free(live);
}
END_TEST

#define MANY 100

START_TEST(hundred_watchers) {
  ring_etcd *writer_c = client(one.endpoints);
  wipe(writer_c);
  writer wr = {writer_c, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ring_etcd *shared = client(one.endpoints); /* one client for all 100 */
  follower *f = calloc(MANY, sizeof *f);
  for (int i = 0; i < MANY; i++) {
    char id[16];
    snprintf(id, sizeof id, "w%d", i);
    follower_start(&f[i], shared, id); /* every one acks: one flush of 100 a version */
  }
  double worst = 0;
  for (int n = 0; n < 20; n++) {
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
    double t0 = harness_now();
    ck_assert_msg(wait_all(f, MANY, wr.v, 20), "not all watchers reached %llu",
                  (unsigned long long)wr.v);
    double dt = harness_now() - t0;
    worst = dt > worst ? dt : worst;
  }
  fprintf(stderr, "hundred_watchers: slowest version reached all %d in %.1f ms\n", MANY,
          worst * 1000);
  uint64_t deltas = 0;
  for (int i = 0; i < MANY; i++) {
    ring_watcher_stats s = stats(&f[i]);
    ck_assert_uint_eq(s.version, wr.v);
    ck_assert_uint_eq(s.rejected, 0);
    ck_assert(!atomic_load(&f[i].s.backwards));
    deltas += s.deltas;
  }
  ck_assert_uint_gt(deltas, MANY * 10); /* most steps were deltas */
  assert_serving(&f[MANY - 1], wr.cur);
  assert_ack(writer_c, "w0", wr.v);
  assert_ack(writer_c, "w90", wr.v);
  assert_ack(writer_c, "w99", wr.v);
  followers_stop(f, MANY);
  free(f);
  ring_etcd_close(shared);
  writer_free(&wr);
  ring_etcd_close(writer_c);
}
END_TEST

/* ------------------------------------------- disturbances while publishing */

/* Readers that look up keys in every follower's table, nonstop, and note
 * a missing table or a version going backwards. */
typedef struct readers {
  follower *f;
  int n;
  _Atomic bool done;
  _Atomic bool failed;
  _Atomic uint64_t reads;
} readers;

static void *reader_main(void *arg) {
  readers *r = arg;
  uint64_t *last = calloc((size_t)r->n, sizeof *last);
  while (!atomic_load(&r->done)) {
    for (int i = 0; i < r->n; i++) {
      const ring_table *t = ring_live_enter(r->f[i].live);
      uint16_t owners[3];
      if (t == NULL || ring_table_version(t) < last[i] || ring_lookup(t, "k", 1, owners, 3) != 3)
        atomic_store(&r->failed, true);
      else
        last[i] = ring_table_version(t);
      ring_live_exit(r->f[i].live);
    }
    atomic_fetch_add(&r->reads, 1);
    harness_sleep_ms(1);
  }
  free(last);
  return NULL;
}

typedef struct pub_thread {
  writer *w;
  int count; /* versions to publish */
  int every_ms;
  int compact_every; /* compact after every Nth version, 0: never */
  _Atomic int published;
  _Atomic bool failed;
} pub_thread;

static void *publisher_main(void *arg) {
  pub_thread *p = arg;
  for (int i = 0; i < p->count; i++) {
    if (!publish_retry(p->w)) {
      atomic_store(&p->failed, true);
      break;
    }
    atomic_fetch_add(&p->published, 1);
    if (p->compact_every && (i + 1) % p->compact_every == 0) {
      ring_kvs kv; /* the current revision: compact everything before it */
      ring_error err;
      const char *vkey = "/ringkeeper/" CLUSTER "/version";
      if (ring_etcd_range(p->w->c, vkey, strlen(vkey), NULL, &kv, &err) == RING_OK) {
        if (ring_etcd_compact(p->w->c, kv.revision, &err) != RING_OK)
          fprintf(stderr, "compact: %s\n", err.message);
        ring_kvs_clear(&kv);
      }
    }
    harness_sleep_ms(p->every_ms);
  }
  return NULL;
}

#define FEW 10

START_TEST(etcd_killed_while_publishing) {
  ring_etcd *wc = client(one.endpoints);
  wipe(wc);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ring_etcd *shared = client(one.endpoints);
  follower f[FEW];
  for (int i = 0; i < FEW; i++)
    follower_start(&f[i], shared, i == 0 ? "killed-0" : NULL);
  readers rd = {f, FEW, false, false, 0};
  pthread_t rt, pt;
  pthread_create(&rt, NULL, reader_main, &rd);
  pub_thread pub = {&wr, 40, 20, 0, 0, false};
  pthread_create(&pt, NULL, publisher_main, &pub);
  while (atomic_load(&pub.published) < 10)
    harness_sleep_ms(5);
  etcd_member_signal(&one, 0, SIGKILL); /* mid-publishing */
  uint64_t reads_before = atomic_load(&rd.reads);
  ck_assert_msg(HARNESS_WAIT(atomic_load(&rd.reads) - reads_before > 100, 15),
                "reads stopped while etcd was dead");
  uint64_t during = atomic_load(&rd.reads) - reads_before;
  uint64_t held = ring_live_version(f[0].live);
  ck_assert(etcd_member_restart(&one, 0));
  /* compact at once: watchers still in backoff resume into a compacted past */
  ring_kvs kv;
  ring_error err;
  const char *vkey = "/ringkeeper/" CLUSTER "/version";
  if (ring_etcd_range(wc, vkey, strlen(vkey), NULL, &kv, &err) == RING_OK) {
    ring_etcd_compact(wc, kv.revision, &err);
    ring_kvs_clear(&kv);
  }
  pthread_join(pt, NULL);
  ck_assert(!atomic_load(&pub.failed));
  ck_assert_msg(wait_all(f, FEW, wr.v, 30), "watchers did not catch up to %llu",
                (unsigned long long)wr.v);
  atomic_store(&rd.done, true);
  pthread_join(rt, NULL);
  ck_assert(!atomic_load(&rd.failed)); /* served throughout, never backwards */
  ck_assert_uint_gt(during, 100);      /* reads went on while etcd was dead */
  ck_assert_uint_ge(held, 5);          /* what it had when etcd died */
  for (int i = 0; i < FEW; i++) {
    ring_watcher_stats s = stats(&f[i]);
    ck_assert_uint_eq(s.version, wr.v);
    ck_assert_uint_eq(s.rejected, 0);
    ck_assert(!atomic_load(&f[i].s.backwards));
  }
  assert_serving(&f[FEW - 1], wr.cur);
  assert_ack(wc, "killed-0", wr.v);
  followers_stop(f, FEW);
  ring_etcd_close(shared);
  writer_free(&wr);
  ring_etcd_close(wc);
}
END_TEST

START_TEST(compaction_while_publishing) {
  ring_etcd *wc = client(one.endpoints);
  wipe(wc);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ring_etcd *shared = client(one.endpoints);
  follower f[FEW];
  for (int i = 0; i < FEW; i++)
    follower_start(&f[i], shared, NULL);
  pub_thread pub = {&wr, 60, 5, 3, 0, false};
  pthread_t pt;
  pthread_create(&pt, NULL, publisher_main, &pub);
  pthread_join(pt, NULL);
  ck_assert(!atomic_load(&pub.failed));
  ck_assert_msg(wait_all(f, FEW, wr.v, 30), "watchers did not reach %llu",
                (unsigned long long)wr.v);
  for (int i = 0; i < FEW; i++) {
    ck_assert_uint_eq(stats(&f[i]).rejected, 0);
    ck_assert(!atomic_load(&f[i].s.backwards));
  }
  assert_serving(&f[0], wr.cur);
  followers_stop(f, FEW);
  ring_etcd_close(shared);
  writer_free(&wr);
  ring_etcd_close(wc);
}
END_TEST

START_TEST(partition_then_compaction) {
  ring_etcd *wc = client(one.endpoints);
  wipe(wc);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  proxy px;
  proxy_start(&px, one.m[0].client_port);
  ring_etcd *cut = client(px.url); /* the watchers reach etcd only through the proxy */
  follower f[FEW];
  for (int i = 0; i < FEW; i++)
    follower_start(&f[i], cut, i == 0 ? "cut-0" : NULL);
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ck_assert(wait_all(f, FEW, 5, 10));
  ring_watcher_stats before = stats(&f[0]);
  readers rd = {f, FEW, false, false, 0};
  pthread_t rt;
  pthread_create(&rt, NULL, reader_main, &rd);
  atomic_store(&px.want_down, true); /* cut off */
  ck_assert(HARNESS_WAIT(atomic_load(&px.is_down), 5));
  for (int i = 0; i < 10; i++) /* v6..v15, the watchers see none of it */
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ring_kvs kv;
  ring_error err;
  const char *vkey = "/ringkeeper/" CLUSTER "/version";
  ck_assert_int_eq(ring_etcd_range(wc, vkey, strlen(vkey), NULL, &kv, &err), RING_OK);
  ck_assert_msg(ring_etcd_compact(wc, kv.revision, &err) == RING_OK, "%s", err.message);
  ring_kvs_clear(&kv);
  ck_assert(HARNESS_HOLDS(all_at(f, FEW, 5), 0.5)); /* still serving the last table they had */
  atomic_store(&px.want_down, false); /* back: each watch resumes into a compacted past */
  ck_assert_msg(wait_all(f, FEW, wr.v, 30), "watchers did not catch up to %llu",
                (unsigned long long)wr.v);
  atomic_store(&rd.done, true);
  pthread_join(rt, NULL);
  ck_assert(!atomic_load(&rd.failed));
  ck_assert_uint_gt(atomic_load(&rd.reads), 100);
  ring_watcher_stats after = stats(&f[0]);
  ck_assert_uint_eq(after.swaps, before.swaps + 1); /* re-read, straight to the newest */
  ck_assert_uint_eq(after.deltas, before.deltas);
  ck_assert_uint_eq(after.rejected, 0);
  assert_serving(&f[FEW - 1], wr.cur);
  assert_ack(wc, "cut-0", wr.v);
  followers_stop(f, FEW);
  ring_etcd_close(cut);
  proxy_stop(&px);
  writer_free(&wr);
  ring_etcd_close(wc);
}
END_TEST

/* ------------------------------------ one watch response per version */

/* Waits until f's callback saw version v (its counters are set by then). */
static bool wait_called(follower *f, uint64_t v) {
  double end = harness_now() + 10;
  while (atomic_load(&f->s.last) < v && harness_now() < end)
    harness_sleep_ms(2);
  return atomic_load(&f->s.last) >= v;
}

/* A writer, and a watcher on a client of its own (so its requests can be
 * counted) with no ack. */
typedef struct counted {
  ring_etcd *wc, *c; /* the writer's client, the watcher's */
  writer wr;
  follower f;
} counted;

/* Starts k on a fresh cluster: the watcher serves version 1. */
static void counted_start(counted *k) {
  /* a table another test of this process read at the same key (an earlier
   * cluster's tables/3, say) would cost a keys-only read on top */
  ring__table_reads_clear();
  k->wc = client(one.endpoints);
  k->wr = (writer){k->wc, NULL, 0};
  wipe(k->wc);
  ck_assert_int_eq(publish_next(&k->wr, 0), RING_OK);
  k->c = client(one.endpoints);
  follower_start(&k->f, k->c, NULL);
  ck_assert_uint_eq(ring_live_version(k->f.live), 1);
}

/* Checks what holds after every step (the table, no step back), and stops. */
static void counted_stop(counted *k) {
  assert_serving(&k->f, k->wr.cur);
  ck_assert(!atomic_load(&k->f.s.backwards));
  follower_stop(&k->f);
  ring_etcd_close(k->c);
  writer_free(&k->wr);
  ring_etcd_close(k->wc);
}

/* Publishes the next version with flags and returns how many requests the
 * watcher's client made until it was called back with it. */
static uint64_t requests_for_next(counted *k, int flags) {
  uint64_t r0 = ring_etcd_requests(k->c);
  ck_assert_int_eq(publish_next(&k->wr, flags), RING_OK);
  ck_assert(wait_called(&k->f, k->wr.v));
  return ring_etcd_requests(k->c) - r0;
}

/* The next good version is taken from its carried delta, with no request. */
static void next_by_carried_delta(counted *k) {
  uint64_t d0 = stats(&k->f).deltas;
  ck_assert_uint_eq(requests_for_next(k, 0), 0);
  ck_assert_uint_eq(stats(&k->f).deltas, d0 + 1);
  assert_serving(&k->f, k->wr.cur);
}

START_TEST(carried_delta_needs_no_request) {
  counted k;
  counted_start(&k);
  for (int i = 0; i < 5; i++) /* version and delta in one response: nothing to read */
    next_by_carried_delta(&k);
  /* a publisher from before version/delta: deltas/<v> is read, as before */
  ck_assert_uint_eq(requests_for_next(&k, OLD_WRITER), 1);
  ck_assert_uint_eq(stats(&k.f).deltas, 6);
  /* no delta at all: deltas/<v> is missing, so the table is read */
  ck_assert_uint_eq(requests_for_next(&k, NO_DELTA), 2);
  ck_assert_uint_eq(stats(&k.f).deltas, 6);
  /* version/delta still holds an older delta, written at another revision
   * than this version: not used (the old writer's path) */
  ck_assert_uint_eq(requests_for_next(&k, OLD_WRITER), 1);
  ck_assert_uint_eq(stats(&k.f).deltas, 7);
  next_by_carried_delta(&k);
  ring_watcher_stats s = stats(&k.f);
  ck_assert_uint_eq(s.rejected, 0);
  ck_assert_uint_eq(s.swaps, atomic_load(&k.f.s.calls));
  counted_stop(&k);
}
END_TEST

START_TEST(two_behind_reads_the_table) {
  counted k;
  counted_start(&k);
  /* version 3 published over 1: its carried delta has base 2, which this
   * watcher never had, so it must not apply it and reads tables/3 */
  ring_table *skip = next_table(k.wr.cur, 2), *jump = next_table(skip, 3);
  ring_table_free(k.wr.cur);
  k.wr.cur = skip;
  k.wr.v = 2;
  uint64_t r0 = ring_etcd_requests(k.c);
  ck_assert_int_eq(publish_table(&k.wr, jump, 0), RING_OK);
  ring_table_free(k.wr.cur);
  k.wr.cur = jump;
  k.wr.v = 3;
  ck_assert(wait_called(&k.f, 3));
  ck_assert_uint_eq(ring_etcd_requests(k.c) - r0, 1); /* tables/3 */
  ring_watcher_stats s = stats(&k.f);
  ck_assert_uint_eq(s.version, 3);
  ck_assert_uint_eq(s.deltas, 0);
  ck_assert_uint_eq(s.rejected, 0);
  assert_serving(&k.f, k.wr.cur);
  next_by_carried_delta(&k); /* one behind again */
  counted_stop(&k);
}
END_TEST

START_TEST(garbage_carried_delta_reads_the_table) {
  counted k;
  counted_start(&k);
  int saved;
  char path[] = "/tmp/test_watcher_log_XXXXXX", log[8192];
  capture_stderr_begin(&saved, path);
  /* junk in version/delta: refused, counted, logged; the table is read */
  uint64_t junk = requests_for_next(&k, GARBAGE_CARRY);
  ring_watcher_stats s1 = stats(&k.f);
  /* a carried delta whose checksum is wrong: the same */
  uint64_t bad = requests_for_next(&k, BAD_DELTA);
  ring_watcher_stats s2 = stats(&k.f);
  capture_stderr_end(saved, path, log, sizeof log);
  ck_assert_uint_eq(junk, 1); /* tables/2, not deltas/2 */
  ck_assert_uint_eq(s1.version, 2);
  ck_assert_uint_eq(s1.rejected, 1);
  ck_assert_uint_eq(s1.deltas, 0);
  ck_assert_uint_eq(bad, 1);
  ck_assert_uint_eq(s2.version, 3);
  ck_assert_uint_eq(s2.rejected, 2);
  ck_assert_uint_eq(s2.deltas, 0);
  ck_assert_msg(strstr(log, "version=2 source=delta err=") != NULL, "%s", log);
  ck_assert_ptr_nonnull(strstr(log, "version=3 source=delta err=\"checksum"));
  assert_serving(&k.f, k.wr.cur);
  next_by_carried_delta(&k);
  counted_stop(&k);
}
END_TEST

#define SHARE 4

/* Watchers of one process that follow the same table serve the one table
 * built from each delta (libring/delta_cache.c), whether they share a
 * client or each has its own: the same pointer, after their first tables
 * were read apart. */
START_TEST(watchers_share_tables) {
  ring_etcd *wc = client(one.endpoints), *common = client(one.endpoints), *own[SHARE];
  wipe(wc);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  follower f[2 * SHARE];
  for (int i = 0; i < SHARE; i++) {
    follower_start(&f[i], common, NULL);
    own[i] = client(one.endpoints);
    follower_start(&f[SHARE + i], own[i], NULL);
  }
  for (int n = 0; n < 5; n++) {
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
    ck_assert(wait_all(f, 2 * SHARE, wr.v, 20));
    const ring_table *first = ring_live_enter(f[0].live);
    for (int i = 1; i < 2 * SHARE; i++) {
      ck_assert_ptr_eq(ring_live_enter(f[i].live), first);
      ring_live_exit(f[i].live);
    }
    ring_live_exit(f[0].live);
  }
  assert_serving(&f[0], wr.cur);
  for (int i = 0; i < 2 * SHARE; i++) {
    ring_watcher_stats s = stats(&f[i]);
    ck_assert_uint_eq(s.deltas, 5);
    ck_assert_uint_eq(s.rejected, 0);
  }
  followers_stop(f, 2 * SHARE);
  for (int i = 0; i < SHARE; i++)
    ring_etcd_close(own[i]);
  ring_etcd_close(common);
  writer_free(&wr);
  ring_etcd_close(wc);
}
END_TEST

/* Puts t at tables/<its version> alone (no version change): a key whose
 * value was replaced, as after a restore from an older snapshot. */
static void overwrite_table(ring_etcd *c, const ring_table *t) {
  char key[96], *j = NULL;
  size_t len = 0;
  snprintf(key, sizeof key, "/ringkeeper/" CLUSTER "/tables/%llu",
           (unsigned long long)ring_table_version(t));
  ck_assert_int_eq(ring_table_encode(t, &j, &len), RING_OK);
  ck_assert_int_eq(ring_etcd_put(c, key, strlen(key), j, len, 0, NULL, NULL, NULL), RING_OK);
  free(j);
}

/* A watcher that starts after another of the process read the table
 * takes that table (libring/table_reads.c: the key's revisions read, not
 * its value), each with its own client; once the key holds another value
 * (new revisions), a watcher that starts reads and serves the new one. */
START_TEST(watchers_started_apart_share_the_table_read) {
  ring_etcd *wc = client(one.endpoints), *own[3];
  wipe(wc);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  follower f[3];
  for (int i = 0; i < 2; i++) {
    own[i] = client(one.endpoints);
    follower_start(&f[i], own[i], NULL);
  }
  const ring_table *t0 = ring_live_enter(f[0].live);
  ck_assert_ptr_eq(ring_live_enter(f[1].live), t0);
  ring_live_exit(f[1].live);
  ring_live_exit(f[0].live);
  assert_serving(&f[1], wr.cur);

  ring_table *other = first_table(128); /* version 1 too, another value */
  overwrite_table(wc, other);
  own[2] = client(one.endpoints);
  follower_start(&f[2], own[2], NULL);
  t0 = ring_live_enter(f[0].live);
  ck_assert_ptr_ne(ring_live_enter(f[2].live), t0);
  ring_live_exit(f[2].live);
  ring_live_exit(f[0].live);
  assert_serving(&f[2], other);
  followers_stop(f, 3);
  for (int i = 0; i < 3; i++)
    ring_etcd_close(own[i]);
  ring_table_free(other);
  writer_free(&wr);
  ring_etcd_close(wc);
}
END_TEST

/* ------------------------------------------------ one stream per client */

#define SHARERS 20

/* The watchers etcd holds now (its gauge), as the count of live watches. */
static double etcd_watchers(void) {
  char hp[32];
  snprintf(hp, sizeof hp, "127.0.0.1:%d", one.m[0].client_port);
  return metric_get(hp, "etcd_debugging_mvcc_watcher_total", "");
}

/* Starts n followers on c, each acking as "<prefix><i>", own_stream as given. */
static void sharers_start(follower *f, int n, ring_etcd *c, const char *prefix, bool own) {
  for (int i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof id, "%s%d", prefix, i);
    memset(&f[i], 0, sizeof f[i]);
    ck_assert_int_eq(ring_live_new(&f[i].live), RING_OK);
    ring_watcher_opts o = {
        .cluster = CLUSTER, .ack_id = id, .on_table = on_table, .ud = &f[i].s, .own_stream = own};
    ring_error err;
    ck_assert_msg(ring_watcher_start(c, &o, f[i].live, &f[i].w, &err) == RING_OK, "%s",
                  err.message);
  }
}

/* Publishes the next version; returns the requests c made until every
 * follower acked it. */
static uint64_t requests_until_acked(ring_etcd *c, writer *wr, follower *f, int n,
                                     const char *prefix) {
  uint64_t r0 = ring_etcd_requests(c);
  ck_assert_int_eq(publish_next(wr, 0), RING_OK);
  ck_assert(wait_all(f, n, wr->v, 10));
  for (int i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof id, "%s%d", prefix, i);
    assert_ack(wr->c, id, wr->v);
  }
  return ring_etcd_requests(c) - r0;
}

/* Watchers of one client share one etcd watch and write their acks in one
 * txn a version; with own_stream each has its own watch and its own put. */
START_TEST(watchers_of_a_client_share_a_stream_and_an_ack_txn) {
  ring__table_reads_clear();
  ring_etcd *wc = client(one.endpoints);
  wipe(wc);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  double w0 = etcd_watchers();
  ring_etcd *shared = client(one.endpoints), *apart = client(one.endpoints);
  follower f[SHARERS], g[SHARERS];
  sharers_start(f, SHARERS, shared, "s", false);
  ck_assert_double_eq(etcd_watchers() - w0, 1);
  for (int k = 0; k < 3; k++) /* the delta rides on the event: the acks are the only request */
    ck_assert_uint_eq(requests_until_acked(shared, &wr, f, SHARERS, "s"), 1);
  sharers_start(g, SHARERS, apart, "a", true);
  ck_assert_double_eq(etcd_watchers() - w0, 1 + SHARERS);
  ck_assert_uint_eq(requests_until_acked(apart, &wr, g, SHARERS, "a"), SHARERS);
  followers_stop(g, SHARERS);
  /* members leave one by one; the rest keep following; the last closes it */
  for (int i = 0; i < SHARERS; i++) {
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
    ck_assert(wait_all(f + i, SHARERS - i, wr.v, 10));
    ck_assert_uint_eq(stats(&f[i]).errors, 0);
    ck_assert(!atomic_load(&f[i].s.backwards));
    follower_stop(&f[i]);
  }
  double end = harness_now() + 5; /* etcd drops a canceled watch as the stream closes */
  while (etcd_watchers() - w0 > 0 && harness_now() < end)
    harness_sleep_ms(20);
  ck_assert_double_eq(etcd_watchers() - w0, 0);
  ring_etcd_close(apart);
  ring_etcd_close(shared);
  writer_free(&wr);
  ring_etcd_close(wc);
}
END_TEST

/* Two watchers of one client with the same ack id (etcd refuses a txn that
 * names a key twice) still ack, in separate writes, with no error; a
 * watcher that joins a running stream misses nothing published while it
 * starts. */
START_TEST(same_ack_id_and_late_joiners) {
  ring_etcd *wc = client(one.endpoints);
  wipe(wc);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  ring_etcd *c = client(one.endpoints);
  follower f[6];
  follower_start(&f[0], c, "twin");
  follower_start(&f[1], c, "twin");
  follower_start(&f[2], c, "other");
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
    ck_assert(wait_all(f, 3, wr.v, 10));
    assert_ack(wc, "twin", wr.v);
    assert_ack(wc, "other", wr.v);
  }
  for (int i = 3; i < 6; i++) { /* joiners while versions are published */
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
    follower_start(&f[i], c, i == 5 ? "late" : NULL);
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  }
  ck_assert(wait_all(f, 6, wr.v, 10));
  assert_ack(wc, "late", wr.v);
  for (int i = 0; i < 6; i++) {
    ck_assert_uint_eq(stats(&f[i]).errors, 0);
    ck_assert_uint_eq(stats(&f[i]).rejected, 0);
    ck_assert(!atomic_load(&f[i].s.backwards));
    assert_serving(&f[i], wr.cur);
  }
  followers_stop(f, 6);
  ring_etcd_close(c);
  writer_free(&wr);
  ring_etcd_close(wc);
}
END_TEST

/* An etcd that takes at most 4 operations a txn refuses the watchers'
 * txn of 10 acks as such: each ack is then written on its own, and every
 * watcher acks every version. */
START_TEST(acks_past_a_small_txn_limit) {
  etcd_cluster small;
  etcd_cluster_start(&small, 1, "--max-txn-ops 4");
  ring_etcd *wc = client(small.endpoints), *c = client(small.endpoints);
  writer wr = {wc, NULL, 0};
  ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
  follower f[10];
  sharers_start(f, 10, c, "t", false);
  for (int k = 0; k < 2; k++) {
    ck_assert_int_eq(publish_next(&wr, 0), RING_OK);
    ck_assert(wait_all(f, 10, wr.v, 10));
    for (int i = 0; i < 10; i++) {
      char id[16];
      snprintf(id, sizeof id, "t%d", i);
      assert_ack(wc, id, wr.v);
    }
  }
  followers_stop(f, 10);
  ring_etcd_close(c);
  writer_free(&wr);
  ring_etcd_close(wc);
  etcd_cluster_stop(&small);
}
END_TEST

static void setup(void) { etcd_cluster_start(&one, 1, NULL); }
static void teardown(void) { etcd_cluster_stop(&one); }

int main(void) {
  Suite *s = suite_create("watcher");
  TCase *tc = tcase_create("single");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, setup, teardown);
  tcase_add_test(tc, follows_with_deltas_and_acks);
  tcase_add_test(tc, watchers_started_apart_share_the_table_read);
  tcase_add_test(tc, refuses_corrupt_tables_and_deltas);
  tcase_add_test(tc, refuses_wrong_cluster_and_version);
  tcase_add_test(tc, start_refuses_bad_options);
  tcase_add_test(tc, logs_through_the_callback);
  tcase_add_test(tc, hundred_watchers);
  tcase_add_test(tc, compaction_while_publishing);
  tcase_add_test(tc, partition_then_compaction);
  tcase_add_test(tc, etcd_killed_while_publishing);
  suite_add_tcase(s, tc);
  TCase *one_event = tcase_create("one_event"); /* CK_RUN_CASE=one_event runs these alone */
  tcase_set_timeout(one_event, 120);
  tcase_add_unchecked_fixture(one_event, setup, teardown);
  tcase_add_test(one_event, carried_delta_needs_no_request);
  tcase_add_test(one_event, two_behind_reads_the_table);
  tcase_add_test(one_event, garbage_carried_delta_reads_the_table);
  tcase_add_test(one_event, watchers_share_tables);
  suite_add_tcase(s, one_event);
  TCase *shared = tcase_create("shared"); /* CK_RUN_CASE=shared runs these alone */
  tcase_set_timeout(shared, 120);
  tcase_add_unchecked_fixture(shared, setup, teardown);
  tcase_add_test(shared, watchers_of_a_client_share_a_stream_and_an_ack_txn);
  tcase_add_test(shared, same_ack_id_and_late_joiners);
  tcase_add_test(shared, acks_past_a_small_txn_limit);
  suite_add_tcase(s, shared);
  return run_suite_as(s, 1); /* fixtures hold processes */
}
