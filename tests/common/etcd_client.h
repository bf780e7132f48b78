/*
 * etcd_client.h: opening a libring etcd client in a test, where failing to
 * open is the test's failure.
 */
#ifndef RING_ETCD_CLIENT_H
#define RING_ETCD_CLIENT_H

#include "ring_etcd.h"

#include <check.h>

/* A client for endpoints; timeouts in ms (0: the library's defaults). */
/* A client as user (NULL: none) with that password. */
static inline ring_etcd *test_client_as(const char *endpoints, const char *user,
                                        const char *password, uint32_t timeout_ms) {
  ring_etcd_opts o = {
      .endpoints = endpoints, .user = user, .password = password, .timeout_ms = timeout_ms};
  ring_etcd *c = NULL;
  ring_error err;
  ck_assert_msg(ring_etcd_open(&o, &c, &err) == RING_OK, "%s: %s", user, err.message);
  return c;
}

static inline ring_etcd *test_client(const char *endpoints, uint32_t timeout_ms,
                                     uint32_t connect_timeout_ms) {
  ring_etcd_opts o = {
      .endpoints = endpoints, .timeout_ms = timeout_ms, .connect_timeout_ms = connect_timeout_ms};
  ring_etcd *c = NULL;
  ring_error err;
  ck_assert_msg(ring_etcd_open(&o, &c, &err) == RING_OK, "%s", err.message);
  return c;
}

#endif /* RING_ETCD_CLIENT_H */
