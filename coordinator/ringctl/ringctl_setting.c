/*
 * ringctl_setting.c: the shape of `ringctl auto-apply` and `ringctl
 * balance`: one config field that takes one of a few names. Without an
 * argument the command prints the field; with one it changes it (a CAS on
 * the config, with a journal entry) and prints the new value.
 */
#include "ringctl_etcd.h"
#include "ringctl_out.h"

#include <string.h>

static const ringctl_opt no_opts[] = {{NULL, 0, false}};

typedef struct setting_arg {
  const ringctl_setting *s;
  bool given;
  int value;
} setting_arg;

static int parse(const ringctl_args *a, int id, const char *value, void *ud) {
  setting_arg *p = ud;
  if (id != RINGCTL_ARG_POSITIONAL)
    return ringctl_usage_error(a, "unexpected option");
  if (p->given)
    return ringctl_usage_error(a, "one value at most (got \"%s\" too)", value);
  for (int i = 0; i < p->s->n_names; i++)
    if (strcmp(value, p->s->names[i]) == 0) {
      p->given = true;
      p->value = i;
      return RINGCTL_EXIT_OK;
    }
  return ringctl_usage_error(a, "%s: \"%s\" is not %s", p->s->label, value, p->s->choices);
}

static int show(ringctl_ctx *ctx, const ringctl_setting *s) {
  rk_state st;
  int rc = ringctl_read_state(ctx, RK_READ_CONFIG, &st);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  const char *name = s->names[s->get(&st.config)];
  rk_state_free(&st);
  if (!ctx->a->globals->json) {
    printf("%s: %s\n", s->label, name);
    return RINGCTL_EXIT_OK;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, s->json_key, name);
  return ringctl_json_emit(o);
}

static void change(const ringctl_args *a, rk_config *config, const void *ud) {
  (void)a;
  const setting_arg *p = ud;
  p->s->set(config, p->value);
}

static int run(ringctl_ctx *ctx, void *ud) {
  const setting_arg *p = ud;
  if (p->given) {
    char what[64];
    snprintf(what, sizeof what, "config.%s", p->s->json_key);
    ringctl_audit(ctx, what, NULL, "%s %s", p->s->label, p->s->names[p->value]);
  }
  int rc = p->given ? ringctl_config_cas(ctx, change, p) : RINGCTL_EXIT_OK;
  return rc == RINGCTL_EXIT_OK ? show(ctx, p->s) : rc;
}

int ringctl_setting_cmd(ringctl_args *a, const ringctl_setting *s) {
  setting_arg p = {s, false, 0};
  bool help_shown = false;
  int rc = ringctl_parse(a, no_opts, s->help, parse, &p, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  return ringctl_with_etcd(a, run, &p);
}
