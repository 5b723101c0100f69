package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The read side of the compatibility suite: message get, the KV view and
// ordered consumers, with natscli, nats.go's jetstream package and nats.js
// v3 (compatRows lists them).

// compatPublish stores readings for device with nats.go and returns the
// stream sequence of the last one (read back by subject).
func compatPublish(t *testing.T, e *compatEnv, device string, values ...string) uint64 {
	t.Helper()
	js := e.js(t)
	for _, v := range values {
		if _, err := js.Publish(e.ctx, "telemetry."+device, []byte(v)); err != nil {
			t.Fatalf("publish %s: %v", device, err)
		}
	}
	s, err := js.Stream(e.ctx, "TELEMETRY")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(e.ctx, "telemetry."+device)
	if err != nil {
		t.Fatalf("last message of %s: %v", device, err)
	}
	return m.Sequence
}

// publishFrom publishes one reading from a goroutine of its own (no t).
func publishFrom(e *compatEnv, device, v string) error {
	nc, err := nats.Connect(e.n.url())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.Publish(e.ctx, "telemetry."+device, []byte(v))
	return err
}

// groupNames are the queue groups /v1/status shows.
func groupNames(t *testing.T, e *compatEnv) map[string]bool {
	names := map[string]bool{}
	gs, _ := statusJSON(t, e.n, "")["groups"].([]any)
	for _, g := range gs {
		if g, _ := g.(map[string]any); g != nil {
			names[fmt.Sprint(g["filter"], " ", g["queue"])] = true
		}
	}
	return names
}

// newGroups are the groups in now that were not in before (groups may go
// meanwhile: idle ones expire).
func newGroups(before, now map[string]bool) []string {
	var added []string
	for g := range now {
		if !before[g] {
			added = append(added, g)
		}
	}
	return added
}

// cliUntil runs the nats CLI until its output satisfies done (or a minute
// passes: a hang's bound) and returns the output.
func (e *compatEnv) cliUntil(done func(string) bool, args ...string) (string, bool) {
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.natsBin, append([]string{"--server", e.n.url(), "--timeout", "10s"}, args...)...)
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return err.Error(), false
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		mu.Lock()
		s := out.String()
		mu.Unlock()
		if done(s) {
			cancel()
			<-exited
			return s, true
		}
		select {
		case <-exited:
			mu.Lock()
			defer mu.Unlock()
			return out.String(), done(out.String())
		case <-ctx.Done():
			<-exited
			return s, false
		case <-tick.C:
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// readScript runs testdata/nodejs/read.mjs (nats.js v3).
func readScript(e *compatEnv, what, device string) (string, error) {
	cmd := exec.Command(e.nodeBin, filepath.Join(e.jsDir, "read.mjs"), what, device)
	cmd.Dir = e.jsDir
	cmd.Env = append(os.Environ(), "NATS_URL="+strings.TrimPrefix(e.n.url(), "nats://"))
	return runCmdStd(cmd)
}

func cliStreamGetSeq(t *testing.T, e *compatEnv) compatOutcome {
	seq := compatPublish(t, e, "get-1", `{"v":1}`, `{"v":2}`)
	out, err := e.cli("stream", "get", "TELEMETRY", fmt.Sprint(seq))
	if err != nil || !strings.Contains(out, fmt.Sprintf("TELEMETRY#%d", seq)) || !strings.Contains(out, `{"v":2}`) {
		return broken("%v: %s", err, lastLine(out))
	}
	return works()
}

func cliStreamGetLastFor(t *testing.T, e *compatEnv) compatOutcome {
	seq := compatPublish(t, e, "get-2", `{"v":1}`, `{"v":2}`)
	out, err := e.cli("stream", "get", "TELEMETRY", "--last-for", "telemetry.get-2")
	if err != nil || !strings.Contains(out, fmt.Sprintf("TELEMETRY#%d", seq)) || !strings.Contains(out, `{"v":2}`) {
		return broken("%v: %s", err, lastLine(out))
	}
	out, err = e.cli("stream", "get", "TELEMETRY", "--last-for", "telemetry.never-seen")
	if err == nil || !strings.Contains(out, "no message found") {
		return broken("a device without readings: %v: %s", err, lastLine(out))
	}
	return works()
}

func goGetMsg(t *testing.T, e *compatEnv) compatOutcome {
	seq := compatPublish(t, e, "get-3", "a", "b")
	s, err := e.js(t).Stream(e.ctx, "TELEMETRY")
	if err != nil {
		t.Fatal(err)
	}
	if !s.CachedInfo().Config.AllowDirect {
		return broken("allow_direct is not set in stream info")
	}
	m, err := s.GetMsg(e.ctx, seq)
	if err != nil || string(m.Data) != "b" || m.Subject != "telemetry.get-3" || m.Sequence != seq {
		return broken("GetMsg(%d): %v %+v", seq, err, m)
	}
	last, err := s.GetLastMsgForSubject(e.ctx, "telemetry.get-3")
	if err != nil || string(last.Data) != "b" || last.Header.Get("Edgeq-Device") != "get-3" {
		return broken("GetLastMsgForSubject: %v %+v", err, last)
	}
	if _, err := s.GetLastMsgForSubject(e.ctx, "telemetry.never-seen"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		return broken("a device without readings: %v", err)
	}
	return works()
}

func nodeGetLast(t *testing.T, e *compatEnv) compatOutcome {
	seq := compatPublish(t, e, "get-4", "x1", "x2")
	out, err := readScript(e, "get", "get-4")
	if err != nil || !strings.Contains(out, fmt.Sprintf("last telemetry.get-4 seq %d x2", seq)) {
		return broken("%v: %s", err, lastLine(out))
	}
	return works()
}

func cliKVGet(t *testing.T, e *compatEnv) compatOutcome {
	seq := compatPublish(t, e, "kv-1", `{"temp":20}`, `{"temp":21}`)
	out, err := e.cli("kv", "get", "telemetry", "kv-1")
	if err != nil || !strings.Contains(out, `{"temp":21}`) || !strings.Contains(out, fmt.Sprintf("revision: %d", seq)) {
		return broken("%v: %s", err, lastLine(out))
	}
	return compatOutcome{status: "works", note: "the revision is the reading's stream sequence: it grows per key, not in time order across keys"}
}

func cliKVWatch(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "kv-2", `{"temp":30}`, `{"temp":31}`)
	published := false
	out, ok := e.cliUntil(func(s string) bool {
		if !published && strings.Contains(s, `kv-2: {"temp":31}`) {
			published = true
			go func() { _ = publishFrom(e, "kv-2", `{"temp":32}`) }()
		}
		return strings.Contains(s, `kv-2: {"temp":32}`)
	}, "kv", "watch", "telemetry", "kv-2")
	if !ok || strings.Contains(out, `{"temp":30}`) {
		return broken("want the last reading, then the new one: %s", lastLine(out))
	}
	return works()
}

func cliKVPut(t *testing.T, e *compatEnv) compatOutcome {
	out, err := e.cli("kv", "put", "telemetry", "kv-3", "x")
	if err == nil {
		return works()
	}
	if !strings.Contains(out, "read-only view") {
		return broken("%v: %s", err, lastLine(out))
	}
	return refused("JetStream error 400/10003: the bucket is a read-only view of the stream; publish to telemetry.<device>")
}

func goKV(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "kv-4", "r1", "r2")
	js := e.js(t)
	kv, err := js.KeyValue(e.ctx, "telemetry")
	if err != nil {
		return broken("KeyValue: %v", err)
	}
	ent, err := kv.Get(e.ctx, "kv-4")
	if err != nil || string(ent.Value()) != "r2" {
		return broken("Get: %v", err)
	}
	w, err := kv.Watch(e.ctx, "kv-4")
	if err != nil {
		return broken("Watch: %v", err)
	}
	defer w.Stop()
	next := func() (jetstream.KeyValueEntry, bool) {
		select {
		case u := <-w.Updates():
			return u, true
		case <-time.After(time.Minute): // bounds a hang only
			return nil, false
		}
	}
	if u, ok := next(); !ok || u == nil || string(u.Value()) != "r2" || u.Revision() != ent.Revision() {
		return broken("Watch's first entry: %v", u)
	}
	if u, ok := next(); !ok || u != nil {
		return broken("Watch: no end-of-initial-values marker: %v", u)
	}
	compatPublish(t, e, "kv-4", "r3")
	if u, ok := next(); !ok || u == nil || string(u.Value()) != "r3" {
		return broken("Watch: a new reading did not come: %v", u)
	}
	return works()
}

func goKVPut(t *testing.T, e *compatEnv) compatOutcome {
	kv, err := e.js(t).KeyValue(e.ctx, "telemetry")
	if err != nil {
		return broken("KeyValue: %v", err)
	}
	_, err = kv.Put(e.ctx, "kv-5", []byte("x"))
	var apiErr *jetstream.APIError
	if err == nil {
		return works()
	}
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Description, "read-only view") {
		return broken("Put: %v", err)
	}
	if err := kv.Delete(e.ctx, "kv-5"); !errors.As(err, &apiErr) {
		return broken("Delete: %v", err)
	}
	return refused("`*jetstream.APIError` 400/10003 (Put, Create, Update, Delete, Purge): the bucket is a read-only view")
}

func nodeKV(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "kv-6", "k1", "k2")
	out, err := readScript(e, "kv", "kv-6")
	if err != nil || !strings.Contains(out, "get kv-6 rev") || !strings.Contains(out, "watch kv-6 k2") || !strings.Contains(out, "put refused: edgeq: KV bucket") {
		return broken("%v: %s", err, lastLine(out))
	}
	return compatOutcome{status: "works", note: "get and watch; put refused with the read-only error"}
}

// cliSubStream: `nats sub --stream` with a deliver policy reads the
// device's readings and creates no queue group.
func cliSubStream(policy string, want []string, live string) func(*testing.T, *compatEnv) compatOutcome {
	return func(t *testing.T, e *compatEnv) compatOutcome {
		device := "sub" + strings.ReplaceAll(policy, "-", "")
		compatPublish(t, e, device, "s1", "s2", "s3")
		groups := groupNames(t, e)
		args := []string{"sub", "--stream", "TELEMETRY", "telemetry." + device, policy}
		if policy == "--since" {
			args = append(args, "1h")
		}
		var last time.Time
		out, ok := e.cliUntil(func(s string) bool {
			// The CLI says "Subscribing" before it creates its consumer:
			// publish the new reading again until it shows (a reading
			// stored before the consumer is not new to it).
			if live != "" && strings.Contains(s, "Subscribing") && time.Since(last) > 500*time.Millisecond {
				last = time.Now()
				go func() { _ = publishFrom(e, device, live) }()
			}
			for _, w := range want {
				if !strings.Contains(s, w) {
					return false
				}
			}
			return true
		}, args...)
		if !ok {
			return broken("want %v: %s", want, lastLine(out))
		}
		for _, not := range []string{"s1", "s2", "s3"} {
			if !contains(want, not) && strings.Contains(out, "\n"+not+"\n") {
				return broken("%s came too: %s", not, out)
			}
		}
		if added := newGroups(groups, groupNames(t, e)); len(added) > 0 {
			return broken("queue groups created: %v", added)
		}
		return works()
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func goOrdered(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "ord-1", "o1", "o2", "o3")
	groups := groupNames(t, e)
	js := e.js(t)
	c, err := js.OrderedConsumer(e.ctx, "TELEMETRY", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"telemetry.ord-1"}})
	if err != nil {
		return broken("OrderedConsumer: %v", err)
	}
	got := make(chan string, 16)
	cc, err := c.Consume(func(m jetstream.Msg) { got <- string(m.Data()) })
	if err != nil {
		return broken("Consume: %v", err)
	}
	defer cc.Stop()
	var seen []string
	for len(seen) < 4 {
		if len(seen) == 3 {
			compatPublish(t, e, "ord-1", "o4")
		}
		select {
		case m := <-got:
			seen = append(seen, m)
		case <-time.After(time.Minute): // bounds a hang only
			return broken("got %v", seen)
		}
	}
	if strings.Join(seen, ",") != "o1,o2,o3,o4" {
		return broken("got %v", seen)
	}
	if added := newGroups(groups, groupNames(t, e)); len(added) > 0 {
		return broken("queue groups created: %v", added)
	}
	return works()
}

func cliBenchOrdered(t *testing.T, e *compatEnv) compatOutcome {
	out, err := e.cli("bench", "js", "pub", "async", "telemetry", "--multisubject", "--stream", "TELEMETRY", "--msgs", "2000")
	if err != nil {
		t.Fatalf("bench pub: %v %s", err, lastLine(out))
	}
	out, err = e.cli("bench", "js", "ordered", "--stream", "TELEMETRY", "--msgs", "2000")
	if err != nil || !strings.Contains(out, "ordered ephemeral consumer stats") {
		return broken("%v: %s", err, lastLine(out))
	}
	return compatOutcome{status: "works", note: "over every device the order is the stream sequence's (offset-major), not append order across partitions (docs/jetstream.md: ordered consumers)"}
}

func nodeOrdered(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "ord-2", "n1", "n2", "n3")
	out, err := readScript(e, "ordered", "ord-2")
	if err != nil || !strings.Contains(out, "ordered telemetry.ord-2") || strings.Count(out, "ordered telemetry.ord-2") != 3 {
		return broken("%v: %s", err, lastLine(out))
	}
	return works()
}

func nodeKVv2(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "kv-7", "k1", "k2")
	out, err := readScript(e, "v2kv", "kv-7")
	if err != nil || !strings.Contains(out, "get kv-7 rev") || !strings.Contains(out, "watch kv-7 k2") || !strings.Contains(out, "put refused: edgeq: KV bucket") {
		return broken("%v: %s", err, lastLine(out))
	}
	return compatOutcome{status: "works", note: "get and watch; put refused with the read-only error"}
}

func nodeOrderedV2(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "ord-3", "n1", "n2", "n3")
	out, err := readScript(e, "v2ordered", "ord-3")
	if err != nil || strings.Count(out, "ordered telemetry.ord-3") != 3 || !strings.Contains(out, "n1; ordered") {
		return broken("%v: %s", err, lastLine(out))
	}
	return works()
}

func cliCheckMessage(t *testing.T, e *compatEnv) compatOutcome {
	compatPublish(t, e, "chk-1", `{"ok":1}`)
	out, err := e.cli("server", "check", "message", "--stream", "TELEMETRY", "--subject", "telemetry.chk-1", "--age-warn", "1h", "--age-critical", "2h", "--content", "ok")
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "OK Stream Message") {
		return broken("%v: %s", err, lastLine(out))
	}
	out, err = e.cli("server", "check", "message", "--stream", "TELEMETRY", "--subject", "telemetry.never-seen", "--age-warn", "1h", "--age-critical", "2h")
	if err == nil || !strings.Contains(out, "no message found") {
		return broken("a device without readings: %v: %s", err, lastLine(out))
	}
	return works()
}
