package natsserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
)

// newJSRig is a rig with the JetStream API on: stream TELEMETRY.
func newJSRig(t *testing.T) *rig {
	return newRigWith(t, func(r *rig, c *Config) {
		qc := groups.DefaultCoreConfig()
		qc.AckWait = 2 * time.Second
		c.JetStream = jsapi.NewService(jsapi.Config{Stream: "TELEMETRY", Prefix: "telemetry", MaxConsumers: 4,
			DuplicateWindow: time.Minute, MaxBytes: 1 << 30, Defaults: qc}, r.log, r.reg)
		c.Dedup = jsapi.NewDedup(time.Minute, 1000, nil)
	})
}

func jsCtx(t *testing.T) context.Context {
	// It bounds a hang only: a loaded -race run took up to 91 s for the
	// 20,000-message backlog.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestJetStreamPublishAcksAndDedup(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := jsCtx(t)
	a1, err := js.Publish(ctx, "telemetry.d1", []byte("one"), jetstream.WithMsgID("m-1"))
	if err != nil {
		t.Fatal(err)
	}
	if a1.Stream != "TELEMETRY" || a1.Duplicate || a1.Sequence != 1 {
		t.Fatalf("first ack %+v", a1)
	}
	a2, err := js.Publish(ctx, "telemetry.d1", []byte("one again"), jetstream.WithMsgID("m-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !a2.Duplicate || a2.Sequence != a1.Sequence {
		t.Fatalf("duplicate ack %+v, first %+v", a2, a1)
	}
	if _, err := js.Publish(ctx, "telemetry.d1", []byte("x"), jetstream.WithExpectStream("OTHER")); err == nil {
		t.Fatal("publish expecting another stream was accepted")
	} else if var_ := (*jetstream.APIError)(nil); !errors.As(err, &var_) || var_.ErrorCode != jsapi.CodeStreamMismatch {
		t.Fatalf("expect-stream error %v", err)
	}
	// PublishAsync: every ack comes, with per-device sequences 2.., one stored each.
	var futs []jetstream.PubAckFuture
	for i := range 50 {
		f, err := js.PublishAsync("telemetry.d2", []byte(strconv.Itoa(i)), jetstream.WithMsgID(fmt.Sprintf("a-%d", i%40)))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	dups := 0
	for i, f := range futs {
		select {
		case a := <-f.Ok():
			if a.Duplicate {
				dups++
			} else if a.Sequence != uint64(i+1) {
				t.Fatalf("async ack %d: %+v", i, a)
			}
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("no async ack")
		}
	}
	if dups != 10 {
		t.Fatalf("%d duplicates, want 10", dups)
	}
	s, err := js.Stream(ctx, "TELEMETRY")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.CachedInfo().State; st.Msgs != 41 || st.LastSeq == 0 || st.FirstTime.IsZero() {
		t.Fatalf("stream state %+v", st)
	}
}

func TestJetStreamConsumeOrderedBacklog(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	ctx := jsCtx(t)
	const devices, perDevice = 200, 100
	pending := make([]jetstream.PubAckFuture, 0, devices*perDevice)
	for i := range perDevice {
		for d := range devices {
			f, err := js.PublishAsync(fmt.Sprintf("telemetry.dev%d", d), []byte(strconv.Itoa(i+1)), jetstream.WithStallWait(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, f)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publish incomplete")
	}
	for _, f := range pending {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "workers", AckWait: 30 * time.Second, MaxAckPending: 64})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	next := map[string]int{}      // device -> next first-delivery value wanted
	inFlight := map[string]bool{} // device -> a message is being handled
	done := make(chan struct{})
	total := 0
	var fail error
	handler := func(m jetstream.Msg) {
		md, err := m.Metadata()
		dev := m.Headers().Get(HeaderDevice)
		n, _ := strconv.Atoi(string(m.Data()))
		mu.Lock()
		switch {
		case err != nil:
			fail = fmt.Errorf("metadata: %w", err)
		case md.Stream != "TELEMETRY" || md.Consumer != "workers" || md.Sequence.Stream == 0 || md.NumDelivered < 1:
			fail = fmt.Errorf("metadata %+v", md)
		case inFlight[dev]:
			fail = fmt.Errorf("two messages of %s in flight", dev)
		}
		inFlight[dev] = true
		if md != nil && md.NumDelivered == 1 {
			if want := next[dev] + 1; n != want {
				fail = fmt.Errorf("%s: first delivery %d, want %d", dev, n, want)
			}
			next[dev] = n
		}
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		mu.Lock()
		inFlight[dev] = false
		mu.Unlock()
		if err := m.Ack(); err != nil {
			t.Error(err)
		}
		mu.Lock()
		total++
		if total == devices*perDevice {
			close(done)
		}
		mu.Unlock()
	}
	for range 4 {
		wc := r.connect(t)
		wjs, _ := jetstream.New(wc)
		c, err := wjs.Consumer(ctx, "TELEMETRY", "workers")
		if err != nil {
			t.Fatal(err)
		}
		cc, err := c.Consume(handler, jetstream.PullMaxMessages(20))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cc.Stop)
	}
	_ = cons
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("delivered %d of %d", total, devices*perDevice)
	}
	mu.Lock()
	defer mu.Unlock()
	if fail != nil {
		t.Fatal(fail)
	}
	for d := range devices {
		if got := next[fmt.Sprintf("dev%d", d)]; got != perDevice {
			t.Fatalf("dev%d ended at %d", d, got)
		}
	}
}

func TestJetStreamFetchNakTermAckSync(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	ctx := jsCtx(t)
	for i := range 3 {
		if _, err := js.Publish(ctx, fmt.Sprintf("telemetry.f%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	c, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "fetcher", AckWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(3, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range b.Messages() {
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("fetched %d, err %v", len(got), b.Error())
	}
	// Another connection cannot answer for a message it does not hold.
	other := r.connect(t)
	if err := other.Publish(got[0].Reply(), []byte("+ACK")); err != nil {
		t.Fatal(err)
	}
	other.Flush()
	for deadline := time.Now().Add(5 * time.Second); r.s.Counters().ForeignAcks.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("foreign ack not refused")
		}
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if err := got[1].Term(); err != nil {
		t.Fatal(err)
	}
	if err := got[2].Nak(); err != nil {
		t.Fatal(err)
	}
	b, err = c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := <-b.Messages()
	if m == nil {
		t.Fatalf("nak'd message not redelivered: %v", b.Error())
	}
	md, _ := m.Metadata()
	if md.NumDelivered != 2 || string(m.Subject()) != got[2].Subject() {
		t.Fatalf("redelivery %s %+v", m.Subject(), md)
	}
	if err := m.InProgress(); err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing left: FetchNoWait ends at once with no messages.
	b, err = c.FetchNoWait(5)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range b.Messages() {
		n++
	}
	if n != 0 || b.Error() != nil {
		t.Fatalf("FetchNoWait: %d messages, err %v", n, b.Error())
	}
	info, err := c.Info(ctx)
	if err != nil || info.Name != "fetcher" || info.Config.AckPolicy != jetstream.AckExplicitPolicy {
		t.Fatalf("info %+v %v", info, err)
	}
}

func TestJetStreamAPIErrors(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	ctx := jsCtx(t)
	if _, err := js.Stream(ctx, "NOPE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("unknown stream: %v", err)
	}
	s, err := js.Stream(ctx, "TELEMETRY")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consumer(ctx, "nope"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("unknown consumer: %v", err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "x", AckPolicy: jetstream.AckNonePolicy}); err == nil {
		t.Fatal("ack_policy none accepted")
	}
	cases := []struct {
		subj, body string
		code       int
	}{
		{"$JS.API.CONSUMER.CREATE.TELEMETRY.x", "{not json", jsapi.CodeInvalidJSON},
		{"$JS.API.CONSUMER.INFO.TELEMETRY.nope", "", jsapi.CodeConsumerNotFound},
		{"$JS.API.STREAM.INFO.NOPE", "", jsapi.CodeStreamNotFound},
		{"$JS.API.STREAM.CREATE.X", `{"name":"X"}`, jsapi.CodeBadRequest},
		{"$JS.API.KV.WHATEVER", "", jsapi.CodeBadRequest},
	}
	for _, c := range cases {
		msg, err := nc.Request(c.subj, []byte(c.body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.subj, err)
		}
		var resp struct {
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error == nil || int(resp.Error.ErrorCode) != c.code {
			t.Fatalf("%s: %s", c.subj, msg.Data)
		}
	}
	// An over-limit batch gets a 409; the connection goes on.
	if _, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "b"}); err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.TELEMETRY.b", []byte(`{"batch":100000}`), 5*time.Second)
	if err != nil || msg.Header.Get("Status") != "409" {
		t.Fatalf("over-limit batch: %v %v", msg, err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatal(err)
	}
	_ = nats.ErrTimeout
}

// A core queue subscription with JetStream-form ack subjects: Metadata()
// parses them and an empty reply (natscli `sub --ack`) acks.
func TestJetStreamQueueAckSubjects(t *testing.T) {
	r := newRigWith(t, func(r *rig, c *Config) {
		c.JetStream = jsapi.NewService(jsapi.Config{Stream: "TELEMETRY", Prefix: "telemetry", MaxConsumers: 4, Defaults: groups.DefaultCoreConfig()}, r.log, r.reg)
		c.QueueJSAcks = true
	})
	nc := r.connect(t)
	sub, err := nc.QueueSubscribeSync("telemetry.>", "uploader")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx := jsCtx(t)
	for i := range 2 {
		if _, err := js.Publish(ctx, "telemetry.q1", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		md, err := m.Metadata()
		if err != nil || md.Stream != "TELEMETRY" || md.Consumer != "uploader" || md.NumDelivered != 1 || string(m.Data) != strconv.Itoa(i) {
			t.Fatalf("message %s %q: %+v %v", m.Reply, m.Data, md, err)
		}
		if err := m.Respond(nil); err != nil { // what natscli sub --ack sends
			t.Fatal(err)
		}
	}
	// Both acked: nothing comes again after ack_wait.
	if m, err := sub.NextMsg(time.Second); err == nil {
		t.Fatalf("redelivered %s", m.Reply)
	}
	// The core's counts are refreshed about once a second.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		gs := r.reg.Stats()
		if len(gs) == 1 && gs[0].Core.Acked == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group stats %+v", gs)
		}
	}
}

// The legacy nats.go JetStream API: a durable push consumer with a deliver
// group, two queue subscribers, manual acks.
func TestJetStreamLegacyQueueSubscribe(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	const devices, per = 10, 20
	for i := range per {
		for d := range devices {
			if _, err := js.Publish(fmt.Sprintf("telemetry.l%d", d), []byte(strconv.Itoa(i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	last := map[string]int{}
	got := 0
	done := make(chan struct{})
	var fail error
	handler := func(m *nats.Msg) {
		md, err := m.Metadata()
		n, _ := strconv.Atoi(string(m.Data))
		dev := m.Header.Get(HeaderDevice)
		mu.Lock()
		if err != nil || md.Consumer != "legacy" {
			fail = fmt.Errorf("metadata %+v %v", md, err)
		}
		if md != nil && md.NumDelivered == 1 {
			if n != last[dev]+1 {
				fail = fmt.Errorf("%s: %d after %d", dev, n, last[dev])
			}
			last[dev] = n
		}
		mu.Unlock()
		if err := m.Ack(); err != nil {
			t.Error(err)
		}
		mu.Lock()
		got++
		if got == devices*per {
			close(done)
		}
		mu.Unlock()
	}
	for range 2 {
		wc := r.connect(t)
		wjs, _ := wc.JetStream()
		if _, err := wjs.QueueSubscribe("telemetry.>", "legacy", handler, nats.Durable("legacy"), nats.ManualAck(), nats.DeliverAll(), nats.AckExplicit()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		mu.Lock()
		t.Fatalf("got %d of %d", got, devices*per)
	}
	mu.Lock()
	defer mu.Unlock()
	if fail != nil {
		t.Fatal(fail)
	}
}

// The legacy API's pull subscription, and a Consume() whose requests only
// see idle heartbeats for a while: the consumer keeps going.
func TestJetStreamLegacyPullAndHeartbeats(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, _ := nc.JetStream()
	for i := range 3 {
		// Three devices: one device never has two messages in flight,
		// so a batch of three of one device would hold one.
		if _, err := js.Publish(fmt.Sprintf("telemetry.p1-%d", i), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := js.PullSubscribe("telemetry.>", "legacy-pull", nats.AckExplicit())
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ps.Fetch(3, nats.MaxWait(5*time.Second))
	if err != nil || len(msgs) != 3 {
		t.Fatalf("fetched %d: %v", len(msgs), err)
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[string(m.Data)] = true
		if err := m.AckSync(); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("fetched %v", seen)
	}
	// Consume with a short expiry: heartbeats every 1.5s keep it healthy
	// through an idle spell longer than the expiry; then a message arrives.
	// (nats.go reports a missed heartbeat after twice the interval: at 500ms
	// a one-second stall of a loaded -race run would be enough.)
	njs, _ := jetstream.New(nc)
	ctx := jsCtx(t)
	c, err := njs.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "hb", DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	errs := make(chan error, 4)
	cc, err := c.Consume(func(m jetstream.Msg) { got <- string(m.Data()); _ = m.Ack() },
		jetstream.PullExpiry(6*time.Second), jetstream.PullHeartbeat(1500*time.Millisecond),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	time.Sleep(7 * time.Second)
	if _, err := njs.Publish(ctx, "telemetry.p2", []byte("after idle")); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if v != "after idle" {
			t.Fatalf("got %q (deliver new)", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing after the idle time")
	}
	select {
	case err := <-errs:
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			t.Fatal(err)
		}
	default:
	}
}
