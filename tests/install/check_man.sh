#!/usr/bin/env bash
# The manual pages the build writes (deploy/CMakeLists.txt: each binary's
# --man): man renders each without a warning (groff's, through man-db), and
# ringctl(1) has a section for every command `ringctl --help` lists.
# Usage: check_man.sh MAN_DIR RINGCTL
set -euo pipefail
mandir=$1
ringctl=$2
fails=0
for page in "$mandir"/ringctl.1 "$mandir"/ring-coordinator.8 "$mandir"/ring-agent.8; do
  [ -s "$page" ] || { echo "missing or empty: $page"; fails=$((fails + 1)); continue; }
  warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || { echo "$page:"; echo "$warnings"; fails=$((fails + 1)); }
done
for cmd in $("$ringctl" --help | awk '/^Commands:/ {on = 1; next} /^$/ {on = 0} on {print $1}'); do
  grep -qx ".SS ${cmd//-/\\\\-}" "$mandir/ringctl.1" ||
    { echo "ringctl.1: no section for $cmd"; fails=$((fails + 1)); }
done
[ "$fails" -eq 0 ] || exit 1
echo "man: ringctl.1, ring-coordinator.8, ring-agent.8 render without warnings: ok"
