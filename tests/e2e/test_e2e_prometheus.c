/*
 * test_e2e_prometheus.c: the rules in deploy/prometheus/ against a real
 * Prometheus scraping a whole cluster (e2e_cluster.h: real etcd, a
 * ring-coordinator with --stuck-after 3s, ring-agents with a ring-kv each,
 * a data set), all on loopback:
 *   - Prometheus (/usr/bin/prometheus, from deploy/install-deps.sh) starts
 *     on a free port with its storage in the test's directory, scraping
 *     every daemon each second and evaluating both rule files each second;
 *   - after a join is approved, every ring_* metric either rule file names
 *     has a series (/api/v1/series), and every rule evaluates without an
 *     error (/api/v1/rules);
 *   - the join's receiver is frozen (SIGSTOP) mid-run: RingkeeperMovesStuck
 *     goes to firing (/api/v1/alerts) once the coordinator's --stuck-after
 *     and the alert's `for` have passed; thawed (SIGCONT), the run
 *     completes, the alert resolves and the final check holds.
 *
 * The alert file's `for:` durations are production-sized (minutes): the
 * test loads a copy with every `for:` rewritten to FOR_TEST, and the
 * recording rules as they are. Without Prometheus the test is skipped
 * (exit 77) unless RING_REQUIRE_PROMETHEUS is set (tests/run.sh sets it),
 * when it fails.
 */
#include "e2e_cluster.h"

#define PROMETHEUS "/usr/bin/prometheus"
#define FOR_TEST "2s"   /* every alert's `for:` in the test's copy */
#define NAMES_MAX 96    /* distinct ring_* names the rule files and the dashboard use */
#define RULES_MAX 65536 /* bytes of one rule file (both are under 10 KB) */

#ifndef RING_PROM_RULES_DIR
#error "deploy/prometheus's path: tests/e2e/CMakeLists.txt"
#endif

static proc prom;
static char prom_url[64]; /* http://127.0.0.1:<port> */

/* ------------------------------------------------------- the rule files */

/* The text of deploy/prometheus/<name> (malloc()'ed); fails the test when
 * it is missing or over RULES_MAX. */
static char *rules_read(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", RING_PROM_RULES_DIR, name);
  char *text = file_slurp(path);
  ck_assert_msg(text[0] != '\0' && strlen(text) < RULES_MAX, "%s: missing, or over %d bytes", path,
                RULES_MAX);
  return text;
}

static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Adds every ring_* metric name in text to names[0..*n) (once each): a
 * token that starts with "ring_" after a character that cannot be part of a
 * name, and does not end in '_' (a prefix in prose). */
static void metric_names(const char *text, char names[][64], int *n) {
  for (const char *p = strstr(text, "ring_"); p != NULL; p = strstr(p + 1, "ring_")) {
    if (p > text && (name_char(p[-1]) || p[-1] == ':'))
      continue;
    size_t len = 0;
    while (name_char(p[len]))
      len++;
    if (len >= 64 || p[len - 1] == '_')
      continue;
    int i = 0;
    while (i < *n && !(strncmp(names[i], p, len) == 0 && names[i][len] == '\0'))
      i++;
    if (i < *n)
      continue;
    ck_assert_int_lt(*n, NAMES_MAX);
    memcpy(names[*n], p, len);
    names[(*n)++][len] = '\0';
  }
}

/* The alert file with every `for: <duration>` line given FOR_TEST, written
 * to path. */
static void write_fast_alerts(const char *path) {
  char *text = rules_read("ringkeeper-alerts.yml");
  FILE *f = fopen(path, "w");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  int rewritten = 0;
  for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
    next = strchr(line, '\n');
    size_t len = next != NULL ? (size_t)(next - line) : strlen(line);
    next = next != NULL ? next + 1 : NULL;
    size_t indent = strspn(line, " ");
    if (strncmp(line + indent, "for: ", 5) == 0) {
      fprintf(f, "%.*sfor: " FOR_TEST "\n", (int)indent, line);
      rewritten++;
    } else {
      fprintf(f, "%.*s\n", (int)len, line);
    }
  }
  ck_assert_int_eq(fclose(f), 0);
  free(text);
  ck_assert_int_gt(rewritten, 0);
}

/* ------------------------------------------------------------ Prometheus */

static void prom_stop(void) {
  if (proc_running(&prom) && proc_term(&prom, 15) != 0)
    fprintf(stderr, "prometheus did not stop on SIGTERM\n");
  proc_kill(&prom);
  memset(&prom, 0, sizeof prom);
}

/* GETs <prom_url><path> and parses the answer; NULL unless it is 200 with
 * "status":"success". cJSON_Delete it. */
static cJSON *prom_api(const char *path) {
  char url[512], *body = NULL;
  snprintf(url, sizeof url, "%s%s", prom_url, path);
  long code = http_get(url, &body);
  cJSON *j = code == 200 && body != NULL ? cJSON_Parse(body) : NULL;
  free(body);
  const cJSON *status = cJSON_GetObjectItemCaseSensitive(j, "status");
  if (j != NULL && !(cJSON_IsString(status) && strcmp(status->valuestring, "success") == 0)) {
    cJSON_Delete(j);
    j = NULL;
  }
  return j;
}

/* Writes the config (scrapes and rule files) into the test's directory and
 * starts Prometheus on a free loopback port; waits up to 30 s until it
 * is ready. */
static void prom_start(void) {
  char cfg[256], alerts[256], data[256], log[256];
  snprintf(cfg, sizeof cfg, "%s/prometheus.yml", env.dir);
  snprintf(alerts, sizeof alerts, "%s/alerts-fast.yml", env.dir);
  snprintf(data, sizeof data, "%s/prometheus-data", env.dir);
  snprintf(log, sizeof log, "%s/prometheus.log", env.dir);
  write_fast_alerts(alerts);
  FILE *f = fopen(cfg, "w");
  ck_assert_msg(f != NULL, "%s: %s", cfg, strerror(errno));
  fprintf(f,
          "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
          "rule_files: ['%s', '%s/ringkeeper-rules.yml']\n"
          "scrape_configs:\n"
          "  - job_name: ring-coordinator\n"
          "    static_configs: [{targets: ['%s']}]\n"
          "  - job_name: ring-agent\n"
          "    static_configs: [{targets: [",
          alerts, RING_PROM_RULES_DIR, w.coord_listen[0]);
  const char *sep = "";
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.a[i].used) {
      fprintf(f, "%s'%s'", sep, env.a[i].metrics);
      sep = ", ";
    }
  fprintf(f, "]}]\n");
  ck_assert_int_eq(fclose(f), 0);

  int port = harness_free_port();
  snprintf(prom_url, sizeof prom_url, "http://127.0.0.1:%d", port);
  char a_cfg[300], a_data[300], a_listen[64];
  snprintf(a_cfg, sizeof a_cfg, "--config.file=%s", cfg);
  snprintf(a_data, sizeof a_data, "--storage.tsdb.path=%s", data);
  snprintf(a_listen, sizeof a_listen, "--web.listen-address=127.0.0.1:%d", port);
  char *argv[] = {PROMETHEUS, a_cfg, a_data, a_listen, "--log.level=warn", NULL};
  ck_assert_int_eq(proc_spawn(&prom, log, argv), 0);
  char ready[96];
  snprintf(ready, sizeof ready, "%s/-/ready", prom_url);
  bool up = ENV_WAIT(http_get(ready, NULL) == 200 || !proc_running(&prom), 30);
  if (!up || !proc_running(&prom))
    file_tail(log, 30);
  ck_assert_msg(up && proc_running(&prom), "prometheus did not get ready in 30 s");
}

/* Runs before e2e_teardown (fixtures unwind in reverse): nothing stays
 * frozen or running whatever failed, and a failure shows Prometheus' log. */
static void prom_teardown(void) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.a[i].used && proc_running(&env.a[i].p))
      proc_signal(&env.a[i].p, SIGCONT);
  if (prom.pid != 0 && !env.passed) {
    char log[256];
    snprintf(log, sizeof log, "%s/prometheus.log", env.dir);
    file_tail(log, 30);
  }
  prom_stop();
}

/* ------------------------------------------------------------- the checks */

/* Whether /api/v1/series has a series named `name`. */
static bool has_series(const char *name) {
  char path[160];
  snprintf(path, sizeof path, "/api/v1/series?match%%5B%%5D=%s", name);
  cJSON *j = prom_api(path);
  bool yes = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "data")) > 0;
  cJSON_Delete(j);
  return yes;
}

/* Rules loaded from both files, and how many evaluated with health "ok";
 * the first one in error into why[256]. */
static void rules_health(int *rules, int *ok, char why[256]) {
  *rules = *ok = 0;
  why[0] = '\0';
  cJSON *j = prom_api("/api/v1/rules");
  const cJSON *groups =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "data"), "groups");
  const cJSON *g, *r;
  cJSON_ArrayForEach(g, groups) {
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(g, "rules")) {
      const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "health");
      const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "lastError");
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(r, "name");
      bool good = cJSON_IsString(h) && strcmp(h->valuestring, "ok") == 0;
      (*rules)++;
      *ok += good;
      if (!good && why[0] == '\0' && cJSON_IsString(name))
        snprintf(why, 256, "%s: %s", name->valuestring,
                 cJSON_IsString(e) ? e->valuestring : "not evaluated yet");
    }
  }
  cJSON_Delete(j);
}

/* The state of alert `name` in /api/v1/alerts: "firing", "pending", or ""
 * when Prometheus lists none. */
static void alert_state(const char *name, char state[16]) {
  state[0] = '\0';
  cJSON *j = prom_api("/api/v1/alerts");
  const cJSON *alerts =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "data"), "alerts");
  const cJSON *a;
  cJSON_ArrayForEach(a, alerts) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "labels"),
                                                      "alertname");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(a, "state");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 && cJSON_IsString(s) &&
        strcmp(state, "firing") != 0)
      snprintf(state, 16, "%s", s->valuestring);
  }
  cJSON_Delete(j);
}

static bool alert_is(const char *name, const char *want) {
  char state[16];
  alert_state(name, state);
  return strcmp(state, want) == 0;
}

/* Every ring_* name of both rule files and of the Grafana dashboard has a
 * series, within 30 s of the daemons being scraped; every rule evaluates
 * cleanly; every daemon's series carry its cluster, and each kind of daemon
 * scraped exports its build_info. */
static void check_metrics_exist(void) {
  static char names[NAMES_MAX][64];
  int n = 0;
  const char *files[] = {"ringkeeper-alerts.yml", "ringkeeper-rules.yml",
                         "../grafana/ringkeeper.json"};
  for (int k = 0; k < 3; k++) {
    char *text = rules_read(files[k]);
    metric_names(text, names, &n);
    free(text);
  }
  ck_assert_int_ge(n, 20); /* a scanner that finds nothing proves nothing */
  for (int i = 0; i < n; i++) {
    ck_assert_msg(ENV_WAIT(has_series(names[i]), 30),
                  "the rules or the dashboard use %s, which no daemon exports (no series in 30 s)",
                  names[i]);
  }
  ck_assert_msg(has_series("ring_coordinator_build_info") && has_series("ring_agent_build_info"),
                "a daemon exports no build_info");
  /* {__name__=~"ring_.+",cluster=""}: a ring_* series without the label */
  ck_assert_msg(!has_series("%7B__name__%3D~%22ring_.%2B%22%2Ccluster%3D%22%22%7D"),
                "a ring_* series has no cluster label");
  int rules, ok;
  char why[256];
  ck_assert_msg(ENV_WAIT((rules_health(&rules, &ok, why), rules > 0 && ok == rules), 30),
                "%d of %d rules evaluate cleanly; first not: %s", ok, rules, why);
  fprintf(stderr,
          "%d ring_* metrics the rules and the dashboard use all have series; %d rules evaluate "
          "cleanly\n",
          n, rules);
}

/* ------------------------------------------------------------------ tests */

START_TEST(alerts_on_a_live_cluster) {
  /* A byte limit keeps the join long enough to freeze its receiver in the
   * middle; down_after far beyond the test, so the frozen agent (whose
   * lease lapses) is only lost, never down, and the run waits for it. */
  const e2e_opts o = {.bytes_per_sec = 8000, .down_after_ms = 600000};
  e2e_bootstrap_with(&o, 3, 1, NULL, "--stuck-after 3s");
  e2e_node_start(3, "n3", NULL);
  prom_start();
  double t0 = harness_now();
  char id[24];
  e2e_apply(id, 30);
  check_metrics_exist();
  fprintf(stderr, "metrics checked %.1f s after prometheus started\n", harness_now() - t0);

  /* mid-run: n3 has fetched some arcs, not all; nothing is stuck */
  ck_assert_msg(ENV_WAIT(env_metric(3, "ring_agent_arcs_fetched_total") > 0, 30),
                "n3 fetched nothing in 30 s");
  ck_assert_msg(e2e_active(), "the join ended before its receiver could be frozen");
  ck_assert_msg(!alert_is("RingkeeperMovesStuck", "firing"), "moves stuck before any fault");
  proc_signal(&env.a[3].p, SIGSTOP);
  double frozen = harness_now();
  fprintf(stderr, "SIGSTOP n3 at version %" PRIu64 "\n", e2e_version());
  ck_assert_msg(ENV_WAIT(alert_is("RingkeeperMovesStuck", "firing"), 60),
                "RingkeeperMovesStuck is not firing 60 s after the receiver froze");
  fprintf(stderr, "RingkeeperMovesStuck firing %.1f s after SIGSTOP (--stuck-after 3s, for %s)\n",
          harness_now() - frozen, FOR_TEST);
  ck_assert_msg(e2e_active(), "the run ended while its receiver was frozen");

  /* thawed: the run completes and the alert resolves */
  proc_signal(&env.a[3].p, SIGCONT);
  double thawed = harness_now();
  ck_assert_msg(ENV_WAIT(alert_is("RingkeeperMovesStuck", ""), 120),
                "RingkeeperMovesStuck still listed 120 s after SIGCONT");
  fprintf(stderr, "RingkeeperMovesStuck resolved %.1f s after SIGCONT\n", harness_now() - thawed);
  e2e_finish(id, false);
  prom_stop();
  env_pass();
}
END_TEST

int main(void) {
  if (access(PROMETHEUS, X_OK) != 0) {
    if (getenv("RING_REQUIRE_PROMETHEUS") != NULL) {
      fprintf(stderr, "FAIL: " PROMETHEUS " is missing and RING_REQUIRE_PROMETHEUS is set\n");
      return 1;
    }
    fprintf(stderr, "SKIP: " PROMETHEUS " is missing (deploy/install-deps.sh installs it; set "
                    "RING_REQUIRE_PROMETHEUS to make this a failure)\n");
    return 77;
  }
  Suite *s = suite_create("e2e_prometheus");
  TCase *tc = e2e_tcase("alerts_on_a_live_cluster", 1, 400);
  tcase_add_checked_fixture(tc, NULL, prom_teardown); /* runs before e2e_teardown */
  tcase_add_test(tc, alerts_on_a_live_cluster);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1);
}
