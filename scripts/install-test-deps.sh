#!/usr/bin/env bash
# Installs what the tests need when it is missing. As root it uses apt-get
# (Debian/Raspberry Pi OS); otherwise it says what to install.
set -euo pipefail
need=()
command -v go >/dev/null || { echo "install Go >= 1.26 first: https://go.dev/doc/install" >&2; exit 1; }
command -v mosquitto >/dev/null || need+=(mosquitto)
command -v mosquitto_pub >/dev/null || need+=(mosquitto-clients)
command -v nats-server >/dev/null || need+=(nats-server)
command -v socat >/dev/null || need+=(socat)
command -v ip >/dev/null || need+=(iproute2)
command -v gcc >/dev/null || need+=(gcc) # the race detector uses cgo
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static) # firmware tests
command -v curl >/dev/null || need+=(curl)
command -v dpkg-deb >/dev/null || need+=(dpkg)
command -v systemd-analyze >/dev/null || need+=(systemd) # unit verify and security score
command -v openssl >/dev/null || need+=(openssl)         # scripts/bench-tls.sh
# make systemd-test: a Debian root file system booted under systemd-nspawn.
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v nsenter >/dev/null || need+=(util-linux)
# mDNS interop tests run avahi (as Raspberry Pi OS does) inside namespaces.
command -v avahi-daemon >/dev/null || need+=(avahi-daemon)
command -v avahi-browse >/dev/null || need+=(avahi-utils)
command -v dbus-daemon >/dev/null || need+=(dbus)
# Modbus tests run a real slave: pymodbus for Debian's own interpreter.
/usr/bin/python3 -c 'import pymodbus, serial' 2>/dev/null || need+=(python3-pymodbus python3-serial)
# The console tests drive headless Chromium (Debian's package; no browser downloads).
command -v chromium >/dev/null || need+=(chromium)
# promtool checks the /metrics exposition (gateway/metrics, gateway).
command -v promtool >/dev/null || need+=(prometheus)
# The power-cut tests mount a FUSE file system (internal/powerfs).
command -v fusermount3 >/dev/null || need+=(fuse3)
# nats.js (from the npm registry) is a third JetStream client in the tests.
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "the tests need: ${need[*]} — run: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The nats CLI is a second, independent NATS client in the tests.
gobin="$(go env GOPATH)/bin"
if ! command -v nats >/dev/null && [ ! -x "$gobin/nats" ]; then
  echo "installing the nats CLI (natscli) into $gobin"
  GOFLAGS= go install github.com/nats-io/natscli/nats@v0.5.1
fi
nodedir="$(dirname "$0")/../e2e/testdata/nodejs"
if [ ! -f "$nodedir/node_modules/nats/package.json" ] || [ ! -f "$nodedir/node_modules/@nats-io/jetstream/package.json" ] || [ ! -f "$nodedir/node_modules/@nats-io/kv/package.json" ]; then
  echo "installing nats.js (npm) into e2e/testdata/nodejs"
  npm install --prefix "$nodedir" --no-audit --no-fund --silent >/dev/null
fi
# A mosquitto installed as a service is not what the tests use (they start their own).
if command -v systemctl >/dev/null && systemctl is-active --quiet mosquitto 2>/dev/null; then
  echo "note: a system mosquitto is running; the tests start their own on free ports"
fi
