/*
 * man.c: manual pages in roff (man(7)) and the --version line, for the
 * daemons' hidden --man flag and for ringctl's (daemon.h).
 *
 * Sections: roff; a daemon's page; --version.
 *
 * Pages are printed by the binaries themselves from the option tables and
 * help texts --help prints, and CMake runs them at build time, so a page
 * cannot say other than --help does. Every text goes through
 * rd_roff_text, the one place that knows what roff would take for a
 * request or an escape.
 */
#include "daemon_int.h"

#include "ring.h"

#include <string.h>

/* ------------------------------------------------------------------- roff */

void rd_roff_text(FILE *f, const char *s) {
  bool line_start = true;
  for (; *s != '\0'; s++) {
    /* A line opening with '.' or '\'' would be read as a request. */
    if (line_start && (*s == '.' || *s == '\''))
      fputs("\\&", f);
    if (*s == '\\')
      fputs("\\e", f);
    else if (*s == '-')
      fputs("\\-", f); /* a minus (options), not a typographic hyphen */
    else
      fputc(*s, f);
    line_start = *s == '\n';
  }
}

void rd_roff_head(FILE *f, const char *name, const char *section, const char *summary) {
  fputs(".TH ", f);
  for (const char *p = name; *p != '\0'; p++)
    fputc(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p, f);
  fprintf(f, " %s \"\" \"Ringkeeper %s\" \"Ringkeeper\"\n.SH NAME\n", section, RING_VERSION_STRING);
  rd_roff_text(f, name);
  fputs(" \\- ", f);
  rd_roff_text(f, summary);
  fputc('\n', f);
}

void rd_roff_verbatim(FILE *f, const char *text) {
  size_t n = strlen(text);
  fputs(".nf\n", f);
  rd_roff_text(f, text);
  if (n > 0 && text[n - 1] != '\n')
    fputc('\n', f);
  fputs(".fi\n", f);
}

/* ------------------------------------------------------------ a daemon's page */

/* summary without a leading "PROG: " (daemons' summaries name themselves). */
static const char *bare_summary(const char *prog, const char *summary) {
  size_t n = strlen(prog);
  if (strncmp(summary, prog, n) == 0 && strncmp(summary + n, ": ", 2) == 0)
    return summary + n + 2;
  return summary;
}

/* One option as a tagged paragraph: the flag, then its help and default. */
static void man_opt(FILE *f, const char *flag, const char *placeholder, const char *help,
                    const char *def) {
  fputs(".TP\n.B ", f);
  rd_roff_text(f, flag);
  if (placeholder[0] != '\0') {
    fputs(" \\fI", f);
    rd_roff_text(f, placeholder + 1); /* placeholders start with a space */
    fputs("\\fR", f);
  }
  fputc('\n', f);
  rd_roff_text(f, help);
  if (def[0] != '\0') {
    fputs(" (default: ", f);
    rd_roff_text(f, def);
    fputc(')', f);
  }
  fputc('\n', f);
}

void rd__opts_man(FILE *f, const char *prog, const char *summary, const rd_opt *opts) {
  rd_roff_head(f, prog, "8", bare_summary(prog, summary));
  fputs(".SH SYNOPSIS\n.B ", f);
  rd_roff_text(f, prog);
  fputs("\n[\\fB\\-\\-config\\fR \\fIFILE\\fR] [\\fB\\-\\-\\fR\\fINAME\\fR \\fIVALUE\\fR]...\n"
        ".SH DESCRIPTION\n",
        f);
  rd_roff_text(f, bare_summary(prog, summary));
  fputs(".\n.PP\nEvery option is the same in the config file, as a line\n"
        ".IR name \" = \" value ,\nand on the command line; a flag wins over the file.\n"
        ".SH OPTIONS\n",
        f);
  man_opt(f, "--config", " FILE", "read `name = value` lines from FILE; flags win", "");
  for (const rd_opt *o = opts; o->name != NULL; o++) {
    char flag[128], def[128];
    snprintf(flag, sizeof flag, "--%s", o->name);
    rd__opt_format_value(o, def, sizeof def);
    man_opt(f, flag, rd__opt_placeholder(o->type), o->help != NULL ? o->help : "", def);
  }
  man_opt(f, "--help", "", "print the options and their defaults", "");
  man_opt(f, "--version", "", "print the version", "");
  fputs(".SH SEE ALSO\n.BR ringctl (1)\n", f);
}

/* ---------------------------------------------------------------- --version */

void rd_version_print(const char *prog) {
  const char *slash = prog != NULL ? strrchr(prog, '/') : NULL;
  printf("%s %s\n",
         slash != NULL  ? slash + 1
         : prog != NULL ? prog
                        : "ringkeeper",
         RING_VERSION_STRING);
}
