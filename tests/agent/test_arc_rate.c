/*
 * test_arc_rate.c: the byte-rate limit, timed. These are the issue's
 * acceptance figures (64 MiB under 16 MiB/s in 4 s +/- 10%; a changed
 * limit felt within a second); they sit in their own binary because a
 * loaded machine can fail them without a bug: read the printed figures.
 */
#include "arc_env.h"
#include "check_main.h"

#include <check.h>

#define MiB (1u << 20)

static arc_env env;

static void setup(void) { env_start(&env); }
static void teardown(void) { env_stop(&env); }

START_TEST(sixty_four_mib_at_sixteen) {
  make_arc(env.src_dir, 40, 4, 16 * MiB);
  arc_limiter *lim;
  ck_assert_int_eq(arc_limiter_new(16 * MiB, &lim), RING_OK);
  arc_fetch_opts o = test_fetch_opts();
  o.limiter = lim;
  o.timeout_ms = 0;
  arc_fetch_result res;
  ring_error err;
  double t0 = now_s();
  ck_assert_msg(arc_fetch(env.dst, env.source, 40, 1, &o, &res, &err) == RING_OK, "%s",
                err.message);
  double dt = now_s() - t0;
  fprintf(stderr, "rate: 64 MiB under 16 MiB/s took %.2f s (want 4 s +/- 10%%)\n", dt);
  ck_assert_uint_eq(res.bytes, 64ull * MiB);
  /* Never faster than the limit allows; slower only by what a loaded machine
   * costs (the precise figure is printed above and reported, not asserted:
   * timing on a shared CI machine is not a test). */
  ck_assert_msg(dt >= 3.6 && dt <= 12.0, "took %.2f s", dt);
  arc_limiter_free(lim);
}
END_TEST

/* Bytes per second received in [t0 + 0.25 s, t0 + 1 s]. */
static double rate_after(uint32_t token, double t0) {
  while (now_s() < t0 + 0.25)
    usleep(1000);
  long long a = partial_size_in(env.dst_dir, token, "f0");
  double ta = now_s();
  while (now_s() < t0 + 1.0)
    usleep(1000);
  long long b = partial_size_in(env.dst_dir, token, "f0");
  return (double)(b - a) / (now_s() - ta);
}

START_TEST(live_change_within_a_second) {
  make_arc(env.src_dir, 41, 1, 96 * MiB);
  job j;
  job_start(&j, env.dst, env.source, 41, 4 * MiB, NULL);
  wait_partial_in(env.dst_dir, 41, "f0", 1 * MiB);
  double slow = rate_after(41, now_s());
  double t = now_s();
  arc_limiter_set_rate(j.lim, 32 * MiB);
  double fast = rate_after(41, t);
  t = now_s();
  arc_limiter_set_rate(j.lim, 4 * MiB);
  double slow_again = rate_after(41, t);
  arc_limiter_set_rate(j.lim, 0);
  job_join(&j);
  ck_assert_msg(j.rc == RING_OK, "%s", j.err.message);
  fprintf(stderr,
          "rate: 4 MiB/s -> %.1f; raised to 32 -> %.1f within a second; lowered to 4 -> "
          "%.1f MiB/s\n",
          slow / MiB, fast / MiB, slow_again / MiB);
  /* Upper bounds are the limiter's promise; lower bounds only show that each
   * change took effect within the second (a raise at least doubles the rate). */
  ck_assert_msg(slow > 1.0 * MiB && slow < 4.8 * MiB, "%.1f MiB/s at 4", slow / MiB);
  ck_assert_msg(fast > 2.0 * slow && fast < 38.4 * MiB, "%.1f MiB/s at 32", fast / MiB);
  ck_assert_msg(slow_again > 1.0 * MiB && slow_again < 4.8 * MiB, "%.1f MiB/s at 4 again",
                slow_again / MiB);
}
END_TEST

/* Several takers share one bucket: together they get the rate. */
typedef struct taker {
  arc_limiter *lim;
  const atomic_bool *stop;
  uint64_t bytes;
} taker;

static void *take_all(void *p) {
  taker *t = p;
  for (uint64_t done = 0; done < t->bytes; done += 64 << 10)
    if (!arc_limiter_take(t->lim, 64 << 10, t->stop))
      break;
  return NULL;
}

START_TEST(one_limit_for_all_transfers) {
  arc_limiter *lim;
  ck_assert_int_eq(arc_limiter_new(16 * MiB, &lim), RING_OK);
  pthread_t th[4];
  taker t = {lim, NULL, 8 * MiB};
  double t0 = now_s();
  for (int i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, take_all, &t);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  double dt = now_s() - t0;
  fprintf(stderr, "rate: 4 takers x 8 MiB under one 16 MiB/s bucket took %.2f s (want 2)\n", dt);
  ck_assert_msg(dt >= 1.8 && dt <= 6.0, "took %.2f s", dt);

  /* a stop flag frees a taker stuck behind a tiny rate */
  atomic_bool stop = false;
  arc_limiter_set_rate(lim, 1000);
  taker slow = {lim, &stop, 1 << 30};
  pthread_t s;
  pthread_create(&s, NULL, take_all, &slow);
  usleep(100000);
  stop = true;
  t0 = now_s();
  pthread_join(s, NULL);
  ck_assert_double_lt(now_s() - t0, 0.5);
  ck_assert(!arc_limiter_take(lim, 1, &stop));
  arc_limiter_set_rate(lim, 0);
  ck_assert(arc_limiter_take(lim, 1ull << 40, NULL)); /* unlimited: at once */
  arc_limiter_free(lim);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("arc_rate");
  TCase *tc = tcase_create("rate");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, sixty_four_mib_at_sixteen);
  tcase_add_test(tc, live_change_within_a_second);
  tcase_add_test(tc, one_limit_for_all_transfers);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
