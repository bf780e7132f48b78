/*
 * arc_manifest.h: the manifest of an arc (proto/arc.md): the files of one
 * token's arc with their sizes and checksums, in JSON and back, and the
 * syntax of arc file names and tokens every part checks. Part of the
 * ringproto library: the agent's store, server and fetcher use it, and so
 * may any tool that reads an arc.
 */
#ifndef RING_PROTO_ARC_MANIFEST_H
#define RING_PROTO_ARC_MANIFEST_H

#include "ring.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits, the same for every host (a manifest one host writes, another reads). */
#define ARC_FILES_MAX 65536u              /* files in one arc */
#define ARC_MANIFEST_JSON_MAX (16u << 20) /* bytes of one manifest document */
#define ARC_TOKEN_MAX (RING_TOKENS_MAX - 1u)
#define ARC_SIZE_MAX RING_VERSION_MAX /* 2^53-1: exact in every JSON reader */
#define ARC_NAME_MAX 255 /* a file name inside an arc: [A-Za-z0-9._-], no leading '.' */
#define ARC_MANIFEST_FORMAT "ringkeeper.arc-manifest.v1"

/* A file name inside an arc: 1..ARC_NAME_MAX of [A-Za-z0-9._-], not
 * starting with '.' (so never ".", ".." nor hidden). */
bool arc__valid_name(const char *s);
/* A token as the decimal s[0..n): digits only, no leading zero (but "0"),
 * at most ARC_TOKEN_MAX. */
bool arc__parse_token(const char *s, size_t n, uint32_t *out);

typedef struct arc_file {
  char name[ARC_NAME_MAX + 1];
  uint64_t size;
  uint64_t xxh3; /* XXH3_64bits, seed 0, of the whole file */
} arc_file;

typedef struct arc_manifest {
  uint32_t token;
  uint32_t n_files;
  arc_file *files; /* sorted by name; malloc()'ed */
  uint64_t bytes;  /* sum of sizes */
} arc_manifest;

void arc_manifest_free(arc_manifest *m); /* frees the contents, not m */
/* The manifest's JSON (proto/arc.md) and back; decode validates names,
 * sizes, order and checksum syntax, never reads past len. 0 or -errno-like
 * negative ring_errno (RING_EFORMAT/EFIELD) with a message in err. */
struct ring_error;
int arc_manifest_encode(const arc_manifest *m, char **json, size_t *len);
int arc_manifest_decode(const char *json, size_t len, arc_manifest *out, struct ring_error *err);

#endif /* RING_PROTO_ARC_MANIFEST_H */
