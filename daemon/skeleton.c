/*
 * skeleton.c: what each daemon's start shares (daemon.h, "a daemon's
 * skeleton"): the rows of the options every daemon takes, their checks,
 * the exit codes of --help and of a usage error, and the log's set-up.
 */
#include "daemon.h"

#include "ring.h" /* ring_id_valid, RING_ID_MAX, RING_ADDR_MAX */

#include <stdio.h>
#include <string.h>

rd_opt rd_common_row(rd_common *c, rd_common_opt k, const char *help) {
  switch (k) {
  case RD_CLUSTER:
    return (rd_opt){"cluster",   RD_OPT_STRING,
                    &c->cluster, 0,
                    0,           help ? help : "cluster name: keys under /ringkeeper/NAME/"};
  case RD_ID:
    return (rd_opt){"id", RD_OPT_STRING, &c->id, 0, 0, help};
  case RD_LISTEN:
    return (rd_opt){"listen", RD_OPT_STRING, &c->listen, 0, 0, help};
  case RD_ADVERTISE:
    return (rd_opt){"advertise", RD_OPT_STRING, &c->advertise, 0, 0, help};
  case RD_DATA_DIR:
    return (rd_opt){"data-dir", RD_OPT_STRING, &c->data_dir, 0, 0, help};
  case RD_LOG_LEVEL:
    return (rd_opt){"log-level",
                    RD_OPT_STRING,
                    &c->log_level,
                    0,
                    0,
                    help ? help : "debug, info, warn or error"};
  case RD_LEASE_TTL:
    return (rd_opt){"lease-ttl", RD_OPT_MS, &c->lease_ttl_ms, 2000, 600000, help};
  }
  return (rd_opt){NULL, 0, NULL, 0, 0, NULL};
}

/* The id: optional unless required, and then named by id_meta. */
static bool id_ok(const rd_daemon *d, const char *id) {
  size_t max = d->id_max ? d->id_max : RING_ID_MAX;
  return ring_id_valid(id) && strlen(id) <= max;
}

static int check_id(const rd_daemon *d, const rd_common *c, char *msg, size_t cap) {
  size_t max = d->id_max ? d->id_max : RING_ID_MAX;
  if ((d->need & RD_NEED_ID) && !id_ok(d, c->id))
    return snprintf(msg, cap, "--id %s is required ([a-z0-9._-]{1,%zu})", d->id_meta, max), -1;
  return 0;
}

/* Checks what the option parser cannot, in the order the daemons always
 * did (an optional id first, a required one after the cluster). */
static int check_common(const rd_daemon *d, const rd_common *c, char *msg, size_t cap) {
  if (rd_etcd_check(&c->etcd, msg, cap) != 0)
    return -1;
  if (!(d->need & RD_NEED_ID) && c->id != NULL && !id_ok(d, c->id))
    return snprintf(msg, cap, "--id: \"%s\" is not [a-z0-9._-]{1,63}", c->id), -1;
  if (!ring_id_valid(c->cluster))
    return snprintf(msg, cap, "--cluster NAME is required ([a-z0-9._-]{1,63})"), -1;
  if (check_id(d, c, msg, cap) != 0)
    return -1;
  if ((d->need & RD_NEED_LISTEN) && (c->listen == NULL || strchr(c->listen, ':') == NULL))
    return snprintf(msg, cap, "--listen HOST:PORT is required"), -1;
  if (c->advertise && (strchr(c->advertise, ':') == NULL || strlen(c->advertise) > RING_ADDR_MAX))
    return snprintf(msg, cap, "--advertise: \"%s\" is not HOST:PORT", c->advertise), -1;
  if ((d->need & RD_NEED_DATA_DIR) && (c->data_dir == NULL || c->data_dir[0] == '\0'))
    return snprintf(msg, cap, "--data-dir is required"), -1;
  if (c->log_level && rd_log_level_parse(c->log_level) < 0)
    return snprintf(msg, cap, "--log-level: \"%s\" is not debug, info, warn or error",
                    c->log_level),
           -1;
  return 0;
}

int rd_daemon_start(const rd_daemon *d, int argc, char **argv, const rd_opt *table, rd_common *c,
                    const void *opts) {
  char msg[512] = "";
  if (table == NULL) {
    fprintf(stderr, "%s: out of memory\n", d->name);
    return 1;
  }
  int rc = rd_opts_parse(argc, argv, d->summary, table, msg, sizeof msg);
  if (rc == RD_OPTS_HELP)
    return 0;
  if (rc != RD_OPTS_OK || check_common(d, c, msg, sizeof msg) != 0 ||
      (d->check && d->check(opts, msg, sizeof msg) != 0)) {
    fprintf(stderr, "%s: %s\n", d->name, msg);
    return 2;
  }
  rd_log_init(d->component, c->log_level ? (rd_level)rd_log_level_parse(c->log_level) : RD_INFO, 2);
  rd_metrics_identify(d->component, c->cluster);
  return -1;
}
