/*
 * ringctl_missing.c: token-replicas their owners report missing
 * (missing/<id>, proto/etcd.md) as ringctl shows them (ringctl_out.h):
 * the "missing replicas" section of `ringctl status` and the violations
 * of `ringctl verify`. The view is cluster.h's, the coordinator's too.
 */
#include "ringctl_out.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* "17, 40, 41" of the first max of t[0..n), then ", ..." when cut. */
static void tokens_line(char *buf, size_t size, const uint32_t *t, uint32_t n, uint32_t max) {
  size_t at = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < n && i < max && at < size; i++)
    at += (size_t)snprintf(buf + at, size - at, "%s%" PRIu32, i ? ", " : "", t[i]);
  if (n > max && at < size)
    snprintf(buf + at, size - at, ", ...");
}

/* The refill's last error for the host's first failing token, "" if none. */
static const char *first_error(const rk_missing_host *h) {
  return h->m != NULL && h->m->n_failing > 0 ? h->m->failing[0].error : "";
}

bool ringctl_missing_text(FILE *f, const rk_missing_view *v, bool refill_waits) {
  if (v->replicas == 0)
    return false;
  char line[256];
  fprintf(f, "\nmissing replicas: %" PRIu32 " (owners report no arc; %s)\n", v->replicas,
          refill_waits ? "NOT refilled: the refill waits for auto-apply policy none, "
                         "`ringctl auto-apply repair` lets it run"
                       : "refilled from the other owners");
  fprintf(f, "  %-20s %6s  %-40s %s\n", "NODE", "COUNT", "TOKENS", "LAST ERROR");
  for (uint32_t i = 0; i < v->n_hosts; i++) {
    const rk_missing_host *h = &v->hosts[i];
    tokens_line(line, sizeof line, h->tokens, h->n, 8);
    fprintf(f, "  %-20s %6" PRIu32 "  %-40s %s\n", h->id, h->n, line, first_error(h));
  }
  if (v->n_lost > 0) {
    tokens_line(line, sizeof line, v->lost, v->n_lost, 32);
    fprintf(f,
            "lost tokens: %" PRIu32 " (every owner lacks them; never installed empty unless "
            "ringctl accept-loss): %s\n",
            v->n_lost, line);
  }
  return true;
}

int ringctl_missing_violations(const rk_missing_view *v, cJSON *arr) {
  char line[320], toks[200];
  int n = 0;
  for (uint32_t i = 0; i < v->n_hosts; i++, n++) {
    const rk_missing_host *h = &v->hosts[i];
    tokens_line(toks, sizeof toks, h->tokens, h->n, 8);
    snprintf(line, sizeof line, "%s reports %" PRIu32 " owned token-replicas missing: %s", h->id,
             h->n, toks);
    cJSON_AddItemToArray(arr, cJSON_CreateString(line));
  }
  if (v->n_lost > 0) {
    tokens_line(toks, sizeof toks, v->lost, v->n_lost, 16);
    snprintf(line, sizeof line, "%" PRIu32 " tokens lost (every owner reports them missing): %s",
             v->n_lost, toks);
    cJSON_AddItemToArray(arr, cJSON_CreateString(line));
    n++;
  }
  return n;
}
