/*
 * cmd_completion.c: `ringctl completion bash|zsh`: prints a completion
 * script for the shell.
 *
 * Sections: option words; bash; zsh; the command.
 *
 * The script is written from the command list (ringctl_commands.c), each
 * command's option table and the global one: the tables the parser reads,
 * so a new command or option is completed as soon as it parses. It
 * completes command names, each command's options and the global ones
 * (before or after the command), the words an option's value or a
 * command's argument may be where there are a few (render --what, auto-apply),
 * else file names after an option that takes a value, and the shells here.
 */
#include "ringctl.h"

#include <string.h>

static const char help[] =
    "Usage: ringctl completion bash|zsh\n"
    "\n"
    "Prints a completion script for the shell, made from the same command and option\n"
    "tables the parser reads. To use it now:\n"
    "  source <(ringctl completion bash)\n"
    "or install it (the Debian package does): bash in\n"
    "/usr/share/bash-completion/completions/ringctl, zsh as _ringctl in a directory\n"
    "of $fpath (/usr/share/zsh/vendor-completions).\n";

/* The shells, as the parser takes them and the scripts complete them. */
static const char *const shells[] = {"bash", "zsh"};
#define N_SHELLS (sizeof shells / sizeof shells[0])

/* --------------------------------------------------------------- option words */

/* " --name" for each option of opts ("-o" for a one-letter name), only
 * those that take a value when valued. */
static void opt_words(FILE *f, const ringctl_opt *opts, bool valued) {
  for (const ringctl_opt *o = opts; o != NULL && o->name != NULL; o++)
    if (!valued || o->has_value)
      fprintf(f, " %s%s", o->name[1] == '\0' ? "-" : "--", o->name);
}

static void command_words(FILE *f) {
  size_t n;
  const ringctl_command *const *cmds = ringctl_commands(&n);
  for (size_t i = 0; i < n; i++)
    fprintf(f, " %s", cmds[i]->name);
}

static void shell_words(FILE *f) {
  for (size_t i = 0; i < N_SHELLS; i++)
    fprintf(f, " %s", shells[i]);
}

/* ----------------------------------------------------------------------- bash */

/* One `case` arm per command setting `opts` (its options), `valued`
 * (those taking a value) and `args` (its argument's words, if it names
 * them), and offering an option's words after it; the shell's list syntax
 * goes around each: open and close a list (bash: "\"", zsh: "(" and ")";
 * bash's valued list ends in a space so " --x " matches). */
typedef struct shell_syntax {
  const char *open, *close, *close_valued;
  const char *prev;  /* the word before the cursor */
  const char *offer; /* a printf format of one %s: offers those words and returns */
} shell_syntax;

/* The words an option's value or a command's argument may be, offered
 * instead of file names (opt NULL: the command's argument): what the
 * parsers take (render's pictures; the config's policies, objectives and
 * migration modes). */
static const struct {
  const char *cmd, *opt, *words;
} choices[] = {
    {"render", "what", "load flow ring"},      {"init", "migration", "stream none"},
    {"init", "auto-apply", "none repair all"}, {"init", "balance", "tokens bytes"},
    {"auto-apply", NULL, "none repair all"},   {"balance", NULL, "tokens bytes"},
};

/* cmd's arm's lines for its choices: `args` for its argument, and an
 * offer of an option's words when the word before is that option. */
static void choice_lines(FILE *f, const char *cmd, const shell_syntax *sh) {
  for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++) {
    if (strcmp(choices[i].cmd, cmd) != 0)
      continue;
    if (choices[i].opt == NULL) {
      fprintf(f, "      args=%s%s%s\n", sh->open, choices[i].words, sh->close);
      continue;
    }
    fprintf(f, "      if [[ %s == --%s ]]; then ", sh->prev, choices[i].opt);
    fprintf(f, sh->offer, choices[i].words);
    fputs("; fi\n", f);
  }
}

static void case_arms(FILE *f, const shell_syntax *sh) {
  size_t n;
  const ringctl_command *const *cmds = ringctl_commands(&n);
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "    %s)\n      opts=%s", cmds[i]->name, sh->open);
    opt_words(f, cmds[i]->opts, false);
    fprintf(f, "%s\n      valued=%s", sh->close, sh->open);
    opt_words(f, cmds[i]->opts, true);
    fprintf(f, "%s\n", sh->close_valued);
    choice_lines(f, cmds[i]->name, sh);
    fputs("      ;;\n", f);
  }
}

static void emit_bash(FILE *f) {
  fputs("# bash completion for ringctl: `ringctl completion bash` wrote it from the\n"
        "# tables ringctl's parser reads.\n"
        "_ringctl() {\n"
        "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
        "  local globals=\"--help",
        f);
  opt_words(f, ringctl_global_opts, false);
  fputs("\"\n  local gvalued=\"", f);
  opt_words(f, ringctl_global_opts, true);
  fputs(" \"\n  local commands=\"help", f);
  command_words(f);
  fputs("\"\n"
        "  local cmd=\"\" opts=\"\" valued=\" \" args=\"\" i w\n"
        "  COMPREPLY=()\n"
        "  # The command is the first word that is neither an option nor a value.\n"
        "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "    w=${COMP_WORDS[i]}\n"
        "    case $w in\n"
        "      --*=*) ;;\n"
        "      -*) [[ $gvalued == *\" $w \"* ]] && ((i++)) ;;\n"
        "      *) cmd=$w; break ;;\n"
        "    esac\n"
        "  done\n"
        "  case $cmd in\n"
        "    \"\")\n"
        "      if [[ $cur == -* ]]; then\n"
        "        COMPREPLY=($(compgen -W \"$globals --version\" -- \"$cur\"))\n"
        "      else\n"
        "        COMPREPLY=($(compgen -W \"$commands\" -- \"$cur\"))\n"
        "      fi\n"
        "      return 0\n"
        "      ;;\n"
        "    help)\n"
        "      COMPREPLY=($(compgen -W \"$commands\" -- \"$cur\"))\n"
        "      return 0\n"
        "      ;;\n",
        f);
  static const shell_syntax bash = {"\"", "\"", " \"", "$prev",
                                    "COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return 0"};
  case_arms(f, &bash);
  fputs("  esac\n"
        "  if [[ $valued == *\" $prev \"* || $gvalued == *\" $prev \"* ]]; then\n"
        "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
        "  elif [[ $cur == -* ]]; then\n"
        "    COMPREPLY=($(compgen -W \"$opts $globals\" -- \"$cur\"))\n"
        "  elif [[ -n $args ]]; then\n"
        "    COMPREPLY=($(compgen -W \"$args\" -- \"$cur\"))\n"
        "  elif [[ $cmd == completion ]]; then\n"
        "    COMPREPLY=($(compgen -W \"",
        f);
  shell_words(f);
  fputs("\" -- \"$cur\"))\n"
        "  fi\n"
        "  return 0\n"
        "}\n"
        "complete -o default -F _ringctl ringctl\n",
        f);
}

/* ------------------------------------------------------------------------ zsh */

/* s inside zsh single quotes: each ' becomes '\''. */
static void zsh_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s != '\0'; s++)
    if (*s == '\'')
      fputs("'\\''", f);
    else
      fputc(*s, f);
  fputc('\'', f);
}

static void zsh_commands(FILE *f) {
  size_t n;
  const ringctl_command *const *cmds = ringctl_commands(&n);
  fputs("  commands=(\n    'help:the help of a command'\n", f);
  for (size_t i = 0; i < n; i++) {
    char item[256];
    snprintf(item, sizeof item, "%s:%s", cmds[i]->name, cmds[i]->summary);
    fputs("    ", f);
    zsh_quoted(f, item);
    fputc('\n', f);
  }
  fputs("  )\n", f);
}

static void emit_zsh(FILE *f) {
  fputs("#compdef ringctl\n"
        "# zsh completion for ringctl: `ringctl completion zsh` wrote it from the\n"
        "# tables ringctl's parser reads.\n"
        "_ringctl() {\n"
        "  local -a commands globals gvalued opts valued args\n",
        f);
  zsh_commands(f);
  fputs("  globals=(--help", f);
  opt_words(f, ringctl_global_opts, false);
  fputs(")\n  gvalued=(", f);
  opt_words(f, ringctl_global_opts, true);
  fputs(")\n"
        "  local cmd=\"\" i\n"
        "  for ((i = 2; i < CURRENT; i++)); do\n"
        "    case $words[i] in\n"
        "      --*=*) ;;\n"
        "      -*) (( ${gvalued[(Ie)$words[i]]} )) && ((i++)) ;;\n"
        "      *) cmd=$words[i]; break ;;\n"
        "    esac\n"
        "  done\n"
        "  case $cmd in\n"
        "    '')\n"
        "      if [[ $PREFIX == -* ]]; then compadd -- $globals --version\n"
        "      else _describe -t commands 'ringctl command' commands; fi\n"
        "      return\n"
        "      ;;\n"
        "    help)\n"
        "      _describe -t commands 'ringctl command' commands\n"
        "      return\n"
        "      ;;\n",
        f);
  static const shell_syntax zsh = {"(", ")", ")", "$words[CURRENT-1]", "compadd -- %s; return"};
  case_arms(f, &zsh);
  fputs("  esac\n"
        "  if (( ${valued[(Ie)$words[CURRENT-1]]} || ${gvalued[(Ie)$words[CURRENT-1]]} )); then\n"
        "    _files\n"
        "  elif [[ $PREFIX == -* ]]; then\n"
        "    compadd -- $opts $globals\n"
        "  elif (( $#args )); then\n"
        "    compadd -- $args\n"
        "  elif [[ $cmd == completion ]]; then\n"
        "    compadd --",
        f);
  shell_words(f);
  fputs("\n"
        "  else\n"
        "    _files\n"
        "  fi\n"
        "}\n"
        "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n"
        "  _ringctl \"$@\"\n"
        "else\n"
        "  compdef _ringctl ringctl\n"
        "fi\n",
        f);
}

/* ---------------------------------------------------------------- the command */

static int take_shell(const ringctl_args *a, int id, const char *value, void *ud) {
  const char **shell = ud;
  (void)id;
  if (*shell != NULL)
    return ringctl_usage_error(a, "one shell at a time (got \"%s\" too)", value);
  for (size_t i = 0; i < N_SHELLS; i++)
    if (strcmp(value, shells[i]) == 0) {
      *shell = shells[i];
      return RINGCTL_EXIT_OK;
    }
  return ringctl_usage_error(a, "no completion for \"%s\" (bash or zsh)", value);
}

static int cmd_completion(ringctl_args *a) {
  const char *shell = NULL;
  bool help_shown = false;
  int rc = ringctl_parse(a, NULL, help, take_shell, &shell, &help_shown);
  if (rc != RINGCTL_EXIT_OK || help_shown)
    return rc;
  if (shell == NULL)
    return ringctl_usage_error(a, "which shell? bash or zsh");
  if (strcmp(shell, "bash") == 0)
    emit_bash(stdout);
  else
    emit_zsh(stdout);
  return RINGCTL_EXIT_OK;
}

const ringctl_command ringctl_command_completion = {
    "completion", cmd_completion, "print a completion script for bash or zsh", NULL, help};
