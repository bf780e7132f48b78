/*
 * cmd_throttle.c: `ringctl throttle`: shows or changes the migration
 * limits in config, and the throttle options `init` shares.
 *
 * Usage: ringctl throttle [--moves-per-node N] [--moves-per-domain N]
 *                         [--moves-per-wave N] [--bytes-per-sec N] [--json]
 *
 * A change is a compare-and-swap on config's mod revision: the options are
 * replayed onto the config as read, so a concurrent change of another
 * field is kept, never overwritten.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <stdlib.h>

/* ------------------------------------------------------- throttle options */

int ringctl_throttle_opt(const ringctl_args *a, int id, const char *value, rk_throttle *t) {
  static const char *const names[] = {"moves-per-node", "moves-per-domain", "moves-per-wave",
                                      "bytes-per-sec"};
  if (id < RINGCTL_OPT_MOVES_PER_NODE || id > RINGCTL_OPT_BYTES_PER_SEC)
    return -1;
  const char *name = names[id - RINGCTL_OPT_MOVES_PER_NODE];
  uint64_t max = id == RINGCTL_OPT_BYTES_PER_SEC ? RING_VERSION_MAX : UINT32_MAX;
  uint64_t v;
  if (ringctl_parse_uint(a, name, value, 0, max, &v) != RINGCTL_EXIT_OK)
    return RINGCTL_EXIT_USAGE;
  if (id == RINGCTL_OPT_MOVES_PER_NODE)
    t->moves_per_node = (uint32_t)v;
  else if (id == RINGCTL_OPT_MOVES_PER_DOMAIN)
    t->moves_per_domain = (uint32_t)v;
  else if (id == RINGCTL_OPT_MOVES_PER_WAVE)
    t->moves_per_wave = (uint32_t)v;
  else
    t->bytes_per_sec = v;
  return RINGCTL_EXIT_OK;
}

/* ----------------------------------------------------------- the command */

static const ringctl_opt throttle_opts[] = {RINGCTL_THROTTLE_OPTS, {NULL, 0, false}};

static const char help[] =
    "Usage: ringctl throttle [OPTIONS] [--json]\n"
    "\n"
    "Without options, prints the migration limits. With options, changes them in\n"
    "the cluster's config; the coordinator and agents apply them at the next wave\n"
    "and the next arc, without a restart.\n"
    "\n"
    "Options:\n" RINGCTL_THROTTLE_HELP;

#define CHANGES_MAX 16

/* The options given, replayed onto the config as read. */
typedef struct throttle_changes {
  int id[CHANGES_MAX];
  const char *value[CHANGES_MAX];
  uint32_t n;
} throttle_changes;

static int apply(const ringctl_args *a, int id, const char *value, void *ud) {
  throttle_changes *c = ud;
  rk_throttle scratch = {0, 0, 0, 0};
  int rc = ringctl_throttle_opt(a, id, value, &scratch); /* validates */
  if (rc < 0)
    return ringctl_usage_error(a, "unexpected argument \"%s\"", value);
  if (rc == RINGCTL_EXIT_OK && c->n == CHANGES_MAX)
    return ringctl_usage_error(a, "too many options");
  if (rc == RINGCTL_EXIT_OK) {
    c->id[c->n] = id;
    c->value[c->n++] = value;
  }
  return rc;
}

static int print_throttle(const ringctl_ctx *ctx, const rk_throttle *t) {
  if (ctx->a->globals->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "moves_per_node", t->moves_per_node);
    cJSON_AddNumberToObject(o, "moves_per_domain", t->moves_per_domain);
    cJSON_AddNumberToObject(o, "moves_per_wave", t->moves_per_wave);
    cJSON_AddNumberToObject(o, "bytes_per_sec", (double)t->bytes_per_sec);
    return ringctl_json_emit(o);
  }
  printf("moves-per-node:   %u\nmoves-per-domain: %u\nmoves-per-wave:   %u\n"
         "bytes-per-sec:    %llu\n(0: no limit)\n",
         t->moves_per_node, t->moves_per_domain, t->moves_per_wave,
         (unsigned long long)t->bytes_per_sec);
  return RINGCTL_EXIT_OK;
}

static int show(ringctl_ctx *ctx) {
  rk_state st;
  int rc = ringctl_read_state(ctx, RK_READ_CONFIG, &st);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  rc = print_throttle(ctx, &st.config.throttle);
  rk_state_free(&st);
  return rc;
}

/* The changes replayed onto the config as read (validated when given). */
static void change(const ringctl_args *a, rk_config *config, const void *ud) {
  const throttle_changes *c = ud;
  for (uint32_t i = 0; i < c->n; i++)
    ringctl_throttle_opt(a, c->id[i], c->value[i], &config->throttle);
}

/* "moves-per-node=32 bytes-per-sec=0": the changes as given. */
static void audit(ringctl_ctx *ctx, const throttle_changes *c) {
  static const char *const names[] = {"moves-per-node", "moves-per-domain", "moves-per-wave",
                                      "bytes-per-sec"};
  char detail[RK_EVENT_DETAIL_MAX + 1] = "";
  size_t at = 0;
  for (uint32_t i = 0; i < c->n && at < sizeof detail; i++)
    at += (size_t)snprintf(detail + at, sizeof detail - at, "%s%s=%s", i ? " " : "",
                           names[c->id[i] - RINGCTL_OPT_MOVES_PER_NODE], c->value[i]);
  ringctl_audit(ctx, "config.throttle", NULL, "%s", detail);
}

static int run(ringctl_ctx *ctx, void *ud) {
  const throttle_changes *c = ud;
  if (c->n == 0)
    return show(ctx);
  audit(ctx, c);
  int rc = ringctl_config_cas(ctx, change, c);
  return rc == RINGCTL_EXIT_OK ? show(ctx) : rc;
}

int ringctl_cmd_throttle(ringctl_args *a) {
  throttle_changes c = {.n = 0};
  bool help_shown = false;
  int rc = ringctl_parse(a, throttle_opts, help, apply, &c, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &c);
}

const ringctl_command ringctl_command_throttle = {
    "throttle", ringctl_cmd_throttle, "show or change the migration limits", throttle_opts, help};
