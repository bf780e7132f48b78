/*
 * test_coord_retention.c: etcd's size stays bounded. With retention of 3
 * versions and 2 plans and a pass every second, runs that publish dozens of
 * versions leave at most 3 tables and deltas behind the current version
 * (plus the active run's base), at most 2 history entries, and etcd's
 * history compacted: a read at the first revision is refused. The delta
 * carried next to `version` (version/delta) stays one key, equal to the
 * current version's deltas/<v>.
 */
#include "coord_env.h"

/* Keys under <prefix><dir>. */
static uint32_t count_keys(const char *dir) {
  char prefix[256];
  int len = snprintf(prefix, sizeof prefix, "/ringkeeper/%s/%s", ENV_CLUSTER, dir);
  ring_range_opts ro = {.prefix = true, .count_only = true};
  ring_kvs r;
  ring_error err = {0};
  ck_assert_msg(ring_etcd_range(env.c, prefix, (size_t)len, &ro, &r, &err) == RING_OK, "%s",
                err.message);
  uint32_t n = (uint32_t)r.count;
  ring_kvs_clear(&r);
  return n;
}

/* Replicas of node id in the current table (0 when absent). */
static uint32_t env_table_replicas(const char *id) {
  ring_table *t = env_table(0);
  uint32_t n = t ? env_replicas(t, id) : 0;
  ring_table_free(t);
  return n;
}

/* Whether etcd still serves a read at `revision`. */
static bool revision_readable(int64_t revision) {
  char key[256];
  int len = snprintf(key, sizeof key, "/ringkeeper/%s/config", ENV_CLUSTER);
  ring_range_opts ro = {.revision = revision};
  ring_kvs r;
  int rc = ring_etcd_range(env.c, key, (size_t)len, &ro, &r, NULL);
  if (rc == RING_OK)
    ring_kvs_clear(&r);
  return rc == RING_OK;
}

/* Waits until no run is active or proposed and `id` holds `replicas` (the
 * history cannot count runs here: retention trims it to 2). */
static void wait_settled(const char *id, int replicas) {
  env_run a;
  WAIT_UNTIL(!env_active(&a) && !env_exists("plan/proposed") &&
                 (replicas < 0 || env_table_replicas(id) == (uint32_t)replicas),
             120, "no settled table with %s at %d replicas (version %llu)", id, replicas,
             (unsigned long long)env_version());
}

START_TEST(tables_history_and_revisions_stay_bounded) {
  env_config k = {.tokens = 256,
                  .replicas = 3,
                  .auto_apply = true,
                  .per_wave = 8,
                  .keep_versions = 3,
                  .keep_plans = 2};
  uint64_t v1 = env_bootstrap(&k, 4, 3, 1, "--auto-apply --compact-every 1s");
  ck_assert(revision_readable(1));
  /* three runs: a join, a weight change, a drain; each many versions long */
  env_agent("a5", "z1");
  wait_settled("a5", 128);
  ck_assert_int_eq(env_ringctl(NULL, 0, "weight a5 2"), 0);
  WAIT_UNTIL(env_table_replicas("a5") >= 170, 120, "a5 (weight 2 of 3 in z1) never reached 170");
  wait_settled("a5", -1);
  ck_assert_int_eq(env_ringctl(NULL, 0, "drain a2"), 0);
  wait_settled("a2", 0);
  uint64_t v = env_version();
  ck_assert_uint_gt(v, v1 + 10);
  WAIT_UNTIL(
      count_keys("tables/") <= 3 && count_keys("deltas/") <= 3 && count_keys("plan/history/") <= 2,
      10, "after version %llu: %u tables, %u deltas, %u history entries", (unsigned long long)v,
      count_keys("tables/"), count_keys("deltas/"), count_keys("plan/history/"));
  WAIT_UNTIL(!revision_readable(1), 10, "etcd still serves revision 1: nothing was compacted");
  /* version/delta is one key, overwritten by each publish in the txn that
   * writes deltas/<v>: the same bytes, at the version key's revision */
  char dname[32];
  snprintf(dname, sizeof dname, "deltas/%llu", (unsigned long long)v);
  int64_t carried_mod, delta_mod, version_mod;
  char *carried = env_get("version/delta", &carried_mod), *delta = env_get(dname, &delta_mod);
  free(env_get("version", &version_mod));
  ck_assert_ptr_nonnull(carried);
  ck_assert_ptr_nonnull(delta);
  ck_assert_str_eq(carried, delta);
  ck_assert_int_eq(carried_mod, version_mod);
  ck_assert_uint_eq(count_keys("version"), 2); /* version and version/delta, nothing more */
  free(carried);
  free(delta);
  /* what remains is the newest: the current table reads and verifies */
  ring_table *t = env_verify_clean();
  ck_assert_uint_eq(ring_table_version(t), v);
  ring_table_free(t);
  env_pass();
}
END_TEST

int main(void) {
  const env_test tests[] = {{tables_history_and_revisions_stay_bounded, 400}};
  return env_main("coord_retention", tests, 1);
}
