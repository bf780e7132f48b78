#!/usr/bin/env bash
# Installs libring into a temporary prefix and builds a consumer three ways:
# pkg-config against the shared library, pkg-config --static, and CMake's
# find_package(Ringkeeper). Also checks that the installed headers are the
# public ones alone, that the shared library exports only the public ring_
# API (built with -fvisibility=hidden, ringx's helpers inside it hidden)
# and carries a versioned SONAME.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The library's components only: the daemons' are checked as packages
# (check_deb.sh).
cmake --install "$build" --prefix "$tmp/prefix" --component lib >/dev/null
cmake --install "$build" --prefix "$tmp/prefix" --component dev >/dev/null
lib=$(find "$tmp/prefix" -name 'libring.so.*.*' | head -n1)
test -f "$tmp/prefix/include/ring.h"
test -f "$tmp/prefix/include/ring_inline.h"
test -f "$tmp/prefix/include/ring_version.h"
# The installed headers are the public ones alone: none names ringx
# (util/ringx.h) or a private header, and neither is installed.
private=$(grep -lE '#\s*include\s*[<"](ringx|[a-z_]*_int)\.h' "$tmp/prefix/include"/*.h || true)
[ -z "$private" ] || { echo "installed headers include private ones: $private"; exit 1; }
[ -z "$(find "$tmp/prefix" -name 'ringx*' -o -name '*_int.h')" ] || { echo "a private header or ringx installed"; exit 1; }

# While 0.x the SONAME carries major.minor (each minor may change the ABI).
read -r major minor < <(sed -n 's/^#define RING_VERSION_\(MAJOR\|MINOR\) \([0-9]*\)$/\2/p' \
  "$tmp/prefix/include/ring_version.h" | paste -sd' ')
want=libring.so.$major
[ "$major" = 0 ] && want=libring.so.0.$minor
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[ "$soname" = "$want" ] || { echo "SONAME is '$soname', not $want"; exit 1; }
leaked=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDB]/ {print $3}' | grep -v '^ring_' || true)
[ -z "$leaked" ] || { echo "exported beyond the API:"; echo "$leaked"; exit 1; }
internal=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep '^ring__' || true)
[ -z "$internal" ] || { echo "internal symbols exported: $internal"; exit 1; }
# The control-plane codecs (ringproto, rk_*) are the daemons', never libring's.
control=$(nm --defined-only "$(dirname "$lib")/libring.a" 2>/dev/null | awk '$2 == "T" {print $3}' |
  grep '^rk_' || true)
[ -z "$control" ] || { echo "control-plane symbols in libring.a: $control"; exit 1; }

export PKG_CONFIG_PATH=$(dirname "$(find "$tmp/prefix" -name libring.pc)")
cc -std=c11 -o "$tmp/shared" "$src/examples/ring_lookup_demo.c" \
  $(pkg-config --cflags --libs libring) -lpthread
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/shared" >/dev/null
cc -std=c11 -o "$tmp/static" "$src/examples/ring_lookup_demo.c" \
  $(pkg-config --cflags libring) "$(dirname "$lib")/libring.a" \
  $(pkg-config --libs libxxhash libcjson libcurl) -lpthread -lm
"$tmp/static" >/dev/null

mkdir -p "$tmp/consumer"
cat >"$tmp/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(Ringkeeper REQUIRED)
add_executable(consumer $src/examples/ring_lookup_demo.c)
target_link_libraries(consumer PRIVATE Ringkeeper::ring)
CMAKE
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/consumer/build/consumer" >/dev/null
# No installed file names a test hook: fault injection is built only into
# test binaries (ring-coordinator-faults), which are never installed.
cmake --install "$build" --prefix "$tmp/all" >/dev/null
hooks=$(grep -rl RING_TEST_ "$tmp/all" || true)
[ -z "$hooks" ] || { echo "a test hook in an installed file:"; echo "$hooks"; exit 1; }
[ -x "$tmp/all/bin/ring-coordinator" ] || { echo "ring-coordinator was not installed"; exit 1; }
echo "install: headers, libring.pc, CMake package, SONAME $soname, $(nm -D --defined-only "$lib" | grep -c ' T ring_') exported functions: ok"
