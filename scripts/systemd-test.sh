#!/usr/bin/env bash
# Boots an edgeq .deb under a real systemd, as a gateway image would run it.
# Usage (root): scripts/systemd-test.sh edgeq_<version>_amd64.deb
#        scripts/systemd-test.sh --rootfs   (only build the cached rootfs;
#        CI starts it at once, beside the tests, since debootstrap waits on
#        the network and the disk more than on the CPU)
# (make systemd-test builds the amd64 package and runs this).
#
# A minimal Debian 12 (debootstrap --variant=minbase from the mirror this
# machine's apt uses; the rootfs tarball is cached in $EDGEQ_CACHE_DIR,
# default ~/.cache/edgeq) gets the package the way images are built, in a
# chroot with no systemd running, then boots with `systemd-nspawn -b` (unified
# cgroups as on Raspberry Pi OS bookworm, a private network with only
# loopback) and is checked: enabled, active and ready, runs as edgeq without
# capabilities under seccomp, config 0640 root:edgeq, publish and consume,
# metrics, a good reload and a refused one (which must fail), serial ports
# that appear after start (ttyUSB, ttyACM, ttyAMA, ttyS major numbers: the
# device cgroup must admit them, so the open fails with ENXIO, as for a
# node with no driver behind it, never EPERM), upgrade restarts, a disable
# survives an upgrade, stop drains, no seccomp kill (a
# SystemCallErrorNumber=kill drop-in), systemd-analyze security exposure
# <= 2.0, and purge leaves nothing behind (telemetry in /var/lib/edgeq
# stays by design). Every check runs; it exits 1 if any failed.
#
# With CI=true a missing tool fails; otherwise the test is skipped.
set -euo pipefail
rootfs_only=
if [ "${1:-}" = --rootfs ]; then rootfs_only=1; else deb=$(realpath "${1:?usage: systemd-test.sh DEB | --rootfs}"); fi
here=$(cd "$(dirname "$0")/.." && pwd)
suite=bookworm
packages=systemd,systemd-sysv,dbus,iproute2,curl,ca-certificates,procps,adduser

missing() {
  if [ "${CI:-}" = true ]; then echo "systemd-test: FAIL: $1 (CI=true)" >&2; exit 1; fi
  echo "systemd-test: SKIP: $1" >&2; exit 0
}
[ "$(id -u)" -eq 0 ] || missing "needs root (debootstrap, chroot, systemd-nspawn)"
for tool in debootstrap systemd-nspawn nsenter dpkg-deb curl; do
  command -v "$tool" >/dev/null || missing "$tool is not installed (scripts/install-test-deps.sh installs it)"
done
[ -d /sys/fs/cgroup/unified ] || [ -f /sys/fs/cgroup/cgroup.controllers ] || missing "no cgroup v2 hierarchy"

start=$(date +%s)
failures=0
pass() { echo "ok   $*"; }
quiet() { # runs a command; its output is shown only if it fails
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || sed 's/^/     /' <<<"$out"
  return "$rc"
}
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() { # check "what" command...: the command's success is the check
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

work=$(mktemp -d /tmp/edgeq-systemd-test.XXXXXX)
name=edgeq-st-$$
nspawn_pid= leader=
cleanup() {
  set +e
  if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
    kill -TERM "$nspawn_pid" # nspawn powers the container off
    for _ in $(seq 60); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$nspawn_pid" 2>/dev/null
    wait "$nspawn_pid" 2>/dev/null
  fi
  for h in systemd unified; do
    [ -d "/sys/fs/cgroup/$h/$name" ] && find "/sys/fs/cgroup/$h/$name" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

# --- the root file system: debootstrap once, then from the cache -----------
mirror=$(sed -n -e 's/^URIs: *\(http[^ ]*\/debian\/\?\)$/\1/p' -e 's/^deb  *\(\[[^]]*\] *\)\?\(http[^ ]*\/debian\/\?\) .*/\2/p' \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 || true)
[ -n "$mirror" ] || missing "no Debian mirror in /etc/apt/sources.list*"
cache=${EDGEQ_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/edgeq}
key=$(printf '%s %s %s' "$suite" "$packages" "$mirror" | sha256sum | cut -c1-12)
tarball=$cache/rootfs-$suite-minbase-$key.tar
rootfs=$work/rootfs
if [ ! -f "$tarball" ]; then
  echo "systemd-test: debootstrap --variant=minbase $suite from $mirror (cached in $tarball)"
  t0=$(date +%s)
  if ! debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -20 "$work/debootstrap.log" >&2
    echo "systemd-test: FAIL: debootstrap" >&2; exit 1
  fi
  mkdir -p "$cache"
  tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  echo "systemd-test: debootstrap took $(( $(date +%s) - t0 ))s"
  [ -z "$rootfs_only" ] || exit 0
elif [ -n "$rootfs_only" ]; then
  echo "systemd-test: rootfs cached in $tarball"; exit 0
else
  mkdir -p "$rootfs"
  tar -C "$rootfs" -xf "$tarball"
fi

# --- install as an image build does: chroot, no systemd running -------------
cp "$deb" "$rootfs/root/edgeq.deb"
if chroot "$rootfs" dpkg -i /root/edgeq.deb >"$work/install.log" 2>&1; then
  pass "chroot install: dpkg -i"
else
  fail "chroot install: dpkg -i"; cat "$work/install.log"
fi
if grep -qi 'warn\|can.t be accessed' "$work/install.log"; then
  fail "chroot install prints no warning:"; sed 's/^/     /' "$work/install.log"
else
  pass "chroot install prints no warning"
fi
check "chroot install: enabled (multi-user.target.wants link)" \
  test -L "$rootfs/etc/systemd/system/multi-user.target.wants/edgeq.service"
ver=$(chroot "$rootfs" dpkg-query -W -f '${Version}' edgeq)
echo "     installed version $ver"

# The image builder's own settings: serial sensors on adapters that are not
# plugged in yet (their nodes appear after start), a Modbus RTU bus on one
# too, fast reopen; and a drop-in that turns a blocked system call into
# SIGSYS, so the test sees it (the shipped unit answers EPERM).
cat >>"$rootfs/etc/edgeq/edgeq.yaml" <<'YAML'

groups:
  - {subject: telemetry.sensor-1, queue: st}
  - {subject: telemetry.sensor-2, queue: st}

serial:
  - {name: usb, path: /dev/ttyUSB0, baud: 9600, format: line, reopen_min: 200ms, reopen_max: 1s}
  - {name: ama, path: /dev/ttyAMA0, baud: 9600, format: line, reopen_min: 200ms, reopen_max: 1s}
  - {name: uart, path: /dev/ttyS63, baud: 9600, format: line, reopen_min: 200ms, reopen_max: 1s}
  - {name: control, path: /dev/ttyX0, baud: 9600, format: line, reopen_min: 200ms, reopen_max: 1s}
modbus:
  - name: rtu
    rtu: {path: /dev/ttyACM0, baud: 9600}
    timeout: 200ms
    max_backoff: 1s
    reopen_min: 200ms
    reopen_max: 1s
    devices:
      - unit: 1
        device: meter-1
        interval: 1s
        registers:
          - {name: voltage, function: holding, address: 0, type: uint16}
YAML
cp "$rootfs/etc/edgeq/edgeq.yaml" "$work/good.yaml"
mkdir -p "$rootfs/etc/systemd/system/edgeq.service.d"
printf '[Service]\nSystemCallErrorNumber=kill\n' >"$rootfs/etc/systemd/system/edgeq.service.d/seccomp-kill.conf"
rm -f "$rootfs/root/edgeq.deb"

# --- boot ---------------------------------------------------------------------
# nspawn needs cgroups of its own on a host without systemd (and bpf for the
# container's systemd to enforce DeviceAllow).
for h in systemd unified; do
  [ -d "/sys/fs/cgroup/$h" ] && mkdir -p "/sys/fs/cgroup/$h/$name"
done
(
  for h in systemd unified; do
    [ -d "/sys/fs/cgroup/$h/$name" ] && echo "$BASHPID" >"/sys/fs/cgroup/$h/$name/cgroup.procs"
  done
  SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 exec systemd-nspawn -q -b -D "$rootfs" -M "$name" --keep-unit --register=no \
    --system-call-filter=bpf --private-network </dev/null >"$work/console.log" 2>&1
) &
nspawn_pid=$!
for _ in $(seq 120); do
  for p in $(pgrep -P "$nspawn_pid" 2>/dev/null); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = systemd ] && leader=$p
  done
  [ -n "$leader" ] && break
  kill -0 "$nspawn_pid" 2>/dev/null || break
  sleep 0.5
done
if [ -z "$leader" ]; then
  cat "$work/console.log" >&2; echo "systemd-test: FAIL: the container did not boot" >&2; exit 1
fi
ct() { nsenter -t "$leader" -m -u -i -n -p -C -- env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@" </dev/null; }
bus() { [ -S "$rootfs/run/systemd/private" ] || [ -S "/proc/$leader/root/run/systemd/private" ]; }
for _ in $(seq 600); do bus && break; sleep 0.5; done
state=$(ct timeout 300 systemctl is-system-running --wait || true)
echo "     booted: $state ($(( $(date +%s) - start ))s since the test started)"

# --- first boot -----------------------------------------------------------------
check "enabled at first boot" test "$(ct systemctl is-enabled edgeq || true)" = enabled
if [ "$(ct systemctl is-active edgeq || true)" = active ]; then
  pass "active at first boot"
else
  fail "active at first boot: $(ct systemctl is-active edgeq || true)"
  ct systemctl start edgeq || true # so that the remaining checks run
fi
ready() { ct curl -fsS -o /dev/null http://127.0.0.1:8222/readyz; }
wait_for() { # wait_for SECONDS command...
  local n=$(( $1 * 4 )); shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.25; done
  return 1
}
check "ready (/readyz)" wait_for 60 ready
pid=$(ct systemctl show -p MainPID --value edgeq)
check "runs as edgeq" test "$(ct ps -o user= -p "$pid" | tr -d ' ')" = edgeq
status=$(ct cat "/proc/$pid/status")
check "no capabilities" grep -q '^CapEff:[[:space:]]*0000000000000000$' <<<"$status"
check "seccomp filter on, no new privileges" bash -c 'grep -q "^Seccomp:[[:space:]]*2$" <<<"$1" && grep -q "^NoNewPrivs:[[:space:]]*1$" <<<"$1"' _ "$status"
check "config 0640 root:edgeq" test "$(ct stat -c '%a %U:%G' /etc/edgeq/edgeq.yaml)" = "640 root:edgeq"
check "state directory 0750 edgeq:edgeq" test "$(ct stat -c '%a %U:%G' /var/lib/edgeq)" = "750 edgeq:edgeq"

# --- publish and consume ---------------------------------------------------------
check "publish over NATS (edgeq pub)" quiet ct edgeq pub sensor-1 '{"t":21.5}'
check "publish over HTTP" ct curl -fsS -o /dev/null -X POST --data '{"t":22.5}' http://127.0.0.1:8222/v1/publish/sensor-2
got=$(ct timeout 30 edgeq sub --queue st --count 1 telemetry.sensor-1 2>&1 || true)
got+=$(ct timeout 30 edgeq sub --queue st --count 1 telemetry.sensor-2 2>&1 || true)
if grep -q "21.5" <<<"$got" && grep -q "22.5" <<<"$got"; then
  pass "consume both (edgeq sub)"
else
  fail "consume both (edgeq sub):"; sed 's/^/     /' <<<"$got"
fi
metrics=$(ct curl -fsS http://127.0.0.1:8222/metrics || true)
check "metrics endpoint" grep -q '^edgeq_' <<<"$metrics"

# --- reload -------------------------------------------------------------------------
since=$(ct date '+%Y-%m-%d %H:%M:%S')
check "reload of a good config succeeds" ct systemctl reload edgeq
check "reload logged as applied" wait_for 20 bash -c "nsenter -t $leader -m -u -i -n -p -C -- journalctl -u edgeq --since '$since' -o cat </dev/null | grep -q 'configuration reloaded'"
ct sh -c 'sed -i "s/^  max_deliver: 5$/  max_deliver: -3/" /etc/edgeq/edgeq.yaml'
since=$(ct date '+%Y-%m-%d %H:%M:%S')
if ct systemctl reload edgeq 2>/dev/null; then fail "reload of a refused config fails"; else pass "reload of a refused config fails"; fi
check "the journal says why (queue.max_deliver)" bash -c "nsenter -t $leader -m -u -i -n -p -C -- journalctl -u edgeq --since '$since' -o cat </dev/null | grep -q 'queue.max_deliver'"
check "still active with the same process" test "$(ct systemctl show -p MainPID --value edgeq)" = "$pid"
cp "$work/good.yaml" "$rootfs/etc/edgeq/edgeq.yaml"

# --- serial adapters plugged in after start --------------------------------------
# No driver is behind these nodes (no USB here): open gives ENXIO when the
# device cgroup admits the major and EPERM when it does not. The control,
# major 240 (local/experimental use), must be denied: it shows the device
# cgroup is enforced in this container at all.
since=$(ct date '+%Y-%m-%d %H:%M:%S')
for n in "ttyUSB0 188 0" "ttyACM0 166 0" "ttyAMA0 204 64" "ttyS63 4 127" "ttyX0 240 0"; do
  set -- $n
  ct sh -c "mknod -m 0660 /dev/$1 c $2 $3 && chgrp dialout /dev/$1"
done
journal_since() { ct journalctl -u edgeq --since "$since" -o cat; }
for n in ttyUSB0:188 ttyACM0:166 ttyAMA0:204 ttyS63:4 ttyX0:240; do
  dev=${n%%:*} major=${n#*:}
  opened() { journal_since | grep "/dev/$dev" | grep -q -i -e 'no such device or address' -e 'operation not permitted'; }
  if ! wait_for 30 opened; then
    fail "/dev/$dev (char $major) created after start: no open attempt logged"
  elif [ "$dev" = ttyX0 ]; then
    if journal_since | grep "/dev/$dev" | grep -q -i 'operation not permitted'; then
      pass "/dev/$dev (char $major, not allowed) denied: the device cgroup is enforced"
    else
      fail "/dev/$dev (char $major, not allowed) was not denied: the device cgroup is not enforced here"
    fi
  elif journal_since | grep "/dev/$dev" | grep -q -i 'operation not permitted'; then
    fail "/dev/$dev (char $major) created after start: the device cgroup denies it: $(journal_since | grep "/dev/$dev" | grep -i -m1 'operation not permitted')"
  else
    pass "/dev/$dev (char $major) created after start: admitted without a restart (ENXIO, no driver behind it)"
  fi
done
check "no restart meanwhile" test "$(ct systemctl show -p MainPID --value edgeq)" = "$pid"
ct sh -c 'rm -f /dev/ttyUSB0 /dev/ttyACM0 /dev/ttyAMA0 /dev/ttyS63 /dev/ttyX0'

# --- exposure ----------------------------------------------------------------------
sec=$(ct systemd-analyze security edgeq 2>&1 || true)
exposure=$(sed -n 's/.*Overall exposure level for edgeq.service: \([0-9.]*\).*/\1/p' <<<"$sec")
check "systemd-analyze security exposure ${exposure:-?} <= 2.0" awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 2.0) }'

# --- upgrade: restarts; a disable survives it ----------------------------------
# The same package with a higher version, as the next release would be.
mkdir -p "$work/next"
dpkg-deb -R "$deb" "$work/next/root"
sed -i "s/^Version: .*/Version: ${ver}+next/" "$work/next/root/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$work/next/root" "$rootfs/root/edgeq-next.deb" >/dev/null
check "upgrade with apt install ./edgeq.deb" quiet ct apt-get install -y -q /root/edgeq-next.deb
newpid=$(ct systemctl show -p MainPID --value edgeq)
check "upgrade restarted it (main PID $pid, then $newpid)" test "$newpid" != 0 -a "$newpid" != "$pid"
check "active after the upgrade" wait_for 60 ready
ct systemctl disable edgeq >/dev/null 2>&1
sed -i "s/^Version: .*/Version: ${ver}+next2/" "$work/next/root/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$work/next/root" "$rootfs/root/edgeq-next2.deb" >/dev/null
check "upgrade with dpkg -i while disabled" quiet ct dpkg -i /root/edgeq-next2.deb
check "still disabled after the upgrade" test "$(ct systemctl is-enabled edgeq || true)" = disabled
ct systemctl enable edgeq >/dev/null 2>&1

# --- stop drains, no seccomp kill -------------------------------------------------------
pid=$(ct systemctl show -p MainPID --value edgeq)
check "stop" ct systemctl stop edgeq
show=$(ct systemctl show -p Result -p ExecMainStatus -p ExecMainCode -p NRestarts edgeq)
check "stopped cleanly (Result=success, exit 0, no restarts): $(tr '\n' ' ' <<<"$show")" \
  bash -c 'grep -qx Result=success <<<"$1" && grep -qx ExecMainStatus=0 <<<"$1" && grep -qx NRestarts=0 <<<"$1"' _ "$show"
log=$(ct journalctl -u edgeq -o cat)
check "stop drained (logged)" grep -q 'draining' <<<"$log"
if grep -q -e 'status=31/SYS' -e 'SIGSYS' <<<"$log" || ct journalctl -o cat | grep -q 'code=killed, status=31/SYS'; then
  fail "no seccomp kill: $(grep -m1 -e SYS <<<"$log")"
else
  pass "no seccomp kill over the whole run"
fi

# --- purge ----------------------------------------------------------------------------------
check "purge" quiet ct dpkg --purge edgeq
left=$(ct sh -c 'ls -d /etc/edgeq /lib/systemd/system/edgeq.service /etc/systemd/system/edgeq.service \
  /etc/systemd/system/edgeq.service.d/*.dpkg* /etc/systemd/system/*.wants/edgeq.service \
  /var/lib/systemd/deb-systemd-helper-enabled/edgeq.service.dsh-also \
  /var/lib/systemd/deb-systemd-helper-enabled/*.wants/edgeq.service \
  /var/lib/systemd/deb-systemd-helper-masked/edgeq.service /usr/bin/edgeq 2>/dev/null' || true)
if [ -z "$left" ]; then pass "purge leaves nothing (no link, no mask, no deb-systemd-helper state)"; else fail "purge leaves: $left"; fi
check "the unit is gone" test "$(ct systemctl is-enabled edgeq 2>&1 || true)" != enabled
check "telemetry in /var/lib/edgeq kept (by design)" ct test -d /var/lib/edgeq

echo "systemd-test: $failures failed, $(( $(date +%s) - start ))s"
[ "$failures" -eq 0 ]
