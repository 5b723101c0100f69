#!/usr/bin/env bash
# The light-load table, side by side in one run with the same client code
# (`edgeq bench`): RATE msg/s × 150 B over 1,000 devices for SECS seconds,
# 4 publishers (pub-acks, window 256) and 4 acking workers in one queue group.
# Servers: edgeq at its defaults (durability interval), the newest nats-server
# built from the module proxy (JetStream file store at its defaults, and with
# `sync_interval: always`), and, with --base BIN, an older edgeq binary (e.g.
# main's) for a before/after. Then edgeq with 100 msg/s that nobody waits for
# (publishes without a reply subject, as a serial line ingests): with the
# workers reading all along (a reader waiting for records is a waiter: it
# starts rounds), and with nobody reading until the last publish (the
# workers then drain the backlog: --backlog).
#
# Per server: CPU per message (utime+stime from /proc/PID/stat), bytes the
# process made the kernel write per second (/proc/PID/io write_bytes, page
# granular), fsyncs per second (fsync/fdatasync/syncfs/sync_file_range counted
# by strace --seccomp-bpf, which stops the process only on those calls; for
# edgeq also edgeq_wal_fsyncs_total), publish→delivery p50/p99.
# Not run by CI. Needs strace and network access to the Go module proxy once
# (nats-server is built in a throw-away module under ~/.cache/edgeq-bench,
# outside the repository).
# Usage: scripts/bench-light.sh [--secs N] [--rate N] [--base BIN]   (make bench-light)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=20 rate=1000 base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) secs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    *) echo "usage: $0 [--secs N] [--rate N] [--base BIN]" >&2; exit 2 ;;
  esac
done
command -v strace >/dev/null || { echo "needs strace (apt-get install strace)" >&2; exit 1; }
make -s build >/dev/null
bin=$PWD/bin/edgeq

cache=${EDGEQ_BENCH_CACHE:-$HOME/.cache/edgeq-bench}
nats=$cache/nats-server
if [ ! -x "$nats" ]; then
  echo "building the newest nats-server from the module proxy in $cache/nats-build" >&2
  mkdir -p "$cache/nats-build"
  (cd "$cache/nats-build" &&
    { [ -f go.mod ] || GOWORK=off go mod init natsbuild >/dev/null 2>&1; } &&
    GOWORK=off GOFLAGS=-mod=mod go get github.com/nats-io/nats-server/v2@latest &&
    GOWORK=off CGO_ENABLED=0 go build -o "$nats" github.com/nats-io/nats-server/v2)
fi
natsver=$("$nats" --version | awk '{print $NF}')

tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tck=$(getconf CLK_TCK)
cpu() { awk -v t="$tck" '{print ($14+$15)/t}' "/proc/$1/stat"; }
wbytes() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }
printf 'groups:\n  - {subject: telemetry.>, queue: bench, deliver: all}\n' >"$tmp/edgeq.yaml"

srv_pid="" tracer="" hp=""
# traced NAME CMD...: start CMD under strace (fsync-family calls only), set
# srv_pid to the server's pid.
traced() {
  local name=$1; shift
  strace -f -qq --seccomp-bpf -ttt -e trace=fsync,fdatasync,syncfs,sync_file_range -o "$tmp/$name.strace" "$@" \
    >"$tmp/$name.log" 2>&1 &
  tracer=$!
  # The server, not whatever else strace may have started meanwhile.
  local comm; comm=$(basename "$1" | cut -c1-15)
  for _ in $(seq 100); do
    srv_pid=$(pgrep -P "$tracer" -x "$comm" | head -1 || true)
    [ -n "$srv_pid" ] && break
    sleep 0.05
  done
}
start_edgeq() { # NAME BIN
  local ep; ep=$(port); hp=$(port)
  rm -rf "$tmp/data"
  traced "$1" "$2" run --config "$tmp/edgeq.yaml" --data "$tmp/data" --nats 127.0.0.1:$ep --http 127.0.0.1:$hp --log-level warn
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$hp/readyz" >/dev/null && break; sleep 0.1; done
  url=nats://127.0.0.1:$ep
}
start_nats() { # NAME SYNC
  local np; np=$(port); hp=""
  rm -rf "$tmp/js"
  local sync=""
  [ "$2" = always ] && sync="sync_interval: always"
  printf 'listen: 127.0.0.1:%s\njetstream { store_dir: "%s"\n %s }\n' "$np" "$tmp/js" "$sync" >"$tmp/$1.conf"
  traced "$1" "$nats" -c "$tmp/$1.conf"
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$np) 2>/dev/null && break; sleep 0.1; done
  url=nats://127.0.0.1:$np
}
metric() { [ -n "$hp" ] && curl -sf "http://127.0.0.1:$hp/metrics" | awk -v m="$1" '$1==m {print $2}' || echo 0; }
stop_server() { kill "$srv_pid"; wait "$tracer" 2>/dev/null || true; }

# measure NAME MODE RATE [BENCH FLAGS...]: one bench against the running
# server; its figures in $tmp/NAME.json.
measure() {
  local name=$1 mode=$2 r=$3
  shift 3
  local msgs=$((r * secs))
  local c0 w0 f0 t0 c1 w1 f1 t1 out
  c0=$(cpu "$srv_pid"); w0=$(wbytes "$srv_pid"); f0=$(metric edgeq_wal_fsyncs_total); t0=$(date +%s.%N)
  out=$("$bin" bench --server "$url" --mode "$mode" --msgs "$msgs" --devices 1000 --size 150 --publishers 4 \
    --workers 4 --window 256 --rate "$r" --json "$@")
  c1=$(cpu "$srv_pid"); w1=$(wbytes "$srv_pid"); f1=$(metric edgeq_wal_fsyncs_total); t1=$(date +%s.%N)
  stop_server
  local traced
  traced=$(awk -v a="$t0" -v b="$t1" '$2+0 >= a && $2+0 <= b && $0 !~ /resumed>/ {n++} END {print n+0}' "$tmp/$name.strace")
  python3 - "$out" "$name" "$c0" "$c1" "$w0" "$w1" "${f0:-0}" "${f1:-0}" "$t0" "$t1" "$traced" >"$tmp/$name.json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
name, c0, c1, w0, w1, f0, f1, t0, t1, traced = sys.argv[2:]
secs = float(t1) - float(t0)
r.update(name=name, secs=secs, cpu_s=float(c1) - float(c0), write_bytes=int(w1) - int(w0),
         metric_fsyncs=float(f1) - float(f0), traced_fsyncs=int(traced))
print(json.dumps(r))
PY
  echo "done: $name" >&2
}

runs=(edgeq)
start_edgeq edgeq "$bin"; measure edgeq durable "$rate"
if [ -n "$base" ]; then
  runs+=(base)
  start_edgeq base "$base"; measure base durable "$rate"
fi
start_nats js default; measure js jspush "$rate"
start_nats jsalways always; measure jsalways jspush "$rate"
runs+=(js jsalways)
start_edgeq nowait "$bin"; measure nowait nowait 100
if [ -n "$base" ]; then
  start_edgeq basenowait "$base"; measure basenowait nowait 100
fi
start_edgeq nowaitbacklog "$bin"; measure nowaitbacklog nowait 100 --backlog
if [ -n "$base" ]; then
  start_edgeq basenowaitbacklog "$base"; measure basenowaitbacklog nowait 100 --backlog
fi

python3 - "$tmp" "$rate" "$secs" "$natsver" "$base" <<'PY'
import json, os, sys
tmp, rate, secs, natsver, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def load(n):
    p = os.path.join(tmp, n + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
cols = [("edgeq (this build), interval", load("edgeq"))]
if base:
    cols.append((f"edgeq {os.path.basename(base)}, interval", load("base")))
cols += [(f"nats-server {natsver} JetStream default", load("js")),
         (f"nats-server {natsver} sync_interval: always", load("jsalways"))]
payload = rate * 150
print(f"{rate} msg/s x 150 B over 1,000 devices, {secs} s, 4 publishers (pub-acks, window 256), 4 acking workers")
w = 44
print(f"{'':34s}" + "".join(f"{n[:w]:>{w}s}" for n, _ in cols))
def row(label, f):
    print(f"{label:34s}" + "".join(f"{f(x):>{w}s}" for _, x in cols))
row("server CPU per message", lambda x: f"{x['cpu_s'] * 1e6 / x['msgs']:.0f} us")
row("bytes written per second", lambda x: f"{x['write_bytes'] / x['secs'] / 1e6:.3f} MB/s ({x['write_bytes'] / x['secs'] / payload:.1f}x payload)")
row("fsyncs per second (strace)", lambda x: f"{x['traced_fsyncs'] / x['secs']:.0f}")
row("fsyncs per second (metric)", lambda x: f"{x['metric_fsyncs'] / x['secs']:.0f}" if x["name"] in ("edgeq", "base") else "-")
row("publish -> delivery p50 / p99", lambda x: f"{x['p50_ms']:.2f} / {x['p99_ms']:.2f} ms")
for n, label in (("nowait", "edgeq (this build)"), ("basenowait", f"edgeq {os.path.basename(base)}"),
                 ("nowaitbacklog", "edgeq (this build), nobody reading until the end"),
                 ("basenowaitbacklog", f"edgeq {os.path.basename(base)}, nobody reading until the end")):
    x = load(n)
    if x:
        print(f"100 msg/s nobody waits for, {label}: {x['traced_fsyncs'] / x['secs']:.1f} fsyncs/s, "
              f"{x['write_bytes'] / x['secs'] / 15000:.1f}x payload written, "
              f"p50 / p99 {x['p50_ms']:.1f} / {x['p99_ms']:.1f} ms, {x['cpu_s'] * 1e6 / x['msgs']:.0f} us CPU per message")
PY
