#!/usr/bin/env bash
# The Debian packages (deploy/packaging.cmake) as an operator gets them:
# cpack builds the five; lintian finds neither an error nor a warning in
# them; the library is Multi-Arch: same in the multiarch folder with a
# shlibs file and no ldconfig call of its own; the binaries are hardened;
# the daemons' maintainer scripts make the user and handle the units;
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
[ "${#debs[@]}" -eq 5 ] || fail "want 5 packages, got: ${debs[*]##*/}"

command -v lintian >/dev/null || fail "lintian is not installed (deploy/install-deps.sh)"
lintian --tag-display-limit 0 "${debs[@]}" >"$tmp/lintian.log" 2>&1 || true
if grep -q '^[EW]: ' "$tmp/lintian.log"; then
  cat "$tmp/lintian.log"
  fail "lintian reports errors or warnings"
fi

root=$tmp/root
for deb in "${debs[@]}"; do
  dpkg-deb -x "$deb" "$root"
  mkdir -p "$tmp/control/${deb##*/}"
  dpkg-deb -e "$deb" "$tmp/control/${deb##*/}"
done

triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=$root/usr/lib/$triplet
ctl() { local f=("$tmp/control/$1"_*/"$2"); echo "${f[0]}"; } # a package's control file
grep -qx 'Multi-Arch: same' "$(ctl libring0.2 control)" || fail "libring is not Multi-Arch: same"
grep -q '^libring 0.2 libring0.2 ' "$(ctl libring0.2 shlibs)" || fail "libring has no shlibs"
for s in postinst postrm; do
  [ ! -e "$tmp/control/libring0.2_"*"/$s" ] || fail "libring's $s (the trigger runs ldconfig)"
done
[ -e "$libdir/libring.so.0.2" ] || fail "libring.so.0.2 is not in /usr/lib/$triplet"
grep -q '^Recommends: etcd-server' "$(ctl ringkeeper-coordinator control)" ||
  fail "ringkeeper-coordinator does not recommend etcd-server"
grep -qx 'Architecture: all' "$(ctl python3-ringkeeper control)" || fail "python3-ringkeeper arch"
# Hardened: full RELRO and PIE executables, the stack protector and fortify
# in the code (their symbols), in the library and the daemons.
# (Each tool's output is read whole: grep -q closing a pipe early would fail it.)
for f in usr/bin/ring-coordinator usr/bin/ring-agent usr/bin/ringctl "usr/lib/$triplet/libring.so.0.2"; do
  dyn=$(readelf -d "$root/$f")
  grep -q 'BIND_NOW' <<<"$dyn" || fail "$f: not bound now"
  grep -Eq 'FLAGS_1.*PIE|SONAME' <<<"$dyn" || fail "$f: not PIE"
  [[ $(readelf -l "$root/$f") == *GNU_RELRO* ]] || fail "$f: no RELRO"
  syms=$(nm -D "$root/$f")
  grep -q '__stack_chk_fail' <<<"$syms" || fail "$f: no stack protector"
  grep -q '_chk@' <<<"$syms" || fail "$f: no fortified calls"
done
# The daemons' scripts, run as dpkg runs them with the system's tools
# replaced by stubs that log their calls (PATH holds the stubs alone: no
# systemd-sysusers, and no user yet): the user made with adduser, the unit's
# state recorded on configure, stopped on remove, masked on removal,
# forgotten on purge.
stubs=$tmp/stubs
mkdir -p "$stubs"
for tool in getent adduser deb-systemd-helper deb-systemd-invoke systemctl; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\n[ %s != getent ]\n' "$tool" "$tmp/calls" "$tool" \
    >"$stubs/$tool"
  chmod +x "$stubs/$tool"
done
calls() { # script args...: runs it, then prints (and forgets) the calls it made
  : >"$tmp/calls"
  PATH=$stubs /bin/sh "$@" || fail "$* exited $?"
  cat "$tmp/calls"
}
for d in ring-coordinator ring-agent; do
  c=ringkeeper-${d#ring-}
  grep -q '^Depends:.*adduser' "$(ctl "$c" control)" || fail "$c does not depend on adduser"
  for s in postinst prerm postrm; do sh -n "$(ctl "$c" $s)" || fail "$c: $s"; done
  out=$(calls "$(ctl "$c" postinst)" configure "")
  grep -q '^adduser --system --group .* ringkeeper$' <<<"$out" || fail "$c: no adduser: $out"
  grep -qx "deb-systemd-helper update-state $d.service" <<<"$out" || fail "$c: configure: $out"
  grep -q 'enable' <<<"$out" && fail "$c: a fresh install enables the unit: $out"
  [ -z "$(calls "$(ctl "$c" prerm)" upgrade 0.2.0-1)" ] || fail "$c: an upgrade stops the unit"
  grep -qx "deb-systemd-helper mask $d.service" <<<"$(calls "$(ctl "$c" postrm)" remove)" ||
    fail "$c: removal does not disable the unit"
  out=$(calls "$(ctl "$c" postrm)" purge)
  grep -qx "deb-systemd-helper purge $d.service" <<<"$out" || fail "$c: purge: $out"
  grep -q "deb-systemd-invoke stop $d.service" "$(ctl "$c" prerm)" || fail "$c: prerm stops not"
done
# The Python binding imports from the root, on the root's libring.
PYTHONPATH=$root/usr/lib/python3/dist-packages RINGKEEPER_LIBRING=$libdir \
  /usr/bin/python3 -c 'import ringkeeper, sys; sys.exit(ringkeeper.LIBRING_VERSION != sys.argv[1])' \
  "$version" || fail "python3-ringkeeper does not import on the unpacked libring"

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
export PKG_CONFIG_PATH=$libdir/pkgconfig
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
[ "$(LD_LIBRARY_PATH=$libdir "$tmp/consumer")" = "$version" ] || fail "consumer"
ldd_out=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/consumer")
grep -q "$libdir/libring.so" <<<"$ldd_out" || fail "consumer not on the unpacked libring"
echo "deb: ${debs[*]##*/}: lintian clean of errors and warnings; multiarch, hardening," \
  "maintainer scripts, binaries, man pages, completion, units, conffiles, the Python" \
  "binding and a libring-dev consumer from the unpacked root: ok"
