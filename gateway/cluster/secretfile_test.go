package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretFileMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o604, false}, {0o620, false}, {0o644, false}} {
		p := filepath.Join(dir, "secret")
		os.Remove(p)
		if err := os.WriteFile(p, []byte("a cluster secret of some length\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		b, err := readSecretFile(p)
		if c.ok != (err == nil) {
			t.Errorf("mode %04o: %v", c.mode, err)
		}
		if err != nil && !strings.Contains(err.Error(), "chmod 0600") {
			t.Errorf("mode %04o: the error does not say what to do: %v", c.mode, err)
		}
		if c.ok && !strings.HasPrefix(string(b), "a cluster secret") {
			t.Errorf("read %q", b)
		}
	}
}
