/*
 * bench_arc_auth.c: what proving who speaks costs an arc transfer, per
 * request and per answer (agent/arc_auth.c), next to its ideal: the
 * cluster MAC alone, which proves only membership. CPU time of this
 * process (CLOCK_PROCESS_CPUTIME_ID), so other load on the machine
 * changes the figures little.
 *
 *   bench_arc_auth [--quick] [--n N] [--file-mib M]   (--quick: N 2000)
 *
 * A request is made by one node (the cluster MAC and a pair MAC for each
 * key pinned for the server) and checked by another (MAC, pair MAC, with
 * the pair keys cached as in a running agent); an answer (a manifest) is
 * signed by the server's Ed25519 key and checked by the receiver. Then,
 * for arcs of 4 files of M MiB (bench_agent_move's: 1 MiB), the cost per
 * GiB moved: one manifest request and answer per arc, one request per file.
 */
#include "arc_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SECRET "0123456789abcdef0123456789abcdef-bench"

static arc_keyring *ring_a, *ring_b;

/* n1 holds ring_a's key, n2 ring_b's: each pinned for its node. */
static uint32_t pins(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  (void)ctx;
  if (pk == NULL)
    return 0;
  if (strcmp(node, "n1") == 0)
    arc_keyring_public(ring_a, pk[0]);
  else if (strcmp(node, "n2") == 0)
    arc_keyring_public(ring_b, pk[0]);
  else
    return 0;
  return 1;
}

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static arc_keyring *ring_new(void) {
  const char *s[] = {SECRET};
  arc_keyring *k = NULL;
  if (arc_keyring_new(s, 1, &k, NULL) != RING_OK)
    abort();
  arc_keyring_set_pins(k, pins, NULL);
  return k;
}

/* Microseconds of CPU per request: n2 asks n1 for a file, n1 checks. */
static double per_request_us(unsigned n) {
  char v[ARC_AUTH_VALUE_MAX];
  const char *path = "/v1/arcs/12345/files/part-0001";
  double t0 = cpu_s();
  for (unsigned i = 0; i < n; i++) {
    arc_auth a;
    if (arc_auth_sign_request(ring_b, "n2", "n1", "GET", path, "", 1796000000000 + i, NULL, v,
                              sizeof v) != RING_OK ||
        arc_auth_parse(v, strlen(v), &a) != RING_OK ||
        arc_auth_verify_request(ring_a, &a, "n1", "GET", path, "") != RING_OK)
      abort();
  }
  return (cpu_s() - t0) / n * 1e6;
}

/* Microseconds of CPU per answer: n1 signs a manifest of `len` bytes for
 * n2's request, n2 checks it. */
static double per_answer_us(unsigned n, size_t len) {
  char *body = calloc(1, len), v[ARC_AUTH_VALUE_MAX], sig[ARC_AUTH_VALUE_MAX];
  unsigned char nonce[ARC_NONCE_LEN];
  arc_auth req;
  if (body == NULL ||
      arc_auth_sign_request(ring_b, "n2", "n1", "GET", "/v1/arcs/7/manifest", "", 1, nonce, v,
                            sizeof v) != RING_OK ||
      arc_auth_parse(v, strlen(v), &req) != RING_OK)
    abort();
  double t0 = cpu_s();
  for (unsigned i = 0; i < n; i++)
    if (arc_auth_sign_answer(ring_a, "n1", &req, 200, 7, body, len, sig, sizeof sig) != RING_OK ||
        arc_auth_verify_answer(ring_b, sig, strlen(sig), "n1", nonce, 200, 7, body, len) != RING_OK)
      abort();
  free(body);
  return (cpu_s() - t0) / n * 1e6;
}

/* The ideal: the cluster MAC alone over the same request fields. */
static double mac_only_us(unsigned n) {
  unsigned char key[crypto_auth_hmacsha256_KEYBYTES] = {1}, mac[crypto_auth_hmacsha256_BYTES];
  char in[256];
  double t0 = cpu_s();
  for (unsigned i = 0; i < n; i++) {
    int len = snprintf(in, sizeof in, "GET /v1/arcs/12345/files/part-0001 %u n2 n1", i);
    crypto_auth_hmacsha256(mac, (const unsigned char *)in, (unsigned long long)len, key);
    if (crypto_auth_hmacsha256_verify(mac, (const unsigned char *)in, (unsigned long long)len,
                                      key) != 0)
      abort();
  }
  return (cpu_s() - t0) / n * 1e6;
}

int main(int argc, char **argv) {
  unsigned n = 20000;
  double file_mib = 1.0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      n = 2000;
    else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
      n = (unsigned)strtoul(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--file-mib") == 0 && i + 1 < argc)
      file_mib = strtod(argv[++i], NULL);
    else {
      fprintf(stderr, "usage: bench_arc_auth [--quick] [--n N] [--file-mib M]\n");
      return 2;
    }
  }
  if (n == 0 || !(file_mib > 0)) {
    fprintf(stderr, "bench_arc_auth: --n and --file-mib must be positive\n");
    return 2;
  }
  ring_a = ring_new();
  ring_b = ring_new();
  double req = per_request_us(n), ans = per_answer_us(n / 4 + 1, 400), mac = mac_only_us(n);
  double files_per_gib = 1024.0 / file_mib, arcs_per_gib = files_per_gib / 4;
  double gib_ms = (arcs_per_gib * (req + ans) + files_per_gib * req) / 1000;
  double ideal_ms = (arcs_per_gib * 2 + files_per_gib) * mac / 1000;
  printf("bench_arc_auth: %u requests, %u answers (CPU time of this process)\n", n, n / 4 + 1);
  printf("  request (sign and check)      %8.2f us   (ideal, the cluster MAC alone: %.2f us)\n",
         req, mac);
  printf("  answer (a manifest, signed)   %8.2f us\n", ans);
  printf("  per GiB in arcs of 4 x %.2f MiB files: %.1f ms CPU (ideal %.1f ms)\n", file_mib, gib_ms,
         ideal_ms);
  arc_keyring_free(ring_a);
  arc_keyring_free(ring_b);
  return 0;
}
