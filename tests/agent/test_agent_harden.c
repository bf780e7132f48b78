/*
 * test_agent_harden.c: a real ring-agent against hostile peers and a
 * hostile data directory:
 *   - keep-alive: after one signed request on a kept-alive connection, a
 *     second request whose headers trickle in is cut at --header-deadline;
 *   - a FIFO and a symbolic link planted in arcs/<token>/ are refused
 *     (counted, named in the log), never block an arc worker, and other
 *     arcs are served meanwhile;
 *   - an alive/ value over the cap the coordinator applies is refused
 *     (counted, named), and the agent goes on acking tables.
 * Requests are raw HTTP/1.1 over a socket, signed with the cluster secret
 * as a peer would sign them.
 */
#include "test_agent_env.h" /* first: _GNU_SOURCE */

#include "arc.h"
#include "records.h"

#include <netinet/in.h>
#include <sodium.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------- raw requests */

static int get_once(int i, const char *path, char *buf, size_t cap, double timeout_s);

/* Peer p1's keyring: the cluster secret and a node key of its own (a fresh
 * random one, which never leaves this process). */
/* The agents' keys as p1 finds them: alive/<id>'s key (what the
 * coordinator would pin at a join; these tests run none). */
static uint32_t agent_pins(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  (void)ctx;
  if (pk == NULL)
    return 0; /* a failed pin: nothing to look at again here */
  cJSON *a = env_alive(node);
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(a, "key");
  size_t got = 0;
  bool ok = cJSON_IsString(k) &&
            sodium_hex2bin(pk[0], ARC_PK_LEN, k->valuestring, strlen(k->valuestring), NULL, &got,
                           NULL) == 0 &&
            got == ARC_PK_LEN;
  cJSON_Delete(a);
  return ok;
}

static arc_keyring *peer_keys(void) {
  static arc_keyring *keys;
  ring_error err;
  if (keys == NULL) {
    ck_assert_msg(arc_keyring_load(env.secret, &keys, &err) == RING_OK, "%s", err.message);
    arc_keyring_set_pins(keys, agent_pins, NULL);
  }
  return keys;
}

/* Pins p1's key in nodes/p1 as the coordinator pins a node's key at its
 * first join, then waits until agent i verifies p1's requests (it reads
 * nodes/ again within a second of a signer it does not know). */
static void pin_peer(int i) {
  unsigned char pk[ARC_PK_LEN];
  arc_keyring_public(peer_keys(), pk);
  rk_node n = {.id = "p1", .addr = "127.0.0.1:1", .weight = 1.0, .state = RING_NODE_ACTIVE};
  sodium_bin2hex(n.key, sizeof n.key, pk, sizeof pk);
  char *v;
  size_t vl;
  ck_assert_int_eq(rk_node_encode(&n, &v, &vl), RING_OK);
  env_put("nodes/p1", v);
  free(v);
  char buf[4096];
  ck_assert_msg(ENV_WAIT(get_once(i, "/v1/arcs/1/manifest", buf, sizeof buf, 5) != 401, 10),
                "agent %d never took p1's pinned key: %s", i, buf);
}

/* The X-Ring-Auth value of a GET of path to agent i, signed as peer "p1". */
static void sign_get(int i, const char *path, char *value, size_t cap) {
  arc_keyring *keys = peer_keys();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  ck_assert_int_eq(
      arc_auth_sign_request(keys, "p1", env.a[i].id, "GET", path, "", now, NULL, value, cap),
      RING_OK);
}

/* A connection to agent i's arc server. */
static int dial(int i) {
  int port = atoi(strrchr(env.a[i].listen, ':') + 1);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_int_ge(fd, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  return fd;
}

static void send_all(int fd, const char *s) {
  ck_assert_int_eq(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Sends a signed keep-alive GET of path to agent i on fd. */
static void send_get(int i, int fd, const char *path) {
  char auth[512], req[1024];
  sign_get(i, path, auth, sizeof auth);
  snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n%s: %s\r\n\r\n", path, ARC_AUTH_HEADER,
           auth);
  send_all(fd, req);
}

/* Reads one response (headers and a Content-Length body) into buf within
 * timeout_s. Returns its status, or 0 when none came in time. */
static int read_reply(int fd, char *buf, size_t cap, double timeout_s) {
  size_t n = 0;
  double end = harness_now() + timeout_s;
  buf[0] = '\0';
  while (harness_now() < end && n + 1 < cap) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0)
      continue;
    ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
    if (r <= 0)
      break;
    buf[n += (size_t)r] = '\0';
    char *body = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "\r\nContent-Length: ");
    if (body != NULL && cl != NULL && (size_t)(body + 4 - buf) + strtoul(cl + 18, NULL, 10) <= n)
      return atoi(buf + 9);
  }
  return 0;
}

/* One signed GET on a connection of its own: the status, 0 on no answer. */
static int get_once(int i, const char *path, char *buf, size_t cap, double timeout_s) {
  int fd = dial(i);
  send_get(i, fd, path);
  int status = read_reply(fd, buf, cap, timeout_s);
  close(fd);
  return status;
}

static double agent_metric(int i, const char *name) {
  double v = env_metric(i, name);
  return isnan(v) ? 0 : v;
}

/* ------------------------------------------------------------- keep-alive */

/* The header deadline holds for every request of a kept-alive connection,
 * not only the first: the arc server's own completion callback used to
 * replace the one that arms it again. */
START_TEST(keep_alive_header_deadline) {
  env_agent_start(0, "h0", "--header-deadline 1s --allow-from 127.0.0.1");
  pin_peer(0);
  int fd = dial(0);
  char buf[4096];
  send_get(0, fd, "/v1/arcs/1/manifest");
  ck_assert_int_eq(read_reply(fd, buf, sizeof buf, 5), 404); /* signed "not held" */
  ck_assert_msg(strcasestr(buf, "Connection: close") == NULL, "not kept alive: %s", buf);
  double cuts = agent_metric(0, "ring_agent_arc_header_deadline_cuts_total");
  send_all(fd, "GET /v1/arcs/1/manifest HTTP/1.1\r\n");
  double start = harness_now(), closed_at = 0;
  while (closed_at == 0 && harness_now() - start < 6) { /* a header line every 100 ms */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if ((poll(&p, 1, 100) > 0 && recv(fd, buf, sizeof buf, 0) <= 0) ||
        send(fd, "X-Trickle: 1\r\n", 14, MSG_NOSIGNAL) < 0)
      closed_at = harness_now();
  }
  close(fd);
  ck_assert_msg(closed_at != 0, "a trickled second request was still open after 6 s");
  ck_assert_msg(closed_at - start < 3.0, "cut after %.2f s, deadline 1 s", closed_at - start);
  ck_assert_msg(ENV_WAIT(agent_metric(0, "ring_agent_arc_header_deadline_cuts_total") > cuts, 5),
                "the cut is not counted");
  env_pass();
}
END_TEST

/* ------------------------------------------------------- odd files in arcs/ */

static void plant(const char *what, uint32_t token, const char *name) {
  char path[400];
  snprintf(path, sizeof path, "%s/arcs/%u/%s", env.a[0].data, token, name);
  if (strcmp(what, "fifo") == 0)
    ck_assert_int_eq(mkfifo(path, 0644), 0);
  else
    ck_assert_int_eq(symlink("/etc/passwd", path), 0);
}

/* A FIFO or a symbolic link under arcs/<token>/ is neither listed nor
 * served: asked for by name (more times than the server has workers) it is
 * refused at once, counted and named, and other arcs are served meanwhile.
 * Opened without O_NONBLOCK, a FIFO used to hold each worker in open(2). */
START_TEST(fifo_and_link_refused) {
  env_agent_start(0, "h0", "--allow-from 127.0.0.1");
  pin_peer(0);
  env_arc_write(0, 1, 2, 4096, 7);
  env_arc_write(0, 2, 1, 1000, 8);
  plant("fifo", 1, "pipe");
  plant("link", 1, "link");
  char buf[8192];
  for (int k = 0; k < 6; k++) /* the server has 4 workers */
    ck_assert_int_eq(get_once(0, "/v1/arcs/1/files/pipe", buf, sizeof buf, 5), 404);
  ck_assert_int_eq(get_once(0, "/v1/arcs/1/files/link", buf, sizeof buf, 5), 404);
  ck_assert_int_eq(get_once(0, "/v1/arcs/2/files/f0", buf, sizeof buf, 5), 200);
  ck_assert_int_eq(get_once(0, "/v1/arcs/1/manifest", buf, sizeof buf, 5), 200);
  const char *body = strstr(buf, "\r\n\r\n");
  ck_assert_msg(strstr(body, "\"f0\"") && strstr(body, "\"f1\""), "manifest: %s", body);
  ck_assert_msg(!strstr(body, "pipe") && !strstr(body, "link"), "manifest lists: %s", body);
  /* 7 refused by name, 2 more by the manifest's listing */
  ck_assert_msg(ENV_WAIT(agent_metric(0, "ring_agent_arc_files_refused_total") >= 9, 5),
                "refusals counted: %g", agent_metric(0, "ring_agent_arc_files_refused_total"));
  ck_assert_msg(ENV_WAIT(file_contains(env.a[0].log, "not a regular file") &&
                             file_contains(env.a[0].log, "file=1/"),
                         5),
                "the refusal is not named in the log");
  env_pass();
}
END_TEST

/* ---------------------------------------------------------- alive/ values */

/* An alive/ value over the cap is dropped as it arrives, counted and
 * named; the agent goes on with the table as if that host were down. */
START_TEST(oversized_alive_refused) {
  env_config(1, 2, 0);
  size_t big = 4 * RK_ALIVE_VALUE_MAX + 100;
  char *v = malloc(big + 1);
  ck_assert_ptr_nonnull(v);
  memset(v, 'x', big);
  v[big] = '\0';
  env_put("alive/evil", v);
  free(v);
  env_agent_start(0, "h0", NULL);
  env_publish_free(env_table(1, 1, 1));
  ck_assert_msg(ENV_WAIT(env_ack("h0") == 1, 20), "the agent does not ack version 1");
  ck_assert_msg(ENV_WAIT(agent_metric(0, "ring_agent_alive_refused_total") >= 1, 10),
                "the oversized alive/ value is not counted");
  ck_assert_msg(file_contains(env.a[0].log, "host=evil"), "the refused host is not named");
  char url[64];
  snprintf(url, sizeof url, "http://%s/healthz", env.a[0].metrics);
  ck_assert_int_eq(http_get(url, NULL), 200);
  env_pass();
}
END_TEST

int main(void) {
  Suite *s = suite_create("agent_harden");
  env_add(s, "keep_alive_header_deadline", 60, keep_alive_header_deadline);
  env_add(s, "fifo_and_link_refused", 60, fifo_and_link_refused);
  env_add(s, "oversized_alive_refused", 60, oversized_alive_refused);
  return run_suite_as(s, 1);
}
