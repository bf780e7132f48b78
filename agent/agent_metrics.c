/*
 * agent_metrics.c: /metrics (Prometheus text) and /healthz. Everything the
 * server's thread reads is an atomic or a thread-safe getter, so a slow
 * scrape never holds up the loop or a fetch.
 */
#include "agent.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define RATE_WINDOW_MS 1000

/* Names the last file the store refused (not a regular file) once per
 * new refusal seen, so a planted FIFO is in the log, not a flood of it. */
static void log_refused(agent *a) {
  char last[300];
  uint64_t n = arc_store_refused(a->store, last, sizeof last);
  if (n == a->refused_logged)
    return;
  char count[24];
  snprintf(count, sizeof count, "%" PRIu64, n);
  rd_log(RD_WARN, "refused a file in arcs/ that is not a regular file (not listed, not served)",
         "file", last, "total", count, NULL);
  a->refused_logged = n;
}

void agent_metrics_tick(agent *a) {
  log_refused(a);
  uint64_t now = rd_now_ms(), bytes = atomic_load(&a->m.bytes_in);
  if (a->rate_ms == 0) {
    a->rate_ms = now, a->rate_bytes = bytes;
  } else if (now - a->rate_ms >= RATE_WINDOW_MS) {
    atomic_store(&a->m.rate_in, (bytes - a->rate_bytes) * 1000 / (now - a->rate_ms));
    a->rate_ms = now, a->rate_bytes = bytes;
  }
}

void agent_metrics_text(void *ud, rd_text *t) {
  agent *a = ud;
  agent_metrics *m = &a->m;
  arc_server_stats ss = {0};
  if (a->server)
    arc_server_stats_get(a->server, &ss);
  rd_metric(t, "ring_agent_version", "gauge", "the table version in service", (double)m->version);
  rd_metric(t, "ring_agent_pending_version", "gauge",
            "the version whose pending entries name this host; 0: none",
            (double)m->pending_version);
  rd_metric(t, "ring_agent_registered", "gauge", "1 while alive/<id> is up", (double)m->registered);
  rd_metric(t, "ring_agent_registrations_total", "counter", "times alive/<id> was put",
            (double)m->registrations);
  rd_metric(t, "ring_agent_leases_lost_total", "counter", "leases lost (then registered again)",
            (double)m->leases_lost);
  rd_metric(t, "ring_agent_bytes_in_total", "counter", "arc bytes received", (double)m->bytes_in);
  rd_metric(t, "ring_agent_bytes_out_total", "counter", "arc bytes served", (double)ss.bytes_out);
  rd_metric(t, "ring_agent_rate_bytes_per_second", "gauge",
            "arc bytes received per second, measured", (double)m->rate_in);
  rd_metric(t, "ring_agent_rate_limit_bytes_per_second", "gauge",
            "throttle.bytes_per_sec in force; 0: no limit", (double)m->rate_limit);
  rd_metric(t, "ring_agent_fetch_parallel", "gauge", "arc fetches allowed at once",
            (double)m->parallel);
  rd_metric(t, "ring_agent_arcs_in_flight", "gauge", "arc fetches running", (double)m->in_flight);
  rd_metric(t, "ring_agent_arcs_queued", "gauge", "incoming arcs waiting for a fetch or a retry",
            (double)m->queued);
  rd_metric(t, "ring_agent_arcs_fetched_total", "counter", "arcs installed and verified",
            (double)m->fetched);
  rd_metric(t, "ring_agent_fetch_failures_total", "counter", "fetch attempts that failed",
            (double)m->fetch_failures);
  rd_metric(t, "ring_agent_busy_waits_total", "counter",
            "fetches put back for a moment because every source streamed at its limit",
            (double)m->busy_waits);
  rd_metric(t, "ring_agent_source_switches_total", "counter",
            "fetches moved to another replica after a source failed", (double)m->source_switches);
  rd_metric(t, "ring_agent_checksum_failures_total", "counter",
            "files refetched after a checksum mismatch", (double)m->checksum_failures);
  rd_metric(t, "ring_agent_resumed_files_total", "counter", "files continued from a partial copy",
            (double)m->resumed_files);
  rd_metric(t, "ring_agent_stale_removed_total", "counter",
            "arcs held without a fetch of this run behind them, taken out of service and rechecked",
            (double)m->stale_removed);
  rd_metric(t, "ring_agent_stale_files_total", "counter",
            "files of rechecked or partial copies that the source had changed: fetched anew",
            (double)m->stale_files);
  rd_metric(t, "ring_agent_reused_bytes_total", "counter",
            "bytes already on disk that matched the source's checksums: not sent again",
            (double)m->reused_bytes);
  rd_metric(t, "ring_agent_empty_arcs_total", "counter",
            "empty arcs installed: a source's signed manifest listed no files, or the operator "
            "accepted the loss",
            (double)m->empty_arcs);
  rd_metric(t, "ring_agent_arcs_dropped_total", "counter", "arcs removed after the drop grace",
            (double)m->dropped);
  rd_metric(t, "ring_agent_arcs_held", "gauge", "arcs installed on disk", (double)m->held);
  rd_metric(t, "ring_agent_arcs_adopted_total", "counter",
            "empty arcs made for owned tokens granted with nothing to copy (first placement, "
            "migration none)",
            (double)m->adopted);
  rd_metric(t, "ring_agent_arcs_missing", "gauge",
            "owned tokens with no arc on this host: served as not held, never as empty",
            (double)m->missing);
  rd_metric(t, "ring_agent_arcs_refilled_total", "counter",
            "missing owned arcs refilled from the token's other owners", (double)m->refilled);
  rd_metric(t, "ring_agent_store_ok", "gauge", "1 while the data dir's arcs/ and tmp/ are there",
            (double)m->store_ok);
  rd_metric(t, "ring_agent_data_free_bytes", "gauge", "free bytes on the data dir's file system",
            (double)arc_store_free_bytes(a->store));
  /* the size beside the free bytes: an alert on a fraction holds for any disk */
  rd_metric(t, "ring_agent_data_capacity_bytes", "gauge",
            "size of the data dir's file system; 0: it cannot be read",
            (double)arc_store_capacity_bytes(a->store));
  rd_metric(t, "ring_agent_progress_writes_total", "counter", "progress/<id> values written",
            (double)m->progress_writes);
  rd_metric(t, "ring_agent_server_requests_total", "counter", "arc server requests",
            (double)ss.requests);
  rd_metric(t, "ring_agent_server_connections_total", "counter",
            "connections the arc server accepted (fetchers keep theirs from arc to arc)",
            (double)ss.connections);
  rd_metric(t, "ring_agent_server_unauthorized_total", "counter",
            "arc server requests refused with 401: not signed for this node by a cluster key, "
            "out of the time window, or replayed",
            (double)ss.unauthorized);
  rd_metric(t, "ring_agent_server_bad_signer_total", "counter",
            "requests refused with 401 that carry a member's MAC but not the signature of the "
            "key pinned for the node they name: a host speaking as another",
            (double)ss.bad_signer);
  char who[RING_ID_MAX + 1];
  arc_server_last_bad_signer(a->server, who);
  if (who[0] != '\0') {
    rd_metric_head(t, "ring_agent_server_last_bad_signer", "gauge",
                   "the node named by the last request refused as bad_signer");
    rd_metric_labeled(t, "ring_agent_server_last_bad_signer", "node", who, 1);
  }
  rd_metric(t, "ring_agent_pinned_nodes", "gauge",
            "nodes with a signing key pinned in nodes/ as this host last read it",
            (double)m->pinned);
  rd_metric(t, "ring_agent_server_skewed_total", "counter",
            "signed requests refused for a time out of the clock-skew window", (double)ss.skewed);
  rd_metric(t, "ring_agent_server_replays_total", "counter", "signed requests refused as replays",
            (double)ss.replayed);
  rd_metric(t, "ring_agent_server_busy_total", "counter",
            "requests refused with 503: no room to remember their nonce", (double)ss.busy);
  rd_metric(t, "ring_agent_server_serve_busy_total", "counter",
            "arc file requests answered 503 busy: throttle.moves_per_node files were streaming",
            (double)ss.serve_busy);
  rd_metric(t, "ring_agent_server_streaming", "gauge", "arc files being streamed to fetchers now",
            (double)ss.serving);
  rd_metric(t, "ring_agent_server_not_held_total", "counter",
            "manifest requests for arcs this host does not hold", (double)ss.not_held);
  rd_metric(t, "ring_agent_server_store_missing_total", "counter",
            "requests answered 503 because arcs/ is missing", (double)ss.store_missing);
  rd_metric(t, "ring_agent_not_held_total", "counter",
            "fetches a source the table names as owner answered, signed, with \"not held\"",
            (double)m->not_held);
  rd_metric(t, "ring_agent_bad_signatures_total", "counter",
            "answers refused: not signed (cluster MAC and pinned key) by the node the table "
            "names at that address",
            (double)m->bad_signatures);
  rd_metric(t, "ring_agent_alive_refused_total", "counter",
            "alive/ values refused when read: over the cap the coordinator applies, or a key "
            "naming no id (the host counts as not alive)",
            (double)m->alive_refused);
  rd_metric(t, "ring_agent_losses_accepted_total", "counter",
            "arcs installed empty on the operator's accept-loss", (double)m->losses_accepted);
  rd_metric(t, "ring_agent_arc_files_refused_total", "counter",
            "names in arcs/<token>/ refused as not regular files (FIFO, link, device, "
            "directory): never listed nor served",
            (double)arc_store_refused(a->store, NULL, 0));
  arc_server_admit_metrics(a->server, "ring_agent_arc", t);
  rd_metric(t, "ring_agent_etcd_restored", "gauge",
            "1 while etcd's history went back (a restore from an older snapshot): nothing is "
            "dropped, fetched or acked until `ringctl recover`",
            atomic_load(&a->restore.restored) ? 1.0 : 0.0);
  rd_metric(t, "ring_agent_errors_total", "counter", "etcd operations that failed",
            (double)m->errors);
  rd_metric(t, "ring_agent_etcd_requests_total", "counter", "etcd requests sent",
            (double)ring_etcd_requests(a->etcd));
}

bool agent_health_text(void *ud, rd_text *t) {
  agent *a = ud;
  if (!rd_restore_health(&a->restore, t)) /* first: it outweighs any other trouble */
    return false;
  if (atomic_load(&a->m.registered) == 0) {
    rd_text why = {0};
    bool told = !rd_health_text(&a->health, &why); /* say why, when a step said so */
    ring__sb_printf(t, "not registered%s%.*s", told ? ": " : " yet\n", told ? (int)why.len : 0,
                    told && why.p ? why.p : "");
    free(why.p);
    return false;
  }
  return rd_health_text(&a->health, t);
}
