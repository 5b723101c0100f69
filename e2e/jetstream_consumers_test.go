package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"edgeq/wal"
)

// JetStream consumers of the real binary with real clients (nats.go's
// jetstream package, the nats CLI): definitions that survive restarts,
// delete, start policies, a push consumer nobody listens to.

func jsConnect(t *testing.T, n *node) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(n.url(), nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// pubSeq publishes payload to subject and returns its stream sequence (the
// pub-ack's stream_seq).
func pubSeq(t *testing.T, nc *nats.Conn, subject, payload string) uint64 {
	t.Helper()
	m, err := nc.Request(subject, []byte(payload), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var pa struct {
		StreamSeq uint64 `json:"stream_seq"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &pa); err != nil || pa.StreamSeq == 0 {
		t.Fatalf("pub-ack %s: %v", m.Data, err)
	}
	return pa.StreamSeq
}

// nextOne fetches one message of c, acks it synchronously and returns its
// payload ("" when none came within the wait).
func nextOne(t *testing.T, ctx context.Context, c jetstream.Consumer, wait time.Duration) string {
	t.Helper()
	b, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	m := <-b.Messages()
	if m == nil {
		return ""
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	return string(m.Data())
}

// committedOnDisk is the group's committed offset in the offset file (the
// highest over partitions: the test's device lives in one).
func committedOnDisk(n *node, consumer string) uint64 {
	dirs, _ := filepath.Glob(filepath.Join(n.dataDir, "*"))
	var best uint64
	for _, d := range append(dirs, n.dataDir) {
		consumers, err := wal.ReadOffsets(d)
		if err != nil {
			continue
		}
		for _, off := range consumers[consumer] {
			best = max(best, off)
		}
	}
	return best
}

// TestJetStreamConsumerSurvivesRestart: a durable consumer created with
// the nats CLI is listed after a SIGTERM restart and after a kill -9, and
// consumes from its committed offsets (one device: its messages are one
// partition's offsets 1..10, so the committed offset says what was acked).
func TestJetStreamConsumerSurvivesRestart(t *testing.T) {
	natsBin := requireTool(t, "nats", goBin("nats"))
	for _, how := range []string{"sigterm", "kill9"} {
		t.Run(how, func(t *testing.T) {
			n := newNode(t, "")
			n.start()
			run := natsCLI(t, natsBin, n)
			run("consumer", "add", "TELEMETRY", "keep", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults")
			nc, js := jsConnect(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			for i := range 10 {
				pubSeq(t, nc, "telemetry.restart-dev", fmt.Sprintf("m%d", i))
			}
			c, err := js.Consumer(ctx, "TELEMETRY", "keep")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if got := nextOne(t, ctx, c, 20*time.Second); got != fmt.Sprintf("m%d", i) {
					t.Fatalf("before the restart, message %d: %q", i, got)
				}
			}
			nc.Close()
			if how == "kill9" {
				// What a kill -9 keeps is what is on disk: wait for the commit.
				waitFor(t, "the commit of the 4 acks on disk", 60*time.Second, func() bool {
					return committedOnDisk(n, "queue:telemetry.>|keep") == 4
				})
				n.kill()
			} else if code := n.stop(); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			n.start()
			if out := run("consumer", "ls", "TELEMETRY"); !strings.Contains(out, "keep") {
				t.Fatalf("consumer not listed after the restart:\n%s", out)
			}
			nc, js = jsConnect(t, n)
			c, err = js.Consumer(ctx, "TELEMETRY", "keep")
			if err != nil {
				t.Fatal(err)
			}
			if c.CachedInfo().Config.AckPolicy != jetstream.AckExplicitPolicy || c.CachedInfo().Config.DeliverPolicy != jetstream.DeliverAllPolicy {
				t.Fatalf("restored config %+v", c.CachedInfo().Config)
			}
			for i := 4; i < 10; i++ {
				if got := nextOne(t, ctx, c, 20*time.Second); got != fmt.Sprintf("m%d", i) {
					t.Fatalf("after the restart, message %d: %q", i, got)
				}
			}
			b, err := c.FetchNoWait(5)
			if err != nil {
				t.Fatal(err)
			}
			for m := range b.Messages() {
				t.Fatalf("after the backlog: %q", m.Data())
			}
		})
	}
}

// TestJetStreamConsumerCLIDeleteAndDeliver: `nats consumer add --deliver`
// with a sequence and a duration (by_start_sequence, by_start_time), and
// `nats consumer rm`, which removes the queue group.
func TestJetStreamConsumerCLIDeleteAndDeliver(t *testing.T) {
	natsBin := requireTool(t, "nats", goBin("nats"))
	n := newNode(t, "")
	n.start()
	run := natsCLI(t, natsBin, n)
	nc, _ := jsConnect(t, n)
	var seqs []uint64
	for i := range 6 {
		seqs = append(seqs, pubSeq(t, nc, "telemetry.cli-dev", fmt.Sprintf("reading %d", i)))
	}
	run("consumer", "add", "TELEMETRY", "fromseq", "--pull", "--ack", "explicit", "--deliver", strconv.FormatUint(seqs[3], 10), "--defaults")
	out := run("consumer", "next", "TELEMETRY", "fromseq", "--count", "3")
	for i, want := range []string{"reading 3", "reading 4", "reading 5"} {
		if !strings.Contains(out, want) {
			t.Fatalf("by_start_sequence %d: no %q (message %d) in\n%s", seqs[3], want, i, out)
		}
	}
	if strings.Contains(out, "reading 2") {
		t.Fatalf("by_start_sequence delivered an earlier message:\n%s", out)
	}
	run("consumer", "add", "TELEMETRY", "fromtime", "--pull", "--ack", "explicit", "--deliver", "1h", "--defaults")
	if out := run("consumer", "next", "TELEMETRY", "fromtime", "--count", "6"); !strings.Contains(out, "reading 0") || !strings.Contains(out, "reading 5") {
		t.Fatalf("by_start_time an hour ago:\n%s", out)
	}
	hasGroup := func(q string) bool {
		gs, _ := statusJSON(t, n, "")["groups"].([]any)
		for _, g := range gs {
			if g, _ := g.(map[string]any); g["queue"] == q {
				return true
			}
		}
		return false
	}
	if !hasGroup("fromseq") {
		t.Fatal("no queue group fromseq")
	}
	run("consumer", "rm", "TELEMETRY", "fromseq", "-f")
	if out := run("consumer", "ls", "TELEMETRY"); strings.Contains(out, "fromseq") || !strings.Contains(out, "fromtime") {
		t.Fatalf("after rm:\n%s", out)
	}
	if hasGroup("fromseq") {
		t.Fatal("deleted consumer's queue group still in /v1/status")
	}
	if v := scrapeMetrics(t, n, ""); v["edgeq_jetstream_consumers_deleted_total"] != 1 || v["edgeq_jetstream_consumers"] != 1 {
		t.Fatalf("metrics: deleted %v, consumers %v", v["edgeq_jetstream_consumers_deleted_total"], v["edgeq_jetstream_consumers"])
	}
	// An unknown consumer: a JetStream error, a non-zero exit.
	if out, err := runCmd(natsBin, "--server", n.url(), "--timeout", "5s", "consumer", "rm", "TELEMETRY", "fromseq", "-f"); err == nil || !strings.Contains(strings.ToLower(out), "not found") {
		t.Fatalf("rm of a deleted consumer: %v\n%s", err, out)
	}
}

// TestJetStreamPushConsumerNobodyListens: a push consumer whose deliver
// subject has no subscriber takes nothing, so a SIGTERM drains at once
// (with shutdown_timeout 5m, a held message would keep the node past the
// harness's 30 s) and the next run flags nothing as possibly delivered.
func TestJetStreamPushConsumerNobodyListens(t *testing.T) {
	natsBin := requireTool(t, "nats", goBin("nats"))
	n := newNode(t, "shutdown_timeout: 5m\n")
	n.start()
	run := natsCLI(t, natsBin, n)
	run("consumer", "add", "TELEMETRY", "pushc", "--target", "deliver.nobody", "--ack", "explicit", "--deliver", "all",
		"--defaults")
	nc, _ := jsConnect(t, n)
	for i := range 5 {
		pubSeq(t, nc, fmt.Sprintf("telemetry.push-%d", i), fmt.Sprintf("p%d", i))
	}
	waitFor(t, "the group to see the backlog", 60*time.Second, func() bool {
		lag, ok := groupLag(statusJSON(t, n, ""), "pushc")
		return ok && lag == 5
	})
	nc.Close()
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	n.start()
	nc, _ = jsConnect(t, n)
	sub, err := nc.SubscribeSync("deliver.nobody")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 5 {
		m, err := sub.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("push deliveries after the restart: %d of 5: %v", len(got), err)
		}
		if v := m.Header.Get("Edgeq-Redelivered"); v != "" {
			t.Fatalf("%s flagged %q: the drain did not finish", m.Data, v)
		}
		got[string(m.Data)] = true
		if err := m.AckSync(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJetStreamConsumerFileCorrupt: a consumer file that does not parse is
// set aside as .corrupt and logged; the node starts without its consumers
// and keeps new ones again.
func TestJetStreamConsumerFileCorrupt(t *testing.T) {
	natsBin := requireTool(t, "nats", goBin("nats"))
	n := newNode(t, "")
	n.start()
	run := natsCLI(t, natsBin, n)
	run("consumer", "add", "TELEMETRY", "lost", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults")
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	file := filepath.Join(n.dataDir, "jetstream-consumers.json")
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), `"lost"`) {
		t.Fatalf("consumer file: %v\n%s", err, b)
	}
	if err := os.WriteFile(file, []byte(`{"version":1,"consumers":[{"name":`), 0o600); err != nil {
		t.Fatal(err)
	}
	n.start()
	if out := run("consumer", "ls", "TELEMETRY"); strings.Contains(out, "lost") {
		t.Fatalf("consumer from a corrupt file:\n%s", out)
	}
	if _, err := os.Stat(file + ".corrupt"); err != nil || !strings.Contains(n.logs(), "consumer file unusable") {
		t.Fatalf("corrupt file not set aside or not logged: %v", err)
	}
	run("consumer", "add", "TELEMETRY", "again", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults")
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	n.start()
	if out := run("consumer", "ls", "TELEMETRY"); !strings.Contains(out, "again") {
		t.Fatalf("new consumer not kept after the corrupt file:\n%s", out)
	}
}

// TestJetStreamEphemeralExpires: an ephemeral consumer of nats.go's
// jetstream package consumes, and once unused for its inactive_threshold
// (the default) it is removed with its queue group and counted.
func TestJetStreamEphemeralExpires(t *testing.T) {
	n := newNode(t, "")
	n.start()
	nc, js := jsConnect(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range 8 {
		pubSeq(t, nc, fmt.Sprintf("telemetry.eph-%d", i%3), fmt.Sprintf("e%d", i))
	}
	// No inactive_threshold: an ephemeral's default, 5 s.
	c, err := js.CreateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	name := c.CachedInfo().Name
	if th := c.CachedInfo().Config.InactiveThreshold; th != 5*time.Second {
		t.Fatalf("inactive_threshold %v, want the default 5s", th)
	}
	got := map[string]bool{}
	for deadline := time.Now().Add(60 * time.Second); len(got) < 8 && time.Now().Before(deadline); {
		b, err := c.Fetch(8, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			got[string(m.Data())] = true
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 8 {
		t.Fatalf("ephemeral consumer got %d of 8", len(got))
	}
	waitFor(t, "the unused ephemeral to be removed", 60*time.Second, func() bool {
		_, err := js.Consumer(ctx, "TELEMETRY", name)
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	_, has := groupLag(statusJSON(t, n, ""), name)
	if v := scrapeMetrics(t, n, ""); has || v["edgeq_jetstream_consumers_expired_total"] != 1 {
		t.Fatalf("after expiry: group listed %v, expired_total %v", has, v["edgeq_jetstream_consumers_expired_total"])
	}
}
