/*
 * test_live.c: the live holder. Semantics (versions, nesting, refusals)
 * and a stress test: reader threads look up without pause while a writer
 * swaps 10,000 tables; readers check that every table they see is whole
 * and that versions never go backwards. Run under ThreadSanitizer by
 * tests/run.sh, and under ASan (a table freed too early is a
 * use-after-free there).
 */
#include "ring.h"
#include "test_tables.h"
#include "check_main.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define STRESS_TOKENS 64
#define STRESS_NODES 5

/* Table v stamps its contents: owners[i] = (i + v) % STRESS_NODES. */
static ring_table *stamped(uint64_t v) {
  ring_table_params p = {"live", "", v, 0, STRESS_TOKENS, 3};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  for (int i = 0; i < STRESS_NODES; i++) {
    char id[8];
    snprintf(id, sizeof id, "n%d", i);
    ring_node_spec s = {id, "127.0.0.1:1", NULL, NULL, 0, 1.0, RING_NODE_ACTIVE};
    ck_assert_int_eq(ring_table_add_node(t, &s, NULL, NULL), RING_OK);
  }
  for (uint32_t tok = 0; tok < STRESS_TOKENS; tok++)
    for (uint32_t r = 0; r < 3; r++)
      ring_table_set_owner(t, tok, r, (uint16_t)((tok * 3 + r + v) % STRESS_NODES));
  ck_assert_int_eq(ring_table_seal(t, NULL), RING_OK);
  return t;
}

START_TEST(versions_and_refusals) {
  ring_live *l;
  ck_assert_int_eq(ring_live_new(&l), RING_OK);
  ck_assert_ptr_null(ring_live_enter(l));
  ring_live_exit(l);
  ck_assert_uint_eq(ring_live_version(l), 0);
  ring_table *t5 = stamped(5), *t4 = stamped(4), *t5b = stamped(5);
  ck_assert_int_eq(ring_live_swap(l, t5), RING_OK);
  ck_assert_uint_eq(ring_live_version(l), 5);
  ck_assert_int_eq(ring_live_swap(l, t4), RING_ESTALE); /* caller still owns t4 */
  ck_assert_int_eq(ring_live_swap(l, t5b), RING_ESTALE);
  ring_table_free(t4);
  ring_table_free(t5b);
  /* inside a read section a swap would wait for itself */
  const ring_table *seen = ring_live_enter(l);
  const ring_table *nested = ring_live_enter(l);
  ck_assert_ptr_eq(seen, nested);
  ring_live_exit(l);
  ring_table *t6 = stamped(6);
  ck_assert_int_eq(ring_live_swap(l, t6), RING_EBUSY);
  ck_assert_uint_eq(ring_table_version(seen), 5);
  ring_live_exit(l);
  ck_assert_int_eq(ring_live_swap(l, t6), RING_OK);
  seen = ring_live_enter(l);
  ck_assert_uint_eq(ring_table_version(seen), 6);
  ring_live_exit(l);
  ring_live_exit(l); /* an unmatched exit is ignored */
  ck_assert_int_eq(ring_live_swap(NULL, t6), RING_EINVAL);
  ring_live_free(l);
  ring_live_free(NULL);
}
END_TEST

START_TEST(unsealed_refused) {
  ring_live *l;
  ck_assert_int_eq(ring_live_new(&l), RING_OK);
  ring_table_params p = {"live", "", 1, 0, 64, 1};
  ring_table *t;
  ck_assert_int_eq(ring_table_new(&p, &t, NULL), RING_OK);
  ck_assert_int_eq(ring_live_swap(l, t), RING_EINVAL);
  ring_table_free(t);
  ring_live_free(l);
}
END_TEST

typedef struct stress {
  ring_live *live;
  atomic_bool stop;
  uint64_t swaps;         /* the writer's count */
  atomic_ulong sections;  /* read sections completed, all readers */
  atomic_ulong torn;      /* tables whose contents did not match their version */
  atomic_ulong backwards; /* a reader saw a version lower than before */
} stress;

/* Checks every slot of the table against its version stamp. */
static bool whole(const ring_table *t) {
  const ring_view *v = ring_table_view(t);
  uint64_t ver = ring_table_version(t);
  for (uint32_t i = 0; i < STRESS_TOKENS * 3; i++)
    if (v->owners[i] != (i + ver) % STRESS_NODES)
      return false;
  return true;
}

static void *reader_main(void *arg) {
  stress *s = arg;
  uint64_t last = 0;
  char key[32];
  unsigned long n = 0;
  while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
    const ring_table *t = ring_live_enter(s->live);
    if (t != NULL) {
      uint16_t owners[3];
      int len = snprintf(key, sizeof key, "k%lu", n);
      ring_lookup(t, key, (size_t)len, owners, 3);
      uint64_t v = ring_table_version(t);
      if (v < last)
        atomic_fetch_add(&s->backwards, 1);
      last = v;
      if ((n & 15) == 0 && !whole(t)) /* a full check every 16th section */
        atomic_fetch_add(&s->torn, 1);
    }
    ring_live_exit(s->live);
    n++;
  }
  atomic_fetch_add(&s->sections, n);
  return NULL;
}

/* Short-lived readers: threads that register, read a little and exit while
 * the writer scans the registry. */
static void *transient_main(void *arg) {
  stress *s = arg;
  for (int i = 0; i < 100; i++) {
    const ring_table *t = ring_live_enter(s->live);
    if (t != NULL && !whole(t))
      atomic_fetch_add(&s->torn, 1);
    ring_live_exit(s->live);
  }
  return NULL;
}

static void *churn_main(void *arg) {
  stress *s = arg;
  while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
    pthread_t th;
    if (pthread_create(&th, NULL, transient_main, s) == 0)
      pthread_join(th, NULL);
  }
  return NULL;
}

START_TEST(stress_10000_swaps) {
  enum { READERS = 2, SWAPS = 10000 };
  stress s = {0};
  ck_assert_int_eq(ring_live_new(&s.live), RING_OK);
  pthread_t readers[READERS], churn;
  for (int i = 0; i < READERS; i++)
    ck_assert_int_eq(pthread_create(&readers[i], NULL, reader_main, &s), 0);
  ck_assert_int_eq(pthread_create(&churn, NULL, churn_main, &s), 0);
  for (uint64_t v = 1; v <= SWAPS; v++) {
    ck_assert_int_eq(ring_live_swap(s.live, stamped(v)), RING_OK);
    s.swaps++;
  }
  atomic_store(&s.stop, true);
  for (int i = 0; i < READERS; i++)
    pthread_join(readers[i], NULL);
  pthread_join(churn, NULL);
  printf("live stress: %lu swaps, %lu read sections, %lu torn, %lu backwards\n",
         (unsigned long)s.swaps, atomic_load(&s.sections), atomic_load(&s.torn),
         atomic_load(&s.backwards));
  ck_assert_uint_eq(s.swaps, SWAPS);
  ck_assert_uint_eq(ring_live_version(s.live), SWAPS);
  ck_assert_uint_eq(atomic_load(&s.torn), 0);
  ck_assert_uint_eq(atomic_load(&s.backwards), 0);
  ck_assert_uint_gt(atomic_load(&s.sections), 0);
  ring_live_free(s.live);
}
END_TEST

static Suite *live_suite(void) {
  Suite *s = suite_create("live");
  TCase *tc = tcase_create("live");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, versions_and_refusals);
  tcase_add_test(tc, unsealed_refused);
  tcase_add_test(tc, stress_10000_swaps);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(live_suite()); }
