package lint

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Promtool pipes text through `promtool check metrics` (Debian's prometheus
// package) and fails t on any finding: a parse error, an empty HELP, a
// naming problem. Without promtool the test is skipped, or fails with
// CI=true, where scripts/install-test-deps.sh has installed it.
func Promtool(t testing.TB, text []byte) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed (CI=true); run scripts/install-test-deps.sh")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, strings.TrimSpace(string(out)))
	}
}
