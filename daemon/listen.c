/*
 * listen.c: the one parser of a listen address, for every server a daemon
 * runs (the /metrics server, the agent's arc server, ring-kv's API), and
 * the address a server advertises from it.
 *
 * The rule: HOST:PORT or [IPV6]:PORT; HOST a name or an IPv4 address,
 * PORT decimal 0..65535 (0: the kernel picks one). The host is never
 * empty: ":PORT" is refused, because a reader cannot tell whether it means
 * every IPv4 address, every IPv6 address or both (three servers once read
 * it two different ways). Every address is 0.0.0.0:PORT or [::]:PORT.
 */
#define _POSIX_C_SOURCE 200809L
#include "daemon.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int bad(const char *listen, const char *why, char *err, size_t errcap) {
  snprintf(err, errcap, "bad listen address '%s': %s (expected HOST:PORT or [IPV6]:PORT)", listen,
           why);
  return -1;
}

/* The host part of listen into host: [s[0], end), brackets taken off. */
static int split_host(const char *listen, const char **port, char *host, size_t cap, char *err,
                      size_t errcap) {
  const char *h = listen, *end = strrchr(listen, ':');
  if (listen[0] == '[') {
    h = listen + 1;
    end = strchr(listen, ']');
    if (end == NULL || end[1] != ':')
      return bad(listen, "no ']:' after an IPv6 address", err, errcap);
    *port = end + 2;
  } else {
    if (end == NULL)
      return bad(listen, "no port", err, errcap);
    if (memchr(listen, ':', (size_t)(end - listen)) != NULL)
      return bad(listen, "an IPv6 address goes in brackets", err, errcap);
    *port = end + 1;
  }
  size_t n = (size_t)(end - h);
  if (n == 0)
    return bad(listen, "no host (say 0.0.0.0 or [::] for every address)", err, errcap);
  if (n >= cap)
    return bad(listen, "host too long", err, errcap);
  memcpy(host, h, n);
  host[n] = '\0';
  return 0;
}

int rd_listen_split(const char *listen, char *host, size_t cap, uint16_t *port, char *err,
                    size_t errcap) {
  const char *p = NULL;
  listen = listen != NULL ? listen : "";
  if (split_host(listen, &p, host, cap, err, errcap) != 0)
    return -1;
  size_t digits = strspn(p, "0123456789");
  if (digits == 0 || digits > 5 || p[digits] != '\0' || atol(p) > 65535)
    return bad(listen, "the port is not a number in 0..65535", err, errcap);
  *port = (uint16_t)atol(p);
  return 0;
}

int rd_listen_resolve(const char *listen, struct sockaddr_storage *addr, char *err, size_t errcap) {
  char host[256], port[8];
  uint16_t num;
  if (rd_listen_split(listen, host, sizeof host, &num, err, errcap) != 0)
    return -1;
  snprintf(port, sizeof port, "%u", (unsigned)num);
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
  struct addrinfo *res = NULL;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc != 0 || res == NULL || res->ai_addrlen > sizeof *addr) {
    snprintf(err, errcap, "cannot resolve '%s': %s", listen, rc ? gai_strerror(rc) : "no address");
    if (res != NULL)
      freeaddrinfo(res);
    return -1;
  }
  memset(addr, 0, sizeof *addr);
  memcpy(addr, res->ai_addr, res->ai_addrlen); /* the first answer, as a client would */
  freeaddrinfo(res);
  return 0;
}

void rd_listen_advertise(const char *listen, unsigned port, char *out, size_t cap) {
  char host[256], err[8];
  uint16_t ignored;
  if (rd_listen_split(listen, host, sizeof host, &ignored, err, sizeof err) != 0 ||
      strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
    gethostname(host, sizeof host - 1); /* a wildcard is no address to reach */
    host[sizeof host - 1] = '\0';
  }
  snprintf(out, cap, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}
