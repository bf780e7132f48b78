/*
 * test_daemon_opts.c: rd_opts_parse: every value type from the config file
 * and from flags, a flag winning over the file, durations, --help, and one
 * test per error, each checking the whole message (file:line for the file)
 * and that a failed parse leaves every target as it was.
 */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen, dup */
#include "daemon.h"
#include "check_main.h"

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ the option table */

static const char default_endpoints[] = "http://127.0.0.1:2379";

/* The targets, reset with their defaults before every test. */
static struct {
  char *endpoints, *cluster;
  bool auto_apply;
  uint64_t replicas, big, lease_ms;
  double weight;
} v;

static const rd_opt table[] = {
    {"endpoints", RD_OPT_STRING, &v.endpoints, 0, 0, "etcd client URLs"},
    {"cluster", RD_OPT_STRING, &v.cluster, 0, 0, "cluster name"},
    {"auto-apply", RD_OPT_BOOL, &v.auto_apply, 0, 0, "apply plans without approval"},
    {"replicas", RD_OPT_UINT, &v.replicas, 1, 7, "copies of each token"},
    {"big", RD_OPT_UINT, &v.big, 0, 0, "unbounded"},
    {"lease-ttl", RD_OPT_MS, &v.lease_ms, 1000, 3600000, "leader lease"},
    {"weight", RD_OPT_DOUBLE, &v.weight, 0.1, 100, "capacity"},
    {NULL, 0, NULL, 0, 0, NULL},
};

static void reset(void) {
  v.endpoints = (char *)default_endpoints;
  v.cluster = NULL;
  v.auto_apply = false;
  v.replicas = 3;
  v.big = 0;
  v.lease_ms = 10000;
  v.weight = 1.0;
}

static void teardown(void) { rd_opts_free(table); }

/* ------------------------------------------------------------------ helpers */

static char err[512];

/* Parses "ringd" and then the arguments in ap, up to a NULL. */
static int vparse(const char *first, va_list ap) {
  char *argv[32] = {"ringd"};
  int argc = 1;
  for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
    argv[argc++] = (char *)a;
  memset(err, 'x', sizeof err); /* a stale message must not pass for a new one */
  return rd_opts_parse(argc, argv, "test daemon", table, err, sizeof err);
}

static int parse(const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  int rc = vparse(first, ap);
  va_end(ap);
  return rc;
}

/* Every target holds its default. */
static void assert_defaults(void) {
  ck_assert_ptr_eq(v.endpoints, default_endpoints);
  ck_assert_ptr_null(v.cluster);
  ck_assert(!v.auto_apply);
  ck_assert_uint_eq(v.replicas, 3);
  ck_assert_uint_eq(v.lease_ms, 10000);
  ck_assert(v.weight == 1.0);
}

/* Parsing the NULL-ended arguments fails with exactly the message want and
 * leaves every target as it was. */
static void fails(const char *want, const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  int rc = vparse(first, ap);
  va_end(ap);
  ck_assert_int_eq(rc, RD_OPTS_ERROR);
  ck_assert_str_eq(err, want);
  assert_defaults();
}

static char conf[64];

/* Writes text to a fresh temporary file whose name is left in conf. */
static const char *config(const char *text) {
  snprintf(conf, sizeof conf, "/tmp/ring-opts-XXXXXX");
  int fd = mkstemp(conf);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return conf;
}

static void unconfig(void) { unlink(conf); }

/* The message expected for the config file: "<conf>:<line>: <rest>". */
static const char *at_line(int line, const char *rest) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s:%d: %s", conf, line, rest);
  return buf;
}

/* -------------------------------------------------------------- good input */

START_TEST(no_arguments_keep_defaults) {
  ck_assert_int_eq(parse(NULL), RD_OPTS_OK);
  ck_assert_str_eq(err, "");
  assert_defaults();
}
END_TEST

START_TEST(file_sets_every_type) {
  config("# ring-coordinator\n"
         "\n"
         "endpoints = \"http://a:2379,http://b:2379\"   # two members\n"
         "  cluster=prod-eu  \r\n"
         "\tauto-apply = yes\n"
         "replicas = 5\n"
         "lease-ttl = 2m # comment after a value\n"
         "weight = '2.5'\n"
         "   # indented comment\n");
  ck_assert_int_eq(parse("--config", conf, NULL), RD_OPTS_OK);
  ck_assert_str_eq(v.endpoints, "http://a:2379,http://b:2379");
  ck_assert_str_eq(v.cluster, "prod-eu");
  ck_assert(v.auto_apply);
  ck_assert_uint_eq(v.replicas, 5);
  ck_assert_uint_eq(v.lease_ms, 120000);
  ck_assert(v.weight == 2.5);
  unconfig();
}
END_TEST

START_TEST(file_quotes_and_hashes) {
  config("endpoints = a#b\n" /* '#' inside a bare value stays */
         "cluster = \"say \\\"hi\\\" \\\\ # not a comment\"\n"
         "auto-apply = \"on\"\n");
  ck_assert_int_eq(parse("--config", conf, NULL), RD_OPTS_OK);
  ck_assert_str_eq(v.endpoints, "a#b");
  ck_assert_str_eq(v.cluster, "say \"hi\" \\ # not a comment");
  ck_assert(v.auto_apply);
  unconfig();
}
END_TEST

START_TEST(file_empty_value) {
  config("cluster =\nendpoints = \"\"\n");
  ck_assert_int_eq(parse("--config", conf, NULL), RD_OPTS_OK);
  ck_assert_str_eq(v.cluster, "");
  ck_assert_str_eq(v.endpoints, "");
  unconfig();
}
END_TEST

START_TEST(flag_forms) {
  ck_assert_int_eq(parse("--cluster", "c1", "--replicas=7", "--auto-apply", "--weight", "0.1",
                         "--lease-ttl=1000", NULL),
                   RD_OPTS_OK);
  ck_assert_str_eq(v.cluster, "c1");
  ck_assert_uint_eq(v.replicas, 7);
  ck_assert(v.auto_apply);
  ck_assert(v.weight == 0.1);
  ck_assert_uint_eq(v.lease_ms, 1000);
}
END_TEST

START_TEST(bool_flag_values) {
  static const char *const yes[] = {"true", "YES", "on", "1"}, *const no[] = {"false", "No", "OFF",
                                                                              "0"};
  for (int i = 0; i < 4; i++) {
    char arg[32];
    snprintf(arg, sizeof arg, "--auto-apply=%s", yes[i]);
    ck_assert_int_eq(parse(arg, NULL), RD_OPTS_OK);
    ck_assert(v.auto_apply);
    ck_assert_int_eq(parse("--auto-apply", no[i], NULL), RD_OPTS_OK);
    ck_assert(!v.auto_apply);
  }
  /* bare, followed by another flag */
  ck_assert_int_eq(parse("--auto-apply", "--replicas", "2", NULL), RD_OPTS_OK);
  ck_assert(v.auto_apply);
  ck_assert_uint_eq(v.replicas, 2);
}
END_TEST

START_TEST(flag_wins_over_file) {
  config("cluster = from-file\nreplicas = 2\nauto-apply = true\nendpoints = file-ep\n");
  /* before and after --config: the flag wins either way */
  ck_assert_int_eq(parse("--cluster", "from-flag", "--config", conf, "--auto-apply=false", NULL),
                   RD_OPTS_OK);
  ck_assert_str_eq(v.cluster, "from-flag");
  ck_assert(!v.auto_apply);
  ck_assert_uint_eq(v.replicas, 2);
  ck_assert_str_eq(v.endpoints, "file-ep");
  unconfig();
}
END_TEST

START_TEST(last_flag_and_last_line_win) {
  config("replicas = 2\nreplicas = 4\n");
  ck_assert_int_eq(parse("--config", conf, "--cluster=a", "--cluster=b", NULL), RD_OPTS_OK);
  ck_assert_uint_eq(v.replicas, 4);
  ck_assert_str_eq(v.cluster, "b"); /* "a" was freed when "b" replaced it (ASan) */
  unconfig();
}
END_TEST

START_TEST(durations) {
  static const struct {
    const char *text;
    uint64_t ms;
  } cases[] = {{"500000ms", 500000}, {"5s", 5000},   {"2m", 120000},
               {"1h", 3600000},      {"1500", 1500}, {"10m", 600000}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char arg[64];
    snprintf(arg, sizeof arg, "--lease-ttl=%s", cases[i].text);
    ck_assert_msg(parse(arg, NULL) == RD_OPTS_OK, "%s: %s", cases[i].text, err);
    ck_assert_uint_eq(v.lease_ms, cases[i].ms);
  }
}
END_TEST

START_TEST(unbounded_uint) {
  ck_assert_int_eq(parse("--big", "18446744073709551615", NULL), RD_OPTS_OK);
  ck_assert_uint_eq(v.big, UINT64_MAX);
}
END_TEST

START_TEST(free_resets_only_parsed_strings) {
  ck_assert_int_eq(parse("--cluster", "c", NULL), RD_OPTS_OK);
  rd_opts_free(table);
  ck_assert_ptr_null(v.cluster);
  ck_assert_ptr_eq(v.endpoints, default_endpoints); /* a default: never freed */
  rd_opts_free(table);                              /* twice is harmless */
  rd_opts_free(NULL);
}
END_TEST

START_TEST(help_prints_usage) {
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  FILE *out = tmpfile();
  ck_assert_ptr_nonnull(out);
  dup2(fileno(out), STDOUT_FILENO);
  int rc = parse("--cluster", "c", "--help", "bogus", NULL);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  char text[2048] = {0};
  rewind(out);
  size_t n = fread(text, 1, sizeof text - 1, out);
  fclose(out);
  ck_assert_int_eq(rc, RD_OPTS_HELP);
  ck_assert_uint_gt(n, 0);
  ck_assert_ptr_nonnull(strstr(text, "usage: ringd [--config FILE]"));
  ck_assert_ptr_nonnull(strstr(text, "test daemon\n"));
  ck_assert_ptr_nonnull(strstr(text, "--lease-ttl DURATION"));
  ck_assert_ptr_nonnull(strstr(text, "leader lease (default: 10s)"));
  ck_assert_ptr_nonnull(strstr(text, "--auto-apply "));
  ck_assert_ptr_nonnull(strstr(text, "--replicas N"));
  ck_assert_ptr_nonnull(strstr(text, "--endpoints VALUE"));
  assert_defaults(); /* --help parses nothing */
}
END_TEST

/* ------------------------------------------------------------------- errors */

START_TEST(err_unknown_key_names_line) {
  config("cluster = a\n\n# fine so far\nclustre = b\n");
  fails(at_line(4, "unknown option 'clustre'"), "--config", conf, NULL);
  unconfig();
}
END_TEST

START_TEST(err_bad_bool_in_file) {
  config("auto-apply = maybe\n");
  fails(at_line(1, "auto-apply: 'maybe' is not a bool (use true/false, yes/no, on/off or 1/0)"),
        "--config", conf, NULL);
  unconfig();
}
END_TEST

START_TEST(err_bad_bool_flag) {
  fails("--auto-apply: '2' is not a bool (use true/false, yes/no, on/off or 1/0)", "--auto-apply=2",
        NULL);
}
END_TEST

START_TEST(err_out_of_range) {
  fails("--replicas: 8 is out of range [1, 7]", "--replicas", "8", NULL);
  fails("--replicas: 0 is out of range [1, 7]", "--replicas=0", NULL);
  fails("--weight: 100.5 is out of range [0.1, 100]", "--weight", "100.5", NULL);
  fails("--lease-ttl: 999ms is out of range [1s, 1h]", "--lease-ttl", "999ms", NULL);
  config("\nlease-ttl = 61m\n");
  fails(at_line(2, "lease-ttl: 61m is out of range [1s, 1h]"), "--config", conf, NULL);
  unconfig();
}
END_TEST

START_TEST(err_bad_duration) {
  static const char *const bad[] = {
      "5x", "-5s", "s", "1.5s", "", "5 s", "5S", "5sec", "99999999999999999999h"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char arg[64], want[160];
    snprintf(arg, sizeof arg, "--lease-ttl=%s", bad[i]);
    snprintf(want, sizeof want,
             "--lease-ttl: '%s' is not a duration (use 500ms, 5s, 2m, 1h or bare milliseconds)",
             bad[i]);
    fails(want, arg, NULL);
  }
}
END_TEST

START_TEST(err_bad_numbers) {
  fails("--replicas: '-1' is not a whole number", "--replicas", "-1", NULL);
  fails("--replicas: '3x' is not a whole number", "--replicas", "3x", NULL);
  fails("--big: '18446744073709551616' is not a whole number", "--big", "18446744073709551616",
        NULL);
  fails("--weight: 'nan' is not a number", "--weight", "nan", NULL);
  fails("--weight: '1,5' is not a number", "--weight", "1,5", NULL);
}
END_TEST

START_TEST(err_missing_file) {
  fails("cannot read config file /nonexistent/ring.conf: No such file or directory", "--config",
        "/nonexistent/ring.conf", NULL);
  fails("cannot read config file /tmp: Is a directory", "--config", "/tmp", NULL);
}
END_TEST

START_TEST(err_config_without_file) {
  fails("--config needs a file name", "--config", NULL);
  fails("--config needs a file name", "--config=", NULL);
}
END_TEST

START_TEST(err_positional) {
  fails("unexpected argument 'extra' (options are --name VALUE)", "--cluster", "c", "extra", NULL);
  fails("unexpected argument '-x' (options are --name VALUE)", "-x", NULL);
  fails("unexpected argument '--' (options are --name VALUE)", "--", NULL);
}
END_TEST

START_TEST(err_unknown_flag) {
  fails("unknown flag --clust", "--clust", "c", NULL);
  fails("unknown flag --clusterx", "--clusterx=c", NULL);
}
END_TEST

START_TEST(err_missing_value) {
  fails("--cluster needs a value", "--cluster", NULL);
  /* a forgotten value does not swallow the next flag */
  fails("--cluster needs a value", "--cluster", "--auto-apply", NULL);
}
END_TEST

START_TEST(err_file_syntax) {
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"cluster\n", "expected 'name = value'"},
      {"= x\n", "expected 'name = value'"},
      {"clus ter = x\n", "expected 'name = value'"},
      {"cluster = \"open\n", "cluster: unterminated quote"},
      {"cluster = 'open\n", "cluster: unterminated quote"},
      {"cluster = \"a\" b\n", "cluster: text after the closing quote"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    config(cases[i].text);
    fails(at_line(1, cases[i].want), "--config", conf, NULL);
    unconfig();
  }
}
END_TEST

/* The file's good lines and earlier flags are undone: the targets hold
 * their defaults and the parser owns no string (ASan checks for leaks). */
START_TEST(err_restores_defaults) {
  config("cluster = from-file\nendpoints = e\nreplicas = 6\nweight = 3\nauto-apply = on\n");
  fails("--replicas: 9 is out of range [1, 7]", "--config", conf, "--cluster", "flag",
        "--lease-ttl", "5s", "--replicas", "9", NULL);
  unconfig();
}
END_TEST

/* The etcd block every daemon shares: its names, its values, its checks. */
START_TEST(etcd_block) {
  rd_etcd_conf c = {.timeout_ms = 5000};
  rd_opt t[RD_ETCD_OPTS + 1];
  rd_etcd_opts(&c, t);
  t[RD_ETCD_OPTS] = (rd_opt){NULL, 0, NULL, 0, 0, NULL};
  char *argv[] = {"ringd",
                  "--endpoints",
                  "https://e1:2379",
                  "--user",
                  "ring",
                  "--password-file",
                  "/p",
                  "--etcd-ca-file",
                  "/ca",
                  "--etcd-cert-file",
                  "/c",
                  "--etcd-key-file",
                  "/k",
                  "--etcd-timeout",
                  "2s"};
  ck_assert_int_eq(rd_opts_parse(15, argv, "test", t, err, sizeof err), RD_OPTS_OK);
  ck_assert_str_eq(c.endpoints, "https://e1:2379");
  ck_assert_str_eq(c.user, "ring");
  ck_assert_str_eq(c.password_file, "/p");
  ck_assert_str_eq(c.ca_file, "/ca");
  ck_assert_str_eq(c.cert_file, "/c");
  ck_assert_str_eq(c.key_file, "/k");
  ck_assert_uint_eq(c.timeout_ms, 2000);
  ck_assert_int_eq(rd_etcd_check(&c, err, sizeof err), 0);
  char *user = c.user;
  c.user = NULL;
  ck_assert_int_eq(rd_etcd_check(&c, err, sizeof err), -1);
  ck_assert_str_eq(err, "--user and --password-file go together");
  c.user = user;
  char *endpoints = c.endpoints;
  c.endpoints = NULL;
  ck_assert_int_eq(rd_etcd_check(&c, err, sizeof err), -1);
  ck_assert_str_eq(err, "--endpoints is required");
  c.endpoints = endpoints;
  rd_opts_free(t);
  ck_assert_ptr_null(c.endpoints);
}
END_TEST

/* A daemon's table is the etcd rows, then its own up to their {NULL} row:
 * no count is kept by hand. */
START_TEST(table_with_etcd) {
  rd_etcd_conf ec = {.timeout_ms = 5000};
  char *name = NULL;
  uint64_t n = 3;
  const rd_opt own[] = {{"name", RD_OPT_STRING, &name, 0, 0, "a name"},
                        {"count", RD_OPT_UINT, &n, 1, 9, "a count"},
                        {NULL, 0, NULL, 0, 0, NULL}};
  rd_opt *t = rd_opts_with_etcd(&ec, own);
  ck_assert_ptr_nonnull(t);
  ck_assert_str_eq(t[0].name, "endpoints");
  ck_assert_str_eq(t[RD_ETCD_OPTS].name, "name");
  ck_assert_str_eq(t[RD_ETCD_OPTS + 1].name, "count");
  ck_assert_ptr_null(t[RD_ETCD_OPTS + 2].name);
  char msg[256] = "";
  char *argv[] = {"d", "--endpoints", "http://127.0.0.1:1", "--name", "x", "--count", "7", NULL};
  ck_assert_int_eq(rd_opts_parse(7, argv, "d", t, msg, sizeof msg), RD_OPTS_OK);
  ck_assert_str_eq(name, "x");
  ck_assert_uint_eq(n, 7);
  ck_assert_str_eq(ec.endpoints, "http://127.0.0.1:1");
  rd_opts_release(t);
  ck_assert_ptr_null(name);
  rd_opts_release(NULL);
}
END_TEST

static Suite *opts_suite(void) {
  Suite *s = suite_create("daemon_opts");
  TCase *tc = tcase_create("opts");
  tcase_add_checked_fixture(tc, reset, teardown);
  tcase_add_test(tc, no_arguments_keep_defaults);
  tcase_add_test(tc, file_sets_every_type);
  tcase_add_test(tc, file_quotes_and_hashes);
  tcase_add_test(tc, file_empty_value);
  tcase_add_test(tc, flag_forms);
  tcase_add_test(tc, bool_flag_values);
  tcase_add_test(tc, flag_wins_over_file);
  tcase_add_test(tc, last_flag_and_last_line_win);
  tcase_add_test(tc, durations);
  tcase_add_test(tc, unbounded_uint);
  tcase_add_test(tc, free_resets_only_parsed_strings);
  tcase_add_test(tc, help_prints_usage);
  tcase_add_test(tc, err_unknown_key_names_line);
  tcase_add_test(tc, err_bad_bool_in_file);
  tcase_add_test(tc, err_bad_bool_flag);
  tcase_add_test(tc, err_out_of_range);
  tcase_add_test(tc, err_bad_duration);
  tcase_add_test(tc, err_bad_numbers);
  tcase_add_test(tc, err_missing_file);
  tcase_add_test(tc, err_config_without_file);
  tcase_add_test(tc, err_positional);
  tcase_add_test(tc, err_unknown_flag);
  tcase_add_test(tc, err_missing_value);
  tcase_add_test(tc, err_file_syntax);
  tcase_add_test(tc, err_restores_defaults);
  tcase_add_test(tc, etcd_block);
  tcase_add_test(tc, table_with_etcd);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(opts_suite()); }
