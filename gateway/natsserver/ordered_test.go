package natsserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
)

// newReadRig is a JetStream rig with the KV view and the service's
// background work running (the last-value index, ordered wake-ups).
func newReadRig(t *testing.T) *rig {
	r := newRigWith(t, func(r *rig, c *Config) {
		c.JetStream = jsapi.NewService(jsapi.Config{Stream: "TELEMETRY", Prefix: "telemetry", MaxConsumers: 4,
			DuplicateWindow: time.Minute, MaxBytes: 1 << 30, Defaults: groups.DefaultCoreConfig(), KVBucket: "telemetry"}, r.log, r.reg)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		r.js().Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

func publishN(t *testing.T, js jetstream.JetStream, ctx context.Context, subject string, from, to int) {
	t.Helper()
	var futs []jetstream.PubAckFuture
	for i := from; i < to; i++ {
		f, err := js.PublishAsync(subject, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("publish: no ack")
		}
	}
}

// TestOrderedConsumerResetsWhenDeleted: nats.go's OrderedConsumer sees its
// consumer deleted mid-stream, creates a new one from the next stream
// sequence and goes on: every message once, in order.
func TestOrderedConsumerResetsWhenDeleted(t *testing.T) {
	r := newReadRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	const n = 2000
	publishN(t, js, ctx, "telemetry.o1", 0, n)
	c, err := js.OrderedConsumer(ctx, "TELEMETRY", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"telemetry.o1"}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, n)
	cc, err := c.Consume(func(m jetstream.Msg) { got <- string(m.Data()) }, jetstream.PullMaxMessages(50))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	deleted := ""
	for i := range n {
		select {
		case v := <-got:
			if v != fmt.Sprint(i) {
				t.Fatalf("message %d is %s", i, v)
			}
		case <-ctx.Done():
			t.Fatalf("message %d did not come", i)
		}
		if i == n/2 {
			deleted = c.CachedInfo().Name
			if err := js.DeleteConsumer(ctx, "TELEMETRY", deleted); err != nil {
				t.Fatalf("delete %s: %v", deleted, err)
			}
		}
	}
	if now := c.CachedInfo().Name; now == deleted {
		t.Fatalf("still on consumer %s: no reset", now)
	}
	if len(r.reg.Stats()) != 0 {
		t.Fatalf("an ordered consumer made a queue group: %+v", r.reg.Stats())
	}
}

// TestOrderedPushFlowControl: a push ordered consumer stops after a flow
// control request until it is answered; its heartbeats carry the last
// sequences and, while stalled, the request's subject.
func TestOrderedPushFlowControl(t *testing.T) {
	r := newReadRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	publishN(t, js, ctx, "telemetry.f1", 0, fcEvery+100)
	sub, err := nc.SubscribeSync("deliver.f1")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	req := `{"stream_name":"TELEMETRY","config":{"deliver_subject":"deliver.f1","ack_policy":"none","flow_control":true,` +
		`"idle_heartbeat":50000000,"deliver_policy":"all","filter_subject":"telemetry.f1"}}`
	resp, err := nc.Request("$JS.API.CONSUMER.CREATE.TELEMETRY", []byte(req), 10*time.Second)
	if err != nil || strings.Contains(string(resp.Data), `"error"`) {
		t.Fatalf("create: %v %s", err, resp.Data)
	}
	next := func() *nats.Msg {
		t.Helper()
		m, err := sub.NextMsg(time.Minute) // bounds a hang only
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var fc string
	data := 0
	for fc == "" {
		m := next()
		switch {
		case m.Header.Get("Status") == "100" && strings.Contains(m.Header.Get("Description"), "FlowControl"):
			fc = m.Reply
		case m.Header.Get("Status") == "100":
		default:
			if string(m.Data) != fmt.Sprint(data) {
				t.Fatalf("message %d is %s", data, m.Data)
			}
			data++
		}
	}
	if data != fcEvery {
		t.Fatalf("flow control after %d messages, want %d", data, fcEvery)
	}
	// Stalled: heartbeats only, naming the request.
	for range 2 {
		m := next()
		if m.Header.Get("Status") != "100" || m.Header.Get("Nats-Consumer-Stalled") != fc ||
			m.Header.Get("Nats-Last-Consumer") != fmt.Sprint(fcEvery) {
			t.Fatalf("while stalled: %v %q", m.Header, m.Data)
		}
	}
	if err := nc.Publish(fc, nil); err != nil {
		t.Fatal(err)
	}
	for data < fcEvery+100 {
		m := next()
		if m.Header.Get("Status") == "100" {
			continue
		}
		if string(m.Data) != fmt.Sprint(data) {
			t.Fatalf("message %d is %s", data, m.Data)
		}
		data++
	}
}

// TestKVViewAndMessageGet: the KV view answers gets and watches with the
// device's newest reading and refuses writes; STREAM.MSG.GET answers JSON.
func TestKVViewAndMessageGet(t *testing.T) {
	r := newReadRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	publishN(t, js, ctx, "telemetry.k1", 0, 3)
	kv, err := js.KeyValue(ctx, "telemetry")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "k1")
	if err != nil || string(e.Value()) != "2" {
		t.Fatalf("get: %v", err)
	}
	if _, err := kv.Get(ctx, "k2"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("get of a device without readings: %v", err)
	}
	var apiErr *jetstream.APIError
	for what, write := range map[string]func() error{
		"put":    func() error { _, err := kv.Put(ctx, "k1", []byte("x")); return err },
		"create": func() error { _, err := kv.Create(ctx, "k9", []byte("x")); return err },
		"delete": func() error { return kv.Delete(ctx, "k1") },
		"purge":  func() error { return kv.Purge(ctx, "k1") },
	} {
		if err := write(); !errors.As(err, &apiErr) || !strings.Contains(apiErr.Description, "read-only view") {
			t.Errorf("%s: %v", what, err)
		}
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "telemetry"}); err == nil {
		t.Error("create bucket accepted")
	}
	if _, err := kv.Get(ctx, "k1"); err != nil {
		t.Fatalf("get after the refused writes: %v", err)
	}
	// The JSON form of message get (clients without direct get).
	resp, err := nc.Request("$JS.API.STREAM.MSG.GET.TELEMETRY", []byte(`{"last_by_subj":"telemetry.k1"}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Message struct {
			Subject string `json:"subject"`
			Seq     uint64 `json:"seq"`
			Hdrs    []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &out); err != nil || out.Error != nil {
		t.Fatalf("msg get: %v %s", err, resp.Data)
	}
	if out.Message.Subject != "telemetry.k1" || string(out.Message.Data) != "2" || out.Message.Seq != e.Revision() ||
		!strings.Contains(string(out.Message.Hdrs), "Edgeq-Device: k1") {
		t.Fatalf("msg get: %s", resp.Data)
	}
	resp, err = nc.Request("$JS.API.STREAM.MSG.GET.TELEMETRY", []byte(`{"seq":1}`), 10*time.Second)
	if err != nil || !strings.Contains(string(resp.Data), `"err_code":10037`) {
		t.Fatalf("msg get of no message: %v %s", err, resp.Data)
	}
}

// TestOrderedPullRequests: an ordered consumer answers no_wait with what
// there is then 404, and an expiring pull with what came then 408; a
// closed connection's ordered consumers go.
func TestOrderedPullRequests(t *testing.T) {
	r := newReadRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	publishN(t, js, ctx, "telemetry.p1", 0, 2)
	c, err := js.OrderedConsumer(ctx, "TELEMETRY", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"telemetry.p1"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.FetchNoWait(10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range b.Messages() {
		n++
	}
	if n != 2 || b.Error() != nil {
		t.Fatalf("no_wait: %d messages, %v", n, b.Error())
	}
	b, err = c.Fetch(5, jetstream.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
		t.Fatal("a message came with nothing stored")
	}
	if b.Error() != nil {
		t.Fatalf("expired fetch: %v", b.Error())
	}
	if st := r.js().OrderedStats(); st.Active != 1 {
		t.Fatalf("ordered consumers %d, want 1", st.Active)
	}
	nc.Close()
	deadline := time.Now().Add(time.Minute) // bounds a hang only
	for r.js().OrderedStats().Active != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection's ordered consumer stayed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
