/*
 * cmd_init.c: `ringctl init`: writes the cluster's config once.
 *
 * Usage: ringctl init --failure-domain LEVEL [--tokens T] [--replicas R] ...
 *
 * The config is created by a txn that compares its create revision to 0,
 * so two operators initialising at once get one success and one conflict
 * (exit 3), and an initialised cluster is never overwritten.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  OPT_TOKENS,
  OPT_REPLICAS,
  OPT_FAILURE_DOMAIN,
  OPT_BEST_EFFORT,
  OPT_MIGRATION,
  OPT_SEED,
  OPT_DOWN_AFTER,
  OPT_AUTO_APPLY,
  OPT_BALANCE
};

static const ringctl_opt init_opts[] = {
    {"tokens", OPT_TOKENS, true},
    {"replicas", OPT_REPLICAS, true},
    {"failure-domain", OPT_FAILURE_DOMAIN, true},
    {"best-effort", OPT_BEST_EFFORT, true},
    {"migration", OPT_MIGRATION, true},
    {"seed", OPT_SEED, true},
    {"down-after", OPT_DOWN_AFTER, true},
    {"auto-apply", OPT_AUTO_APPLY, true},
    {"balance", OPT_BALANCE, true},
    RINGCTL_THROTTLE_OPTS,
    {NULL, 0, false},
};

static const char help[] =
    "Usage: ringctl init --failure-domain LEVEL [OPTIONS]\n"
    "\n"
    "Creates the cluster: writes /ringkeeper/<cluster>/config. Fails with exit 3\n"
    "when the cluster is already initialised. T, R and the seed never change after.\n"
    "\n"
    "Options:\n"
    "  --failure-domain LEVEL  the hard level: a label key (zone, rack, ...) or none\n"
    "  --tokens T              tokens, a power of two in [64, 65536] (default 16384)\n"
    "  --replicas R            replicas per token, 1 .. 7 (default 3)\n"
    "  --best-effort LEVEL     a softer level kept where possible (default none)\n"
    "  --migration MODE        stream (copy arcs before each cutover) or none (default stream)\n"
    "  --seed S                the hash seed (default 0)\n"
    "  --down-after DUR        a node whose lease is gone this long is down (default 60s)\n"
    "  --auto-apply POLICY     plans the coordinator approves itself: repair (a down node's\n"
    "                          replicas re-made, nothing lost), all, or none (default "
    "repair)\n"
    "  --balance WHAT          what plans balance: tokens or bytes held (default "
    "tokens)\n" RINGCTL_THROTTLE_HELP
    "  --json                  {\"cluster\",\"tokens\",\"replicas\",\"failure_domain\",\n"
    "                          \"best_effort\",\"migration\",\"auto_apply\",\"created\"}\n";

typedef struct init_settings {
  rk_config config;
  bool has_domain;
} init_settings;

/* A level: a label key, or "none" / "" for no level. */
static int set_level(const ringctl_args *a, const char *name, const char *value, char *out) {
  if (strcmp(value, "none") == 0)
    value = "";
  if (strlen(value) > RING_ID_MAX)
    return ringctl_usage_error(a, "--%s: \"%s\" is too long", name, value);
  strcpy(out, value);
  return RINGCTL_EXIT_OK;
}

static int set_migration(const ringctl_args *a, const char *value, rk_config *c) {
  if (strcmp(value, "stream") == 0)
    c->migration = RK_MIGRATE_STREAM;
  else if (strcmp(value, "none") == 0)
    c->migration = RK_MIGRATE_NONE;
  else
    return ringctl_usage_error(a, "--migration must be stream or none, got \"%s\"", value);
  return RINGCTL_EXIT_OK;
}

static int set_tokens(const ringctl_args *a, const char *value, rk_config *c) {
  uint64_t v;
  if (ringctl_parse_uint(a, "tokens", value, RING_TOKENS_MIN, RING_TOKENS_MAX, &v) != 0)
    return RINGCTL_EXIT_USAGE;
  if ((v & (v - 1)) != 0)
    return ringctl_usage_error(a, "--tokens must be a power of two, got %s", value);
  c->tokens = (uint32_t)v;
  return RINGCTL_EXIT_OK;
}

/* The numeric options; -1 for any other id. */
static int apply_number(const ringctl_args *a, int id, const char *value, rk_config *c) {
  uint64_t v;
  int rc;
  switch (id) {
  case OPT_TOKENS:
    return set_tokens(a, value, c);
  case OPT_REPLICAS:
    if ((rc = ringctl_parse_uint(a, "replicas", value, 1, RING_REPLICAS_MAX, &v)) == 0)
      c->replicas = (uint32_t)v;
    return rc;
  case OPT_SEED:
    return ringctl_parse_uint(a, "seed", value, 0, RING_VERSION_MAX, &c->seed);
  case OPT_DOWN_AFTER:
    return ringctl_parse_duration(a, "down-after", value, 1000, 86400000, &c->down_after_ms);
  default:
    return ringctl_throttle_opt(a, id, value, &c->throttle);
  }
}

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  init_settings *s = ud;
  switch (id) {
  case OPT_FAILURE_DOMAIN:
    s->has_domain = true;
    return set_level(a, "failure-domain", value, s->config.failure_domain);
  case OPT_BEST_EFFORT:
    return set_level(a, "best-effort", value, s->config.best_effort);
  case OPT_MIGRATION:
    return set_migration(a, value, &s->config);
  case OPT_AUTO_APPLY:
    return ringctl_auto_apply_opt(a, value, &s->config.auto_apply);
  case OPT_BALANCE:
    return ringctl_balance_opt(a, value, &s->config.balance);
  case RINGCTL_ARG_POSITIONAL:
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  default: {
    int rc = apply_number(a, id, value, &s->config);
    return rc < 0 ? ringctl_usage_error(a, "unexpected option") : rc;
  }
  }
}

/* Creates config if absent. */
static int create_config(ringctl_ctx *ctx, const char *json, size_t len) {
  char key[RK_KEY_MAX];
  ringctl_key(ctx, "config", key);
  ring_cmp absent = {key, strlen(key), RING_CMP_CREATE, RING_CMP_EQ, 0, NULL, 0};
  ring_op put = {RING_OP_PUT, key, strlen(key), json, len, 0, false};
  bool created = false;
  ringctl_audit(ctx, "config.init", NULL, "%.*s", RK_EVENT_DETAIL_MAX, json);
  int rc = ringctl_txn(ctx, &absent, 1, &put, 1, "writing the config", &created);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  if (!created)
    return ringctl_say(ctx, RINGCTL_EXIT_CONFLICT, "cluster \"%s\" is already initialised",
                       ctx->cluster);
  return RINGCTL_EXIT_OK;
}

/* --json: {"cluster","tokens","replicas","failure_domain","best_effort",
 * "migration","auto_apply","created"}. */
static int report(const ringctl_ctx *ctx, const rk_config *c) {
  if (!ctx->a->globals->json) {
    printf("initialised cluster %s: %u tokens, %u replicas, failure domain %s, migration %s\n",
           ctx->cluster, c->tokens, c->replicas, c->failure_domain[0] ? c->failure_domain : "none",
           rk_migration_name(c->migration));
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "cluster", ctx->cluster);
  cJSON_AddNumberToObject(o, "tokens", c->tokens);
  cJSON_AddNumberToObject(o, "replicas", c->replicas);
  cJSON_AddStringToObject(o, "failure_domain", c->failure_domain[0] ? c->failure_domain : "none");
  cJSON_AddStringToObject(o, "best_effort", c->best_effort[0] ? c->best_effort : "none");
  cJSON_AddStringToObject(o, "migration", rk_migration_name(c->migration));
  cJSON_AddStringToObject(o, "auto_apply", rk_auto_apply_name(c->auto_apply));
  cJSON_AddBoolToObject(o, "created", true);
  return ringctl_json_emit(o);
}

static int run(ringctl_ctx *ctx, void *ud) {
  const rk_config *c = &((init_settings *)ud)->config;
  char *json = NULL;
  size_t len = 0;
  if (rk_config_encode(c, &json, &len) != RING_OK)
    return ringctl_say(ctx, RINGCTL_EXIT_FAILURE, "out of memory");
  int rc = create_config(ctx, json, len);
  free(json);
  return rc == RINGCTL_EXIT_OK ? report(ctx, c) : rc;
}

int ringctl_cmd_init(ringctl_args *a) {
  init_settings s = {.has_domain = false};
  rk_config_defaults(&s.config);
  bool help_shown = false;
  int rc = ringctl_parse(a, init_opts, help, apply, &s, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (!s.has_domain)
    return ringctl_usage_error(a, "--failure-domain LEVEL is required (a label key, or none)");
  ring_error err = {RING_OK, ""};
  if (rk_config_validate(&s.config, &err) != RING_OK)
    return ringctl_usage_error(a, "%s", err.message);
  return ringctl_with_etcd(a, run, &s);
}

const ringctl_command ringctl_command_init = {
    "init", ringctl_cmd_init, "create the cluster: tokens, replicas, failure domain, limits",
    init_opts, help};
