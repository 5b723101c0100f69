#!/usr/bin/env bash
# Runs `edgeq bench` against an edgeq node (durable: pub-acks after fsync,
# acked queue-group deliveries) and against nats-server (core queue groups,
# nothing stored) in the same run, and prints both with their ratio.
# Usage: scripts/bench-vs-nats.sh [extra bench flags, e.g. --msgs 200000]
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build >/dev/null
bin=./bin/edgeq
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ep=$(port); hp=$(port); np=$(port)
$bin run --data "$tmp/data" --nats 127.0.0.1:$ep --http 127.0.0.1:$hp --log-level warn &
nats-server -a 127.0.0.1 -p $np >/dev/null 2>&1 &
for _ in $(seq 50); do curl -sf http://127.0.0.1:$hp/readyz >/dev/null && break; sleep 0.1; done
e=$($bin bench --json --server nats://127.0.0.1:$ep --mode durable "$@")
c=$($bin bench --json --server nats://127.0.0.1:$ep --mode core "$@")
n=$($bin bench --json --server nats://127.0.0.1:$np --mode core "$@")
python3 - "$e" "$c" "$n" <<'PY'
import json, sys
e, c, n = (json.loads(a) for a in sys.argv[1:])
def row(name, r): print(f"{name:34s} {r['publish_per_sec']:10.0f} {r['deliver_per_sec']:10.0f} {r['p50_ms']:8.2f} {r['p90_ms']:8.2f} {r['p99_ms']:8.2f}")
print(f"{'':34s} {'pub/s':>10s} {'deliv/s':>10s} {'p50 ms':>8s} {'p90 ms':>8s} {'p99 ms':>8s}")
row("edgeq durable (pub-ack, acked)", e)
row("edgeq core subjects", c)
row("nats-server core queue group", n)
print(f"edgeq durable / nats-server core: deliver {e['deliver_per_sec']/n['deliver_per_sec']:.2f}x, p50 latency {e['p50_ms']/max(n['p50_ms'],1e-9):.1f}x")
PY
