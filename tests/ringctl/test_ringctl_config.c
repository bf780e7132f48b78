/*
 * test_ringctl_config.c: where ringctl's settings come from, against real
 * etcd: the environment alone (RINGCTL_ENDPOINTS without a scheme,
 * RINGCTL_CLUSTER), the user's file under $XDG_CONFIG_HOME, --config FILE,
 * their precedence (flags > environment > file), the daemons' TLS option
 * names with the old ones as aliases, and a bad file named file:line.
 *
 * Every run here has XDG_CONFIG_HOME set to a directory of the test's own,
 * so no operator's file on the machine takes part.
 */
#include "ringctl_fixture.h"

#include <stdlib.h>
#include <sys/stat.h>

static char home[512], user_conf[1024];

/* Runs `VARS ringctl ARGS` (VARS: "NAME=value ..." or ""). */
static fx_run with_env(const char *vars, const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "env XDG_CONFIG_HOME='%s' %s '%s' %s", home, vars, RINGCTL_PATH, args);
  return fx_shell(cmd);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

/* The test etcd's endpoint without "http://", as etcdctl takes it. */
static const char *bare_endpoint(void) {
  const char *e = fx_etcd.endpoints;
  return strncmp(e, "http://", 7) == 0 ? e + 7 : e;
}

static void setup_home(void) {
  snprintf(home, sizeof home, "%s/xdg", fx_etcd.base);
  char dir[768];
  snprintf(dir, sizeof dir, "%s/ringkeeper", home);
  mkdir(home, 0700);
  mkdir(dir, 0700);
  snprintf(user_conf, sizeof user_conf, "%s/ringctl.conf", dir);
  unlink(user_conf);
}

START_TEST(env_alone) {
  setup_home();
  FX_EXPECT(0, "c-env", "init --tokens 64 --replicas 2 --failure-domain zone");
  char vars[1024];
  snprintf(vars, sizeof vars, "RINGCTL_ENDPOINTS=%s RINGCTL_CLUSTER=c-env", bare_endpoint());
  fx_run r = with_env(vars, "status");
  ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
  fx_free(&r);
  r = with_env(vars, "--endpoints http://127.0.0.1:1 status --timeout 1s"); /* a flag wins */
  ck_assert_msg(r.code == 4, "exit %d: %s", r.code, r.err);
  fx_free(&r);
}
END_TEST

START_TEST(file_then_env_then_flag) {
  setup_home();
  FX_EXPECT(0, "c-file", "init --tokens 64 --replicas 2 --failure-domain zone");
  char text[1024];
  snprintf(text, sizeof text,
           "# the operator's settings\n"
           "endpoints = %s\n"
           "cluster = 'c-file'   # quoted, with a comment\n"
           "timeout = 5s\r\n",
           fx_etcd.endpoints);
  write_file(user_conf, text);
  fx_run r = with_env("", "status"); /* the user's file alone */
  ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
  fx_free(&r);
  r = with_env("RINGCTL_CLUSTER=c-nope", "status"); /* the environment over the file */
  ck_assert_msg(r.code == 1 && strstr(r.err, "c-nope"), "exit %d: %s", r.code, r.err);
  fx_free(&r);
  r = with_env("RINGCTL_CLUSTER=c-nope", "status --cluster c-file"); /* a flag over both */
  ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
  fx_free(&r);

  char named[600]; /* --config names the one file: the user's is not read */
  snprintf(named, sizeof named, "%s/named.conf", fx_etcd.base);
  snprintf(text, sizeof text, "endpoints = %s\n", fx_etcd.endpoints);
  write_file(named, text);
  char args[800];
  snprintf(args, sizeof args, "--config %s status", named);
  r = with_env("", args); /* no cluster: the user's file, which has one, was not read */
  ck_assert_msg(r.code == 2 && strstr(r.err, "--cluster"), "exit %d: %s", r.code, r.err);
  fx_free(&r);
  snprintf(args, sizeof args, "RINGCTL_CONFIG=%s", named);
  r = with_env(args, "status");
  ck_assert_msg(r.code == 2 && strstr(r.err, "--cluster"), "exit %d: %s", r.code, r.err);
  fx_free(&r);
  unlink(user_conf);
}
END_TEST

START_TEST(bad_files) {
  setup_home();
  char path[600], args[800];
  snprintf(path, sizeof path, "%s/bad.conf", fx_etcd.base);
  write_file(path, "cluster = x\n\nbogus = 1\n");
  snprintf(args, sizeof args, "--config %s status", path);
  fx_run r = with_env("", args);
  char where[700];
  snprintf(where, sizeof where, "%s:3: unknown setting 'bogus'", path);
  ck_assert_msg(r.code == 2 && strstr(r.err, where), "exit %d: %s", r.code, r.err);
  fx_free(&r);

  write_file(path, "cluster = \"unterminated\n");
  r = with_env("", args);
  ck_assert_msg(r.code == 2 && strstr(r.err, ":1: cluster: unterminated quote"), "exit %d: %s",
                r.code, r.err);
  fx_free(&r);

  char *line = malloc(5000); /* a line over 4096 bytes */
  memset(line, 'a', 4999);
  line[4999] = '\0';
  memcpy(line, "as = ", 5);
  write_file(path, line);
  free(line);
  r = with_env("", args);
  ck_assert_msg(r.code == 2 && strstr(r.err, ":1: longer than"), "exit %d: %s", r.code, r.err);
  fx_free(&r);

  write_file(user_conf, "config = /elsewhere\n"); /* a file cannot name another */
  r = with_env("", "status");
  ck_assert_msg(r.code == 2 && strstr(r.err, "unknown setting 'config'"), "exit %d: %s", r.code,
                r.err);
  fx_free(&r);
  unlink(user_conf);

  r = with_env("", "--config /nonexistent/ringctl.conf status");
  ck_assert_msg(r.code == 2 && strstr(r.err, "/nonexistent/ringctl.conf"), "exit %d: %s", r.code,
                r.err);
  fx_free(&r);
}
END_TEST

/* The daemons' TLS option names, and the old ones still taken. */
START_TEST(tls_names) {
  setup_home();
  const char *pairs[] = {"--etcd-cert-file c.pem", "--cert c.pem", "--etcd-key-file k.pem",
                         "--key k.pem"};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    char args[800];
    snprintf(args, sizeof args, "--endpoints %s --cluster c-tls %s status", fx_etcd.endpoints,
             pairs[i]);
    fx_run r = with_env("", args);
    ck_assert_msg(r.code == 2 && strstr(r.err, "--etcd-cert-file and --etcd-key-file go together"),
                  "%s: exit %d: %s", pairs[i], r.code, r.err);
    fx_free(&r);
  }
  fx_run r = with_env("RINGCTL_CERT=c.pem RINGCTL_CLUSTER=c-tls", "status"); /* env, old name */
  ck_assert_msg(r.code == 2 && strstr(r.err, "go together"), "exit %d: %s", r.code, r.err);
  fx_free(&r);
}
END_TEST

int main(void) {
  const TTest *const tests[] = {env_alone, file_then_env_then_flag, bad_files, tls_names};
  return fx_main("ringctl_config", tests, sizeof tests / sizeof tests[0]);
}
