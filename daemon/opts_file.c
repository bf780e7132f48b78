/*
 * opts_file.c: the config file: `name = value` lines, `#` comments, blank
 * lines, values optionally in quotes.
 *
 * Sections: splitting a line; values; rd__opts_read_file.
 *
 * Syntax, so operators can predict it:
 *   - a line whose first non-blank character is '#' is a comment;
 *   - in an unquoted value, '#' after a blank starts a comment (so
 *     "secret = a#b" keeps its '#');
 *   - "double quotes" take \" and \\ escapes; 'single quotes' are literal;
 *     only blanks or a comment may follow the closing quote;
 *   - blanks around names and values are trimmed; CRLF files work.
 */
#define _POSIX_C_SOURCE 200809L /* getline */
#include "daemon_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------- splitting a line */

static char *skip_blanks(char *p) {
  while (*p == ' ' || *p == '\t')
    p++;
  return p;
}

static bool is_name_char(char c) {
  return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* Blank or the start of a comment: what may end a value. */
static bool at_end(const char *p) {
  while (*p == ' ' || *p == '\t')
    p++;
  return *p == '\0' || *p == '#';
}

/* ------------------------------------------------------------------ values */

/* The values below are cut out of the line in place. Each returns the
 * value, or NULL with the reason in *why. */

/* A "..." value; p is on the opening quote. */
static char *double_quoted(char *p, const char **why) {
  char *out = p, *value = p;
  for (p++; *p != '"'; p++) {
    if (*p == '\0')
      return *why = "unterminated quote", NULL;
    if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
      p++;
    *out++ = *p;
  }
  *out = '\0';
  return at_end(p + 1) ? value : (*why = "text after the closing quote", NULL);
}

/* A '...' value: no escapes, as in the shell. */
static char *single_quoted(char *p, const char **why) {
  char *close = strchr(p + 1, '\'');
  if (close == NULL)
    return *why = "unterminated quote", NULL;
  *close = '\0';
  return at_end(close + 1) ? p + 1 : (*why = "text after the closing quote", NULL);
}

/* An unquoted value: up to a comment, trailing blanks trimmed. */
static char *bare(char *p) {
  char *end = p;
  for (char *q = p; *q != '\0'; q++) {
    if (*q == '#' && (q == p || q[-1] == ' ' || q[-1] == '\t'))
      break;
    if (*q != ' ' && *q != '\t')
      end = q + 1;
  }
  *end = '\0';
  return p;
}

static char *value_at(char *p, const char **why) {
  if (*p == '"')
    return double_quoted(p, why);
  if (*p == '\'')
    return single_quoted(p, why);
  return bare(p);
}

/* ----------------------------------------------------------- one line */

/* Applies one line (newline already removed). Returns 0 or -1 with err set;
 * where is "path:line". */
static int apply_line(char *line, const rd_opt *opts, const char *where, char *err, size_t errcap) {
  char *name = skip_blanks(line);
  if (*name == '\0' || *name == '#')
    return 0;
  char *p = name;
  while (is_name_char(*p))
    p++;
  size_t len = (size_t)(p - name);
  p = skip_blanks(p);
  if (len == 0 || *p != '=') {
    snprintf(err, errcap, "%s: expected 'name = value'", where);
    return -1;
  }
  const rd_opt *o = rd__opt_find(opts, name, len);
  if (o == NULL) {
    snprintf(err, errcap, "%s: unknown option '%.*s'", where, (int)len, name);
    return -1;
  }
  const char *why = NULL;
  char *value = value_at(skip_blanks(p + 1), &why);
  char at[512];
  snprintf(at, sizeof at, "%s: %s", where, o->name);
  if (value == NULL) {
    snprintf(err, errcap, "%s: %s", at, why);
    return -1;
  }
  return rd__opt_set(o, value, at, err, errcap);
}

static void chomp(char *line, ssize_t n) {
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
    line[--n] = '\0';
}

/* ------------------------------------------------------- rd__opts_read_file */

int rd__opts_read_file(const char *path, const rd_opt *opts, char *err, size_t errcap) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errcap, "cannot read config file %s: %s", path, strerror(errno));
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int rc = 0;
  for (unsigned lineno = 1; rc == 0 && (n = getline(&line, &cap, f)) >= 0; lineno++) {
    char where[400];
    snprintf(where, sizeof where, "%s:%u", path, lineno);
    chomp(line, n);
    rc = apply_line(line, opts, where, err, errcap);
  }
  if (rc == 0 && ferror(f)) {
    snprintf(err, errcap, "cannot read config file %s: %s", path, strerror(errno));
    rc = -1;
  }
  free(line);
  fclose(f);
  return rc;
}
