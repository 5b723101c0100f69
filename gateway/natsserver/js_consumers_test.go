package natsserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"edgeq/gateway/jsapi"
)

// Consumers' lives with nats.go's jetstream package: delete, ephemerals,
// start policies, requesters that leave, push consumers nobody listens to.

func (r *rig) js() *jsapi.Service { return r.s.cfg.JetStream }

func (r *rig) hasGroup(queueName string) bool {
	for _, gs := range r.reg.Stats() {
		if gs.Key.Queue == queueName {
			return true
		}
	}
	return false
}

func waitingPulls(t *testing.T, ctx context.Context, c jetstream.Consumer) int {
	t.Helper()
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.NumWaiting
}

func TestJetStreamDeleteConsumer(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	ctx := jsCtx(t)
	c, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "del"})
	if err != nil {
		t.Fatal(err)
	}
	// A waiting pull request ends with 409 Consumer Deleted.
	fetched := make(chan error, 1)
	go func() {
		b, err := c.Fetch(10, jetstream.FetchMaxWait(60*time.Second))
		if err != nil {
			fetched <- err
			return
		}
		for range b.Messages() {
		}
		fetched <- b.Error()
	}()
	waitFor(t, "the pull request", 30*time.Second, func() bool { return waitingPulls(t, ctx, c) == 1 })
	if !r.hasGroup("del") {
		t.Fatal("no queue group")
	}
	if err := js.DeleteConsumer(ctx, "TELEMETRY", "del"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fetched:
		if !errors.Is(err, jetstream.ErrConsumerDeleted) {
			t.Fatalf("waiting fetch ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waiting fetch did not end")
	}
	if r.hasGroup("del") {
		t.Fatalf("group still there: %+v", r.reg.Stats())
	}
	if _, err := js.Consumer(ctx, "TELEMETRY", "del"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("deleted consumer: %v", err)
	}
	if err := js.DeleteConsumer(ctx, "TELEMETRY", "del"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// Created again, it is a new group that delivers.
	if _, err := js.Publish(ctx, "telemetry.again", []byte("v")); err != nil {
		t.Fatal(err)
	}
	c, err = js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "del", DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Fetch(1, jetstream.FetchMaxWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if m := <-b.Messages(); m == nil || m.Subject() != "telemetry.again" {
		t.Fatalf("recreated consumer: %v %v", m, b.Error())
	}

	// A core queue subscriber in the same group: the delete is refused.
	if _, err := nc.QueueSubscribe("telemetry.>", "shared", func(m *nats.Msg) { _ = m.Ack() }); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	if _, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "shared"}); err != nil {
		t.Fatal(err)
	}
	var apiErr *jetstream.APIError
	if err := js.DeleteConsumer(ctx, "TELEMETRY", "shared"); !errors.As(err, &apiErr) || apiErr.ErrorCode != jsapi.CodeConsumerInUse {
		t.Fatalf("shared delete: %v", err)
	}
	if _, err := js.Consumer(ctx, "TELEMETRY", "shared"); err != nil || !r.hasGroup("shared") {
		t.Fatalf("refused delete removed the consumer: %v", err)
	}
}

func TestJetStreamEphemeralConsumer(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	go r.js().Run(ctx)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	for i := range 20 {
		if _, err := js.Publish(ctx, fmt.Sprintf("telemetry.e%d", i%4), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	const threshold = 2 * time.Second
	c, err := js.CreateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: threshold})
	if err != nil {
		t.Fatal(err)
	}
	name := c.CachedInfo().Name
	if c.CachedInfo().Config.Durable != "" || !r.hasGroup(name) {
		t.Fatalf("ephemeral %+v", c.CachedInfo())
	}
	var mu sync.Mutex
	got := 0
	cc, err := c.Consume(func(m jetstream.Msg) {
		mu.Lock()
		got++
		mu.Unlock()
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "20 messages", 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return got == 20 })
	// Consuming is activity: it outlives its threshold while Consume runs.
	for end := time.Now().Add(2 * threshold); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, err := js.Consumer(ctx, "TELEMETRY", name); err != nil {
			t.Fatalf("consumer in use expired: %v", err)
		}
	}
	cc.Stop()
	waitFor(t, "the inactive consumer to go", 60*time.Second, func() bool {
		_, err := js.Consumer(ctx, "TELEMETRY", name)
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	if r.hasGroup(name) || r.js().Expired.Load() != 1 {
		t.Fatalf("after expiry: groups %+v, expired %d", r.reg.Stats(), r.js().Expired.Load())
	}
}

func TestJetStreamPullRequesterGone(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	a := r.connect(t)
	js, _ := jetstream.New(a)
	c, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "gone", AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// A raw pull request whose inbox is then unsubscribed (the connection
	// stays): the request is forgotten and takes no messages.
	inbox := nats.NewInbox()
	sub, err := a.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]any{"batch": 5, "expires": int64(time.Minute)})
	if err := a.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.TELEMETRY.gone", inbox, req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pull request", 30*time.Second, func() bool { return waitingPulls(t, ctx, c) == 1 })
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pull request to be forgotten", 30*time.Second, func() bool { return waitingPulls(t, ctx, c) == 0 })
	for i := range 3 {
		if _, err := js.Publish(ctx, fmt.Sprintf("telemetry.g%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// With ack_wait a minute, a message taken for the gone request would
	// stay away from another worker for that long.
	b2 := r.connect(t)
	js2, _ := jetstream.New(b2)
	c2, err := js2.Consumer(ctx, "TELEMETRY", "gone")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for deadline := time.Now().Add(50 * time.Second); n < 3 && time.Now().Before(deadline); {
		b, err := c2.Fetch(3-n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			_ = m.Ack()
			n++
		}
	}
	if n != 3 {
		t.Fatalf("the other worker got %d of 3", n)
	}
}

func TestJetStreamPushConsumerWithoutInterest(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	for i := range 5 {
		if _, err := js.Publish(ctx, fmt.Sprintf("telemetry.p%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateOrUpdatePushConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "pushc", DeliverSubject: "deliver.nobody",
		DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group to read the backlog", 30*time.Second, func() bool {
		for _, gs := range r.reg.Stats() {
			if gs.Key.Queue == "pushc" && gs.Core.Pending+gs.Core.InFlight == 5 {
				return true
			}
		}
		return false
	})
	// A few housekeeping rounds of the push member (50 ms each) pass.
	time.Sleep(300 * time.Millisecond)
	for _, gs := range r.reg.Stats() {
		if gs.Key.Queue == "pushc" && gs.Core.InFlight != 0 {
			t.Fatalf("push consumer without interest holds %d", gs.Core.InFlight)
		}
	}
	// A shutdown drains at once: nothing in flight, recorded as drained
	// (a held message would keep the drain until its deadline).
	r.reg.Drain(time.Now().Add(time.Minute))
	if !r.log.Offsets().Drained("queue:telemetry.>|pushc") {
		t.Fatal("push consumer's group did not drain")
	}
}

func TestJetStreamPushConsumerInterestComesAndGoes(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	if _, err := js.CreateOrUpdatePushConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "pushd", DeliverSubject: "deliver.d",
		DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, fmt.Sprintf("telemetry.q%d", i), []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	receive := func(want int) {
		t.Helper()
		sub, err := nc.SubscribeSync("deliver.d")
		if err != nil {
			t.Fatal(err)
		}
		for range want {
			m, err := sub.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("push delivery: %v", err)
			}
			if err := m.AckSync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
	}
	publish(0, 4)
	receive(4)
	publish(4, 10) // nobody listens now
	receive(6)
}

func TestJetStreamStartPolicies(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	seqs := map[string]uint64{} // payload -> stream seq
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			// A pub-ack's stream sequence is its stream_seq (its seq is the
			// device's, docs/jetstream.md).
			ack, err := nc.Request(fmt.Sprintf("telemetry.s%d", i%6), []byte(fmt.Sprint(i)), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var pa struct {
				StreamSeq uint64 `json:"stream_seq"`
			}
			if err := json.Unmarshal(ack.Data, &pa); err != nil || pa.StreamSeq == 0 {
				t.Fatalf("pub-ack %s: %v", ack.Data, err)
			}
			seqs[fmt.Sprint(i)] = pa.StreamSeq
		}
	}
	publish(0, 12)
	mid := time.Now()
	for !time.Now().After(mid) {
		time.Sleep(time.Millisecond)
	}
	publish(12, 18)
	fetchAll := func(c jetstream.Consumer, want int) []string {
		t.Helper()
		var got []string
		for deadline := time.Now().Add(60 * time.Second); len(got) < want && time.Now().Before(deadline); {
			b, err := c.Fetch(want-len(got), jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for m := range b.Messages() {
				got = append(got, string(m.Data()))
				_ = m.Ack()
			}
		}
		b, err := c.FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			got = append(got, string(m.Data()))
		}
		sort.Strings(got)
		return got
	}
	start := seqs["7"]
	var wantSeq []string
	for p, s := range seqs {
		if s >= start {
			wantSeq = append(wantSeq, p)
		}
	}
	sort.Strings(wantSeq)
	c, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "byseq", DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start})
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchAll(c, len(wantSeq)); fmt.Sprint(got) != fmt.Sprint(wantSeq) {
		t.Fatalf("by_start_sequence %d: got %v, want %v", start, got, wantSeq)
	}
	c, err = js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "bytime", DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &mid})
	if err != nil {
		t.Fatal(err)
	}
	wantTime := []string{"12", "13", "14", "15", "16", "17"}
	if got := fetchAll(c, len(wantTime)); fmt.Sprint(got) != fmt.Sprint(wantTime) {
		t.Fatalf("by_start_time: got %v, want %v", got, wantTime)
	}
	// A start time missing: the JetStream error.
	_, err = js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "bad", DeliverPolicy: jetstream.DeliverByStartTimePolicy})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsapi.CodeInvalidPolicy {
		t.Fatalf("by_start_time without a time: %v", err)
	}
}

// TestJetStreamLegacyEphemeralSubscribe: the legacy API's js.Subscribe
// without a durable creates an ephemeral push consumer (CONSUMER.CREATE
// without a name) and deletes it on Unsubscribe.
func TestJetStreamLegacyEphemeralSubscribe(t *testing.T) {
	r := newJSRig(t)
	nc := r.connect(t)
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := js.Publish(fmt.Sprintf("telemetry.l%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan string, 10)
	sub, err := js.Subscribe("telemetry.>", func(m *nats.Msg) {
		_ = m.Ack()
		got <- m.Subject
	}, nats.DeliverAll(), nats.ManualAck())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatalf("ephemeral push consumer: %d of 5", i)
		}
	}
	info, err := sub.ConsumerInfo()
	if err != nil || info.Config.Durable != "" || r.js().Consumers() != 1 {
		t.Fatalf("ephemeral consumer %+v %v", info, err)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the consumer to be deleted", 30*time.Second, func() bool { return r.js().Consumers() == 0 })
	if r.hasGroup(info.Name) {
		t.Fatalf("group of the deleted ephemeral: %+v", r.reg.Stats())
	}
}
