package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJetStreamNatsCLI drives the JetStream API with the nats CLI, an
// unmodified JetStream client: account info, streams, a pull consumer, and
// `sub --ack` on a core queue group.
func TestJetStreamNatsCLI(t *testing.T) {
	natsBin := requireTool(t, "nats", goBin("nats"))
	n := newNode(t, "jetstream:\n  queue_ack_subjects: true\n")
	n.start()
	run := natsCLI(t, natsBin, n)
	for _, d := range []string{"js-1", "js-2", "js-3"} {
		run("pub", "telemetry."+d, "reading of "+d)
	}
	checks := []struct {
		args []string
		want []string
	}{
		{[]string{"account", "info"}, []string{"JetStream Account Information", "Streams: 1"}},
		{[]string{"stream", "ls"}, []string{"TELEMETRY"}},
		{[]string{"stream", "info", "TELEMETRY"}, []string{"Subjects: telemetry.>", "Messages: 3"}},
		{[]string{"consumer", "add", "TELEMETRY", "cli", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults"}, []string{"Ack Policy: Explicit"}},
		{[]string{"consumer", "ls", "TELEMETRY"}, []string{"cli"}},
		{[]string{"consumer", "info", "TELEMETRY", "cli"}, []string{"Pull Mode: true", "Max Ack Pending: 256"}},
		{[]string{"consumer", "next", "TELEMETRY", "cli", "--count", "3"}, []string{"reading of js-1", "reading of js-2", "reading of js-3", "Acknowledged message"}},
		{[]string{"stream", "info", "TELEMETRY"}, []string{"Active Consumers: 1"}},
		{[]string{"bench", "js", "pub", "async", "telemetry.bench", "--stream", "TELEMETRY", "--msgs", "500"}, []string{"asynchronous publisher stats"}},
		{[]string{"bench", "js", "consume", "--stream", "TELEMETRY", "--msgs", "500"}, []string{"durable consumer (callback) stats"}},
		// The read-only KV view of the stream (the device shadow).
		{[]string{"kv", "ls"}, []string{"telemetry", "read-only view of TELEMETRY"}},
		{[]string{"kv", "get", "telemetry", "js-2"}, []string{"reading of js-2"}},
	}
	for _, c := range checks {
		out := run(c.args...)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Fatalf("nats %v: no %q in\n%s", c.args, w, out)
			}
		}
	}
	// Unknown names and unsupported calls: JetStream errors, non-zero exits.
	for _, args := range [][]string{{"consumer", "info", "TELEMETRY", "nope"}, {"stream", "info", "NOPE"}, {"stream", "add", "OTHER", "--subjects", "x.>", "--defaults"}} {
		out, err := runCmd(natsBin, append([]string{"--server", n.url(), "--timeout", "5s"}, args...)...)
		if err == nil || !strings.Contains(strings.ToLower(out), "not") {
			t.Fatalf("nats %v succeeded or said nothing useful: %v\n%s", args, err, out)
		}
	}
	// sub --ack on a core queue group acks (JetStream-form ack subjects):
	// a second subscriber after ack_wait gets nothing again.
	subOut := make(chan string, 1)
	go func() {
		out, _ := runCmd(natsBin, "--server", n.url(), "sub", "telemetry.>", "--queue", "uploader", "--ack", "--count", "2")
		subOut <- out
	}()
	time.Sleep(time.Second)
	// --count makes the CLI auto-unsubscribe, which leaves the group at the
	// last message: only the first one's ack is sure to arrive in time.
	run("pub", "telemetry.js-4", "acked by the CLI")
	run("pub", "telemetry.js-5", "second for the CLI")
	select {
	case out := <-subOut:
		if !strings.Contains(out, "acked by the CLI") {
			t.Fatalf("nats sub --ack output: %s", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("nats sub --ack got nothing")
	}
	// The group counts the CLI's ack.
	waitFor(t, "the CLI's ack", 15*time.Second, func() bool {
		groups, _ := statusJSON(t, n, "")["groups"].([]any)
		for _, g := range groups {
			if g, _ := g.(map[string]any); g["queue"] == "uploader" && g["acked"].(float64) >= 1 {
				return true
			}
		}
		return false
	})
}

// TestJetStreamNatsJS runs nats.js from the npm registry on the default
// config: stream info, publish with acks and Nats-Msg-Id dedup, a pull
// consumer. nats.js 2.x turns its consumers API off below server 2.9.4, so
// this holds only because INFO announces 2.10.0+edgeq.<version>: against the
// binary of a plain go build and against the one of make build.
func TestJetStreamNatsJS(t *testing.T) {
	node := requireTool(t, "node")
	dir, _ := filepath.Abs(filepath.Join("testdata", "nodejs"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "nats", "package.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nats.js is not installed in %s (scripts/install-test-deps.sh), and CI=true", dir)
		}
		t.Skipf("nats.js is not installed in %s: run scripts/install-test-deps.sh", dir)
	}
	for _, build := range []string{"go build", "make build"} {
		t.Run(strings.ReplaceAll(build, " ", "_"), func(t *testing.T) {
			n := newNode(t, "")
			bin := "" // EDGEQ_E2E_BIN: the node's binary may not run here
			if nodeBin == edgeqBin {
				bin = edgeqBin
			}
			if build == "make build" {
				n.bin = makeBuiltBinary(t)
				bin = n.bin
			}
			n.start()
			checkVersions(t, n, bin)
			cmd := exec.Command(node, filepath.Join(dir, "jetstream.mjs"))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "NATS_URL="+strings.TrimPrefix(n.url(), "nats://"))
			out, err := runCmdStd(cmd)
			if err != nil || !strings.Contains(out, "nats.js ok: m1,m2,m3,m4,m5") {
				t.Fatalf("node jetstream.mjs: %v\n%s", err, out)
			}
		})
	}
}

// runCmdStd runs cmd for at most a minute and returns its output.
func runCmdStd(cmd *exec.Cmd) (string, error) {
	timer := time.AfterFunc(60*time.Second, func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// natsCLI returns a runner of the nats CLI against n that fails the test on
// a non-zero exit.
func natsCLI(t *testing.T, natsBin string, n *node) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := runCmd(natsBin, append([]string{"--server", n.url(), "--timeout", "5s"}, args...)...)
		if err != nil {
			t.Fatalf("nats %v: %v\n%s", args, err, out)
		}
		return out
	}
}
