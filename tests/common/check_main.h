/*
 * check_main.h: the one way every Check test program runs its suite and
 * turns the result into an exit status.
 */
#ifndef RING_CHECK_MAIN_H
#define RING_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

/* Runs s and frees the runner. nofork: keep every test in this process
 * (needed when fixtures hold child processes such as etcd members). */
static inline int run_suite_as(Suite *s, int nofork) {
  SRunner *sr = srunner_create(s);
  if (nofork)
    srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static inline int run_suite(Suite *s) { return run_suite_as(s, 0); }

#endif /* RING_CHECK_MAIN_H */
