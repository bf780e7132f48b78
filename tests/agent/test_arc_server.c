/*
 * test_arc_server.c: the arc server as a hostile client sees it: no data
 * without the secret, no way out of arcs/<token>/, bad tokens and ranges
 * refused, oversized headers and half-sent requests cut off.
 */
#include "arc_env.h"
#include "check_main.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <sys/socket.h>

static arc_env env;

static void setup(void) {
  env_start_with(&env, 2);
  make_arc(env.src_dir, 5, 2, 100000);
}

static void teardown(void) { env_stop(&env); }

START_TEST(secret_required) {
  const char *paths[] = {"/v1/arcs/5/manifest", "/v1/arcs/5/files/f0", "/v1/arcs/5/files/../x",
                         "/nowhere"};
  const char *auths[] = {NULL,
                         "Bearer " TEST_SECRET,
                         "v1",
                         "v1 kid=00000000 node=dst to=src ts=1 nonce=00 mac=00",
                         "v1 kid=00000000 node=dst to=src ts=1 nonce=0000000000000000000000000000"
                         "0000 mac=00000000000000000000000000000000000000000000000000000000000"
                         "00000",
                         TEST_SECRET,
                         "v2 " TEST_SECRET};
  for (size_t p = 0; p < sizeof paths / sizeof *paths; p++)
    for (size_t a = 0; a < sizeof auths / sizeof *auths; a++) {
      http_reply r = arc_http_get(env.source, paths[p], auths[a], NULL, NULL);
      ck_assert_msg(r.status == 401, "%s with %s: %ld", paths[p], auths[a] ? auths[a] : "none",
                    r.status);
      ck_assert_uint_eq(r.body, 0);
    }
  arc_server_stats st;
  arc_server_stats_get(env.srv, &st);
  ck_assert_uint_eq(st.unauthorized, 28);
  ck_assert_uint_eq(st.bytes_out, 0);
}
END_TEST

START_TEST(serves_with_the_secret) {
  http_reply r = arc_http_get(env.source, "/v1/arcs/5/manifest", BEARER, NULL, NULL);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_gt(r.body, 50);
  r = arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, NULL, NULL);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(r.body, 100000);
  r = arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, "1000-1999", NULL);
  ck_assert_int_eq(r.status, 206);
  ck_assert_uint_eq(r.body, 1000);
  ck_assert_str_eq(r.content_range, "bytes 1000-1999/100000");
  r = arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, "99990-", NULL);
  ck_assert_int_eq(r.status, 206);
  ck_assert_uint_eq(r.body, 10);
  r = arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, "-7", NULL);
  ck_assert_int_eq(r.status, 206);
  ck_assert_uint_eq(r.body, 7);
  r = arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, "99990-200000", NULL);
  ck_assert_int_eq(r.status, 206); /* an end past the size is cut to it */
  ck_assert_uint_eq(r.body, 10);
}
END_TEST

START_TEST(no_way_out) {
  const char *paths[] = {
      "/v1/arcs/5/files/../../../../etc/passwd",
      "/v1/arcs/5/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
      "/v1/arcs/5/files/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
      "/v1/arcs/5/files/%2E%2E",
      "/v1/arcs/5/files/..",
      "/v1/arcs/5/files/.",
      "/v1/arcs/5/files/",
      "/v1/arcs/5/files//etc/passwd",
      "/v1/arcs/5/files/f0/../f1",
      "/v1/arcs/5/files/a%2fb",
      "/v1/arcs/5/files/.hidden",
      "/v1/arcs/5/files/f0%00.txt/x",
      "/v1/arcs/../../../etc/passwd",
      "/v1/arcs/5/../6/files/f0",
      "/v1/arcs/%2e%2e/files/f0",
      "/v1/arcs//etc/files/passwd",
  };
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    http_reply r = arc_http_get(env.source, paths[i], BEARER, NULL, NULL);
    ck_assert_msg(r.status == 400, "%s: %ld", paths[i], r.status);
  }
}
END_TEST

START_TEST(bad_tokens_and_unknown_arcs) {
  const char *bad[] = {"/v1/arcs/65536/manifest", "/v1/arcs/01/manifest",
                       "/v1/arcs/-1/manifest",    "/v1/arcs/abc/manifest",
                       "/v1/arcs/5x/files/f0",    "/v1/arcs/99999999999/manifest",
                       "/v1/arcs/+5/manifest",    "/v1/arcs//manifest"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    http_reply r = arc_http_get(env.source, bad[i], BEARER, NULL, NULL);
    ck_assert_msg(r.status == 400, "%s: %ld", bad[i], r.status);
  }
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/6/manifest", BEARER, NULL, NULL).status, 404);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/6/files/f0", BEARER, NULL, NULL).status, 404);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/files/f9", BEARER, NULL, NULL).status, 404);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/other", BEARER, NULL, NULL).status, 404);
  ck_assert_int_eq(arc_http_get(env.source, "/v2/arcs/5/manifest", BEARER, NULL, NULL).status, 404);
  /* an arc being fetched into tmp/ is not served */
  char p[4096];
  snprintf(p, sizeof p, "%s/tmp/6.1", env.src_dir);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  write_pattern(p, "f0", 10, 1);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/6/files/f0", BEARER, NULL, NULL).status, 404);
  arc_server_stats st;
  arc_server_stats_get(env.srv, &st);
  ck_assert_uint_eq(st.bad_requests, 8);
}
END_TEST

START_TEST(absurd_ranges) {
  const char *unsatisfiable[] = {"100000-", "100000-100001", "200000-300000", "5-4", "-0"};
  for (size_t i = 0; i < sizeof unsatisfiable / sizeof *unsatisfiable; i++) {
    http_reply r = arc_http_get(env.source, "/v1/arcs/5/files/f0", BEARER, unsatisfiable[i], NULL);
    ck_assert_msg(r.status == 416, "%s: %ld", unsatisfiable[i], r.status);
    ck_assert_uint_eq(r.body, 0);
    ck_assert_str_eq(r.content_range, "bytes */100000");
    /* signed by the source over 416, the token and the empty body */
    arc_auth a;
    ck_assert_msg(arc_auth_parse(r.sig, strlen(r.sig), &a) == RING_OK, "416 unsigned: \"%s\"",
                  r.sig);
    ck_assert_int_eq(arc_auth_verify_answer(test_keys(), r.sig, strlen(r.sig), TEST_SRC_ID, a.nonce,
                                            416, 5, "", 0),
                     RING_OK);
  }
  const char *malformed[] = {"Range: bytes=1-2,5-6", "Range: bytes=x-", "Range: items=0-1",
                             "Range: bytes=99999999999999999999999-", "Range: bytes=1-2-3"};
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
    http_reply r = arc_http_get(env.source, "/v1/arcs/5/files/f0", BEARER, NULL, malformed[i]);
    ck_assert_msg(r.status == 400, "%s: %ld", malformed[i], r.status);
  }
}
END_TEST

START_TEST(other_methods) {
  CURL *c = curl_easy_init();
  char url[128];
  snprintf(url, sizeof url, "http://%s/v1/arcs/5/files/f0", env.source);
  char line[512];
  signed_line(line, sizeof line, "DELETE", "/v1/arcs/5/files/f0", "", arc__wall_ms());
  struct curl_slist *h = curl_slist_append(NULL, line);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
  curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  ck_assert_int_eq(status, 405);
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
}
END_TEST

START_TEST(oversized_headers) {
  char *big = malloc(64 << 10);
  memset(big, 'a', 64 << 10);
  memcpy(big, "X-Big: ", 7);
  big[(64 << 10) - 1] = '\0';
  http_reply r = arc_http_get(env.source, "/v1/arcs/5/files/f0", BEARER, NULL, big);
  ck_assert_msg(r.status == 431 || r.status == 413, "status %ld", r.status);
  ck_assert_uint_lt(r.body, 1000); /* an error text, never the file */
  free(big);
}
END_TEST

/* A client that sends half a request and waits: the server (timeout 2 s)
 * closes the connection. */
START_TEST(slow_loris) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(arc_server_port(env.srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char half[] = "GET /v1/arcs/5/files/f0 HTTP/1.1\r\nHost: x\r\nAuthoriz";
  ck_assert_int_eq(send(fd, half, sizeof half - 1, 0), (ssize_t)(sizeof half - 1));
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  double t0 = now_s();
  char buf[256];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  double dt = now_s() - t0;
  ck_assert_msg(n <= 0, "the server answered a half request");
  ck_assert_msg(dt < 4.5, "connection held %.1f s with a 2 s timeout", dt);
  close(fd);
}
END_TEST

/* The X-Ring-Auth value of a GET of path from TEST_DST_ID to `to`, at ts_ms. */
static void signed_value(char *v, size_t cap, const char *path, const char *to, int64_t ts_ms,
                         unsigned char nonce[ARC_NONCE_LEN]) {
  ck_assert_int_eq(
      arc_auth_sign_request(test_keys(), TEST_DST_ID, to, "GET", path, "", ts_ms, nonce, v, cap),
      RING_OK);
}

/* A signed request sent twice is refused the second time; a time beyond
 * the skew either way is refused; a signature for another path or another
 * node is refused. Each refusal is counted by its reason. */
START_TEST(replays_and_skew_refused) {
  const char *m = "/v1/arcs/5/manifest";
  char v[ARC_AUTH_VALUE_MAX];
  int64_t now = arc__wall_ms();
  signed_value(v, sizeof v, m, TEST_SRC_ID, now, NULL);
  ck_assert_int_eq(arc_http_get(env.source, m, v, NULL, NULL).status, 200);
  http_reply r = arc_http_get(env.source, m, v, NULL, NULL);
  ck_assert_int_eq(r.status, 401); /* the very same request again */
  ck_assert_uint_eq(r.body, 0);
  signed_value(v, sizeof v, m, TEST_SRC_ID, now - ARC_SKEW_MS_DEFAULT - 1000, NULL);
  ck_assert_int_eq(arc_http_get(env.source, m, v, NULL, NULL).status, 401);
  signed_value(v, sizeof v, m, TEST_SRC_ID, now + ARC_SKEW_MS_DEFAULT + 1000, NULL);
  ck_assert_int_eq(arc_http_get(env.source, m, v, NULL, NULL).status, 401);
  signed_value(v, sizeof v, m, TEST_SRC_ID, now + ARC_SKEW_MS_DEFAULT / 2, NULL);
  ck_assert_int_eq(arc_http_get(env.source, m, v, NULL, NULL).status, 200); /* within the bound */
  /* within the bound but before the server started: a process before it
   * may have accepted it (the nonce table is not kept across restarts) */
  signed_value(v, sizeof v, m, TEST_SRC_ID, now - ARC_SKEW_MS_DEFAULT / 2, NULL);
  arc_server_stats before;
  arc_server_stats_get(env.srv, &before);
  ck_assert_int_eq(arc_http_get(env.source, m, v, NULL, NULL).status, 401);
  signed_value(v, sizeof v, "/v1/arcs/5/files/f0", TEST_SRC_ID, now, NULL);
  ck_assert_int_eq(arc_http_get(env.source, m, v, NULL, NULL).status, 401); /* another path's */
  signed_value(v, sizeof v, m, "another-node", now, NULL);
  ck_assert_int_eq(arc_http_get(env.source, m, v, NULL, NULL).status, 401); /* meant for another */
  char range[512];
  signed_line(range, sizeof range, "GET", "/v1/arcs/5/files/f0", "bytes=0-9", now);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/files/f0",
                                range + strlen(ARC_AUTH_HEADER) + 2, "0-99", NULL)
                       .status,
                   401); /* signed for another range */
  arc_server_stats st;
  arc_server_stats_get(env.srv, &st);
  ck_assert_uint_eq(st.replayed, before.replayed + 1);
  ck_assert_uint_eq(st.replayed, 2);
  ck_assert_uint_eq(st.skewed, 2);
  ck_assert_uint_eq(st.unauthorized, 7);
}
END_TEST

/* Answers a receiver acts on are signed by the server's node id for the
 * request's nonce, token and body; anything else does not verify. */
START_TEST(answers_are_signed) {
  const char *m = "/v1/arcs/5/manifest", *gone = "/v1/arcs/6/manifest";
  char v[ARC_AUTH_VALUE_MAX];
  unsigned char nonce[ARC_NONCE_LEN], other[ARC_NONCE_LEN] = {0};
  signed_value(v, sizeof v, m, TEST_SRC_ID, arc__wall_ms(), nonce);
  http_reply r = arc_http_get(env.source, m, v, NULL, NULL);
  ck_assert_int_eq(r.status, 200);
  const arc_keyring *k = test_keys();
  size_t sl = strlen(r.sig);
  ck_assert_int_eq(arc_auth_verify_answer(k, r.sig, sl, TEST_SRC_ID, nonce, 200, 5, r.text, r.body),
                   RING_OK);
  ck_assert_int_eq(arc_auth_verify_answer(k, r.sig, sl, "dst", nonce, 200, 5, r.text, r.body),
                   RING_EAUTH); /* another signer */
  ck_assert_int_eq(arc_auth_verify_answer(k, r.sig, sl, TEST_SRC_ID, other, 200, 5, r.text, r.body),
                   RING_EAUTH); /* another request */
  ck_assert_int_eq(arc_auth_verify_answer(k, r.sig, sl, TEST_SRC_ID, nonce, 200, 6, r.text, r.body),
                   RING_EAUTH); /* another token */
  r.text[10] ^= 1;
  ck_assert_int_eq(arc_auth_verify_answer(k, r.sig, sl, TEST_SRC_ID, nonce, 200, 5, r.text, r.body),
                   RING_EAUTH); /* another body */
  signed_value(v, sizeof v, gone, TEST_SRC_ID, arc__wall_ms(), nonce);
  r = arc_http_get(env.source, gone, v, NULL, NULL);
  ck_assert_int_eq(r.status, 404);
  ck_assert_int_eq(
      arc_auth_verify_answer(k, r.sig, strlen(r.sig), TEST_SRC_ID, nonce, 404, 6, r.text, r.body),
      RING_OK); /* "not held", signed: an error at the receiver, never emptiness */
}
END_TEST

/* A symbolic link is never followed: not at arcs/<token>, not at a name. */
START_TEST(symlinks_not_served) {
  char outside[4096], link[4096];
  snprintf(outside, sizeof outside, "%s/outside", env.src_dir);
  ck_assert_int_eq(mkdir(outside, 0755), 0);
  write_pattern(outside, "f0", 100, 9);
  snprintf(link, sizeof link, "%s/arcs/9", env.src_dir);
  ck_assert_int_eq(symlink(outside, link), 0);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/9/files/f0", BEARER, NULL, NULL).status, 404);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/9/manifest", BEARER, NULL, NULL).status, 404);
  snprintf(link, sizeof link, "%s/arcs/5/ln", env.src_dir);
  char target[4200];
  snprintf(target, sizeof target, "%s/f0", outside);
  ck_assert_int_eq(symlink(target, link), 0);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/files/ln", BEARER, NULL, NULL).status, 404);
}
END_TEST

/* arcs/ gone (a data disk not mounted): 503, never "not held". */
START_TEST(store_missing_is_not_not_held) {
  char arcs[4096], away[4096];
  snprintf(arcs, sizeof arcs, "%s/arcs", env.src_dir);
  snprintf(away, sizeof away, "%s/arcs.away", env.src_dir);
  ck_assert_int_eq(rename(arcs, away), 0);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/manifest", BEARER, NULL, NULL).status, 503);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/files/f0", BEARER, NULL, NULL).status, 503);
  ck_assert(!arc_store_usable(env.src));
  arc_server_stats st;
  arc_server_stats_get(env.srv, &st);
  ck_assert_uint_eq(st.store_missing, 2);
  ck_assert_uint_eq(st.not_held, 0);
  ck_assert_int_eq(rename(away, arcs), 0);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/manifest", BEARER, NULL, NULL).status, 200);
}
END_TEST

/* Opens a connection and sends a signed GET of a large file without
 * reading the answer: the server streams into a full socket, holding its
 * slot until the connection goes. Returns the socket. */
static int hold_stream(const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(arc_server_port(env.srv))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  char auth[512], req[1024];
  signed_line(auth, sizeof auth, "GET", path, "", arc__wall_ms());
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n", path, auth);
  ck_assert_int_eq(send(fd, req, (size_t)n, 0), n);
  return fd;
}

static arc_server_stats stats(void) {
  arc_server_stats st;
  arc_server_stats_get(env.srv, &st);
  return st;
}

/* throttle.moves_per_node on the source side: past the limit a file
 * request is answered 503 busy, signed and counted; the slot comes back
 * when the stream's connection ends; 0 lifts the limit. */
START_TEST(streams_limited) {
  make_arc(env.src_dir, 7, 1, 32u << 20);
  arc_server_limit(env.srv, 1);
  int fd = hold_stream("/v1/arcs/7/files/f0");
  double end = now_s() + 5;
  while (stats().serving < 1 && now_s() < end)
    usleep(10000);
  ck_assert_uint_eq(stats().serving, 1);
  http_reply r = arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, NULL, NULL);
  ck_assert_int_eq(r.status, 503);
  ck_assert_ptr_nonnull(strstr(r.text, "busy"));
  ck_assert_uint_eq(stats().serve_busy, 1);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/manifest", BEARER, NULL, NULL).status, 200);
  close(fd);
  end = now_s() + 10;
  while (stats().serving > 0 && now_s() < end)
    usleep(10000);
  ck_assert_uint_eq(stats().serving, 0);
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, NULL, NULL).status, 200);
  arc_server_limit(env.srv, 0);
  fd = hold_stream("/v1/arcs/7/files/f0");
  ck_assert_int_eq(arc_http_get(env.source, "/v1/arcs/5/files/f1", BEARER, NULL, NULL).status, 200);
  close(fd);
  ck_assert_uint_eq(stats().serve_busy, 1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("arc_server");
  TCase *tc = tcase_create("server");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, secret_required);
  tcase_add_test(tc, serves_with_the_secret);
  tcase_add_test(tc, no_way_out);
  tcase_add_test(tc, bad_tokens_and_unknown_arcs);
  tcase_add_test(tc, absurd_ranges);
  tcase_add_test(tc, other_methods);
  tcase_add_test(tc, oversized_headers);
  tcase_add_test(tc, slow_loris);
  tcase_add_test(tc, replays_and_skew_refused);
  tcase_add_test(tc, answers_are_signed);
  tcase_add_test(tc, symlinks_not_served);
  tcase_add_test(tc, store_missing_is_not_not_held);
  tcase_add_test(tc, streams_limited);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = run_suite(suite());
  curl_global_cleanup();
  return rc;
}
