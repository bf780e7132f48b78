/*
 * recovered.h: the `recovered` record's codec (recovered.c). Internal to
 * Ringkeeper: libring's clients read it to settle a restored etcd, and
 * `ringctl recover` writes it (through ringproto, which sees this header).
 */
#ifndef RING_RECOVERED_H
#define RING_RECOVERED_H

#include "ring.h"

#include <stddef.h>
#include <stdint.h>

/* `recovered`: the operator settled a restore (`ringctl recover`) by
 * publishing table `version`, above every version any host saw. */
typedef struct ring__recovered {
  uint64_t version;         /* 1 .. 2^53-1 */
  uint64_t seen_version;    /* the highest version hosts reported: 0 .. version-1 */
  char by[RING_ID_MAX + 1]; /* [a-z0-9._-]{1,63} */
  uint64_t at_ms;
} ring__recovered;

int ring__recovered_decode(const char *json, size_t len, ring__recovered *out, ring_error *err);
int ring__recovered_encode(const ring__recovered *r, char **json, size_t *len);

#endif /* RING_RECOVERED_H */
