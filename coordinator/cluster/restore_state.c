/*
 * restore_state.c: a cluster state read against the reader's etcd history
 * marks (cluster.h, "a restored etcd"), shared by ring-coordinator and
 * ringctl so both judge a restore by one rule (libring's, etcd_history.c).
 *
 * A coordinator keeps its marks in memory only; what survives its restart
 * are the hosts' recovery/<id> reports: a host that saw a version above
 * the current one raises the reader's version mark, so the `version` key
 * then reads as the history going back, in any process that reads them.
 */
#include "cluster.h"

#include <string.h>

uint64_t rk_state_seen_version(const rk_state *s) {
  uint64_t seen = 0;
  for (uint32_t i = 0; i < s->n_recovery; i++)
    if (s->recovery[i].r.seen_version > seen)
      seen = s->recovery[i].r.seen_version;
  return seen;
}

bool rk_state_history(ring_etcd *c, const rk_state *s) {
  if (s->version != 0)
    ring_etcd_note_version(c, s->version, s->revision);
  ring_etcd_history reported = {.version = rk_state_seen_version(s)};
  if (reported.version > s->version) /* a report at or below it is stale: recover counted it */
    ring_etcd_history_seed(c, &reported);
  if (s->has_recovered)
    ring_etcd_history_settle(c, s->recovered.version, s->version);
  ring_etcd_history h;
  ring_etcd_history_get(c, &h);
  return h.went_back;
}
