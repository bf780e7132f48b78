/*
 * test_fault_trust.c: what a receiver may trust, on a whole cluster
 * (e2e_cluster.h). No data moves on an answer the node the table names did
 * not sign, on a store that cannot be read, or on a source's silence; an
 * empty arc moves only on a signed empty manifest; slow clients do not
 * shut peers out of an arc server.
 *   stranger_at_address  R=1; n2 advertises a stranger's address (a 404 to
 *                        everything, unsigned: tests/common/stranger.h).
 *                        Draining n2 installs none of its tokens anywhere,
 *                        the run stays unfinished and its moves are reported
 *                        stuck as refused; the stranger hears requests but
 *                        never the secret (raw, hex or base64); receivers
 *                        count bad signatures. Undrain and cancel: nothing
 *                        lost.
 *   missing_disk         R=1; n2's arcs/ is renamed away while it runs (a
 *                        data disk not mounted): its /healthz is degraded,
 *                        draining it stays stuck ("unavailable") with
 *                        nothing installed; arcs/ back, the run finishes
 *                        with every arc byte-identical to n2's and every key
 *                        read back.
 *   half_empty_repair    R=2, 64 tokens, 40 keys: about half the tokens hold
 *                        nothing. kill -9 a node: re-replication finishes,
 *                        the empty tokens installed from the survivors'
 *                        signed empty manifests; every owner holds every
 *                        arc it owns, the same records.
 *   slow_clients         a join while 240 slow clients (8 loopback
 *                        addresses, 30 each, admitted by --allow-from)
 *                        trickle request headers at every source's arc
 *                        server (at most 16 each: --max-per-address): the
 *                        join finishes, and a signed probe per source
 *                        every 200 ms always gets a signed answer, each
 *                        within 1 s.
 *
 * Figures go to stderr. Assertions on what other features report (the
 * stuck moves' reasons) are collected with expect() and fail the test at
 * its end, so that the rest of it still runs and says what it found.
 */
#include "e2e_cluster.h"
#include "arc_env.h"
#include "stranger.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/resource.h>

/* ------------------------------------------------------------ the fixture */

#define TOKENS_CAP 4096 /* T of these tests is at most 256 */

/* What a test started that the e2e fixture does not know. */
static struct {
  stranger st;
  bool st_used;
  char missed[4096]; /* expect() failures, one a line */
} trust;

static void slow_stop(void);
static void probe_stop(void);

static void trust_setup(void) { trust.missed[0] = '\0'; }

/* Runs before e2e_teardown and env_teardown (Check runs teardowns last
 * added first): threads of ours stop before the daemons do. */
static void impostor_stop(void);

static void trust_teardown(void) {
  impostor_stop();
  probe_stop();
  slow_stop();
  if (trust.st_used)
    stranger_stop(&trust.st);
  trust.st_used = false;
}

static void trust_add(Suite *s, const char *name, int timeout_s, const TTest *test) {
  TCase *tc = e2e_tcase(name, 1, timeout_s);
  tcase_add_checked_fixture(tc, trust_setup, trust_teardown);
  tcase_add_test(tc, test);
  suite_add_tcase(s, tc);
}

/* A check that does not stop the test: it is printed at once and fails
 * the test in trust_done. */
static void expect(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect(bool ok, const char *fmt, ...) {
  if (ok)
    return;
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "EXPECTED, NOT SO: %s\n", line);
  size_t n = strlen(trust.missed);
  snprintf(trust.missed + n, sizeof trust.missed - n, "%s\n", line);
}

static void trust_done(void) {
  ck_assert_msg(trust.missed[0] == '\0', "expectations failed:\n%s", trust.missed);
  env_pass();
}

/* --------------------------------------------------------------- helpers */

/* The sum of metric `name` over agent slots [from, to). */
static double metric_sum(int from, int to, const char *name) {
  double sum = 0;
  for (int i = from; i < to; i++) {
    double v = env_metric(i, name);
    sum += isnan(v) ? 0 : v;
  }
  return sum;
}

/* Token bits of node `id` in the table in service; returns how many. */
static uint32_t owned_bits(const char *id, bool bits[TOKENS_CAP], uint32_t *tokens) {
  uint32_t n = e2e_tokens_of(id, tokens, TOKENS_CAP);
  memset(bits, 0, TOKENS_CAP * sizeof *bits);
  for (uint32_t k = 0; k < n; k++)
    bits[tokens[k]] = true;
  return n;
}

/* How many of tokens[0..n) slots [from, to) hold in arcs/ (printed). */
static uint32_t installed_at(int from, int to, const uint32_t *tokens, uint32_t n) {
  uint32_t held = 0;
  for (int i = from; i < to; i++)
    for (uint32_t k = 0; k < n; k++)
      if (env_arc_has(i, tokens[k]) && held++ < 5)
        fprintf(stderr, "%s holds token %u\n", env.a[i].id, tokens[k]);
  return held;
}

/* Files in dir (regular, not hidden); -1 when dir is not there. */
static int files_in(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Whether directories a and b both exist and hold the same file names
 * with the same bytes (both may be empty). */
static bool same_dir(const char *a, const char *b) {
  int na = files_in(a), nb = files_in(b);
  if (na < 0 || na != nb)
    return false;
  DIR *d = opendir(a);
  bool same = d != NULL;
  struct dirent *e;
  while (same && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char fa[700], fb[700];
    snprintf(fa, sizeof fa, "%s/%s", a, e->d_name);
    snprintf(fb, sizeof fb, "%s/%s", b, e->d_name);
    same = env_same_file(fa, fb);
  }
  if (d)
    closedir(d);
  return same;
}

/* Whether each of tokens[0..n) is, at its owner in the table, the same as
 * the copy of n2's arcs in `orig`. */
static uint32_t same_as_before(const char *orig, const uint32_t *tokens, uint32_t n) {
  ring_table *t = e2e_table();
  uint32_t same = 0;
  for (uint32_t k = 0; k < n; k++) {
    int s = e2e_slot(ring_table_node_id(t, ring_table_owner(t, tokens[k], 0)));
    char moved[300], before[300];
    snprintf(moved, sizeof moved, "%s/arcs/%u", env.a[s].data, tokens[k]);
    snprintf(before, sizeof before, "%s/%u", orig, tokens[k]);
    if (same_dir(moved, before))
      same++;
    else
      fprintf(stderr, "token %u on %s differs from n2's\n", tokens[k], env.a[s].id);
  }
  ring_table_free(t);
  return same;
}

/* A cluster of 3 nodes, R 1, 600 keys, stuck after 2 s, where n2
 * advertises `addr` (not where it listens); n2's tokens, as owned_bits. */
static uint32_t bootstrap_n2_at(const char *addr, bool mine[TOKENS_CAP],
                                uint32_t tokens[TOKENS_CAP]) {
  char adv[64];
  snprintf(adv, sizeof adv, "--advertise %s", addr);
  const char *agent_extra[] = {NULL, NULL, adv};
  const e2e_opts o = {.replicas = 1, .keys = 600};
  e2e_bootstrap_with(&o, 3, 1, agent_extra, "--stuck-after 2s");
  return owned_bits("n2", mine, tokens);
}

/* Whether the run of plan `id` has ended (into state[16]). */
static bool run_ended(const char *id, char state[16]) {
  e2e_history_state(id, state, NULL);
  return state[0] != '\0';
}

/* The stuck moves `ringctl status --json` lists: waits up to timeout_s
 * for at least one. Each must be a move off `from` of one of its tokens
 * (mine), with a reason holding `why`. Also `ringctl status` must show
 * them. Soft checks; returns how many are listed. */
static int check_stuck(const char *from, const bool *mine, const char *why, double timeout_s) {
  cJSON *j = NULL;
  const cJSON *stuck = NULL;
  double end = harness_now() + timeout_s;
  for (;;) {
    cJSON_Delete(j);
    j = e2e_status_json();
    stuck = cJSON_GetObjectItemCaseSensitive(j, "stuck");
    if ((cJSON_IsArray(stuck) && cJSON_GetArraySize(stuck) > 0) || harness_now() > end)
      break;
    harness_sleep_ms(500);
  }
  int n = cJSON_IsArray(stuck) ? cJSON_GetArraySize(stuck) : 0, wrong = 0, unexplained = 0;
  expect(n > 0, "ringctl status --json lists no stuck move in %.0f s (\"stuck\" %s)", timeout_s,
         stuck ? "empty" : "absent");
  const cJSON *m;
  char first[300] = "";
  cJSON_ArrayForEach(m, stuck) {
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(m, "token");
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(m, "from");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(m, "error");
    bool ours = cJSON_IsNumber(tok) && tok->valuedouble >= 0 && tok->valuedouble < TOKENS_CAP &&
                mine[(uint32_t)tok->valuedouble] && cJSON_IsString(fr) &&
                strcmp(fr->valuestring, from) == 0;
    wrong += !ours;
    bool told = cJSON_IsString(err) && strstr(err->valuestring, why) != NULL;
    unexplained += !told;
    if (!first[0] && cJSON_IsString(err))
      snprintf(first, sizeof first, "%s", err->valuestring);
  }
  fprintf(stderr, "stuck: %d moves listed; first reason: %s\n", n, first);
  expect(wrong == 0, "%d stuck moves are not moves of %s's tokens off %s", wrong, from, from);
  expect(n == 0 || unexplained == 0, "%d of %d stuck moves give no reason with \"%s\" (first: %s)",
         unexplained, n, why, first);
  cJSON_Delete(j);
  char out[8192];
  int rc = e2e_ringctl(out, sizeof out, "status");
  expect(rc == 0 && strstr(out, "stuck moves") && strstr(out, from),
         "ringctl status (exit %d) shows no stuck moves off %s", rc, from);
  return n;
}

/* ----------------------------------------------------- members' keyrings */

static test_etcd_pins cluster_pins;

/* What the host of slot i holds (arc_env.h): the cluster secret and its
 * own node key, checking others against the pins in etcd. */
static arc_keyring *member_keys(int i) {
  cluster_pins = (test_etcd_pins){env.c, ENV_PREFIX};
  return test_member_keys(env.secret, env.a[i].data, &cluster_pins);
}

/* -------------------------------------------------- stranger_at_address */

/* Up to 4 needles a leak of the secret would show as: base64 (standard
 * and URL alphabets) of it at byte offset `shift` in a stream, the chars
 * that depend on its bytes alone. */
static void b64_at(const char *secret, int shift, char *out, size_t cap, bool url) {
  static const char *std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static const char *web = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const char *al = url ? web : std;
  unsigned char in[256];
  size_t n = (size_t)shift + strlen(secret);
  memset(in, 'x', (size_t)shift);
  memcpy(in + shift, secret, strlen(secret));
  char enc[400];
  size_t k = 0;
  for (size_t i = 0; i + 3 <= n; i += 3) { /* whole groups only: the rest mixes with what follows */
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    for (int s = 18; s >= 0; s -= 6)
      enc[k++] = al[(v >> s) & 63];
  }
  enc[k] = '\0';
  snprintf(out, cap, "%s", enc + (shift ? 4 : 0)); /* the first group mixes with what precedes */
}

/* Whether the stranger saw the secret in any form it could be sent in. */
static bool stranger_heard_secret(stranger *s, const char *secret) {
  bool heard = stranger_saw(s, secret, strlen(secret));
  char hex[300], HEX[300], b64[400];
  size_t n = strlen(secret);
  for (size_t i = 0; i < n; i++) {
    snprintf(hex + 2 * i, 3, "%02x", (unsigned char)secret[i]);
    snprintf(HEX + 2 * i, 3, "%02X", (unsigned char)secret[i]);
  }
  heard = heard || stranger_saw(s, hex, 2 * n) || stranger_saw(s, HEX, 2 * n);
  for (int shift = 0; shift < 3; shift++)
    for (int url = 0; url < 2; url++) {
      b64_at(secret, shift, b64, sizeof b64, url);
      heard = heard || (strlen(b64) >= 8 && stranger_saw(s, b64, strlen(b64)));
    }
  return heard;
}

/* The secret the agents use: the first line of env.secret. */
static void read_secret(char *out, size_t cap) {
  char *text = file_slurp(env.secret);
  snprintf(out, cap, "%.*s", (int)strcspn(text, "\r\n"), text);
  free(text);
  ck_assert_msg(strlen(out) >= 8, "secret file %s: too short", env.secret);
}

/* The control: a client that does send the secret (HTTP basic auth, so
 * base64 at an offset) is heard. */
static void stranger_control(const char *secret) {
  ck_assert_int_eq(stranger_start(&trust.st, 20, 1u << 16), 0);
  trust.st_used = true;
  char url[64], userpwd[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/arcs/0/manifest", (unsigned)trust.st.port);
  snprintf(userpwd, sizeof userpwd, "u:%s", secret);
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, harness_sink);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_cleanup(h);
  ck_assert_msg(rc == CURLE_OK && stranger_requests(&trust.st) == 1, "the stranger: curl %d", rc);
  ck_assert_msg(stranger_heard_secret(&trust.st, secret), "the control leak went unheard");
  stranger_stop(&trust.st);
  trust.st_used = false;
}

START_TEST(stranger_at_address) {
  char secret[200];
  read_secret(secret, sizeof secret);
  stranger_control(secret);
  ck_assert_int_eq(stranger_start(&trust.st, 280, 4u << 20), 0);
  trust.st_used = true;
  char addr[32];
  stranger_addr(&trust.st, addr, sizeof addr);
  static bool mine[TOKENS_CAP];
  static uint32_t tokens[TOKENS_CAP];
  uint32_t n = bootstrap_n2_at(addr, mine, tokens), with_data = 0;
  for (uint32_t k = 0; k < n; k++) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/arcs/%u", env.a[2].data, tokens[k]);
    with_data += files_in(dir) > 0;
  }
  fprintf(stderr, "n2 (at stranger %s) owns %u tokens, %u with data\n", addr, n, with_data);
  ck_assert_uint_gt(with_data, 0);

  ck_assert_int_eq(e2e_ringctl(NULL, 0, "drain n2"), 0);
  char id[24], state[16];
  e2e_apply(id, 30);
  ck_assert_msg(ENV_WAIT(stranger_requests(&trust.st) > 0, 30), "no receiver asked the stranger");
  double begun = harness_now();
  /* 15 s of refused answers: nothing installed, the run not done */
  while (harness_now() - begun < 15) {
    ck_assert_msg(installed_at(0, 2, tokens, n) == 0, "a receiver installed one of n2's tokens");
    ck_assert_msg(!run_ended(id, state), "the run ended (%s) on a stranger's answers", state);
    harness_sleep_ms(500);
  }
  fprintf(stderr,
          "after %.0f s: the stranger answered %" PRIu64 " requests (%" PRIu64
          " bytes heard); n0, n1 hold none of n2's tokens\n",
          harness_now() - begun, stranger_requests(&trust.st), stranger_bytes(&trust.st));
  check_stuck("n2", mine, "signature", 10);
  ck_assert_uint_gt(stranger_bytes(&trust.st), 0);
  ck_assert_msg(!stranger_heard_secret(&trust.st, secret),
                "the stranger heard the secret (raw, hex or base64)");
  double bad = metric_sum(0, 2, "ring_agent_bad_signatures_total");
  fprintf(stderr, "receivers refused %.0f unsigned answers, %.0f fetches failed\n", bad,
          metric_sum(0, 2, "ring_agent_fetch_failures_total"));
  ck_assert_double_gt(bad, 0);
  ck_assert_double_eq(metric_sum(0, 2, "ring_agent_empty_arcs_total"), 0);

  /* Back as it was: nothing lost. */
  ck_assert_int_eq(e2e_ringctl(NULL, 0, "undrain n2"), 0);
  ck_assert_int_eq(e2e_ringctl(NULL, 0, "cancel"), 0);
  ck_assert_msg(ENV_WAIT(run_ended(id, state), 30), "the cancelled run does not end");
  ck_assert_str_eq(state, "cancelled");
  ck_assert_msg(installed_at(0, 2, tokens, n) == 0, "a receiver installed one of n2's tokens");
  e2e_settle(3, 60);
  ck_assert_uint_eq(e2e_replicas_of("n2"), n);
  e2e_check(false);
  stranger_stop(&trust.st);
  trust.st_used = false;
  trust_done();
}
END_TEST

/* ---------------------------------------------------------- missing_disk */

/* Whether slot i's ring-kv has no compaction to do or doing: no token
 * directory holds more segments than it compacts at (kv_store.h,
 * max_segments: 8; a merge in progress holds them all, and its result). */
static bool compacted(int i) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/arcs", env.a[i].data);
  DIR *d = opendir(dir);
  bool ok = d != NULL;
  for (struct dirent *e; ok && (e = readdir(d)) != NULL;) {
    char sub[600];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    DIR *t = e->d_name[0] == '.' ? NULL : opendir(sub);
    int segs = 0;
    for (struct dirent *f; t && (f = readdir(t)) != NULL;)
      segs += strncmp(f->d_name, "seg-", 4) == 0;
    if (t)
      closedir(t);
    ok = segs <= 8;
  }
  if (d)
    closedir(d);
  return ok;
}

START_TEST(missing_disk) {
  const e2e_opts o = {.replicas = 1, .keys = 600};
  e2e_bootstrap_with(&o, 3, 1, NULL, "--stuck-after 2s");
  /* a compaction the load queued is done: arcs/ is copied below for a
   * byte-for-byte compare */
  ck_assert_msg(ENV_WAIT(compacted(2), 15), "n2's ring-kv does not finish compacting");
  static bool mine[TOKENS_CAP];
  static uint32_t tokens[TOKENS_CAP];
  uint32_t n = owned_bits("n2", mine, tokens);
  ck_assert_uint_gt(n, 0);
  char arcs[300], away[300], orig[300], cmd[800];
  snprintf(arcs, sizeof arcs, "%s/arcs", env.a[2].data);
  snprintf(away, sizeof away, "%s/arcs.unmounted", env.a[2].data);
  snprintf(orig, sizeof orig, "%s/n2-arcs-before", env.dir);
  snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", arcs, orig);
  ck_assert_int_eq(system(cmd), 0);

  ck_assert_int_eq(rename(arcs, away), 0);
  char health[64];
  snprintf(health, sizeof health, "http://%s/healthz", env.a[2].metrics);
  ck_assert_msg(ENV_WAIT(env_metric(2, "ring_agent_store_ok") == 0, 15),
                "n2 does not see its arcs/ gone");
  char *body = NULL;
  long hs = http_get(health, &body);
  fprintf(stderr, "n2 /healthz: %ld %.200s\n", hs, body ? body : "");
  ck_assert_msg(hs != 200, "n2's /healthz is ok without its arcs/");
  free(body);

  ck_assert_int_eq(e2e_ringctl(NULL, 0, "drain n2"), 0);
  char id[24], state[16];
  e2e_apply(id, 30);
  ck_assert_msg(ENV_WAIT(metric_sum(0, 2, "ring_agent_fetch_failures_total") > 0, 30),
                "no receiver tried n2");
  double begun = harness_now();
  check_stuck("n2", mine, "store unavailable", 10); /* n2's signed 503 says why */
  while (harness_now() - begun < 6) {
    ck_assert_msg(installed_at(0, 2, tokens, n) == 0, "a receiver installed one of n2's tokens");
    ck_assert_msg(!run_ended(id, state), "the run ended (%s) with n2's store gone", state);
    harness_sleep_ms(500);
  }
  fprintf(stderr,
          "%.0f s with n2's store gone: %.0f fetches failed, %.0f not held, nothing "
          "installed\n",
          harness_now() - begun, metric_sum(0, 2, "ring_agent_fetch_failures_total"),
          metric_sum(0, 2, "ring_agent_not_held_total"));
  ck_assert_double_eq(metric_sum(0, 2, "ring_agent_empty_arcs_total"), 0);

  /* The disk is back: the run finishes with n2's arcs as they were. */
  ck_assert_int_eq(rename(away, arcs), 0);
  e2e_wait_done(id, 90);
  e2e_settle(2, 60);
  ck_assert_uint_eq(e2e_replicas_of("n2"), 0);
  uint32_t same = same_as_before(orig, tokens, n);
  fprintf(stderr, "%u of n2's %u arcs moved byte-identical\n", same, n);
  ck_assert_uint_eq(same, n);
  e2e_check(false);
  trust_done();
}
END_TEST

/* ----------------------------------------------------- half_empty_repair */

START_TEST(half_empty_repair) {
  /* 40 keys over 64 tokens: about half of them (63/64)^40 hold nothing */
  const e2e_opts o = {.tokens = 64, .replicas = 2, .keys = 40, .down_after_ms = 1000};
  e2e_bootstrap(&o, 3, 1);
  static bool mine[TOKENS_CAP];
  static uint32_t tokens[TOKENS_CAP];
  uint32_t n = owned_bits("n2", mine, tokens), empty = 0;
  ring_table *t = e2e_table();
  for (uint32_t k = 0; k < n; k++)
    for (uint32_t r = 0; r < 2; r++) {
      int s = e2e_slot(ring_table_node_id(t, ring_table_owner(t, tokens[k], r)));
      char dir[300];
      snprintf(dir, sizeof dir, "%s/arcs/%u", env.a[s].data, tokens[k]);
      ck_assert_msg(files_in(dir) >= 0, "%s owns token %u without its arc", env.a[s].id, tokens[k]);
      if (s != 2)
        empty += files_in(dir) == 0;
    }
  ring_table_free(t);
  fprintf(stderr, "n2 owns %u tokens; %u of them empty on the other owner\n", n, empty);
  ck_assert_uint_gt(empty, 0);
  ck_assert_uint_lt(empty, n);

  e2e_node_kill(2);
  char id[24];
  e2e_apply(id, 30);
  e2e_wait_done(id, 60);
  e2e_settle(2, 60);
  ck_assert_uint_eq(e2e_replicas_of("n2"), 0);
  t = e2e_table();
  uint32_t missing = 0;
  for (uint32_t tok = 0; tok < ring_table_tokens(t); tok++)
    for (uint32_t r = 0; r < ring_table_replicas(t); r++) {
      int s = e2e_slot(ring_table_node_id(t, ring_table_owner(t, tok, r)));
      if (s < 0 || !env_arc_has(s, tok))
        missing++;
    }
  ck_assert_msg(missing == 0, "%u token-replicas have no arc at their owner", missing);
  uint32_t copies = 0; /* n2's tokens: the new owner's arc is the survivor's, byte for byte */
  for (uint32_t k = 0; k < n; k++) {
    char dir[2][300];
    for (uint32_t r = 0; r < 2; r++) {
      int s = e2e_slot(ring_table_node_id(t, ring_table_owner(t, tokens[k], r)));
      snprintf(dir[r], sizeof dir[r], "%s/arcs/%u", env.a[s].data, tokens[k]);
    }
    copies += same_dir(dir[0], dir[1]);
  }
  ring_table_free(t);
  ck_assert_msg(copies == n, "%u of n2's %u tokens differ between their owners", n - copies, n);
  double installed = metric_sum(0, 2, "ring_agent_empty_arcs_total");
  fprintf(stderr, "receivers installed %.0f empty arcs (%u expected), %.0f losses accepted\n",
          installed, empty, metric_sum(0, 2, "ring_agent_losses_accepted_total"));
  expect(installed >= empty,
         "ring_agent_empty_arcs_total on the receivers is %.0f; %u arcs were installed empty",
         installed, empty);
  ck_assert_double_eq(metric_sum(0, 2, "ring_agent_losses_accepted_total"), 0);
  e2e_check(false);
  trust_done();
}
END_TEST

/* ----------------------------------------------------------- slow_clients */

#define SLOW_ADDRS 8     /* 127.0.0.11 .. 127.0.0.18 */
#define SLOW_PER_ADDR 30 /* connections from each, to each source */
#define SLOW_SOURCES 3   /* n0, n1, n2 */
#define SLOW_CONNS (SLOW_SOURCES * SLOW_ADDRS * SLOW_PER_ADDR)
#define SLOW_TICK_MS 500      /* one header byte per connection per tick */
#define SLOW_OPENS_MAX 400000 /* connections opened in all, cuts included */
#define SLOW_LIFETIME_S 240
#define PROBE_EVERY_MS 200
#define PROBE_MAX 4096 /* probes recorded */
#define PROBE_TIMEOUT_MS 5000

/* A request header that never ends within the test (a byte a tick). */
static const char slow_header[] =
    "GET /v1/arcs/0/manifest HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow-client-of-the-trust-"
    "test/1.0 (one byte every half second, never a blank line, forever and ever)\r\nX-Padding: "
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

static struct {
  pthread_t thread;
  bool running;
  atomic_bool stop;
  struct sockaddr_in to[SLOW_SOURCES];
  int fd[SLOW_CONNS];
  uint32_t sent[SLOW_CONNS]; /* header bytes sent on fd */
  _Atomic uint64_t opened;   /* connections opened */
  _Atomic uint64_t cut;      /* closed by the server (refused or cut), then reopened */
  _Atomic uint64_t open_now; /* connected at the last tick */
  _Atomic uint64_t open_max;
} slow;

/* Opens connection i: from 127.0.0.(11 + address), to its source. */
static void slow_open(int i) {
  int src = i / (SLOW_ADDRS * SLOW_PER_ADDR), a = (i / SLOW_PER_ADDR) % SLOW_ADDRS;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  struct sockaddr_in me = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(0x7f00000bu + (uint32_t)a)};
  if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0 ||
      (connect(fd, (struct sockaddr *)&slow.to[src], sizeof slow.to[src]) != 0 &&
       errno != EINPROGRESS)) {
    close(fd);
    return;
  }
  slow.fd[i] = fd;
  slow.sent[i] = 0;
  atomic_fetch_add(&slow.opened, 1);
}

/* One tick: connections the server closed are closed here (and reopened
 * at the next tick); every other one sends its next header byte. */
static void slow_tick(void) {
  static struct pollfd p[SLOW_CONNS];
  uint64_t open = 0;
  for (int i = 0; i < SLOW_CONNS; i++)
    p[i] = (struct pollfd){.fd = slow.fd[i], .events = POLLIN};
  poll(p, SLOW_CONNS, 0);
  for (int i = 0; i < SLOW_CONNS; i++) {
    if (slow.fd[i] < 0) {
      if (atomic_load(&slow.opened) < SLOW_OPENS_MAX)
        slow_open(i);
      continue;
    }
    char b[256];
    bool gone = (p[i].revents & (POLLHUP | POLLERR)) ||
                ((p[i].revents & POLLIN) && recv(slow.fd[i], b, sizeof b, MSG_DONTWAIT) <= 0);
    if (!gone && slow.sent[i] < sizeof slow_header - 1) {
      ssize_t k = send(slow.fd[i], slow_header + slow.sent[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k == 1)
        slow.sent[i]++;
      else if (errno != EAGAIN && errno != EWOULDBLOCK)
        gone = true;
    }
    if (gone) {
      close(slow.fd[i]);
      slow.fd[i] = -1;
      atomic_fetch_add(&slow.cut, 1);
    } else {
      open++;
    }
  }
  atomic_store(&slow.open_now, open);
  if (open > atomic_load(&slow.open_max))
    atomic_store(&slow.open_max, open);
}

static void *slow_main(void *ud) {
  (void)ud;
  double end = harness_now() + SLOW_LIFETIME_S;
  while (!atomic_load(&slow.stop) && harness_now() < end) {
    slow_tick();
    harness_sleep_ms(SLOW_TICK_MS);
  }
  for (int i = 0; i < SLOW_CONNS; i++)
    if (slow.fd[i] >= 0)
      close(slow.fd[i]);
  return NULL;
}

/* Starts the slow clients against the arc servers of slots [0, SLOW_SOURCES). */
static void slow_start(void) {
  memset(&slow, 0, sizeof slow);
  for (int i = 0; i < SLOW_CONNS; i++)
    slow.fd[i] = -1;
  for (int s = 0; s < SLOW_SOURCES; s++) {
    slow.to[s] =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    slow.to[s].sin_port = htons((uint16_t)atoi(strrchr(env.a[s].listen, ':') + 1));
  }
  ck_assert_int_eq(pthread_create(&slow.thread, NULL, slow_main, NULL), 0);
  slow.running = true;
}

static void slow_stop(void) {
  if (!slow.running)
    return;
  atomic_store(&slow.stop, true);
  pthread_join(slow.thread, NULL);
  slow.running = false;
}

/* The probe: a signed manifest request, as a peer's, to each source. */
static struct {
  pthread_t thread;
  bool running;
  atomic_bool stop;
  arc_keyring *keys[SLOW_SOURCES]; /* keys[s]: the member that probes source s */
  double ms[PROBE_MAX];            /* latency of each answered probe */
  _Atomic uint32_t n;              /* probes made (recorded: at most PROBE_MAX) */
  uint32_t unanswered;             /* no answer, or one not signed by the source */
  char first_failure[300];
} probe;

typedef struct probe_answer {
  char sig[ARC_AUTH_VALUE_MAX + 1];
  proc_buf body;
} probe_answer;

static size_t probe_header(char *p, size_t size, size_t nmemb, void *ud) {
  probe_answer *a = ud;
  size_t n = size * nmemb, name = sizeof ARC_SIG_HEADER - 1;
  if (n > name + 1 && strncasecmp(p, ARC_SIG_HEADER, name) == 0 && p[name] == ':') {
    const char *v = p + name + 1;
    size_t len = n - name - 1;
    while (len > 0 && *v == ' ')
      v++, len--;
    while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n'))
      len--;
    snprintf(a->sig, sizeof a->sig, "%.*s", (int)len, v);
  }
  return n;
}

/* One signed manifest request to slot s, as the member of the next slot;
 * its latency in ms, or a negative number when no answer signed by the
 * source came. */
static double probe_one(CURL *h, int s, uint32_t token) {
  char path[64], url[128], auth[ARC_AUTH_VALUE_MAX + 32];
  unsigned char nonce[ARC_NONCE_LEN];
  snprintf(path, sizeof path, "/v1/arcs/%u/manifest", token);
  snprintf(url, sizeof url, "http://%s%s", env.a[s].listen, path);
  int n = snprintf(auth, sizeof auth, "%s: ", ARC_AUTH_HEADER);
  const arc_keyring *k = probe.keys[s];
  if (arc_auth_sign_request(k, env.a[(s + 1) % SLOW_SOURCES].id, env.a[s].id, "GET", path, "",
                            arc__wall_ms(), nonce, auth + n, sizeof auth - (size_t)n) != RING_OK)
    return -1;
  struct curl_slist *hdr = curl_slist_append(NULL, auth);
  probe_answer a = {.sig = ""};
  curl_easy_reset(h);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L); /* a new peer: admitted, not a kept connection */
  curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)PROBE_TIMEOUT_MS);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, probe_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, proc_buf_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &a.body);
  double t0 = harness_now();
  CURLcode rc = curl_easy_perform(h);
  double ms = (harness_now() - t0) * 1000;
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(hdr);
  const void *body = a.body.data ? a.body.data : "";
  bool ok = rc == CURLE_OK && status > 0 &&
            (arc_auth_verify_answer(k, a.sig, strlen(a.sig), env.a[s].id, nonce, (unsigned)status,
                                    token, body, a.body.len) == RING_OK ||
             arc_auth_verify_answer(k, a.sig, strlen(a.sig), env.a[s].id, nonce, (unsigned)status,
                                    ARC_NO_TOKEN, body, a.body.len) == RING_OK);
  if (!ok && !probe.first_failure[0])
    snprintf(probe.first_failure, sizeof probe.first_failure,
             "%s: curl %d (%s), status %ld, X-Ring-Sig \"%.40s\", after %.0f ms", env.a[s].id,
             (int)rc, curl_easy_strerror(rc), status, a.sig, ms);
  free(a.body.data);
  return ok ? ms : -1;
}

static void *probe_main(void *ud) {
  (void)ud;
  CURL *h = curl_easy_init();
  double next = harness_now();
  for (uint32_t round = 0; h && !atomic_load(&probe.stop) && probe.n < PROBE_MAX; round++) {
    for (int s = 0; s < SLOW_SOURCES && probe.n < PROBE_MAX; s++) {
      double ms = probe_one(h, s, (round * SLOW_SOURCES + (uint32_t)s) % w.o.tokens);
      if (ms < 0)
        probe.unanswered++;
      else
        probe.ms[probe.n] = ms;
      probe.n++;
    }
    next += PROBE_EVERY_MS / 1000.0;
    double wait = next - harness_now();
    if (wait > 0)
      harness_sleep_ms((long)(wait * 1000));
  }
  curl_easy_cleanup(h);
  return NULL;
}

static void probe_start(void) {
  memset(&probe, 0, sizeof probe);
  for (int s = 0; s < SLOW_SOURCES; s++)
    probe.keys[s] = member_keys((s + 1) % SLOW_SOURCES);
  ck_assert_int_eq(pthread_create(&probe.thread, NULL, probe_main, NULL), 0);
  probe.running = true;
}

static void probe_stop(void) {
  if (!probe.running)
    return;
  atomic_store(&probe.stop, true);
  pthread_join(probe.thread, NULL);
  probe.running = false;
  for (int s = 0; s < SLOW_SOURCES; s++) {
    arc_keyring_free(probe.keys[s]);
    probe.keys[s] = NULL;
  }
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

START_TEST(slow_clients) {
  char help[16384];
  int rc = proc_runf(10, help, sizeof help, "%s --help", RING_AGENT_BIN);
  ck_assert_msg(rc == 0 && strstr(help, "--allow-from") != NULL,
                "ring-agent has no --allow-from (arc server admission): exit %d", rc);
  struct rlimit rl;
  ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur < SLOW_CONNS + 512 && rl.rlim_max >= SLOW_CONNS + 512) {
    rl.rlim_cur = SLOW_CONNS + 512;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  ck_assert_msg(rl.rlim_cur >= SLOW_CONNS + 512, "too few file descriptors: %llu",
                (unsigned long long)rl.rlim_cur);
  /* admitted, but at most 16 at once from each address (30 try), each
   * cut when its headers are not in within the default deadline */
  static const char allow[] = "--allow-from 127.0.0.11,127.0.0.12,127.0.0.13,127.0.0.14,"
                              "127.0.0.15,127.0.0.16,127.0.0.17,127.0.0.18 --max-per-address 16";
  const char *agent_extra[] = {allow, allow, allow};
  const e2e_opts o = {.value_size = 1000, .keys = 2000, .bytes_per_sec = 128 * 1024};
  e2e_bootstrap_with(&o, 3, 1, agent_extra, NULL);

  slow_start();
  ck_assert_msg(ENV_WAIT(atomic_load(&slow.opened) >= SLOW_CONNS, 10),
                "the slow clients could not open their connections");
  /* the attack in place: the servers refuse or cut some already */
  ck_assert_msg(ENV_WAIT(atomic_load(&slow.cut) > 0, 15), "the servers cut no slow client");
  fprintf(
      stderr,
      "slow clients: %" PRIu64 " of %d held open (%" PRIu64 " opened, %" PRIu64 " cut so far)\n",
      atomic_load(&slow.open_now), SLOW_CONNS, atomic_load(&slow.opened), atomic_load(&slow.cut));
  e2e_node_start(3, "n3", allow);
  probe_start();
  char id[24], state[16];
  e2e_apply(id, 30);
  double begun = harness_now();
  bool ended = ENV_WAIT(run_ended(id, state), 120);
  double took = harness_now() - begun;
  uint32_t probed = probe.n; /* a round of probes after the end too */
  ck_assert(ENV_WAIT(probe.n >= probed + SLOW_SOURCES || probe.n >= PROBE_MAX, 15));
  probe_stop();
  slow_stop();

  uint32_t answered = probe.n - probe.unanswered;
  ck_assert_uint_gt(probe.n, 0);
  double *ms = malloc(PROBE_MAX * sizeof *ms);
  uint32_t k = 0;
  for (uint32_t i = 0; i < probe.n; i++)
    if (probe.ms[i] > 0)
      ms[k++] = probe.ms[i];
  qsort(ms, k, sizeof *ms, by_value);
  double worst = k ? ms[k - 1] : 0, p99 = k ? ms[(k * 99) / 100] : 0;
  double median = k ? ms[k / 2] : 0;
  free(ms);
  fprintf(stderr,
          "slow clients: worst peer latency %.0f ms over %u requests (p99 %.0f ms, median "
          "%.1f ms; %u unanswered)\n",
          worst, probe.n, p99, median, probe.unanswered);
  fprintf(stderr,
          "slow clients: %" PRIu64 " connections opened, %" PRIu64
          " cut by the servers, at most %" PRIu64 " open at once\n",
          atomic_load(&slow.opened), atomic_load(&slow.cut), atomic_load(&slow.open_max));
  double per_addr = 0,
         cuts = metric_sum(0, SLOW_SOURCES, "ring_agent_arc_header_deadline_cuts_total");
  for (int i = 0; i < SLOW_SOURCES; i++) {
    double v = metric_get(env.a[i].metrics, "ring_agent_arc_connections_refused_total",
                          "reason=\"per_addr\"");
    per_addr += isnan(v) ? 0 : v;
  }
  fprintf(stderr,
          "slow clients: the sources refused %.0f over the per-address cap and cut %.0f "
          "at the header deadline\n",
          per_addr, cuts);
  ck_assert_msg(ended && strcmp(state, "done") == 0, "the join %s with slow clients",
                ended ? state : "did not end in 120 s");
  fprintf(stderr, "slow clients: the join took %.1f s\n", took);
  ck_assert_msg(probe.unanswered == 0, "%u of %u probes got no signed answer; first: %s",
                probe.unanswered, probe.n, probe.first_failure);
  ck_assert_uint_eq(answered, probe.n);
  ck_assert_msg(worst <= 1000, "a peer waited %.0f ms for an answer with slow clients", worst);
  ck_assert_double_gt(per_addr, 0); /* the slow clients did press on both rules */
  ck_assert_double_gt(cuts, 0);
  e2e_settle(2, 60);
  e2e_check(false);
  trust_done();
}
END_TEST

/* ---------------------------------------------------------- accepted_loss */

/* R=1 and a node dies for good: its tokens have no source left. The moves
 * stay stuck, apply --wait --stuck-timeout exits 1, nothing is installed,
 * until the operator writes the tokens off (ringctl accept-loss --stuck
 * --yes, wave by wave: only in-flight moves are pending); then the run
 * finishes and the new owners hold the tokens, empty. */
START_TEST(accepted_loss) {
  const e2e_opts o = {.replicas = 1, .no_data = true, .down_after_ms = 1000};
  e2e_bootstrap_with(&o, 3, 1, NULL, "--stuck-after 2s");
  static bool mine[TOKENS_CAP];
  static uint32_t tokens[TOKENS_CAP];
  uint32_t n = owned_bits("n2", mine, tokens);
  ck_assert_uint_gt(n, 4);
  for (uint32_t k = 0; k < 4; k++) /* data that only n2 holds */
    env_arc_write(2, tokens[k], 2, 4096, 7);
  e2e_node_kill(2);
  char id[24], out[16384];
  ck_assert_msg(ENV_WAIT(e2e_new_proposal(id), 60), "no repair proposed after n2 died");
  double t0 = harness_now();
  int rc = e2e_ringctl(out, sizeof out, "apply %s --wait --stuck-timeout 4s", id);
  fprintf(stderr, "apply --wait --stuck-timeout 4s -> %d after %.1f s\n", rc, harness_now() - t0);
  ck_assert_msg(rc == 1, "apply --wait --stuck-timeout exited %d with every source gone: %s", rc,
                out);
  check_stuck("n2", mine, "n2", 20);
  ck_assert_uint_eq(installed_at(0, 2, tokens, n), 0);
  rc = e2e_ringctl(out, sizeof out, "accept-loss --stuck");
  ck_assert_msg(rc == 0 && strstr(out, "--yes"), "accept-loss --stuck (dry run) -> %d: %s", rc,
                out);
  char *loss = env_get("loss");
  ck_assert_msg(loss == NULL, "a dry run wrote the loss key: %s", loss);
  char state[16] = "";
  for (int i = 0; i < 60 && !run_ended(id, state); i++) { /* bounded: a wave a pass */
    e2e_ringctl(out, sizeof out, "accept-loss --stuck --yes");
    harness_sleep_ms(1000);
  }
  ck_assert_msg(strcmp(state, "done") == 0, "the run is %s after the losses were accepted",
                state[0] ? state : "still going");
  double lost = metric_sum(0, 2, "ring_agent_losses_accepted_total");
  fprintf(stderr, "accepted_loss: %u tokens of n2 written off, %.0f arcs installed empty\n", n,
          lost);
  ck_assert_double_eq(lost, n);
  e2e_settle(2, 60);
  ring_table *t = e2e_table();
  for (uint32_t k = 0; k < n; k++) {
    int s = e2e_slot(ring_table_node_id(t, ring_table_owner(t, tokens[k], 0)));
    char dir[300];
    snprintf(dir, sizeof dir, "%s/arcs/%u", env.a[s].data, tokens[k]);
    ck_assert_msg(s >= 0 && s != 2 && files_in(dir) == 0, "token %u: not an empty arc at %s",
                  tokens[k], s >= 0 ? env.a[s].id : "?");
  }
  ring_table_free(t);
  e2e_check(true);
  trust_done();
}
END_TEST

/* ----------------------------------------------------- member_at_address */

/* A member's arc server changed as a malicious member would change it,
 * run at another node's address: it answers every manifest request with
 * the manifest of its store (empty arcs), signed with its own key as that
 * node, without checking who asks (it could not: the requests' pair MACs
 * are for the real node's key). The receivers' check of the answers is
 * what must stop it. */
static struct {
  arc_store *store;
  struct MHD_Daemon *d;
  arc_keyring *keys;
  atomic_uint served; /* manifests answered with 200 */
} imp;

static void impostor_stop(void) {
  if (imp.d != NULL)
    MHD_stop_daemon(imp.d);
  arc_store_close(imp.store);
  arc_keyring_free(imp.keys);
  imp.d = NULL, imp.store = NULL, imp.keys = NULL;
}

/* The manifest of token from the impostor's store, signed as n2 for the
 * request whose header is h; NULL when it holds no such arc. */
static struct MHD_Response *impostor_manifest(uint32_t token, const char *h) {
  arc_manifest m;
  ring_error err;
  char *json = NULL;
  size_t len = 0;
  if (arc_store_manifest(imp.store, token, &m, &err) != RING_OK)
    return NULL;
  ck_assert_int_eq(arc_manifest_encode(&m, &json, &len), RING_OK);
  arc_manifest_free(&m);
  arc_auth req;
  bool parsed = h != NULL && arc_auth_parse(h, strlen(h), &req) == RING_OK;
  char sig[ARC_AUTH_VALUE_MAX];
  ck_assert_int_eq(arc_auth_sign_answer(imp.keys, "n2", parsed ? &req : NULL, 200, token, json, len,
                                        sig, sizeof sig),
                   RING_OK);
  struct MHD_Response *r = MHD_create_response_from_buffer(len, json, MHD_RESPMEM_MUST_FREE);
  MHD_add_response_header(r, ARC_SIG_HEADER, sig);
  return r;
}

static enum MHD_Result impostor_answer(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version, const char *upload,
                                       size_t *upload_size, void **con_cls) {
  (void)cls, (void)method, (void)version, (void)upload, (void)upload_size, (void)con_cls;
  uint32_t token = 0;
  char tail[16] = "";
  struct MHD_Response *r = NULL;
  if (sscanf(url, "/v1/arcs/%" SCNu32 "/%15s", &token, tail) == 2 && strcmp(tail, "manifest") == 0)
    r = impostor_manifest(token, MHD_lookup_connection_value(c, MHD_HEADER_KIND, ARC_AUTH_HEADER));
  unsigned status = r != NULL ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND;
  if (r == NULL)
    r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  else
    atomic_fetch_add(&imp.served, 1);
  enum MHD_Result rc = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return rc;
}

/* Member n1 (the cluster secret and its own key, both real) serves at
 * `addr` as n2: an empty arc for each of tokens[0..n), the manifests
 * signed with n1's key and node=n2 (the review's attack). */
static void impostor_start(const char *addr, const uint32_t *tokens, uint32_t n) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/impostor", env.dir);
  ring_error err;
  ck_assert_msg(arc_store_open(dir, &imp.store, &err) == RING_OK, "%s", err.message);
  uint32_t made = 0;
  ck_assert_int_eq(arc_store_adopt_empty(imp.store, tokens, n, &made, &err), RING_OK);
  imp.keys = member_keys(1);
  atomic_store(&imp.served, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  unsigned port = 0;
  ck_assert_int_eq(sscanf(addr, "127.0.0.1:%u", &port), 1);
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  imp.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port,
                           NULL, NULL, impostor_answer, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                           MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  ck_assert_msg(imp.d != NULL, "the impostor cannot listen at %s", addr);
}

START_TEST(member_at_address) {
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", harness_free_port());
  static bool mine[TOKENS_CAP];
  static uint32_t tokens[TOKENS_CAP];
  uint32_t n = bootstrap_n2_at(addr, mine, tokens);
  ck_assert_uint_gt(n, 0);
  char orig[300], cmd[800];
  snprintf(orig, sizeof orig, "%s/n2-arcs-before", env.dir);
  snprintf(cmd, sizeof cmd, "cp -a '%s/arcs' '%s'", env.a[2].data, orig);
  ck_assert_int_eq(system(cmd), 0);
  impostor_start(addr, tokens, n);
  fprintf(stderr, "n2 advertises %s, where n1 serves %u empty arcs signed as n2\n", addr, n);

  ck_assert_int_eq(e2e_ringctl(NULL, 0, "drain n2"), 0);
  char id[24], state[16];
  e2e_apply(id, 30);
  ck_assert_msg(ENV_WAIT(metric_sum(0, 2, "ring_agent_bad_signatures_total") > 0, 30),
                "no receiver refused the impostor's answers");
  double begun = harness_now();
  while (harness_now() - begun < 10) {
    ck_assert_msg(installed_at(0, 2, tokens, n) == 0, "a receiver installed one of n2's tokens");
    ck_assert_msg(!run_ended(id, state), "the run ended (%s) on the impostor's answers", state);
    harness_sleep_ms(500);
  }
  unsigned served = atomic_load(&imp.served);
  fprintf(stderr, "the impostor answered %u manifests; receivers refused %.0f answers\n", served,
          metric_sum(0, 2, "ring_agent_bad_signatures_total"));
  ck_assert_msg(served > 0, "the impostor never answered a manifest");
  check_stuck("n2", mine, "signature of n2", 10);
  ck_assert_double_eq(metric_sum(0, 2, "ring_agent_empty_arcs_total"), 0);

  /* The real n2 back at its own address: the move finishes, byte-identical. */
  impostor_stop();
  ck_assert_int_eq(proc_term(&env.a[2].p, 15), 0);
  env_agent_start(2, "n2", NULL);
  e2e_wait_done(id, 120);
  e2e_settle(2, 60);
  ck_assert_uint_eq(e2e_replicas_of("n2"), 0);
  ck_assert_uint_eq(same_as_before(orig, tokens, n), n); /* empty ones too: from n2's manifests */
  e2e_check(false);
  trust_done();
}
END_TEST

/* ----------------------------------------------------------- changed_key */

/* nodes/<id>'s pinned key, or with next its rotation's next key, into key
 * ("" if none). */
static void node_key(const char *id, bool next, char key[RK_KEY_HEX + 1]) {
  char what[64];
  snprintf(what, sizeof what, "nodes/%s", id);
  char *v = env_get(what);
  rk_node n;
  key[0] = '\0';
  if (v != NULL && rk_node_decode(v, strlen(v), &n, NULL) == RING_OK)
    memcpy(key, next ? n.next_key : n.key, RK_KEY_HEX + 1);
  free(v);
}

static void pinned_key(const char *id, char key[RK_KEY_HEX + 1]) { node_key(id, false, key); }

/* Status of a manifest request for token to slot `to`, signed by k as `as`. */
static long request_as(const arc_keyring *k, const char *as, int to, uint32_t token) {
  char path[64], v[ARC_AUTH_VALUE_MAX];
  snprintf(path, sizeof path, "/v1/arcs/%u/manifest", token);
  ck_assert_int_eq(arc_auth_sign_request(k, as, env.a[to].id, "GET", path, "", arc__wall_ms(), NULL,
                                         v, sizeof v),
                   RING_OK);
  return arc_http_get(env.a[to].listen, path, v, NULL, NULL).status;
}

/* n1 restarts with another key (a rebuilt host, or someone speaking as
 * it): the coordinator keeps the pinned key, reports n1 (metric, /healthz,
 * ringctl status) and its peers refuse what it signs; `ringctl trust n1`
 * pins the new key and n0 serves it again. */
START_TEST(changed_key) {
  const e2e_opts o = {.replicas = 2, .keys = 200};
  e2e_bootstrap(&o, 3, 1);
  char before[RK_KEY_HEX + 1], after[RK_KEY_HEX + 1];
  pinned_key("n1", before);
  ck_assert_msg(before[0] != '\0', "n1 has no pinned key");
  uint32_t tok[1];
  ck_assert_uint_eq(e2e_tokens_of("n0", tok, 1), 1);

  char key_dir[300], opt[400];
  snprintf(key_dir, sizeof key_dir, "%s/n1-new", env.dir);
  ck_assert_int_eq(mkdir(key_dir, 0700), 0);
  snprintf(opt, sizeof opt, "--key-file %s/node.key", key_dir);
  ck_assert_int_eq(proc_term(&env.a[1].p, 15), 0);
  env_agent_start(1, "n1", opt);
  const char *coord = w.coord_listen[0];
  ck_assert_msg(ENV_WAIT(metric_get(coord, "ring_coordinator_key_refused_nodes", "") == 1, 20),
                "the coordinator does not report n1's changed key");
  pinned_key("n1", after);
  ck_assert_str_eq(after, before); /* not taken */
  char url[64], *body = NULL;
  snprintf(url, sizeof url, "http://%s/healthz", coord);
  long hs = http_get(url, &body);
  ck_assert_msg(hs != 200 && body && strstr(body, "n1") && strstr(body, "ringctl trust n1"),
                "/healthz %ld: %.300s", hs, body ? body : "");
  free(body);
  char out[8192];
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "status"), 0);
  ck_assert_msg(strstr(out, "untrusted keys") && strstr(out, "node n1"), "%s", out);
  cJSON *j = e2e_status_json();
  const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "untrusted_keys");
  ck_assert_msg(cJSON_GetArraySize(u) == 1, "untrusted_keys: %d", cJSON_GetArraySize(u));
  cJSON_Delete(j);
  /* what the new n1 signs is refused by n0 until the key is trusted */
  cluster_pins = (test_etcd_pins){env.c, ENV_PREFIX};
  arc_keyring *k = test_member_keys(env.secret, key_dir, &cluster_pins);
  ck_assert_int_eq(request_as(k, "n1", 0, tok[0]), 401);
  ck_assert_double_ge(env_metric(0, "ring_agent_server_bad_signer_total"), 1);
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "trust n1"), 0);
  fprintf(stderr, "ringctl trust n1: %s", out);
  pinned_key("n1", after);
  ck_assert_str_ne(after, before);
  ck_assert_msg(ENV_WAIT(metric_get(coord, "ring_coordinator_key_refused_nodes", "") == 0, 20),
                "the coordinator still reports n1 after ringctl trust");
  ck_assert_msg(ENV_WAIT(request_as(k, "n1", 0, tok[0]) == 200, 10),
                "n0 still refuses n1's approved key");
  arc_keyring_free(k);
  e2e_check(false);
  trust_done();
}
END_TEST

/* ---------------------------------------------------------- key_rotation */

static void pinned_next(const char *id, char key[RK_KEY_HEX + 1]) { node_key(id, true, key); }

/* n1 rotates its key with no pause: it publishes the next key, an
 * operator trusts it (both pinned), n1 restarts signing with it and the
 * coordinator makes it the pinned key; n0 serves n1 at every step and the
 * coordinator never reports n1. */
START_TEST(key_rotation) {
  const e2e_opts o = {.replicas = 2, .keys = 200};
  e2e_bootstrap(&o, 3, 1);
  char k1[RK_KEY_HEX + 1], now[RK_KEY_HEX + 1], next[RK_KEY_HEX + 1];
  pinned_key("n1", k1);
  uint32_t tok[1];
  ck_assert_uint_eq(e2e_tokens_of("n0", tok, 1), 1);
  const char *coord = w.coord_listen[0];
  char next_dir[300], opt[400];
  snprintf(next_dir, sizeof next_dir, "%s/n1-next", env.dir);
  ck_assert_int_eq(mkdir(next_dir, 0700), 0);

  /* 1: n1 publishes its next key, still signing with the pinned one */
  snprintf(opt, sizeof opt, "--next-key-file %s/node.key", next_dir);
  ck_assert_int_eq(proc_term(&env.a[1].p, 15), 0);
  env_agent_start(1, "n1", opt);
  cluster_pins = (test_etcd_pins){env.c, ENV_PREFIX};
  arc_keyring *old = test_member_keys(env.secret, env.a[1].data, &cluster_pins);
  arc_keyring *neu = test_member_keys(env.secret, next_dir, &cluster_pins);
  ck_assert_msg(ENV_WAIT(request_as(old, "n1", 0, tok[0]) == 200, 10), "n0 refuses n1");
  /* 2: the operator trusts it: both keys pinned */
  char out[4096];
  ck_assert_int_eq(e2e_ringctl(out, sizeof out, "trust n1"), 0);
  pinned_key("n1", now);
  pinned_next("n1", next);
  ck_assert_str_eq(now, k1);
  ck_assert_msg(next[0] != '\0', "no next key pinned: %s", out);
  ck_assert_int_eq(request_as(old, "n1", 0, tok[0]), 200);
  /* 3: n1 signs with the next key: served; the coordinator makes it the key */
  snprintf(opt, sizeof opt, "--key-file %s/node.key", next_dir);
  ck_assert_int_eq(proc_term(&env.a[1].p, 15), 0);
  env_agent_start(1, "n1", opt);
  ck_assert_msg(ENV_WAIT(request_as(neu, "n1", 0, tok[0]) == 200, 5), "n0 refuses n1's next key");
  ck_assert_msg(ENV_WAIT((pinned_key("n1", now), strcmp(now, next) == 0), 20),
                "the coordinator did not make the next key n1's key");
  pinned_next("n1", next);
  ck_assert_str_eq(next, "");
  ck_assert_double_eq(metric_get(coord, "ring_coordinator_key_refused_nodes", ""), 0);
  ck_assert_int_eq(request_as(neu, "n1", 0, tok[0]), 200);
  arc_keyring_free(old);
  arc_keyring_free(neu);
  e2e_check(false);
  trust_done();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault_trust");
  trust_add(s, "stranger_at_address", 300, stranger_at_address);
  trust_add(s, "missing_disk", 300, missing_disk);
  trust_add(s, "half_empty_repair", 300, half_empty_repair);
  trust_add(s, "slow_clients", 400, slow_clients);
  trust_add(s, "accepted_loss", 300, accepted_loss);
  trust_add(s, "member_at_address", 300, member_at_address);
  trust_add(s, "changed_key", 200, changed_key);
  trust_add(s, "key_rotation", 200, key_rotation);
  return run_suite_as(s, 1);
}
