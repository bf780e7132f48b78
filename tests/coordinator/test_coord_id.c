/*
 * test_coord_id.c: one live ring-coordinator per --id. A second process
 * started with a live coordinator's id exits non-zero with an error that
 * names the holder, before it serves, registers or campaigns; the first
 * keeps leading. Once the first is gone (stopped, or killed and its lease
 * expired) the id starts again.
 */
#include "coord_env.h"

/* How many times needle is in the file at path. */
static int count_in(const char *path, const char *needle) {
  char *text = file_slurp(path);
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
    n++;
  free(text);
  return n;
}

START_TEST(duplicate_id_refused) {
  env_coord_start(0, "c1", NULL);
  WAIT_UNTIL(env_leader_index() == 0, 15, "c1 does not lead");
  char log[256], body[256];
  snprintf(log, sizeof log, "%s/c1.log", env.dir); /* both c1 write there: only its end is read */
  env_coord_spawn(1, "c1", NULL);
  int rc = proc_wait(&env.coord[1], 15);
  ck_assert_msg(rc == 1, "a second c1 exited %d, not 1 (see %s)", rc, log);
  ck_assert_msg(file_contains(log, "another ring-coordinator runs with --id c1 (pid"),
                "the error does not name the live holder: see %s", log);
  ck_assert_msg(count_in(log, "became leader") == 1 && count_in(log, "msg=started") == 1,
                "the second c1 went on: see %s", log);
  ck_assert_int_eq(env_healthz(1, body, sizeof body), 0); /* it never served */
  ck_assert_int_eq(env_leader_index(), 0);
  ck_assert_double_eq(env_metric(0, "ring_coordinator_terms_total", ""), 1);

  /* stopped cleanly: the id is free at once */
  ck_assert_int_eq(proc_term(&env.coord[0], 15), 0);
  env.coord_id[0][0] = '\0'; /* env_leader_index finds the id's new slot */
  env_coord_start(1, "c1", NULL);
  WAIT_UNTIL(env_leader_index() == 1, 15, "c1 restarted does not lead");

  /* killed: the id is free once its lease expires, and a start waits for that */
  proc_signal(&env.coord[1], SIGKILL);
  ck_assert_int_eq(proc_wait(&env.coord[1], 5), 128 + SIGKILL);
  env.coord_id[1][0] = '\0';
  env_coord_start(2, "c1", NULL);
  WAIT_UNTIL(env_leader_index() == 2, 15, "c1 after a crash does not lead");
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{duplicate_id_refused, 120}};
  return env_main("coord_id", tests, 1);
}
