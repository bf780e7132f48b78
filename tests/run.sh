#!/usr/bin/env bash
# Installs what is needed, checks the tree's format (tests/check_format.sh),
# then builds and runs every test, each under at least one build and the
# sanitizers over all of Ringkeeper's own code, in three builds:
#   1. gcc -O2, warnings as errors: every test but the end-to-end, fault and
#      coordinator runs (labels e2e, fault, coordinator), which start real
#      clusters and wait on real timeouts, so they take most of a stage's time:
#      the sanitized builds run them instead (ASan all three, TSan the
#      coordinator's), where the memory and thread errors they can reach show.
#      Of those, a quick few run here too (label quick: a join end to end, the
#      coordinator frozen mid-run, a coordinator's join wave by wave), so the
#      optimised build that ships is run as a whole cluster.
#      The real-Prometheus test (label e2e) runs here only. Fuzz targets replay
#      their corpus; the planner property test runs 4000 random cases (10000
#      when run by hand);
#   2. clang -O1 with AddressSanitizer + UndefinedBehaviorSanitizer: every test but the
#      fleet simulator's quick run (label scale) and the real-Prometheus test (they
#      exercise test tools and Prometheus, not more of Ringkeeper's code; the first
#      build runs both) and the quick cases (label quick: this stage runs their
#      whole binaries); fuzz targets run libFuzzer for RING_FUZZ_SECONDS each
#      (default 10); the planner property test runs 1000 random cases;
#   3. clang with ThreadSanitizer: the tests labelled tsan (tests/CMakeLists.txt says
#      which): the etcd client, coordinator and agent tests (their daemons are
#      instrumented too) and the unit tests of threaded code (the live holder, the
#      shared delta builds, the daemons' HTTP server, waker, admission and logger,
#      ring-kv's store). The planner property test and the end-to-end and fault runs
#      are left to the first two builds: under TSan they take ~15 minutes more.
# Each stage's time is printed when it ends, so a slow stage shows in the log;
# the whole run takes about 40 minutes on 2 cores.
# Then a quick run of each benchmark, so their figures are in the log.
# Usage: tests/run.sh   (as root on Debian; CI runs it through .ci/run)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${RING_BUILD_ROOT:-$root/build}
jobs=$(nproc)

bash "$root/deploy/install-deps.sh"
# install-deps.sh installs chromium: its page test must run here, never skip.
export RING_REQUIRE_CHROMIUM=1
# CI runs as root with loop devices: the failing-disk test must run, never skip.
export RING_REQUIRE_LOOP=1
# install-deps.sh installs prometheus (promtool): the rule checks and the
# live-Prometheus test must run, never skip.
export RING_REQUIRE_PROMETHEUS=1

# build DIR [cmake args...]: configure and compile with warnings as errors.
build() {
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -DRING_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j "$jobs"
}

# stage NAME: says how long the stage before took, then starts NAME.
stage_start=$SECONDS
stage_name=
stage() {
  [ -z "$stage_name" ] || echo "== $stage_name: done in $((SECONDS - stage_start)) s"
  echo "== $1"
  stage_start=$SECONDS
  stage_name=$1
}

stage "format: clang-format 14 over every tracked C file"
bash "$root/tests/check_format.sh"

mkdir -p "$out"
stage "1/3 gcc -O2, -Werror: all tests but e2e, fault, coordinator and net; their quick few"
CC=gcc build "$out/release" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRING_PROPERTY_CASES=4000
ctest --test-dir "$out/release" --output-on-failure -j "$jobs" -LE '^(e2e|fault|coordinator|net)$'
ctest --test-dir "$out/release" --output-on-failure -R '^test_e2e_prometheus$'
# the network-namespace fleet's quick scenario (root; skipped, and says why, elsewhere)
ctest --test-dir "$out/release" --output-on-failure -L '^net_quick$'

stage "2/3 clang -O1, ASan+UBSan, libFuzzer: all tests but the net fleet's (its daemons run the same code under ASan in e2e and fault)"
# -O1 as the sanitizers' authors advise: every check stays, asserts stay (Debug),
# and the integration tests run about 1.5x faster than at -O0 (test_coord_input 68 s, not 107 s).
CC=clang build "$out/asan" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
  -DRING_SANITIZE=ON -DRING_FUZZ=ON -DRING_PROPERTY_CASES=1000 \
  -DRING_FUZZ_SECONDS="${RING_FUZZ_SECONDS:-10}"
# CK_FORK=no keeps each Check suite in one process, so LeakSanitizer sees it whole.
CK_FORK=no ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$out/asan" --output-on-failure -j "$jobs" -LE '^(scale|quick|net)$' \
  -E '^test_e2e_prometheus$'

stage "3/3 clang, TSan: the tests labelled tsan"
CC=clang build "$out/tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRING_TSAN=ON
CK_FORK=no TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir "$out/tsan" --output-on-failure -L '^tsan$'

stage "benchmarks (figures only; they never fail on time)"
for b in "$out"/release/tests/bench/bench_*; do
  [ -x "$b" ] && "$b" --quick
done
stage "all test builds passed"
echo "== the whole run: $SECONDS s"
