package natsserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/jsapi"
)

// rawConn is a hand-driven client connection: it sends frames as a client
// library would put them on the wire and reads what comes back.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, r *rig) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", r.s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // bounds a hang only
	rc := &rawConn{t: t, c: c, br: bufio.NewReader(c)}
	if line := rc.line(); !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("first line %q", line)
	}
	rc.send(`CONNECT {"verbose":false,"headers":true,"no_responders":true}` + "\r\n")
	return rc
}

func (rc *rawConn) send(s string) {
	rc.t.Helper()
	if _, err := rc.c.Write([]byte(s)); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) line() string {
	rc.t.Helper()
	l, err := rc.br.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return strings.TrimRight(l, "\r\n")
}

// msg reads up to the next MSG or HMSG and returns its control line and body
// (headers included for HMSG).
func (rc *rawConn) msg() (string, string) {
	rc.t.Helper()
	for {
		l := rc.line()
		if !strings.HasPrefix(l, "MSG ") && !strings.HasPrefix(l, "HMSG ") {
			continue
		}
		f := strings.Fields(l)
		var n int
		fmt.Sscan(f[len(f)-1], &n)
		body := make([]byte, n+2)
		if _, err := ioReadFull(rc.br, body); err != nil {
			rc.t.Fatal(err)
		}
		return l, string(body[:n])
	}
}

func ioReadFull(br *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := br.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestHPubEmptyHeaderBlock: nats.js (v2 and v3) sends a JetStream publish
// without options as "HPUB subj reply 0 N", a header block of length 0.
// nats-server takes it as a message without headers; so does edgeq, for a
// telemetry publish (stored, pub-acked, no headers) and for a core subject
// (relayed as MSG, not as an HMSG with an empty block).
func TestHPubEmptyHeaderBlock(t *testing.T) {
	r := newJSRig(t)
	watcher := r.connect(t)
	sub, err := watcher.QueueSubscribeSync("telemetry.>", "w")
	if err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, r)
	rc.send("SUB _INBOX.r 1\r\nSUB core.x 2\r\n")
	rc.send("HPUB telemetry.js-dev _INBOX.r 0 5\r\nhello\r\n")
	line, body := rc.msg()
	if !strings.HasPrefix(line, "MSG _INBOX.r 1") {
		t.Fatalf("pub-ack frame %q %q", line, body)
	}
	var ack struct {
		Stream string          `json:"stream"`
		Seq    uint64          `json:"seq"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &ack); err != nil || ack.Error != nil || ack.Stream != "TELEMETRY" || ack.Seq != 1 {
		t.Fatalf("pub-ack %s (%v)", body, err)
	}
	m, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Data) != "hello" {
		t.Fatalf("stored payload %q", m.Data)
	}
	for k := range m.Header {
		if !strings.HasPrefix(k, "Edgeq-") {
			t.Fatalf("an empty header block stored header %q: %v", k, m.Header)
		}
	}
	// A core subject: relayed without headers, as nats-server does.
	rc.send("HPUB core.x 0 2\r\nhi\r\n")
	line, body = rc.msg()
	if line != "MSG core.x 2 2" || body != "hi" {
		t.Fatalf("core relay %q %q, want MSG core.x 2 2 / hi", line, body)
	}
}

// TestJetStreamPublishErrorShape: a refused telemetry publish answers in
// JetStream's error shape, so jetstream.Publish returns an *APIError with
// the reason instead of "invalid jetstream publish response".
func TestJetStreamPublishErrorShape(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := jsCtx(t)
	cases := []struct {
		name, subject string
		header        nats.Header
		want          string
	}{
		{"two tokens", "telemetry.a.b", nil, "invalid device ID"},
		{"bad byte", "telemetry.dev$1", nil, "invalid device ID"},
		{"too long", "telemetry." + strings.Repeat("d", 129), nil, "invalid device ID"},
		{"bad header", "telemetry.ok", nats.Header{"K": []string{"a\x01b"}}, "bad header block"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := &nats.Msg{Subject: c.subject, Data: []byte("x"), Header: c.header}
			_, err := js.PublishMsg(ctx, msg)
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("publish to %s: %v (%T), want a JetStream API error", c.subject, err, err)
			}
			if apiErr.Code != 400 || apiErr.ErrorCode != jsapi.CodeBadRequest || !strings.Contains(apiErr.Description, c.want) {
				t.Fatalf("publish to %s: %+v, want 400/%d %q", c.subject, apiErr, jsapi.CodeBadRequest, c.want)
			}
		})
	}
	// The connection goes on: a good publish is acked.
	if _, err := js.Publish(ctx, "telemetry.ok", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// TestCorePublishErrorShapeWithoutJetStream: with JetStream off the answer
// keeps its plain shape, {"error":"..."}.
func TestCorePublishErrorShapeWithoutJetStream(t *testing.T) {
	r := newRig(t, nil)
	nc := r.connect(t)
	m, err := nc.Request("telemetry.a.b", []byte("x"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &ack); err != nil || !strings.Contains(ack.Error, "invalid device ID") {
		t.Fatalf("answer %s (%v)", m.Data, err)
	}
}

// TestAckAfterAutoUnsubscribe: natscli `sub --queue Q --ack --count N`
// auto-unsubscribes after N messages and acks the last one after the server
// removed the subscription. The connection still holds that message, so its
// ack is taken (not refused as foreign), nothing comes again, and the
// member leaves its group once it answered for everything.
func TestAckAfterAutoUnsubscribe(t *testing.T) {
	for _, how := range []string{"auto-unsubscribe", "unsubscribe"} {
		t.Run(how, func(t *testing.T) {
			r := newRigAckWait(t, time.Hour, func(*rig, *Config) {})
			nc := r.connect(t)
			sub, err := nc.QueueSubscribeSync("telemetry.>", "q")
			if err != nil {
				t.Fatal(err)
			}
			const n = 3
			if how == "auto-unsubscribe" {
				if err := sub.AutoUnsubscribe(n); err != nil {
					t.Fatal(err)
				}
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			pub := r.connect(t)
			for i := range n {
				if _, err := pub.Request(fmt.Sprintf("telemetry.dev-%d", i), []byte("x"), 30*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			var got []*nats.Msg
			for range n {
				m, err := sub.NextMsg(60 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
			}
			for _, m := range got[:n-1] {
				if err := m.Ack(); err != nil {
					t.Fatal(err)
				}
			}
			if how == "unsubscribe" {
				if err := sub.Unsubscribe(); err != nil {
					t.Fatal(err)
				}
			}
			// The server has dropped the subscription: nobody in the group
			// can take a message any more.
			waitFor(t, "the subscription gone", 60*time.Second, func() bool {
				for _, m := range r.group(t).Core.MemberList {
					if m.Credit > 0 {
						return false
					}
				}
				return true
			})
			if err := got[n-1].Ack(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the last ack taken or refused", 60*time.Second, func() bool {
				return r.group(t).Core.Acked == n || r.s.Counters().ForeignAcks.Load() > 0
			})
			if f := r.s.Counters().ForeignAcks.Load(); f != 0 {
				t.Fatalf("%d acks refused as foreign", f)
			}
			waitFor(t, "the member gone", 60*time.Second, func() bool { return len(r.group(t).Core.MemberList) == 0 })
			if g := r.group(t).Core; g.Redeliveries != 0 || g.LeaveRequeue != 0 || g.InFlight != 0 {
				t.Fatalf("after the acks: %+v", g)
			}
		})
	}
}

// TestUnsubscribedMemberLeavesAfterAckWait: a member that unsubscribes
// without answering for what it holds leaves its group after ack_wait (its
// message goes to another member) or when its connection closes; it never
// takes a new message after the UNSUB.
func TestUnsubscribedMemberLeavesAfterAckWait(t *testing.T) {
	r := newRigAckWait(t, time.Second, func(*rig, *Config) {})
	quitter := r.connect(t)
	sub, err := quitter.QueueSubscribeSync("telemetry.>", "q")
	if err != nil {
		t.Fatal(err)
	}
	quitter.Flush()
	pub := r.connect(t)
	if _, err := pub.Request("telemetry.dev-1", []byte("held"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	quitter.Flush()
	other := r.connect(t)
	sub2, err := other.QueueSubscribeSync("telemetry.>", "q")
	if err != nil {
		t.Fatal(err)
	}
	other.Flush()
	if _, err := pub.Request("telemetry.dev-2", []byte("new"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for len(seen) < 2 {
		m, err := sub2.NextMsg(60 * time.Second)
		if err != nil {
			t.Fatalf("after %v: %v", seen, err)
		}
		seen[string(m.Data)] = m.Header.Get(HeaderDeliveries)
		_ = m.Ack()
	}
	if seen["held"] != "2" || seen["new"] != "1" {
		t.Fatalf("deliveries %v", seen)
	}
	waitFor(t, "one member left", 60*time.Second, func() bool { return len(r.group(t).Core.MemberList) == 1 })
	// A retired member of a closing connection leaves with it.
	sub3, _ := other.QueueSubscribeSync("telemetry.>", "q")
	other.Flush()
	if _, err := pub.Request("telemetry.dev-3", []byte("last"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var held *nats.Subscription
	deadline := time.Now().Add(60 * time.Second) // bounds a hang only
	for held == nil && time.Now().Before(deadline) {
		for _, s := range []*nats.Subscription{sub2, sub3} {
			if _, err := s.NextMsg(20 * time.Millisecond); err == nil {
				held = s
			}
		}
	}
	if held == nil {
		t.Fatal("dev-3 not delivered")
	}
	_ = held.Unsubscribe()
	other.Close()
	waitFor(t, "no members", 60*time.Second, func() bool { return len(r.group(t).Core.MemberList) == 0 })
}
