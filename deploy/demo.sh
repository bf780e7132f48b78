#!/usr/bin/env bash
# The live demo, end to end on one machine: installs what is needed, builds,
# brings up a cluster on loopback (etcd, a coordinator, 3 hosts in 3 zones,
# each a ring-agent with the example ring-kv on its data dir), loads 100,000
# keys, adds a 4th host, shows the plan, applies it with progress, then
# checks that every key reads back its value and every arc's replicas are
# identical, prints the share of data moved against the ideal 1/4, draws
# pictures (ringctl render: ring and load before, the join's load and flow,
# ring and load after; SVG under $out/pictures/) and brings the cluster down.
# Exit status 0 only when every check passed.
# Usage: deploy/demo.sh   (as root on Debian; a few minutes on 2 cores)
# Knobs: RING_DEMO_KEYS (100000), RING_DEMO_THREADS (256), RING_DEMO_TOKENS (4096),
#        RING_BUILD_ROOT (build/), RINGKEEPER_HOME (/tmp/ringkeeper-demo).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${RING_BUILD_ROOT:-$root/build}/demo
keys=${RING_DEMO_KEYS:-100000}
threads=${RING_DEMO_THREADS:-256}
tokens=${RING_DEMO_TOKENS:-4096}
export RINGKEEPER_HOME=${RINGKEEPER_HOME:-/tmp/ringkeeper-demo}
lc=(bash "$root/deploy/local-cluster.sh" --build "$out")

t_start=$(date +%s%3N)
t_step=$t_start
failed=()

secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
# step TITLE: a heading, with the time the previous step took.
step() {
  local now
  now=$(date +%s%3N)
  [ "$t_step" = "$t_start" ] || printf '   (%ss)\n' "$(secs $((now - t_step)))"
  t_step=$now
  printf '\n== %s  [t=%ss]\n' "$1" "$(secs $((now - t_start)))"
}
check() { # check NAME CMD...: runs a check; a failure is recorded, not fatal
  local name=$1
  shift
  if "$@"; then
    echo "   ok: $name"
  else
    echo "   FAILED: $name"
    failed+=("$name")
  fi
}
rctl() { "${lc[@]}" ringctl "$@"; }
all_running() { # every process of the cluster is up (a ring-kv that died would show here)
  local st
  st=$("${lc[@]}" status 2>&1 | sed -n '/^PROCESS/,$p')
  ! grep -q ' DOWN ' <<<"$st" || { grep ' DOWN ' <<<"$st"; return 1; }
}

step "install the Debian packages"
bash "$root/deploy/install-deps.sh"
# The checks read JSON with python3 (its standard library only).
command -v python3 >/dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3

step "build (Release) into $out"
cmake -S "$root" -B "$out" -DCMAKE_BUILD_TYPE=Release -DRING_TESTS=OFF >/dev/null
cmake --build "$out" -j "$(nproc)" >"$out.build.log" 2>&1 || {
  tail -n 40 "$out.build.log"
  exit 1
}
echo "   ringctl, ring-coordinator, ring-agent, ring-kv, ring-kv-load built (log: $out.build.log)"

# From here on, whatever happens, the cluster goes down (kept for a look
# when something failed).
finish() {
  local rc=$?
  if [ "$rc" -ne 0 ] || [ "${#failed[@]}" -gt 0 ]; then
    echo
    echo "== the cluster is kept for a look: ${lc[*]} status | logs | down"
    "${lc[@]}" down --keep >/dev/null 2>&1 || true
    echo "   (stopped; logs under $RINGKEEPER_HOME/log)"
  fi
}
trap finish EXIT

step "up: etcd, a coordinator, hosts n1 n2 n3 in zones z1 z2 z3 (T=$tokens, R=3)"
"${lc[@]}" down >/dev/null # a cluster left by an earlier run
# Up to 512 moves in flight (the defaults, 4 a node, suit big arcs on real
# disks; here arcs are small and the demo should not take all day).
"${lc[@]}" up --agents 3 --tokens "$tokens" --replicas 3 \
  --throttle "--moves-per-node 512 --moves-per-wave 512"
eval "$("${lc[@]}" env)"
kvload=(timeout 900 "$out/examples/kv/ring-kv-load" --endpoints "$RK_ENDPOINTS" --cluster "$RK_CLUSTER"
  --keys "$keys" --timeout 60s)
rctl status

step "load $keys keys through ring-kv (every write fsynced on its 3 replicas)"
"${kvload[@]}" --load --threads "$threads" --interval 10s

pictures="$out/pictures"
mkdir -p "$pictures"
draw() { # draw NAME ARGS...: one picture, its path and size
  local name=$1
  shift
  rctl render --svg "$pictures/$name.svg" "$@" >/dev/null
  echo "   $pictures/$name.svg ($(wc -c <"$pictures/$name.svg") bytes)"
}

step "pictures: the ring and the load before the join"
draw ring-before --what ring
draw load-before --what load

step "add host n4 in zone z4"
"${lc[@]}" add-node
echo "   waiting for the coordinator's proposal that moves arcs to n4"
plan_json="$RK_HOME/plan.json"
found=""
for _ in $(seq 150); do
  if rctl plan --json >"$plan_json" 2>/dev/null &&
    python3 -c 'import json,sys; p=json.load(sys.stdin); sys.exit(0 if p.get("id") and any(m["to"]=="n4" for m in p["moves"]) else 1)' <"$plan_json"; then
    found=1
    break
  fi
  sleep 0.2
done
[ -n "$found" ] || {
  echo "   no plan for n4 within 30s"
  exit 1
}
read -r plan_id lower_bound < <(python3 -c 'import json,sys; p=json.load(sys.stdin); print(p["id"], p["lower_bound"])' <"$plan_json")

step "pictures: the join's load (before, after, target) and its flow (who gives to whom)"
rctl plan -o "$RK_HOME/join-plan.json" >/dev/null # kept: the flow is drawn again after the run
draw load-join --what load --plan "$RK_HOME/join-plan.json"
draw flow-join --what flow --plan "$RK_HOME/join-plan.json"

step "ringctl plan"
rctl plan

step "ringctl apply $plan_id --wait"
timeout 600 "$RK_BIN/ringctl" --endpoints "$RK_ENDPOINTS" --cluster "$RK_CLUSTER" \
  apply "$plan_id" --wait
rctl status

step "checks"
check "ringctl verify: every placement invariant on the live table" rctl verify
check "ring-kv-load --verify: every one of $keys keys reads back its value" \
  "${kvload[@]}" --verify --threads 128
check "every arc's replicas identical on its 3 owners" \
  python3 "$root/deploy/compare-replicas.py" --endpoints "$RK_ENDPOINTS" --cluster "$RK_CLUSTER" \
  --nodes "$RK_HOME/nodes" --new n4

check "every daemon still running" all_running

step "moved fraction"
rctl history --json >"$RK_HOME/history.json"
python3 - "$plan_id" "$tokens" 3 "$lower_bound" "$RK_HOME/history.json" <<'EOF' || failed+=("moved fraction")
import json, sys
plan_id, T, R, lower = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
run = next(p for p in json.load(open(sys.argv[5]))["plans"] if p["id"] == plan_id)
moved, total, ideal = run["moves_done"], T * R, T * R / 4
print("   plan %s %s: %d of %d token-replicas moved = %.2f%%" % (
    plan_id, run["state"], moved, total, 100.0 * moved / total))
print("   ideal for 3 -> 4 equal hosts: 1/4 = %d (%.2f%%); planner's lower bound %d; "
      "over the ideal: %d" % (ideal, 25.0, lower, moved - ideal))
sys.exit(0 if run["state"] == "done" and moved == run["moves_total"] else 1)
EOF

step "pictures: the ring and the load after the join"
draw ring-after --what ring
draw load-after --what load

if [ "${#failed[@]}" -gt 0 ]; then
  step "FAILED: ${failed[*]}"
  exit 1
fi
step "down"
"${lc[@]}" down
trap - EXIT
step "demo passed in $(secs $(($(date +%s%3N) - t_start)))s"
