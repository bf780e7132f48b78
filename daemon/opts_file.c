/*
 * opts_file.c: the config file: `name = value` lines, `#` comments, blank
 * lines, values optionally in quotes.
 *
 * Sections: splitting a line; values; one line; rd_conf_parse;
 * rd__opts_read_file.
 *
 * Syntax, so operators can predict it:
 *   - a line whose first non-blank character is '#' is a comment;
 *   - in an unquoted value, '#' after a blank starts a comment (so
 *     "secret = a#b" keeps its '#');
 *   - "double quotes" take \" and \\ escapes; 'single quotes' are literal;
 *     only blanks or a comment may follow the closing quote;
 *   - blanks around names and values are trimmed; CRLF files work;
 *   - at most RD_CONF_MAX bytes, lines of at most RD_CONF_LINE_MAX.
 */
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

/* Parses one line (newline already removed) and hands its setting to fn.
 * Returns 0 or -1 with err set; where is "path:line". */
static int parse_line(char *line, rd_conf_fn fn, void *ud, const char *where, char *err,
                      size_t errcap) {
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
  const char *why = NULL;
  char *value = value_at(skip_blanks(p + 1), &why);
  if (value == NULL) {
    snprintf(err, errcap, "%s: %.*s: %s", where, (int)len, name, why);
    return -1;
  }
  name[len] = '\0'; /* the '=' or a blank: already passed */
  return fn(ud, name, value, where, err, errcap);
}

/* ---------------------------------------------------------- rd_conf_parse */

int rd_conf_parse(const char *path, char *text, size_t len, rd_conf_fn fn, void *ud, char *err,
                  size_t errcap) {
  if (len > RD_CONF_MAX)
    return snprintf(err, errcap, "%s: larger than %u bytes", path, RD_CONF_MAX), -1;
  if (memchr(text, '\0', len) != NULL)
    return snprintf(err, errcap, "%s: a NUL byte: not a text file", path), -1;
  text[len] = '\0';
  unsigned lineno = 1;
  for (char *line = text; line != NULL && *line != '\0'; lineno++) {
    char *nl = strchr(line, '\n'), where[400];
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    snprintf(where, sizeof where, "%s:%u", path, lineno);
    if (n > RD_CONF_LINE_MAX)
      return snprintf(err, errcap, "%s: longer than %u bytes", where, RD_CONF_LINE_MAX), -1;
    while (n > 0 && line[n - 1] == '\r')
      n--;
    line[n] = '\0';
    if (parse_line(line, fn, ud, where, err, errcap) != 0)
      return -1;
    line = nl ? nl + 1 : NULL;
  }
  return 0;
}

int rd_conf_read(const char *path, char **text, size_t *len, char *err, size_t errcap) {
  FILE *f = fopen(path, "r");
  *text = NULL;
  if (f == NULL)
    return snprintf(err, errcap, "cannot read config file %s: %s", path, strerror(errno)), -1;
  char *buf = malloc(RD_CONF_MAX + 2);
  size_t n = buf ? fread(buf, 1, RD_CONF_MAX + 1, f) : 0;
  int rc = 0;
  if (buf == NULL || ferror(f))
    rc = snprintf(err, errcap, "cannot read config file %s: %s", path,
                  buf ? strerror(errno) : "out of memory");
  else if (n > RD_CONF_MAX)
    rc = snprintf(err, errcap, "config file %s: larger than %u bytes", path, RD_CONF_MAX);
  fclose(f);
  if (rc != 0) {
    free(buf);
    return -1;
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return 0;
}

/* ------------------------------------------------------- rd__opts_read_file */

/* rd_conf_fn for a daemon's option table. */
static int set_opt(void *ud, const char *name, char *value, const char *where, char *err,
                   size_t errcap) {
  const rd_opt *o = rd__opt_find(ud, name, strlen(name));
  if (o == NULL)
    return snprintf(err, errcap, "%s: unknown option '%s'", where, name), -1;
  char at[512];
  snprintf(at, sizeof at, "%s: %s", where, o->name);
  return rd__opt_set(o, value, at, err, errcap);
}

int rd__opts_read_file(const char *path, const rd_opt *opts, char *err, size_t errcap) {
  char *text = NULL;
  size_t len = 0;
  int rc = rd_conf_read(path, &text, &len, err, errcap);
  if (rc == 0)
    rc = rd_conf_parse(path, text, len, set_opt, (void *)opts, err, errcap);
  free(text);
  return rc;
}
