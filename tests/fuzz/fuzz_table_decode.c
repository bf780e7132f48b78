/*
 * fuzz_table_decode.c: libFuzzer target for the table decoder. Any input
 * must either fail with a ring_errno and a message, or decode to a table
 * that encodes and decodes again to the same bytes.
 */
#include "ring.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ring_table *t = NULL;
  ring_error err = {0};
  int rc = ring_table_decode((const char *)data, size, &t, &err);
  if (rc != RING_OK) {
    if (err.code != rc || err.message[0] == '\0' || t != NULL)
      abort(); /* every failure is named */
    return 0;
  }
  char *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  ring_table *u = NULL;
  if (ring_table_encode(t, &a, &alen) != RING_OK || ring_table_decode(a, alen, &u, &err) ||
      ring_table_encode(u, &b, &blen) != RING_OK || alen != blen || memcmp(a, b, alen) != 0)
    abort(); /* a table we accept must round-trip */
  uint16_t owners[RING_REPLICAS_MAX];
  if (ring_lookup(t, data, size, owners, RING_REPLICAS_MAX) != (int)ring_table_replicas(t))
    abort();
  free(a);
  free(b);
  ring_table_free(u);
  ring_table_free(t);
  return 0;
}
