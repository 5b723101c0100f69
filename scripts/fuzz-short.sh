#!/usr/bin/env bash
# Runs every fuzz target of the module briefly (default 30000 executions
# each). The seed corpus under testdata/fuzz runs with the ordinary tests too.
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report a spurious "context deadline exceeded" at the deadline on a loaded
# machine (golang/go#75804, fixed in Go 1.27).
#
# Each package's fuzz-instrumented test binary is built once (go test -c
# -fuzz) and every target of the package runs from it, in the package
# directory (testdata/fuzz is read there and a failing input is written
# there) with go test's own fuzz cache; one `go test -fuzz` per target would
# link and vet the package again for each one.
set -euo pipefail
fuzztime=${1:-30000x}
cd "$(dirname "$0")/.."
root=$PWD
module=$(go list -m)
cache="$(go env GOCACHE)/fuzz"
tmp=$(mktemp -d)
# The targets' own temp files go to a tmpfs when there is one: FuzzRepairTail
# writes and fsyncs a segment per execution (about 200 a second on this disk,
# thousands on a tmpfs), and what the targets check is bytes, not durability.
runtmp=$(mktemp -d -p /dev/shm edgeq-fuzz.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp" "$runtmp"' EXIT
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | xargs -n1 dirname | sort -u | while read -r dir; do
  dir=${dir#./}
  targets=$(grep -ohE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' "$dir"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/' | sort)
  bin="$tmp/$(echo "$dir" | tr / _).test"
  start=$SECONDS
  go test -c -fuzz=. -o "$bin" "./$dir" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
  echo "fuzz: built ./$dir in $((SECONDS - start))s"
  for target in $targets; do
    start=$SECONDS
    (cd "$root/$dir" && TMPDIR=$runtmp "$bin" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$fuzztime" \
      -test.timeout=5m -test.fuzzcachedir="$cache/$module/$dir") >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    echo "fuzz ./$dir $target ($fuzztime): $((SECONDS - start))s"
  done
done
