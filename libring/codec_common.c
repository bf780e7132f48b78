/*
 * codec_common.c: what the table and delta codecs share beyond ringx's
 * JSON helpers: a whole node record and the pending entries, which touch
 * the table's insides.
 */
#include "codec_int.h"

#include <inttypes.h>

/* ------------------------------------------------------- node records */

/* A node record (proto/table.md) as a builder spec borrowing its strings.
 * keys/values hold RING_LABELS_MAX entries. */
int ring__node_record_decode(const cJSON *node, const char *where, const char **keys,
                             const char **values, ring_node_spec *s, ring_error *err) {
  static const char *const names[] = {"id", "addr", "labels", "weight", "state"};
  if (!cJSON_IsObject(node))
    return ring__err(err, RING_ENODE, "%smust be an object", where);
  int rc = ring__json_check_keys(node, where, names, 5, err);
  return rc == RING_OK ? ring__node_fields_decode(node, where, true, keys, values, s, err) : rc;
}

/* ---------------------------------------------------------- pending */

int ring__pending_entry_decode(ring_table *t, const cJSON *e, uint32_t i, uint64_t *prev,
                               ring_error *err) {
  uint64_t v[3];
  const cJSON *c = cJSON_IsArray(e) ? e->child : NULL;
  int k = 0;
  for (; c != NULL && k < 3; c = c->next, k++)
    if (!ring__json_as_uint(c,
                            k == 0   ? RING_TOKENS_MAX - 1
                            : k == 1 ? RING_REPLICAS_MAX - 1
                                     : RING_NODES_MAX - 1,
                            &v[k]))
      return ring__err(err, RING_EPENDING, "pending[%u][%d]: not a valid %s", i, k,
                       k == 0   ? "token"
                       : k == 1 ? "slot"
                                : "node index");
  if (k != 3 || c != NULL)
    return ring__err(err, RING_EPENDING, "pending[%u]: must be [token, slot, node_index]", i);
  uint64_t key = v[0] << 8 | v[1];
  if (i > 0 && key <= *prev)
    return ring__err(err, RING_EPENDING, "pending[%u]: not in ascending (token, slot) order", i);
  *prev = key;
  if (ring_table_add_pending(t, (uint32_t)v[0], (uint32_t)v[1], (uint16_t)v[2]) != RING_OK)
    return ring__err(
        err, v[0] >= t->view.tokens || v[1] >= t->view.replicas ? RING_EPENDING : RING_ENOMEM,
        "pending[%u]: token %" PRIu64 " slot %" PRIu64 " out of range", i, v[0], v[1]);
  return RING_OK;
}

/* ---------------------------------------------------------- encoding */

void ring__node_record_encode(ring__sbuf *b, const ring__node *n) {
  const char *k[RING_LABELS_MAX], *v[RING_LABELS_MAX];
  ring_node_spec s = ring__node_spec(n, n->state, k, v);
  ring__sb_puts(b, "{");
  ring__node_fields_encode(b, &s);
  ring__sb_printf(b, ",\"state\":\"%s\"}", ring_node_state_name(n->state));
}
