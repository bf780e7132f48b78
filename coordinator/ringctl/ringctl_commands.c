/*
 * ringctl_commands.c: the list of ringctl's commands, in the order
 * `ringctl --help` shows them. Each entry (name, summary, option table,
 * help) is defined beside its command's code, in cmd_<name>.c; the parser,
 * --help, `ringctl completion` and the manual page all read them here.
 */
#include "ringctl.h"

#include <string.h>

static const ringctl_command *const commands[] = {
    &ringctl_command_init,        &ringctl_command_status,     &ringctl_command_members,
    &ringctl_command_plan,        &ringctl_command_apply,      &ringctl_command_wait,
    &ringctl_command_pause,       &ringctl_command_resume,     &ringctl_command_cancel,
    &ringctl_command_accept_loss, &ringctl_command_recover,    &ringctl_command_drain,
    &ringctl_command_undrain,     &ringctl_command_weight,     &ringctl_command_trust,
    &ringctl_command_label,       &ringctl_command_remove,     &ringctl_command_replace,
    &ringctl_command_throttle,    &ringctl_command_auto_apply, &ringctl_command_balance,
    &ringctl_command_lookup,      &ringctl_command_history,    &ringctl_command_diff,
    &ringctl_command_verify,      &ringctl_command_render,     &ringctl_command_simulate,
    &ringctl_command_auth,        &ringctl_command_completion,
};

const ringctl_command *const *ringctl_commands(size_t *n) {
  *n = sizeof commands / sizeof commands[0];
  return commands;
}

const ringctl_command *ringctl_command_find(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(commands[i]->name, name) == 0)
      return commands[i];
  return NULL;
}
