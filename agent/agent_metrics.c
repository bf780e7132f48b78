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

static double free_bytes(const void *base) {
  return (double)arc_store_free_bytes(((const agent *)base)->store);
}

static double capacity_bytes(const void *base) {
  return (double)arc_store_capacity_bytes(((const agent *)base)->store);
}

static double files_refused(const void *base) {
  return (double)arc_store_refused(((const agent *)base)->store, NULL, 0);
}

static double etcd_restored(const void *base) {
  return atomic_load(&((const agent *)base)->restore.restored) ? 1.0 : 0.0;
}

static double etcd_requests(const void *base) {
  return (double)ring_etcd_requests(((const agent *)base)->etcd);
}

static void last_bad_signer(rd_text *t, const void *base) {
  char who[RING_ID_MAX + 1];
  arc_server_last_bad_signer(((const agent *)base)->server, who);
  if (who[0] != '\0') {
    rd_metric_head(t, "ring_agent_server_last_bad_signer", "gauge",
                   "the node named by the last request refused as bad_signer");
    rd_metric_labeled(t, "ring_agent_server_last_bad_signer", "node", who, 1);
  }
}

static void admit_metrics(rd_text *t, const void *base) {
  arc_server_admit_metrics(((const agent *)base)->server, "ring_agent_arc", t);
}

/* Room 0: the agent (its metrics); room 1: the arc server's stats, read once per scrape. */
#define AGENT 0
#define SERVER 1
#define GAUGE(field, name, help)                                                                   \
  RD_METRIC_FIELD(RD_METRIC_ATOMIC, AGENT, agent, m.field, name, "gauge", help)
#define COUNTER(field, name, help)                                                                 \
  RD_METRIC_FIELD(RD_METRIC_ATOMIC, AGENT, agent, m.field, name, "counter", help)
#define SERVER_GAUGE(field, name, help)                                                            \
  RD_METRIC_FIELD(RD_METRIC_U64, SERVER, arc_server_stats, field, name, "gauge", help)
#define SERVER_COUNTER(field, name, help)                                                          \
  RD_METRIC_FIELD(RD_METRIC_U64, SERVER, arc_server_stats, field, name, "counter", help)
static const rd_metric_desc agent_table[] = {
    GAUGE(version, "ring_agent_version", "the table version in service"),
    GAUGE(pending_version, "ring_agent_pending_version",
          "the version whose pending entries name this host; 0: none"),
    GAUGE(registered, "ring_agent_registered", "1 while alive/<id> is up"),
    COUNTER(registrations, "ring_agent_registrations_total", "times alive/<id> was put"),
    COUNTER(leases_lost, "ring_agent_leases_lost_total", "leases lost (then registered again)"),
    COUNTER(bytes_in, "ring_agent_bytes_in_total", "arc bytes received"),
    SERVER_COUNTER(bytes_out, "ring_agent_bytes_out_total", "arc bytes served"),
    GAUGE(rate_in, "ring_agent_rate_bytes_per_second", "arc bytes received per second, measured"),
    GAUGE(rate_limit, "ring_agent_rate_limit_bytes_per_second",
          "throttle.bytes_per_sec in force; 0: no limit"),
    GAUGE(parallel, "ring_agent_fetch_parallel", "arc fetches allowed at once"),
    GAUGE(in_flight, "ring_agent_arcs_in_flight", "arc fetches running"),
    GAUGE(queued, "ring_agent_arcs_queued", "incoming arcs waiting for a fetch or a retry"),
    COUNTER(fetched, "ring_agent_arcs_fetched_total", "arcs installed and verified"),
    COUNTER(fetch_failures, "ring_agent_fetch_failures_total", "fetch attempts that failed"),
    COUNTER(busy_waits, "ring_agent_busy_waits_total",
            "fetches put back for a moment because every source streamed at its limit"),
    COUNTER(source_switches, "ring_agent_source_switches_total",
            "fetches moved to another replica after a source failed"),
    COUNTER(checksum_failures, "ring_agent_checksum_failures_total",
            "files refetched after a checksum mismatch"),
    COUNTER(resumed_files, "ring_agent_resumed_files_total", "files continued from a partial copy"),
    COUNTER(
        stale_removed, "ring_agent_stale_removed_total",
        "arcs held without a fetch of this run behind them, taken out of service and rechecked"),
    COUNTER(stale_files, "ring_agent_stale_files_total",
            "files of rechecked or partial copies that the source had changed: fetched anew"),
    COUNTER(reused_bytes, "ring_agent_reused_bytes_total",
            "bytes already on disk that matched the source's checksums: not sent again"),
    COUNTER(empty_arcs, "ring_agent_empty_arcs_total",
            "empty arcs installed: a source's signed manifest listed no files, or the operator "
            "accepted the loss"),
    COUNTER(dropped, "ring_agent_arcs_dropped_total", "arcs removed after the drop grace"),
    GAUGE(held, "ring_agent_arcs_held", "arcs installed on disk"),
    GAUGE(bytes_held, "ring_agent_bytes_held",
          "bytes of the owned arcs held, at the last measure (sizes/<id>, every --sizes-every)"),
    COUNTER(adopted, "ring_agent_arcs_adopted_total",
            "empty arcs made for owned tokens granted with nothing to copy (first placement, "
            "migration none)"),
    GAUGE(missing, "ring_agent_arcs_missing",
          "owned tokens with no arc on this host: served as not held, never as empty"),
    COUNTER(refilled, "ring_agent_arcs_refilled_total",
            "missing owned arcs refilled from the token's other owners"),
    GAUGE(store_ok, "ring_agent_store_ok", "1 while the data dir's arcs/ and tmp/ are there"),
    RD_METRIC_GETTER(AGENT, free_bytes, "ring_agent_data_free_bytes", "gauge",
                     "free bytes on the data dir's file system"),
    /* the size beside the free bytes: an alert on a fraction holds for any disk */
    RD_METRIC_GETTER(AGENT, capacity_bytes, "ring_agent_data_capacity_bytes", "gauge",
                     "size of the data dir's file system; 0: it cannot be read"),
    COUNTER(progress_writes, "ring_agent_progress_writes_total", "progress/<id> values written"),
    SERVER_COUNTER(requests, "ring_agent_server_requests_total", "arc server requests"),
    SERVER_COUNTER(connections, "ring_agent_server_connections_total",
                   "connections the arc server accepted (fetchers keep theirs from arc to arc)"),
    SERVER_COUNTER(unauthorized, "ring_agent_server_unauthorized_total",
                   "arc server requests refused with 401: not signed for this node by a cluster "
                   "key, out of the time window, or replayed"),
    SERVER_COUNTER(bad_signer, "ring_agent_server_bad_signer_total",
                   "requests refused with 401 that carry a member's MAC but not the signature of "
                   "the key pinned for the node they name: a host speaking as another"),
    RD_METRIC_PUT(AGENT, last_bad_signer),
    GAUGE(pinned, "ring_agent_pinned_nodes",
          "nodes with a signing key pinned in nodes/ as this host last read it"),
    SERVER_COUNTER(skewed, "ring_agent_server_skewed_total",
                   "signed requests refused for a time out of the clock-skew window"),
    SERVER_COUNTER(replayed, "ring_agent_server_replays_total",
                   "signed requests refused as replays"),
    SERVER_COUNTER(busy, "ring_agent_server_busy_total",
                   "requests refused with 503: no room to remember their nonce"),
    SERVER_COUNTER(serve_busy, "ring_agent_server_serve_busy_total",
                   "arc file requests answered 503 busy: throttle.moves_per_node files were "
                   "streaming"),
    SERVER_GAUGE(serving, "ring_agent_server_streaming",
                 "arc files being streamed to fetchers now"),
    SERVER_COUNTER(not_held, "ring_agent_server_not_held_total",
                   "manifest requests for arcs this host does not hold"),
    SERVER_COUNTER(store_missing, "ring_agent_server_store_missing_total",
                   "requests answered 503 because arcs/ is missing"),
    COUNTER(not_held, "ring_agent_not_held_total",
            "fetches a source the table names as owner answered, signed, with \"not held\""),
    COUNTER(bad_signatures, "ring_agent_bad_signatures_total",
            "answers refused: not signed (cluster MAC and pinned key) by the node the table "
            "names at that address"),
    COUNTER(alive_refused, "ring_agent_alive_refused_total",
            "alive/ values refused when read: over the cap the coordinator applies, or a key "
            "naming no id (the host counts as not alive)"),
    COUNTER(losses_accepted, "ring_agent_losses_accepted_total",
            "arcs installed empty on the operator's accept-loss"),
    RD_METRIC_GETTER(AGENT, files_refused, "ring_agent_arc_files_refused_total", "counter",
                     "names in arcs/<token>/ refused as not regular files (FIFO, link, device, "
                     "directory): never listed nor served"),
    RD_METRIC_PUT(AGENT, admit_metrics),
    RD_METRIC_GETTER(AGENT, etcd_restored, "ring_agent_etcd_restored", "gauge",
                     "1 while etcd's history went back (a restore from an older snapshot): "
                     "nothing is dropped, fetched or acked until `ringctl recover`"),
    COUNTER(errors, "ring_agent_errors_total", "etcd operations that failed"),
    RD_METRIC_GETTER(AGENT, etcd_requests, "ring_agent_etcd_requests_total", "counter",
                     "etcd requests sent"),
};

void agent_metrics_text(void *ud, rd_text *t) {
  agent *a = ud;
  arc_server_stats ss = {0};
  if (a->server)
    arc_server_stats_get(a->server, &ss);
  const void *bases[] = {[AGENT] = a, [SERVER] = &ss};
  rd_metric_table(t, agent_table, sizeof agent_table / sizeof *agent_table, bases);
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
