#!/usr/bin/env bash
# Draws the samples of `make soak` (bin/soak.csv) as a PNG: RSS and
# goroutines over time. Needs gnuplot (Debian: gnuplot-nox).
set -euo pipefail
csv="${1:-bin/soak.csv}"
out="${2:-${csv%.csv}.png}"
command -v gnuplot >/dev/null || { echo "install gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
gnuplot <<GP
set datafile separator ","
set terminal png size 900,450
set output "$out"
set title "edgeq soak: RSS and goroutines"
set xlabel "minutes"
set ylabel "RSS (MiB)"
set y2label "goroutines / open fds"
set y2tics
set ytics nomirror
set key top left
plot "$csv" skip 1 using (\$1/60):(\$2/1048576) with lines lw 2 title "RSS", \
     "" skip 1 using (\$1/60):3 axes x1y2 with lines title "goroutines", \
     "" skip 1 using (\$1/60):4 axes x1y2 with lines title "open fds"
GP
echo "$out"
