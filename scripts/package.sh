#!/usr/bin/env bash
# Builds the tarball and the .deb for one architecture from a cross-built
# binary. Usage: scripts/package.sh BINARY GOARCH[/GOARM] VERSION OUTDIR
# (make package calls it for arm64 and arm v7).
set -euo pipefail
bin=$1 arch=$2 version=$3 out=$4
cd "$(dirname "$0")/.."
case $arch in
  arm64) deb_arch=arm64 ;;
  arm|armv7) deb_arch=armhf; arch=armv7 ;;
  amd64) deb_arch=amd64 ;;
  *) echo "unknown arch $arch" >&2; exit 2 ;;
esac
# A Debian version that sorts (scripts/deb-version.sh says how).
deb_version=$(scripts/deb-version.sh "$version")
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# .deb
root=$work/deb
install -D -m 0755 "$bin" "$root/usr/bin/edgeq"
# Tokens, passwords and secrets live in the config: postinst gives it to
# group edgeq (root:edgeq 0640), which does not exist at build time.
install -D -m 0640 packaging/edgeq.yaml "$root/etc/edgeq/edgeq.yaml"
install -D -m 0644 packaging/systemd/edgeq.service "$root/lib/systemd/system/edgeq.service"
install -D -m 0644 README.md "$root/usr/share/doc/edgeq/README.md"
# The README links to docs/ (the pictures stay out: they would weigh more
# than the text).
install -d -m 0755 "$root/usr/share/doc/edgeq/docs"
install -m 0644 docs/*.md "$root/usr/share/doc/edgeq/docs/"
install -d -m 0755 "$root/DEBIAN"
for s in postinst prerm postrm; do install -m 0755 "packaging/debian/$s" "$root/DEBIAN/$s"; done
echo /etc/edgeq/edgeq.yaml > "$root/DEBIAN/conffiles"
size=$(du -sk "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: edgeq
Version: $deb_version
Architecture: $deb_arch
Maintainer: edgeq developers <edgeq@localhost>
Installed-Size: $size
Depends: adduser
Section: net
Priority: optional
Description: telemetry broker for IoT gateways
 Stores sensor telemetry (MQTT, serial, NATS, HTTP) durably per device and
 pushes it to queue-group workers over the NATS protocol, in order per
 device, with acks and redelivery.
CONTROL
deb=$out/edgeq_${deb_version#*:}_${deb_arch}.deb # file names carry no epoch
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null

# tarball
name=edgeq-${version}-linux-${arch}
tdir=$work/$name
install -D -m 0755 "$bin" "$tdir/edgeq"
install -m 0644 packaging/edgeq.yaml packaging/systemd/edgeq.service README.md "$tdir/"
install -d -m 0755 "$tdir/docs"
install -m 0644 docs/*.md "$tdir/docs/"
tar -C "$work" --owner=0 --group=0 -czf "$out/$name.tar.gz" "$name"
echo "$deb"
echo "$out/$name.tar.gz"
