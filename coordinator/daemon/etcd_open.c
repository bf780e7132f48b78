/*
 * etcd_open.c: a daemon's etcd client from its options (daemon.h,
 * rd_etcd_open): the password read from its file, never from a flag, so
 * it does not show in `ps`.
 */
#include "daemon.h"
#include "ring_etcd.h"

#include <stdio.h>
#include <stdlib.h>

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
  free(password);
  if (rc != RING_OK)
    return snprintf(msg, cap, "etcd: %s", err.message), -1;
  return 0;
}
