#!/usr/bin/env bash
# Firmware tests: the linux/arm64 and linux/arm (v7) builds run under
# qemu-user (Debian's qemu-user-static) on this machine:
#   - the storage, queue-group core and groups' tests on each architecture: hash
#     vectors, codec, torn/garbage tails, kill -9 recovery, the randomized
#     queue interleavings (on arm v7 this is where an unaligned 64-bit atomic
#     would fault);
#   - the node binary itself against a real mosquitto and pseudo-terminal
#     serial sensors, with NATS workers on the host: telemetry flows end to
#     end, and kill -9 of the node loses nothing acknowledged;
# and checks the footprint budgets (stripped arm64 binary <= 14 MiB; native
# RSS idle <= 20 MB and <= 48 MB under 5,000 msg/s ingest with one group).
# Run with `make firmware-test` (it builds the cross binaries first).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0
bin=bin
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
need() {
  command -v "$1" >/dev/null && return
  if [ "${CI:-}" = true ]; then fail "$1 is not installed (CI=true)"; fi
  echo "SKIP: $1 is not installed"; exit 0
}
need qemu-aarch64-static
need qemu-arm-static
need mosquitto

report=()
size=$(stat -c %s $bin/edgeq-linux-arm64)
report+=("arm64 binary: $size bytes ($(awk "BEGIN{printf \"%.2f\", $size/1048576}") MiB, budget 14 MiB)")
[ "$size" -le $((14 * 1024 * 1024)) ] || fail "arm64 binary is $size bytes, over 14 MiB"
size7=$(stat -c %s $bin/edgeq-linux-armv7)
report+=("armv7 binary: $size7 bytes ($(awk "BEGIN{printf \"%.2f\", $size7/1048576}") MiB)")

for arch in arm64 armv7; do
  case $arch in
    arm64) goarch=arm64; goarm=; qemu=qemu-aarch64-static ;;
    armv7) goarch=arm; goarm=7; qemu=qemu-arm-static ;;
  esac
  echo "== $arch: core tests under $qemu"
  for pkg in wal gateway/queue gateway/groups internal/hist; do
    GOOS=linux GOARCH=$goarch GOARM=$goarm go test -c -o "$tmp/$(basename $pkg)-$arch.test" ./$pkg
  done
  start=$(date +%s)
  # Test binaries run in their package directory (testdata), as go test does.
  (cd wal && EDGEQ_TEST_EXEC_WRAPPER=$qemu EDGEQ_CRASH_ROUNDS=5 $qemu "$tmp/wal-$arch.test" -test.count=1 \
    -test.run 'TestPartitionVectors|TestRecordRoundTrip|TestDecodeAllocations|TestAppendReadRoundTrip|TestSequencesSurviveReopen|TestGarbageTails|TestFlippedByteInside|TestMoveToHotPartitionAndBack|TestCrashKill9|TestRetentionRespectsCommittedFloor|TestTornTail|TestCheckAndRepairCommand')
  (cd gateway/queue && $qemu "$tmp/queue-$arch.test" -test.count=1 -test.short)
  (cd gateway/groups && $qemu "$tmp/groups-$arch.test" -test.count=1)
  (cd internal/hist && $qemu "$tmp/hist-$arch.test" -test.count=1)
  report+=("$arch core tests under qemu: passed in $(( $(date +%s) - start ))s")

  echo "== $arch: the node under $qemu, clients on the host"
  start=$(date +%s)
  EDGEQ_E2E_BIN=$PWD/$bin/edgeq-linux-$arch EDGEQ_E2E_WRAPPER=$qemu go test -count=1 -timeout 15m ./e2e \
    -run 'TestQueueGroupManyWorkers|TestMQTTToWorker|TestSerialToWorker|TestKill9UnderLoad|TestSigtermDrainNoRedelivery|TestAckTokensAndRedelivery'
  report+=("$arch node end to end under qemu (queue groups, mosquitto, pty serial, kill -9, drain): passed in $(( $(date +%s) - start ))s")
done

echo "== footprint (native)"
go build -o "$tmp/edgeq" ./cmd/edgeq
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
np=$(port); hp=$(port)
"$tmp/edgeq" run --data "$tmp/data" --nats 127.0.0.1:$np --http 127.0.0.1:$hp --log-level warn &
node=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:$hp/readyz >/dev/null && break; sleep 0.1; done
sleep 5
idle=$(awk '/VmRSS/{print $2}' /proc/$node/status)
report+=("idle RSS: $idle kB (budget 20 MB)")
[ "$idle" -le 20000 ] || fail "idle RSS $idle kB over 20 MB"
"$tmp/edgeq" bench --server nats://127.0.0.1:$np --mode durable --msgs 50000 --rate 5000 --workers 2 --queue fw >"$tmp/bench.txt"
peak=$(awk '/VmHWM/{print $2}' /proc/$node/status)
report+=("peak RSS at 5,000 msg/s with one queue group: $peak kB (budget 48 MB); bench: $(grep -E 'delivered|latency' "$tmp/bench.txt" | tr -s ' ' | tr '\n' ';')")
[ "$peak" -le 48000 ] || fail "RSS $peak kB over 48 MB under load"
kill -TERM $node; wait $node || true

echo
echo "firmware tests passed:"
printf '  %s\n' "${report[@]}"
