/*
 * test_fault_wiped.c: owners prove they hold their data, on a whole
 * cluster (e2e_cluster.h). An agent restarted under its id on an empty
 * data dir reports the token-replicas it owns and lacks in missing/<id>;
 * the coordinator and ringctl name them; the agent refills them from the
 * other owners, byte for byte, with no human step once the cluster's
 * auto-apply policy allows repairs (these clusters start at `none`, where
 * the refill waits, reported, until `ringctl auto-apply repair`). Tokens no owner holds
 * any more are lost: named, never installed empty, until the operator
 * accepts the loss.
 *   refill_from_survivors  R=2, 3 nodes, a data set; n1's disk wiped
 *                          (kill -9, empty data dir, same id): within one
 *                          check period status --json and verify name its
 *                          missing replicas and the coordinator's /healthz
 *                          is degraded; at policy none nothing is fetched;
 *                          `ringctl auto-apply repair`, and the refill
 *                          (throttled, so it can be seen) brings every arc
 *                          back identical to the other owner's; reports
 *                          clear; the final check.
 *   lost_until_accepted    R=2, 3 nodes; n1 and n2 wiped together: tokens
 *                          only they owned are lost (status, verify,
 *                          /healthz) and stay absent on both while the
 *                          others are refilled; a ring-kv write to one of
 *                          them is staged (no arc made), a read refused;
 *                          accept-loss --lost installs them empty, every
 *                          report clears and the staged write is served.
 *   bad_missing_record     garbage and an oversized missing/ value from one
 *                          host: the coordinator keeps stepping, status
 *                          names the host, and nothing is counted missing.
 *
 * Every wait is bounded; figures go to stderr.
 */
#include "e2e_cluster.h"

#include <curl/curl.h>

#define CHECK_PERIOD_S 5 /* agent_own.c's CHECK_EVERY_MS */
#define TOKENS_CAP 256   /* T of these tests */

/* ------------------------------------------------------------- helpers */

/* Kills slot i's node and empties its data dir (a replaced disk). The
 * node's key is not on that disk (deploy/PRODUCTION.md, "Wiped or replaced
 * disk": --key-file off the data disk), so it is kept aside and put back;
 * a host that loses its key too comes back as a changed key, which waits
 * for `ringctl trust` (test_fault_trust changed_key). */
static void wipe(int i) {
  e2e_node_kill(i);
  char cmd[1600];
  snprintf(cmd, sizeof cmd,
           "mv '%s/node.key' '%s.key' && rm -rf '%s' && mkdir '%s' && mv '%s.key' '%s/node.key'",
           env.a[i].data, env.a[i].data, env.a[i].data, env.a[i].data, env.a[i].data,
           env.a[i].data);
  ck_assert_int_eq(system(cmd), 0);
}

/* The "missing" object of `ringctl status --json`: replicas reported
 * missing for host (-1: all), and how many tokens are lost. */
static void status_missing(const char *host, double *replicas, double *lost) {
  *replicas = *lost = -1;
  cJSON *j = e2e_status_json();
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "missing");
  const cJSON *h, *hosts = cJSON_GetObjectItemCaseSensitive(m, "hosts");
  if (m != NULL) {
    *replicas = host ? 0 : cJSON_GetObjectItemCaseSensitive(m, "replicas")->valuedouble;
    *lost = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "lost"));
  }
  cJSON_ArrayForEach(h, hosts) {
    if (host && strcmp(cJSON_GetObjectItemCaseSensitive(h, "host")->valuestring, host) == 0)
      *replicas = cJSON_GetObjectItemCaseSensitive(h, "count")->valuedouble;
  }
  cJSON_Delete(j);
}

/* Whether no lost token has an arc on n1 or n2. */
static bool none_of(const uint32_t *lost, uint32_t n_lost) {
  for (uint32_t k = 0; k < n_lost; k++)
    if (env_arc_has(1, lost[k]) || env_arc_has(2, lost[k])) {
      fprintf(stderr, "lost token %u has an arc on n1 or n2\n", lost[k]);
      return false;
    }
  return true;
}

static double missing_of(const char *host) {
  double r, l;
  status_missing(host, &r, &l);
  return r;
}

static double lost_now(void) {
  double r, l;
  status_missing(NULL, &r, &l);
  return l;
}

/* The leading coordinator's /healthz: its status, the body into out. */
static long coord_health(char *out, size_t cap) {
  char url[64], *body = NULL;
  snprintf(url, sizeof url, "http://%s/healthz", w.coord_listen[0]);
  long st = http_get(url, &body);
  snprintf(out, cap, "%s", body ? body : "");
  free(body);
  return st;
}

/* Whether slot i's arc of token is byte for byte slot j's. */
static bool same_arc(int i, int j, uint32_t token) {
  char cmd[900];
  snprintf(cmd, sizeof cmd, "diff -rq '%s/arcs/%u' '%s/arcs/%u' >/dev/null 2>&1", env.a[i].data,
           token, env.a[j].data, token);
  return system(cmd) == 0;
}

/* Whether slot i holds arcs/<token>/ and it is empty. */
static bool arc_empty(int i, uint32_t token) {
  char cmd[900];
  snprintf(cmd, sizeof cmd, "test -d '%s/arcs/%u' && test -z \"$(ls -A '%s/arcs/%u')\"",
           env.a[i].data, token, env.a[i].data, token);
  return system(cmd) == 0;
}

/* PUT value at key on slot i's ring-kv; returns the HTTP status. */
static long kv_put(int i, const char *key, const char *value) {
  char url[128];
  snprintf(url, sizeof url, "http://%s/v1/kv/%s", w.kv_listen[i], key);
  CURL *h = curl_easy_init();
  ck_assert_ptr_nonnull(h);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, value);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
  long status = 0;
  if (curl_easy_perform(h) == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  return status;
}

/* GET key from slot i's ring-kv: the status, the body into out. */
static long kv_get(int i, const char *key, char *out, size_t cap) {
  char url[128], *body = NULL;
  snprintf(url, sizeof url, "http://%s/v1/kv/%s", w.kv_listen[i], key);
  long st = http_get(url, &body);
  snprintf(out, cap, "%s", body ? body : "");
  free(body);
  return st;
}

/* A key whose token is `token` in the table in service, into key[32]. */
static void key_of(uint32_t token, char key[32]) {
  ring_table *t = e2e_table();
  ck_assert_ptr_nonnull(t);
  bool found = false;
  for (uint32_t i = 0; i < 1000000 && !found; i++) { /* T = 256: a few hundred tries */
    snprintf(key, 32, "wiped-%u", i);
    found = ring_table_token(t, key, strlen(key)) == token;
  }
  ring_table_free(t);
  ck_assert(found);
}

/* The owner of token other than slot i's node, as a slot. */
static int other_owner(const ring_table *t, int i, uint32_t token) {
  for (uint32_t r = 0; r < ring_table_replicas(t); r++) {
    int s = e2e_slot(ring_table_node_id(t, ring_table_owner(t, token, r)));
    if (s != i)
      return s;
  }
  return -1;
}

/* ----------------------------------------------- refill_from_survivors */

START_TEST(refill_from_survivors) {
  /* about 60 KB on n1, refilled at 12 KB/s: seconds, long enough to see */
  const e2e_opts o = {.replicas = 2, .keys = 600, .bytes_per_sec = 12000};
  e2e_bootstrap(&o, 3, 1);
  static uint32_t tokens[TOKENS_CAP];
  uint32_t n = e2e_tokens_of("n1", tokens, TOKENS_CAP);
  ck_assert_uint_gt(n, 0);
  wipe(1);
  double t0 = harness_now();
  e2e_node_start(1, "n1", NULL); /* waits out the killed agent's lease first */
  double up = harness_now();
  ck_assert_msg(ENV_WAIT(missing_of("n1") > 0, CHECK_PERIOD_S),
                "status does not name n1's missing replicas within one check period");
  double seen = harness_now() - up, first = missing_of("n1");
  fprintf(stderr,
          "n1 wiped: %.0f of its %u token-replicas reported missing %.1f s after it answered "
          "(%.1f s after the restart began)\n",
          first, n, seen, harness_now() - t0);
  char out[8192];
  int rc = e2e_ringctl(out, sizeof out, "verify");
  ck_assert_msg(rc == 1 && strstr(out, "n1 reports"), "verify -> %d: %.500s", rc, out);
  long hs = 0;
  ck_assert_msg(ENV_WAIT((hs = coord_health(out, sizeof out)) == 503 &&
                             strstr(out, "token-replicas missing (n1: "),
                         5),
                "coordinator /healthz %ld: %.300s", hs, out);

  /* policy none: the refill waits for the operator's word */
  ck_assert_msg(HARNESS_HOLDS(missing_of("n1") == first &&
                                  env_metric(1, "ring_agent_arcs_refilled_total") == 0 &&
                                  env_metric(1, "ring_agent_bytes_in_total") == 0,
                              2.0 * CHECK_PERIOD_S),
                "n1 refilled without the operator's word");
  ck_assert_int_eq(e2e_ringctl(NULL, 0, "auto-apply repair"), 0);

  /* repairs allowed: no further human step, the refill brings every arc back */
  ck_assert_msg(ENV_WAIT(missing_of("n1") == 0, 60), "n1 still reports %.0f missing",
                missing_of("n1"));
  fprintf(stderr, "refilled in %.1f s: %.0f arcs, %.0f bytes in\n", harness_now() - t0,
          env_metric(1, "ring_agent_arcs_refilled_total"),
          env_metric(1, "ring_agent_bytes_in_total"));
  ck_assert_double_eq(env_metric(1, "ring_agent_losses_accepted_total"), 0);
  ring_table *t = e2e_table();
  uint32_t same = 0;
  for (uint32_t k = 0; k < n; k++) {
    int s = other_owner(t, 1, tokens[k]);
    if (s >= 0 && same_arc(1, s, tokens[k]))
      same++;
    else
      fprintf(stderr, "token %u: n1's arc differs from the other owner's\n", tokens[k]);
  }
  ring_table_free(t);
  ck_assert_uint_eq(same, n);
  ck_assert_msg(ENV_WAIT(coord_health(out, sizeof out) == 200, 10), "coordinator: %.300s", out);
  char *rec = env_get("missing/n1");
  ck_assert_msg(rec == NULL, "missing/n1 not deleted once empty: %.200s",
                rec); /* leaks on failure only */
  e2e_check(false);
  env_pass();
}
END_TEST

/* ------------------------------------------------ lost_until_accepted */

START_TEST(lost_until_accepted) {
  const e2e_opts o = {.replicas = 2, .keys = 300};
  e2e_bootstrap(&o, 3, 1);
  ck_assert_int_eq(e2e_ringctl(NULL, 0, "auto-apply repair"), 0); /* refills may run */
  /* tokens only n1 and n2 own: both replicas go with the two disks */
  static uint32_t lost[TOKENS_CAP];
  uint32_t n_lost = 0;
  ring_table *t = e2e_table();
  for (uint32_t tok = 0; tok < ring_table_tokens(t); tok++)
    if (other_owner(t, 1, tok) == 2 && other_owner(t, 2, tok) == 1)
      lost[n_lost++] = tok;
  ring_table_free(t);
  ck_assert_uint_gt(n_lost, 0);
  wipe(1);
  wipe(2);
  e2e_node_start(1, "n1", NULL);
  e2e_node_start(2, "n2", NULL);
  ck_assert_msg(ENV_WAIT(lost_now() == n_lost, CHECK_PERIOD_S + 5), "%.0f tokens lost, not %u",
                lost_now(), n_lost);
  static char out[65536]; /* accept-loss lists every token and its owners */
  int rc = e2e_ringctl(out, sizeof out, "verify");
  ck_assert_msg(rc == 1 && strstr(out, "tokens lost"), "verify -> %d: %.500s", rc, out);
  ck_assert_msg(ENV_WAIT(coord_health(out, sizeof out) == 503 && strstr(out, " lost: "), 5),
                "coordinator /healthz: %.300s", out);
  /* the rest is refilled from n0; the lost ones stay absent, never empty */
  ck_assert_msg(ENV_WAIT(missing_of("n1") + missing_of("n2") == 2.0 * n_lost, 60),
                "n1 and n2 still miss %.0f and %.0f, want %u each", missing_of("n1"),
                missing_of("n2"), n_lost);
  /* a few more failed attempts: the lost ones stay absent throughout */
  ck_assert_msg(HARNESS_HOLDS(none_of(lost, n_lost), 2.0), "a lost token has an arc on n1 or n2");
  ck_assert_double_eq(env_metric(1, "ring_agent_losses_accepted_total") +
                          env_metric(2, "ring_agent_losses_accepted_total"),
                      0);
  char *rec = env_get("missing/n1");
  fprintf(stderr, "missing/n1: %.300s\n", rec ? rec : "(none)");
  ck_assert_msg(rec && strstr(rec, "\"failing\""), "no reason in missing/n1");
  free(rec);
  /* ring-kv never makes a missing arc: writes are staged, reads refused */
  char key[32], got[64];
  key_of(lost[0], key);
  ck_assert_int_eq(kv_put(1, key, "after-the-wipe"), 204);
  ck_assert_int_eq(kv_put(2, key, "after-the-wipe"), 204);
  ck_assert_msg(!env_arc_has(1, lost[0]) && !env_arc_has(2, lost[0]),
                "a write made the missing arc of token %u", lost[0]);
  long gs = kv_get(1, key, got, sizeof got);
  ck_assert_msg(gs == 503 && strstr(got, "missing"), "GET from n1 while missing: %ld %s", gs, got);

  rc = e2e_ringctl(out, sizeof out, "accept-loss --lost");
  ck_assert_msg(rc == 0 && strstr(out, "--yes"), "accept-loss --lost (dry run) -> %d: %.300s", rc,
                out);
  rc = e2e_ringctl(out, sizeof out, "accept-loss 0-255 --yes");
  ck_assert_msg(rc == 2, "accept-loss of tokens neither pending nor missing -> %d", rc);
  rc = e2e_ringctl(out, sizeof out, "accept-loss --lost --yes");
  ck_assert_msg(rc == 0, "accept-loss --lost --yes -> %d: %.300s", rc, out);
  ck_assert_msg(ENV_WAIT(lost_now() == 0 && missing_of(NULL) == 0, 30),
                "still %.0f lost, %.0f missing after the loss was accepted", lost_now(),
                missing_of(NULL));
  for (uint32_t k = 1; k < n_lost; k++) /* lost[0] holds the staged write (below) */
    ck_assert_msg(arc_empty(1, lost[k]) && arc_empty(2, lost[k]),
                  "token %u: not installed empty on both", lost[k]);
  /* each lost token is written off once or twice: the first owner to
   * install it empty serves a signed empty manifest the other may copy */
  double accepted = env_metric(1, "ring_agent_losses_accepted_total") +
                    env_metric(2, "ring_agent_losses_accepted_total");
  fprintf(stderr, "lost_until_accepted: %u tokens lost, %.0f arcs installed empty on the loss\n",
          n_lost, accepted);
  ck_assert(accepted >= n_lost && accepted <= 2.0 * n_lost);
  /* the staged write moved into the arc once it was installed */
  ck_assert_msg(ENV_WAIT(kv_get(1, key, got, sizeof got) == 200, 10), "GET %s from n1: %s", key,
                got);
  ck_assert_str_eq(got, "after-the-wipe");
  rc = e2e_ringctl(out, sizeof out, "verify");
  ck_assert_msg(rc == 0, "verify -> %d: %.500s", rc, out);
  ck_assert_msg(ENV_WAIT(coord_health(out, sizeof out) == 200, 10), "coordinator: %.300s", out);
  env_pass();
}
END_TEST

/* ------------------------------------------------- bad_missing_record */

START_TEST(bad_missing_record) {
  const e2e_opts o = {.replicas = 2, .no_data = true};
  e2e_bootstrap(&o, 3, 1);
  env_put("missing/n2", "{\"format\":\"ringkeeper.missing.v1\",\"version\":1,\"tokens\":[3,3]}");
  size_t big = 524288 + 100; /* over the 512 KiB cap of missing/ values (proto/etcd.md) */
  char *huge = malloc(big + 1);
  ck_assert_ptr_nonnull(huge);
  memset(huge, ' ', big);
  huge[big] = '\0';
  env_put("missing/n0", huge);
  free(huge);
  char out[8192];
  ck_assert_msg(ENV_WAIT(e2e_ringctl(out, sizeof out, "status") == 0 && strstr(out, "n2") &&
                             strstr(out, "tokens[1]") && strstr(out, "over the"),
                         10),
                "status does not name the bad missing/ records: %.500s", out);
  ck_assert(missing_of(NULL) == 0); /* a bad record is never read as missing data */
  double before =
      metric_get(w.coord_listen[0], "ring_coordinator_bad_records_total", "kind=\"missing\"");
  ck_assert_msg(before >= 2, "bad missing/ records counted %.0f", before);
  /* the coordinator keeps stepping: a drain is planned and runs */
  ck_assert_int_eq(e2e_ringctl(NULL, 0, "drain n2"), 0);
  char id[24];
  e2e_apply(id, 30);
  e2e_wait_done(id, 60);
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault_wiped");
  e2e_add(s, "refill_from_survivors", 1, 180, refill_from_survivors);
  e2e_add(s, "lost_until_accepted", 1, 180, lost_until_accepted);
  e2e_add(s, "bad_missing_record", 1, 120, bad_missing_record);
  return run_suite_as(s, 1);
}
