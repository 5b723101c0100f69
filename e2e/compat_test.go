package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nsqio/go-nsq"
)

// The compatibility suite: the real clients (natscli, nats.go's jetstream
// package, nats.js v3 `@nats-io/*` and v2 `nats` from npm, curl) against
// one real node, one row per everyday operation. Each row says what it
// expects (works, differs, refused) and fails when the outcome changes. The
// table goes to the test log and, with EDGEQ_E2E_COMPAT_TABLE=<file>, to a
// Markdown file (docs/compatibility.md comes from it).

// compatOutcome is what happened to one operation.
type compatOutcome struct {
	status string // works | differs | refused
	note   string // how it differs, or why it is refused
}

type compatRow struct {
	client, op string
	want       string // the expected status
	run        func(t *testing.T, e *compatEnv) compatOutcome
}

type compatEnv struct {
	n       *node
	natsBin string
	nodeBin string
	jsDir   string
	curl    string
	nsqAddr string
	ctx     context.Context
}

// cli runs the nats CLI against the node (never fails the test itself).
func (e *compatEnv) cli(args ...string) (string, error) {
	return runCmd(e.natsBin, append([]string{"--server", e.n.url(), "--timeout", "10s"}, args...)...)
}

func (e *compatEnv) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(e.n.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func works() compatOutcome             { return compatOutcome{status: "works"} }
func refused(why string) compatOutcome { return compatOutcome{status: "refused", note: why} }
func broken(format string, a ...any) compatOutcome {
	return compatOutcome{status: "broken", note: fmt.Sprintf(format, a...)}
}

func TestClientCompat(t *testing.T) {
	e := &compatEnv{
		natsBin: requireTool(t, "nats", goBin("nats")),
		nodeBin: requireTool(t, "node"),
		curl:    requireTool(t, "curl"),
	}
	e.jsDir, _ = filepath.Abs(filepath.Join("testdata", "nodejs"))
	for _, pkg := range []string{"nats", "@nats-io/jetstream", "@nats-io/transport-node", "@nats-io/kv"} {
		if _, err := os.Stat(filepath.Join(e.jsDir, "node_modules", pkg, "package.json")); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed in %s (scripts/install-test-deps.sh), and CI=true", pkg, e.jsDir)
			}
			t.Skipf("%s is not installed in %s: run scripts/install-test-deps.sh", pkg, e.jsDir)
		}
	}
	e.n, e.nsqAddr = newNSQNode(t, "")
	e.n.start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // bounds a hang only
	defer cancel()
	e.ctx = ctx

	var table []string
	for _, row := range append(compatRows(), compatGroupRows()...) {
		t.Run(row.client+"/"+row.op, func(t *testing.T) {
			got := row.run(t, e)
			line := fmt.Sprintf("| %s | %s | %s |", row.client, row.op, got.status)
			if got.note != "" {
				line = fmt.Sprintf("| %s | %s | %s: %s |", row.client, row.op, got.status, got.note)
			}
			table = append(table, line)
			if got.status != row.want {
				t.Errorf("%s %s: %s (%s), want %s", row.client, row.op, got.status, got.note, row.want)
			}
		})
	}
	out := "| client | operation | result |\n|---|---|---|\n" + strings.Join(table, "\n") + "\n"
	t.Logf("client compatibility:\n%s", out)
	if path := os.Getenv("EDGEQ_E2E_COMPAT_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func compatRows() []compatRow {
	return []compatRow{
		{"nats.js v3", "`js.publish(subj, data)` without options", "works", nodePublish("v3")},
		{"nats.js v2", "`js.publish(subj, data)` without options", "works", nodePublish("v2")},
		{"nats.js v3", "`js.publish` to `telemetry.a.b`", "refused", nodeRefused("v3")},
		{"nats.js v2", "`js.publish` to `telemetry.a.b`", "refused", nodeRefused("v2")},
		{"nats.go jetstream", "`js.Publish` to `telemetry.a.b`", "refused", goRefused},
		{"nats.go jetstream", "`PubAck.Sequence` = `Metadata().Sequence.Stream`", "differs", pubAckSequence},
		{"natscli", "`nats bench js pub sync telemetry --multisubject`", "works", benchMultisubject("telemetry", "synchronous publisher stats")},
		{"natscli", "`nats bench js pub sync telemetry.bench --multisubject`", "refused", benchMultisubject("telemetry.bench", "invalid device ID")},
		{"natscli", "`nats sub 'telemetry.>' --queue Q --ack --count 5`", "works", subAckCount},
		{"nats.go jetstream", "pull: A fetches 1, acks, stops; B fetches", "works", pullHandOver},
		{"natscli", "`nats consumer next --count 5`, then another worker", "works", consumerNext},
		{"go-nsq", "`Producer.Publish` and a `Consumer` on a channel", "works", nsqRoundTrip},
		{"curl", "5 MB `POST /v1/publish` (default `Expect: 100-continue`)", "works", curlTooBig},
		{"curl", "`--data-binary` publish: transport headers not stored", "works", curlHeaders},
		{"natscli", "`nats stream get TELEMETRY <seq>`", "works", cliStreamGetSeq},
		{"natscli", "`nats stream get TELEMETRY --last-for telemetry.<device>`", "works", cliStreamGetLastFor},
		{"nats.go jetstream", "`Stream.GetMsg(seq)`, `GetLastMsgForSubject` (direct get)", "works", goGetMsg},
		{"nats.js v3", "`jsm.streams.getMessage(stream, {last_by_subj})`", "works", nodeGetLast},
		{"natscli", "`nats kv get telemetry <device>`", "works", cliKVGet},
		{"natscli", "`nats kv watch telemetry <device>`", "works", cliKVWatch},
		{"natscli", "`nats kv put telemetry <device> x`", "refused", cliKVPut},
		{"nats.go jetstream", "`KeyValue(\"telemetry\")`: `Get`, `Watch` (last value, marker, new readings)", "works", goKV},
		{"nats.go jetstream", "`KeyValue.Put`, `Delete`", "refused", goKVPut},
		{"nats.js v3", "`Kvm.open(\"telemetry\")`: `get`, `watch`, `put`", "works", nodeKV},
		{"natscli", "`nats sub --stream TELEMETRY telemetry.<device> --all`", "works", cliSubStream("--all", []string{"s1", "s2", "s3"}, "")},
		{"natscli", "`nats sub --stream TELEMETRY telemetry.<device> --last`", "works", cliSubStream("--last", []string{"s3"}, "")},
		{"natscli", "`nats sub --stream TELEMETRY telemetry.<device> --last-per-subject`", "works", cliSubStream("--last-per-subject", []string{"s3"}, "")},
		{"natscli", "`nats sub --stream TELEMETRY telemetry.<device> --since 1h`", "works", cliSubStream("--since", []string{"s1", "s2", "s3"}, "")},
		{"natscli", "`nats sub --stream TELEMETRY telemetry.<device> --new`", "works", cliSubStream("--new", []string{"s4"}, "s4")},
		{"nats.go jetstream", "`OrderedConsumer` + `Consume`: backlog, then a new reading; no queue group", "works", goOrdered},
		{"natscli", "`nats bench js ordered`", "works", cliBenchOrdered},
		{"nats.js v3", "ordered consumer (`js.consumers.get(stream, {filter_subjects})`) `fetch`", "works", nodeOrdered},
		{"nats.js v2", "`js.views.kv(\"telemetry\")`: `get`, `watch`, `put`", "works", nodeKVv2},
		{"nats.js v2", "ordered consumer (`js.consumers.get(stream, {filterSubjects})`) `fetch`", "works", nodeOrderedV2},
		{"natscli", "`nats server check message --stream TELEMETRY --subject telemetry.<device>`", "works", cliCheckMessage},
	}
}

// nodeScript runs testdata/nodejs/publish.mjs with nats.js v2 or v3.
func nodeScript(t *testing.T, e *compatEnv, which string) (string, error) {
	cmd := exec.Command(e.nodeBin, filepath.Join(e.jsDir, "publish.mjs"), which)
	cmd.Dir = e.jsDir
	cmd.Env = append(os.Environ(), "NATS_URL="+strings.TrimPrefix(e.n.url(), "nats://"))
	return runCmdStd(cmd)
}

func nodePublish(which string) func(*testing.T, *compatEnv) compatOutcome {
	return func(t *testing.T, e *compatEnv) compatOutcome {
		out, err := nodeScript(t, e, which)
		if err != nil || !strings.Contains(out, "nats.js "+which+" ok: acked 3") {
			return broken("%v: %s", err, lastLine(out))
		}
		return works()
	}
}

func nodeRefused(which string) func(*testing.T, *compatEnv) compatOutcome {
	return func(t *testing.T, e *compatEnv) compatOutcome {
		out, err := nodeScript(t, e, which)
		if err != nil {
			return broken("%v: %s", err, lastLine(out))
		}
		// v2 lower-cases the description in err.message; the API error keeps it.
		if !strings.Contains(strings.ToLower(out), "invalid device id") || !strings.Contains(out, `"err_code":10003`) {
			return broken("no JetStream error with the reason: %s", lastLine(out))
		}
		return refused("JetStream error 400/10003 naming the bad device ID")
	}
}

func goRefused(t *testing.T, e *compatEnv) compatOutcome {
	_, err := e.js(t).Publish(e.ctx, "telemetry.a.b", []byte("x"))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10003 || !strings.Contains(apiErr.Description, "invalid device ID") {
		return broken("%v", err)
	}
	return refused("`*jetstream.APIError` 400/10003 naming the bad device ID")
}

func benchMultisubject(subject, want string) func(*testing.T, *compatEnv) compatOutcome {
	return func(t *testing.T, e *compatEnv) compatOutcome {
		out, err := e.cli("bench", "js", "pub", "sync", subject, "--multisubject", "--stream", "TELEMETRY", "--msgs", "20")
		if !strings.Contains(out, want) {
			return broken("%v: %s", err, lastLine(out))
		}
		if err != nil {
			return refused("each message's subject `" + subject + ".<n>` has two tokens after the prefix: \"invalid device ID\"")
		}
		return works()
	}
}

// subAckCount: natscli acks the last message after its auto-unsubscribe.
func subAckCount(t *testing.T, e *compatEnv) compatOutcome {
	done := make(chan string, 1)
	go func() {
		out, _ := e.cli("sub", "telemetry.>", "--queue", "Q", "--ack", "--count", "5")
		done <- out
	}()
	waitMembers(t, e.n, "Q", 1)
	for i := range 5 {
		if out, err := e.cli("pub", fmt.Sprintf("telemetry.sub-%d", i), "x"); err != nil {
			t.Fatalf("nats pub: %v %s", err, out)
		}
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // bounds a hang only
		return broken("nats sub did not end")
	}
	foreign0 := metricValue(t, e.n, "edgeq_nats_foreign_acks_total")
	acked := func() float64 {
		gs, _ := statusJSON(t, e.n, "")["groups"].([]any)
		for _, g := range gs {
			if g, _ := g.(map[string]any); g["queue"] == "Q" {
				a, _ := g["acked"].(float64)
				return a
			}
		}
		return -1
	}
	waitFor(t, "5 acks or a refused one", time.Minute, func() bool {
		return acked() >= 5 || metricValue(t, e.n, "edgeq_nats_foreign_acks_total") > foreign0
	})
	if a := acked(); a != 5 {
		return broken("%v acked, foreign acks %v", a, metricValue(t, e.n, "edgeq_nats_foreign_acks_total"))
	}
	return works()
}

func pullHandOver(t *testing.T, e *compatEnv) compatOutcome {
	js := e.js(t)
	if _, err := js.CreateOrUpdateConsumer(e.ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "handover", AckWait: time.Hour,
		FilterSubject: "telemetry.ho-1", DeliverPolicy: jetstream.DeliverAllPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := js.Publish(e.ctx, "telemetry.ho-1", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	cons := func() jetstream.Consumer {
		c, err := e.js(t).Consumer(e.ctx, "TELEMETRY", "handover")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := cons(), cons()
	if m := fetchAck(t, e.ctx, a); m == nil || string(m.Data()) != "m1" {
		return broken("A's fetch: %v", m)
	}
	m := fetchAck(t, e.ctx, b) // a minute bounds a hang; ack_wait is an hour
	if m == nil {
		return broken("B got nothing: the message waits at A, which no longer pulls")
	}
	if md, _ := m.Metadata(); string(m.Data()) != "m2" || md.NumDelivered != 1 {
		return broken("B got %q as delivery %d", m.Data(), md.NumDelivered)
	}
	info, err := b.Info(e.ctx)
	if err != nil || info.NumAckPending != 0 {
		return broken("num_ack_pending %v (%v)", info.NumAckPending, err)
	}
	return works()
}

// fetchAck fetches one message within a minute and acks it synchronously.
func fetchAck(t *testing.T, ctx context.Context, c jetstream.Consumer) jetstream.Msg {
	t.Helper()
	b, err := c.Fetch(1, jetstream.FetchMaxWait(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	m := <-b.Messages()
	if m != nil {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func consumerNext(t *testing.T, e *compatEnv) compatOutcome {
	js := e.js(t)
	if _, err := js.CreateOrUpdateConsumer(e.ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "next5", AckWait: time.Hour,
		FilterSubject: "telemetry.next-1", DeliverPolicy: jetstream.DeliverAllPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if _, err := js.Publish(e.ctx, "telemetry.next-1", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := e.cli("consumer", "next", "TELEMETRY", "next5", "--count", "5")
	if err != nil || strings.Count(out, "Acknowledged message") != 5 {
		return broken("nats consumer next: %v %s", err, lastLine(out))
	}
	c, err := js.Consumer(e.ctx, "TELEMETRY", "next5")
	if err != nil {
		t.Fatal(err)
	}
	m := fetchAck(t, e.ctx, c)
	if m == nil {
		return broken("the sixth message did not come")
	}
	if md, _ := m.Metadata(); string(m.Data()) != "m6" || md.NumDelivered != 1 {
		return broken("the next worker got %q as delivery %d", m.Data(), md.NumDelivered)
	}
	return works()
}

func curlTooBig(t *testing.T, e *compatEnv) compatOutcome {
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, make([]byte, 5<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(e.curl, "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}", "--data-binary", "@"+big, e.n.httpURL()+"/v1/publish/big-1")
	if err != nil || !strings.HasPrefix(out, "413 ") {
		return broken("curl: %v %s", err, out)
	}
	if !strings.HasSuffix(strings.TrimSpace(out), " 0") {
		return compatOutcome{status: "differs", note: "413 after part of the body was sent: " + out}
	}
	return compatOutcome{status: "works", note: "413 before the body (curl sends none of it)"}
}

func curlHeaders(t *testing.T, e *compatEnv) compatOutcome {
	nc, err := nats.Connect(e.n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("telemetry.curl-1") // the live tail
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	waitFor(t, "the tail subscription", time.Minute, func() bool {
		out, err := runCmd(e.curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", `{"t":1}`, "-H", "Edgeq-H-Site: plant-1", e.n.httpURL()+"/v1/publish/curl-1")
		if err != nil || out != "200" {
			t.Fatalf("curl: %v %s", err, out)
		}
		m, err := sub.NextMsg(time.Second)
		if err != nil {
			return false
		}
		for k := range m.Header {
			if !strings.HasPrefix(k, "Edgeq-") && k != "Site" {
				t.Logf("stored header %s: %v", k, m.Header[k])
				sub.Unsubscribe()
				sub = nil
				return true
			}
		}
		if m.Header.Get("Site") != "plant-1" {
			t.Fatalf("Edgeq-H-Site not stored: %v", m.Header)
		}
		return true
	})
	if sub == nil {
		return broken("a transport header was stored (see log)")
	}
	return compatOutcome{status: "works", note: "only `Edgeq-H-<Key>` headers (and a Content-Type other than curl's form default) are stored"}
}

func cliRefused(args []string, want string) func(*testing.T, *compatEnv) compatOutcome {
	return func(t *testing.T, e *compatEnv) compatOutcome {
		out, err := e.cli(args...)
		if err == nil {
			return works()
		}
		if !strings.Contains(strings.ToLower(out), want) {
			return broken("%v: %s", err, lastLine(out))
		}
		return refused(strings.TrimSpace(lastLine(out)))
	}
}

// lastLine is the last line of a tool's output, or for a crashed node
// script the line that names the error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := lines[len(lines)-1]
	for _, line := range lines {
		if strings.Contains(line, "Error") && !strings.HasPrefix(strings.TrimSpace(line), "at ") {
			l = line
			break
		}
	}
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	return l
}

func nsqRoundTrip(t *testing.T, e *compatEnv) compatOutcome {
	got := make(chan string, 16)
	c, err := nsq.NewConsumer("telemetry", "compat", nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetLogger(nil, nsq.LogLevelError)
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		got <- string(m.Body)
		return nil
	}))
	if err := c.ConnectToNSQD(e.nsqAddr); err != nil {
		return broken("consumer: %v", err)
	}
	defer c.Stop()
	waitMembers(t, e.n, "compat", 1) // a new channel starts with new messages
	p := nsqProducer(t, e.nsqAddr)
	for i := range 3 {
		if err := p.Publish("telemetry", fmt.Appendf(nil, `{"device":"nsq-%d","n":1}`, i)); err != nil {
			return broken("publish: %v", err)
		}
	}
	for range 3 {
		select {
		case <-got:
		case <-time.After(time.Minute): // bounds a hang only
			return broken("a message did not come")
		}
	}
	return works()
}

func pubAckSequence(t *testing.T, e *compatEnv) compatOutcome {
	js := e.js(t)
	var last *jetstream.PubAck
	for range 2 {
		a, err := js.Publish(e.ctx, "telemetry.seq-1", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		last = a
	}
	c, err := js.CreateOrUpdateConsumer(e.ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "seq", FilterSubject: "telemetry.seq-1",
		DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var stream uint64
	for range 2 {
		m := fetchAck(t, e.ctx, c)
		if m == nil {
			return broken("a message did not come")
		}
		md, _ := m.Metadata()
		stream = md.Sequence.Stream
	}
	if last.Sequence == stream {
		return works()
	}
	if last.Sequence != 2 {
		return broken("PubAck.Sequence %d of the device's second message", last.Sequence)
	}
	return compatOutcome{status: "differs", note: "`PubAck.Sequence` is the device's sequence (2 for its second message); the stream sequence is offset × 2048 + partition (docs/jetstream.md)"}
}
