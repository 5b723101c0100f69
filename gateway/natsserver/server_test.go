package natsserver

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"edgeq/gateway/groups"
	"edgeq/gateway/natsproto"
	"edgeq/wal"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// rig is a server on a real log with a registry and a live tail, on a
// loopback port.
type rig struct {
	s   *Server
	log *wal.Log
	reg *groups.Registry
	url string
}

func newRig(t *testing.T, mutate func(*Config)) *rig {
	t.Helper()
	return newRigWith(t, func(_ *rig, c *Config) {
		if mutate != nil {
			mutate(c)
		}
	})
}

// newRigWith is newRig with a mutate that sees the log and registry.
func newRigWith(t *testing.T, mutate func(*rig, *Config)) *rig {
	t.Helper()
	return newRigAckWait(t, 500*time.Millisecond, mutate)
}

// newRigAckWait is newRigWith with the groups' ack_wait.
func newRigAckWait(t *testing.T, ackWait time.Duration, mutate func(*rig, *Config)) *rig {
	t.Helper()
	o := wal.DefaultOptions()
	o.Partitions, o.HotPartitions = 2, 1
	o.FsyncInterval = time.Millisecond
	l, err := wal.Open(t.TempDir(), o, quiet())
	if err != nil {
		t.Fatal(err)
	}
	qc := groups.DefaultCoreConfig()
	qc.Deliver = groups.DeliverAll
	qc.AckWait = ackWait
	r := &rig{log: l}
	r.reg = groups.NewRegistry(groups.Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: qc, GroupTTL: time.Hour, MaxGroups: 8,
		DeadLetters: func(q string, d *groups.Delivery, reason string) { r.s.PublishDeadLetter(q, d, reason) }}, l, quiet())
	tail := groups.NewTail(l, "telemetry", "n1", quiet())
	cfg := Config{Listen: "127.0.0.1:0", TelemetryPrefix: "telemetry", MaxPayload: 1 << 20, MaxControlLine: 4096,
		MaxConnections: 64, MaxSubscriptions: 64, MaxPending: 8 << 20, WriteDeadline: 2 * time.Second,
		PingInterval: time.Minute, MaxPingsOut: 2, AuthTimeout: 2 * time.Second, NodeID: "n1", Version: InfoVersion("0.0.0-test"), EdgeqVersion: "0.0.0-test",
		MaxGroupsPerConn: 8}
	mutate(r, &cfg)
	r.s = New(cfg, l, r.reg, tail, quiet())
	if err := r.s.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go tail.Run(ctx)
	r.url = "nats://" + r.s.Addr().String()
	t.Cleanup(func() {
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		defer c()
		_ = r.s.Shutdown(sctx)
		r.reg.Drain(time.Now().Add(time.Second))
		l.Close()
	})
	return r
}

func (r *rig) connect(t *testing.T, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(r.url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (r *rig) group(t *testing.T) groups.GroupStats {
	t.Helper()
	st := r.reg.Stats()
	if len(st) != 1 {
		t.Fatalf("groups: %+v", st)
	}
	return st[0]
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAckSubjectRoundTrip(t *testing.T) {
	h := groups.AckHandle{Group: 3, Member: "gw-a/7f3a/c7-2", Partition: 2051, Offset: 99, Deliveries: 2}
	subj := appendAckSubject(nil, h)
	if string(subj) != "$EQ.ACK.3.gw-a/7f3a/c7-2.2051.99.2" {
		t.Fatalf("subject %s", subj)
	}
	got, member, err := parseAckSubject(subj)
	got.Member = groups.MemberID(member)
	if err != nil || got != h {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, s := range []string{"$EQ.ACK.1.m.2.3", "$EQ.ACK.x.m.1.2.3", "$EQ.ACK.1.m.1.0.1", "$EQ.ACK.1..1.2.1",
		"$EQ.ACK.1.m.1.2.1.9", "$EQ.ACK.1.m.1.99999999999999999999.1", "$EQ.ACK.1.m.-1.2.1", "foo"} {
		if _, _, err := parseAckSubject([]byte(s)); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestParseAckPayload(t *testing.T) {
	cases := []struct {
		in    string
		kind  groups.AckKind
		delay time.Duration
		bad   bool
	}{
		{"", groups.AckDone, 0, false}, {"+ACK", groups.AckDone, 0, false}, {"+NXT 1", groups.AckDone, 0, false},
		{"-NAK", groups.AckNak, 0, false}, {`-NAK {"delay": 5000000000}`, groups.AckNak, 5 * time.Second, false},
		{"-NAK 250ms", groups.AckNak, 250 * time.Millisecond, false}, {"+WPI", groups.AckInProgress, 0, false},
		{"+TERM", groups.AckTerm, 0, false}, {"+TERM bad data", groups.AckTerm, 0, false},
		{"-NAK soon", 0, 0, true}, {`-NAK {"delay": -1}`, 0, 0, true}, {"hello", 0, 0, true}, {"+EQGONE", 0, 0, true},
	}
	for _, c := range cases {
		k, d, err := ParseAckPayload([]byte(c.in))
		if (err != nil) != c.bad || k != c.kind || d != c.delay {
			t.Errorf("%q: %v %v %v", c.in, k, d, err)
		}
	}
}

// TestDeliveryOnTheWire: a queue member gets HMSG on the device's subject
// with every Edgeq-* header and an ack subject; nats.go's Ack finishes it.
func TestDeliveryOnTheWire(t *testing.T) {
	r := newRig(t, nil)
	nc := r.connect(t)
	msgs := make(chan *nats.Msg, 4)
	if _, err := nc.ChanQueueSubscribe("telemetry.>", "q", msgs); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	if _, err := nc.Request("telemetry.sensor-1", []byte(`{"t":1}`), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var m *nats.Msg
	select {
	case m = <-msgs:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	if m.Subject != "telemetry.sensor-1" || string(m.Data) != `{"t":1}` || !strings.HasPrefix(m.Reply, AckPrefix) {
		t.Fatalf("delivery %q %q reply %q", m.Subject, m.Data, m.Reply)
	}
	want := map[string]string{HeaderDevice: "sensor-1", HeaderSeq: "1", HeaderNode: "n1", HeaderDeliveries: "1",
		HeaderSource: "nats", HeaderOffset: "1"}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if ns, err := strconv.ParseInt(m.Header.Get(HeaderTime), 10, 64); err != nil || time.Since(time.Unix(0, ns)) > time.Minute {
		t.Errorf("header %s = %q", HeaderTime, m.Header.Get(HeaderTime))
	}
	if err := m.Ack(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ack", 5*time.Second, func() bool { return r.group(t).Core.Acked == 1 })
}

// TestForeignAckRefused: another connection's +TERM or +ACK on a member's
// ack subject is refused and counted; the message stays with its member
// and is redelivered normally when that member does not answer.
func TestForeignAckRefused(t *testing.T) {
	r := newRig(t, nil)
	worker := r.connect(t)
	intruder := r.connect(t)
	msgs := make(chan *nats.Msg, 4)
	if _, err := worker.ChanQueueSubscribe("telemetry.>", "q", msgs); err != nil {
		t.Fatal(err)
	}
	worker.Flush()
	if _, err := intruder.Request("telemetry.dev-1", []byte("x"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var first *nats.Msg
	select {
	case first = <-msgs:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	for _, tok := range []string{"+TERM", "+ACK", "-NAK"} {
		if err := intruder.Publish(first.Reply, []byte(tok)); err != nil {
			t.Fatal(err)
		}
	}
	intruder.Flush()
	waitFor(t, "foreign acks counted", 5*time.Second, func() bool { return r.s.Counters().ForeignAcks.Load() == 3 })
	// Not acked: ack_wait (500ms) redelivers it to the worker, as the second delivery.
	var again *nats.Msg
	select {
	case again = <-msgs:
	case <-time.After(10 * time.Second):
		t.Fatal("no redelivery")
	}
	if again.Header.Get(HeaderDeliveries) != "2" || string(again.Data) != "x" {
		t.Fatalf("redelivery headers %v", again.Header)
	}
	if err := again.Ack(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker's ack", 5*time.Second, func() bool { return r.group(t).Core.Acked == 1 })
	if g := r.group(t).Core; g.DeadLetters != 0 {
		t.Fatalf("dead letters %d: a foreign +TERM took effect", g.DeadLetters)
	}
}

// TestCloseReasonsCounted: each way a connection ends is counted under its
// own reason.
func TestCloseReasonsCounted(t *testing.T) {
	r := newRig(t, func(c *Config) { c.AuthToken = "s3cret-token-for-tests" })
	// Wrong token: authorization violation.
	if _, err := nats.Connect(r.url, nats.Token("wrong"), nats.NoReconnect()); err == nil {
		t.Fatal("wrong token accepted")
	}
	// Garbage after CONNECT: a protocol error.
	raw, err := net.Dial("tcp", r.s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(raw)
	if _, err := br.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	io.WriteString(raw, "CONNECT {\"auth_token\":\"s3cret-token-for-tests\"}\r\nBOGUS\r\n")
	line, _ := br.ReadString('\n')
	if !strings.HasPrefix(line, "-ERR") {
		t.Fatalf("protocol error answered %q", line)
	}
	raw.Close()
	// A client that closes.
	nc := r.connect(t, nats.Token("s3cret-token-for-tests"))
	nc.Close()
	st := r.s.Counters()
	waitFor(t, "close reasons", 5*time.Second, func() bool {
		return st.Closed(ClosedAuthViolation) == 1 && st.Closed(ClosedProtocolError) == 1 && st.Closed(ClosedByClient) >= 1
	})
	if st.Closed(ClosedSlowConsumer) != 0 || st.Closed(ClosedServerShutdown) != 0 {
		t.Fatalf("unexpected reasons: slow %d shutdown %d", st.Closed(ClosedSlowConsumer), st.Closed(ClosedServerShutdown))
	}
}

// BenchmarkSendDelivery encodes a queue-group delivery into a connection's
// output buffer: no allocation per message.
func BenchmarkSendDelivery(b *testing.B) {
	s := &Server{cfg: Config{TelemetryPrefix: "telemetry", MaxPending: 64 << 20}}
	c := &conn{s: s, opts: optsWithHeaders()}
	c.Init()
	sb := &sub{c: c, sid: "1"}
	rec := wal.Record{Device: "sensor-0042", Seq: 812, Time: time.Now().UnixNano(), Source: "nats", Payload: make([]byte, 150)}
	d := groups.Delivery{Record: &rec, Node: "gw-1", Partition: 3, Offset: 81234, Deliveries: 1,
		Ack: groups.AckHandle{Group: 17, Member: "c4-1", Partition: 3, Offset: 81234, Deliveries: 1}}
	b.ReportAllocs()
	b.SetBytes(int64(len(rec.Payload)))
	for i := 0; i < b.N; i++ {
		if !c.sendDelivery(sb, &d) {
			b.Fatal("refused")
		}
		if len(c.Out) > 1<<20 {
			c.Out = c.Out[:0]
		}
		<-c.Wake()
	}
}

// BenchmarkParseAck reads an ack subject and payload as handleAck does,
// including the member lookup: no allocation per message.
func BenchmarkParseAck(b *testing.B) {
	subject := appendAckSubject(nil, groups.AckHandle{Group: 17, Member: "c4-1", Partition: 3, Offset: 81234, Deliveries: 1})
	members := map[string]*sub{"c4-1": {groupMember: "c4-1"}}
	payload := []byte("+ACK")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h, member, err := parseAckSubject(subject)
		if err != nil {
			b.Fatal(err)
		}
		kind, _, err := ParseAckPayload(payload)
		sb := members[string(member)]
		if err != nil || sb == nil || kind != groups.AckDone || h.Offset != 81234 {
			b.Fatal("bad parse")
		}
	}
}

func optsWithHeaders() natsproto.ConnectOptions {
	return natsproto.ConnectOptions{Headers: true}
}

// TestNoResponders: a request to a subject without subscribers is answered
// at once with the 503 status message nats.go turns into ErrNoResponders.
func TestNoResponders(t *testing.T) {
	r := newRig(t, nil)
	nc := r.connect(t)
	start := time.Now()
	_, err := nc.Request("nobody.here", []byte("x"), 5*time.Second)
	if err != nats.ErrNoResponders {
		t.Fatalf("request without subscribers: %v, want %v", err, nats.ErrNoResponders)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("answered after %v: the client waited for its timeout", waited)
	}
	// With a subscriber, the request goes through.
	if _, err := nc.Subscribe("somebody.here", func(m *nats.Msg) { _ = m.Respond([]byte("hi")) }); err != nil {
		t.Fatal(err)
	}
	if m, err := nc.Request("somebody.here", nil, 5*time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("request with a subscriber: %v %v", m, err)
	}
}
