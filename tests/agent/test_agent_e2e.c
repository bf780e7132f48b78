/*
 * test_agent_e2e.c: ring-coordinator and real ring-agents, end to end.
 * Three agents in three zones; the coordinator (auto-apply) places the
 * first table; every owner then holds its arcs. A fourth agent joins: the
 * coordinator plans, publishes pending versions wave by wave, waits for the
 * agents' acks and progress, and cuts over. At the end every token's
 * owners hold its arc byte for byte as written, and old owners have
 * dropped what they no longer own after the 1 s grace, saying so in one
 * info line per batch (count and bytes), the line per arc at debug.
 */
#include "test_agent_env.h"

#ifdef RING_COORDINATOR_BIN

#define R 2
#define ARC_FILES 2
#define ARC_SIZE 3000

static proc coord;
static char coord_listen[32];

static void coord_start(void) {
  snprintf(coord_listen, sizeof coord_listen, "127.0.0.1:%d", harness_free_port());
  char log[200], line[1024], *argv[PROC_ARGS_MAX];
  snprintf(log, sizeof log, "%s/coord.log", env.dir);
  snprintf(line, sizeof line,
           "%s --endpoints %s --cluster " ENV_CLUSTER
           " --id coord --listen %s --lease-ttl 2s --tick 200ms --auto-apply --log-level debug",
           RING_COORDINATOR_BIN, env.etcd.endpoints, coord_listen);
  env_argv(line, argv);
  ck_assert_int_eq(proc_spawn(&coord, log, argv), 0);
}

/* The info lines summing up agent i's drops ("version V: N arcs dropped
 * after the grace (B bytes)"); fails on a per-arc line above debug. */
static int drop_summaries(int i) {
  char *log = file_slurp(env.a[i].log);
  int n = 0;
  for (char *line = log ? strtok(log, "\n") : NULL; line != NULL; line = strtok(NULL, "\n")) {
    bool info = strstr(line, "level=info") != NULL;
    if (strstr(line, "msg=\"arc dropped after the grace\""))
      ck_assert_msg(!info, "a line per dropped arc at info: %s", line);
    if (info && strstr(line, " dropped after the grace (") && strstr(line, " bytes)"))
      n++;
  }
  free(log);
  return n;
}

/* Whether agent i summed up its drops: a line when it dropped any, never
 * more lines than arcs (the summary follows the batch: waited for). */
static bool drops_summed(int i) {
  double dropped = env_metric(i, "ring_agent_arcs_dropped_total");
  int lines = drop_summaries(i);
  return lines <= dropped && (lines > 0) == (dropped > 0);
}

/* Whether the cluster has settled on a table of n nodes, every one owning
 * something, with no run active and nothing pending. */
static bool settled(uint32_t n) {
  char *active = env_get("plan/active");
  free(active);
  if (active != NULL)
    return false;
  ring_table *t = env_current_table();
  bool ok = t && ring_table_node_count(t) == n && ring_table_pending_count(t) == 0;
  for (uint16_t i = 0; ok && i < n; i++)
    ok = ring_table_node_replicas(t, i) > 0;
  ring_table_free(t);
  return ok;
}

/* Agent slot of table node i (ids are the agents'). */
static int slot_of(const ring_table *t, uint16_t node) {
  for (int i = 0; i < ENV_AGENTS; i++)
    if (env.a[i].used && strcmp(env.a[i].id, ring_table_node_id(t, node)) == 0)
      return i;
  ck_abort_msg("node %s is not one of the test's agents", ring_table_node_id(t, node));
  return -1;
}

static bool owns(const ring_table *t, int slot, uint32_t token) {
  for (uint32_t r = 0; r < R; r++)
    if (slot_of(t, ring_table_owner(t, token, r)) == slot)
      return true;
  return false;
}

/* Every agent holds exactly the tokens it owns. */
static bool holdings_match(const ring_table *t, int agents) {
  for (int i = 0; i < agents; i++)
    for (uint32_t tok = 0; tok < ENV_TOKENS; tok++)
      if (env_arc_has(i, tok) != owns(t, i, tok))
        return false;
  return true;
}

START_TEST(join_moves_arcs_byte_for_byte) {
  char json[600];
  snprintf(json, sizeof json,
           "{\"format\":\"ringkeeper.config.v1\",\"tokens\":%u,\"replicas\":%u,\"seed\":0,"
           "\"failure_domain\":\"zone\",\"best_effort\":\"\",\"migration\":\"stream\","
           "\"down_after_ms\":60000,\"auto_apply\":true,"
           "\"throttle\":{\"moves_per_node\":3,\"moves_per_domain\":0,\"moves_per_wave\":8,"
           "\"bytes_per_sec\":0},\"retention\":{\"versions\":64,\"plans\":32}}",
           ENV_TOKENS, R);
  env_put("config", json);
  const char *ids[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 3; i++)
    env_agent_start(i, ids[i], NULL);
  coord_start();
  ck_assert_msg(ENV_WAIT(settled(3), 60), "no first placement");

  /* Every owner holds its arcs (the same bytes on every replica). */
  ring_table *t = env_current_table();
  for (uint32_t tok = 0; tok < ENV_TOKENS; tok++)
    for (uint32_t r = 0; r < R; r++)
      env_arc_write(slot_of(t, ring_table_owner(t, tok, r)), tok, ARC_FILES, ARC_SIZE, 77);
  uint64_t v1 = ring_table_version(t);
  ring_table_free(t);

  env_agent_start(3, ids[3], NULL);
  ck_assert_msg(ENV_WAIT(settled(4), 120), "the join did not finish");
  t = env_current_table();
  ck_assert_uint_gt(ring_table_version(t), v1 + 1); /* pending versions, then cutovers */
  ck_assert_msg(ENV_WAIT(holdings_match(t, 4), 15), "arcs held do not match the table");
  for (uint32_t tok = 0; tok < ENV_TOKENS; tok++)
    for (uint32_t r = 0; r < R; r++) {
      int s = slot_of(t, ring_table_owner(t, tok, r));
      ck_assert_msg(env_arc_valid(s, tok, ARC_FILES, ARC_SIZE, 77), "token %u on %s differs", tok,
                    env.a[s].id);
    }
  ck_assert_double_ge(env_metric(3, "ring_agent_arcs_fetched_total"),
                      ring_table_node_replicas(t, (uint16_t)ring_table_find_node(t, "d")));
  ck_assert_double_gt(env_metric(0, "ring_agent_arcs_dropped_total") +
                          env_metric(1, "ring_agent_arcs_dropped_total") +
                          env_metric(2, "ring_agent_arcs_dropped_total"),
                      0);
  for (int i = 0; i < 3; i++) /* a summary per batch: fewer lines than arcs dropped */
    ck_assert_msg(ENV_WAIT(drops_summed(i), 5), "agent %d: %d drop summaries for %.0f arcs dropped",
                  i, drop_summaries(i), env_metric(i, "ring_agent_arcs_dropped_total"));
  ring_table_free(t);
  ck_assert_int_eq(proc_term(&coord, 15), 0);
  env_pass();
}
END_TEST

static void coord_teardown(void) {
  if (coord.pid > 0 && !env.passed)
    file_tail(coord.log, 80);
  proc_kill(&coord);
}

static Suite *suite(void) {
  Suite *s = suite_create("agent_e2e");
  TCase *tc = env_tcase("join", 240);
  tcase_add_checked_fixture(tc, NULL, coord_teardown);
  tcase_add_test(tc, join_moves_arcs_byte_for_byte);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite_as(suite(), 1); }

#else /* no ring-coordinator in this build */

int main(void) {
  puts("ring-coordinator is not built: the end-to-end test has nothing to run");
  return 0;
}

#endif
