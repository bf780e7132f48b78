/*
 * test_fault_ringctl.c: ringctl outlasts an etcd outage (e2e_cluster.h: a
 * 1-member etcd, a coordinator, real agents).
 *   apply_wait_outlasts_etcd  `ringctl apply ID --wait` runs a throttled
 *                             join; a second ringctl re-attaches with
 *                             `ringctl wait`; etcd is killed for 6 s in the
 *                             middle. Both say they wait for etcd, neither
 *                             gives up, and both exit 0 once the run is
 *                             done.
 *   wait_reports_failed_run  the receiver of a join dies under `ringctl
 *                             wait`: exit 1 and the run's reason names it.
 */
#include "e2e_cluster.h"

#include <signal.h>

/* A throttled join: a 6 s outage falls in its middle. */
static const e2e_opts opts = {.per_node = 2, .per_wave = 4, .bytes_per_sec = 8000};

/* Starts `ringctl ARGS` in the background, its output into log. */
static void ringctl_spawn(proc *p, const char *log, const char *args) {
  char line[1800], etcd[600], *argv[PROC_ARGS_MAX];
  snprintf(line, sizeof line, "%s %s %s", RINGCTL_BIN,
           e2e_etcd("operator", "e2e", NULL, etcd, sizeof etcd), args);
  env_argv(line, argv);
  ck_assert_int_eq(proc_spawn(p, log, argv), 0);
}

static bool log_has(const char *log, const char *needle) {
  char *text = file_slurp(log);
  bool has = text != NULL && strstr(text, needle) != NULL;
  free(text);
  return has;
}

START_TEST(apply_wait_outlasts_etcd) {
  e2e_bootstrap(&opts, 4, 1);
  e2e_node_start(4, "n4", NULL);
  char id[24], args[128], apply_log[300], wait_log[300];
  ck_assert_msg(ENV_WAIT(e2e_new_proposal(id), 30), "no join proposed");
  snprintf(apply_log, sizeof apply_log, "%s/ringctl-apply.log", env.dir);
  snprintf(wait_log, sizeof wait_log, "%s/ringctl-wait.log", env.dir);
  proc apply, again;
  snprintf(args, sizeof args, "apply %s --wait", id);
  ringctl_spawn(&apply, apply_log, args);
  ck_assert_msg(ENV_WAIT(e2e_active() && log_has(apply_log, "moves"), 30), "no run follows");
  ringctl_spawn(&again, wait_log, "wait"); /* a run started elsewhere */
  ck_assert_msg(ENV_WAIT(log_has(wait_log, "moves"), 30), "ringctl wait follows nothing");

  ck_assert_msg(proc_running(&apply) && proc_running(&again), "the run ended before the outage");
  fprintf(stderr, "etcd down for 6 s at version %" PRIu64 "\n", e2e_version());
  etcd_member_signal(&env.etcd, 0, SIGKILL);
  ck_assert_msg(HARNESS_HOLDS(proc_running(&apply) && proc_running(&again), 6),
                "a ringctl gave up while etcd was down");
  ck_assert(etcd_member_restart(&env.etcd, 0));

  int rc = proc_wait(&apply, 180), rc2 = proc_wait(&again, 60);
  ck_assert_msg(rc == 0, "apply --wait exited %d:\n%s", rc, file_slurp(apply_log));
  ck_assert_msg(rc2 == 0, "wait exited %d:\n%s", rc2, file_slurp(wait_log));
  ck_assert_msg(log_has(apply_log, "waiting for etcd") && log_has(apply_log, "answers again") &&
                    log_has(apply_log, " done: "),
                "%s", file_slurp(apply_log));
  ck_assert_msg(log_has(wait_log, "waiting for etcd") && log_has(wait_log, " done: "), "%s",
                file_slurp(wait_log));
  e2e_wait_done(id, 30);
  env_pass();
}
END_TEST

/* A run that fails under `ringctl wait`: exit 1 (not 4: etcd answered),
 * the reason naming the receiver that went down. */
START_TEST(wait_reports_failed_run) {
  e2e_bootstrap(&opts, 4, 1);
  e2e_node_start(4, "n4", NULL);
  char id[24], log[300];
  e2e_apply(id, 30);
  snprintf(log, sizeof log, "%s/ringctl-wait.log", env.dir);
  proc waiter;
  ringctl_spawn(&waiter, log, "wait");
  ck_assert_msg(ENV_WAIT(log_has(log, "moves"), 30), "ringctl wait follows nothing");
  ck_assert_msg(proc_running(&waiter), "the run ended before its receiver went down");
  e2e_node_kill(4);
  int rc = proc_wait(&waiter, 60);
  ck_assert_msg(rc == 1, "wait exited %d:\n%s", rc, file_slurp(log));
  ck_assert_msg(log_has(log, "failed") && log_has(log, "receiving node n4 went down"), "%s",
                file_slurp(log));
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault_ringctl");
  e2e_add(s, "apply_wait_outlasts_etcd", 1, 300, apply_wait_outlasts_etcd);
  e2e_add(s, "wait_reports_failed_run", 1, 300, wait_reports_failed_run);
  return run_suite_as(s, 1);
}
