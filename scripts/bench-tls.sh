#!/usr/bin/env bash
# Cost of TLS on the NATS port, side by side in one run on loopback: two
# standalone nodes, one plaintext and one with nats.tls (a CA and server
# certificate made here with openssl), the same `edgeq bench` against each,
# alternating, twice: durable publish (pub-acks) and ordered delivery to a
# queue group with acks.
# Usage: scripts/bench-tls.sh [--msgs N] [more edgeq bench flags]
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build >/dev/null
bin=./bin/edgeq
msgs=50000
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --msgs) msgs=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
  -keyout "$tmp/ca-key.pem" -out "$tmp/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=gw -keyout "$tmp/key.pem" -out "$tmp/req.pem" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$tmp/ext"
openssl x509 -req -in "$tmp/req.pem" -CA "$tmp/ca.pem" -CAkey "$tmp/ca-key.pem" -CAcreateserial -days 1 \
  -extfile "$tmp/ext" -out "$tmp/cert.pem" 2>/dev/null
group='groups:
  - {subject: telemetry.>, queue: bench}
'
printf '%s' "$group" >"$tmp/plain.yaml"
printf '%snats:\n  tls: {cert_file: %s, key_file: %s}\n' "$group" "$tmp/cert.pem" "$tmp/key.pem" >"$tmp/tls.yaml"
declare -A nats http pid
for n in plain tls; do
  nats[$n]=$(port); http[$n]=$(port)
  $bin run --config "$tmp/$n.yaml" --data "$tmp/data-$n" --node-id "gw-$n" \
    --nats 127.0.0.1:${nats[$n]} --http 127.0.0.1:${http[$n]} --log-level warn &
  pid[$n]=$!
done
# CPU seconds (user + system) of a node so far: both nodes get the same work.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
for n in plain tls; do
  for _ in $(seq 100); do curl -sf http://127.0.0.1:${http[$n]}/readyz >/dev/null && break; sleep 0.1; done
done
run() { $bin bench --json --queue bench --msgs "$msgs" "$@" "${extra[@]}"; }
p1=$(run --server nats://127.0.0.1:${nats[plain]})
t1=$(run --server tls://127.0.0.1:${nats[tls]} --tlsca "$tmp/ca.pem")
p2=$(run --server nats://127.0.0.1:${nats[plain]})
t2=$(run --server tls://127.0.0.1:${nats[tls]} --tlsca "$tmp/ca.pem")
echo "CPU seconds of the node over both runs: plaintext $(cpu ${pid[plain]}), TLS $(cpu ${pid[tls]})"
python3 - "$p1" "$t1" "$p2" "$t2" <<'PY'
import json, sys
p1, t1, p2, t2 = (json.loads(a) for a in sys.argv[1:5])
def row(name, r): print(f"{name:28s} {r['publish_per_sec']:9.0f} {r['deliver_per_sec']:9.0f} {r['p50_ms']:7.2f} {r['p99_ms']:7.2f} {r['errors']:6d}")
print(f"{'':28s} {'pub/s':>9s} {'deliv/s':>9s} {'p50 ms':>7s} {'p99 ms':>7s} {'errors':>6s}")
for i, (p, t) in enumerate(((p1, t1), (p2, t2)), 1):
    row(f"plaintext, run {i}", p)
    row(f"TLS, run {i}", t)
pp = (p1['publish_per_sec'] + p2['publish_per_sec']) / 2; tp = (t1['publish_per_sec'] + t2['publish_per_sec']) / 2
pd = (p1['deliver_per_sec'] + p2['deliver_per_sec']) / 2; td = (t1['deliver_per_sec'] + t2['deliver_per_sec']) / 2
print(f"TLS / plaintext (mean of both runs): publish {tp/pp:.2f}x, delivery {td/pd:.2f}x")
PY
