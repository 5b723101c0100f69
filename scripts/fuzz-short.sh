#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time (default 10s each).
# The seed corpus under testdata/fuzz runs with the ordinary tests too.
set -euo pipefail
fuzztime=${1:-10s}
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | sed 's/^func //'); do
    echo "fuzz $pkg $target ($fuzztime)"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" >/tmp/fuzz-$$.log 2>&1 || { cat /tmp/fuzz-$$.log; exit 1; }
  done
done
rm -f /tmp/fuzz-$$.log
