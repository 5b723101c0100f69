#!/usr/bin/env bash
# Prints the Debian version for a build version (what `git describe --tags
# --always --dirty` gives; the Makefile's VERSION). Usage: scripts/deb-version.sh VERSION
#   v1.2.3              → 1:1.2.3
#   v1.2.3-rc1          → 1:1.2.3~rc1               (before 1.2.3)
#   v1.2.3-4-gabc1234   → 1:1.2.3+git<date>.<time>.abc1234  (after 1.2.3)
#   abc1234[-dirty], dev → 1:<base>~git<date>.<time>.abc1234[.dirty]  (before <base>)
# <base> is baseVersion in cmd/edgeq/version.go (the release being worked
# on); <date>.<time> is the commit time of HEAD in UTC, so two untagged builds
# sort in commit order. The epoch 1: exists because the first packages were
# versioned by the bare commit (7a76945), which sorts above any 1.0.0: with
# it every version from here on is an upgrade over those.
set -euo pipefail
v=${1:?usage: deb-version.sh VERSION}
cd "$(dirname "$0")/.."
when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d.%H%M%S 2>/dev/null || true)
rev=$(git rev-parse --short=7 HEAD 2>/dev/null || true)
dirty=
case $v in *-dirty) dirty=.dirty; v=${v%-dirty} ;; esac
semver='^v?([0-9]+\.[0-9]+\.[0-9]+)(-([0-9A-Za-z.]+))?$'
described='^v?([0-9]+\.[0-9]+\.[0-9]+)(-[0-9A-Za-z.]+)?-([0-9]+)-g([0-9a-f]+)$'
if [[ $v =~ $described ]]; then
  out="${BASH_REMATCH[1]}${BASH_REMATCH[2]:+~${BASH_REMATCH[2]#-}}+git${when:-0}.${BASH_REMATCH[4]}"
elif [[ $v =~ $semver ]]; then
  out="${BASH_REMATCH[1]}${BASH_REMATCH[3]:+~${BASH_REMATCH[3]}}"
  dirty=${dirty:++dirty}
else
  base=$(sed -n 's/^const baseVersion = "\(.*\)"$/\1/p' cmd/edgeq/version.go)
  [[ $v =~ ^[0-9a-f]{7,40}$ ]] && rev=$v
  out="${base:?no baseVersion in cmd/edgeq/version.go}~git${when:-0}.${rev:-unknown}"
fi
echo "1:${out}${dirty}"
