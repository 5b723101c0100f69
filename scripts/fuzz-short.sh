#!/usr/bin/env bash
# Runs every fuzz target of the module briefly (default 30000 executions
# each). The seed corpus under testdata/fuzz runs with the ordinary tests too.
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report a spurious "context deadline exceeded" at the deadline on a loaded
# machine (golang/go#75804, fixed in Go 1.27).
set -euo pipefail
fuzztime=${1:-30000x}
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | sed 's/^func //'); do
    echo "fuzz $pkg $target ($fuzztime)"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" -timeout=5m "$pkg" >/tmp/fuzz-$$.log 2>&1 || { cat /tmp/fuzz-$$.log; exit 1; }
  done
done
rm -f /tmp/fuzz-$$.log
