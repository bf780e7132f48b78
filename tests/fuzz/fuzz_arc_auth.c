/*
 * fuzz_arc_auth.c: libFuzzer target for the signed-header parser and the
 * verifiers that run on every arc request and answer (agent/arc_auth.c,
 * proto/arc.md "Authentication"). The input is an X-Ring-Auth or
 * X-Ring-Sig value as a stranger may send it. It must parse or be refused
 * without reading past its length; what parses must hold only well-formed
 * fields, and must never verify under the target's key unless it is the
 * signature the target itself makes (a fuzzer cannot forge a MAC).
 */
#include "arc_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The keyring's own key, pinned for every node: signatures get checked. */
static uint32_t pin_self(void *ctx, const char *node, unsigned char pk[][ARC_PK_LEN]) {
  if (pk == NULL)
    return 0; /* a failed pin: nothing to look at again here */
  (void)node;
  arc_keyring_public(ctx, pk[0]);
  return 1;
}

static const arc_keyring *keys(void) {
  static arc_keyring *k;
  if (k == NULL) {
    const char *s[] = {"fuzz-secret", "fuzz-old-secret"};
    if (arc_keyring_new(s, 2, &k, NULL) != RING_OK)
      abort();
    arc_keyring_set_pins(k, pin_self, k);
  }
  return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *v = malloc(size ? size : 1); /* not NUL-terminated: the parser takes a length */
  if (v == NULL)
    return 0;
  memcpy(v, data, size);
  arc_auth a;
  memset(&a, 0xa5, sizeof a);
  int rc = arc_auth_parse(v, size, &a);
  if (rc == RING_OK) {
    if (a.node[0] == '\0' || strlen(a.node) > RING_ID_MAX ||
        (a.has_request_fields && (a.to[0] == '\0' || a.ts_ms < 0)))
      abort();
    if (arc_auth_verify_request(keys(), &a, "n1", "GET", "/v1/arcs/1/manifest", "") == RING_OK)
      abort(); /* a forged request verified */
  } else if (rc != RING_EAUTH) {
    abort();
  }
  unsigned char nonce[ARC_NONCE_LEN] = {0};
  if (arc_auth_verify_answer(keys(), v, size, "n1", nonce, 200, 1, data, size) == RING_OK)
    abort(); /* a forged answer verified */
  free(v);
  return 0;
}
