/*
 * test_fault_restore.c: etcd restored from an older snapshot under a
 * running cluster (e2e_cluster.h; proto/etcd.md, "A restored etcd").
 *   restored  a snapshot is saved; a join is applied and finished (the
 *             version rises); etcd is stopped, restored from the snapshot
 *             into a fresh data dir and started on the same ports, with
 *             every daemon left running. Pass:
 *             - the daemons say so: every agent's /healthz (503, the
 *               reason) and ring_agent_etcd_restored, the coordinator's
 *               /healthz and gauge, `ringctl status --json`;
 *             - a restarted agent (from its data dir) and a restarted
 *               coordinator (from the hosts' recovery reports) say so too;
 *             - nothing is dropped or moved: every host still holds the
 *               arcs it held, and no plan or table comes from the
 *               restored state;
 *             - `ringctl recover` refuses bad input: a missing report,
 *               a garbage one, an unknown --without id;
 *             - after `ringctl recover --yes` the table is above every
 *               version seen and matches what hosts hold, the daemons
 *               follow again, `ringctl verify` is clean and a later join
 *               completes with the data intact.
 */
#include "e2e_cluster.h"

#include <dirent.h>

static const e2e_opts opts = {.per_node = 8, .per_wave = 32, .keys = 600};

#define NODES 3 /* n0..n2 at first; n3 joins before the restore, n4 after recover */

/* The tokens whose arcs slot i holds, as bits (arcs/<token>/ directories). */
static uint32_t held_bits(int i, uint8_t *bits, uint32_t tokens);

/* Whether every host still holds exactly the arcs of before[host]. */
static bool arcs_kept(uint8_t before[][RING_TOKENS_MAX / 8], uint32_t T) {
  static uint8_t now[RING_TOKENS_MAX / 8];
  for (int i = 0; i <= NODES; i++) {
    held_bits(i, now, T);
    if (memcmp(before[i], now, T / 8) != 0) {
      fprintf(stderr, "host %d's arcs changed\n", i);
      return false;
    }
  }
  return true;
}

static uint32_t held_bits(int i, uint8_t *bits, uint32_t tokens) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/arcs", env.a[i].data);
  memset(bits, 0, tokens / 8);
  DIR *d = opendir(dir);
  uint32_t n = 0;
  for (struct dirent *e = d ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
    char *end;
    unsigned long t = strtoul(e->d_name, &end, 10);
    if (*end == '\0' && e->d_name[0] != '\0' && t < tokens) {
      bits[t / 8] = (uint8_t)(bits[t / 8] | (1u << (t % 8)));
      n++;
    }
  }
  if (d)
    closedir(d);
  return n;
}

/* /healthz of a host:port: its status, the body into body[cap]. */
static long healthz(const char *hostport, char *body, size_t cap) {
  char url[64], *b = NULL;
  snprintf(url, sizeof url, "http://%s/healthz", hostport);
  long st = http_get(url, &b);
  snprintf(body, cap, "%s", b ? b : "");
  free(b);
  return st;
}

/* The gauge, and /healthz 503 naming both counters that went back
 * ("etcd history went back: version 33 -> 1, revision R1 -> R2"). */
static bool agent_restored(int i) {
  char body[512];
  bool ok = env_metric(i, "ring_agent_etcd_restored") == 1 &&
            healthz(env.a[i].metrics, body, sizeof body) == 503 &&
            strstr(body, "etcd history went back: version ") != NULL &&
            strstr(body, ", revision ") != NULL;
  if (ok && i == 0)
    fprintf(stderr, "n0 /healthz: %s", body);
  return ok;
}

static bool coord_restored(void) {
  char body[512];
  return healthz(w.coord_listen[0], body, sizeof body) != 200 &&
         strstr(body, "etcd history went back") != NULL &&
         metric_get(w.coord_listen[0], "ring_coordinator_etcd_restored", "") == 1;
}

static bool status_restored(bool want) {
  cJSON *j = e2e_status_json();
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "etcd_restored");
  bool is = cJSON_IsObject(r);
  if (is && want)
    fprintf(stderr, "status: %s\n", cJSON_GetObjectItemCaseSensitive(r, "why")->valuestring);
  bool ok = j != NULL && is == want;
  cJSON_Delete(j);
  return ok;
}

static bool reported(const char *id) {
  char what[64];
  snprintf(what, sizeof what, "recovery/%s", id);
  char *v = env_get(what);
  free(v);
  return v != NULL;
}

/* Every slot of the table in service is owned by a host holding the arc. */
static void table_matches_holdings(uint32_t tokens) {
  static uint8_t held[ENV_AGENTS][RING_TOKENS_MAX / 8];
  for (int i = 0; i <= NODES; i++)
    held_bits(i, held[i], tokens);
  ring_table *t = e2e_table();
  ck_assert_ptr_nonnull(t);
  for (uint32_t tok = 0; tok < ring_table_tokens(t); tok++)
    for (uint32_t s = 0; s < ring_table_replicas(t); s++) {
      int i = e2e_slot(ring_table_node_id(t, ring_table_owner(t, tok, s)));
      ck_assert_msg(i >= 0 && (held[i][tok / 8] >> (tok % 8)) & 1u,
                    "token %u slot %u: owner %s does not hold it", tok, s,
                    ring_table_node_id(t, ring_table_owner(t, tok, s)));
    }
  ring_table_free(t);
}

/* recover refuses a missing report, a garbage one and an unknown id. */
static void recover_refuses(void) {
  char out[8192];
  char *mine = env_get("recovery/n1");
  ck_assert_ptr_nonnull(mine);
  ck_assert_int_eq(etcdctl(&env.etcd, "del " ENV_PREFIX "recovery/n1"), 0);
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "recover --yes"), 1);
  ck_assert_msg(strstr(out, "n1") && strstr(out, "no recovery report"), "%s", out);
  env_put("recovery/n1", "{\"format\":\"ringkeeper.recovery.v1\",\"seen_version\":\"x\"}");
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "recover --yes"), 1);
  ck_assert_msg(strstr(out, "recovery/n1") && strstr(out, "no recovery report"), "%s", out);
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "recover --yes --without nobody"), 2);
  env_put("recovery/n1", mine);
  free(mine);
}

START_TEST(restored) {
  e2e_bootstrap(&opts, NODES, 1);
  char snap[300], id[24];
  snprintf(snap, sizeof snap, "%s/before-join.db", env.dir);
  ck_assert_int_eq(etcd_snapshot_save(&env.etcd, 0, snap), 0);
  uint64_t low = e2e_version();
  e2e_join(NODES, "n3", id);
  e2e_finish(id, false);
  uint64_t high = e2e_version();
  uint32_t T = w.o.tokens;
  static uint8_t before[ENV_AGENTS][RING_TOKENS_MAX / 8];
  for (int i = 0; i <= NODES; i++)
    ck_assert_uint_gt(held_bits(i, before[i], T), 0);
  fprintf(stderr, "restoring etcd to the snapshot of version %" PRIu64 " (now %" PRIu64 ")\n", low,
          high);
  ck_assert(etcd_member_restore(&env.etcd, 0, snap));
  ck_assert_uint_eq(e2e_version(), low);

  for (int i = 0; i <= NODES; i++)
    ck_assert_msg(ENV_WAIT(agent_restored(i), 20), "agent %d does not report the restore", i);
  ck_assert_msg(ENV_WAIT(coord_restored(), 20), "the coordinator does not report the restore");
  ck_assert_msg(ENV_WAIT(status_restored(true), 10), "ringctl status does not show the restore");
  for (int i = 0; i <= NODES; i++)
    ck_assert_msg(ENV_WAIT(reported(env.a[i].id), 10), "no recovery/%s", env.a[i].id);

  /* Restarted daemons find it again: the agent from its data dir, the
   * coordinator from the hosts' reports. */
  e2e_node_stop(2);
  e2e_node_start(2, "n2", NULL);
  ck_assert_msg(ENV_WAIT(agent_restored(2), 10), "a restarted agent forgot the restore");
  ck_assert_int_eq(proc_term(&w.coord[0], 15), 0);
  e2e_coord_start(0);
  ck_assert_msg(ENV_WAIT(coord_restored(), 20), "a restarted coordinator misses the restore");

  /* three drop graces: anything dropped would be gone by then */
  ck_assert_msg(HARNESS_HOLDS(arcs_kept(before, T) && e2e_version() == low && !e2e_active(), 3.0),
                "arcs changed or the version moved after the restore");
  char *p = env_get("plan/proposed"), *a = env_get("plan/active");
  ck_assert_msg(p == NULL && a == NULL, "a plan from the restored state: %s %s", p ? p : "",
                a ? a : "");

  recover_refuses();
  char out[8192];
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "recover --json"), 0); /* shows, writes nothing */
  cJSON *plan = cJSON_Parse(out);
  ck_assert_msg(plan != NULL, "%s", out);
  ck_assert(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(plan, "published")));
  ck_assert(cJSON_GetObjectItemCaseSensitive(plan, "version")->valuedouble == (double)(high + 1));
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(plan, "lost")), 0);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(plan, "missing")), 0);
  cJSON_Delete(plan);
  ck_assert_uint_eq(e2e_version(), low);
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "recover --yes"), 0);
  uint64_t v = e2e_version();
  ck_assert_msg(v > high, "recovered at %" PRIu64 ", not above %" PRIu64, v, high);
  ck_assert_msg(ENV_WAIT(e2e_acked_all(v), 20), "not every agent follows version %" PRIu64, v);
  for (int i = 0; i <= NODES; i++)
    ck_assert_msg(ENV_WAIT(env_metric(i, "ring_agent_etcd_restored") == 0, 10),
                  "agent %d still restored", i);
  ck_assert_msg(ENV_WAIT(!coord_restored(), 10), "the coordinator is still restored");
  ck_assert(status_restored(false));
  table_matches_holdings(T);
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "verify"), 0);

  e2e_join(NODES + 1, "n4", id);
  e2e_finish(id, false);
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault_restore");
  e2e_add(s, "restored", 1, 240, restored);
  return run_suite_as(s, 1);
}
