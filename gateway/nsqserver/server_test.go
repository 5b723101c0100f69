package nsqserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"

	"edgeq/gateway/groups"
	"edgeq/internal/connset"
	"edgeq/wal"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type rig struct {
	s    *Server
	log  *wal.Log
	reg  *groups.Registry
	addr string
}

func newRig(t *testing.T, mutate func(*Config)) *rig {
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
	qc.AckWait = 2 * time.Second
	r := &rig{log: l}
	r.reg = groups.NewRegistry(groups.Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: qc, GroupTTL: time.Hour, MaxGroups: 8}, l, quiet())
	cfg := Config{Listen: "127.0.0.1:0", TelemetryPrefix: "telemetry", DeviceField: "device", MaxRdyCount: 100,
		MaxMsgSize: 1 << 20, MaxBodySize: 4 << 20, MaxConnections: 16, MaxPending: 8 << 20, MaxPendingPubs: 64,
		HeartbeatInterval: 2 * time.Second, MaxReqTimeout: time.Minute, WriteDeadline: 2 * time.Second,
		AckWait: qc.AckWait, NodeID: "n1", Version: "0.0.0-test"}
	if mutate != nil {
		mutate(&cfg)
	}
	r.s = New(cfg, l, r.reg, quiet())
	if err := r.s.Start(); err != nil {
		t.Fatal(err)
	}
	r.addr = r.s.Addr().String()
	t.Cleanup(func() {
		ctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		defer c()
		_ = r.s.Shutdown(ctx)
		r.reg.Drain(time.Now().Add(time.Second))
		l.Close()
	})
	return r
}

func nsqConfig() *nsq.Config {
	c := nsq.NewConfig()
	c.MaxInFlight = 8
	c.LookupdPollInterval = time.Second
	return c
}

func producer(t *testing.T, r *rig) *nsq.Producer {
	t.Helper()
	p, err := nsq.NewProducer(r.addr, nsqConfig())
	if err != nil {
		t.Fatal(err)
	}
	p.SetLogger(nil, nsq.LogLevelError)
	t.Cleanup(p.Stop)
	return p
}

// TestPublishConsume: go-nsq Publish, MultiPublish and a consumer with FIN;
// messages come in per-device order with attempts and timestamps.
func TestPublishConsume(t *testing.T) {
	r := newRig(t, nil)
	p := producer(t, r)
	for i := 1; i <= 10; i++ {
		if err := p.Publish("telemetry", fmt.Appendf(nil, `{"device":"d%d","n":%d}`, i%2, i)); err != nil {
			t.Fatal(err)
		}
	}
	var batch [][]byte
	for i := 11; i <= 20; i++ {
		batch = append(batch, fmt.Appendf(nil, `{"n":%d}`, i))
	}
	if err := p.MultiPublish("telemetry.d9", batch); err != nil {
		t.Fatal(err)
	}
	// Durable when OK came back.
	if got := r.log.Durable(0) + r.log.Durable(1) + r.log.Durable(2); got != 20 {
		t.Fatalf("durable after OKs: %d, want 20", got)
	}
	if err := p.Publish("telemetry", []byte(`{"n":1}`)); err == nil {
		t.Fatal("publish without a device ID: no error")
	}
	if err := p.Publish("other", []byte(`x`)); err == nil {
		t.Fatal("publish to another topic: no error")
	}
	if err := p.DeferredPublish("telemetry.d1", time.Second, []byte(`x`)); err == nil {
		t.Fatal("DPUB: no error")
	}
	if err := p.Publish("telemetry.d9", []byte(`{"n":21}`)); err != nil {
		t.Fatal("publish after errors:", err)
	}

	c, err := nsq.NewConsumer("telemetry", "work", nsqConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetLogger(nil, nsq.LogLevelError)
	var mu sync.Mutex
	last := map[string]int{}
	got := 0
	done := make(chan struct{})
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		var v struct {
			Device string `json:"device"`
			N      int    `json:"n"`
		}
		_ = json.Unmarshal(m.Body, &v)
		if v.Device == "" {
			v.Device = "d9"
		}
		mu.Lock()
		defer mu.Unlock()
		if v.N <= last[v.Device] {
			t.Errorf("device %s: %d after %d", v.Device, v.N, last[v.Device])
		}
		last[v.Device] = v.N
		if m.Attempts != 1 || time.Since(time.Unix(0, m.Timestamp)) > time.Minute {
			t.Errorf("attempts %d timestamp %d", m.Attempts, m.Timestamp)
		}
		if got++; got == 21 {
			close(done)
		}
		return nil
	}))
	if err := c.ConnectToNSQD(r.addr); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("got %d of 21", got)
	}
	waitFor(t, func() bool { return r.s.stats.Fin.Load() == 21 })
	if n := r.s.stats.RdyExceeded.Load(); n != 0 {
		t.Fatalf("RDY exceeded %d times", n)
	}
}

// TestReqTouch: REQ redelivers with a higher attempt count after its delay;
// TOUCH keeps a message past msg_timeout.
func TestReqTouch(t *testing.T) {
	r := newRig(t, nil)
	p := producer(t, r)
	if err := p.Publish("telemetry.a", []byte("one")); err != nil {
		t.Fatal(err)
	}
	cfg := nsqConfig()
	cfg.MaxInFlight = 1
	cfg.MaxBackoffDuration = 0
	c, _ := nsq.NewConsumer("telemetry", "w", cfg)
	c.SetLogger(nil, nsq.LogLevelError)
	type seen struct {
		attempts uint16
		at       time.Time
	}
	ch := make(chan seen, 4)
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		m.DisableAutoResponse()
		ch <- seen{m.Attempts, time.Now()}
		switch m.Attempts {
		case 1:
			m.RequeueWithoutBackoff(300 * time.Millisecond)
		case 2:
			// Hold it past msg_timeout (2s), touching it: every 250ms,
			// so that only a stall of 1.75s (not 1.5s) on a loaded
			// machine could let the timeout expire between two touches.
			for range 12 {
				time.Sleep(250 * time.Millisecond)
				m.Touch()
			}
			m.Finish()
		}
		return nil
	}))
	if err := c.ConnectToNSQD(r.addr); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	first := <-ch
	second := <-ch
	if first.attempts != 1 || second.attempts != 2 || second.at.Sub(first.at) < 250*time.Millisecond {
		t.Fatalf("REQ: %+v then %+v", first, second)
	}
	select {
	case s := <-ch:
		t.Fatalf("redelivered although touched: %+v", s)
	case <-time.After(4 * time.Second):
	}
	waitFor(t, func() bool {
		return r.s.stats.Fin.Load() == 1 && r.s.stats.Touch.Load() >= 5 && r.s.stats.Req.Load() == 1
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // bounds a hang only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rawConn speaks the protocol by hand, for what clients do not send.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, r *rig) *rawConn {
	nc, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = nc.Write([]byte(Magic))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(s string, body []byte) {
	b := []byte(s + "\n")
	if body != nil {
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// frame reads the next frame that is not a heartbeat.
func (c *rawConn) frame() (int32, []byte, error) {
	for {
		var h [8]byte
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return 0, nil, err
		}
		data := make([]byte, binary.BigEndian.Uint32(h[:4])-4)
		if _, err := io.ReadFull(c.br, data); err != nil {
			return 0, nil, err
		}
		ft := int32(binary.BigEndian.Uint32(h[4:]))
		if ft == FrameResponse && string(data) == "_heartbeat_" {
			continue
		}
		return ft, data, nil
	}
}

func (c *rawConn) expect(ft int32, prefix string) []byte {
	c.t.Helper()
	got, data, err := c.frame()
	if err != nil {
		c.t.Fatalf("want %d %q: %v", ft, prefix, err)
	}
	if got != ft || len(data) < len(prefix) || string(data[:len(prefix)]) != prefix {
		c.t.Fatalf("got frame %d %q, want %d %q", got, data, ft, prefix)
	}
	return data
}

func (c *rawConn) expectClosed() {
	c.t.Helper()
	if _, data, err := c.frame(); err == nil {
		c.t.Fatalf("connection still open: %q", data)
	}
}

// TestErrors: errors as nsqd gives them; a fatal one closes the connection
// and what it held is delivered again.
func TestErrors(t *testing.T) {
	r := newRig(t, nil)
	p := producer(t, r)
	if err := p.Publish("telemetry.a", []byte("one")); err != nil {
		t.Fatal(err)
	}

	c := dialRaw(t, r)
	c.send("IDENTIFY", []byte(`{"feature_negotiation":true,"tls_v1":true,"snappy":true,"deflate":true}`))
	data := c.expect(FrameResponse, "{")
	var id identifyResponse
	if err := json.Unmarshal(data, &id); err != nil || id.TLSv1 || id.Snappy || id.Deflate || id.MaxRdyCount != 100 || id.MsgTimeout != 2000 {
		t.Fatalf("IDENTIFY: %s %v", data, err)
	}
	c.send("FIN 0000000000000001", nil)
	c.expect(FrameError, "E_INVALID cannot FIN in current state")
	c.expectClosed()

	c = dialRaw(t, r)
	c.send("SUB telemetry w", nil)
	c.expect(FrameResponse, "OK")
	c.send("RDY 1", nil)
	msg := c.expect(FrameMessage, "")
	msgID := string(msg[10:26])
	c.send("FIN 00000000000000ff", nil)
	c.expect(FrameError, "E_FIN_FAILED FIN 00000000000000ff failed ID not in flight")
	c.send("TOUCH zzzzzzzzzzzzzzzz", nil)
	c.expect(FrameError, "E_TOUCH_FAILED")
	c.send("RDY 101", nil)
	c.expect(FrameError, "E_INVALID RDY count 101 out of range 0-100")
	c.expectClosed()

	// Another connection on the same channel gets the message the closed
	// one held, and its ID from the first connection means nothing here.
	c2 := dialRaw(t, r)
	c2.send("SUB telemetry w", nil)
	c2.expect(FrameResponse, "OK")
	c2.send("FIN "+msgID, nil)
	c2.expect(FrameError, "E_FIN_FAILED")
	c2.send("RDY 1", nil)
	msg = c2.expect(FrameMessage, "")
	if binary.BigEndian.Uint16(msg[8:10]) != 2 || string(msg[26:]) != "one" {
		t.Fatalf("redelivery: %q", msg)
	}
	c2.send("FIN "+string(msg[10:26]), nil)
	c2.send("CLS", nil)
	c2.expect(FrameResponse, "CLOSE_WAIT")

	c3 := dialRaw(t, r)
	c3.send("BOGUS x", nil)
	c3.expect(FrameError, "E_INVALID invalid command")
	c3.expectClosed()

	c4 := dialRaw(t, r)
	c4.send("PUB telemetry.a", []byte{})
	c4.expect(FrameError, "E_BAD_MESSAGE PUB invalid body size 0")
	c4.expectClosed()

	c5 := dialRaw(t, r)
	c5.send("AUTH", []byte("x"))
	c5.expect(FrameError, "E_AUTH_DISABLED")

	waitFor(t, func() bool { return r.s.stats.Fin.Load() == 1 })
	if n := r.s.stats.RdyExceeded.Load(); n != 0 {
		t.Fatalf("RDY exceeded %d", n)
	}
}

// TestAuth: with a token, commands before AUTH are refused; go-nsq's
// AuthSecret works.
func TestAuth(t *testing.T) {
	r := newRig(t, func(c *Config) { c.AuthToken = "s3cret-token" })
	c := dialRaw(t, r)
	c.send("PUB telemetry.a", []byte("x"))
	c.expect(FrameError, "E_AUTH_FIRST AUTH required before PUB")
	c.expectClosed()

	c = dialRaw(t, r)
	c.send("AUTH", []byte("wrong"))
	c.expect(FrameError, "E_AUTH_FAILED")
	c.expectClosed()

	cfg := nsqConfig()
	cfg.AuthSecret = "s3cret-token"
	p, _ := nsq.NewProducer(r.addr, cfg)
	p.SetLogger(nil, nsq.LogLevelError)
	defer p.Stop()
	if err := p.Publish("telemetry.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	cfg = nsqConfig()
	p2, _ := nsq.NewProducer(r.addr, cfg)
	p2.SetLogger(nil, nsq.LogLevelError)
	defer p2.Stop()
	if err := p2.Publish("telemetry.a", []byte("x")); err == nil {
		t.Fatal("publish without the secret: no error")
	}
}

// TestResponseOrder: pipelined publishes across partitions, some refused
// at once, get their answers in command order (go-nsq matches them FIFO).
func TestResponseOrder(t *testing.T) {
	r := newRig(t, nil)
	p := producer(t, r)
	const n = 300
	done := make(chan *nsq.ProducerTransaction, n)
	for i := range n {
		body := fmt.Appendf(nil, `{"device":"dev-%d","i":%d}`, i%17, i)
		if i%3 == 2 {
			body = fmt.Appendf(nil, `{"i":%d}`, i) // no device: E_BAD_MESSAGE
		}
		if err := p.PublishAsync("telemetry", body, done, i); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		tr := <-done
		i := tr.Args[0].(int)
		if bad := i%3 == 2; bad != (tr.Error != nil) {
			t.Fatalf("publish %d: error %v", i, tr.Error)
		}
	}
	if got := r.s.stats.Published.Load(); got != n-n/3 {
		t.Fatalf("published %d, want %d", got, n-n/3)
	}
}

// TestDeliverAccounting: a delivery beyond RDY is counted; timed-out
// entries do not count and the ID table stays within its bound.
func TestDeliverAccounting(t *testing.T) {
	s := New(Config{MaxRdyCount: 4, MaxPending: 1 << 20, AckWait: time.Hour}, nil, nil, quiet())
	c := newConn(s, 1, nil)
	c.rdy = 2
	d := &groups.Delivery{Record: &wal.Record{Device: "a", Payload: []byte("x")}, Deliveries: 1,
		Ack: groups.AckHandle{Group: 1, Member: "m", Offset: 1, Deliveries: 1}}
	for range 2 {
		if !c.Deliver(d) {
			t.Fatal("refused")
		}
	}
	if s.stats.RdyExceeded.Load() != 0 {
		t.Fatal("counted within RDY")
	}
	c.Deliver(d)
	if s.stats.RdyExceeded.Load() != 1 {
		t.Fatal("a third delivery with RDY 2 not counted")
	}
	// Entries past ack_wait are the group's no more: not counted, and
	// dropped when the table fills.
	s.cfg.AckWait = time.Nanosecond
	c.rdy = 1
	for range 2 * c.maxIDs() {
		c.Deliver(d)
	}
	if s.stats.RdyExceeded.Load() != 1 || len(c.inflight) > c.maxIDs() {
		t.Fatalf("exceeded %d, table %d (bound %d)", s.stats.RdyExceeded.Load(), len(c.inflight), c.maxIDs())
	}
}

// TestGarbage: random bytes after the magic, on many connections, end
// those connections and nothing else: the server still serves a producer
// and a consumer afterwards.
func TestGarbage(t *testing.T) {
	r := newRig(t, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	seeds := [][]byte{[]byte("SUB telemetry w\nRDY 5\n"), []byte("PUB telemetry.x\n"), []byte("MPUB telemetry\n"), []byte("IDENTIFY\n")}
	for i := range 200 {
		nc, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		b := append([]byte(Magic), seeds[i%len(seeds)]...)
		junk := make([]byte, rng.IntN(512))
		for j := range junk {
			junk[j] = byte(rng.UintN(256))
		}
		_, _ = nc.Write(append(b, junk...))
		_ = nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, _ = io.Copy(io.Discard, nc)
		nc.Close()
	}
	p := producer(t, r)
	if err := p.Publish("telemetry.after", []byte("still here")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return r.s.stats.Connections.Load() == 1 })
}

// TestEphemeralChannelGoesWithLastConsumer: as in nsqd, a channel named
// "<name>#ephemeral" (nsq_tail without --channel) is removed when its last
// consumer disconnects, instead of pinning retention for group_ttl; an
// ordinary channel stays.
func TestEphemeralChannelGoesWithLastConsumer(t *testing.T) {
	r := newRig(t, nil)
	has := func(queue string) bool {
		for _, g := range r.reg.Stats() {
			if g.Key.Queue == queue {
				return true
			}
		}
		return false
	}
	consume := func(channel string) *nsq.Consumer {
		c, err := nsq.NewConsumer("telemetry", channel, nsqConfig())
		if err != nil {
			t.Fatal(err)
		}
		c.SetLogger(nil, nsq.LogLevelError)
		c.AddHandler(nsq.HandlerFunc(func(*nsq.Message) error { return nil }))
		if err := c.ConnectToNSQD(r.addr); err != nil {
			t.Fatal(err)
		}
		return c
	}
	tail1, tail2, work := consume("tail#ephemeral"), consume("tail#ephemeral"), consume("work")
	waitFor(t, func() bool { return has("tail#ephemeral") && has("work") })
	tail1.Stop()
	<-tail1.StopChan
	if !has("tail#ephemeral") {
		t.Fatal("the ephemeral channel went while a consumer was left")
	}
	tail2.Stop()
	work.Stop()
	<-tail2.StopChan
	<-work.StopChan
	waitFor(t, func() bool { return !has("tail#ephemeral") })
	if !has("work") {
		t.Fatal("an ordinary channel went with its last consumer")
	}
}

// TestCloseReasons: every NSQ connection that ends is counted once, by the
// first cause (the reasons the NATS server counts too): a bad magic and a
// bad command are protocol errors, a wrong secret an auth violation, a
// client that says nothing for two heartbeats is stale, a client that
// hangs up is "client", and the node stopping is "server_shutdown".
func TestCloseReasons(t *testing.T) {
	r := newRig(t, func(c *Config) {
		c.AuthToken = "s3cret-token"
		c.HeartbeatInterval = 100 * time.Millisecond
	})
	st := r.s.Counters()

	nc, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write([]byte("  V9"))
	_, _ = io.Copy(io.Discard, nc)
	nc.Close()

	c := dialRaw(t, r)
	c.send("AUTH", []byte("wrong"))
	c.expect(FrameError, "E_AUTH_FAILED")
	c.expectClosed()

	c = dialRaw(t, r)
	c.send("NONSENSE", nil)
	c.expect(FrameError, "E_INVALID")
	c.expectClosed()

	c = dialRaw(t, r) // says nothing after the magic: two heartbeats pass
	c.expectClosed()

	c = dialRaw(t, r)
	c.send("NOP", nil)
	c.nc.Close()

	waitFor(t, func() bool {
		return st.Closed(connset.ClosedProtocolError) == 2 && st.Closed(connset.ClosedAuthViolation) == 1 &&
			st.Closed(connset.ClosedStale) == 1 && st.Closed(connset.ClosedByClient) == 1
	})

	c = dialRaw(t, r)
	c.send("NOP", nil)
	waitFor(t, func() bool { return st.Connections.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st.Closed(connset.ClosedServerShutdown); got != 1 {
		t.Fatalf("server_shutdown closes %d, want 1", got)
	}
	for _, reason := range []connset.CloseReason{connset.ClosedSlowConsumer, connset.ClosedWriteTimeout, connset.ClosedWriteError, connset.ClosedTLSHandshake} {
		if n := st.Closed(reason); n != 0 {
			t.Errorf("%s closes %d, want 0", reason, n)
		}
	}
	if n, total := st.Connections.Load(), st.TotalConnections.Load(); n != 0 || total != 6 {
		t.Fatalf("connections %d open, %d total; want 0, 6", n, total)
	}
}
