/*
 * daemon_int.h: what ringdaemon's own files share (rd__ names); not for
 * the daemons, which use daemon.h only.
 *
 * Sections: option values (opts_value.c); the manual page (man.c); the
 * config file (opts_file.c).
 */
#ifndef RING_DAEMON_INT_H
#define RING_DAEMON_INT_H

#include "daemon.h"

#include <stddef.h>

/* ---------------------------------------------------------- option values */

/* The entry of opts whose name is the first len bytes of name, or NULL. */
const rd_opt *rd__opt_find(const rd_opt *opts, const char *name, size_t len);

/* Converts value for option o, checks its range and stores it in o->target
 * (a string as a strdup()'ed copy the parser owns, replacing any earlier
 * copy it owned). where names the source in messages ("--port" or
 * "ring.conf:3: port"). Returns 0, or -1 with a message in err; the target
 * is unchanged on failure. */
int rd__opt_set(const rd_opt *o, const char *value, const char *where, char *err, size_t errcap);

/* Frees the string the parser stored in target, if it still owns one;
 * resets the target to NULL when it still points at that string. */
void rd__opt_release(char **target);

/* Writes a duration as the largest whole unit ("2m", "1500ms") into buf. */
void rd__format_ms(uint64_t ms, char *buf, size_t cap);

/* Writes o's current value (the default, when called before parsing) for
 * --help into buf: "" for a NULL string. */
void rd__opt_format_value(const rd_opt *o, char *buf, size_t cap);

/* " N", " DURATION", ...: what --help and the manual page show after an
 * option of type t ("" for a bool). */
const char *rd__opt_placeholder(rd_opt_type t);

/* ------------------------------------------------------------ manual page */

/* A daemon's whole page (man.c) on f: NAME from summary (a leading "PROG: "
 * dropped), SYNOPSIS, DESCRIPTION, every option of opts with its default,
 * SEE ALSO. */
void rd__opts_man(FILE *f, const char *prog, const char *summary, const rd_opt *opts);

/* ------------------------------------------------------------ config file */

/* Applies every `name = value` line of the file at path. Returns 0, or -1
 * with "path:line: ..." (or why the file cannot be read) in err; options
 * set by earlier lines keep their values on failure. */
int rd__opts_read_file(const char *path, const rd_opt *opts, char *err, size_t errcap);

#endif /* RING_DAEMON_INT_H */
