#!/bin/sh
# scale_run.sh [BUILD_DIR] [fleet_run options]: the fleet scale run
# (tests/scale/README.md) from a build tree, e.g.
#   tests/scale/scale_run.sh build/rel --hosts 10000 --clients 2000 --procs 4
# Everything runs on loopback and stops by itself; fleet_run --help for options.
set -eu
build=${1:-build/rel}
[ $# -gt 0 ] && shift
bin="$build/tests/scale/fleet_run"
if [ ! -x "$bin" ]; then
  echo "scale_run.sh: $bin not built (cmake --build $build --target fleet_run)" >&2
  exit 2
fi
# thousands of watch streams and connections: raise the soft fd limit to the hard one
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec "$bin" "$@"
