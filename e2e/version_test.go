package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// semverRE is semver 2.0.0 (MAJOR.MINOR.PATCH[-pre][+build]).
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// natsInfo is the part of a NATS INFO line these tests read.
type natsInfo struct {
	Version      string `json:"version"`
	EdgeqVersion string `json:"edgeq_version"`
	JetStream    bool   `json:"jetstream"`
}

// readInfo connects to n's NATS port and decodes the INFO line it sends.
func readInfo(t *testing.T, n *node) natsInfo {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(n.url(), "nats://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("INFO line %q: %v", line, err)
	}
	var info natsInfo
	if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "INFO "))), &info); err != nil {
		t.Fatalf("INFO %q: %v", line, err)
	}
	return info
}

// checkVersions checks the version rule on a running node: INFO version
// 2.10.0+edgeq.<edgeq's semver, '+' as '.'>, edgeq_version, /v1/status and
// `edgeq version` of bin (unless empty) all edgeq's own semver. Only the shape is asserted, never
// a tag or a commit: a clean clone may have neither (-buildvcs=false, a
// shallow clone, no tags).
func checkVersions(t *testing.T, n *node, bin string) {
	t.Helper()
	info := readInfo(t, n)
	if !semverRE.MatchString(info.EdgeqVersion) {
		t.Fatalf("INFO edgeq_version %q is not semver", info.EdgeqVersion)
	}
	want := "2.10.0+edgeq." + strings.ReplaceAll(info.EdgeqVersion, "+", ".")
	if info.Version != want || !semverRE.MatchString(info.Version) || !info.JetStream {
		t.Fatalf("INFO version %q jetstream %v, want %q (semver) and jetstream", info.Version, info.JetStream, want)
	}
	resp, err := http.Get(n.httpURL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Version string `json:"version"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Version != info.EdgeqVersion {
		t.Fatalf("/v1/status version %q (%v), INFO edgeq_version %q", st.Version, err, info.EdgeqVersion)
	}
	if bin == "" {
		return
	}
	out, err := runCmd(bin, "version")
	if err != nil || !strings.HasPrefix(out, "edgeq "+info.EdgeqVersion+" ") {
		t.Fatalf("edgeq version: %q (%v), INFO edgeq_version %q", out, err, info.EdgeqVersion)
	}
}

var makeBuild struct {
	once sync.Once
	bin  string
	err  error
}

// makeBuiltBinary is bin/edgeq as `make build` makes it (-trimpath, the
// Makefile's -ldflags stamping), built once per test run.
func makeBuiltBinary(t *testing.T) string {
	t.Helper()
	if os.Getenv("EDGEQ_E2E_BIN") != "" {
		t.Skip("EDGEQ_E2E_BIN names the binary under test")
	}
	mk := requireTool(t, "make")
	makeBuild.once.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			makeBuild.err = err
			return
		}
		dir := filepath.Join(filepath.Dir(edgeqBin), "make") // removed with TestMain's directory
		// A cold -trimpath build of every package: minutes on a loaded
		// machine.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, mk, "-C", root, "build", "BIN="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			makeBuild.err = fmt.Errorf("make build: %v\n%s", err, out)
			return
		}
		makeBuild.bin = filepath.Join(dir, "edgeq")
	})
	if makeBuild.err != nil {
		t.Fatal(makeBuild.err)
	}
	return makeBuild.bin
}
