/*
 * test_arc_store.c: the arc store: manifests of installed arcs (checksums,
 * order, what is skipped, the cache noticing a change), has, list,
 * remove, and what a crash leaves in tmp/.
 */
#include "arc_env.h"
#include "check_main.h"

#include <check.h>
#include <errno.h>

START_TEST(manifest_of_an_arc) {
  char *dir = scratch_dir();
  arc_store *s;
  ring_error err;
  ck_assert_msg(arc_store_open(dir, &s, &err) == RING_OK, "%s", err.message);
  ck_assert_str_eq(arc_store_dir(s), dir);
  char arc[4096];
  snprintf(arc, sizeof arc, "%s/arcs/42", dir);
  ck_assert_int_eq(mkdir(arc, 0755), 0);
  uint64_t hz = write_pattern(arc, "zeta", 1000, 1);
  uint64_t ha = write_pattern(arc, "alpha.1", 70000, 2);
  uint64_t he = write_pattern(arc, "empty", 0, 3);
  write_pattern(arc, ".partial", 10, 4); /* a writer's hidden temporary */
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/subdir", arc);
  ck_assert_int_eq(mkdir(sub, 0755), 0);
  snprintf(sub, sizeof sub, "%s/link", arc);
  ck_assert_int_eq(symlink("/etc/passwd", sub), 0);

  arc_manifest m;
  ck_assert_msg(arc_store_manifest(s, 42, &m, &err) == RING_OK, "%s", err.message);
  ck_assert_uint_eq(m.token, 42);
  ck_assert_uint_eq(m.n_files, 3);
  ck_assert_str_eq(m.files[0].name, "alpha.1");
  ck_assert_str_eq(m.files[1].name, "empty");
  ck_assert_str_eq(m.files[2].name, "zeta");
  ck_assert_uint_eq(m.files[0].xxh3, ha);
  ck_assert_uint_eq(m.files[1].xxh3, he);
  ck_assert_uint_eq(m.files[2].xxh3, hz);
  ck_assert_uint_eq(m.bytes, 71000);
  arc_manifest_free(&m);

  /* a changed file is hashed again, not served from the cache */
  uint64_t hz2 = write_pattern(arc, "zeta", 1000, 9);
  ck_assert_int_eq(arc_store_manifest(s, 42, &m, NULL), RING_OK);
  ck_assert_uint_eq(m.files[2].xxh3, hz2);
  arc_manifest_free(&m);

  ck_assert_int_eq(arc_store_manifest(s, 43, &m, &err), RING_ENOTFOUND);
  ck_assert_int_eq(arc_store_manifest(s, 70000, &m, &err), RING_EINVAL);
  arc_store_close(s);
  scratch_free(dir);
}
END_TEST

START_TEST(has_list_remove) {
  char *dir = scratch_dir();
  arc_store *s;
  ck_assert_int_eq(arc_store_open(dir, &s, NULL), RING_OK);
  uint32_t *tokens = NULL, n = 9;
  ck_assert_int_eq(arc_store_list(s, &tokens, &n), RING_OK);
  ck_assert_uint_eq(n, 0);
  free(tokens);
  make_arc(dir, 300, 2, 10);
  make_arc(dir, 7, 1, 10);
  make_arc(dir, 65535, 0, 0);
  char junk[4096];
  snprintf(junk, sizeof junk, "%s/arcs/007", dir); /* not a token name: ignored */
  ck_assert_int_eq(mkdir(junk, 0755), 0);
  ck_assert(arc_store_has(s, 7));
  ck_assert(!arc_store_has(s, 8));
  ck_assert_int_eq(arc_store_list(s, &tokens, &n), RING_OK);
  ck_assert_uint_eq(n, 3);
  ck_assert_uint_eq(tokens[0], 7);
  ck_assert_uint_eq(tokens[1], 300);
  ck_assert_uint_eq(tokens[2], 65535);
  free(tokens);

  ck_assert_int_eq(arc_store_remove(s, 300), RING_OK);
  ck_assert(!arc_store_has(s, 300));
  ck_assert_int_eq(arc_store_remove(s, 300), RING_ENOTFOUND);
  ck_assert_int_eq(arc_store_list(s, &tokens, &n), RING_OK);
  ck_assert_uint_eq(n, 2);
  free(tokens);
  ck_assert_uint_gt(arc_store_free_bytes(s), 0);
  arc_store_close(s);
  arc_store_close(NULL);
  scratch_free(dir);
}
END_TEST

static bool exists(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/tmp/%s", dir, name);
  struct stat st;
  return lstat(p, &st) == 0;
}

/* An arc taken out of service becomes the leftover of a fetch of its
 * version; a partial copy already there is the one kept. */
START_TEST(recheck_moves_an_arc_to_tmp) {
  char *dir = scratch_dir();
  arc_store *s;
  ck_assert_int_eq(arc_store_open(dir, &s, NULL), RING_OK);
  make_arc(dir, 5, 2, 1000);
  ck_assert_int_eq(arc_store_recheck(s, 5, 9), RING_OK);
  ck_assert(!arc_store_has(s, 5));
  ck_assert(exists(dir, "5.9/f0") && exists(dir, "5.9/f1"));
  ck_assert_int_eq(arc_store_recheck(s, 5, 9), RING_ENOTFOUND);

  make_arc(dir, 5, 1, 10); /* installed again, while 5.9 waits */
  ck_assert_int_eq(arc_store_recheck(s, 5, 9), RING_OK);
  ck_assert(!arc_store_has(s, 5));
  ck_assert(exists(dir, "5.9/f1")); /* the older leftover stays */
  ck_assert_int_eq(arc_store_recheck(s, ARC_TOKEN_MAX + 1, 9), RING_EINVAL);
  arc_store_close(s);
  scratch_free(dir);
}
END_TEST

START_TEST(crash_leftovers) {
  char *dir = scratch_dir();
  arc_store *s;
  ck_assert_int_eq(arc_store_open(dir, &s, NULL), RING_OK);
  arc_store_close(s);
  /* what a crash leaves: a fetch in progress, an old one, a half removal */
  char p[4096];
  snprintf(p, sizeof p, "%s/tmp/5.3", dir);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  write_pattern(p, "f0", 500, 1);
  snprintf(p, sizeof p, "%s/tmp/5.2", dir);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  write_pattern(p, "f0", 100, 1);
  snprintf(p, sizeof p, "%s/tmp/rm.9.0", dir);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  write_pattern(dir, "tmp/stray", 1, 1);

  ck_assert_int_eq(arc_store_open(dir, &s, NULL), RING_OK);
  ck_assert(exists(dir, "5.3") && exists(dir, "5.2") && exists(dir, "rm.9.0"));
  ck_assert(!arc_store_has(s, 5)); /* nothing half-made is installed */
  const char *keep[] = {"5.3", NULL};
  arc_store_sweep_tmp(s, keep, 2);
  ck_assert(exists(dir, "5.3"));
  ck_assert(exists(dir, "5.3/f0"));
  ck_assert(!exists(dir, "5.2") && !exists(dir, "rm.9.0") && !exists(dir, "stray"));
  arc_store_sweep_tmp(s, NULL, 0);
  ck_assert(!exists(dir, "5.3"));
  arc_store_close(s);
  scratch_free(dir);
}
END_TEST

START_TEST(open_refuses) {
  arc_store *s = NULL;
  ring_error err;
  ck_assert_int_eq(arc_store_open("", &s, &err), RING_EINVAL);
  ck_assert_int_ne(arc_store_open("/proc/self/nope/deeper", &s, &err), RING_OK);
  ck_assert_ptr_null(s);
  char *dir = scratch_dir();
  write_pattern(dir, "arcs", 1, 1); /* a file where the directory should be */
  ck_assert_int_eq(arc_store_open(dir, &s, &err), RING_EIO);
  ck_assert_ptr_null(s);
  scratch_free(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("arc_store");
  TCase *tc = tcase_create("store");
  tcase_add_test(tc, manifest_of_an_arc);
  tcase_add_test(tc, has_list_remove);
  tcase_add_test(tc, recheck_moves_an_arc_to_tmp);
  tcase_add_test(tc, crash_leftovers);
  tcase_add_test(tc, open_refuses);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
