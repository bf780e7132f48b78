/*
 * test_kv_store.c: ring-kv's storage (examples/kv/kv_store.h) and its
 * segment format: records round-trip and damage is caught by the
 * checksum; values survive a reopen; a crash mid-write leaves nothing
 * visible; segments from two nodes merge newest-wins in any order;
 * compaction bounds the segments and keeps every newest record; staging
 * is adopted into the arc; an arc replaced under the store is re-indexed.
 */
#define _GNU_SOURCE
#include "check_main.h"
#include "kv_store.h"
#include "ring.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static void setup(void) {
  snprintf(root, sizeof root, "/tmp/ringkv-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  ck_assert_int_eq(system(cmd), 0);
}

static kv_store *open_at(const char *sub, const char *node) {
  char dir[128], msg[256];
  snprintf(dir, sizeof dir, "%s/%s", root, sub);
  kv_store_opts o = {.data_dir = dir, .node_id = node};
  kv_store *s = NULL;
  ck_assert_msg(kv_store_open(&o, &s, msg, sizeof msg) == RING_OK, "%s", msg);
  return s;
}

static void put(kv_store *s, uint32_t token, const char *k, const char *v, uint64_t ts) {
  ck_assert_int_eq(
      kv_store_put(s, token, KV_ARC, k, strlen(k), v, v ? strlen(v) : 0, v == NULL, ts), RING_OK);
}

/* Asserts key k of token reads as v (NULL: a tombstone). */
static void expect(kv_store *s, uint32_t token, const char *k, const char *v) {
  kv_value got;
  ck_assert_int_eq(kv_store_get(s, token, k, strlen(k), &got), RING_OK);
  if (v == NULL) {
    ck_assert(got.tombstone);
  } else {
    ck_assert(!got.tombstone);
    ck_assert_uint_eq(got.len, strlen(v));
    ck_assert(memcmp(got.data, v, got.len) == 0);
  }
  kv_value_free(&got);
}

/* Files in a directory whose names start with prefix. */
static int count_files(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  if (d)
    closedir(d);
  return n;
}

/* ----------------------------------------------------------- the format */

START_TEST(record_round_trip_and_damage) {
  uint8_t buf[256];
  size_t n = kv_rec_encode(buf, KV_KIND_VALUE, "key", 3, "value", 5, 42, NULL);
  ck_assert_uint_eq(n, kv_rec_size(3, 5));
  kv_rec r;
  ck_assert_int_eq(kv_rec_parse(buf, n, 0, &r), KV_PARSE_OK);
  ck_assert_uint_eq(r.ts, 42);
  ck_assert(memcmp(r.key, "key", 3) == 0 && memcmp(r.value, "value", 5) == 0);
  for (size_t i = 0; i < n; i++) { /* every flipped byte is caught */
    buf[i] ^= 0x40;
    ck_assert_int_eq(kv_rec_parse(buf, n, 0, &r), KV_PARSE_TORN);
    buf[i] ^= 0x40;
  }
  for (size_t cut = 0; cut < n; cut++) /* every truncation is caught */
    ck_assert_int_eq(kv_rec_parse(buf, cut, 0, &r), KV_PARSE_TORN);
  ck_assert_uint_eq(kv_rec_encode(buf, KV_KIND_VALUE, "", 0, "v", 1, 1, NULL), 0);
  ck_assert_uint_eq(kv_rec_encode(buf, KV_KIND_TOMBSTONE, "k", 1, "v", 1, 1, NULL), 0);
}
END_TEST

/* ---------------------------------------------------------- the store */

START_TEST(put_get_delete_reopen) {
  kv_store *s = open_at("a", "n1");
  put(s, 7, "alpha", "one", 100);
  put(s, 7, "beta", "two", 101);
  put(s, 9, "gamma", "three", 102);
  put(s, 7, "beta", NULL, 103); /* deleted */
  expect(s, 7, "alpha", "one");
  expect(s, 7, "beta", NULL);
  kv_value v;
  ck_assert_int_eq(kv_store_get(s, 7, "nope", 4, &v), RING_ENOTFOUND);
  ck_assert_int_eq(kv_store_get(s, 8, "alpha", 5, &v), RING_ENOTFOUND);
  kv_store_close(s);
  s = open_at("a", "n1"); /* recovery: the index is rebuilt from the files */
  expect(s, 7, "alpha", "one");
  expect(s, 7, "beta", NULL);
  expect(s, 9, "gamma", "three");
  kv_store_stats st;
  kv_store_stats_get(s, &st);
  ck_assert_uint_eq(st.keys, 3);
  ck_assert_uint_eq(st.torn, 0);
  kv_store_close(s);
}
END_TEST

typedef struct writer_arg {
  kv_store *s;
  int id;
} writer_arg;

static void *writer(void *p) {
  writer_arg *w = p;
  for (int i = 0; i < 50; i++) {
    char k[32], v[32];
    snprintf(k, sizeof k, "w%d-%d", w->id, i);
    snprintf(v, sizeof v, "value-%d-%d", w->id, i);
    if (kv_store_put(w->s, (uint32_t)(i % 5), KV_ARC, k, strlen(k), v, strlen(v), false,
                     (uint64_t)i + 1) != RING_OK)
      return (void *)1;
  }
  return NULL;
}

START_TEST(group_commit_concurrent_writers) {
  char dir[128], msg[256];
  snprintf(dir, sizeof dir, "%s/g", root);
  kv_store_opts o = {
      .data_dir = dir, .node_id = "n1", .commit_window_us = 2000, .max_segments = 1000};
  kv_store *s = NULL;
  ck_assert_msg(kv_store_open(&o, &s, msg, sizeof msg) == RING_OK, "%s", msg);
  pthread_t th[8];
  writer_arg args[8];
  for (int i = 0; i < 8; i++) {
    args[i] = (writer_arg){s, i};
    pthread_create(&th[i], NULL, writer, &args[i]);
  }
  for (int i = 0; i < 8; i++) {
    void *rc;
    pthread_join(th[i], &rc);
    ck_assert_ptr_null(rc);
  }
  kv_store_stats st;
  kv_store_stats_get(s, &st);
  ck_assert_uint_eq(st.writes, 400);
  ck_assert_uint_lt(st.commits, 400); /* writes were batched */
  ck_assert_uint_eq(st.keys, 400);
  expect(s, 3, "w5-48", "value-5-48");
  kv_store_close(s);
}
END_TEST

/* Writes a file with the given bytes. */
static void write_file(const char *path, const void *buf, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
  close(fd);
}

START_TEST(crash_mid_write_and_torn_segment) {
  kv_store *s = open_at("c", "n1");
  put(s, 3, "kept", "safe", 10);
  kv_store_close(s);
  /* A crash mid-commit leaves a segment in kv/tmp: never acknowledged. */
  char path[256];
  uint8_t buf[512];
  memcpy(buf, KV_SEG_MAGIC, KV_SEG_MAGIC_LEN);
  size_t n = KV_SEG_MAGIC_LEN;
  n += kv_rec_encode(buf + n, KV_KIND_VALUE, "ghost", 5, "boo", 3, 99, NULL);
  snprintf(path, sizeof path, "%s/c/kv/tmp/seg-0000000000001-00000001-n1.kv", root);
  write_file(path, buf, n);
  /* A torn segment in the arc (damage on disk): its good prefix counts. */
  size_t good = n;
  n += kv_rec_encode(buf + n, KV_KIND_VALUE, "lost", 4, "xxxx", 4, 99, NULL);
  buf[n - 2] ^= 1; /* the second record's checksum no longer matches */
  snprintf(path, sizeof path, "%s/c/arcs/3/seg-0000000000002-00000001-n1.kv", root);
  write_file(path, buf, n);
  s = open_at("c", "n1");
  snprintf(path, sizeof path, "%s/c/kv/tmp", root);
  ck_assert_int_eq(count_files(path, "seg-"), 0);
  expect(s, 3, "kept", "safe");
  expect(s, 3, "ghost", "boo"); /* the good record before the damage */
  kv_value v;
  ck_assert_int_eq(kv_store_get(s, 3, "lost", 4, &v), RING_ENOTFOUND);
  kv_store_stats st;
  kv_store_stats_get(s, &st);
  ck_assert_uint_eq(st.torn, 1);
  ck_assert_uint_gt(good, 0);
  kv_store_close(s);
}
END_TEST

/* Copies every segment of token from one store's arc into another's. */
static void copy_arc(const char *from, const char *to, uint32_t token) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "mkdir -p %s/%s/arcs/%u && cp %s/%s/arcs/%u/seg-* %s/%s/arcs/%u/", root,
           to, token, root, from, token, root, to, token);
  ck_assert_int_eq(system(cmd), 0);
}

START_TEST(newest_wins_across_nodes) {
  kv_store *a = open_at("na", "a"), *b = open_at("nb", "b");
  put(a, 5, "k1", "from-a-old", 1000);
  put(b, 5, "k1", "from-b-new", 2000);
  put(a, 5, "k2", "from-a-new", 3000);
  put(b, 5, "k2", "from-b-old", 2500);
  put(b, 5, "k3", NULL, 4000); /* b deleted k3 after a wrote it */
  put(a, 5, "k3", "from-a", 3500);
  kv_store_close(b);
  copy_arc("nb", "na", 5); /* b's segments arrive in a's arc */
  ck_assert_int_eq(kv_store_rebuild(a, 5), RING_OK);
  expect(a, 5, "k1", "from-b-new");
  expect(a, 5, "k2", "from-a-new");
  expect(a, 5, "k3", NULL);
  kv_store_close(a);
  /* and the other way round: the same winners */
  kv_store *c = open_at("nb", "b");
  copy_arc("na", "nb", 5);
  ck_assert_int_eq(kv_store_rebuild(c, 5), RING_OK);
  expect(c, 5, "k1", "from-b-new");
  expect(c, 5, "k2", "from-a-new");
  expect(c, 5, "k3", NULL);
  kv_store_close(c);
}
END_TEST

START_TEST(compaction_bounds_segments) {
  char dir[128], msg[256], arc[192];
  snprintf(dir, sizeof dir, "%s/k", root);
  kv_store_opts o = {.data_dir = dir, .node_id = "n1", .max_segments = 4};
  kv_store *s = NULL;
  ck_assert_msg(kv_store_open(&o, &s, msg, sizeof msg) == RING_OK, "%s", msg);
  for (int i = 0; i < 40; i++) { /* one segment per write: nothing batches them */
    char k[16], v[16];
    snprintf(k, sizeof k, "k%d", i % 10);
    snprintf(v, sizeof v, "v%d", i);
    put(s, 11, k, i == 39 ? NULL : v, (uint64_t)i + 1);
  }
  ck_assert_int_eq(kv_store_compact(s, 11, KV_ARC), RING_OK);
  snprintf(arc, sizeof arc, "%s/arcs/11", dir);
  ck_assert_int_eq(count_files(arc, "seg-"), 1);
  for (int i = 30; i < 39; i++) {
    char k[16], v[16];
    snprintf(k, sizeof k, "k%d", i % 10);
    snprintf(v, sizeof v, "v%d", i);
    expect(s, 11, k, v);
  }
  expect(s, 11, "k9", NULL); /* the tombstone survives the merge */
  kv_store_stats st;
  kv_store_stats_get(s, &st);
  ck_assert_uint_ge(st.compactions, 1);
  ck_assert_uint_eq(st.keys, 10);
  kv_store_close(s);
  s = open_at("k", "n1");
  expect(s, 11, "k5", "v35");
  kv_store_close(s);
}
END_TEST

START_TEST(staging_then_adopt) {
  kv_store *s = open_at("s", "n1");
  ck_assert_int_eq(kv_store_put(s, 4, KV_STAGING, "p", 1, "pending", 7, false, 5), RING_OK);
  ck_assert(kv_store_has_staging(s, 4));
  char arc[192], staging[192];
  snprintf(arc, sizeof arc, "%s/s/arcs/4", root);
  snprintf(staging, sizeof staging, "%s/s/kv/staging/4", root);
  ck_assert_int_eq(count_files(arc, "seg-"), 0); /* the agent's directory is left alone */
  expect(s, 4, "p", "pending");
  ck_assert_int_eq(kv_store_adopt(s, 4), RING_OK);
  ck_assert(!kv_store_has_staging(s, 4));
  ck_assert_int_eq(count_files(arc, "seg-"), 1);
  ck_assert_int_ne(access(staging, F_OK), 0);
  expect(s, 4, "p", "pending");
  ck_assert_int_eq(kv_store_put(s, 6, KV_STAGING, "q", 1, "x", 1, false, 5), RING_OK);
  ck_assert_int_eq(kv_store_drop_staging(s, 6), RING_OK);
  kv_value v;
  ck_assert_int_eq(kv_store_get(s, 6, "q", 1, &v), RING_ENOTFOUND);
  kv_store_close(s);
}
END_TEST

/* An arc is missing only on a data dir the agent placed (its `placed`
 * marker): then writes are staged and nothing makes arcs/<token>/. */
START_TEST(missing_arc_needs_the_marker) {
  kv_store *s = open_at("m", "n1");
  ck_assert(!kv_store_arc_missing(s, 9)); /* no marker: a first placement, or no agent */
  char marker[192], arc[192];
  snprintf(marker, sizeof marker, "%s/m/placed", root);
  snprintf(arc, sizeof arc, "%s/m/arcs/9", root);
  FILE *f = fopen(marker, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  ck_assert(kv_store_arc_missing(s, 9));
  ck_assert_int_eq(kv_store_put(s, 9, KV_STAGING, "w", 1, "staged", 6, false, 5), RING_OK);
  ck_assert_int_ne(access(arc, F_OK), 0); /* staging made no arc */
  ck_assert_int_eq(mkdir(arc, 0755), 0);  /* the agent installs it */
  ck_assert(!kv_store_arc_missing(s, 9));
  ck_assert_int_eq(kv_store_adopt(s, 9), RING_OK);
  expect(s, 9, "w", "staged");
  kv_store_close(s);
}
END_TEST

START_TEST(arc_replaced_underneath) {
  kv_store *s = open_at("r", "n1"), *src = open_at("src", "n2");
  put(s, 2, "old", "stale-copy", 10);
  put(src, 2, "new", "installed", 20);
  kv_store_close(src);
  /* An agent installs a fetched arc: a new directory renamed over. */
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "cp -r %s/src/arcs/2 %s/r/arcs/2.new && rm -rf %s/r/arcs/2 && mv %s/r/arcs/2.new "
           "%s/r/arcs/2",
           root, root, root, root, root);
  ck_assert_int_eq(system(cmd), 0);
  ck_assert_int_eq(kv_store_refresh(s, 2), RING_OK);
  expect(s, 2, "new", "installed");
  kv_value v;
  ck_assert_int_eq(kv_store_get(s, 2, "old", 3, &v), RING_ENOTFOUND);
  ck_assert_uint_eq(kv_store_next_token(s, 0), 2);
  ck_assert_uint_eq(kv_store_next_token(s, 3), KV_NO_TOKEN);
  kv_store_close(s);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("kv_store");
  TCase *tc = tcase_create("store");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, record_round_trip_and_damage);
  tcase_add_test(tc, put_get_delete_reopen);
  tcase_add_test(tc, group_commit_concurrent_writers);
  tcase_add_test(tc, crash_mid_write_and_torn_segment);
  tcase_add_test(tc, newest_wins_across_nodes);
  tcase_add_test(tc, compaction_bounds_segments);
  tcase_add_test(tc, staging_then_adopt);
  tcase_add_test(tc, arc_replaced_underneath);
  tcase_add_test(tc, missing_arc_needs_the_marker);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
