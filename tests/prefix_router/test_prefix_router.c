/*
 * test_prefix_router.c: the prefix router's quick load run (a few seconds
 * on loopback), three ways on the same workload, and what each must show:
 * the cap holds the busiest backend near c times the mean while most
 * requests still find their prefix cached; without it the skew shows;
 * random routing loses the caches. A backend joining mid-run is followed.
 * Latencies are printed, never asserted.
 */
#include "check_main.h"
#include "pr.h"

#include <check.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>

static pr_load_result run_quick(pr_mode mode, uint32_t join_at) {
  pr_load_opts o = pr_load_quick(mode);
  o.join_at = join_at;
  pr_load_result r;
  char err[256] = "";
  ck_assert_msg(pr_load_run(&o, &r, err, sizeof err) == RING_OK, "load run: %s", err);
  printf("mode %d: hit %.3f first %.3f max/mean %.3f p99 %.2f ms, %llu done, %llu errors\n",
         (int)mode, r.hit_rate, r.first_share, r.max_over_mean, r.p99_ms,
         (unsigned long long)r.done, (unsigned long long)r.errors);
  ck_assert_uint_eq(r.errors, 0);
  ck_assert_uint_eq(r.done, o.requests);
  return r;
}

/* The cap is ceil(c * (total + 1) / n) in-flight requests: at a mean of
 * clients/backends the rounding step lets max/mean pass c by that much. */
static double cap_bound(const pr_load_opts *o) {
  const double mean = (double)o->clients / o->backends;
  return ceil(o->route.bounded.c * (o->clients + 1.0) / o->backends) / mean + 0.02;
}

START_TEST(test_cap_against_none_and_random) {
  const pr_load_result random = run_quick(PR_RANDOM, 0);
  const pr_load_result none = run_quick(PR_RING, 0);
  const pr_load_result capped = run_quick(PR_BOUNDED, 0);
  const pr_load_opts q = pr_load_quick(PR_BOUNDED);
  ck_assert_double_le(capped.max_over_mean, cap_bound(&q));
  ck_assert_double_gt(none.max_over_mean, capped.max_over_mean + 0.1);
  /* Affinity under the cap: far above random routing, near the uncapped. */
  ck_assert_double_ge(capped.hit_rate, 0.55);
  ck_assert_double_gt(capped.hit_rate, random.hit_rate + 0.15);
  ck_assert_double_gt(none.hit_rate, random.hit_rate + 0.15);
  ck_assert_double_eq_tol(none.first_share, 1.0, 1e-9);
  ck_assert_double_ge(capped.first_share, 0.5);
}
END_TEST

/* A fifth backend joins after 1000 requests: the live holder gets the
 * planner's next table and the router routes on it with no error. */
START_TEST(test_follows_a_join) {
  const pr_load_result r = run_quick(PR_BOUNDED, 1000);
  ck_assert_uint_eq(r.version, 2);
}
END_TEST

static Suite *prefix_router_suite(void) {
  Suite *s = suite_create("prefix_router");
  TCase *tc = tcase_create("load");
  tcase_set_timeout(tc, 100);
  tcase_add_test(tc, test_cap_against_none_and_random);
  tcase_add_test(tc, test_follows_a_join);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = run_suite(prefix_router_suite());
  curl_global_cleanup();
  return rc;
}
