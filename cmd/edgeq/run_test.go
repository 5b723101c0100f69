package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrintConfigHidesSecrets: every credential the file sets is
// <hidden> in `edgeq run --print-config`, and the rest prints.
func TestPrintConfigHidesSecrets(t *testing.T) {
	cfg := `
nats:
  users: [{user: alice, password: NATSPASSWORD0001}]
nsq: {listen: 127.0.0.1:4150, auth_token: NSQTOKEN00000001}
http: {token: HTTPTOKEN0000001}
cluster: {name: plant, secret: CLUSTERSECRET001, mdns: false, peers: [127.0.0.1:7422]}
mqtt:
- {name: m, broker: tcp://127.0.0.1:1883, username: u, password: MQTTSECRET123, device: {topic: 's/{device}'}}
uplinks:
- {name: n, type: nats, nats: {url: nats://127.0.0.1:4223, subject: 'up.{device}', token: UPLINKTOKEN12345}}
- {name: q, type: mqtt, mqtt: {broker: tcp://127.0.0.1:1883, topic: 'up/{device}', username: u, password: UPLINKMQTTPW0001}}
- {name: h, type: http, http: {url: http://127.0.0.1:9/in, headers: {Authorization: Bearer UPLINKBEARER0001, X-Api-Key: UPLINKAPIKEY0001}}}
`
	path := filepath.Join(t.TempDir(), "edgeq.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := runRun([]string{"--config", path, "--print-config"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, s := range []string{"NATSPASSWORD", "NSQTOKEN", "HTTPTOKEN", "CLUSTERSECRET", "MQTTSECRET", "UPLINKTOKEN", "UPLINKMQTTPW", "UPLINKBEARER", "UPLINKAPIKEY"} {
		if strings.Contains(out.String(), s) {
			t.Errorf("--print-config shows %s:\n%s", s, out.String())
		}
	}
	for _, s := range []string{"user: alice", "Authorization: <hidden>", "X-Api-Key: <hidden>", "password: <hidden>", "token: <hidden>", "secret: <hidden>"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("--print-config lacks %q:\n%s", s, out.String())
		}
	}
}

// TestPrintConfigEffective: --print-config shows the values the node runs
// with where a key's 0 or empty means a default, and what it prints loads
// back to the same configuration.
func TestPrintConfigEffective(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "edgeq.yaml")
	cfg := `
queue: {read_ahead_msgs: 1024, read_ahead_bytes: 4MiB}
groups: [{subject: telemetry.>, queue: q}]
uplinks:
- {name: n, type: nats, nats: {url: nats://127.0.0.1:4223, subject: 'up.{device}'}}
- {name: h, type: http, http: {url: http://127.0.0.1:9/in}}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	print := func(path string) string {
		var out, errOut bytes.Buffer
		if code := runRun([]string{"--config", path, "--print-config"}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		return out.String()
	}
	out := print(path)
	for _, want := range []string{"device_share_msgs: 128\n", "device_share_bytes: 512KiB\n", "device_window: 1\n",
		"subject: telemetry.>\n", "deliver: all\n", "ordering: per_device\n", "strategy: random\n", "ack_wait: 30s\n", "max_in_flight: 256\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, out)
		}
	}
	again := filepath.Join(dir, "printed.yaml")
	if err := os.WriteFile(again, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out2 := print(again); out2 != out {
		t.Fatalf("the printed config does not load back to itself:\n%s\n---\n%s", out, out2)
	}
}

// TestUnrelatedEnvironmentStarts: a script's own EDGEQ_* variables do not
// stop `edgeq run`; they are named as ignored.
func TestUnrelatedEnvironmentStarts(t *testing.T) {
	t.Setenv("EDGEQ_BIN", "/usr/local/bin/edgeq")
	t.Setenv("EDGEQ_SRC", "/src/edgeq")
	var out, errOut bytes.Buffer
	if code := runRun([]string{"--print-config"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "EDGEQ_BIN is not a setting: ignored") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

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
