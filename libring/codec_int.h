/*
 * codec_int.h: what the table and delta codecs share (codec_common.c) on
 * top of ringx's JSON helpers (util/ringx.h, which proto/ uses too): a
 * whole node record and the pending entries, which touch the table.
 */
#ifndef RING_CODEC_INT_H
#define RING_CODEC_INT_H

#include "ring_int.h"

#include <cjson/cJSON.h>

/* A node record (proto/table.md) as a builder spec borrowing its strings;
 * keys/values hold RING_LABELS_MAX entries. */
int ring__node_record_decode(const cJSON *node, const char *where, const char **keys,
                             const char **values, ring_node_spec *s, ring_error *err);
void ring__node_record_encode(ring__sbuf *b, const ring__node *n);
/* One [token, slot, node_index] entry, strictly after *prev in (token, slot). */
int ring__pending_entry_decode(ring_table *t, const cJSON *e, uint32_t i, uint64_t *prev,
                               ring_error *err);

#endif /* RING_CODEC_INT_H */
