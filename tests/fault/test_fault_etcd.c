/*
 * test_fault_etcd.c: etcd fails during an apply, on a whole cluster
 * (e2e_cluster.h). A reader (ring-kv-load) reads keys all along: ring-kv
 * serves from its last table whatever etcd does.
 *   member_killed  a 3-member etcd; kill -9 one member (a different one
 *                  per run, printed) during the apply: the daemons go on
 *                  with the other two and the run finishes.
 *   all_down       a 1-member etcd killed for 10 s during the apply (every
 *                  lease, the coordinators' and the agents', is lost in
 *                  it), then started again on its data: leases, watches
 *                  and the run resume and the run finishes.
 *   frozen         a 1-member etcd stopped (SIGSTOP): the leading
 *                  coordinator's calls hang, yet within its lease TTL
 *                  (2 s) and a margin it says everywhere that it does not
 *                  lead (the gauge, /healthz, the status page); thawed,
 *                  it leads again.
 */
#include "e2e_cluster.h"

static const e2e_opts opts = {.per_node = 4, .per_wave = 8};

/* Whether coordinator k says it leads. */
static bool leads(int k) {
  return metric_get(w.coord_listen[k], "ring_coordinator_leader", "") == 1;
}

/* Whether every lease is gone: no coordinator leads, and each of the
 * agents (n0..n4) has counted its lease lost. */
static bool leases_gone(void) {
  for (int i = 0; i < 5; i++)
    if (!(env_metric(i, "ring_agent_leases_lost_total") >= 1))
      return false;
  return !leads(0) && !leads(1);
}

START_TEST(member_killed) {
  e2e_bootstrap(&opts, 4, 2);
  e2e_reader_start();
  char id[24];
  uint64_t v0 = e2e_version();
  e2e_join(4, "n4", id);
  ck_assert_msg(ENV_WAIT(e2e_version() >= v0 + 2, 30), "the join does not move");
  int m = (int)(time(NULL) % 3);
  fprintf(stderr, "kill -9 etcd member %d at version %" PRIu64 "\n", m, e2e_version());
  etcd_member_signal(&env.etcd, m, SIGKILL);
  e2e_finish(id, false);
  ck_assert(etcd_member_restart(&env.etcd, m));
  e2e_reader_check();
  env_pass();
}
END_TEST

START_TEST(all_down) {
  e2e_bootstrap(&opts, 4, 2);
  e2e_reader_start();
  char id[24];
  uint64_t v0 = e2e_version();
  e2e_join(4, "n4", id);
  ck_assert_msg(ENV_WAIT(e2e_version() >= v0 + 2, 30), "the join does not move");
  uint64_t v = e2e_version();
  fprintf(stderr, "etcd down for 10 s at version %" PRIu64 "\n", v);
  double down = harness_now();
  etcd_member_signal(&env.etcd, 0, SIGKILL);
  /* down for 10 s: past every lease (2 s), and nobody leads throughout */
  ck_assert_msg(ENV_WAIT(leases_gone(), 10), "a lease outlived etcd");
  ck_assert(HARNESS_HOLDS(!leads(0) && !leads(1), down + 10 - harness_now()));
  ck_assert(etcd_member_restart(&env.etcd, 0));
  fprintf(stderr, "etcd back; version %" PRIu64 "\n", e2e_version());
  e2e_finish(id, false);
  e2e_reader_check();
  env_pass();
}
END_TEST

/* Whether coordinator k says, everywhere it says it, that it does not
 * lead: the gauge 0, /healthz 503 naming the lease, the page's role. */
static bool says_not_leader(int k) {
  if (metric_get(w.coord_listen[k], "ring_coordinator_leader", "") != 0)
    return false;
  char url[96], *body = NULL;
  snprintf(url, sizeof url, "http://%s/healthz", w.coord_listen[k]);
  bool health = http_get(url, &body) == 503 && body != NULL && strstr(body, "lease lapsed");
  free(body);
  body = NULL;
  snprintf(url, sizeof url, "http://%s/status.json", w.coord_listen[k]);
  bool page = http_get(url, &body) == 200 && body != NULL && strstr(body, "\"role\":\"follower\"");
  free(body);
  return health && page;
}

START_TEST(frozen) {
  static const e2e_opts quiet = {.no_data = true};
  e2e_bootstrap(&quiet, 2, 1);
  ck_assert_msg(ENV_WAIT(leads(0), 10), "coord-a does not lead");
  double froze = harness_now();
  etcd_member_signal(&env.etcd, 0, SIGSTOP);
  /* its last keep-alive went at most a third of the TTL before: the lease
   * may outlive the freeze by 2 s at most; 1 s of margin for the checks */
  bool stepped = ENV_WAIT(says_not_leader(0), 3.0);
  double took = harness_now() - froze;
  etcd_member_signal(&env.etcd, 0, SIGCONT);
  fprintf(stderr, "figure: not leader %.2f s after etcd froze (lease TTL 2 s)\n", took);
  ck_assert_msg(stepped, "coord-a still says it leads %.1f s after etcd froze", took);
  ck_assert_msg(ENV_WAIT(leads(0), 30), "coord-a does not lead again after etcd thawed");
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault_etcd");
  e2e_add(s, "member_killed", 3, 300, member_killed);
  e2e_add(s, "all_down", 1, 300, all_down);
  e2e_add(s, "frozen", 1, 120, frozen);
  return run_suite_as(s, 1);
}
