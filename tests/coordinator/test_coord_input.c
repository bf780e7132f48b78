/*
 * test_coord_input.c: bad input.
 *   - bad flags and bad config files: exit 2 with a message on stderr;
 *     a good config file works and a flag wins over it;
 *   - a malformed `config` value in etcd: the coordinator logs it, stays
 *     up, publishes nothing and /healthz says so; fixed, it proceeds;
 *   - ringctl on a node that does not exist: exit 1 (usage errors: 2);
 *   - hosts writing too much or garbage (100 progress/ values of 1.4 MB,
 *     invalid JSON, a wrong format, a huge alive/ value, a key that names
 *     no id): the coordinator keeps stepping for the good hosts, counts the
 *     bad records in /metrics, and `ringctl status` names host and reason.
 */
#include "coord_env.h"

/* Runs ring-coordinator with `args`; returns its exit code (the test fails
 * if it is still running after 10 s) and its output in out. */
static int coordinator_run(char *out, size_t cap, const char *args) {
  int rc = proc_runf(10, out, cap, "%s %s", RING_COORDINATOR_BIN, args);
  ck_assert_msg(rc >= 0, "ring-coordinator %s did not exit within 10 s", args);
  fprintf(stderr, "ring-coordinator %s -> %d: %.300s\n", args, rc, out);
  return rc;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

START_TEST(bad_flags_and_config_files) {
  char out[4096], args[1024], file[200];
  const char *E = env.etcd.endpoints;
  struct {
    const char *args;   /* %s: endpoints */
    const char *needle; /* the message names this */
  } bad[] = {
      {"--endpoints %s --cluster ck --bogus", "bogus"},
      {"--endpoints %s", "cluster"},
      {"--endpoints %s --cluster ck --lease-ttl banana", "lease-ttl"},
      {"--endpoints %s --cluster ck --tick -5s", "tick"},
      {"--endpoints %s --cluster ck --log-level loud", "log-level"},
      {"--endpoints %s --cluster Not/A/Name", "cluster"},
      {"--endpoints %s --cluster ck stray-argument", "stray-argument"},
      {"--endpoints %s --cluster ck --config /nonexistent/coord.conf", "/nonexistent/coord.conf"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(args, sizeof args, bad[i].args, E);
    ck_assert_msg(coordinator_run(out, sizeof out, args) == 2, "%s: not exit 2", args);
    ck_assert_msg(strstr(out, bad[i].needle) != NULL, "%s: the message does not name %s: %s", args,
                  bad[i].needle, out);
  }
  const char *files[][2] = {
      {"this line is no setting\n", "coord.conf:1"},
      {"# comment\n\ncolour = blue\n", "colour"},
      {"lease-ttl = 5 parsecs\n", "lease-ttl"},
      {"auto-apply = perhaps\n", "auto-apply"},
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(file, sizeof file, "%s/coord.conf", env.dir);
    write_file(file, files[i][0]);
    snprintf(args, sizeof args, "--endpoints %s --cluster ck --config %s", E, file);
    ck_assert_msg(coordinator_run(out, sizeof out, args) == 2, "config %s: not exit 2",
                  files[i][0]);
    ck_assert_msg(strstr(out, files[i][1]) != NULL, "config %s: the message does not name %s: %s",
                  files[i][0], files[i][1], out);
  }

  /* a good file: its settings apply, and a flag wins over it */
  env_config k = {.tokens = 64, .replicas = 1, .down_after_ms = 1500, .auto_apply = false};
  env_config_put(&k);
  char conf[1024];
  snprintf(conf, sizeof conf,
           "# ring-coordinator test config\n"
           "endpoints = %s\ncluster = " ENV_CLUSTER "\nid = from-file\n"
           "lease-ttl = 2s\nlog-level = debug\ntick = 200ms\nauto-apply = true\n",
           E);
  snprintf(file, sizeof file, "%s/good.conf", env.dir);
  write_file(file, conf);
  snprintf(env.coord_id[0], sizeof env.coord_id[0], "from-flag");
  snprintf(env.listen[0], sizeof env.listen[0], "127.0.0.1:%d", harness_free_port());
  char log[200];
  snprintf(log, sizeof log, "%s/from-flag.log", env.dir);
  char *argv[] = {RING_COORDINATOR_BIN, "--config", file,          "--id",
                  "from-flag",          "--listen", env.listen[0], NULL};
  ck_assert_int_eq(proc_spawn(&env.coord[0], log, argv), 0);
  WAIT_UNTIL(env_leader_index() == 0, 15, "the coordinator from a config file does not lead");
  env_agent("a1", "z0");
  env_wait_done(1, 60); /* auto-apply came from the file */
  ck_assert_int_eq(proc_term(&env.coord[0], 10), 0);
  env_pass();
}
END_TEST

/* The coordinator stays up, publishes nothing and reports the config. */
static void assert_refuses_config(const char *what) {
  char body[512];
  WAIT_UNTIL(env_healthz(0, body, sizeof body) == 503 && strstr(body, "config"), 10,
             "%s: /healthz does not report the config (last: %s)", what, body);
  double end = harness_now() + 3;
  while (harness_now() < end) {
    ck_assert_msg(proc_running(&env.coord[0]), "%s: the coordinator exited", what);
    ck_assert_uint_eq(env_version(), 0);
    ck_assert(!env_exists("plan/active"));
    harness_sleep_ms(200);
  }
  ck_assert_msg(file_contains(env.coord[0].log, "config"), "%s: the log does not say config", what);
  ck_assert_double_eq(env_metric(0, "ring_coordinator_publishes_total", ""), 0);
}

START_TEST(malformed_config_in_etcd) {
  env_put("config", "{\"format\":\"ringkeeper.config.v1\",\"tokens\":256,");
  env_agent("a1", "z0");
  env_agent("a2", "z1");
  env_agent("a3", "z2");
  env_coord_start(0, "coord-a", "--auto-apply");
  assert_refuses_config("truncated JSON");
  ck_assert_msg(file_contains(env.coord[0].log, "level=error") ||
                    file_contains(env.coord[0].log, "level=warn"),
                "the refusal is not logged as an error or warning");
  double errors = env_metric(0, "ring_coordinator_errors_total", "");

  /* well-formed JSON, a value out of range */
  env_config k = {.tokens = 100, .replicas = 3, .down_after_ms = 1500, .auto_apply = true};
  env_config_put(&k);
  assert_refuses_config("tokens 100");

  /* fixed: the coordinator proceeds and is healthy again */
  k.tokens = 256;
  env_config_put(&k);
  env_wait_done(1, 60);
  ring_table_free(env_verify_clean());
  char body[512];
  WAIT_UNTIL(env_healthz(0, body, sizeof body) == 200, 10, "/healthz stays unhealthy: %s", body);
  /* its HELP: "failed etcd writes and steps"; a step that cannot read the
   * config failed, and an alert on this counter should see it */
  ck_assert_msg(errors >= 1,
                "ring_coordinator_errors_total stayed %.0f while the config was "
                "refused",
                errors);
  env_pass();
}
END_TEST

START_TEST(ringctl_unknown_node) {
  env_config k = {.tokens = 64, .replicas = 1, .down_after_ms = 1500, .auto_apply = true};
  uint64_t v1 = env_bootstrap(&k, 2, 2, 1, "--auto-apply");
  char out[4096];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "drain nosuch"), 1);
  ck_assert_msg(strstr(out, "nosuch") != NULL, "the message does not name the node: %s", out);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "undrain nosuch"), 1);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "weight nosuch 2"), 1);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "drain"), 2);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "weight a1"), 2);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "weight a1 heavy"), 2);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "weight a1 -1"), 2);
  ck_assert(!env_exists("nodes/nosuch"));
  ck_assert(HARNESS_HOLDS(env_version() == v1 && !env_exists("nodes/nosuch"), 1.0));
  env_node n;
  ck_assert(env_node_read("a1", &n));
  ck_assert_double_eq(n.weight, 1.0);
  ck_assert_str_eq(n.desired, "active");
  env_pass();
}
END_TEST

/* Puts `len` bytes of `fill` at <prefix><what>. */
static void put_filled(const char *what, char fill, size_t len) {
  char key[RK_KEY_MAX_TEST];
  snprintf(key, sizeof key, ENV_PREFIX "%s", what);
  char *v = malloc(len);
  ck_assert_ptr_nonnull(v);
  memset(v, fill, len);
  ring_error err;
  ck_assert_msg(ring_etcd_put(env.c, key, strlen(key), v, len, 0, NULL, NULL, &err) == RING_OK,
                "put %s: %s", key, err.message);
  free(v);
}

#define BIG_PROGRESS 1468006 /* 1.4 MB: under etcd's 1.5 MiB request cap */

START_TEST(bad_host_records) {
  env_config k = {.tokens = 64, .replicas = 1, .down_after_ms = 1500, .auto_apply = true};
  env_bootstrap(&k, 2, 2, 1, "--auto-apply");
  /* 140 MB of progress from 100 fake hosts: one txn of everything would be
   * over the client's 128 MiB reply cap */
  for (int i = 0; i < 100; i++) {
    char what[64];
    snprintf(what, sizeof what, "progress/f%d", i);
    put_filled(what, 'x', BIG_PROGRESS);
  }
  /* garbage from one host */
  put_filled("alive/n3", ' ', 100000);
  env_put("acks/n3", "v7");
  env_put("progress/n3", "{\"format\":\"ringkeeper.progress.v1\",\"version\":");
  env_put("progress/n3x", "{\"format\":\"ringkeeper.progress.v9\",\"version\":1}");
  env_put("progress/Not An Id", "{}");

  /* a membership change is still processed for the good hosts */
  env_agent("a3", "z0");
  env_wait_done(2, 120);
  ring_table *t = env_verify_clean();
  ck_assert_uint_gt(env_replicas(t, "a3"), 0);
  ring_table_free(t);

  double progress = env_metric(0, "ring_coordinator_bad_records_total", "kind=\"progress\"");
  ck_assert_msg(progress >= 103, "bad progress records counted: %.0f", progress);
  ck_assert_double_ge(env_metric(0, "ring_coordinator_bad_records_total", "kind=\"alive\""), 1);
  ck_assert_double_ge(env_metric(0, "ring_coordinator_bad_records_total", "kind=\"acks\""), 1);
  double hosts = env_metric(0, "ring_coordinator_bad_record_hosts", "");
  ck_assert_msg(hosts == 103, "hosts with a bad record: %.0f",
                hosts); /* f0..f99, n3, n3x, ?ot??n??d */
  /* counted once per value, however many looks */
  ck_assert(HARNESS_HOLDS(
      env_metric(0, "ring_coordinator_bad_records_total", "kind=\"progress\"") == progress, 1.0));
  ck_assert(!env_exists("nodes/n3"));

  static char out[1 << 16];
  ck_assert_int_eq(env_ringctl(out, sizeof out, "status"), 0);
  const char *section = strstr(out, "bad records");
  fprintf(stderr, "%.2000s\n", section ? section : out);
  ck_assert_msg(strstr(out, "bad records") != NULL, "no bad records section: %.300s", out);
  ck_assert_msg(strstr(out, "progress/f42: 1468006 bytes over the 524288 cap") != NULL,
                "status does not name f42's progress: %.300s", out);
  ck_assert_msg(strstr(out, "alive/n3: 100000 bytes over the 4096 cap") != NULL,
                "status does not name n3's alive: %.300s", out);
  ck_assert_msg(strstr(out, "acks/n3: ") != NULL, "status does not name n3's ack: %.300s", out);
  ck_assert_msg(strstr(out, "progress/n3x: format") != NULL, "no wrong format: %.300s", out);
  ck_assert_msg(strstr(out, "progress/?ot??n??d: the key names no id") != NULL, "%.200s", out);
  ck_assert_int_eq(env_ringctl(out, sizeof out, "status --json"), 0);
  cJSON *o = cJSON_Parse(out);
  ck_assert_ptr_nonnull(o);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(o, "bad_records")), 105);
  cJSON_Delete(o);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{bad_flags_and_config_files, 180},
                            {malformed_config_in_etcd, 180},
                            {ringctl_unknown_node, 180},
                            {bad_host_records, 300}};
  return env_main("coord_input", tests, 4);
}
