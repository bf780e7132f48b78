/*
 * test_ringctl_papercuts.c: messages and small behaviours an operator meets
 * first, against real etcd: a negative weight is judged as a weight (not
 * an unknown option), an SVG that cannot be written says why, a written
 * one has the mode a new file gets (0644 under umask 022), and --json
 * with etcd down still prints one JSON object, with "error".
 */
#include "ringctl_fixture.h"

#include <sys/stat.h>

START_TEST(negative_weight) {
  fx_seed_cluster("k-weight");
  fx_run r = fx_ringctl("k-weight", "weight n2 -1");
  ck_assert_msg(r.code == 2 && strstr(r.err, "weight must be a positive number") &&
                    strstr(r.err, "unknown option") == NULL,
                "exit %d: %s", r.code, r.err);
  fx_free(&r);
  FX_EXPECT_IN(2, err, "positive", "k-weight", "weight n2 -0.5");
  FX_EXPECT(0, "k-weight", "weight n2 2");
}
END_TEST

START_TEST(svg_reason_and_mode) {
  fx_seed_cluster("k-svg");
  FX_EXPECT_IN(1, err, "cannot write /nonexistent/x.svg: No such file or directory", "k-svg",
               "render --svg /nonexistent/x.svg");
  char path[400], cmd[1200];
  snprintf(path, sizeof path, "%s/ring.svg", fx_etcd.base);
  snprintf(cmd, sizeof cmd, "umask 022; '%s' --endpoints %s --cluster k-svg render --svg %s",
           RINGCTL_PATH, fx_etcd.endpoints, path);
  fx_run r = fx_shell(cmd);
  ck_assert_msg(r.code == 0, "%s", r.err);
  fx_free(&r);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_msg((st.st_mode & 0777) == 0644, "mode %o", (unsigned)(st.st_mode & 0777));
  snprintf(cmd, sizeof cmd, "umask 077; '%s' --endpoints %s --cluster k-svg render --svg %s",
           RINGCTL_PATH, fx_etcd.endpoints, path);
  r = fx_shell(cmd); /* the umask is honoured */
  ck_assert_msg(r.code == 0, "%s", r.err);
  fx_free(&r);
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_msg((st.st_mode & 0777) == 0600, "mode %o", (unsigned)(st.st_mode & 0777));
}
END_TEST

START_TEST(json_with_etcd_down) {
  char args[256];
  snprintf(args, sizeof args, "--endpoints 127.0.0.1:%d --cluster dead status --json --timeout 1s",
           harness_free_port());
  fx_run r = fx_ringctl_raw(args);
  ck_assert_msg(r.code == 4, "exit %d: %s", r.code, r.err);
  cJSON *j = cJSON_Parse(r.out);
  ck_assert_msg(cJSON_IsObject(j), "no JSON on stdout: %s", r.out);
  ck_assert_msg(strstr(fx_str(j, "error"), "Couldn't connect"), "%s", r.out);
  ck_assert_double_eq(fx_num(j, "exit"), 4);
  cJSON_Delete(j);
  fx_free(&r);
}
END_TEST

int main(void) {
  const TTest *const tests[] = {negative_weight, svg_reason_and_mode, json_with_etcd_down};
  return fx_main("ringctl_papercuts", tests, sizeof tests / sizeof tests[0]);
}
