#!/usr/bin/env bash
# The Debian packages (deploy/packaging.cmake) as an operator gets them:
# cpack builds the four; lintian finds no error in them (when installed);
# each is unpacked into a scratch root (dpkg-deb -x), where the binaries
# run (--version says the project's version, --help, ringctl simulate), the
# units start the packaged binaries, the sample configs are conffiles, and
# a program compiled against the unpacked libring-dev (pkg-config with the
# scratch prefix) runs on the unpacked libring.
# Usage: check_deb.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check_deb: $*" >&2; exit 1; }

version=$(sed -n 's/^#define RING_VERSION_STRING "\(.*\)"$/\1/p' "$build/include/ring_version.h")
(cd "$build" && cpack -G DEB -B "$tmp/pkgs" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; fail "cpack failed"; }
debs=("$tmp"/pkgs/*.deb)
[ "${#debs[@]}" -eq 4 ] || fail "want 4 packages, got: ${debs[*]##*/}"

if command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 "${debs[@]}" >"$tmp/lintian.log" 2>&1 || true
  if grep -q '^E: ' "$tmp/lintian.log"; then
    cat "$tmp/lintian.log"
    fail "lintian reports errors"
  fi
fi

root=$tmp/root
for deb in "${debs[@]}"; do
  dpkg-deb -x "$deb" "$root"
  mkdir -p "$tmp/control/${deb##*/}"
  dpkg-deb -e "$deb" "$tmp/control/${deb##*/}"
done

# The binaries run from the scratch root.
for bin in ringctl ring-coordinator ring-agent; do
  [ "$("$root/usr/bin/$bin" --version)" = "$bin $version" ] || fail "$bin --version"
  "$root/usr/bin/$bin" --help >"$tmp/help" || fail "$bin --help"
  grep -q -- '--help' "$tmp/help" || fail "$bin --help printed no options"
done
"$root/usr/bin/ringctl" simulate --nodes 4 --keys 1000 --tokens 64 >"$tmp/sim" ||
  fail "ringctl simulate"
grep -q 'fixed tokens' "$tmp/sim" || fail "ringctl simulate printed no report"

# What the daemons' packages carry besides the binaries.
for f in usr/share/man/man1/ringctl.1.gz usr/share/man/man8/ring-coordinator.8.gz \
  usr/share/man/man8/ring-agent.8.gz usr/share/bash-completion/completions/ringctl \
  usr/share/zsh/vendor-completions/_ringctl etc/ringkeeper/ring-coordinator.conf \
  etc/ringkeeper/ring-agent.conf usr/lib/sysusers.d/ringkeeper-agent.conf; do
  [ -s "$root/$f" ] || fail "missing $f"
done
for d in ring-coordinator ring-agent; do
  grep -qx "ExecStart=/usr/bin/$d --config /etc/ringkeeper/$d.conf" \
    "$root/lib/systemd/system/$d.service" || fail "$d.service does not start /usr/bin/$d"
  grep -qx "/etc/ringkeeper/$d.conf" "$tmp"/control/*/conffiles || fail "$d.conf not a conffile"
done

# A program built against the unpacked libring-dev, run on the unpacked library.
export PKG_CONFIG_PATH=$root/usr/lib/pkgconfig
[ "$(pkg-config --modversion libring)" = "$version" ] || fail "libring.pc's version"
cat >"$tmp/consumer.c" <<'C'
#include <ring.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  printf("%s\n", ring_version());
  return strcmp(ring_version(), RING_VERSION_STRING) != 0;
}
C
# shellcheck disable=SC2046 # pkg-config's words are separate flags
cc -std=c11 -o "$tmp/consumer" "$tmp/consumer.c" $(pkg-config --cflags --libs libring)
[ "$(LD_LIBRARY_PATH=$root/usr/lib "$tmp/consumer")" = "$version" ] || fail "consumer"
ldd_out=$(LD_LIBRARY_PATH=$root/usr/lib ldd "$tmp/consumer")
grep -q "$root/usr/lib/libring.so" <<<"$ldd_out" || fail "consumer not on the unpacked libring"
echo "deb: ${debs[*]##*/}: lintian clean of errors; binaries, man pages, completion, units," \
  "conffiles and a libring-dev consumer from the unpacked root: ok"
