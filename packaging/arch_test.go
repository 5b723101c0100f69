package packaging

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

var binaries struct {
	sync.Mutex
	dir  string
	path map[string]string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edgeq-packaging-")
	if err != nil {
		panic(err)
	}
	binaries.dir, binaries.path = dir, map[string]string{}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// crossBinary builds edgeq for linux/goarch (arm: GOARM=7) as make cross
// does, once per test run: the tests package the same binary several times.
func crossBinary(t *testing.T, goarch string) string {
	t.Helper()
	binaries.Lock()
	defer binaries.Unlock()
	if p, ok := binaries.path[goarch]; ok {
		return p
	}
	p := filepath.Join(binaries.dir, "edgeq-"+goarch)
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", p, "edgeq/cmd/edgeq")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM=7")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", goarch, err, out)
	}
	binaries.path[goarch] = p
	return p
}

// buildArchPackage cross-builds edgeq for goarch and packages it with
// scripts/package.sh as make package does; it returns the extracted tree.
func buildArchPackage(t *testing.T, goarch, pkgArch, debArch string) (root string, listing []string) {
	t.Helper()
	dir := t.TempDir()
	bin := crossBinary(t, goarch)
	out, err := exec.Command("../scripts/package.sh", bin, pkgArch, "v1.2.3", filepath.Join(dir, "dist")).CombinedOutput()
	if err != nil {
		t.Fatalf("package.sh %s: %v\n%s", pkgArch, err, out)
	}
	deb := filepath.Join(dir, "dist", "edgeq_1.2.3_"+debArch+".deb")
	contents, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatalf("dpkg-deb -c %s: %v", deb, err)
	}
	// mode, owner and path of every entry; sizes and dates differ by design.
	for _, l := range strings.Split(strings.TrimSpace(string(contents)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Fatalf("odd dpkg-deb -c line %q", l)
		}
		listing = append(listing, f[0]+" "+f[1]+" "+strings.Join(f[5:], " "))
	}
	root = filepath.Join(dir, "root")
	if out, err := exec.Command("dpkg-deb", "-R", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R: %v %s", err, out)
	}
	return root, listing
}

// TestArchPackagesMatch: the arm64 and armhf packages (what gateways run)
// hold the same files with the same modes, the same maintainer scripts,
// conffiles and unit, and control fields that differ only in Architecture
// and Installed-Size, as the amd64 one the systemd boot test
// (scripts/systemd-test.sh) installs and checks. Each binary is for its
// architecture.
func TestArchPackagesMatch(t *testing.T) {
	requireTool(t, "dpkg-deb")
	type pkg struct {
		goarch, pkgArch, debArch string
		machine                  elf.Machine
	}
	refRoot, refList := buildArchPackage(t, "amd64", "amd64", "amd64")
	for _, p := range []pkg{{"arm64", "arm64", "arm64", elf.EM_AARCH64}, {"arm", "armv7", "armhf", elf.EM_ARM}} {
		t.Run(p.debArch, func(t *testing.T) {
			root, list := buildArchPackage(t, p.goarch, p.pkgArch, p.debArch)
			if strings.Join(list, "\n") != strings.Join(refList, "\n") {
				t.Errorf("file list differs from amd64's:\n%s\n--- amd64:\n%s", strings.Join(list, "\n"), strings.Join(refList, "\n"))
			}
			for _, f := range []string{"DEBIAN/postinst", "DEBIAN/prerm", "DEBIAN/postrm", "DEBIAN/conffiles",
				"lib/systemd/system/edgeq.service", "etc/edgeq/edgeq.yaml"} {
				a, errA := os.ReadFile(filepath.Join(root, f))
				b, errB := os.ReadFile(filepath.Join(refRoot, f))
				if errA != nil || errB != nil || !bytes.Equal(a, b) {
					t.Errorf("%s differs from amd64's (%v, %v)", f, errA, errB)
				}
			}
			ctl, _ := os.ReadFile(filepath.Join(root, "DEBIAN/control"))
			refCtl, _ := os.ReadFile(filepath.Join(refRoot, "DEBIAN/control"))
			mask := regexp.MustCompile(`(?m)^(Architecture|Installed-Size): .*$`)
			if !bytes.Equal(mask.ReplaceAll(ctl, nil), mask.ReplaceAll(refCtl, nil)) {
				t.Errorf("control differs beyond Architecture and Installed-Size:\n%s\n--- amd64:\n%s", ctl, refCtl)
			}
			if !bytes.Contains(ctl, []byte("Architecture: "+p.debArch+"\n")) {
				t.Errorf("control is not for %s:\n%s", p.debArch, ctl)
			}
			f, err := elf.Open(filepath.Join(root, "usr/bin/edgeq"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != p.machine || f.Class != map[bool]elf.Class{true: elf.ELFCLASS32, false: elf.ELFCLASS64}[p.goarch == "arm"] {
				t.Errorf("usr/bin/edgeq is %v %v, want %v", f.Machine, f.Class, p.machine)
			}
		})
	}
}

// TestDebVersionSorts: scripts/deb-version.sh gives versions dpkg orders as
// releases happen: untagged builds of the release being worked on before
// its tag, release candidates before the release, builds after a tag after
// it, and every one of them above the first packages, versioned by the bare
// commit.
func TestDebVersionSorts(t *testing.T) {
	requireTool(t, "dpkg")
	v := func(in string) string {
		out, err := exec.Command("../scripts/deb-version.sh", in).Output()
		if err != nil {
			t.Fatalf("deb-version.sh %s: %v", in, err)
		}
		return strings.TrimSpace(string(out))
	}
	for in, want := range map[string]*regexp.Regexp{
		"v1.2.3":            regexp.MustCompile(`^1:1\.2\.3$`),
		"v1.2.3-rc1":        regexp.MustCompile(`^1:1\.2\.3~rc1$`),
		"v1.2.3-4-gabc1234": regexp.MustCompile(`^1:1\.2\.3\+git(\d{8}\.\d{6}|0)\.abc1234$`),
		"7a76945":           regexp.MustCompile(`^1:\d+\.\d+\.\d+~git(\d{8}\.\d{6}|0)\.7a76945$`),
		"7a76945-dirty":     regexp.MustCompile(`^1:\d+\.\d+\.\d+~git(\d{8}\.\d{6}|0)\.7a76945\.dirty$`),
	} {
		if got := v(in); !want.MatchString(got) {
			t.Errorf("deb-version.sh %s = %q, want %v", in, got, want)
		}
	}
	// Each is lower than the next.
	order := []string{
		"7a76945", // the shipped package's version (no epoch; 0.0~git<commit> for other commits)
		"1:0.3.0~git20261202.000649.7a76945",
		"1:0.3.0~git20261202.000649.7a76945.dirty",
		"1:0.3.0~git20261203.093000.0123456",
		"1:0.3.0~rc1",
		"1:0.3.0",
		"1:0.3.0+git20261210.120000.89abcde",
		"1:0.4.0~git20261211.120000.fedcba9",
		"1:1.0.0",
	}
	for i := 0; i+1 < len(order); i++ {
		if err := exec.Command("dpkg", "--compare-versions", order[i], "lt", order[i+1]).Run(); err != nil {
			t.Errorf("dpkg does not sort %s below %s", order[i], order[i+1])
		}
	}
	for _, old := range []string{"7a76945", "9f00000", "0.0~gitabcdef0"} {
		if err := exec.Command("dpkg", "--compare-versions", v("7a76945"), "gt", old).Run(); err != nil {
			t.Errorf("%s does not upgrade %s, a version the first packages had", v("7a76945"), old)
		}
	}
}
