/*
 * test_scale_join.c: many real ring-agent processes on loopback (label
 * scale; not run in CI: it runs only with RING_SCALE=1 and says "skipped"
 * otherwise). RING_SCALE_AGENTS (default 100) agents in 10 zones register,
 * the coordinator places the first table, then RING_SCALE_JOIN (default
 * 10) more join and their plan is approved with `ringctl apply`. Printed:
 * for both runs the time from `apply` to the final version acked by every
 * agent, the versions published, and the etcd requests per version (the
 * etcd server's count of KV operations, and what the agents and the
 * coordinator say they sent). Fails only when a run does not finish or is
 * not acked by everybody within its deadline.
 *
 * Agents hold no data: every source answers 404 for a token nobody
 * wrote and the receiver installs it empty, so the figures are the
 * control plane's.
 */
#define _GNU_SOURCE
#include "check_main.h"
#include "etcd_client.h"
#include "etcd_harness.h"
#include "proc_harness.h"
#include "ring.h"
#include "ring_etcd.h"
#include "scale_util.h"

#include <inttypes.h>
#include <sys/stat.h>

#define CLUSTER "scale"
#define PREFIX "/ringkeeper/" CLUSTER "/"
#define MAX_AGENTS 1000

typedef struct agent {
  char id[16], listen[32], metrics[32], data[200];
  proc p;
} agent;

static etcd_cluster ec;
static ring_etcd *etcd;
static char dir[64];
static agent *agents;
static int n_agents;
static proc coord;
static char coord_listen[32];

static void stop_all(void) {
  for (int i = 0; i < n_agents; i++)
    proc_signal(&agents[i].p, SIGTERM);
  proc_signal(&coord, SIGTERM);
  for (int i = 0; i < n_agents; i++)
    if (proc_wait(&agents[i].p, 20) != 0)
      fprintf(stderr, "agent %s did not exit 0 on SIGTERM\n", agents[i].id),
          proc_kill(&agents[i].p);
  if (proc_wait(&coord, 20) != 0)
    proc_kill(&coord);
  ring_etcd_close(etcd);
  etcd_cluster_stop(&ec);
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  file_tail(coord.log, 40);
  stop_all();
  fprintf(stderr, "logs kept in %s\n", dir);
  exit(1);
}

static char *get(const char *what) { return scale_get(etcd, PREFIX, what); }
static uint64_t get_u64(const char *what) { return scale_get_u64(etcd, PREFIX, what); }
static uint32_t count(const char *what) { return scale_count(etcd, PREFIX, what); }

static void spawn_agent(int i) {
  agent *a = &agents[i];
  snprintf(a->id, sizeof a->id, "s%03d", i);
  snprintf(a->listen, sizeof a->listen, "127.0.0.1:%d", harness_free_port());
  snprintf(a->metrics, sizeof a->metrics, "127.0.0.1:%d", harness_free_port());
  snprintf(a->data, sizeof a->data, "%s/%s", dir, a->id);
  mkdir(a->data, 0755);
  char log[240], zone[16], secret[100];
  snprintf(log, sizeof log, "%s/%s.log", dir, a->id);
  snprintf(zone, sizeof zone, "z%d", i % 10);
  snprintf(secret, sizeof secret, "%s/secret", dir);
  char *argv[] = {
      RING_AGENT_BIN, "--endpoints",  ec.endpoints, "--cluster",     CLUSTER,    "--id",
      a->id,          "--listen",     a->listen,    "--metrics",     a->metrics, "--data-dir",
      a->data,        "--zone",       zone,         "--secret-file", secret,     "--lease-ttl",
      "10s",          "--drop-grace", "1s",         "--log-level",   "info",     NULL};
  if (proc_spawn(&a->p, log, argv) != 0)
    die("cannot start agent %d", i);
}

/* Waits until `n` agents are registered. An agent that exited (its free
 * port was taken meanwhile: 200+ ports are picked ahead of their bind)
 * starts again on other ports, at most 3 times. */
static void wait_alive(uint32_t n, double timeout_s) {
  double end = harness_now() + timeout_s;
  static int restarts[MAX_AGENTS];
  while (count("alive/") < n) {
    if (harness_now() > end)
      die("%u of %u agents registered after %.0f s", count("alive/"), n, timeout_s);
    for (int i = 0; i < n_agents; i++)
      if (!proc_running(&agents[i].p)) {
        if (restarts[i]++ == 3)
          die("agent %s keeps exiting; see its log", agents[i].id);
        fprintf(stderr, "agent %s exited at start; starting it again\n", agents[i].id);
        spawn_agent(i);
      }
    harness_sleep_ms(200);
  }
}

/* Whether every agent acked version v. */
static bool all_acked(uint64_t v) {
  for (int i = 0; i < n_agents; i++) {
    char what[64];
    snprintf(what, sizeof what, "acks/%s", agents[i].id);
    if (get_u64(what) < v)
      return false;
  }
  return true;
}

/* The proposed plan's id (into id[24]) once its input names `nodes` nodes. */
static void wait_proposed(int nodes, char id[24], uint32_t *moves, double timeout_s) {
  double end = harness_now() + timeout_s;
  while (!scale_proposed(etcd, PREFIX, nodes, id, moves)) {
    if (harness_now() > end)
      die("no plan for %d nodes proposed in %.0f s", nodes, timeout_s);
    harness_sleep_ms(200);
  }
}

typedef struct counts {
  double server, agents, coord;
} counts;

/* etcd's handled requests (server side), and what the daemons sent. */
static counts requests(void) {
  counts c = {0};
  char *text = scale_etcd_metrics(&ec.m[0]);
  c.server = scale_etcd_kv_ops(text);
  free(text);
  for (int i = 0; i < n_agents; i++) {
    double v = metric_get(agents[i].metrics, "ring_agent_etcd_requests_total", "");
    c.agents += isnan(v) ? 0 : v;
  }
  c.coord = metric_get(coord_listen, "ring_coordinator_etcd_requests_total", "");
  return c;
}

/* Approves plan `id`, waits until it is done and every agent acked the
 * final version; prints the figures. */
static void apply_and_measure(const char *what, const char *id, uint32_t moves) {
  uint64_t v0 = get_u64("version");
  counts c0 = requests();
  char out[2048];
  double t0 = harness_now();
  int rc = proc_runf(60, out, sizeof out, "%s --endpoints %s --cluster " CLUSTER " apply %s",
                     RINGCTL_BIN, ec.endpoints, id);
  if (rc != 0)
    die("ringctl apply %s exited %d: %s", id, rc, out);
  char hist[64];
  snprintf(hist, sizeof hist, "plan/history/%s", id);
  double end = t0 + 1200;
  char *h;
  while ((h = get(hist)) == NULL) {
    if (harness_now() > end)
      die("%s: plan %s not done in 1200 s (version %" PRIu64 ")", what, id, get_u64("version"));
    harness_sleep_ms(100);
  }
  bool done = strstr(h, "\"state\":\"done\"") != NULL;
  free(h);
  if (!done)
    die("%s: plan %s did not end done", what, id);
  double t_done = harness_now();
  uint64_t v1 = get_u64("version");
  while (!all_acked(v1)) {
    if (harness_now() > end)
      die("%s: version %" PRIu64 " not acked by every agent", what, v1);
    harness_sleep_ms(50);
  }
  double t1 = harness_now();
  counts c1 = requests();
  uint64_t versions = v1 - v0;
  double per = versions ? 1.0 / (double)versions : 0;
  printf("scale %s agents=%d moves=%u versions=%" PRIu64 " apply_to_done_s=%.2f"
         " apply_to_all_acked_s=%.2f etcd_requests=%.0f etcd_requests_per_version=%.1f"
         " agent_requests_per_version=%.1f coordinator_requests_per_version=%.1f\n",
         what, n_agents, moves, versions, t_done - t0, t1 - t0, c1.server - c0.server,
         (c1.server - c0.server) * per, (c1.agents - c0.agents) * per, (c1.coord - c0.coord) * per);
  fflush(stdout);
}

START_TEST(scale_join) {
  int first = getenv("RING_SCALE_AGENTS") ? atoi(getenv("RING_SCALE_AGENTS")) : 100;
  int join = getenv("RING_SCALE_JOIN") ? atoi(getenv("RING_SCALE_JOIN")) : 10;
  ck_assert_msg(first >= 3 && join >= 1 && first + join <= MAX_AGENTS,
                "RING_SCALE_AGENTS >= 3, RING_SCALE_JOIN >= 1, total <= %d", MAX_AGENTS);
  agents = calloc(MAX_AGENTS, sizeof *agents);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  etcd_cluster_start(&ec, 1, NULL);
  etcd = test_client(ec.endpoints, 10000, 0);
  snprintf(dir, sizeof dir, "/tmp/ringkeeper-scale-XXXXXX");
  if (mkdtemp(dir) == NULL)
    ck_abort_msg("mkdtemp: %s", strerror(errno));
  char path[128];
  snprintf(path, sizeof path, "%s/secret", dir);
  FILE *f = fopen(path, "w");
  fputs("scale-secret-0001-of-at-least-32-bytes\n", f);
  fclose(f);
  ck_assert_int_eq(chmod(path, 0600), 0); /* agents refuse a secret others may read */
  const char *config =
      "{\"format\":\"ringkeeper.config.v1\",\"tokens\":4096,\"replicas\":3,\"seed\":0,"
      "\"failure_domain\":\"zone\",\"best_effort\":\"\",\"migration\":\"stream\","
      "\"down_after_ms\":60000,\"auto_apply\":false,"
      "\"throttle\":{\"moves_per_node\":8,\"moves_per_domain\":0,\"moves_per_wave\":0,"
      "\"bytes_per_sec\":0},\"retention\":{\"versions\":16,\"plans\":32}}";
  const char *ckey = PREFIX "config";
  if (ring_etcd_put(etcd, ckey, strlen(ckey), config, strlen(config), 0, NULL, NULL, NULL) !=
      RING_OK)
    die("cannot write the config");

  double t = harness_now();
  for (n_agents = 0; n_agents < first; n_agents++)
    spawn_agent(n_agents);
  wait_alive((uint32_t)first, 120);
  printf("scale start agents=%d registered_s=%.2f\n", first, harness_now() - t);
  fflush(stdout);

  snprintf(coord_listen, sizeof coord_listen, "127.0.0.1:%d", harness_free_port());
  char clog[128];
  snprintf(clog, sizeof clog, "%s/coord.log", dir);
  char *cargv[] = {RING_COORDINATOR_BIN,
                   "--endpoints",
                   ec.endpoints,
                   "--cluster",
                   CLUSTER,
                   "--id",
                   "coord",
                   "--listen",
                   coord_listen,
                   "--lease-ttl",
                   "5s",
                   "--tick",
                   "200ms",
                   "--log-level",
                   "info",
                   NULL};
  if (proc_spawn(&coord, clog, cargv) != 0)
    die("cannot start the coordinator");
  char id[24];
  uint32_t moves = 0;
  wait_proposed(first, id, &moves, 60);
  apply_and_measure("first_placement", id, moves);

  t = harness_now();
  for (; n_agents < first + join; n_agents++)
    spawn_agent(n_agents);
  wait_alive((uint32_t)n_agents, 120);
  printf("scale join agents=%d registered_s=%.2f\n", join, harness_now() - t);
  fflush(stdout);
  wait_proposed(n_agents, id, &moves, 60);
  apply_and_measure("join", id, moves);

  stop_all();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (getenv("RING_TEST_KEEP") == NULL && system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  free(agents);
}
END_TEST

int main(void) {
  const char *on = getenv("RING_SCALE");
  if (on == NULL || strcmp(on, "1") != 0) {
    puts("skipped: set RING_SCALE=1 to start 100+ ring-agent processes");
    return 0;
  }
  Suite *s = suite_create("scale");
  TCase *tc = tcase_create("join");
  tcase_set_timeout(tc, 2400);
  tcase_add_test(tc, scale_join);
  suite_add_tcase(s, tc);
  return run_suite_as(s, 1);
}
