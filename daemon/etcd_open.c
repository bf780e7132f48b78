/*
 * etcd_open.c: the etcd options every daemon takes, and its etcd client
 * from them (daemon.h, rd_etcd_open): the password read from its file,
 * never from a flag, so it does not show in `ps`.
 */
#include "daemon.h"
#include "ring_etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rd_etcd_opts(rd_etcd_conf *c, rd_opt *t) {
  const rd_opt table[RD_ETCD_OPTS] = {
      {"endpoints", RD_OPT_STRING, &c->endpoints, 0, 0, "etcd client URLs, comma-separated"},
      {"user", RD_OPT_STRING, &c->user, 0, 0, "etcd user"},
      {"password-file", RD_OPT_STRING, &c->password_file, 0, 0, "file holding the etcd password"},
      {"etcd-ca-file", RD_OPT_STRING, &c->ca_file, 0, 0, "CA bundle for etcd TLS"},
      {"etcd-cert-file", RD_OPT_STRING, &c->cert_file, 0, 0, "client certificate for etcd TLS"},
      {"etcd-key-file", RD_OPT_STRING, &c->key_file, 0, 0, "client key for etcd TLS"},
      {"etcd-timeout", RD_OPT_MS, &c->timeout_ms, 100, 600000, "per etcd request"},
  };
  memcpy(t, table, sizeof table);
}

rd_opt *rd_opts_with_etcd(rd_etcd_conf *c, const rd_opt *own) {
  size_t n = 0;
  while (own[n].name != NULL)
    n++;
  rd_opt *t = calloc(RD_ETCD_OPTS + n + 1, sizeof *t); /* the last row stays {NULL} */
  if (t == NULL)
    return NULL;
  rd_etcd_opts(c, t);
  memcpy(t + RD_ETCD_OPTS, own, n * sizeof *own);
  return t;
}

void rd_opts_release(rd_opt *table) {
  if (table == NULL)
    return;
  rd_opts_free(table);
  free(table);
}

int rd_etcd_check(const rd_etcd_conf *c, char *msg, size_t cap) {
  if (c->endpoints == NULL || c->endpoints[0] == '\0')
    return snprintf(msg, cap, "--endpoints is required"), -1;
  if ((c->user == NULL) != (c->password_file == NULL))
    return snprintf(msg, cap, "--user and --password-file go together"), -1;
  return 0;
}

int rd_etcd_open(const rd_etcd_conf *c, struct ring_etcd **out, char *msg, size_t cap) {
  char *password = NULL;
  if (c->password_file && (password = rd_read_secret(c->password_file, msg, cap)) == NULL)
    return -1;
  ring_etcd_opts eo = {.endpoints = c->endpoints,
                       .user = c->user,
                       .password = password,
                       .ca_file = c->ca_file,
                       .cert_file = c->cert_file,
                       .key_file = c->key_file,
                       .timeout_ms = (uint32_t)c->timeout_ms};
  ring_error err = {0};
  int rc = ring_etcd_open(&eo, out, &err);
  if (password != NULL)
    memset(password, 0, strlen(password)); /* no copy of it outlives the open */
  free(password);
  if (rc != RING_OK)
    return snprintf(msg, cap, "etcd: %s", err.message), -1;
  return 0;
}
