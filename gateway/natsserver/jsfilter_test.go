package natsserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/jsapi"
)

// watchConn connects and records every asynchronous error and a close, so
// a test can tell that the server did not drop the client.
func watchConn(t *testing.T, r *rig) (*nats.Conn, func() error) {
	t.Helper()
	var mu sync.Mutex
	var fail error
	set := func(err error) {
		mu.Lock()
		if fail == nil {
			fail = err
		}
		mu.Unlock()
	}
	nc := r.connect(t,
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { set(fmt.Errorf("async error: %w", err)) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { set(fmt.Errorf("disconnected: %v", err)) }),
		nats.ClosedHandler(func(c *nats.Conn) { set(fmt.Errorf("closed: %v", c.LastError())) }))
	return nc, func() error {
		mu.Lock()
		defer mu.Unlock()
		if fail == nil && !nc.IsConnected() {
			return fmt.Errorf("connection %v: %v", nc.Status(), nc.LastError())
		}
		return fail
	}
}

// TestJetStreamLegacyAPIWildcardFilters: nats.go's legacy JetStream API,
// seeing a 2.10 server (the rig announces INFO as a node does), creates its consumers with the filter (wildcards
// and all) in the request subject. Those publishes are accepted and the
// consumers work: a push queue consumer on telemetry.> is created, a pull
// consumer on telemetry.* delivers every message in per-device order, and
// no client is disconnected.
func TestJetStreamLegacyAPIWildcardFilters(t *testing.T) {
	r := newJSRig(t)
	nc, healthy := watchConn(t, r)
	if v := nc.ConnectedServerVersion(); v != "2.10.0+edgeq.0.0.0-test" {
		t.Fatalf("server version %q", v)
	}
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	const devices, per = 8, 25
	for i := range per {
		for d := range devices {
			if _, err := js.Publish(fmt.Sprintf("telemetry.w%d", d), []byte(strconv.Itoa(i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Push: a durable queue consumer on telemetry.> (the create subject
	// ends in '>'). TestJetStreamLegacyQueueSubscribe checks its deliveries
	// through the same path, since the rig announces 2.10.
	wc, pushOK := watchConn(t, r)
	wjs, _ := wc.JetStream()
	if _, err := wjs.QueueSubscribe("telemetry.>", "wpush", func(m *nats.Msg) { _ = m.Ack() },
		nats.Durable("wpush"), nats.ManualAck(), nats.DeliverAll(), nats.AckExplicit(), nats.AckWait(time.Minute)); err != nil {
		t.Fatalf("QueueSubscribe with filter telemetry.>: %v", err)
	}
	if ci, err := wjs.ConsumerInfo("TELEMETRY", "wpush"); err != nil || ci.Config.FilterSubject != "telemetry.>" || ci.Config.DeliverGroup != "wpush" {
		t.Fatalf("push consumer info %+v %v", ci, err)
	}

	// Pull: a durable on telemetry.* (a '*' in the create subject).
	sub, err := js.PullSubscribe("telemetry.*", "wpull", nats.DeliverAll(), nats.AckExplicit(), nats.AckWait(time.Minute))
	if err != nil {
		t.Fatalf("PullSubscribe with filter telemetry.*: %v", err)
	}
	pulled := map[string]int{}
	deadline := time.Now().Add(90 * time.Second)
	for n := 0; n < devices*per; {
		if time.Now().After(deadline) {
			t.Fatalf("pull: %d of %d", n, devices*per)
		}
		msgs, err := sub.Fetch(50, nats.MaxWait(5*time.Second))
		if err != nil && err != nats.ErrTimeout {
			t.Fatal(err)
		}
		for _, m := range msgs {
			v, _ := strconv.Atoi(string(m.Data))
			md, _ := m.Metadata()
			if md != nil && md.NumDelivered == 1 {
				if v != pulled[m.Subject]+1 {
					t.Fatalf("pull %s: %d after %d", m.Subject, v, pulled[m.Subject])
				}
				pulled[m.Subject] = v
				n++
			}
			if err := m.AckSync(nats.AckWait(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	ci, err := sub.ConsumerInfo()
	if err != nil || ci.Config.FilterSubject != "telemetry.*" {
		t.Fatalf("consumer info %+v %v", ci, err)
	}

	// The jetstream package sends the filter in the subject whatever the
	// server version.
	njs, _ := jetstream.New(nc)
	ctx := jsCtx(t)
	if _, err := njs.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "wnew", FilterSubject: "telemetry.>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatalf("CreateOrUpdateConsumer with filter telemetry.>: %v", err)
	}
	for i, ok := range []func() error{pushOK, healthy} {
		if err := ok(); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
}

// TestJetStreamCreateSubjectFilterChecked: the filter in the create subject
// must be the config's filter_subject (nats-server's 10131), filter_subjects
// cannot be used with it (10137); the connection stays usable.
func TestJetStreamCreateSubjectFilterChecked(t *testing.T) {
	r := newJSRig(t)
	nc, healthy := watchConn(t, r)
	cases := []struct {
		subject, config string
		code            int
	}{
		{"$JS.API.CONSUMER.CREATE.TELEMETRY.m1.telemetry.>", `{"durable_name":"m1","ack_policy":"explicit","filter_subject":"telemetry.a.>"}`, jsapi.CodeFilterMismatch},
		{"$JS.API.CONSUMER.CREATE.TELEMETRY.m2.telemetry.*", `{"durable_name":"m2","ack_policy":"explicit"}`, jsapi.CodeFilterMismatch},
		{"$JS.API.CONSUMER.CREATE.TELEMETRY.m3.telemetry.a", `{"durable_name":"m3","ack_policy":"explicit","filter_subjects":["telemetry.a"]}`, jsapi.CodeMultipleFilters},
		{"$JS.API.CONSUMER.CREATE.TELEMETRY.m4.telemetry.*", `{"durable_name":"m4","ack_policy":"explicit","filter_subject":"telemetry.*"}`, 0},
		{"$JS.API.CONSUMER.CREATE.TELEMETRY.m5", `{"durable_name":"m5","ack_policy":"explicit","filter_subject":"telemetry.>"}`, 0},
		{"$JS.API.CONSUMER.CREATE.OTHER.m6.telemetry.>", `{"durable_name":"m6","ack_policy":"explicit","filter_subject":"telemetry.>"}`, jsapi.CodeStreamNotFound},
	}
	for _, c := range cases {
		stream := strings.Split(c.subject, ".")[4]
		m, err := nc.Request(c.subject, []byte(`{"stream_name":"`+stream+`","config":`+c.config+`}`), 30*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.subject, err)
		}
		var resp struct {
			Error *jetstream.APIError `json:"error"`
			Name  string              `json:"name"`
		}
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			t.Fatalf("%s: %v: %s", c.subject, err, m.Data)
		}
		switch {
		case c.code == 0 && (resp.Error != nil || resp.Name == ""):
			t.Errorf("%s: %s, want the consumer created", c.subject, m.Data)
		case c.code != 0 && (resp.Error == nil || int(resp.Error.ErrorCode) != c.code):
			t.Errorf("%s: %s, want error code %d", c.subject, m.Data, c.code)
		}
	}
	if err := healthy(); err != nil {
		t.Fatal(err)
	}
}

// TestWildcardPublishStillRefused: outside the consumer-create filter, a
// publish subject with wildcard tokens is refused as before, with
// JetStream on and off.
func TestWildcardPublishStillRefused(t *testing.T) {
	create := "$JS.API.CONSUMER.CREATE.TELEMETRY.c1.telemetry.>"
	for _, c := range []struct {
		name     string
		r        *rig
		subjects []string
		accepted []string
	}{
		{"jetstream", newJSRig(t),
			[]string{"foo.*", "foo.>", "telemetry.*", "$JS.API.CONSUMER.CREATE.*.c1.telemetry.>", "$JS.API.CONSUMER.CREATE.TELEMETRY.>",
				"$JS.API.CONSUMER.CREATE.TELEMETRY.*.telemetry.>", "$JS.API.CONSUMER.CREATE.TELEMETRY.c1.>.x", "$JS.API.CONSUMER.INFO.TELEMETRY.*",
				"$JS.API.CONSUMER.DURABLE.CREATE.TELEMETRY.*"},
			[]string{create, "$JS.API.CONSUMER.CREATE.TELEMETRY.c1.*"}},
		{"core only", newRig(t, nil), []string{create, "foo.*"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, subj := range c.subjects {
				if line := rawPub(t, c.r, subj); line != "-ERR 'Invalid Publish Subject'" {
					t.Errorf("PUB %s: %q, want -ERR 'Invalid Publish Subject'", subj, line)
				}
			}
			for _, subj := range c.accepted {
				if line := rawPub(t, c.r, subj); line != "PONG" {
					t.Errorf("PUB %s: %q, want it accepted", subj, line)
				}
			}
		})
	}
}

// rawPub publishes an empty payload to subj on a fresh connection, then
// PING, and returns the first line after INFO that is not +OK.
func rawPub(t *testing.T, r *rig, subj string) string {
	t.Helper()
	c, err := net.Dial("tcp", r.s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("INFO %q %v", line, err)
	}
	if _, err := fmt.Fprintf(c, "CONNECT {\"verbose\":false}\r\nPUB %s 0\r\n\r\nPING\r\n", subj); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "read: " + err.Error()
		}
		if line = strings.TrimSpace(line); line != "+OK" {
			return line
		}
	}
}
