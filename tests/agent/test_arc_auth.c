/*
 * test_arc_auth.c: signed arc requests and answers (agent/arc_auth.c):
 * the secret file, rotation with two secrets, the header syntax, what a
 * signature binds, and the replay cache's bounds.
 */
#include "arc_env.h"
#include "check_main.h"

#include <check.h>
#include <sys/stat.h>

/* One node key file for every keyring of these tests (made once). */
static const char *shared_key(void) {
  static char path[4200];
  if (path[0] == '\0') {
    char *dir = scratch_dir(); /* kept: the process's scratch */
    snprintf(path, sizeof path, "%s/node.key", dir);
    free(dir);
  }
  return path;
}

/* Trusts the keyring's own key for any node: every keyring here shares one. */
static uint32_t pin_self(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  if (pk == NULL)
    return 0; /* a failed pin: nothing to look at again here */
  (void)node;
  arc_keyring_public(ctx, pk[0]);
  return 1;
}

static arc_keyring *ring_of(const char *a, const char *b) {
  const char *s[] = {a, b};
  arc_keyring *k = NULL;
  ck_assert_int_eq(arc_keyring_new(s, b ? 2 : 1, &k, NULL), RING_OK);
  ring_error err = {0};
  ck_assert_msg(arc_keyring_node_key(k, shared_key(), &err) == RING_OK, "%s", err.message);
  arc_keyring_set_pins(k, pin_self, k);
  return k;
}

/* A file of `mode` written with text, loaded as a secret file: the rc;
 * the message into msg. */
static int load_mode(const char *text, mode_t mode, arc_keyring **k, char *msg, size_t cap) {
  char *dir = scratch_dir(), path[4200];
  snprintf(path, sizeof path, "%s/secret", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  ck_assert_int_eq(chmod(path, mode), 0);
  ring_error err = {0};
  int rc = arc_keyring_load(path, k, &err);
  ck_assert(rc == RING_OK || err.message[0] != '\0');
  snprintf(msg, cap, "%s", rc == RING_OK ? "" : err.message);
  scratch_free(dir);
  return rc;
}

static int load_text(const char *text, arc_keyring **k) {
  char msg[300];
  return load_mode(text, 0600, k, msg, sizeof msg);
}

#define S32 "0123456789abcdef0123456789abcdef" /* a secret of the least length */

START_TEST(secret_files) {
  arc_keyring *k = NULL;
  ck_assert_int_eq(load_text(S32 "-one\n", &k), RING_OK);
  ck_assert_uint_eq(arc_keyring_count(k), 1);
  arc_keyring_free(k);
  ck_assert_int_eq(load_text(S32 "-new\r\n\n" S32 "-old", &k), RING_OK);
  ck_assert_uint_eq(arc_keyring_count(k), 2);
  arc_keyring_free(k);
  ck_assert_int_eq(load_text("", &k), RING_EINVAL);
  ck_assert_int_eq(load_text("\n\n", &k), RING_EINVAL);
  ck_assert_int_eq(load_text(S32 "a\n" S32 "b\n" S32 "c\n", &k), RING_EINVAL); /* three */
  ck_assert_int_eq(load_text(S32 "\n" S32 "\n", &k), RING_EINVAL);             /* the same */
  ring_error err;
  ck_assert_int_eq(arc_keyring_load("/nonexistent/secret", &k, &err), RING_EIO);
  arc_keyring_free(NULL);
}
END_TEST

/* A secret group or others may read, or under 32 bytes, is refused, the
 * message naming the mode or the length. */
START_TEST(secret_file_checks) {
  arc_keyring *k = NULL;
  char msg[300];
  ck_assert_int_eq(load_mode(S32 "\n", 0644, &k, msg, sizeof msg), RING_EINVAL);
  ck_assert_msg(strstr(msg, "mode 0644") != NULL, "%s", msg);
  ck_assert_int_eq(load_mode(S32 "\n", 0640, &k, msg, sizeof msg), RING_EINVAL);
  ck_assert_msg(strstr(msg, "mode 0640") != NULL, "%s", msg);
  ck_assert_int_eq(load_mode("short\n", 0600, &k, msg, sizeof msg), RING_EINVAL);
  ck_assert_msg(strstr(msg, "5 bytes, under 32") != NULL, "%s", msg);
  ck_assert_int_eq(load_mode(S32 "\n", 0400, &k, msg, sizeof msg), RING_OK);
  arc_keyring_free(k);
}
END_TEST

/* A node key file: made 0600 when absent, the same key when read again;
 * refused when group or others may read it, or malformed. */
START_TEST(node_key_files) {
  char *dir = scratch_dir(), path[4200];
  snprintf(path, sizeof path, "%s/node.key", dir);
  arc_keyring *a = ring_of(S32, NULL), *b = ring_of(S32, NULL);
  ring_error err = {0};
  ck_assert_int_eq(arc_keyring_node_key(a, path, &err), RING_OK);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  ck_assert_int_eq(arc_keyring_node_key(b, path, &err), RING_OK);
  unsigned char pa[ARC_PK_LEN], pb[ARC_PK_LEN];
  arc_keyring_public(a, pa);
  arc_keyring_public(b, pb);
  ck_assert_int_eq(memcmp(pa, pb, ARC_PK_LEN), 0);
  ck_assert_int_eq(chmod(path, 0644), 0);
  ck_assert_int_eq(arc_keyring_node_key(b, path, &err), RING_EINVAL);
  ck_assert_msg(strstr(err.message, "mode 0644") != NULL, "%s", err.message);
  FILE *f = fopen(path, "w");
  fputs("not a key\n", f);
  fclose(f);
  ck_assert_int_eq(chmod(path, 0600), 0);
  ck_assert_int_eq(arc_keyring_node_key(b, path, &err), RING_EINVAL);
  arc_keyring_free(a);
  arc_keyring_free(b);
  scratch_free(dir);
}
END_TEST

/* Pins for the identity tests: n1, n2 and n3, each its own key; a node
 * mid-rotation has a second key pinned (the other slot, when set). */
static unsigned char pin_of[3][ARC_PINS_MAX][ARC_PK_LEN];
static uint32_t pins_n(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  if (pk == NULL)
    return 0; /* a failed pin: nothing to look at again here */
  (void)ctx;
  static const unsigned char none[ARC_PK_LEN];
  int i = strcmp(node, "n1") == 0   ? 0
          : strcmp(node, "n2") == 0 ? 1
          : strcmp(node, "n3") == 0 ? 2
                                    : -1;
  uint32_t n = 0;
  for (int j = 0; i >= 0 && j < ARC_PINS_MAX; j++)
    if (memcmp(pin_of[i][j], none, ARC_PK_LEN) != 0)
      memcpy(pk[n++], pin_of[i][j], ARC_PK_LEN);
  return n;
}

/* A keyring of the cluster secret with a fresh key of its own, pinned as
 * node i's key in slot j. */
static arc_keyring *member(int i, int j) {
  const char *s[] = {S32};
  arc_keyring *k = NULL;
  ck_assert_int_eq(arc_keyring_new(s, 1, &k, NULL), RING_OK);
  arc_keyring_public(k, pin_of[i][j]);
  arc_keyring_set_pins(k, pins_n, NULL);
  return k;
}

/* What `asker` signed as `as` to n3 gets from n3 (keyring k3). */
static int ask_n3(const arc_keyring *asker, const char *as, const arc_keyring *k3) {
  char v[ARC_AUTH_VALUE_MAX];
  const char *path = "/v1/arcs/3/files/a";
  ck_assert_int_eq(arc_auth_sign_request(asker, as, "n3", "GET", path, "", 1, NULL, v, sizeof v),
                   RING_OK);
  arc_auth a;
  ck_assert_int_eq(arc_auth_parse(v, strlen(v), &a), RING_OK);
  return arc_auth_verify_request(k3, &a, "n3", "GET", path, "");
}

/* Three members with the cluster secret, each its own key: n2 cannot ask
 * as n1 (the MAC holds, the pair MAC does not) nor answer as n1 (the
 * signature does not); nobody can ask a node with no key pinned. */
START_TEST(a_member_cannot_sign_as_another) {
  memset(pin_of, 0, sizeof pin_of);
  arc_keyring *k1 = member(0, 0), *k2 = member(1, 0), *k3 = member(2, 0);
  ck_assert_int_eq(ask_n3(k2, "n2", k3), RING_OK);
  ck_assert_int_eq(ask_n3(k2, "n1", k3), RING_ENODEID);
  ck_assert_int_eq(ask_n3(k1, "n1", k3), RING_OK);
  /* an answer by n2 as n1 to a request of n3 */
  char v[ARC_AUTH_VALUE_MAX];
  const char *path = "/v1/arcs/3/manifest";
  arc_auth a;
  unsigned char nonce[ARC_NONCE_LEN];
  ck_assert_int_eq(arc_auth_sign_request(k3, "n3", "n1", "GET", path, "", 1, nonce, v, sizeof v),
                   RING_OK);
  ck_assert_int_eq(arc_auth_parse(v, strlen(v), &a), RING_OK);
  ck_assert_int_eq(arc_auth_verify_request(k1, &a, "n1", "GET", path, ""), RING_OK);
  char sig[ARC_AUTH_VALUE_MAX];
  ck_assert_int_eq(arc_auth_sign_answer(k2, "n1", &a, 200, 3, "{}", 2, sig, sizeof sig), RING_OK);
  ck_assert_int_eq(arc_auth_verify_answer(k3, sig, strlen(sig), "n1", nonce, 200, 3, "{}", 2),
                   RING_ENODEID);
  ck_assert_int_eq(arc_auth_sign_answer(k1, "n1", &a, 200, 3, "{}", 2, sig, sizeof sig), RING_OK);
  ck_assert_int_eq(arc_auth_verify_answer(k3, sig, strlen(sig), "n1", nonce, 200, 3, "{}", 2),
                   RING_OK);
  /* no key pinned for the server: no request is made to it */
  ck_assert_int_eq(arc_auth_sign_request(k1, "n1", "n9", "GET", path, "", 1, NULL, v, sizeof v),
                   RING_ENODEID);
  /* no pins at all: nothing verifies */
  arc_keyring_set_pins(k3, NULL, NULL);
  ck_assert_int_eq(arc_auth_verify_answer(k3, sig, strlen(sig), "n1", nonce, 200, 3, "{}", 2),
                   RING_ENODEID);
  arc_auth b;
  ck_assert_int_eq(arc_auth_sign_request(k2, "n2", "n3", "GET", path, "", 1, NULL, v, sizeof v),
                   RING_OK);
  ck_assert_int_eq(arc_auth_parse(v, strlen(v), &b), RING_OK);
  ck_assert_int_eq(arc_auth_verify_request(k3, &b, "n3", "GET", path, ""), RING_ENODEID);
  arc_keyring_free(k1);
  arc_keyring_free(k2);
  arc_keyring_free(k3);
}
END_TEST

/* A node key's rotation, asker's and server's: with both of a node's keys
 * pinned, whichever one it holds, its requests pass and it takes requests
 * (one pair MAC per key pinned for the server). */
START_TEST(pair_macs_follow_a_rotation) {
  memset(pin_of, 0, sizeof pin_of);
  arc_keyring *k2_old = member(1, 0), *k2_new = member(1, 1);
  arc_keyring *k3_old = member(2, 0), *k3_new = member(2, 1);
  arc_keyring *askers[] = {k2_old, k2_new}, *servers[] = {k3_old, k3_new};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      ck_assert_int_eq(ask_n3(askers[i], "n2", servers[j]), RING_OK);
  memset(pin_of[1][0], 0, ARC_PK_LEN); /* n2's old key dropped from the pins */
  ck_assert_int_eq(ask_n3(k2_new, "n2", k3_new), RING_OK);
  ck_assert_int_eq(ask_n3(k2_old, "n2", k3_new), RING_ENODEID);
  arc_keyring *all[] = {k2_old, k2_new, k3_old, k3_new};
  for (int i = 0; i < 4; i++)
    arc_keyring_free(all[i]);
}
END_TEST

/* Sign with `signer`, verify with `verifier`: whether it holds. */
static bool request_passes(const arc_keyring *signer, const arc_keyring *verifier) {
  char v[ARC_AUTH_VALUE_MAX];
  ck_assert_int_eq(arc_auth_sign_request(signer, "n2", "n1", "GET", "/v1/arcs/3/manifest", "",
                                         1796000000000, NULL, v, sizeof v),
                   RING_OK);
  arc_auth a;
  ck_assert_int_eq(arc_auth_parse(v, strlen(v), &a), RING_OK);
  return arc_auth_verify_request(verifier, &a, "n1", "GET", "/v1/arcs/3/manifest", "") == RING_OK;
}

/* The rotation of proto/arc.md: add the new secret second everywhere,
 * then swap the lines everywhere, then drop the old one. At every step
 * every pair of hosts still verifies each other. */
START_TEST(rotation) {
  arc_keyring *old = ring_of("old-secret", NULL), *both_old = ring_of("old-secret", "new-secret"),
              *both_new = ring_of("new-secret", "old-secret"), *new = ring_of("new-secret", NULL),
              *other = ring_of("other-cluster", NULL);
  arc_keyring *steps[][2] = {{old, both_old}, {both_old, both_new}, {both_new, new}};
  for (int i = 0; i < 3; i++) {
    ck_assert(request_passes(steps[i][0], steps[i][1]));
    ck_assert(request_passes(steps[i][1], steps[i][0]));
  }
  ck_assert(!request_passes(old, new));
  ck_assert(!request_passes(other, both_old));
  arc_keyring *all[] = {old, both_old, both_new, new, other};
  for (int i = 0; i < 5; i++)
    arc_keyring_free(all[i]);
}
END_TEST

START_TEST(a_signature_binds_everything) {
  arc_keyring *k = ring_of("s", NULL);
  char v[ARC_AUTH_VALUE_MAX];
  unsigned char nonce[ARC_NONCE_LEN];
  ck_assert_int_eq(arc_auth_sign_request(k, "n2", "n1", "GET", "/v1/arcs/3/files/a", "bytes=5-",
                                         1796000000000, nonce, v, sizeof v),
                   RING_OK);
  ck_assert_ptr_null(strstr(v, "s ")); /* the secret is not in the header */
  arc_auth a;
  ck_assert_int_eq(arc_auth_parse(v, strlen(v), &a), RING_OK);
  ck_assert(a.has_request_fields);
  ck_assert_int_eq(memcmp(a.nonce, nonce, ARC_NONCE_LEN), 0);
  ck_assert_int_eq(arc_auth_verify_request(k, &a, "n1", "GET", "/v1/arcs/3/files/a", "bytes=5-"),
                   RING_OK);
  ck_assert_int_eq(arc_auth_verify_request(k, &a, "n3", "GET", "/v1/arcs/3/files/a", "bytes=5-"),
                   RING_EAUTH); /* to another node */
  ck_assert_int_eq(arc_auth_verify_request(k, &a, "n1", "HEAD", "/v1/arcs/3/files/a", "bytes=5-"),
                   RING_EAUTH);
  ck_assert_int_eq(arc_auth_verify_request(k, &a, "n1", "GET", "/v1/arcs/3/files/b", "bytes=5-"),
                   RING_EAUTH);
  ck_assert_int_eq(arc_auth_verify_request(k, &a, "n1", "GET", "/v1/arcs/3/files/a", "bytes=0-"),
                   RING_EAUTH);
  ck_assert_int_eq(arc_auth_verify_request(k, &a, "n1", "GET", "/v1/arcs/3/files/a", NULL),
                   RING_EAUTH);
  a.ts_ms++;
  ck_assert_int_eq(arc_auth_verify_request(k, &a, "n1", "GET", "/v1/arcs/3/files/a", "bytes=5-"),
                   RING_EAUTH);
  /* an answer: bound to the request's nonce, the status, token and body */
  char sig[ARC_AUTH_VALUE_MAX];
  ck_assert_int_eq(arc_auth_sign_answer(k, "n1", &a, 404, 3, "x", 1, sig, sizeof sig), RING_OK);
  size_t n = strlen(sig);
  ck_assert_int_eq(arc_auth_verify_answer(k, sig, n, "n1", nonce, 404, 3, "x", 1), RING_OK);
  ck_assert_int_eq(arc_auth_verify_answer(k, sig, n, "n1", nonce, 200, 3, "x", 1), RING_EAUTH);
  ck_assert_int_eq(arc_auth_verify_answer(k, sig, n, "n1", nonce, 404, 4, "x", 1), RING_EAUTH);
  ck_assert_int_eq(arc_auth_verify_answer(k, sig, n, "n1", nonce, 404, 3, "y", 1), RING_EAUTH);
  ck_assert_int_eq(arc_auth_verify_answer(k, sig, n, "n9", nonce, 404, 3, "x", 1), RING_EAUTH);
  ck_assert_int_eq(arc_auth_verify_answer(k, sig, n - 1, "n1", nonce, 404, 3, "x", 1), RING_EAUTH);
  arc_keyring_free(k);
}
END_TEST

START_TEST(malformed_headers) {
  const char *bad[] = {
      "",
      "v1",
      "v1 ",
      "v2 kid=00000000 node=n1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=0000000 node=n1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=0000000G node=n1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=0000000A node=n1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 node=N1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 node=n1 mac="
      "000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 node=n1 node=n1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 node=n1  mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 node=n1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000 ",
      "v1 kid=00000000 node=n1 x=1 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 node=n1 ts=01 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 node=n1 ts=99999999999999999999 to=n2 "
      "nonce=00000000000000000000000000000000 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
      "v1 kid=00000000 mac="
      "0000000000000000000000000000000000000000000000000000000000000000",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    arc_auth a;
    ck_assert_msg(arc_auth_parse(bad[i], strlen(bad[i]), &a) == RING_EAUTH, "%s", bad[i]);
  }
  const char *ok = "v1 kid=00000000 node=n1 mac="
                   "0000000000000000000000000000000000000000000000000000000000000000 sig="
                   "0000000000000000000000000000000000000000000000000000000000000000"
                   "0000000000000000000000000000000000000000000000000000000000000000";
  const char *no_sig = "v1 kid=00000000 node=n1 mac="
                       "0000000000000000000000000000000000000000000000000000000000000000";
  arc_auth b;
  ck_assert_int_eq(arc_auth_parse(no_sig, strlen(no_sig), &b), RING_EAUTH); /* sig required */
  arc_auth a;
  ck_assert_int_eq(arc_auth_parse(ok, strlen(ok), &a), RING_OK);
  ck_assert(!a.has_request_fields && !a.has_nonce);
  ck_assert_int_eq(arc_auth_parse(ok, strlen(ok) - 1, &a), RING_EAUTH); /* the length rules */
}
END_TEST

/* A request proves its asker with pair MACs (one or two), never with a
 * signature; an answer the other way round. */
START_TEST(request_headers) {
#define Z32 "00000000000000000000000000000000"
#define REQ "v1 kid=00000000 node=n1 to=n2 ts=5 nonce=" Z32 " mac=" Z32 Z32
  const char *good[] = {REQ " pmac=" Z32 Z32, REQ " pmac=" Z32 Z32 "," Z32 Z32};
  for (size_t i = 0; i < 2; i++) {
    arc_auth a;
    ck_assert_msg(arc_auth_parse(good[i], strlen(good[i]), &a) == RING_OK, "%s", good[i]);
    ck_assert(a.has_request_fields);
    ck_assert_uint_eq(a.n_pmac, i + 1);
  }
  const char *bad[] = {
      REQ,                                                     /* no proof of the asker */
      REQ " sig=" Z32 Z32 Z32 Z32,                             /* a signature instead */
      REQ " pmac=" Z32 Z32 " sig=" Z32 Z32 Z32 Z32,            /* both */
      REQ " pmac=" Z32 Z32 ",",                                /* a trailing comma */
      REQ " pmac=" Z32 Z32 "," Z32 Z32 "," Z32 Z32,            /* three */
      REQ " pmac=" Z32 Z32 ";" Z32 Z32,                        /* another separator */
      REQ " pmac=" Z32 Z32 "," Z32 Z32 " pmac=" Z32 Z32,       /* repeated */
      "v1 kid=00000000 node=n1 mac=" Z32 Z32 " pmac=" Z32 Z32, /* an answer with a pair MAC */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    arc_auth a;
    ck_assert_msg(arc_auth_parse(bad[i], strlen(bad[i]), &a) == RING_EAUTH, "%s", bad[i]);
  }
#undef REQ
#undef Z32
}
END_TEST

START_TEST(replay_cache) {
  arc_replay *r;
  ck_assert_int_eq(arc_replay_new(100, 1000, 0, &r), RING_EINVAL); /* not a power of two */
  ck_assert_int_eq(arc_replay_new(64, 1000, 0, &r), RING_OK);
  unsigned char n[ARC_NONCE_LEN] = {1, 2, 3};
  ck_assert_int_eq(arc_replay_check(r, n, 5000, 5000), ARC_REPLAY_NEW);
  ck_assert_int_eq(arc_replay_check(r, n, 5000, 5500), ARC_REPLAY_SEEN);
  ck_assert_int_eq(arc_replay_check(r, n, 5000, 6001), ARC_REPLAY_NEW); /* out of the window */
  /* bounded: nonces that all hash alike fill their probes, then "full" */
  int full = 0;
  for (int i = 0; i < 100; i++) {
    unsigned char m[ARC_NONCE_LEN] = {9, 9, 9, 9};
    m[8] = (unsigned char)i;
    full += arc_replay_check(r, m, 7000, 7000) == ARC_REPLAY_FULL;
  }
  ck_assert_int_gt(full, 0);
  unsigned char m[ARC_NONCE_LEN] = {9, 9, 9, 9};
  ck_assert_int_eq(arc_replay_check(r, m, 9000, 9000), ARC_REPLAY_NEW); /* expired: room again */
  arc_replay_free(r);
  /* a floor (the server's start): older requests count as seen, even new nonces */
  ck_assert_int_eq(arc_replay_new(64, 1000, 10000, &r), RING_OK);
  unsigned char f[ARC_NONCE_LEN] = {7};
  ck_assert_int_eq(arc_replay_check(r, f, 9999, 10000), ARC_REPLAY_SEEN);
  ck_assert_int_eq(arc_replay_check(r, f, 10000, 10000), ARC_REPLAY_NEW);
  arc_replay_free(r);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("arc_auth");
  TCase *tc = tcase_create("auth");
  tcase_add_test(tc, secret_files);
  tcase_add_test(tc, secret_file_checks);
  tcase_add_test(tc, node_key_files);
  tcase_add_test(tc, a_member_cannot_sign_as_another);
  tcase_add_test(tc, pair_macs_follow_a_rotation);
  tcase_add_test(tc, request_headers);
  tcase_add_test(tc, rotation);
  tcase_add_test(tc, a_signature_binds_everything);
  tcase_add_test(tc, malformed_headers);
  tcase_add_test(tc, replay_cache);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
