/*
 * ringctl_man.c: the manual page ringctl(1), printed by the hidden
 * `ringctl --man` and written into the build by CMake.
 *
 * Every section comes from what --help prints: the command list with each
 * command's summary and help text (ringctl_commands.c), and the global
 * options' help (ringctl_args.c). Help texts are laid out for a terminal
 * already, so they go in as unfilled blocks; the roff escaping is
 * ringdaemon's (rd_roff_text), the daemons' pages use the same.
 */
#include "ringctl.h"

#include "daemon.h"

static void section_commands(FILE *f) {
  size_t n;
  const ringctl_command *const *cmds = ringctl_commands(&n);
  fputs(".SH COMMANDS\n", f);
  for (size_t i = 0; i < n; i++) {
    fputs(".SS ", f);
    rd_roff_text(f, cmds[i]->name);
    fputs("\n", f);
    rd_roff_text(f, cmds[i]->summary);
    fputs(".\n.PP\n", f);
    rd_roff_verbatim(f, cmds[i]->help);
  }
}

void ringctl_man_print(FILE *f) {
  rd_roff_head(f, "ringctl", "1", "operate a Ringkeeper cluster");
  fputs(".SH SYNOPSIS\n"
        ".B ringctl\n"
        "[\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n"
        ".br\n"
        ".B ringctl help\n"
        "\\fICOMMAND\\fR\n"
        ".br\n"
        ".B ringctl \\-\\-version\n"
        ".SH DESCRIPTION\n"
        ".B ringctl\n"
        "reads and changes a Ringkeeper cluster's state in etcd: its nodes, the\n"
        "token table, the plans the coordinator proposes and the runs it executes.\n"
        "Global options may stand before or after the command.\n"
        "With \\fB\\-\\-json\\fR, a command prints one JSON object: what it shows,\n"
        "or what it did.\n"
        ".SH GLOBAL OPTIONS\n",
        f);
  rd_roff_verbatim(f, ringctl_global_help);
  section_commands(f);
  fputs(".SH EXIT STATUS\n"
        ".TP\n.B 0\nsuccess\n"
        ".TP\n.B 1\nruntime failure\n"
        ".TP\n.B 2\nusage error: bad command, option or value\n"
        ".TP\n.B 3\nconflict: a stale plan, a lost race; nothing was written\n"
        ".TP\n.B 4\ncould not tell: etcd did not answer before the end of \\fB\\-\\-timeout\\fR "
        "(a write's outcome is unknown; a waited-for run's end is unknown and it goes on)\n"
        ".SH SEE ALSO\n"
        ".BR ring\\-coordinator (8),\n"
        ".BR ring\\-agent (8)\n",
        f);
}
