/*
 * fuzz_journal.c: libFuzzer target for the journal's decoder
 * (rk_event_decode, proto/journal.c). A refusal must name itself and leave
 * the output untouched; an accepted value must encode to a fixed point.
 */
#include "../../proto/journal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rk_event v, w, poison;
  memset(&v, 0x5a, sizeof v);
  memset(&poison, 0x5a, sizeof poison);
  ring_error err = {0};
  int rc = rk_event_decode((const char *)data, size, &v, &err);
  if (rc != RING_OK) {
    if (err.code != rc || err.message[0] == '\0' || memcmp(&v, &poison, sizeof v) != 0)
      abort(); /* every failure is named and writes nothing */
    return 0;
  }
  char *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  if (rk_event_encode(&v, &a, &alen) != RING_OK || rk_event_decode(a, alen, &w, &err) != RING_OK ||
      rk_event_encode(&w, &b, &blen) != RING_OK || alen != blen || memcmp(a, b, alen) != 0)
    abort(); /* a value we accept must round-trip */
  free(a);
  free(b);
  return 0;
}
