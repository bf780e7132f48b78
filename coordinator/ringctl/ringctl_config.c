/*
 * ringctl_config.c: the global options from the environment and a settings
 * file, for what no flag gave (ringctl.h, ringctl_config_load).
 *
 * Sections: the files; the environment; ringctl_config_load.
 *
 * Precedence: flags > RINGCTL_<NAME> > the user's file > the system's file.
 * A file has the daemons' config syntax (daemon/opts_file.c: `name =
 * value`, `#` comments, quotes) and the global options' names; an unknown
 * name is an error naming file:line, as a daemon's is. --config FILE (or
 * RINGCTL_CONFIG) names the one file to read, which must exist; without
 * it the user's and the system's are read when they exist.
 */
#define _POSIX_C_SOURCE 200809L
#include "ringctl.h"

#include "daemon.h" /* rd_conf_parse: the one reader of config files */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RINGCTL_SYSTEM_CONF
#define RINGCTL_SYSTEM_CONF "/etc/ringkeeper/ringctl.conf"
#endif
#define USER_CONF "ringkeeper/ringctl.conf"

/* The files' texts: the settings point into them for the process's life. */
static char *texts[2];

/* ---------------------------------------------------------------- the files */

/* rd_conf_fn: one `name = value` into the globals in ud (a later line, or
 * a file read later, wins: files are read system first). */
static int set_setting(void *ud, const char *name, char *value, const char *where, char *err,
                       size_t errcap) {
  const char **slot = strcmp(name, "config") == 0 ? NULL : ringctl_global_slot(ud, name);
  if (slot == NULL)
    return snprintf(err, errcap, "%s: unknown setting '%s'", where, name), -1;
  *slot = value;
  return 0;
}

/* Reads path into g. A missing file is fine when optional. */
static int read_file(const ringctl_args *a, const char *path, bool optional, ringctl_globals *g,
                     char **text) {
  char err[600];
  size_t len = 0;
  if (optional && access(path, F_OK) != 0 && errno == ENOENT)
    return RINGCTL_EXIT_OK;
  if (rd_conf_read(path, text, &len, err, sizeof err) != 0 ||
      rd_conf_parse(path, *text, len, set_setting, g, err, sizeof err) != 0)
    return ringctl_usage_error(a, "%s", err);
  return RINGCTL_EXIT_OK;
}

/* $XDG_CONFIG_HOME/ringkeeper/ringctl.conf, else ~/.config/...; false when
 * neither variable is set. */
static bool user_file(char *path, size_t cap) {
  const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
  if (xdg != NULL && xdg[0] == '/')
    return (size_t)snprintf(path, cap, "%s/%s", xdg, USER_CONF) < cap;
  return home != NULL && home[0] != '\0' &&
         (size_t)snprintf(path, cap, "%s/.config/%s", home, USER_CONF) < cap;
}

static int read_files(const ringctl_args *a, const char *named, ringctl_globals *g) {
  if (named != NULL)
    return read_file(a, named, false, g, &texts[0]);
  char user[4096];
  int rc = read_file(a, RINGCTL_SYSTEM_CONF, true, g, &texts[0]);
  if (rc == RINGCTL_EXIT_OK && user_file(user, sizeof user))
    rc = read_file(a, user, true, g, &texts[1]);
  return rc;
}

/* --------------------------------------------------------- the environment */

/* RINGCTL_<NAME> for a global option's name: upper case, '-' as '_'. */
static const char *env_value(const char *name) {
  char var[64] = "RINGCTL_";
  size_t n = strlen(var);
  for (; *name != '\0' && n + 1 < sizeof var; name++)
    var[n++] = *name == '-' ? '_' : (char)toupper((unsigned char)*name);
  var[n] = '\0';
  const char *v = getenv(var);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The environment's settings into g; the first spelling of an option set
 * wins (the table lists today's names before the old ones). */
static void read_env(ringctl_globals *g) {
  for (const ringctl_opt *o = ringctl_global_opts; o->name != NULL; o++) {
    const char **slot = o->has_value ? ringctl_global_slot(g, o->name) : NULL;
    const char *v = slot != NULL && *slot == NULL ? env_value(o->name) : NULL;
    if (v != NULL)
      *slot = v;
  }
}

/* ---------------------------------------------------- ringctl_config_load */

int ringctl_config_load(const ringctl_args *a) {
  ringctl_globals env = {.json = false}, files = {.json = false};
  read_env(&env);
  const char *named = a->globals->config ? a->globals->config : env.config;
  int rc = read_files(a, named, &files);
  if (rc != RINGCTL_EXIT_OK)
    return rc;
  for (const ringctl_opt *o = ringctl_global_opts; o->name != NULL; o++) {
    const char **slot = o->has_value ? ringctl_global_slot(a->globals, o->name) : NULL;
    if (slot != NULL && *slot == NULL) /* a flag wins, then the environment, then a file */
      *slot = *ringctl_global_slot(&env, o->name) ? *ringctl_global_slot(&env, o->name)
                                                  : *ringctl_global_slot(&files, o->name);
  }
  return RINGCTL_EXIT_OK;
}
