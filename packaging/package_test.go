// Package packaging checks what `make package` and Dockerfile.arm64 produce.
package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed, and CI=true", name)
		}
		t.Skipf("%s is not installed", name)
	}
}

// buildPackage builds an amd64 package (so its binary runs here) with the
// same script make package uses for arm64 and arm v7.
func buildPackage(t *testing.T) (deb, tarball string) {
	requireTool(t, "dpkg-deb")
	dir := t.TempDir()
	bin := crossBinary(t, "amd64")
	out, err := exec.Command("../scripts/package.sh", bin, "amd64", "v1.2.3", filepath.Join(dir, "dist")).CombinedOutput()
	if err != nil {
		t.Fatalf("package.sh: %v\n%s", err, out)
	}
	return filepath.Join(dir, "dist", "edgeq_1.2.3_amd64.deb"), filepath.Join(dir, "dist", "edgeq-v1.2.3-linux-amd64.tar.gz")
}

func TestDebContents(t *testing.T) {
	deb, tarball := buildPackage(t)
	out, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // path -> mode
		"./usr/bin/edgeq":                    "-rwxr-xr-x",
		"./etc/edgeq/edgeq.yaml":             "-rw-r-----", // postinst makes it root:edgeq
		"./lib/systemd/system/edgeq.service": "-rw-r--r--",
		"./usr/share/doc/edgeq/README.md":    "-rw-r--r--",
		// The README's links: docs/ by topic.
		"./usr/share/doc/edgeq/docs/glossary.md":   "-rw-r--r--",
		"./usr/share/doc/edgeq/docs/durability.md": "-rw-r--r--",
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		if mode, ok := want[f[5]]; ok {
			if f[0] != mode || f[1] != "root/root" {
				t.Errorf("%s: %s %s, want %s root/root", f[5], f[0], f[1], mode)
			}
			delete(want, f[5])
		}
	}
	for p := range want {
		t.Errorf("%s missing from the package", p)
	}
	info, _ := exec.Command("dpkg-deb", "-I", deb).Output()
	for _, s := range []string{"Package: edgeq", "Version: 1:1.2.3", "Architecture: amd64", "Depends: adduser", "conffiles", "postinst", "postrm"} {
		if !strings.Contains(string(info), s) {
			t.Errorf("control information lacks %q:\n%s", s, info)
		}
	}
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-R", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("extract: %v %s", err, out)
	}
	// The default config parses, and is loopback-only.
	cfgOut, err := exec.Command(filepath.Join(root, "usr/bin/edgeq"), "run", "--print-config", "--config", filepath.Join(root, "etc/edgeq/edgeq.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("packaged config does not load: %v\n%s", err, cfgOut)
	}
	for _, s := range []string{"listen: 127.0.0.1:4222", "listen: 127.0.0.1:8222", "data_dir: /var/lib/edgeq"} {
		if !strings.Contains(string(cfgOut), s) {
			t.Errorf("effective config lacks %q", s)
		}
	}
	if body, _ := os.ReadFile(filepath.Join(root, "DEBIAN", "postinst")); !strings.Contains(string(body), "chgrp edgeq /etc/edgeq/edgeq.yaml") || !strings.Contains(string(body), "o-rwx") {
		t.Errorf("postinst does not make the config root:edgeq 0640:\n%s", body)
	}
	// Maintainer scripts never delete data.
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		body, _ := os.ReadFile(filepath.Join(root, "DEBIAN", s))
		if regexp.MustCompile(`rm\s+-[a-z]*r|deluser|delgroup`).Match(body) {
			t.Errorf("%s deletes data or the user:\n%s", s, body)
		}
	}
	if out, err := exec.Command("tar", "-tzf", tarball).Output(); err != nil || !strings.Contains(string(out), "edgeq-v1.2.3-linux-amd64/edgeq") {
		t.Fatalf("tarball: %v %s", err, out)
	} else if !strings.Contains(string(out), "edgeq-v1.2.3-linux-amd64/docs/glossary.md") {
		t.Errorf("the tarball lacks docs/ (the README links to it):\n%s", out)
	}
}

func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("systemd/edgeq.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"User=edgeq", "StateDirectory=edgeq", "ProtectSystem=strict", "NoNewPrivileges=yes",
		"Restart=on-failure", "LimitNOFILE=", "SupplementaryGroups=dialout", "ExecStart=/usr/bin/edgeq run --config /etc/edgeq/edgeq.yaml",
		"SystemCallFilter=@system-service", "ProtectProc=invisible", "DevicePolicy=closed",
		// Serial majors by number (devices.txt): ttyS, ttyUSB, ttyACM, ttyAMA.
		"DeviceAllow=char-4 rw", "DeviceAllow=char-188 rw", "DeviceAllow=char-166 rw", "DeviceAllow=char-204 rw",
		// A refused config fails the reload before the node is signalled.
		"ExecReload=/usr/bin/edgeq run --check --config /etc/edgeq/edgeq.yaml\nExecReload=/bin/kill -HUP $MAINPID"} {
		if !strings.Contains(string(unit), s) {
			t.Errorf("unit lacks %q", s)
		}
	}
	// A major by name resolves only if its driver is loaded when the unit
	// starts: an adapter plugged in later would be denied.
	if m := regexp.MustCompile(`(?m)^DeviceAllow=char-[a-zA-Z].*`).FindAll(unit, -1); len(m) > 0 {
		t.Errorf("DeviceAllow by driver name: %q", m)
	}
	requireTool(t, "systemd-analyze") // the exposure score is checked below
	// verify needs the binary at the unit's path; check a copy pointing at a built one.
	dir := t.TempDir()
	bin := crossBinary(t, runtime.GOARCH)
	u := strings.ReplaceAll(string(unit), "/usr/bin/edgeq", bin)
	path := filepath.Join(dir, "edgeq.service")
	os.WriteFile(path, []byte(u), 0o644)
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	// In a container without a running systemd, verify still parses the unit;
	// only report lines about this unit.
	var problems []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "edgeq.service") && !strings.Contains(l, "User") && !strings.Contains(l, "Failed to create") {
			problems = append(problems, l)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("systemd-analyze verify (%v):\n%s", err, strings.Join(problems, "\n"))
	}
	// Exposure at most 2.0 (the threshold is in tenths); --offline reads the
	// unit file without a running systemd.
	out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=20", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: exposure above 2.0 (%v):\n%s", err, out)
	}
	if m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out); m != nil {
		t.Logf("systemd-analyze security: exposure %s", m[1])
	}
}

// TestDockerfileBuildsTheMakefileTarget: no Docker engine runs here, so check
// by construction that the image is built with the Makefile's arm64 target
// (same flags as make cross), runs as non-root and keeps data in a volume.
func TestDockerfileBuildsTheMakefileTarget(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile.arm64")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`RUN make (\S+)`).FindSubmatch(df)
	if m == nil {
		t.Fatal("Dockerfile.arm64 does not build with make")
	}
	target := string(m[1])
	if target != "bin/edgeq-linux-arm64" || !strings.Contains(string(mk), "$(BIN)/edgeq-linux-arm64: FORCE\n\tGOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='$(LDFLAGS)'") {
		t.Fatalf("Dockerfile builds %q; the Makefile's arm64 cross target must be that one", target)
	}
	if !regexp.MustCompile(`(?m)^cross: .*\$\(BIN\)/edgeq-linux-arm64`).Match(mk) {
		t.Fatal("make cross does not build the Dockerfile's target")
	}
	if !strings.Contains(string(mk), "export CGO_ENABLED = 0") {
		t.Fatal("Makefile builds are not static")
	}
	for _, s := range []string{"FROM scratch", "USER 65532", `VOLUME ["/var/lib/edgeq"]`, "EXPOSE 4222 8222", "COPY --from=build /src/bin/edgeq-linux-arm64 /usr/bin/edgeq"} {
		if !strings.Contains(string(df), s) {
			t.Errorf("Dockerfile.arm64 lacks %q", s)
		}
	}
}
