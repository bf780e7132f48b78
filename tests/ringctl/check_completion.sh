#!/usr/bin/env bash
# ringctl's completion scripts: the bash script parses (bash -n) and, driven
# through its completion function as bash would call it, completes command
# names, a command's options, the global ones, the words an option or a
# command names (render --what, auto-apply) and the shells; every command
# `ringctl --help` lists completes. The zsh script parses (zsh -n) when zsh
# is installed.
# Usage: check_completion.sh RINGCTL
set -euo pipefail
ringctl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ringctl" completion bash >"$tmp/ringctl.bash"
bash -n "$tmp/ringctl.bash"
# shellcheck source=/dev/null
source "$tmp/ringctl.bash"

# complete WORD...: what _ringctl offers for the last word, sorted, one line.
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _ringctl
  printf '%s\n' "${COMPREPLY[@]}" | sort | paste -sd' '
}

fails=0
expect() {
  local want=$1
  shift
  local got
  got=$(complete_words "$@")
  if [ "$got" != "$want" ]; then
    echo "completing '$*': got '$got', want '$want'"
    fails=$((fails + 1))
  fi
}

expect "plan" ringctl pl
expect "--output" ringctl plan --o
expect "--what-if" ringctl plan --wh
expect "--what-if" ringctl --cluster c1 plan --wh
expect "--wait" ringctl apply --wa
expect "--json" ringctl status --js
expect "--all" ringctl status --al
expect "--all" ringctl members --al
expect "--force" ringctl label --fo
expect "--force" ringctl drain --fo
expect "--version" ringctl --vers
expect "bash zsh" ringctl completion ""
expect "accept-loss apply auth auto-apply" ringctl help a
# An option's or a command's own words where it names them, not files.
expect "flow" ringctl render --what f
expect "load" ringctl --cluster c1 render --svg x.svg --what l
expect "all none repair" ringctl auto-apply ""
expect "bytes tokens" ringctl balance ""
expect "none stream" ringctl init --migration ""
expect "all none repair" ringctl init --auto-apply ""
# After an option that takes a value, its value: files, not options.
got=$(complete_words ringctl plan -o "$tmp/ringctl.b")
[ "$got" = "$tmp/ringctl.bash" ] || { echo "plan -o FILE: got '$got'"; fails=$((fails + 1)); }
# Every option plan's help names is offered after `plan --`.
offered=" $(complete_words ringctl plan --) "
for opt in $("$ringctl" plan --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  [[ $offered == *" $opt "* ]] || { echo "plan --: $opt not offered"; fails=$((fails + 1)); }
done
# Every command --help lists is completed from its first letters.
for cmd in $("$ringctl" --help | awk '/^Commands:/ {on = 1; next} /^$/ {on = 0} on {print $1}'); do
  got=" $(complete_words ringctl "${cmd:0:3}") "
  [[ $got == *" $cmd "* ]] || { echo "'${cmd:0:3}': $cmd not offered"; fails=$((fails + 1)); }
done

"$ringctl" completion zsh >"$tmp/_ringctl"
if command -v zsh >/dev/null; then
  zsh -n "$tmp/_ringctl"
fi
[ "$fails" -eq 0 ] || exit 1
echo "completion: bash and zsh scripts parse; commands, options, values and shells complete: ok"
