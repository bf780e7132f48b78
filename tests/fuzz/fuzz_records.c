/*
 * fuzz_records.c: libFuzzer target for the etcd value decoders (config,
 * nodes/, alive/, progress/ with its failing fetches, missing/, leader, loss, stuck, recovery/,
 * recovered, sizes/). Every decoder sees
 * every input (each checks "format" first). A refusal must name itself and leave the output
 * untouched; an accepted value must encode and decode again to the same
 * bytes.
 */
#include "../../proto/records.h"
#include "../../proto/sizes.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decodes data with one decoder; on success checks that the encoding is a
 * fixed point: encode(decode(x)) == encode(decode(encode(decode(x)))). */
#define FUZZ_ONE(type, decode, encode, release)                                                    \
  do {                                                                                             \
    type v, w;                                                                                     \
    memset(&v, 0x5a, sizeof v);                                                                    \
    ring_error err = {0};                                                                          \
    int rc = decode((const char *)data, size, &v, &err);                                           \
    if (rc != RING_OK) {                                                                           \
      type poison;                                                                                 \
      memset(&poison, 0x5a, sizeof poison);                                                        \
      if (err.code != rc || err.message[0] == '\0' || memcmp(&v, &poison, sizeof v) != 0)          \
        abort(); /* every failure is named and writes nothing */                                   \
      break;                                                                                       \
    }                                                                                              \
    char *a = NULL, *b = NULL;                                                                     \
    size_t alen = 0, blen = 0;                                                                     \
    if (encode(&v, &a, &alen) != RING_OK || decode(a, alen, &w, &err) != RING_OK ||                \
        encode(&w, &b, &blen) != RING_OK || alen != blen || memcmp(a, b, alen) != 0)               \
      abort(); /* a value we accept must round-trip */                                             \
    release;                                                                                       \
    free(a);                                                                                       \
    free(b);                                                                                       \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FUZZ_ONE(rk_config, rk_config_decode, rk_config_encode, (void)0);
  FUZZ_ONE(rk_node, rk_node_decode, rk_node_encode, (void)0);
  FUZZ_ONE(rk_alive, rk_alive_decode, rk_alive_encode, (void)0);
  FUZZ_ONE(rk_progress, rk_progress_decode, rk_progress_encode,
           (rk_progress_free(&v), rk_progress_free(&w)));
  FUZZ_ONE(rk_leader, rk_leader_decode, rk_leader_encode, (void)0);
  FUZZ_ONE(rk_loss, rk_loss_decode, rk_loss_encode, (rk_loss_free(&v), rk_loss_free(&w)));
  FUZZ_ONE(rk_stuck, rk_stuck_decode, rk_stuck_encode, (rk_stuck_free(&v), rk_stuck_free(&w)));
  FUZZ_ONE(rk_missing, rk_missing_decode, rk_missing_encode,
           (rk_missing_free(&v), rk_missing_free(&w)));
  FUZZ_ONE(rk_recovery, rk_recovery_decode, rk_recovery_encode,
           (rk_recovery_free(&v), rk_recovery_free(&w)));
  FUZZ_ONE(ring__recovered, ring__recovered_decode, ring__recovered_encode, (void)0);
  FUZZ_ONE(rk_sizes, rk_sizes_decode, rk_sizes_encode, (rk_sizes_free(&v), rk_sizes_free(&w)));
  return 0;
}
