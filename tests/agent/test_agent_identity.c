/*
 * test_agent_identity.c: a node's identity on the arc transfer (proto/arc.md,
 * "Authentication"), against real ring-agent processes and real etcd; the
 * keys are pinned in nodes/<id> as the coordinator pins them (env_publish).
 *   refuses_open_secrets  a secret or key file group or others may read, or
 *                         a secret under 32 bytes: the agent exits 1 at
 *                         start, naming the mode or the length, and never
 *                         registers.
 *   forged_request        member c, with the cluster secret and its own
 *                         key, asks a for an arc signing as b: refused
 *                         (401), counted and named in a's /metrics
 *                         (ring_agent_server_bad_signer_total,
 *                         ring_agent_server_last_bad_signer{node="b"});
 *                         the same request signed as c itself is served.
 *   replay_after_restart  a request a accepted is sent again after a
 *                         restarts (its nonce table is gone): refused as a
 *                         replay, counted.
 */
#include "arc_env.h"
#include "test_agent_env.h"

#define A 0
#define B 1
#define C 2

/* Runs ring-agent as `id` with the given extra arguments; its exit status,
 * what it printed in out. */
static int run_agent(const char *id, const char *secret, const char *extra, char *out, size_t cap) {
  env_agent *a = env_agent_init(A, id);
  char line[2048], *argv[PROC_ARGS_MAX];
  snprintf(line, sizeof line,
           "%s --endpoints %s --cluster " ENV_CLUSTER " --id %s --listen %s --data-dir %s"
           " --secret-file %s %s",
           RING_AGENT_BIN, env.etcd.endpoints, id, a->listen, a->data, secret, extra);
  env_argv(line, argv);
  return proc_run(argv, 20, out, cap);
}

/* A file at env.dir/name with text and mode; its path in path. */
static void write_file(const char *name, const char *text, mode_t mode, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", env.dir, name);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  ck_assert_int_eq(chmod(path, mode), 0);
}

/* The agent refuses to start, naming `why`, and has not registered. */
static void refused(const char *secret, const char *extra, const char *why) {
  char out[8192];
  int rc = run_agent("a", secret, extra, out, sizeof out);
  ck_assert_msg(rc == 1, "exit %d (want 1); printed: %.600s", rc, out);
  ck_assert_msg(strstr(out, why) != NULL, "no \"%s\" in: %.600s", why, out);
  char *alive = env_get("alive/a");
  ck_assert_msg(alive == NULL, "alive/a was written: %s", alive);
}

START_TEST(refuses_open_secrets) {
  char open_secret[300], short_secret[300], open_key[300], key_opt[400];
  write_file("secret-0644", "an-ordinary-secret-of-at-least-32-bytes\n", 0644, open_secret,
             sizeof open_secret);
  write_file("secret-short", "short\n", 0600, short_secret, sizeof short_secret);
  refused(open_secret, "", "mode 0644");
  refused(short_secret, "", "5 bytes, under 32");
  /* a key file made by the agent itself, then opened to the group */
  write_file("node-0640.key", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
             0640, open_key, sizeof open_key);
  snprintf(key_opt, sizeof key_opt, "--key-file %s", open_key);
  refused(env.secret, key_opt, "mode 0640");
  env_pass();
}
END_TEST

/* ----------------------------------------------------- signed requests */

static test_etcd_pins pins;

/* Member slot i's keyring: the cluster secret and its own node key. */
static arc_keyring *member(int i) {
  pins = (test_etcd_pins){env.c, ENV_PREFIX};
  return test_member_keys(env.secret, env.a[i].data, &pins);
}

/* The X-Ring-Auth value of a manifest request for token to slot `to`,
 * signed by k as node `as`. */
static void sign_as(const arc_keyring *k, const char *as, int to, uint32_t token, char *value,
                    size_t cap, char *path, size_t path_cap) {
  snprintf(path, path_cap, "/v1/arcs/%u/manifest", token);
  ck_assert_int_eq(
      arc_auth_sign_request(k, as, env.a[to].id, "GET", path, "", arc__wall_ms(), NULL, value, cap),
      RING_OK);
}

/* Starts a, b and c, publishes a table that pins them and gives a token 0
 * (R 1: slot i owns tokens i, i + 3, ...); waits until a holds its arc. */
static void three_members(void) {
  env_config(1, 2, 0);
  env_agent_start(A, "a", NULL);
  env_agent_start(B, "b", NULL);
  env_agent_start(C, "c", NULL);
  ck_assert(ENV_WAIT(env_alive_is("a", env.a[A].listen) && env_alive_is("b", env.a[B].listen) &&
                         env_alive_is("c", env.a[C].listen),
                     10));
  env_publish_free(env_table(1, 3, 1));
  ck_assert_msg(ENV_WAIT(env_arc_has(A, 0), 10), "a never made its arc of token 0");
  ck_assert_msg(ENV_WAIT(env_metric(A, "ring_agent_pinned_nodes") == 3, 10),
                "a never read the three pins");
}

START_TEST(forged_request) {
  three_members();
  arc_keyring *c = member(C);
  char v[ARC_AUTH_VALUE_MAX], path[64];
  sign_as(c, "c", A, 0, v, sizeof v, path, sizeof path);
  http_reply r = arc_http_get(env.a[A].listen, path, v, NULL, NULL);
  ck_assert_msg(r.status == 200, "c's own request: %ld", r.status); /* the control */
  sign_as(c, "b", A, 0, v, sizeof v, path, sizeof path);
  r = arc_http_get(env.a[A].listen, path, v, NULL, NULL);
  ck_assert_int_eq(r.status, 401);
  ck_assert_uint_eq(r.body, 0);
  ck_assert(ENV_WAIT(env_metric(A, "ring_agent_server_bad_signer_total") == 1, 5));
  ck_assert_msg(metric_get(env.a[A].metrics, "ring_agent_server_last_bad_signer", "node=\"b\"") ==
                    1,
                "a's /metrics does not name b");
  arc_keyring_free(c);
  env_pass();
}
END_TEST

START_TEST(replay_after_restart) {
  three_members();
  arc_keyring *b = member(B);
  char v[ARC_AUTH_VALUE_MAX], path[64];
  sign_as(b, "b", A, 0, v, sizeof v, path, sizeof path);
  ck_assert_int_eq(arc_http_get(env.a[A].listen, path, v, NULL, NULL).status, 200);
  ck_assert_int_eq(arc_http_get(env.a[A].listen, path, v, NULL, NULL).status, 401); /* a replay */
  ck_assert_int_eq(proc_term(&env.a[A].p, 10), 0);
  env_agent_start(A, "a", NULL);
  /* a serves b again (a fresh request), then the recorded one comes back */
  char fresh[ARC_AUTH_VALUE_MAX];
  bool served = false;
  for (double end = harness_now() + 10; !served && harness_now() < end; harness_sleep_ms(100)) {
    sign_as(b, "b", A, 0, fresh, sizeof fresh, path, sizeof path);
    served = arc_http_get(env.a[A].listen, path, fresh, NULL, NULL).status == 200;
  }
  ck_assert_msg(served, "a does not serve b after its restart");
  http_reply r = arc_http_get(env.a[A].listen, path, v, NULL, NULL);
  ck_assert_msg(r.status == 401, "the request recorded before the restart: %ld", r.status);
  ck_assert_double_eq(env_metric(A, "ring_agent_server_replays_total"), 1);
  arc_keyring_free(b);
  env_pass();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("agent_identity");
  env_add(s, "secrets", 60, refuses_open_secrets);
  env_add(s, "forged", 60, forged_request);
  env_add(s, "replay", 60, replay_after_restart);
  return s;
}

int main(void) { return run_suite_as(suite(), 1); }
