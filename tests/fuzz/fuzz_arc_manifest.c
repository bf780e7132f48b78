/*
 * fuzz_arc_manifest.c: libFuzzer target for the arc manifest decoder
 * (proto/arc.md). Any input must either fail with a ring_errno and a
 * message, or decode to a manifest that holds its own invariants (valid
 * names, strictly sorted, sizes adding up) and encodes and decodes again
 * to the same bytes.
 */
#include "arc_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  arc_manifest m = {0};
  ring_error err = {0};
  int rc = arc_manifest_decode((const char *)data, size, &m, &err);
  if (rc != RING_OK) {
    if (err.code != rc || err.message[0] == '\0' || m.files != NULL)
      abort(); /* every failure is named; nothing is handed out */
    return 0;
  }
  uint64_t sum = 0;
  for (uint32_t i = 0; i < m.n_files; i++) {
    if (!arc__valid_name(m.files[i].name) ||
        (i > 0 && strcmp(m.files[i - 1].name, m.files[i].name) >= 0))
      abort();
    sum += m.files[i].size;
  }
  if (sum != m.bytes || m.token > ARC_TOKEN_MAX)
    abort();
  char *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  arc_manifest u = {0};
  if (arc_manifest_encode(&m, &a, &alen) != RING_OK || arc_manifest_decode(a, alen, &u, &err) ||
      arc_manifest_encode(&u, &b, &blen) != RING_OK || alen != blen || memcmp(a, b, alen) != 0)
    abort(); /* a manifest we accept must round-trip */
  free(a);
  free(b);
  arc_manifest_free(&u);
  arc_manifest_free(&m);
  return 0;
}
