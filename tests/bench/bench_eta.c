/*
 * bench_eta.c: a plan's ETA against the time its run takes, on a whole
 * cluster on loopback (tests/e2e/e2e_cluster.h, e2e_eta_case: etcd, a
 * coordinator, four nodes of ring-agent + ring-kv, one zone each, R 3,
 * T 1024, 2,000 keys) with 256 moves a step and the byte limit at 40 x the
 * value size per agent:
 *   drain        n0 drained: its 768 token-replicas go to the three
 *                others, each token to the one node without a replica of
 *                it, streamed from n0; values of 1000 bytes;
 *   repair       n0 killed: the same receivers, streamed from the live
 *                replicas; values of 1000 bytes;
 *   drain_small  the drain with values of 100 bytes (arcs of ~300 bytes):
 *                where each fetch's own cost, not modelled, shows.
 * Printed per case: the ETA (plan_eta.c: the run's steps), the node that
 * bounds it, the busiest receiver's share alone (the estimate before steps
 * were modelled) and the time `apply --wait` took. Figures only: it fails
 * when the cluster does, never on time.
 *
 * Usage: bench_eta   (CK_RUN_CASE=drain, repair or drain_small for one)
 */
#include "e2e_cluster.h"

static void report(const char *name, bool repair, uint32_t value_size) {
  e2e_eta e;
  e2e_eta_case(repair, value_size, &e);
  printf(
      "bench_eta case=%s value_bytes=%u eta_s=%.1f bound=\"%s\" busiest_share_s=%.1f took_s=%.1f "
      "off=%+.0f%%\n",
      name, value_size, e.eta, e.bound, e.ideal, e.took, 100 * (e.took - e.eta) / e.eta);
  env_pass();
}

START_TEST(drain) { report("drain", false, 1000); }
END_TEST

START_TEST(repair) { report("repair", true, 1000); }
END_TEST

START_TEST(drain_small) { report("drain_small", false, 100); }
END_TEST

int main(void) {
  Suite *s = suite_create("bench_eta");
  e2e_add(s, "drain", 1, 600, drain);
  e2e_add(s, "repair", 1, 600, repair);
  e2e_add(s, "drain_small", 1, 600, drain_small);
  return run_suite_as(s, 1);
}
