/*
 * test_ringctl_simulate.c: `ringctl simulate` end to end: runs the built
 * binary (RINGCTL_PATH, set by tests/unit/CMakeLists.txt) through popen and
 * checks its exit codes, messages and JSON.
 *
 * Sections: running ringctl; the JSON of the default run (shape, modulo,
 * fixed tokens, ring balance, bounded loads, Maglev, sticky bounded loads,
 * weighted rendezvous); other sizes and determinism;
 * usage errors; help.
 *
 * The default run (8 nodes, 100000 keys) is made once, in an unchecked
 * fixture, and its JSON shared by the tests that read it: each run costs a
 * planner placement of 65536 tokens and three bounded-load replays.
 */
#define _POSIX_C_SOURCE 200809L /* popen, pclose */
#include "check_main.h"

#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifndef RINGCTL_PATH
#error "RINGCTL_PATH must name the built ringctl (tests/unit/CMakeLists.txt sets it)"
#endif

/* ------------------------------------------------------- running ringctl */

/* What one run printed and how it ended. */
typedef struct run_result {
  int exit_code; /* -1 if ringctl did not exit normally */
  char *out;     /* the captured stream, NUL-terminated; free() it */
} run_result;

/* Reads all of f into a malloc()'ed string. */
static char *slurp(FILE *f) {
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  ck_assert_ptr_nonnull(buf);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (cap - len - 1 == 0) {
      buf = realloc(buf, cap *= 2);
      ck_assert_ptr_nonnull(buf);
    }
  }
  buf[len] = '\0';
  return buf;
}

/* Which stream a run captures. */
typedef enum capture {
  STDOUT,       /* stderr passes through to the test's, for diagnosis */
  STDOUT_QUIET, /* stderr dropped */
  STDERR        /* stdout dropped */
} capture;

/* Runs `ringctl ARGS` and captures one stream. Arguments go through sh:
 * tests pass plain words. */
static run_result run(const char *args, capture c) {
  static const char *const redirect[] = {"", "2>/dev/null", "2>&1 >/dev/null"};
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' %s %s", RINGCTL_PATH, args, redirect[c]);
  FILE *p = popen(cmd, "r");
  ck_assert_msg(p != NULL, "popen %s", cmd);
  run_result r = {-1, slurp(p)};
  int status = pclose(p);
  if (status != -1 && WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  return r;
}

/* Runs `ringctl ARGS`, expects exit 0 and JSON on stdout; returns it parsed
 * (cJSON_Delete it). */
static cJSON *run_json(const char *args) {
  run_result r = run(args, STDOUT);
  ck_assert_msg(r.exit_code == 0, "ringctl %s: exit %d", args, r.exit_code);
  cJSON *j = cJSON_Parse(r.out);
  ck_assert_msg(j != NULL, "ringctl %s: not JSON: %.200s", args, r.out);
  free(r.out);
  return j;
}

/* -------------------------------------------------- the default run's JSON */

static cJSON *default_run; /* `simulate --nodes 8 --keys 100000 --json` */

/* Unchecked fixture: runs once in the parent, before the forked tests. A
 * failure leaves default_run NULL and every test reading it fails. */
static void default_run_setup(void) {
  FILE *p = popen("'" RINGCTL_PATH "' simulate --nodes 8 --keys 100000 --json", "r");
  if (p == NULL)
    return;
  char *out = slurp(p);
  int status = pclose(p);
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    default_run = cJSON_Parse(out);
  free(out);
}

static void default_run_teardown(void) {
  cJSON_Delete(default_run);
  default_run = NULL;
}

static const cJSON *root(void) {
  ck_assert_msg(default_run != NULL, "ringctl simulate --json did not run or parse");
  return default_run;
}

static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  ck_assert_msg(cJSON_IsNumber(v), "\"%s\" is missing or not a number", key);
  return v->valuedouble;
}

/* The system object with this name and vnodes (0: no "vnodes" key). */
static const cJSON *find_system(const cJSON *j, const char *name, int vnodes) {
  const cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "systems")) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "vnodes");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 &&
        (vnodes == 0 ? v == NULL : cJSON_IsNumber(v) && v->valueint == vnodes))
      return s;
  }
  ck_abort_msg("no system %s (vnodes %d)", name, vnodes);
  return NULL;
}

/* The entry for a cap in the array `key` ("bounded_loads", or
 * "bounded_loads_sticky": the same caps with hysteresis and sticky map). */
static const cJSON *find_cap_in(const cJSON *j, const char *key, double cap) {
  const cJSON *b;
  cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(j, key)) {
    if (fabs(num(b, "cap") - cap) < 1e-9)
      return b;
  }
  ck_abort_msg("no %s entry for cap %.2f", key, cap);
  return NULL;
}

static const cJSON *find_cap(const cJSON *j, double cap) {
  return find_cap_in(j, "bounded_loads", cap);
}

static const cJSON *find_sticky(const cJSON *j, double cap) {
  return find_cap_in(j, "bounded_loads_sticky", cap);
}

/* Every key of o is one of `allowed` (NULL-terminated). */
static void only_keys(const cJSON *o, const char *const *allowed) {
  const cJSON *item;
  cJSON_ArrayForEach(item, o) {
    bool ok = false;
    for (const char *const *k = allowed; *k != NULL; k++)
      ok = ok || strcmp(item->string, *k) == 0;
    ck_assert_msg(ok, "unexpected key \"%s\"", item->string);
  }
}

START_TEST(test_json_shape) {
  const cJSON *j = root();
  static const char *const top[] = {"nodes",
                                    "keys",
                                    "ideal_moved_fraction",
                                    "systems",
                                    "bounded_loads",
                                    "bounded_loads_sticky",
                                    "weighted_rendezvous",
                                    NULL};
  static const char *const sys[] = {
      "name",          "vnodes", "moved_fraction", "moved_fraction_leave", "max_over_mean",
      "min_over_mean", NULL};
  static const char *const bl[] = {"cap",   "affinity",      "affinity_held",
                                   "churn", "max_over_mean", NULL};
  only_keys(j, top);
  ck_assert_double_eq(num(j, "nodes"), 8);
  ck_assert_double_eq(num(j, "keys"), 100000);
  ck_assert_double_eq_tol(num(j, "ideal_moved_fraction"), 1.0 / 9, 1e-6);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "systems")), 9);
  const cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "systems")) {
    only_keys(s, sys);
    ck_assert_double_ge(num(s, "moved_fraction"), 0);
    ck_assert_double_le(num(s, "moved_fraction"), 1);
    ck_assert_double_ge(num(s, "max_over_mean"), 1);
    ck_assert_double_le(num(s, "min_over_mean"), 1);
  }
  static const char *const names[] = {"modulo", "rendezvous", "jump", "maglev", "fixed-tokens"};
  for (size_t i = 0; i < 5; i++)
    find_system(j, names[i], 0);
  static const int vnodes[] = {1, 10, 100, 500};
  for (size_t i = 0; i < 4; i++)
    find_system(j, "ring", vnodes[i]);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "bounded_loads")), 2);
  only_keys(find_cap(j, 1.05), bl);
  only_keys(find_cap(j, 1.25), bl);
}
END_TEST

/* hash % 8 vs hash % 9: a key stays only when both agree, 1/9 of the time. */
START_TEST(test_modulo_moves_most) {
  const cJSON *m = find_system(root(), "modulo", 0);
  ck_assert_double_eq_tol(num(m, "moved_fraction"), 8.0 / 9, 0.01);
}
END_TEST

/* The acceptance: within 0.5 points of 1/9, max/mean <= 1.03. */
START_TEST(test_fixed_tokens_near_ideal) {
  const cJSON *f = find_system(root(), "fixed-tokens", 0);
  ck_assert_double_eq_tol(num(f, "moved_fraction"), 1.0 / 9, 0.005);
  ck_assert_double_eq_tol(num(f, "moved_fraction_leave"), 1.0 / 8, 0.005);
  ck_assert_double_le(num(f, "max_over_mean"), 1.03);
  ck_assert_double_ge(num(f, "min_over_mean"), 0.97);
}
END_TEST

/* One point per node cuts the circle unevenly; 500 average it out. */
START_TEST(test_ring_vnodes_balance) {
  const cJSON *v1 = find_system(root(), "ring", 1), *v500 = find_system(root(), "ring", 500);
  ck_assert_double_gt(num(v1, "max_over_mean"), num(v500, "max_over_mean") + 0.5);
  ck_assert_double_lt(num(v1, "min_over_mean"), num(v500, "min_over_mean") - 0.3);
  ck_assert_double_le(num(v500, "max_over_mean"), 1.15);
}
END_TEST

/* A tighter cap gives a flatter load and less affinity. The cap is
 * ceil(c * (total + 1) / n), so max/mean may pass c by a rounding step. */
START_TEST(test_bounded_loads_trade) {
  const cJSON *tight = find_cap(root(), 1.05), *loose = find_cap(root(), 1.25);
  ck_assert_double_le(num(tight, "max_over_mean"), 1.05 + 0.02);
  ck_assert_double_le(num(loose, "max_over_mean"), 1.25 + 0.02);
  ck_assert_double_lt(num(tight, "max_over_mean"), num(loose, "max_over_mean"));
  ck_assert_double_lt(num(tight, "affinity"), num(loose, "affinity"));
  ck_assert_double_gt(num(tight, "affinity"), 0.5);
  ck_assert_double_le(num(loose, "affinity"), 1);
}
END_TEST

/* Maglev rebuilds its table whole on a join, so a few keys move between
 * nodes that stayed: more than 1/9, but near it; M = 65537 >> 100 N keeps
 * entries per node within one of each other, so keys are as even as
 * rendezvous'. */
START_TEST(test_maglev_join) {
  const cJSON *m = find_system(root(), "maglev", 0);
  ck_assert_double_ge(num(m, "moved_fraction"), 1.0 / 9 - 0.005);
  ck_assert_double_le(num(m, "moved_fraction"), 1.0 / 9 + 0.03);
  ck_assert_double_eq_tol(num(m, "moved_fraction_leave"), 1.0 / 8, 0.03);
  ck_assert_double_le(num(m, "max_over_mean"), 1.03);
  ck_assert_double_ge(num(m, "min_over_mean"), 0.97);
}
END_TEST

/* On the same stream and cap, the sticky map and hysteresis send fewer
 * repeated requests elsewhere than the plain rule, keep more requests
 * where their key's state is, and still hold the cap. */
START_TEST(test_sticky_less_churn) {
  static const double caps[] = {1.05, 1.25};
  for (size_t i = 0; i < 2; i++) {
    const cJSON *plain = find_cap(root(), caps[i]), *sticky = find_sticky(root(), caps[i]);
    ck_assert_double_gt(num(plain, "churn"), 0);
    ck_assert_double_lt(num(sticky, "churn"), num(plain, "churn"));
    ck_assert_double_gt(num(sticky, "affinity_held"), num(plain, "affinity_held"));
    ck_assert_double_le(num(sticky, "max_over_mean"), caps[i] + 0.02);
    ck_assert_double_gt(num(sticky, "margin"), 0);
    ck_assert_double_gt(num(sticky, "sticky_capacity"), 0);
  }
  /* The looser cap spills less, so it churns less. */
  ck_assert_double_lt(num(find_sticky(root(), 1.25), "churn"),
                      num(find_sticky(root(), 1.05), "churn"));
}
END_TEST

/* The seed's figure: weight 3 of a total 10 takes 30% of keys, measured
 * within a point (the seed printed 29.9% with blake2b over 50000 keys).
 * Removing a node never changes a key's other replicas. */
START_TEST(test_weighted_rendezvous) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root(), "weighted_rendezvous");
  ck_assert_int_eq(cJSON_GetArraySize(a), 2);
  const cJSON *h;
  cJSON_ArrayForEach(h, a) {
    ck_assert_double_eq_tol(num(h, "ideal_share"), 0.30, 1e-9);
    ck_assert_double_eq_tol(num(h, "node0_share"), 0.30, 0.01);
    ck_assert_double_le(num(h, "max_share_error"), 0.01);
    ck_assert_double_eq(num(h, "replicas"), 3);
    ck_assert_double_eq(num(h, "kept_moved_fraction_leave"), 0);
    ck_assert_double_gt(num(h, "moved_fraction_leave"), 0);
  }
  const cJSON *seed = cJSON_GetArrayItem(a, 0);
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(seed, "weights")->valuestring,
                   "3,1,1,1,1,1,1,1");
  ck_assert_double_eq_tol(num(seed, "seed_share"), 0.299, 1e-9);
  ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(a, 1), "seed_share"));
}
END_TEST

/* --------------------------------------- other sizes and determinism */

/* Same arguments, same bytes, in both output formats. */
START_TEST(test_deterministic) {
  static const char *const args[] = {"simulate --nodes 5 --keys 3000 --tokens 256 --json",
                                     "simulate --nodes 5 --keys 3000 --tokens 256"};
  for (size_t i = 0; i < 2; i++) {
    run_result a = run(args[i], STDOUT), b = run(args[i], STDOUT);
    ck_assert_int_eq(a.exit_code, 0);
    ck_assert_int_eq(b.exit_code, 0);
    ck_assert_str_eq(a.out, b.out);
    free(a.out);
    free(b.out);
  }
}
END_TEST

/* One node: nothing can leave, so no leave figure; everything is balanced. */
START_TEST(test_single_node) {
  cJSON *j = run_json("simulate --nodes 1 --keys 500 --tokens 64 --json");
  const cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "systems")) {
    ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(s, "moved_fraction_leave"));
    ck_assert_double_eq(num(s, "max_over_mean"), 1);
  }
  ck_assert_double_eq_tol(num(j, "ideal_moved_fraction"), 0.5, 1e-9);
  cJSON_Delete(j);
}
END_TEST

/* Global options are accepted before and after the command. */
START_TEST(test_global_options) {
  cJSON *j = run_json("--cluster c1 --endpoints http://127.0.0.1:2379 simulate --nodes 3 "
                      "--keys 100 --tokens 64 --json");
  ck_assert_double_eq(num(j, "nodes"), 3);
  cJSON_Delete(j);
  j = run_json("--json simulate --nodes 3 --keys 100 --tokens=64 --cluster=c1");
  ck_assert_double_eq(num(j, "keys"), 100);
  cJSON_Delete(j);
}
END_TEST

/* ----------------------------------------------------------- usage errors */

static const struct {
  const char *args;    /* after "ringctl" */
  const char *message; /* expected in stderr */
} usage_cases[] = {
    {"simulate --nodes 0", "--nodes must be in [1, 10000], got 0"},
    {"simulate --nodes x", "--nodes: \"x\" is not a whole number"},
    {"simulate --nodes 10001", "--nodes must be in [1, 10000]"},
    {"simulate --nodes -1", "--nodes: \"-1\" is not a whole number"},
    {"simulate --nodes", "--nodes needs a value"},
    {"simulate --keys 0", "--keys must be in [1, 100000000]"},
    {"simulate --keys 100000001", "--keys must be in [1, 100000000]"},
    {"simulate --tokens 100", "--tokens must be a power of two"},
    {"simulate --tokens 32", "--tokens must be in [64, 65536]"},
    {"simulate --tokens 131072", "--tokens must be in [64, 65536]"},
    {"simulate --frobnicate", "unknown option --frobnicate"},
    {"simulate -n 3", "unknown option -n"},
    {"simulate --json=yes", "--json takes no value"},
    {"simulate extra", "unexpected argument \"extra\""},
    {"frobnicate", "unknown command \"frobnicate\""},
    {"--frobnicate simulate", "unknown option --frobnicate"},
    {"", "Usage: ringctl"},
};

/* Exit 2, the message on stderr, nothing on stdout. */
START_TEST(test_usage_error) {
  const char *args = usage_cases[_i].args;
  run_result err = run(args, STDERR);
  ck_assert_msg(err.exit_code == 2, "ringctl %s: exit %d", args, err.exit_code);
  ck_assert_msg(strstr(err.out, usage_cases[_i].message) != NULL,
                "ringctl %s: stderr lacks \"%s\":\n%s", args, usage_cases[_i].message, err.out);
  run_result out = run(args, STDOUT_QUIET);
  ck_assert_int_eq(out.exit_code, 2);
  ck_assert_msg(out.out[0] == '\0', "ringctl %s wrote to stdout:\n%s", args, out.out);
  free(err.out);
  free(out.out);
}
END_TEST

/* ------------------------------------------------------------------- help */

START_TEST(test_help) {
  static const struct {
    const char *args, *text;
  } cases[] = {
      {"--help", "Usage: ringctl"},
      {"-h", "simulate"},
      {"help", "Exit codes"},
      {"simulate --help", "--nodes N"},
      {"help simulate", "Usage: ringctl simulate"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_result r = run(cases[i].args, STDOUT);
    ck_assert_msg(r.exit_code == 0, "ringctl %s: exit %d", cases[i].args, r.exit_code);
    ck_assert_msg(strstr(r.out, cases[i].text) != NULL, "ringctl %s: no \"%s\" in:\n%s",
                  cases[i].args, cases[i].text, r.out);
    free(r.out);
  }
}
END_TEST

static Suite *simulate_suite(void) {
  Suite *s = suite_create("ringctl_simulate");
  TCase *json = tcase_create("default_run");
  tcase_set_timeout(json, 300);
  tcase_add_unchecked_fixture(json, default_run_setup, default_run_teardown);
  tcase_add_test(json, test_json_shape);
  tcase_add_test(json, test_modulo_moves_most);
  tcase_add_test(json, test_fixed_tokens_near_ideal);
  tcase_add_test(json, test_ring_vnodes_balance);
  tcase_add_test(json, test_bounded_loads_trade);
  tcase_add_test(json, test_maglev_join);
  tcase_add_test(json, test_sticky_less_churn);
  tcase_add_test(json, test_weighted_rendezvous);
  suite_add_tcase(s, json);

  TCase *runs = tcase_create("runs");
  tcase_set_timeout(runs, 300);
  tcase_add_test(runs, test_deterministic);
  tcase_add_test(runs, test_single_node);
  tcase_add_test(runs, test_global_options);
  suite_add_tcase(s, runs);

  TCase *usage = tcase_create("usage");
  tcase_set_timeout(usage, 120);
  tcase_add_loop_test(usage, test_usage_error, 0,
                      (int)(sizeof usage_cases / sizeof usage_cases[0]));
  tcase_add_test(usage, test_help);
  suite_add_tcase(s, usage);
  return s;
}

int main(void) { return run_suite(simulate_suite()); }
