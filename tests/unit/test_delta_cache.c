/*
 * test_delta_cache.c: the process's cache of tables built from deltas
 * (libring/delta_cache.c, ring__delta_apply_shared): a hit only for the
 * same delta bytes on a base of the same contents (the owners checksum,
 * version and cluster are not enough: a base differing in one node record
 * gets its own table), refusals not kept, the least recently used entry
 * replaced, and shared tables living as long as their last holder. A
 * threaded test runs watchers' steps (take the base, build or share,
 * swap into a ring_live) with readers looking up meanwhile: every thread
 * gets the one table built per version. Run under ThreadSanitizer by
 * tests/run.sh, and under ASan (a shared table freed early is a
 * use-after-free there, one never freed a leak).
 */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t */
#include "ring.h"
#include "delta_int.h"
#include "test_tables.h"
#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* A table of t's contents built apart (encoded and decoded), as another
 * watcher reading tables/<v> has it. edit: "from=to" replaced once in the
 * encoding first, or NULL. */
static ring_table *copy_of(const ring_table *t, const char *from, const char *to) {
  char *json;
  size_t len;
  ck_assert_int_eq(ring_table_encode(t, &json, &len), RING_OK);
  if (from != NULL) {
    char *at = strstr(json, from);
    ck_assert_ptr_nonnull(at);
    ck_assert_uint_eq(strlen(from), strlen(to));
    memcpy(at, to, strlen(to));
  }
  ring_table *c;
  ring_error err;
  ck_assert_msg(ring_table_decode(json, len, &c, &err) == RING_OK, "%s", err.message);
  free(json);
  return c;
}

/* The next version of t: k tokens from (v * a) on swap their first two
 * owners. */
static ring_table *next_of(const ring_table *t, uint32_t a, uint32_t k) {
  ring_table *n = test_table_swapped(t, ring_table_version(t) + 1, k, a, 1);
  ck_assert_ptr_nonnull(n);
  return n;
}

static char *delta_of(const ring_table *a, const ring_table *b, size_t *len) {
  char *json;
  ck_assert_int_eq(ring_delta_encode(a, b, &json, len), RING_OK);
  return json;
}

static ring__delta_cache_stats stats(void) {
  ring__delta_cache_stats s;
  ring__delta_cache_stats_get(&s);
  return s;
}

/* ring__delta_apply_shared, which must succeed. */
static ring_table *shared(const ring_table *base, const char *json, size_t len) {
  ring_table *t = NULL;
  ring_error err;
  ck_assert_msg(ring__delta_apply_shared(base, json, len, &t, &err) == RING_OK, "%s", err.message);
  return t;
}

/* ------------------------------------------------------------- the cache */

START_TEST(same_contents_share) {
  ring__delta_cache_clear();
  ring_table *a = test_table_rr(256, 3, 6, 3, NULL, 1), *a2 = copy_of(a, NULL, NULL);
  ring_table *b = next_of(a, 10, 4);
  size_t len;
  char *d = delta_of(a, b, &len);
  ring__delta_cache_stats s0 = stats();
  ring_table *r1 = shared(a, d, len), *r2 = shared(a2, d, len), *r3 = shared(a, d, len);
  ck_assert_ptr_eq(r1, r2); /* one table for both bases */
  ck_assert_ptr_eq(r1, r3);
  ck_assert(ring__table_same(r1, b));
  ck_assert_uint_eq(stats().builds, s0.builds + 1);
  ck_assert_uint_eq(stats().hits, s0.hits + 2);
  /* each holder frees its reference; the table lives as long as the last */
  ring_table_free(a);
  ring_table_free(r1);
  ring_table_free(r3);
  ck_assert_uint_eq(ring_table_version(r2), 2);
  ck_assert(ring__table_same(r2, b));
  ring__delta_cache_clear();
  ck_assert_uint_eq(ring_table_owner(r2, 10, 0), ring_table_owner(b, 10, 0));
  ring_table_free(r2);
  ring_table_free(a2);
  ring_table_free(b);
  free(d);
}
END_TEST

/* A base that differs from the cached one only in a node record passes
 * every check the delta makes (cluster, version, owners checksum), so
 * only comparing the bases keeps it from the other base's table. */
START_TEST(other_base_contents_build_their_own) {
  ring__delta_cache_clear();
  ring_table *a = test_table_rr(256, 3, 6, 3, NULL, 1);
  ring_table *x = copy_of(a, "127.0.0.1:7002", "127.0.0.1:9002");
  ring_table *b = next_of(a, 0, 3);
  size_t len;
  char *d = delta_of(a, b, &len);
  ring_table *ra = shared(a, d, len), *rx = shared(x, d, len);
  ck_assert_ptr_ne(ra, rx);
  ck_assert_str_eq(ring_table_node_addr(ra, 2), "127.0.0.1:7002");
  ck_assert_str_eq(ring_table_node_addr(rx, 2), "127.0.0.1:9002");
  ring_table *alone;
  ck_assert_int_eq(ring_delta_apply(x, d, len, &alone, NULL), RING_OK);
  ck_assert(ring__table_same(rx, alone));
  /* the same delta in other bytes (a trailing space) is another entry */
  char *spaced = malloc(len + 2);
  memcpy(spaced, d, len);
  memcpy(spaced + len, " ", 2);
  ring__delta_cache_stats s0 = stats();
  ring_table *rs = shared(a, spaced, len + 1);
  ck_assert_ptr_ne(rs, ra);
  ck_assert(ring__table_same(rs, ra));
  ck_assert_uint_eq(stats().builds, s0.builds + 1);
  ring_table_free(rs);
  free(spaced);
  ring_table_free(alone);
  ring_table_free(ra);
  ring_table_free(rx);
  ring_table_free(a);
  ring_table_free(x);
  ring_table_free(b);
  free(d);
  ring__delta_cache_clear();
}
END_TEST

START_TEST(refusals_not_kept) {
  ring__delta_cache_clear();
  ring_table *a = test_table_rr(256, 3, 6, 3, NULL, 1), *b = next_of(a, 5, 2);
  size_t len;
  char *d = delta_of(a, b, &len);
  ring__delta_cache_stats s0 = stats();
  for (int i = 0; i < 2; i++) { /* b is not the delta's base: refused, each time, in full */
    ring_table *t = (ring_table *)0x1;
    ring_error err = {0};
    ck_assert_int_eq(ring__delta_apply_shared(b, d, len, &t, &err), RING_EVERSION);
    ck_assert_ptr_nonnull(strstr(err.message, "base_version"));
    ck_assert_ptr_eq(t, (ring_table *)0x1);
  }
  ck_assert_int_eq(ring__delta_apply_shared(a, d, len / 2, &(ring_table *){NULL}, NULL),
                   RING_EJSON);
  ck_assert_int_eq(ring__delta_apply_shared(NULL, d, len, &(ring_table *){NULL}, NULL),
                   RING_EINVAL);
  ck_assert_uint_eq(stats().builds, s0.builds);
  ck_assert_uint_eq(stats().hits, s0.hits);
  ring_table *t = shared(a, d, len);
  ck_assert(ring__table_same(t, b));
  ring_table_free(t);
  ring_table_free(a);
  ring_table_free(b);
  free(d);
  ring__delta_cache_clear();
}
END_TEST

/* Six deltas from one base, then the first again: it was replaced (the
 * cache keeps a few), while the last is still there. */
START_TEST(bounded) {
  ring__delta_cache_clear();
  ring_table *a = test_table_rr(256, 3, 6, 3, NULL, 1);
  char *d[6];
  size_t len[6];
  for (uint32_t i = 0; i < 6; i++) {
    ring_table *b = next_of(a, 20 * i, 1 + i);
    d[i] = delta_of(a, b, &len[i]);
    ring_table_free(b);
  }
  ring__delta_cache_stats s0 = stats();
  for (int i = 0; i < 6; i++)
    ring_table_free(shared(a, d[i], len[i]));
  ck_assert_uint_eq(stats().builds, s0.builds + 6);
  ring_table_free(shared(a, d[5], len[5]));
  ck_assert_uint_eq(stats().hits, s0.hits + 1);
  ring_table_free(shared(a, d[0], len[0]));
  ck_assert_uint_eq(stats().builds, s0.builds + 7);
  for (int i = 0; i < 6; i++)
    free(d[i]);
  ring_table_free(a);
  ring__delta_cache_clear();
}
END_TEST

/* ------------------------------------------------- threads, as watchers */

#define WATCHERS 8
#define VERSIONS 24
#define READERS 2

typedef struct chain {
  char *delta[VERSIONS + 1]; /* delta[v]: v-1 -> v, for v >= 2 */
  size_t len[VERSIONS + 1];
  ring_live *live[WATCHERS];
  const ring_table *got[WATCHERS][VERSIONS + 1]; /* compared, never dereferenced */
  pthread_barrier_t step;
  _Atomic bool stop;
} chain;

typedef struct watcher_arg {
  chain *c;
  int i;
} watcher_arg;

/* A watcher's steps for each version: a reference to the table in
 * service, the next one built or shared, swapped in. */
static void *watcher_main(void *arg) {
  watcher_arg *w = arg;
  chain *c = w->c;
  for (uint64_t v = 2; v <= VERSIONS; v++) {
    pthread_barrier_wait(&c->step); /* all at once, as one watch event reaches them */
    const ring_table *in = ring_live_enter(c->live[w->i]);
    ring_table *base = ring__table_ref(in);
    ring_live_exit(c->live[w->i]);
    ring_table *t = NULL;
    int rc = ring__delta_apply_shared(base, c->delta[v], c->len[v], &t, NULL);
    ring_table_free(base);
    if (rc != RING_OK || ring_table_version(t) != v || ring_live_swap(c->live[w->i], t) != RING_OK)
      abort(); /* ck_assert is not for threads */
    c->got[w->i][v] = t;
  }
  return NULL;
}

/* Looks up in every holder without pause; versions never go back. */
static void *reader_main(void *arg) {
  chain *c = arg;
  uint64_t seen[WATCHERS] = {0};
  while (!atomic_load(&c->stop))
    for (int i = 0; i < WATCHERS; i++) {
      const ring_table *t = ring_live_enter(c->live[i]);
      uint16_t owners[3];
      if (ring_lookup(t, "key", 3, owners, 3) != 3 || ring_table_version(t) < seen[i])
        abort();
      seen[i] = ring_table_version(t);
      ring_live_exit(c->live[i]);
    }
  return NULL;
}

START_TEST(watchers_share_one_table_per_version) {
  ring__delta_cache_clear();
  chain *c = calloc(1, sizeof *c);
  ring_table *prev = test_table_rr(1024, 3, 9, 3, NULL, 1);
  for (uint32_t v = 2; v <= VERSIONS; v++) {
    ring_table *next = next_of(prev, (v * 37) % 1000, 8);
    c->delta[v] = delta_of(prev, next, &c->len[v]);
    ring_table_free(prev);
    prev = next;
  }
  ring_table *first = test_table_rr(1024, 3, 9, 3, NULL, 1);
  for (int i = 0; i < WATCHERS; i++) { /* each its own copy of version 1 */
    ck_assert_int_eq(ring_live_new(&c->live[i]), RING_OK);
    ck_assert_int_eq(ring_live_swap(c->live[i], copy_of(first, NULL, NULL)), RING_OK);
  }
  ring_table_free(first);
  pthread_barrier_init(&c->step, NULL, WATCHERS);
  ring__delta_cache_stats s0 = stats();
  pthread_t w[WATCHERS], r[READERS];
  watcher_arg args[WATCHERS];
  for (int i = 0; i < READERS; i++)
    pthread_create(&r[i], NULL, reader_main, c);
  for (int i = 0; i < WATCHERS; i++) {
    args[i] = (watcher_arg){c, i};
    pthread_create(&w[i], NULL, watcher_main, &args[i]);
  }
  for (int i = 0; i < WATCHERS; i++)
    pthread_join(w[i], NULL);
  atomic_store(&c->stop, true);
  for (int i = 0; i < READERS; i++)
    pthread_join(r[i], NULL);
  for (uint32_t v = 2; v <= VERSIONS; v++)
    for (int i = 1; i < WATCHERS; i++)
      ck_assert_ptr_eq(c->got[i][v], c->got[0][v]);
  ck_assert_uint_eq(stats().builds, s0.builds + VERSIONS - 1);
  ck_assert_uint_eq(stats().hits, s0.hits + (VERSIONS - 1) * (WATCHERS - 1));
  const ring_table *last = ring_live_enter(c->live[0]);
  ck_assert(ring__table_same(last, prev));
  ring_live_exit(c->live[0]);
  for (int i = 0; i < WATCHERS; i++)
    ring_live_free(c->live[i]);
  for (uint32_t v = 2; v <= VERSIONS; v++)
    free(c->delta[v]);
  pthread_barrier_destroy(&c->step);
  free(c);
  ring_table_free(prev);
  ring__delta_cache_clear();
}
END_TEST

int main(void) {
  Suite *s = suite_create("delta_cache");
  TCase *tc = tcase_create("cache");
  tcase_add_test(tc, same_contents_share);
  tcase_add_test(tc, other_base_contents_build_their_own);
  tcase_add_test(tc, refusals_not_kept);
  tcase_add_test(tc, bounded);
  suite_add_tcase(s, tc);
  TCase *tt = tcase_create("threads");
  tcase_set_timeout(tt, 120);
  tcase_add_test(tt, watchers_share_one_table_per_version);
  suite_add_tcase(s, tt);
  return run_suite(s);
}
