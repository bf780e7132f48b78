/*
 * names.c: the format rules libring's table and proto's records both apply:
 * the character classes of ids, label values and addresses
 * (proto/table.md), node states by name, and the spelling of a cluster's
 * etcd keys and of the `version` value (proto/etcd.md).
 */
#include "ringx.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------ character classes */

static bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

bool ring__valid_id(const char *s) {
  size_t n = 0;
  for (; s != NULL && s[n] != '\0'; n++)
    if (n >= RING_ID_MAX || !id_char(s[n]))
      return false;
  return n > 0;
}

bool ring__valid_label_value(const char *s) {
  size_t n = 0;
  for (; s[n] != '\0'; n++) {
    char c = s[n];
    if (n >= RING_ID_MAX || !(id_char(c) || (c >= 'A' && c <= 'Z') || c == ':'))
      return false;
  }
  return n > 0;
}

/* host:port, host a name, an IPv4 address or a bracketed IPv6 address. */
bool ring__valid_addr(const char *s) {
  size_t n = strlen(s);
  if (n < 3 || n > RING_ADDR_MAX)
    return false;
  const char *colon = strrchr(s, ':');
  if (colon == NULL || colon == s || colon[1] == '\0')
    return false;
  long port = 0;
  for (const char *p = colon + 1; *p; p++) {
    if (*p < '0' || *p > '9' || (port = port * 10 + (*p - '0')) > 65535)
      return false;
  }
  if (port == 0)
    return false;
  bool bracket = s[0] == '[';
  if (bracket && colon[-1] != ']')
    return false;
  for (const char *p = s + bracket; p < colon - bracket; p++) {
    char c = *p;
    bool ok = id_char(c) || (c >= 'A' && c <= 'Z') || (bracket && c == ':');
    if (!ok)
      return false;
  }
  return colon - s > 2 * bracket;
}

/* ------------------------------------------------------------ node states */

static const char *const state_names[] = {"joining", "active", "draining", "down", "removed"};

const char *ring__node_state_name(ring_node_state s) {
  return (unsigned)s <= RING_NODE_REMOVED ? state_names[s] : "unknown";
}

int ring__node_state_parse(const char *name) {
  for (int i = 0; name && i <= (int)RING_NODE_REMOVED; i++)
    if (strcmp(state_names[i], name) == 0)
      return i;
  return RING_EINVAL;
}

/* ---------------------------------------------------------------- etcd keys */

int ring__key(char *key, size_t cap, const char *cluster, const char *dir, const char *name) {
  if (key == NULL || cluster == NULL || dir == NULL || name == NULL)
    return RING_EINVAL;
  int n = snprintf(key, cap, "/ringkeeper/%s/%s%s", cluster, dir, name);
  return n < 0 || (size_t)n >= cap ? RING_EINVAL : n;
}

/* Parses a decimal version, 1 .. RING_VERSION_MAX, nothing else. */
bool ring__parse_version(const uint8_t *p, size_t len, uint64_t *out) {
  uint64_t v = 0;
  if (p == NULL || len == 0 || len > 16)
    return false;
  for (size_t i = 0; i < len; i++) {
    if (p[i] < '0' || p[i] > '9')
      return false;
    v = v * 10 + (uint64_t)(p[i] - '0');
  }
  if (v < 1 || v > RING_VERSION_MAX)
    return false;
  *out = v;
  return true;
}
