#!/usr/bin/env bash
# A Ringkeeper cluster on loopback: etcd (1 or 3 members), ring-coordinator(s)
# and N hosts, each host being a ring-agent plus the example ring-kv sharing
# its data dir, every host in its own failure domain (zone) by default.
#
# Usage: deploy/local-cluster.sh COMMAND [OPTIONS]
#   up [--agents N] [--etcd 1|3] [--coordinators N] [--zones K] [--tokens T]
#      [--replicas R] [--migration stream|none] [--auto-apply]
#      [--throttle "--moves-per-node N ..."] [--no-kv] [--base-port P]
#      [--cluster NAME] [--build DIR] [--home DIR]
#                        start everything; place the first table
#   status               ringctl status, then every process and its address
#   add-node [--apply]   one more host (agent + ring-kv) in the next zone
#   logs [NAME] [-f] [-n LINES]
#                        the logs' tails (NAME: etcd1, coord1, agent-n1,
#                        kv-n1, or n1 for both of a host)
#   ringctl ARGS...      ringctl with this cluster's --endpoints and --cluster
#   env                  shell assignments: RK_HOME RK_ENDPOINTS RK_CLUSTER RK_BIN
#   down [--keep]        stop everything (SIGTERM, then SIGKILL after a
#                        bounded wait); remove the state dir unless --keep
#
# State lives in --home DIR (default ${RINGKEEPER_HOME:-/tmp/ringkeeper-local}):
#   cluster.env          the settings of this cluster (sourced by every command)
#   secret               the agents' shared arc secret (0600)
#   conf/NAME.conf       each daemon's config file (a flag wins over it)
#   run/NAME.pid         log/NAME.log    one per process
#   etcd/etcdI/          etcd data       nodes/nI/    a host's data dir
# Ports: free loopback ports in 20000..32000 by default. With --base-port P
# (or RINGKEEPER_BASE_PORT) they are fixed: etcd member I client P+2(I-1) and
# peer P+2(I-1)+1; coordinator J /metrics P+20+J; host I arc server P+100+I,
# agent /metrics P+300+I, ring-kv P+500+I.
# Binaries: --build DIR (default build/demo in the repository, or
# RINGKEEPER_BUILD), else ring-agent & co. on PATH. Every wait is bounded.
# `up` on a running cluster says so and changes nothing; `up` over a stale
# state dir (no process alive) wipes it first. `down` with nothing up is fine.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
self="$root/deploy/local-cluster.sh"
RK_HOME=${RINGKEEPER_HOME:-/tmp/ringkeeper-local}

say() { printf 'local-cluster: %s\n' "$*"; }
die() {
  printf 'local-cluster: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# ------------------------------------------------------------ small helpers

now_ms() { date +%s%3N; }

# wait_for SECONDS WHAT CMD...: runs CMD every 0.2 s until it succeeds;
# fails (naming WHAT) after SECONDS.
wait_for() {
  local secs=$1 what=$2 end
  shift 2
  end=$(($(now_ms) + secs * 1000))
  until "$@" >/dev/null 2>&1; do
    [ "$(now_ms)" -lt "$end" ] || {
      printf 'local-cluster: timed out after %ss waiting for %s\n' "$secs" "$what" >&2
      return 1
    }
    sleep 0.2
  done
}

http_ok() { [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$1$2")" = 200 ]; }

# Listening TCP ports (decimal), from /proc (no ss/netstat needed).
listening_ports() {
  local hex
  # shellcheck disable=SC2013  # one hex port a word
  for hex in $(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
    awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }'); do
    echo $((16#$hex))
  done | sort -un
}

# pick_port OFFSET: the fixed port base+OFFSET with --base-port, else a free
# port in 20000..32000 (below the kernel's ephemeral range) not yet handed out.
pick_port() {
  local p taken
  taken=$(listening_ports)
  if [ -n "${BASE_PORT:-}" ]; then
    p=$((BASE_PORT + $1))
    grep -qx "$p" <<<"$taken" && die "port $p (--base-port $BASE_PORT + $1) is in use"
    echo "$p"
    return
  fi
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 12000))
    grep -qx "$p" <<<"$taken" && continue
    grep -qsx "$p" "$RK_HOME/ports" && continue
    echo "$p" >>"$RK_HOME/ports"
    echo "$p"
    return
  done
  die "no free port found in 20000..32000"
}

# bin NAME: the binary from the build dir, else from PATH.
bin() {
  local sub
  case $1 in
  ringctl) sub=coordinator/ringctl ;;
  ring-coordinator) sub=coordinator/coord ;;
  ring-agent) sub=agent ;;
  ring-kv | ring-kv-load) sub=examples/kv ;;
  esac
  if [ -x "$BUILD/$sub/$1" ]; then
    echo "$BUILD/$sub/$1"
  elif command -v "$1" >/dev/null; then
    command -v "$1"
  else
    die "$1 not found in $BUILD/$sub or on PATH (build first, or pass --build DIR)"
  fi
}

rctl() { "$(bin ringctl)" --endpoints "$ENDPOINTS" --cluster "$CLUSTER" "$@"; }

# ----------------------------------------------------------- processes

# pid_of NAME: the pid in run/NAME.pid if that process is alive and is ours
# (its command line names the state dir); nothing otherwise.
pid_of() {
  local f="$RK_HOME/run/$1.pid" pid
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$RK_HOME" || return 1
  echo "$pid"
}

# spawn NAME ADDR BIN ARGS...: starts a daemon in its own session (so a ^C
# in the terminal does not reach it), its output in log/NAME.log; the pid,
# written by the shell that then execs the binary, in run/NAME.pid.
spawn() {
  local name=$1 addr=$2
  shift 2
  mkdir -p "$RK_HOME/run" "$RK_HOME/log"
  echo "$addr" >"$RK_HOME/run/$name.addr"
  grep -qsx "$name" "$RK_HOME/procs" || echo "$name" >>"$RK_HOME/procs"
  # shellcheck disable=SC2016  # $$ and $@ belong to the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$RK_HOME/run/$name.pid" "$@" \
    </dev/null >>"$RK_HOME/log/$name.log" 2>&1 &
  wait_for 5 "$name to start" test -s "$RK_HOME/run/$name.pid"
}

# check_alive NAME: fails, with the log's tail, when NAME has exited.
check_alive() {
  pid_of "$1" >/dev/null && return 0
  printf 'local-cluster: %s exited; the end of %s:\n' "$1" "$RK_HOME/log/$1.log" >&2
  tail -n 15 "$RK_HOME/log/$1.log" >&2 || true
  return 1
}

# wait_healthy SECS NAME HOSTPORT: /healthz answers 200 (NAME must stay alive).
wait_healthy() {
  local secs=$1 name=$2 addr=$3 end
  end=$(($(now_ms) + secs * 1000))
  until http_ok "$addr" /healthz; do
    check_alive "$name" || return 1
    [ "$(now_ms)" -lt "$end" ] || {
      say "timed out after ${secs}s waiting for $name's /healthz (http://$addr/healthz)" >&2
      tail -n 15 "$RK_HOME/log/$name.log" >&2 || true
      return 1
    }
    sleep 0.2
  done
}

# stop_group SECS NAME...: SIGTERM, wait up to SECS, SIGKILL the stragglers.
stop_group() {
  local secs=$1 n pid pids=() end
  shift
  for n in "$@"; do
    pid=$(pid_of "$n") || continue
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
  done
  [ "${#pids[@]}" -gt 0 ] || return 0
  local t0
  t0=$(now_ms)
  end=$((t0 + secs * 1000))
  while [ "$(now_ms)" -lt "$end" ]; do
    local left=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    if [ "${#left[@]}" -eq 0 ]; then
      t0=$(($(now_ms) - t0))
      [ "$t0" -lt 3000 ] || say "$* took $((t0 / 1000)).$((t0 % 1000 / 100))s to stop"
      return 0
    fi
    pids=("${left[@]}")
    sleep 0.2
  done
  for pid in "${pids[@]}"; do
    say "pid $pid did not stop within ${secs}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  done
  sleep 0.2
}

any_alive() {
  local n
  [ -s "$RK_HOME/procs" ] || return 1
  while read -r n; do pid_of "$n" >/dev/null && return 0; done <"$RK_HOME/procs"
  return 1
}

names_like() { grep -sE "$1" "$RK_HOME/procs" || true; }

# ------------------------------------------------------------ settings

load_env() {
  [ -f "$RK_HOME/cluster.env" ] || die "no cluster under $RK_HOME (run: $0 up)"
  # shellcheck source=/dev/null
  . "$RK_HOME/cluster.env"
}

save_env() {
  {
    printf 'CLUSTER=%q\nENDPOINTS=%q\nBUILD=%q\nBASE_PORT=%q\n' \
      "$CLUSTER" "$ENDPOINTS" "$BUILD" "${BASE_PORT:-}"
    printf 'ZONES=%q\nNODES=%q\nKV=%q\n' "$ZONES" "$NODES" "$KV"
  } >"$RK_HOME/cluster.env"
}

# The zone of host I: one zone per host, or round-robin over --zones K.
zone_of() {
  if [ "$ZONES" -gt 0 ]; then echo "z$((($1 - 1) % ZONES + 1))"; else echo "z$1"; fi
}

# ---------------------------------------------------------------- etcd

start_etcd() {
  local n=$1 i cluster_str="" client peer
  local -a clients=() peers=()
  for i in $(seq "$n"); do
    clients[i]=$(pick_port $((2 * (i - 1))))
    peers[i]=$(pick_port $((2 * (i - 1) + 1)))
    cluster_str+="${cluster_str:+,}etcd$i=http://127.0.0.1:${peers[i]}"
    ENDPOINTS+="${ENDPOINTS:+,}http://127.0.0.1:${clients[i]}"
  done
  command -v etcd >/dev/null || die "etcd not found on PATH (apt-get install etcd-server)"
  for i in $(seq "$n"); do
    client="http://127.0.0.1:${clients[i]}" peer="http://127.0.0.1:${peers[i]}"
    mkdir -p "$RK_HOME/etcd/etcd$i"
    # --max-request-bytes: a table of T=65536, R=3 is a few MB in one txn.
    spawn "etcd$i" "127.0.0.1:${clients[i]}" etcd --name "etcd$i" \
      --data-dir "$RK_HOME/etcd/etcd$i" \
      --listen-client-urls "$client" --advertise-client-urls "$client" \
      --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
      --initial-cluster "$cluster_str" --initial-cluster-state new \
      --initial-cluster-token "ringkeeper-$CLUSTER" \
      --max-request-bytes 10485760 --quota-backend-bytes 4294967296 \
      --heartbeat-interval 100 --election-timeout 1000 --log-level warn --logger zap
  done
  for i in $(seq "$n"); do
    wait_for 30 "etcd$i to be healthy" etcd_healthy "127.0.0.1:${clients[i]}" ||
      { check_alive "etcd$i" || true; return 1; }
  done
}

etcd_healthy() { curl -sf -m 2 "http://$1/health" | grep -q '"health":"true"'; }

# -------------------------------------------------------- coordinators

start_coordinator() {
  local j=$1 port conf
  port=$(pick_port $((20 + j)))
  conf="$RK_HOME/conf/coord$j.conf"
  mkdir -p "$RK_HOME/conf"
  cat >"$conf" <<EOF
# ring-coordinator coord$j of the local cluster (see deploy/ring-coordinator.conf)
endpoints = $ENDPOINTS
cluster = $CLUSTER
id = coord$j
listen = 127.0.0.1:$port
lease-ttl = 5s
EOF
  spawn "coord$j" "127.0.0.1:$port" "$(bin ring-coordinator)" --config "$conf"
  wait_healthy 20 "coord$j" "127.0.0.1:$port"
}

# --------------------------------------------------------------- hosts

# start_host I: ring-agent nI and (unless --no-kv) ring-kv nI on one data dir.
start_host() {
  local i=$1 id="n$1" zone arc met kvp dir
  zone=$(zone_of "$i")
  dir="$RK_HOME/nodes/$id"
  mkdir -p "$dir" "$RK_HOME/conf"
  arc=$(pick_port $((100 + i)))
  met=$(pick_port $((300 + i)))
  cat >"$RK_HOME/conf/agent-$id.conf" <<EOF
# ring-agent $id of the local cluster (see deploy/ring-agent.conf)
endpoints = $ENDPOINTS
cluster = $CLUSTER
id = $id
listen = 127.0.0.1:$arc
data-dir = $dir
zone = $zone
secret-file = $RK_HOME/secret
metrics = 127.0.0.1:$met
lease-ttl = 5s
drop-grace = 30s
EOF
  spawn "agent-$id" "127.0.0.1:$arc (metrics 127.0.0.1:$met) zone=$zone" \
    "$(bin ring-agent)" --config "$RK_HOME/conf/agent-$id.conf"
  if [ "$KV" = 1 ]; then
    kvp=$(pick_port $((500 + i)))
    cat >"$RK_HOME/conf/kv-$id.conf" <<EOF
# ring-kv $id of the local cluster (see deploy/ring-kv.conf)
endpoints = $ENDPOINTS
cluster = $CLUSTER
id = $id
listen = 127.0.0.1:$kvp
data-dir = $dir
EOF
    spawn "kv-$id" "127.0.0.1:$kvp" "$(bin ring-kv)" --config "$RK_HOME/conf/kv-$id.conf"
  fi
  wait_healthy 20 "agent-$id" "127.0.0.1:$met"
  wait_for 20 "alive/$id in etcd" alive_key "$id"
}

alive_key() {
  ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" get --keys-only \
    "/ringkeeper/$CLUSTER/alive/$1" | grep -q .
}

# wait_kv SECS: every ring-kv answers /healthz 200 (it has a table and is registered).
wait_kv() {
  local n
  [ "$KV" = 1 ] || return 0
  for n in $(names_like '^kv-'); do
    wait_healthy "$1" "$n" "$(cut -d' ' -f1 "$RK_HOME/run/$n.addr")"
  done
}

# settled: every host's node record is active and no plan waits.
settled() {
  rctl status --json 2>/dev/null | python3 -c '
import json, sys
s = json.load(sys.stdin)
active = sum(n["state"] == "active" for n in s["nodes"])
plan = s.get("plan") or {}
sys.exit(0 if active == int(sys.argv[1]) and plan.get("state") in (None, "done") else 1)' "$NODES"
}

# proposed_id: the id of the proposed plan, when it has no violations.
proposed_id() {
  rctl plan --json 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)
if not p.get("id") or p.get("violations"):
    sys.exit(1)
print(p["id"])'
}

# place SECS: approve proposals until every host is active (a first
# placement moves nothing; later ones stream arcs). Bounded by SECS.
place() {
  local end id
  end=$(($(now_ms) + $1 * 1000))
  until settled; do
    [ "$(now_ms)" -lt "$end" ] || die "timed out after $1s placing every host in the table"
    if id=$(proposed_id); then
      say "approving plan $id"
      timeout "$1" "$(bin ringctl)" --endpoints "$ENDPOINTS" --cluster "$CLUSTER" \
        apply "$id" --wait >/dev/null || true # a newer proposal (exit 3) is taken next round
    fi
    sleep 0.3
  done
}

# ------------------------------------------------------------- commands

cmd_up() {
  local agents=3 netcd=1 ncoord=1 tokens=4096 replicas=3 migration=stream auto="" throttle=""
  ZONES=0 KV=1 CLUSTER=demo
  while [ $# -gt 0 ]; do
    case $1 in
    --agents) agents=$2; shift ;;
    --etcd) netcd=$2; shift ;;
    --coordinators) ncoord=$2; shift ;;
    --zones) ZONES=$2; shift ;;
    --tokens) tokens=$2; shift ;;
    --replicas) replicas=$2; shift ;;
    --migration) migration=$2; shift ;;
    --auto-apply) auto="--auto-apply all" ;;
    --throttle) throttle=$2; shift ;;
    --no-kv) KV=0 ;;
    --base-port) BASE_PORT=$2; shift ;;
    --cluster) CLUSTER=$2; shift ;;
    *) usage ;;
    esac
    shift
  done
  [[ $netcd =~ ^[13]$ ]] || die "--etcd takes 1 or 3"
  [[ $agents =~ ^[0-9]+$ && $agents -ge 1 && $agents -le 60 ]] || die "--agents takes 1..60"
  [[ $ncoord =~ ^[0-9]+$ && $ncoord -ge 1 && $ncoord -le 9 ]] || die "--coordinators takes 1..9"
  [[ $ZONES =~ ^[0-9]+$ ]] || die "--zones takes a number"
  for b in ringctl ring-coordinator ring-agent; do bin "$b" >/dev/null; done
  [ "$KV" = 0 ] || bin ring-kv >/dev/null
  command -v python3 >/dev/null || die "python3 is needed"

  if [ -d "$RK_HOME" ]; then
    if any_alive; then
      say "a cluster is already up under $RK_HOME (down it first to start another)"
      cmd_status
      return 0
    fi
    say "removing the stale state dir $RK_HOME (nothing in it runs)"
    rm -rf "$RK_HOME"
  fi
  mkdir -p "$RK_HOME"/{run,log,conf,nodes}
  chmod 700 "$RK_HOME"
  ( umask 077; head -c 32 /dev/urandom | base64 >"$RK_HOME/secret" )
  ENDPOINTS="" NODES=0
  local t0
  t0=$(now_ms)
  trap '[ $? -eq 0 ] || say "up failed: logs are in $RK_HOME/log; $0 down stops what started" >&2' EXIT

  say "etcd: $netcd member(s)"
  start_etcd "$netcd"
  save_env
  say "ringctl init: T=$tokens R=$replicas failure domain zone, migration $migration"
  # shellcheck disable=SC2086  # --throttle is a list of flags
  rctl init --tokens "$tokens" --replicas "$replicas" --failure-domain zone \
    --migration "$migration" $auto $throttle >/dev/null
  for j in $(seq "$ncoord"); do
    say "ring-coordinator coord$j"
    start_coordinator "$j"
  done
  for i in $(seq "$agents"); do
    say "host n$i (zone $(zone_of "$i")): ring-agent$([ "$KV" = 1 ] && echo ' + ring-kv')"
    NODES=$i
    save_env
    start_host "$i"
  done
  [ -n "$auto" ] || place 60
  wait_for 60 "every host active" settled
  wait_kv 30
  trap - EXIT
  t0=$(($(now_ms) - t0))
  say "up in $((t0 / 1000)).$((t0 % 1000 / 100))s: cluster $CLUSTER, etcd $ENDPOINTS, state in $RK_HOME"
  say "try: $0 status | $0 ringctl members | $0 add-node | $0 down"
}

cmd_status() {
  load_env
  rctl status || say "(ringctl status failed: is etcd up?)"
  echo
  printf '%-10s %-8s %-7s %s\n' PROCESS PID STATE ADDRESS
  local n pid
  while read -r n; do
    if pid=$(pid_of "$n"); then st=up; else st=DOWN pid=-; fi
    printf '%-10s %-8s %-7s %s\n' "$n" "$pid" "$st" "$(cat "$RK_HOME/run/$n.addr" 2>/dev/null)"
  done <"$RK_HOME/procs"
}

cmd_add_node() {
  local apply=0 i id
  [ "${1:-}" = --apply ] && apply=1
  load_env
  any_alive || die "the cluster under $RK_HOME is not running"
  i=$((NODES + 1))
  say "host n$i (zone $(zone_of "$i")): ring-agent$([ "$KV" = 1 ] && echo ' + ring-kv')"
  NODES=$i
  save_env
  start_host "$i"
  [ "$apply" = 1 ] && place 600
  wait_kv 30
}

cmd_logs() {
  local follow=() lines=20 name="" files=()
  while [ $# -gt 0 ]; do
    case $1 in
    -f) follow=(-F) ;;
    -n) lines=$2; shift ;;
    -*) usage ;;
    *) name=$1 ;;
    esac
    shift
  done
  [ -d "$RK_HOME/log" ] || die "no logs under $RK_HOME"
  case $name in
  "") files=("$RK_HOME"/log/*.log) ;;
  n[0-9]*) files=("$RK_HOME/log/agent-$name.log" "$RK_HOME/log/kv-$name.log") ;;
  *) files=("$RK_HOME/log/$name.log") ;;
  esac
  local ok=()
  for f in "${files[@]}"; do [ -f "$f" ] && ok+=("$f"); done
  [ "${#ok[@]}" -gt 0 ] || die "no log named ${name:-*} (see $RK_HOME/log)"
  tail -n "$lines" "${follow[@]}" "${ok[@]}"
}

cmd_down() {
  local keep=0
  [ "${1:-}" = --keep ] && keep=1
  if [ ! -d "$RK_HOME" ]; then
    say "nothing under $RK_HOME"
    return 0
  fi
  local t0
  t0=$(now_ms)
  # Data plane and agents first (they revoke their leases in etcd), then
  # the coordinators, etcd last.
  # shellcheck disable=SC2046
  stop_group 15 $(names_like '^kv-')
  # shellcheck disable=SC2046
  stop_group 15 $(names_like '^agent-')
  # shellcheck disable=SC2046
  stop_group 15 $(names_like '^coord')
  # shellcheck disable=SC2046
  stop_group 15 $(names_like '^etcd')
  if any_alive; then die "some processes survived SIGKILL; state kept in $RK_HOME"; fi
  local t=$(($(now_ms) - t0))
  if [ "$keep" = 1 ]; then
    say "stopped in $((t / 1000)).$((t % 1000 / 100))s; state kept in $RK_HOME"
  else
    t0=$(now_ms)
    rm -rf "$RK_HOME"
    local r=$(($(now_ms) - t0))
    say "stopped in $((t / 1000)).$((t % 1000 / 100))s; $RK_HOME removed in $((r / 1000)).$((r % 1000 / 100))s"
  fi
}

cmd_env() {
  load_env
  printf 'RK_HOME=%q\nRK_ENDPOINTS=%q\nRK_CLUSTER=%q\nRK_BIN=%q\n' \
    "$RK_HOME" "$ENDPOINTS" "$CLUSTER" "$(dirname "$(bin ringctl)")"
}

# ------------------------------------------------------------------ main

# --home and --build may come anywhere; the first other word is the command.
cmd="" args=()
BUILD=${RINGKEEPER_BUILD:-$root/build/demo}
BASE_PORT=${RINGKEEPER_BASE_PORT:-}
while [ $# -gt 0 ]; do
  case $1 in
  --home) RK_HOME=${2:?--home DIR}; shift ;;
  --build) BUILD=${2:?--build DIR}; shift ;;
  *) if [ -z "$cmd" ]; then cmd=$1; else args+=("$1"); fi ;;
  esac
  shift
done
[ -n "$cmd" ] || usage
BUILD=$(cd "$BUILD" 2>/dev/null && pwd || echo "$BUILD")
case $RK_HOME in /* ) ;; *) RK_HOME="$PWD/$RK_HOME" ;; esac
[ "$RK_HOME" != / ] || die "--home / is not a state dir"
set -- "${args[@]+"${args[@]}"}"

case $cmd in
up) cmd_up "$@" ;;
status) cmd_status ;;
add-node) cmd_add_node "$@" ;;
logs) cmd_logs "$@" ;;
down) cmd_down "$@" ;;
env) cmd_env ;;
ringctl) load_env; rctl "$@" ;;
-h | --help | help) usage ;;
*) usage ;;
esac
