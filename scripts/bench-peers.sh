#!/usr/bin/env bash
# edgeq against its peers, side by side in one run, with the same client code
# (`edgeq bench`) and workload: MSGS × 150 B over 1,000 devices, published with
# 256 pub-acks outstanding per publisher (one publisher, then four), then four
# workers acking drain the backlog. Peers: nats-server JetStream (Debian's
# nats-server, file store in a temp dir, loopback), nats-server core queue
# groups (store and ack nothing), and a raw tidwall/wal WriteBatch(256) +
# fsync loop on the same disk (wal's BenchmarkRawTidwallBatch256). Then edgeq
# at a trickle of 1,000 msg/s: fsyncs and commit rounds per second, server CPU
# per message. Last, the ordered workload through nats.go's jetstream package
# (`edgeq bench --mode jetstream`): edgeq's one pull consumer against
# nats-server's unordered pull consumer and its ordered workaround (8
# partition subjects, MaxAckPending 1). Not run by CI.
# Usage: scripts/bench-peers.sh [--msgs N]     (make bench-peers)
set -euo pipefail
cd "$(dirname "$0")/.."
msgs=200000
while [ $# -gt 0 ]; do
  case "$1" in
    --msgs) msgs=$2; shift 2 ;;
    *) echo "usage: $0 [--msgs N]" >&2; exit 2 ;;
  esac
done
command -v nats-server >/dev/null || { echo "needs nats-server (apt-get install nats-server)" >&2; exit 1; }
make -s build >/dev/null
bin=./bin/edgeq
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
common=(--msgs "$msgs" --devices 1000 --size 150 --workers 4 --window 256 --json)
printf 'groups:\n  - {subject: telemetry.>, queue: bench, deliver: all}\n' >"$tmp/edgeq.yaml"

srv_pid=""
# A process's CPU seconds (user + system) and peak RSS (KiB).
cpu() { awk '{print ($14+$15)/100}' "/proc/$1/stat"; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }

start_edgeq() { # durability
  ep=$(port); hp=$(port)
  rm -rf "$tmp/data"
  EDGEQ_WAL_DURABILITY=$1 $bin run --config "$tmp/edgeq.yaml" --data "$tmp/data" \
    --nats 127.0.0.1:$ep --http 127.0.0.1:$hp --log-level warn &
  srv_pid=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:$hp/readyz >/dev/null && break; sleep 0.1; done
  url=nats://127.0.0.1:$ep
}
start_nats() { # extra flags
  np=$(port)
  rm -rf "$tmp/js"
  nats-server -a 127.0.0.1 -p $np "$@" >"$tmp/nats.log" 2>&1 &
  srv_pid=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$np) 2>/dev/null && break; sleep 0.1; done
  url=nats://127.0.0.1:$np
}
stop_server() { kill "$srv_pid"; wait "$srv_pid" 2>/dev/null || true; }

# run NAME START... -- BENCHFLAGS...: one fresh server, one bench, its result
# with the server's CPU seconds and peak RSS added.
run() {
  local name=$1; shift
  local start=()
  while [ "$1" != "--" ]; do start+=("$1"); shift; done
  shift
  "${start[@]}"
  local c0; c0=$(cpu "$srv_pid")
  local out; out=$($bin bench --server "$url" "${common[@]}" "$@")
  local c1; c1=$(cpu "$srv_pid")
  local rss; rss=$(hwm "$srv_pid")
  stop_server
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["cpu_s"]=float(sys.argv[2])-float(sys.argv[3]); r["rss_kib"]=int(sys.argv[4]); print(json.dumps(r))' \
    "$out" "$c1" "$c0" "$rss" >"$tmp/$name.json"
  echo "done: $name" >&2
}

run eq1      start_edgeq interval                  -- --mode durable --publishers 1 --backlog
run js1      start_nats -js -sd "$tmp/js"          -- --mode jspush --publishers 1 --backlog
run eq4      start_edgeq interval                  -- --mode durable --publishers 4 --backlog
run js4      start_nats -js -sd "$tmp/js"          -- --mode jspush --publishers 4 --backlog
run always1  start_edgeq always                    -- --mode durable --publishers 1 --backlog
run none1    start_edgeq none                      -- --mode durable --publishers 1 --backlog
run core4    start_nats                            -- --mode core --publishers 4

# The raw floor: tidwall/wal WriteBatch(256) + fsync on the same disk.
TMPDIR=$tmp go test -run '^$' -bench RawTidwallBatch256 -benchtime "${msgs}x" -count 1 ./wal \
  | awk '/records\/s/ {for (i=1;i<=NF;i++) if ($(i+1)=="records/s") print $i}' >"$tmp/raw.txt"
echo "done: raw" >&2

# A trickle: 1,000 msg/s for 10 s through the default durability.
metric() { curl -sf http://127.0.0.1:$hp/metrics | awk -v m="$1" '$1==m {print $2}'; }
start_edgeq interval
f0=$(metric edgeq_wal_fsyncs_total); r0=$(metric edgeq_wal_commit_rounds_total); c0=$(cpu "$srv_pid"); t0=$(date +%s.%N)
$bin bench --server "$url" --msgs 10000 --devices 1000 --size 150 --workers 4 --publishers 4 --window 256 --rate 1000 --json >"$tmp/trickle.json"
f1=$(metric edgeq_wal_fsyncs_total); r1=$(metric edgeq_wal_commit_rounds_total); c1=$(cpu "$srv_pid"); t1=$(date +%s.%N)
stop_server
printf '{"fsyncs": %s, "rounds": %s, "cpu_s": %s, "secs": %s}\n' \
  "$((f1 - f0))" "$((r1 - r0))" "$(awk -v a="$c1" -v b="$c0" 'BEGIN {print a - b}')" \
  "$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}')" >"$tmp/trickle-srv.json"

# The ordered workload through the jetstream package, both servers at once
# (the bench reads each one's CPU from /proc).
start_edgeq interval
eq_pid=$srv_pid eq_url=$url
start_nats -js -sd "$tmp/js"
$bin bench --mode jetstream --server "$eq_url" --peer "$url" --msgs "$msgs" --devices 1000 --size 150 \
  --publishers 4 --workers 4 --window 256 >"$tmp/ordered.txt"
stop_server
srv_pid=$eq_pid stop_server
echo "done: ordered" >&2

python3 - "$tmp" "$msgs" <<'PY'
import json, sys, os
tmp, msgs = sys.argv[1], int(sys.argv[2])
r = {n: json.load(open(os.path.join(tmp, n + ".json"))) for n in
     ["eq1", "js1", "eq4", "js4", "always1", "none1", "core4", "trickle", "trickle-srv"]}
raw = float(open(os.path.join(tmp, "raw.txt")).read().split()[0])
print(f"{msgs} msgs x 150 B, 1000 devices, window 256 per publisher; then 4 workers drain the backlog")
print(f"{'':44s} {'pub/s':>9s} {'deliv/s':>9s} {'srv CPU us/msg':>15s} {'peak RSS MiB':>13s}")
def row(name, x, deliver=True):
    d = f"{x['deliver_per_sec']:9.0f}" if deliver else f"{'':9s}"
    print(f"{name:44s} {x['publish_per_sec']:9.0f} {d} {x['cpu_s']*1e6/x['msgs']:15.1f} {x['rss_kib']/1024:13.1f}")
row("edgeq interval (default), 1 publisher", r["eq1"])
row("JetStream file store, 1 publisher", r["js1"])
row("edgeq interval, 4 publishers", r["eq4"])
row("JetStream file store, 4 publishers", r["js4"])
row("edgeq always, 1 publisher", r["always1"])
row("edgeq none, 1 publisher", r["none1"])
row("nats-server core queue group (no store)", r["core4"])
print(f"{'raw tidwall/wal WriteBatch(256) + fsync':44s} {raw:9.0f}")
def ratio(a, b, what, goal=None):
    g = f"   (goal >= {goal}x)" if goal else ""
    print(f"  {what:66s} {a / b:6.2f}x{g}")
print("ratios")
ratio(r["eq1"]["publish_per_sec"], r["js1"]["publish_per_sec"], "publish, 1 publisher: edgeq interval / JetStream PublishAsync", 2)
ratio(r["eq4"]["publish_per_sec"], r["js4"]["publish_per_sec"], "publish, 4 publishers: edgeq interval / JetStream PublishAsync")
ratio(r["eq4"]["publish_per_sec"], raw, "publish, 4 publishers: edgeq interval / raw tidwall WriteBatch+fsync", 0.5)
ratio(r["always1"]["publish_per_sec"], r["js1"]["publish_per_sec"], "publish, 1 publisher: edgeq always / JetStream")
ratio(r["none1"]["publish_per_sec"], r["js1"]["publish_per_sec"], "publish, 1 publisher: edgeq none / JetStream")
ratio(r["eq1"]["deliver_per_sec"], r["js1"]["deliver_per_sec"], "ordered acked delivery, 4 workers: edgeq / JetStream push group", 1.5)
ratio(r["eq1"]["deliver_per_sec"], r["core4"]["deliver_per_sec"], "ordered acked delivery: edgeq / core NATS queue group", 0.5)
t, s = r["trickle"], r["trickle-srv"]
print(f"trickle, 1000 msg/s for 10 s (interval, defaults): {s['fsyncs']/s['secs']:.0f} fsyncs/s (goal <= 100), "
      f"{s['rounds']/s['secs']:.0f} commit rounds/s, {s['cpu_s']*1e6/t['msgs']:.0f} us server CPU per msg, "
      f"publish->delivery p50 {t['p50_ms']:.2f} ms p99 {t['p99_ms']:.2f} ms")
PY
cat "$tmp/ordered.txt"
