/*
 * ringctl_audit.c: the journal entries of operators' changes (approvals,
 * pause, resume, cancel, throttle, auto-apply, drain, undrain, weight,
 * label, remove, accept-loss, recover, init), written in the txn of the
 * change itself (ringctl_txn).
 *
 * `by` is what the operator says they are (--as NAME) or their login and
 * host: a record for people, not an authentication. Who may write at all
 * is etcd's to enforce (--user and etcd's roles, deploy/PRODUCTION.md).
 */
#define _POSIX_C_SOURCE 200809L /* gethostname, getpwuid */
#include "ringctl_etcd.h"

#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ringctl_audit(ringctl_ctx *ctx, const char *what, const char *node, const char *fmt, ...) {
  ringctl_audit_entry *e = &ctx->audit;
  snprintf(e->what, sizeof e->what, "%s", what);
  snprintf(e->node, sizeof e->node, "%s", node ? node : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->detail, sizeof e->detail, fmt, ap); /* a longer detail is cut */
  va_end(ap);
  e->pending = true;
}

/* --as NAME, else "<login>@<host>". */
static void who(const ringctl_ctx *ctx, char by[RK_EVENT_BY_MAX + 1]) {
  if (ctx->a->globals->as != NULL) {
    snprintf(by, RK_EVENT_BY_MAX + 1, "%s", ctx->a->globals->as);
    return;
  }
  const struct passwd *pw = getpwuid(geteuid());
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0)
    snprintf(host, sizeof host, "unknown-host");
  if (pw != NULL)
    snprintf(by, RK_EVENT_BY_MAX + 1, "%.60s@%.60s", pw->pw_name, host);
  else
    snprintf(by, RK_EVENT_BY_MAX + 1, "uid%u@%.60s", (unsigned)geteuid(), host);
}

int ringctl_audit_ops(ringctl_ctx *ctx, const ring_op *ops, uint32_t n, ring_op **all,
                      char **entry) {
  char *key = ctx->audit.key;
  char by[RK_EVENT_BY_MAX + 1];
  who(ctx, by);
  size_t len = 0;
  int klen = rk_journal_entry(ctx->cluster, ringctl_now_ms(), by, ctx->audit.what, ctx->audit.node,
                              ctx->audit.detail, key, entry, &len);
  if (klen < 0)
    return ringctl_fail(ctx, klen, NULL, "writing the journal entry");
  if ((*all = malloc(((size_t)n + 1) * sizeof **all)) == NULL) {
    free(*entry);
    *entry = NULL;
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  }
  if (n > 0)
    memcpy(*all, ops, (size_t)n * sizeof **all);
  (*all)[n] = (ring_op){RING_OP_PUT, key, (size_t)klen, *entry, len, 0, false};
  return RINGCTL_EXIT_OK;
}
