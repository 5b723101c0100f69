package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunCheck: `edgeq run --check` (the unit's first ExecReload) exits 0
// on a config a reload accepts and 2, naming what is wrong, on one it
// refuses: a bad key value, or TLS files that do not load.
func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, yaml string
		code       int
		want       string
	}{
		{"valid", "data_dir: " + dir + "\nnats:\n  listen: 127.0.0.1:4222\n", 0, "is valid"},
		{"bad value", "nats:\n  listen: 127.0.0.1:4222\nqueue:\n  max_deliver: -3\n", 2, "queue.max_deliver"},
		{"unknown key", "natz:\n  listen: x\n", 2, "natz"},
		{"missing tls files", "nats:\n  tls: {cert_file: " + dir + "/no-cert.pem, key_file: " + dir + "/no-key.pem}\n  auth_token: 0123456789abcdef0123\n", 2, "nats.tls"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edgeq.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			code := dispatch([]string{"run", "--check", "--config", path}, &out, &errOut)
			if code != c.code || !strings.Contains(out.String()+errOut.String(), c.want) {
				t.Fatalf("exit %d (want %d), output lacks %q:\n%s%s", code, c.code, c.want, out.String(), errOut.String())
			}
		})
	}
}
