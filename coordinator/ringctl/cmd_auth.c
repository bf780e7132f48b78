/*
 * cmd_auth.c: `ringctl auth setup`, `ringctl auth add KIND NAME` and
 * `ringctl auth remove KIND NAME`: etcd users and roles so that every actor
 * of a cluster writes only the keys it owns (proto/etcd.md, "Who writes
 * what"; deploy/PRODUCTION.md, "Authentication and TLS").
 *
 * The grants are the table below, one home: each kind's role reads the
 * whole cluster prefix (watches, txn compares and the bounded reads need
 * it) and writes only its keys. A host's and a client's keys are single
 * keys, never prefixes: etcd's prefix alive/n1 would cover alive/n10.
 * Everything is idempotent: a role or user made before is kept (a user's
 * password is set anew), grants are granted again, so a rerun repairs; a
 * removal of what is gone is done.
 */
#include "daemon.h" /* rd_read_secret */
#include "ringctl_etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "Usage: ringctl auth setup --root-password-file FILE\n"
    "       ringctl auth add KIND NAME --new-password-file FILE [--service S]\n"
    "       ringctl auth remove KIND NAME\n"
    "\n"
    "setup: makes etcd's root user (password from FILE) and the cluster's shared\n"
    "roles, then turns etcd authentication on. Run it once per etcd, before auth\n"
    "is on (no --user), or again as root to repair.\n"
    "add: makes the etcd user <cluster>.<KIND>.<NAME> with the password in FILE and\n"
    "the role of its kind (connect as root: --user root --password-file ...):\n"
    "  host NAME         an agent of node id NAME: writes alive/, acks/, progress/,\n"
    "                    missing/, sizes/, recovery/ of NAME and recovery-table/\n"
    "  client NAME       a data-plane process acking as NAME: writes acks/NAME and\n"
    "                    clients/NAME (--service S: also services/S, e.g. kv/n1)\n"
    "  coordinator NAME  writes nodes/, version, version/delta, tables/, deltas/,\n"
    "                    plan/, leader, stuck, journal/, coordinators/\n"
    "  operator NAME     ringctl: reads and writes the whole cluster\n"
    "  reader NAME       reads the whole cluster (ringctl status, monitoring)\n"
    "Every role reads the whole cluster prefix. The daemons take the user with\n"
    "--user and --password-file.\n"
    "remove: deletes the user <cluster>.<KIND>.<NAME> (and a host's or client's\n"
    "role): a node gone for good, a person who left. Its sessions end at once.\n";

enum { OPT_ROOT_PW = 1, OPT_NEW_PW, OPT_SERVICE };
static const ringctl_opt auth_opts[] = {{"root-password-file", OPT_ROOT_PW, true},
                                        {"new-password-file", OPT_NEW_PW, true},
                                        {"service", OPT_SERVICE, true},
                                        {NULL, 0, false}};

/* ------------------------------------------------------------ the grants */

enum { G_PREFIX = 1, G_NAMED = 2, G_WRITE = 4 };
typedef struct grant {
  const char *what; /* under /ringkeeper/<cluster>/; "" with G_PREFIX: all of it */
  unsigned flags;   /* G_NAMED: what + the actor's name */
} grant;

#define READ_ALL                                                                                   \
  { "", G_PREFIX }
#define OWN(dir)                                                                                   \
  { dir, G_NAMED | G_WRITE }
static const grant host_grants[] = {
    READ_ALL,        OWN("alive/"), OWN("acks/"),     OWN("progress/"),
    OWN("missing/"), OWN("sizes/"), OWN("recovery/"), {"recovery-table/", G_PREFIX | G_WRITE}};
static const grant client_grants[] = {READ_ALL, OWN("acks/"), OWN("clients/")};
static const grant coordinator_grants[] = {READ_ALL,
                                           {"nodes/", G_PREFIX | G_WRITE},
                                           {"version", G_WRITE},
                                           {"version/delta", G_WRITE},
                                           {"tables/", G_PREFIX | G_WRITE},
                                           {"deltas/", G_PREFIX | G_WRITE},
                                           {"plan/", G_PREFIX | G_WRITE},
                                           {"leader", G_WRITE},
                                           {"stuck", G_WRITE},
                                           {"journal/", G_PREFIX | G_WRITE},
                                           {"coordinators/", G_PREFIX | G_WRITE}};
static const grant operator_grants[] = {{"", G_PREFIX | G_WRITE}};
static const grant reader_grants[] = {READ_ALL};

typedef struct kind {
  const char *name;
  bool per_name; /* a role per actor (its keys) rather than one shared */
  const grant *g;
  size_t n;
} kind;

#define KIND(name, per, g)                                                                         \
  { name, per, g, sizeof g / sizeof g[0] }
static const kind kinds[] = {KIND("host", true, host_grants), KIND("client", true, client_grants),
                             KIND("coordinator", false, coordinator_grants),
                             KIND("operator", false, operator_grants),
                             KIND("reader", false, reader_grants)};

static const kind *kind_find(const char *name) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(kinds[i].name, name) == 0)
      return &kinds[i];
  return NULL;
}

/* ------------------------------------------------------------- arguments */

typedef struct auth_args {
  const char *pos[3];
  uint32_t n_pos;
  const char *root_pw, *new_pw, *service;
} auth_args;

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  auth_args *s = ud;
  if (id == RINGCTL_ARG_POSITIONAL) {
    if (s->n_pos == 3)
      return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
    s->pos[s->n_pos++] = value;
  } else if (id == OPT_ROOT_PW) {
    s->root_pw = value;
  } else if (id == OPT_NEW_PW) {
    s->new_pw = value;
  } else if (id == OPT_SERVICE) {
    s->service = value;
  }
  return RINGCTL_EXIT_OK;
}

/* A service name: ids joined by '/' (kv/n1), as ring-kv writes it. */
static bool service_valid(const char *s) {
  char part[RING_ID_MAX + 2];
  size_t n = strlen(s);
  if (n == 0 || n > 2 * RING_ID_MAX + 1)
    return false;
  for (const char *p = s; p != NULL;) {
    const char *slash = strchr(p, '/');
    size_t len = slash ? (size_t)(slash - p) : strlen(p);
    if (len > RING_ID_MAX)
      return false;
    memcpy(part, p, len), part[len] = '\0';
    if (!ring_id_valid(part))
      return false;
    p = slash ? slash + 1 : NULL;
  }
  return true;
}

static int check_args(const ringctl_args *a, const auth_args *s) {
  if (s->n_pos == 0)
    return ringctl_usage_error(a, "auth: say setup, add or remove");
  if (strcmp(s->pos[0], "setup") == 0) {
    if (s->n_pos != 1 || s->root_pw == NULL || s->new_pw || s->service)
      return ringctl_usage_error(a, "auth setup takes --root-password-file FILE alone");
    return RINGCTL_EXIT_OK;
  }
  bool add = strcmp(s->pos[0], "add") == 0;
  if (!add && strcmp(s->pos[0], "remove") != 0)
    return ringctl_usage_error(a, "auth: unknown action \"%s\" (setup, add, remove)", s->pos[0]);
  const kind *k = s->n_pos == 3 ? kind_find(s->pos[1]) : NULL;
  if (k == NULL)
    return ringctl_usage_error(a,
                               "auth %s KIND NAME: KIND is host, client, coordinator, "
                               "operator or reader",
                               s->pos[0]);
  if (!ring_id_valid(s->pos[2]))
    return ringctl_usage_error(a, "auth %s: \"%s\" is not a name ([a-z0-9._-]{1,63})", s->pos[0],
                               s->pos[2]);
  if (!add)
    return s->new_pw || s->root_pw || s->service
               ? ringctl_usage_error(a, "auth remove takes no options")
               : RINGCTL_EXIT_OK;
  if (s->new_pw == NULL || s->root_pw)
    return ringctl_usage_error(a, "auth add takes --new-password-file FILE");
  if (s->service && (strcmp(k->name, "client") != 0 || !service_valid(s->service)))
    return ringctl_usage_error(a, "--service: a client's service, ids joined by '/' (kv/n1)");
  return RINGCTL_EXIT_OK;
}

/* ------------------------------------------------------------- doing it */

typedef struct auth_run {
  const auth_args *s;
  const kind *k;
  char role[2 * RING_ID_MAX + 40];
  char user[2 * RING_ID_MAX + 20];
} auth_run;

/* An add that meets a name made before is what a rerun expects. */
static int made(ringctl_ctx *ctx, int rc, const ring_error *err, const char *what) {
  return rc == RING_OK || rc == RING_EEXIST ? RINGCTL_EXIT_OK : ringctl_fail(ctx, rc, err, what);
}

static int grant_one(ringctl_ctx *ctx, const char *role, const grant *g, const char *name) {
  char key[RK_KEY_MAX], what[RK_KEY_MAX];
  snprintf(what, sizeof what, "%s%s", g->what, g->flags & G_NAMED ? name : "");
  ring_error err = {0};
  int rc = rk_key(key, ctx->cluster, what) < 0 ? RING_EINVAL : RING_OK;
  ring_perm perm = g->flags & G_WRITE ? RING_PERM_READWRITE : RING_PERM_READ;
  if (rc == RING_OK)
    rc = ring_etcd_role_grant(ctx->etcd, role, perm, key, (g->flags & G_PREFIX) != 0, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "granting a role its keys");
  printf("  %-10s %s%s\n", perm == RING_PERM_READ ? "read" : "readwrite", key,
         g->flags & G_PREFIX ? "*" : "");
  return RINGCTL_EXIT_OK;
}

/* The role's name: per actor for hosts and clients, one per kind else. */
static void role_name(const ringctl_ctx *ctx, const kind *k, const char *name, char *role,
                      size_t cap) {
  if (k->per_name)
    snprintf(role, cap, "ringkeeper.%s.%s.%s", ctx->cluster, k->name, name);
  else
    snprintf(role, cap, "ringkeeper.%s.%s", ctx->cluster, k->name);
}

/* The role of kind k (name: the actor, for a per-name role) with its grants. */
static int role_make(ringctl_ctx *ctx, const kind *k, const char *name, const char *service,
                     char *role, size_t cap) {
  role_name(ctx, k, name, role, cap);
  ring_error err = {0};
  int rc = made(ctx, ring_etcd_role_add(ctx->etcd, role, &err), &err, "adding a role");
  if (rc == RINGCTL_EXIT_OK)
    printf("role %s:\n", role);
  for (size_t i = 0; i < k->n && rc == RINGCTL_EXIT_OK; i++)
    rc = grant_one(ctx, role, &k->g[i], name);
  if (rc == RINGCTL_EXIT_OK && service != NULL) {
    char what[RK_KEY_MAX];
    snprintf(what, sizeof what, "services/%s", service);
    grant g = {what, G_WRITE};
    rc = grant_one(ctx, role, &g, name);
  }
  return rc;
}

/* The user with the password in file, made or given it anew, holding role. */
static int user_make(ringctl_ctx *ctx, const char *user, const char *file, const char *role) {
  char msg[512];
  char *pw = rd_read_secret(file, msg, sizeof msg);
  if (pw == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "%s: %s", file, msg);
  ring_error err = {0};
  int rc = ring_etcd_user_add(ctx->etcd, user, pw, &err);
  if (rc == RING_EEXIST)
    rc = ring_etcd_user_password(ctx->etcd, user, pw, &err);
  memset(pw, 0, strlen(pw));
  free(pw);
  if (rc == RING_OK)
    rc = ring_etcd_user_grant(ctx->etcd, user, role, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "adding a user");
  printf("user %s: role %s\n", user, role);
  return RINGCTL_EXIT_OK;
}

static int setup(ringctl_ctx *ctx, const auth_args *s) {
  char role[2 * RING_ID_MAX + 40];
  ring_error err = {0};
  int rc = made(ctx, ring_etcd_role_add(ctx->etcd, "root", &err), &err, "adding etcd's root role");
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && rc == RINGCTL_EXIT_OK; i++)
    if (!kinds[i].per_name)
      rc = role_make(ctx, &kinds[i], NULL, NULL, role, sizeof role);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  char msg[512];
  char *pw = rd_read_secret(s->root_pw, msg, sizeof msg);
  if (pw == NULL)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "%s: %s", s->root_pw, msg);
  rc = ring_etcd_user_add(ctx->etcd, "root", pw, &err); /* kept when made before */
  memset(pw, 0, strlen(pw));
  free(pw);
  if (rc == RING_OK || rc == RING_EEXIST)
    rc = ring_etcd_user_grant(ctx->etcd, "root", "root", &err);
  if (rc == RING_OK)
    rc = ring_etcd_auth_enable(ctx->etcd, &err);
  if (rc != RING_OK)
    return ringctl_fail(ctx, rc, &err, "enabling etcd auth");
  printf("etcd authentication is on; add users with `ringctl auth add` as root\n");
  return RINGCTL_EXIT_OK;
}

/* Deleting the user ends its sessions (etcd drops its tokens); a shared
 * role stays for the others of its kind. */
static int remove_user(ringctl_ctx *ctx, auth_run *r) {
  ring_error err = {0};
  int rc = ring_etcd_user_delete(ctx->etcd, r->user, &err);
  printf("user %s: %s\n", r->user, rc == RING_ENOTFOUND ? "was not there" : "deleted");
  if (rc == RING_OK || rc == RING_ENOTFOUND) {
    if (!r->k->per_name)
      return RINGCTL_EXIT_OK;
    role_name(ctx, r->k, r->s->pos[2], r->role, sizeof r->role);
    rc = ring_etcd_role_delete(ctx->etcd, r->role, &err);
    printf("role %s: %s\n", r->role, rc == RING_ENOTFOUND ? "was not there" : "deleted");
  }
  return rc == RING_OK || rc == RING_ENOTFOUND ? RINGCTL_EXIT_OK
                                               : ringctl_fail(ctx, rc, &err, "removing a user");
}

static int body(ringctl_ctx *ctx, void *ud) {
  auth_run *r = ud;
  const auth_args *s = r->s;
  if (r->k == NULL)
    return setup(ctx, s);
  snprintf(r->user, sizeof r->user, "%s.%s.%s", ctx->cluster, r->k->name, s->pos[2]);
  if (strcmp(s->pos[0], "remove") == 0)
    return remove_user(ctx, r);
  int rc = role_make(ctx, r->k, s->pos[2], s->service, r->role, sizeof r->role);
  return rc == RINGCTL_EXIT_OK ? user_make(ctx, r->user, s->new_pw, r->role) : rc;
}

static int ringctl_cmd_auth(ringctl_args *a) {
  auth_args s = {0};
  bool help_shown = false;
  int rc = ringctl_parse(a, auth_opts, help, apply, &s, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if ((rc = check_args(a, &s)) != RINGCTL_EXIT_OK)
    return rc;
  auth_run r = {.s = &s, .k = s.n_pos == 3 ? kind_find(s.pos[1]) : NULL};
  return ringctl_with_etcd(a, body, &r);
}

const ringctl_command ringctl_command_auth = {
    "auth", ringctl_cmd_auth, "etcd users and roles: each host writes only its own keys", auth_opts,
    help};
