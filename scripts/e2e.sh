#!/usr/bin/env bash
# The e2e package as two test processes side by side (make e2e; make test
# runs it beside the other packages' race tests and the fuzz runs).
#
# Most e2e time is waiting (ack waits, failure timeouts, a hot device's
# paced drain, power cuts and restarts), not CPU, so two processes halve
# the wall time on two cores. The package's test binary is built once (with
# -race, as make unit builds the others). Every test runs in exactly one
# process: the first takes the tests named in SERIAL below (the FUSE
# power-cut mount's tests, which must not run side by side, the paced
# hot-device scenarios and the two one-minute uplink outages, for balance),
# the second every other test (-test.skip of the same
# pattern), so a new test lands in the second. Each process hands out
# loopback ports from its own slice of the range (EDGEQ_E2E_PORTS=K/N) and
# names its network namespaces after its pid.
#
# Extra arguments go to both processes (e.g. -test.v).
set -euo pipefail
cd "$(dirname "$0")/.."
SERIAL='^(TestPowerCut|TestPowerCutDurabilityNone|TestDiskFaults|TestDiskWatermark|TestHotDeviceIsolationThroughCoolDown|TestHotDeviceWindowShareWithoutIsolation|TestUplinkOutageFillsLog|TestUplinkNATSExactlyOnceLongOutage)$'
GO=${GO:-go}
tmp=$(mktemp -d /tmp/edgeq-e2e.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

start=$(date +%s)
CGO_ENABLED=1 $GO test -c -race -vet=off -o "$tmp/e2e.test" ./e2e
# The node binary each process builds in TestMain comes from the build
# cache after this (two cold builds side by side would do the work twice).
$GO build -o "$tmp/edgeq" ./cmd/edgeq
echo "e2e: built in $(( $(date +%s) - start ))s"

run() { # run K ARGS...: one test process, output in $tmp/K.log
  local k=$1; shift
  (cd e2e && EDGEQ_E2E_PORTS="$k/2" "$tmp/e2e.test" -test.count=1 -test.timeout=45m "$@" > "$tmp/$k.log" 2>&1)
}
run 0 -test.run "$SERIAL" "$@" & pids+=($!)
run 1 -test.skip "$SERIAL" "$@" & pids+=($!)
rc=0
for k in 0 1; do
  if wait "${pids[$k]}"; then status=ok; else status=FAIL; rc=1; fi
  echo "== e2e process $k ($([ $k = 0 ] && echo "the tests in SERIAL" || echo "every other test")): $status"
  cat "$tmp/$k.log"
done
pids=()
echo "e2e: done in $(( $(date +%s) - start ))s"
exit $rc
