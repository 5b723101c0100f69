#!/usr/bin/env bash
# Measures the node's CPU with the web console open in headless Chromium
# against none, under the same publishing load: utime+stime of the node
# process from /proc/<pid>/stat over SECONDS seconds (default 60) each.
#   scripts/console-cpu.sh [seconds] [msgs/s]   (msgs/s 0: an idle node)
set -euo pipefail
secs=${1:-60}
rate=${2:-500}
cd "$(dirname "$0")/.."
go build -o bin/edgeq ./cmd/edgeq
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nats=$(port); http=$(port)
bin/edgeq run --data "$dir/data" --nats "127.0.0.1:$nats" --http "127.0.0.1:$http" --log-level warn 2>"$dir/node.log" &
node=$!; pids+=("$node")
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http/readyz" >/dev/null && break; sleep 0.1; done
if [ "$rate" -gt 0 ]; then
  msgs=$((rate * (secs * 2 + 60)))
  bin/edgeq bench --server "nats://127.0.0.1:$nats" --rate "$rate" --msgs "$msgs" --devices 200 >"$dir/bench.log" 2>&1 &
  pids+=("$!")
fi
ticks() { awk '{print $14 + $15}' "/proc/$node/stat"; }
measure() { local a b; a=$(ticks); sleep "$secs"; b=$(ticks); echo $(( b - a )); }
hz=$(getconf CLK_TCK)
sleep 10 # warm up: the bench connects and its queue group forms
none=$(measure)
chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --user-data-dir="$dir/chrome" --remote-debugging-port=0 \
  "http://127.0.0.1:$http/" >"$dir/chrome.log" 2>&1 &
pids+=("$!")
sleep 5
one=$(measure)
streams=$(curl -s "http://127.0.0.1:$http/metrics" | awk '$1=="edgeq_console_streams"{print $2}')
awk -v n="$none" -v o="$one" -v s="$secs" -v hz="$hz" -v st="$streams" -v r="$rate" 'BEGIN {
  printf "load %d msgs/s, %d s each, CLK_TCK %d\n", r, s, hz
  printf "no browser:  %.2f CPU-s (%.2f%% of one core)\n", n/hz, 100*n/hz/s
  printf "one browser: %.2f CPU-s (%.2f%% of one core), open streams %s\n", o/hz, 100*o/hz/s, st
  printf "extra:       %+.2f CPU-s (%+.2f%% of one core)\n", (o-n)/hz, 100*(o-n)/hz/s }'
