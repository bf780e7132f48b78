/*
 * test_coord_versions.c: versions do not grow with moves / throttle. A
 * single-node join in a cluster of 100 fake agents (T 4096, R 3, ten
 * zones, the default limits: 4 moves per node, 256 per wave) publishes at
 * most 8 versions, though the new node takes ~120 token-replicas and may
 * fetch only 4 at a time: the version names them all pending, the agent
 * paces its fetches, and one cutover follows. The table after it verifies
 * clean and balanced, and every agent acks it.
 */
#include "coord_env.h"

START_TEST(join_at_100_hosts_in_few_versions) {
  env_config k = {.tokens = 4096,
                  .replicas = 3,
                  .down_after_ms = 60000,
                  .auto_apply = true,
                  .per_node = 4,
                  .per_wave = 256};
  uint64_t v1 = env_bootstrap(&k, 100, 10, 1, "--auto-apply");
  env_agent("a101", "z3");
  env_run join = env_wait_done(2, 120);
  uint64_t v2 = env_version();
  printf("join at 100 hosts: %.0f moves (lower bound %.0f) in %llu versions; the per-node limit "
         "4 alone would have taken %.0f\n",
         join.moves_total, join.lower_bound, (unsigned long long)(v2 - v1),
         2 * ceil(join.moves_total / 4));
  ck_assert_double_eq(join.moves_total, join.lower_bound);
  ck_assert_double_gt(join.moves_total, 100);
  ck_assert_msg(v2 - v1 <= 8, "the join published %llu versions, at most 8 wanted",
                (unsigned long long)(v2 - v1));
  ring_table *t = env_verify_clean();
  env_assert_balanced(t);
  ck_assert_uint_eq(env_replicas(t, "a101"), (uint32_t)join.moves_total);
  ring_table_free(t);
  WAIT_UNTIL(env_all_acked(v2), 20, "not every agent acked v%llu", (unsigned long long)v2);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{join_at_100_hosts_in_few_versions, 300}};
  return env_main("coord_versions", tests, 1);
}
