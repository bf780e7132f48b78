/*
 * test_arc_fetch.c: fetching arcs from a real arc server on 127.0.0.1:
 * whole arcs byte for byte, one connection for the arcs of one fetcher,
 * resumption after an interrupted transfer, a
 * byte flipped at the source mid-transfer, refusals (secret, unknown arc,
 * dead source, already installed), stray leftovers, and a full disk.
 */
#include "arc_env.h"
#include "check_main.h"

#include <check.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>

static arc_env env;

static void setup(void) { env_start(&env); }
static void teardown(void) { env_stop(&env); }

static arc_fetch_opts opts(void) { return test_fetch_opts(); }

START_TEST(whole_arc_byte_for_byte) {
  make_arc(env.src_dir, 77, 5, 300001);
  char empty[4096];
  snprintf(empty, sizeof empty, "%s/arcs/77", env.src_dir);
  write_pattern(empty, "zero-length", 0, 1);
  arc_fetch_opts o = opts();
  arc_fetch_result res;
  ring_error err;
  ck_assert_msg(arc_fetch(env.dst, env.source, 77, 3, &o, &res, &err) == RING_OK, "%s",
                err.message);
  ck_assert_uint_eq(res.bytes, 5 * 300001);
  ck_assert_uint_eq(res.checksum_failures, 0);
  ck_assert_uint_eq(res.resumed_files, 0);
  ck_assert(arc_store_has(env.dst, 77));
  ck_assert(same_arc(env.src, env.dst, 77));
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/tmp/77.3", env.dst_dir);
  ck_assert_int_eq(access(tmp, F_OK), -1); /* renamed away */

  /* installed already: nothing replaced */
  ck_assert_int_eq(arc_fetch(env.dst, env.source, 77, 4, &o, &res, &err), RING_EEXIST);
  /* an empty arc is an arc too; a URL base works as a source */
  make_arc(env.src_dir, 0, 0, 0);
  char url[96];
  snprintf(url, sizeof url, "http://%s/", env.source);
  ck_assert_msg(arc_fetch(env.dst, url, 0, 1, &o, &res, &err) == RING_OK, "%s", err.message);
  ck_assert(arc_store_has(env.dst, 0));
}
END_TEST

/* One arc_fetcher fetches arc after arc over one connection, and what it
 * writes (whole staged blocks with O_DIRECT, tails through the page cache)
 * is byte for byte the source. */
START_TEST(a_fetcher_keeps_its_connection) {
  make_arc(env.src_dir, 60, 2, 3 << 20); /* whole blocks only */
  make_arc(env.src_dir, 61, 3, 1000003); /* each with a tail */
  make_arc(env.src_dir, 62, 1, 5000);
  arc_fetch_opts o = opts();
  o.fetcher = arc_fetcher_new();
  ck_assert_ptr_nonnull(o.fetcher);
  arc_server_stats before, after;
  arc_server_stats_get(env.srv, &before);
  ring_error err;
  for (uint32_t t = 60; t <= 61; t++) {
    ck_assert_msg(arc_fetch(env.dst, env.source, t, 1, &o, NULL, &err) == RING_OK, "%s",
                  err.message);
    ck_assert(same_arc(env.src, env.dst, t));
  }
  arc_server_stats_get(env.srv, &after);
  ck_assert_uint_eq(after.connections - before.connections, 1);
  arc_fetcher_free(o.fetcher);
  o.fetcher = NULL; /* one for this call: a connection of its own */
  ck_assert_msg(arc_fetch(env.dst, env.source, 62, 1, &o, NULL, &err) == RING_OK, "%s",
                err.message);
  ck_assert(same_arc(env.src, env.dst, 62));
  arc_server_stats_get(env.srv, &before);
  ck_assert_uint_eq(before.connections - after.connections, 1);
}
END_TEST

START_TEST(refusals) {
  make_arc(env.src_dir, 8, 1, 1000);
  arc_fetch_opts o = opts();
  ring_error err;
  const char *wrong[] = {"wrong"};
  arc_keyring *other;
  ck_assert_int_eq(arc_keyring_new(wrong, 1, &other, NULL), RING_OK);
  o.keys = other; /* another cluster's secret: the server refuses, its 401 is not ours */
  ck_assert_int_eq(arc_fetch(env.dst, env.source, 8, 1, &o, NULL, &err), RING_EAUTH);
  arc_keyring_free(other);
  o = opts();
  o.source_id = "elsewhere"; /* a real node, but not the one the table names there */
  arc_fetch_result res = {0};
  ck_assert_int_eq(arc_fetch(env.dst, env.source, 8, 1, &o, &res, &err), RING_EAUTH);
  ck_assert(res.bad_signature);
  o = opts();
  res = (arc_fetch_result){0};
  ck_assert_int_eq(arc_fetch(env.dst, env.source, 9, 1, &o, &res, &err), RING_ENOTFOUND);
  ck_assert(res.not_held && !res.bad_signature); /* signed by src: an error, never "empty" */
  ck_assert_int_eq(arc_fetch(env.dst, "127.0.0.1:1", 8, 1, &o, NULL, &err), RING_ECONNECT);
  ck_assert_int_eq(arc_fetch(env.dst, env.source, 70000, 1, &o, NULL, &err), RING_EINVAL);
  ck_assert(!arc_store_has(env.dst, 8));
  ck_assert(!arc_store_has(env.dst, 9));
}
END_TEST

/* Waits until dst's partial f0/f1 of `token` passes `at` bytes. */
static void wait_partial(uint32_t token, const char *name, long long at) {
  wait_partial_in(env.dst_dir, token, name, at);
}

static long long partial_size(uint32_t token, const char *name) {
  return partial_size_in(env.dst_dir, token, name);
}

START_TEST(resume_after_stop) {
  make_arc(env.src_dir, 12, 3, 4 << 20);
  atomic_bool stop = false;
  job j;
  job_start(&j, env.dst, env.source, 12, 8 << 20, &stop);
  wait_partial(12, "f1", 1 << 20); /* f0 whole, f1 a quarter */
  stop = true;
  job_join(&j);
  ck_assert_int_ne(j.rc, RING_OK);
  ck_assert(!arc_store_has(env.dst, 12));
  long long left = partial_size(12, "f1");
  ck_assert_int_gt(left, 0);
  ck_assert_int_lt(left, 4 << 20);

  /* again, unlimited: f0 is verified from disk, f1 continues */
  arc_fetch_result res;
  ring_error err;
  arc_fetch_opts o = opts();
  ck_assert_msg(arc_fetch(env.dst, env.source, 12, 1, &o, &res, &err) == RING_OK, "%s",
                err.message);
  ck_assert_uint_eq(res.resumed_files, 2);
  ck_assert_uint_eq(res.bytes, 12ull * (1 << 20) - (4ull << 20) - (unsigned long long)left);
  ck_assert_uint_eq(res.checksum_failures, 0);
  ck_assert(same_arc(env.src, env.dst, 12));
}
END_TEST

START_TEST(leftovers_are_checked) {
  make_arc(env.src_dir, 13, 2, 100000);
  /* a crash left: a good prefix of f0, garbage as f1, a stray file */
  char tmp[4096], src[4096];
  snprintf(tmp, sizeof tmp, "%s/tmp/13.1", env.dst_dir);
  ck_assert_int_eq(mkdir(tmp, 0755), 0);
  snprintf(src, sizeof src, "%s/arcs/13/f0", env.src_dir);
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "head -c 5000 %s > %s/f0", src, tmp);
  ck_assert_int_eq(system(cmd), 0);
  write_pattern(tmp, "f1", 100000, 999); /* right size, wrong bytes */
  write_pattern(tmp, "stray", 10, 1);
  arc_fetch_opts o = opts();
  arc_fetch_result res;
  ring_error err;
  ck_assert_msg(arc_fetch(env.dst, env.source, 13, 1, &o, &res, &err) == RING_OK, "%s",
                err.message);
  ck_assert_uint_eq(res.resumed_files, 2);
  ck_assert_uint_eq(res.stale_files, 1); /* f1, refetched: not a failed transfer */
  ck_assert_uint_eq(res.checksum_failures, 0);
  ck_assert_uint_eq(res.reused_bytes, 5000);   /* f0's good prefix */
  ck_assert_uint_eq(res.bytes, 200000 - 5000); /* the rest of f0, all of f1 */
  ck_assert(same_arc(env.src, env.dst, 13));
  char stray[4200];
  snprintf(stray, sizeof stray, "%s/arcs/13/stray", env.dst_dir);
  ck_assert_int_eq(access(stray, F_OK), -1); /* never installed */
}
END_TEST

/* An installed arc taken out of service (a restart, an old ownership) and
 * fetched again: only the files the source has changed since are sent. */
START_TEST(a_stale_copy_sends_only_what_changed) {
  make_arc(env.src_dir, 14, 3, 200000);
  arc_fetch_opts o = opts();
  arc_fetch_result res;
  ring_error err;
  ck_assert_msg(arc_fetch(env.dst, env.source, 14, 1, &o, &res, &err) == RING_OK, "%s",
                err.message);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/arcs/14", env.src_dir);
  write_pattern(dir, "f1", 200000, 4242); /* same size, new bytes */
  write_pattern(dir, "f2", 250000, 1402); /* longer, the old f2 its prefix (same seed) */

  ck_assert_int_eq(arc_store_recheck(env.dst, 14, 2), RING_OK);
  ck_assert(!arc_store_has(env.dst, 14));
  ck_assert_msg(arc_fetch(env.dst, env.source, 14, 2, &o, &res, &err) == RING_OK, "%s",
                err.message);
  ck_assert(same_arc(env.src, env.dst, 14));
  ck_assert_uint_eq(res.resumed_files, 3);
  ck_assert_uint_eq(res.stale_files, 1);           /* f1: whole, but not the source's now */
  ck_assert_uint_eq(res.reused_bytes, 2 * 200000); /* f0, and f2 up to its old end */
  ck_assert_uint_eq(res.bytes, 200000 + 50000);    /* f1 anew, f2's new tail */
  ck_assert_uint_eq(res.checksum_failures, 0);
}
END_TEST

/* Flips one byte of the source's file ahead of the transfer, and restores
 * it once the fetcher has started that file over. */
START_TEST(byte_flipped_at_the_source) {
  make_arc(env.src_dir, 21, 1, 24 << 20);
  job j;
  job_start(&j, env.dst, env.source, 21, 12 << 20, NULL);
  wait_partial(21, "f0", 2 << 20);
  char path[4096];
  snprintf(path, sizeof path, "%s/arcs/21/f0", env.src_dir);
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  const off_t at = 22 << 20; /* far ahead of what socket buffers hold */
  uint8_t b;
  ck_assert_int_eq(pread(fd, &b, 1, at), 1);
  uint8_t flipped = (uint8_t)(b ^ 0x40);
  ck_assert_int_eq(pwrite(fd, &flipped, 1, at), 1);
  /* the whole file comes, mismatches, and the fetcher starts it over */
  double deadline = now_s() + 20;
  while (partial_size(21, "f0") >= (2 << 20) && now_s() < deadline)
    usleep(1000);
  ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
  close(fd);
  job_join(&j);
  ck_assert_msg(j.rc == RING_OK, "%s", j.err.message);
  ck_assert_uint_eq(j.res.checksum_failures, 1);
  ck_assert_uint_eq(j.res.bytes, 2ull * (24 << 20));
  ck_assert(same_arc(env.src, env.dst, 21));
}
END_TEST

/* The source's file changes for good after its manifest went out: every
 * attempt mismatches, and the fetch gives up after max_retries. */
START_TEST(corrupt_source_gives_up) {
  make_arc(env.src_dir, 22, 1, 2 << 20);
  job j;
  job_start_with(&j, env.dst, env.source, 22, 8 << 20, NULL, 2);
  wait_partial(22, "f0", 100000);
  char path[4096];
  snprintf(path, sizeof path, "%s/arcs/22/f0", env.src_dir);
  int fd = open(path, O_RDWR);
  static uint8_t junk[4096];
  memset(junk, 0xAA, sizeof junk);
  ck_assert_int_eq(pwrite(fd, junk, sizeof junk, 3 << 19), (ssize_t)sizeof junk);
  close(fd);
  arc_limiter_set_rate(j.lim, 0);
  job_join(&j);
  ck_assert_msg(j.rc == RING_ECHECKSUM, "%d %s", j.rc, j.err.message);
  ck_assert_uint_eq(j.res.checksum_failures, 2);
  ck_assert(strstr(j.err.message, "f0") != NULL);
  ck_assert(!arc_store_has(env.dst, 22));
}
END_TEST

/* --------------------------------------------------------------- TLS */

START_TEST(over_tls) {
  char *dir = scratch_dir();
  char cmd[8800], cert[4200], key[4200];
  snprintf(cert, sizeof cert, "%s/cert.pem", dir);
  snprintf(key, sizeof key, "%s/key.pem", dir);
  snprintf(cmd, sizeof cmd,
           "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
           "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1",
           key, cert);
  if (system(cmd) != 0) {
    fprintf(stderr, "over_tls: skipped, openssl cannot make a certificate\n");
    scratch_free(dir);
    return;
  }
  make_arc(env.src_dir, 50, 3, 200000);
  arc_server *tls;
  ring_error err;
  arc_server_opts so = test_server_opts();
  so.tls_cert = cert;
  so.tls_key = key;
  ck_assert_msg(arc_server_start(env.src, &so, &tls, &err) == RING_OK, "%s", err.message);
  char url[96];
  snprintf(url, sizeof url, "https://127.0.0.1:%u", (unsigned)arc_server_port(tls));
  arc_fetch_opts o = opts();
  ck_assert_int_eq(arc_fetch(env.dst, url, 50, 1, &o, NULL, &err), RING_ECONNECT); /* unknown CA */
  o.ca_file = cert;
  ck_assert_msg(arc_fetch(env.dst, url, 50, 1, &o, NULL, &err) == RING_OK, "%s", err.message);
  ck_assert(same_arc(env.src, env.dst, 50));
  arc_server_stop(tls);
  scratch_free(dir);
}
END_TEST

/* ------------------------------------------------------------- full disk */

START_TEST(full_disk) {
  char *mnt = scratch_dir();
  if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) {
    fprintf(stderr, "full_disk: skipped, cannot mount a tmpfs (%s)\n", strerror(errno));
    scratch_free(mnt);
    return;
  }
  arc_store *small;
  ck_assert_int_eq(arc_store_open(mnt, &small, NULL), RING_OK);
  arc_fetch_opts o = opts();
  ring_error err;
  /* too big from the start: refused before a byte moves */
  make_arc(env.src_dir, 30, 2, 700000);
  arc_fetch_result res;
  ck_assert_int_eq(arc_fetch(small, env.source, 30, 1, &o, &res, &err), RING_ENOSPC);
  ck_assert_uint_eq(res.bytes, 0);
  ck_assert(!arc_store_has(small, 30));
  /* fits at first, then something else fills the disk mid-transfer */
  make_arc(env.src_dir, 31, 1, 800000);
  job j;
  job_start(&j, small, env.source, 31, 1 << 20, NULL);
  double deadline = now_s() + 10;
  char p[4096];
  snprintf(p, sizeof p, "%s/tmp/31.1/f0", mnt);
  struct stat st;
  while (stat(p, &st) != 0 && now_s() < deadline)
    usleep(1000);
  /* some of it on disk, the rest (800 KB at 1 MiB/s) still to come */
  while ((stat(p, &st) != 0 || st.st_size < 64 * 1024) && now_s() < deadline)
    usleep(1000);
  ck_assert_msg(st.st_size >= 64 * 1024 && st.st_size < 800000, "f0 is %lld bytes",
                (long long)st.st_size);
  snprintf(p, sizeof p, "%s/filler", mnt);
  int fd = open(p, O_WRONLY | O_CREAT, 0644);
  static char chunk[4096];
  while (write(fd, chunk, sizeof chunk) > 0) {
  }
  close(fd);
  job_join(&j);
  ck_assert_msg(j.rc == RING_ENOSPC, "%d %s", j.rc, j.err.message);
  ck_assert(!arc_store_has(small, 31));
  arc_store_close(small);
  umount2(mnt, MNT_DETACH);
  scratch_free(mnt);
}
END_TEST

/* ----------------------------------------------------- a canned answer */

/* A server on 127.0.0.1 that answers every request with the same bytes
 * and closes: a stranger at a node's address, or a forger. */
typedef struct canned {
  int fd;
  char addr[32];
  const char *reply;
  atomic_int served;
  atomic_bool stop;
  pthread_t thread;
} canned;

static void *canned_run(void *p) {
  canned *c = p;
  for (int i = 0; i < 100 && !atomic_load(&c->stop); i++) { /* bounded */
    int cl = accept(c->fd, NULL, NULL);
    if (cl < 0)
      break;
    char buf[4096];
    struct timeval tv = {.tv_sec = 2};
    setsockopt(cl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (recv(cl, buf, sizeof buf, 0) > 0) { /* counted before the reply: the client sees it after */
      atomic_fetch_add(&c->served, 1);
      send(cl, c->reply, strlen(c->reply), MSG_NOSIGNAL);
    }
    close(cl);
  }
  return NULL;
}

static void canned_start(canned *c, const char *reply) {
  memset(c, 0, sizeof *c);
  c->reply = reply;
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ck_assert_int_eq(bind(c->fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(c->fd, 16), 0);
  ck_assert_int_eq(getsockname(c->fd, (struct sockaddr *)&a, &len), 0);
  snprintf(c->addr, sizeof c->addr, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
  ck_assert_int_eq(pthread_create(&c->thread, NULL, canned_run, c), 0);
}

static void canned_stop(canned *c) {
  atomic_store(&c->stop, true);
  shutdown(c->fd, SHUT_RDWR);
  pthread_join(c->thread, NULL);
  close(c->fd);
}

/* A 404 from whoever sits at a node's address is not "not held" unless
 * that node signed it: refused, counted as a bad signature, nothing
 * installed. */
START_TEST(unsigned_not_held_is_refused) {
  canned c;
  canned_start(&c, "HTTP/1.1 404 Not Found\r\nContent-Length: 13\r\nConnection: close\r\n\r\n"
                   "arc not held\n");
  arc_fetch_opts o = opts();
  arc_fetch_result res = {0};
  ring_error err;
  ck_assert_int_eq(arc_fetch(env.dst, c.addr, 12, 1, &o, &res, &err), RING_EAUTH);
  ck_assert(res.bad_signature && !res.not_held);
  ck_assert_ptr_nonnull(strstr(err.message, "without a valid signature"));
  ck_assert(!arc_store_has(env.dst, 12));
  ck_assert_int_ge(atomic_load(&c.served), 1);
  canned_stop(&c);
}
END_TEST

/* A well-formed manifest with a MAC that does not verify is refused and
 * counted, whatever it lists; so is one with no MAC at all. */
START_TEST(manifest_with_a_bad_mac_is_refused) {
  static const char body[] = "{\"format\":\"ringkeeper.arc-manifest.v1\",\"token\":13,\"bytes\":0,"
                             "\"files\":[]}";
  char reply[1024];
  snprintf(reply, sizeof reply,
           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
           "X-Ring-Sig: v1 kid=00000000 node=src nonce=000102030405060708090a0b0c0d0e0f "
           "mac=%064d\r\nConnection: close\r\n\r\n%s",
           sizeof body - 1, 0, body);
  const char *replies[] = {reply, NULL};
  char plain[512];
  snprintf(plain, sizeof plain,
           "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", sizeof body - 1,
           body);
  replies[1] = plain;
  for (int i = 0; i < 2; i++) {
    canned c;
    canned_start(&c, replies[i]);
    arc_fetch_opts o = opts();
    arc_fetch_result res = {0};
    ring_error err;
    ck_assert_int_eq(arc_fetch(env.dst, c.addr, 13, 1, &o, &res, &err), RING_EAUTH);
    ck_assert(res.bad_signature);
    ck_assert(!arc_store_has(env.dst, 13)); /* an empty manifest, and still nothing installed */
    canned_stop(&c);
  }
}
END_TEST

/* A signed manifest that lists no files installs an empty arc: the one
 * way a fetch makes an empty arc. */
START_TEST(signed_empty_manifest_installs_empty) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/arcs/14", env.src_dir);
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  arc_fetch_opts o = opts();
  ring_error err;
  ck_assert_msg(arc_fetch(env.dst, env.source, 14, 1, &o, NULL, &err) == RING_OK, "%s",
                err.message);
  ck_assert(arc_store_has(env.dst, 14));
  arc_manifest m;
  ck_assert_int_eq(arc_store_manifest(env.dst, 14, &m, NULL), RING_OK);
  ck_assert_uint_eq(m.n_files, 0);
  arc_manifest_free(&m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("arc_fetch");
  TCase *tc = tcase_create("fetch");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, whole_arc_byte_for_byte);
  tcase_add_test(tc, a_fetcher_keeps_its_connection);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, resume_after_stop);
  tcase_add_test(tc, leftovers_are_checked);
  tcase_add_test(tc, a_stale_copy_sends_only_what_changed);
  tcase_add_test(tc, byte_flipped_at_the_source);
  tcase_add_test(tc, corrupt_source_gives_up);
  tcase_add_test(tc, over_tls);
  tcase_add_test(tc, full_disk);
  tcase_add_test(tc, unsigned_not_held_is_refused);
  tcase_add_test(tc, manifest_with_a_bad_mac_is_refused);
  tcase_add_test(tc, signed_empty_manifest_installs_empty);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
