/*
 * ringctl_etcd.c: see ringctl_etcd.h.
 *
 * Sections: options to a client; the session; failures; reading; writing.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "ringctl_etcd.h"
#include "daemon.h" /* rd_read_secret: the one reader of secret files */
#include "ringctl_out.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_ENDPOINTS "http://127.0.0.1:2379"
#define DEFAULT_TIMEOUT_MS 10000u /* the whole command: rides out an etcd election */
#define REQUEST_TIMEOUT_MS 5000u  /* one request, at most */
#define CAS_ATTEMPTS 5

static void unknown_json(void);

/* ------------------------------------------------------ options to a client */

/* Checks the global options and fills o (strings borrowed from argv, and
 * *pw: the password read from its file, malloc()'ed, for the caller to
 * wipe and free). */
static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int client_opts(const ringctl_args *a, ring_etcd_opts *o, int64_t *deadline, char **pw) {
  const ringctl_globals *g = a->globals;
  if (g->cluster == NULL)
    return ringctl_usage_error(a, "--cluster NAME is required");
  if (!ring_id_valid(g->cluster))
    return ringctl_usage_error(a, "--cluster: \"%s\" is not a cluster name ([a-z0-9._-]{1,63})",
                               g->cluster);
  if ((g->user == NULL) != (g->password_file == NULL))
    return ringctl_usage_error(a, "--user and --password-file go together");
  if ((g->cert == NULL) != (g->key == NULL))
    return ringctl_usage_error(a, "--etcd-cert-file and --etcd-key-file go together");
  uint64_t timeout = DEFAULT_TIMEOUT_MS;
  if (g->timeout != NULL &&
      ringctl_parse_duration(a, "timeout", g->timeout, 100, 7ull * 24 * 3600 * 1000, &timeout) != 0)
    return RINGCTL_EXIT_USAGE;
  *deadline = g->until_done && g->timeout == NULL ? 0 : mono_ms() + (int64_t)timeout;
  if (timeout > REQUEST_TIMEOUT_MS)
    timeout = REQUEST_TIMEOUT_MS;
  *o = (ring_etcd_opts){.endpoints = g->endpoints ? g->endpoints : DEFAULT_ENDPOINTS,
                        .user = g->user,
                        .ca_file = g->cacert,
                        .cert_file = g->cert,
                        .key_file = g->key,
                        .timeout_ms = (uint32_t)timeout,
                        .connect_timeout_ms = timeout < 1000 ? (uint32_t)timeout : 1000};
  if (g->user == NULL)
    return RINGCTL_EXIT_OK;
  char msg[512];
  if ((*pw = rd_read_secret(g->password_file, msg, sizeof msg)) == NULL) {
    fprintf(stderr, "%s: the password file: %s\n", a->prog, msg);
    return RINGCTL_EXIT_FAILURE;
  }
  o->password = *pw;
  return RINGCTL_EXIT_OK;
}

/* Wipes and frees a secret read by rd_read_secret. */
static void secret_free(char *s) {
  if (s != NULL)
    memset(s, 0, strlen(s));
  free(s);
}

/* ------------------------------------------------------------ the session */

/* --as: 1 .. 127 bytes of printable ASCII (proto/etcd.md, journal `by`). */
static bool valid_as(const char *as) {
  size_t n = strlen(as);
  for (size_t i = 0; i < n; i++)
    if (as[i] < 0x20 || as[i] > 0x7e)
      return false;
  return n >= 1 && n <= RK_EVENT_BY_MAX;
}

int ringctl_with_etcd(ringctl_args *a, ringctl_body_fn body, void *ud) {
  int rc = ringctl_config_load(a);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (a->globals->as != NULL && !valid_as(a->globals->as))
    return ringctl_usage_error(a, "--as: 1 to %d printable ASCII characters", RK_EVENT_BY_MAX);
  ring_etcd_opts o;
  char *pw = NULL;
  int64_t deadline = 0;
  rc = client_opts(a, &o, &deadline, &pw);
  if (rc != RINGCTL_EXIT_OK) {
    secret_free(pw);
    return rc;
  }
  ringctl_ctx ctx = {.a = a, .etcd = NULL, .cluster = a->globals->cluster, .deadline_ms = deadline};
  ring_error err = {RING_OK, ""};
  int ring_rc = ring_etcd_open(&o, &ctx.etcd, &err);
  secret_free(pw);
  if (ring_rc != RING_OK)
    return ringctl_fail(&ctx, ring_rc, &err, "connecting to etcd");
  ring_etcd_set_deadline(ctx.etcd, deadline);
  rc = body(&ctx, ud);
  if (rc == RINGCTL_EXIT_UNKNOWN && a->globals->json && !ringctl_json_emitted())
    unknown_json(); /* a script reading stdout learns why, not nothing */
  ring_etcd_close(ctx.etcd);
  return rc;
}

/* The apply function of a command that takes no arguments. */
static int no_arguments(const ringctl_args *a, int id, const char *value, void *ud) {
  (void)id, (void)ud;
  return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
}

int ringctl_run_plain(ringctl_args *a, const char *help, ringctl_body_fn body, void *ud) {
  bool help_shown = false;
  int rc = ringctl_parse(a, NULL, help, no_arguments, NULL, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, body, ud);
}

/* ---------------------------------------------------------------- failures */

/* The last "could not tell" failure's message, for --json. */
static char unknown_why[RINGCTL_UNREACHABLE_MAX];

/* --json's object when etcd could not be reached: {"error", "exit":4}. */
static void unknown_json(void) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "error", unknown_why[0] ? unknown_why : "etcd did not answer");
  cJSON_AddNumberToObject(o, "exit", RINGCTL_EXIT_UNKNOWN);
  ringctl_json_emit(o);
}

int ringctl_fail(const ringctl_ctx *ctx, int rc, const ring_error *err, const char *what) {
  const char *detail = err != NULL && err->code != RING_OK && err->message[0] != '\0'
                           ? err->message
                           : ring_strerror(rc);
  bool unreachable = rc == RING_ECONNECT || rc == RING_ETIMEDOUT || rc == RING_EUNKNOWN;
  if (unreachable)
    snprintf(unknown_why, sizeof unknown_why, "%s: %s", what, detail);
  if (unreachable && ctx->unreachable != NULL) {
    snprintf(ctx->unreachable, RINGCTL_UNREACHABLE_MAX, "%s: %s", what, detail);
    return RINGCTL_EXIT_UNKNOWN;
  }
  fprintf(stderr, "%s: %s: %s\n", ctx->a->prog, what, detail);
  if (rc == RING_ECONNECT || rc == RING_ETIMEDOUT)
    fprintf(stderr, "%s: is etcd running at %s? (exit 4: could not tell)\n", ctx->a->prog,
            ctx->a->globals->endpoints ? ctx->a->globals->endpoints : DEFAULT_ENDPOINTS);
  return unreachable ? RINGCTL_EXIT_UNKNOWN : RINGCTL_EXIT_FAILURE;
}

int ringctl_say(const ringctl_ctx *ctx, int code, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", ctx->a->prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return code;
}

/* ------------------------------------------------------------------ reading */

void ringctl_key(const ringctl_ctx *ctx, const char *what, char key[RK_KEY_MAX]) {
  if (rk_key(key, ctx->cluster, what) < 0)
    key[0] = '\0'; /* cannot happen: cluster names and ids are short */
}

int ringctl_read_state(ringctl_ctx *ctx, unsigned what, rk_state *st) {
  ring_error err = {RING_OK, ""};
  rk_state s;
  memset(&s, 0, sizeof s);
  int rc = rk_state_read(ctx->etcd, ctx->cluster, what | RK_READ_CONFIG, &s, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading the cluster");
  if (!s.has_config) {
    rk_state_free(&s);
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE,
                       "cluster \"%s\" is not initialised (see ringctl init)", ctx->cluster);
  }
  *st = s;
  return RINGCTL_EXIT_OK;
}

int ringctl_read_table(ringctl_ctx *ctx, uint64_t version, ring_table **out) {
  ring_error err = {RING_OK, ""};
  int rc = rk_table_read(ctx->etcd, ctx->cluster, version, out, &err);
  if (rc == RING_OK)
    return RINGCTL_EXIT_OK;
  char what[64];
  snprintf(what, sizeof what, "reading table version %llu", (unsigned long long)version);
  return ringctl_fail(ctx, rc, &err, what);
}

int ringctl_read_live(ringctl_ctx *ctx, unsigned what, rk_state *st, ring_table **table) {
  int rc = ringctl_read_state(ctx, what | RK_READ_VERSION, st);
  *table = NULL;
  if (rc != RINGCTL_EXIT_OK || st->version == 0)
    return rc;
  if ((rc = ringctl_read_table(ctx, st->version, table)) != RINGCTL_EXIT_OK)
    rk_state_free(st);
  return rc;
}

int ringctl_with_table(ringctl_ctx *ctx, const char *none, ringctl_table_fn fn, void *ud) {
  rk_state st;
  ring_table *t = NULL;
  int rc = ringctl_read_live(ctx, RK_READ_VERSION, &st, &t);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (t == NULL && none != NULL)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "no table is published yet: %s", none);
  else
    rc = fn(ctx, &st, t, ud);
  ring_table_free(t);
  rk_state_free(&st);
  return rc;
}

int ringctl_get(ringctl_ctx *ctx, const char *key, ring_kv *kv, bool *found) {
  ring_kvs r;
  ring_error err = {RING_OK, ""};
  int rc = ring_etcd_range(ctx->etcd, key, strlen(key), NULL, &r, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading from etcd");
  *found = r.n > 0;
  if (*found) {
    *kv = r.kvs[0];
    memset(&r.kvs[0], 0, sizeof r.kvs[0]); /* ownership moves to kv */
  }
  ring_kvs_clear(&r);
  return RINGCTL_EXIT_OK;
}

int ringctl_get_required(ringctl_ctx *ctx, const char *key, ring_kv *kv, const char *missing) {
  bool found = false;
  int rc = ringctl_get(ctx, key, kv, &found);
  if (rc == RINGCTL_EXIT_OK && !found)
    rc = ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "%s", missing);
  return rc;
}

int ringctl_get_prefix(ringctl_ctx *ctx, const char *prefix, ring_kvs *out) {
  ring_range_opts o = {.prefix = true};
  ring_error err = {RING_OK, ""};
  int rc = ring_etcd_range(ctx->etcd, prefix, strlen(prefix), &o, out, &err);
  return rc == RING_OK ? RINGCTL_EXIT_OK : ringctl_fail(ctx, rc, &err, "reading from etcd");
}

/* ------------------------------------------------------------------ writing */

int ringctl_txn(ringctl_ctx *ctx, const ring_cmp *cmps, uint32_t n_cmps, const ring_op *ops,
                uint32_t n_ops, const char *what, bool *won) {
  ring_op *all = NULL;
  char *entry = NULL;
  if (ctx->audit.pending) {
    int rc = ringctl_audit_ops(ctx, ops, n_ops, &all, &entry);
    if (rc != RINGCTL_EXIT_OK)
      return rc;
    ops = all;
    n_ops++;
  }
  ring_txn_result r;
  ring_error err = {RING_OK, ""};
  int rc = ring_etcd_txn(ctx->etcd, cmps, n_cmps, ops, n_ops, NULL, 0, &r, &err);
  free(all);
  free(entry);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, what);
  *won = r.succeeded;
  if (*won)
    ctx->audit.pending = false;
  ring_txn_result_clear(&r);
  return RINGCTL_EXIT_OK;
}

/* Writes value to key if its mod revision is still mod. *won: it was. */
static int put_if_unchanged(ringctl_ctx *ctx, const char *key, int64_t mod, const char *value,
                            size_t len, bool *won) {
  ring_cmp cmp = {key, strlen(key), RING_CMP_MOD, RING_CMP_EQ, mod, NULL, 0};
  ring_op put = {RING_OP_PUT, key, strlen(key), value, len, 0, false};
  return ringctl_txn(ctx, &cmp, 1, &put, 1, "writing to etcd", won);
}

/* One read-edit-write round; *won false when the key changed meanwhile. */
static int cas_once(ringctl_ctx *ctx, const char *key, const char *missing, ringctl_edit_fn edit,
                    void *ud, bool *won) {
  ring_kv kv;
  int rc = ringctl_get_required(ctx, key, &kv, missing);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  char *value = NULL;
  size_t len = 0;
  rc = edit(ctx, &kv, &value, &len, ud);
  *won = value == NULL; /* nothing to change */
  if (rc == RINGCTL_EXIT_OK && value != NULL)
    rc = put_if_unchanged(ctx, key, kv.mod_revision, value, len, won);
  free(value);
  ring_kv_clear(&kv);
  return rc;
}

int ringctl_cas(ringctl_ctx *ctx, const char *key, const char *missing, ringctl_edit_fn edit,
                void *ud) {
  for (int attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    bool won = false;
    int rc = cas_once(ctx, key, missing, edit, ud, &won);
    if (rc != RINGCTL_EXIT_OK || won)
      return rc;
  }
  return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT, "%s kept changing under %d attempts; try again",
                     key, CAS_ATTEMPTS);
}

/* ringctl_config_cas's edit: decode, change, encode. */
typedef struct config_edit {
  ringctl_config_change_fn change;
  const void *ud;
} config_edit;

static int edit_config(ringctl_ctx *ctx, const ring_kv *kv, char **out, size_t *len, void *ud) {
  const config_edit *e = ud;
  rk_config config;
  ring_error err = {RING_OK, ""};
  int rc = rk_config_decode((const char *)kv->value, kv->value_len, &config, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "reading the config");
  e->change(ctx->a, &config, e->ud);
  if (rk_config_encode(&config, out, len) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  return RINGCTL_EXIT_OK;
}

int ringctl_config_cas(ringctl_ctx *ctx, ringctl_config_change_fn change, const void *ud) {
  char key[RK_KEY_MAX], missing[128];
  ringctl_key(ctx, "config", key);
  snprintf(missing, sizeof missing, "cluster \"%s\" is not initialised (see ringctl init)",
           ctx->cluster);
  config_edit e = {change, ud};
  return ringctl_cas(ctx, key, missing, edit_config, &e);
}

int ringctl_auto_apply_opt(const ringctl_args *a, const char *value, rk_auto_apply *out) {
  int v = rk_auto_apply_parse(value);
  if (v < 0)
    return ringctl_usage_error(a, "auto-apply: \"%s\" is not none, repair or all", value);
  *out = (rk_auto_apply)v;
  return RINGCTL_EXIT_OK;
}

const char *const ringctl_balance_names[2] = {"tokens", "bytes"}; /* ring_balance order */

int ringctl_balance_opt(const ringctl_args *a, const char *value, ring_balance *out) {
  for (int i = 0; i < 2; i++)
    if (strcmp(value, ringctl_balance_names[i]) == 0) {
      *out = (ring_balance)i;
      return RINGCTL_EXIT_OK;
    }
  return ringctl_usage_error(a, "balance: \"%s\" is not tokens or bytes", value);
}

uint64_t ringctl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
