#!/usr/bin/env bash
# Cross-node delivery against single-node delivery, in the same run, on
# loopback. Three clustered nodes with static peers: gw-a stores the data
# (publishers connect there), gw-b has the workers, gw-c (highest priority)
# leads the queue group, so every message is fetched from gw-a by gw-c and
# forwarded to gw-b, whose workers' acks go back to gw-c. A standalone node
# runs the same bench for comparison. Each setup runs twice: as fast as
# possible (throughput) and paced at --rate (latency).
# At the end it prints the CPU seconds the cluster nodes and the standalone
# node used (a figure a loaded machine disturbs less than rates).
# Usage: scripts/bench-cluster.sh [--msgs N] [--rate R] [more edgeq bench flags]
# BENCH_NODE_BIN=path runs another build of the nodes (e.g. an older release).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${BENCH_NODE_BIN:-}" ]; then bin=$BENCH_NODE_BIN; else make -s build >/dev/null; bin=./bin/edgeq; fi
msgs=100000
rate=5000
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --msgs) msgs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
group='groups:
  - {subject: telemetry.>, queue: bench}
'
declare -A nats http peer
for n in a b c s; do nats[$n]=$(port); http[$n]=$(port); peer[$n]=$(port); done
prio_a=1 prio_b=2 prio_c=3
for n in a b c; do
  peers=""
  for o in a b c; do [ "$o" = "$n" ] || peers+="    - 127.0.0.1:${peer[$o]}
"; done
  prio=prio_$n
  cat >"$tmp/$n.yaml" <<EOF
${group}cluster:
  name: bench
  secret: bench-secret-0123456789
  priority: ${!prio}
  listen: 127.0.0.1:${peer[$n]}
  mdns: false
  peers:
${peers}
EOF
done
printf '%s' "$group" >"$tmp/s.yaml"
declare -A pid
for n in a b c s; do
  $bin run --config "$tmp/$n.yaml" --data "$tmp/data-$n" --node-id "gw-$n" \
    --nats 127.0.0.1:${nats[$n]} --http 127.0.0.1:${http[$n]} --log-level warn &
  pid[$n]=$!
done
# CPU seconds (user + system) of a node so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
for n in a b c s; do
  for _ in $(seq 100); do curl -sf http://127.0.0.1:${http[$n]}/readyz >/dev/null && break; sleep 0.1; done
done
# Wait until gw-c leads the group on all three nodes.
for _ in $(seq 100); do
  ok=1
  for n in a b c; do
    curl -sf http://127.0.0.1:${http[$n]}/v1/status | python3 -c '
import json, sys
st = json.load(sys.stdin)
sys.exit(0 if st["cluster"]["leaders"].get("telemetry.> bench", {}).get("leader") == "gw-c" else 1)' || ok=0
  done
  [ $ok = 1 ] && break
  sleep 0.1
done
[ $ok = 1 ] || { echo "bench-cluster: no leader elected" >&2; exit 1; }
run() { ./bin/edgeq bench --json --queue bench --msgs "$1" "${@:2}" "${extra[@]}"; }
single=nats://127.0.0.1:${nats[s]}
data=nats://127.0.0.1:${nats[a]}
work=nats://127.0.0.1:${nats[b]}
s_max=$(run "$msgs" --server "$single")
c_max=$(run "$msgs" --server "$data" --worker-server "$work")
lat=$(( rate * 6 ))
s_lat=$(run "$lat" --server "$single" --rate "$rate")
c_lat=$(run "$lat" --server "$data" --worker-server "$work" --rate "$rate")
echo "CPU seconds over the run: cluster nodes a $(cpu ${pid[a]}) b $(cpu ${pid[b]}) c $(cpu ${pid[c]}); standalone node $(cpu ${pid[s]})"
python3 - "$s_max" "$c_max" "$s_lat" "$c_lat" "$rate" <<'PY'
import json, sys
s_max, c_max, s_lat, c_lat = (json.loads(a) for a in sys.argv[1:5])
rate = sys.argv[5]
def row(name, r): print(f"{name:46s} {r['publish_per_sec']:9.0f} {r['deliver_per_sec']:9.0f} {r['p50_ms']:7.2f} {r['p90_ms']:7.2f} {r['p99_ms']:7.2f} {r['duplicates']:6d}")
print(f"{'':46s} {'pub/s':>9s} {'deliv/s':>9s} {'p50 ms':>7s} {'p90 ms':>7s} {'p99 ms':>7s} {'dupes':>6s}")
row("single node, as fast as possible", s_max)
row("cross-node (data a, leader c, workers b)", c_max)
row(f"single node at {rate}/s", s_lat)
row(f"cross-node at {rate}/s", c_lat)
print(f"cross-node / single node: throughput {c_max['deliver_per_sec']/s_max['deliver_per_sec']:.2f}x, "
      f"p50 at {rate}/s +{c_lat['p50_ms']-s_lat['p50_ms']:.2f} ms, p99 +{c_lat['p99_ms']-s_lat['p99_ms']:.2f} ms")
PY
