#!/usr/bin/env bash
# The live demo: installs what is needed, builds, and shows Ringkeeper at
# work. What it shows grows with the product; see README.md.
# Usage: deploy/demo.sh   (as root on Debian)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${RING_BUILD_ROOT:-$root/build}/demo

bash "$root/deploy/install-deps.sh"
cmake -S "$root" -B "$out" -DCMAKE_BUILD_TYPE=Release -DRING_TESTS=OFF >/dev/null
cmake --build "$out" -j "$(nproc)" >/dev/null

echo "== libring: a table, key lookups, read replicas, live swaps under a reader"
"$out/examples/ring_lookup_demo"

echo
echo "== ringctl simulate: how many keys move when an 8-node cluster grows to 9"
"$out/coordinator/ringctl" simulate --nodes 8 --keys 100000
