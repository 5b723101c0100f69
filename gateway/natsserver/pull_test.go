package natsserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fetchOne pulls one message of c within wait and acks it synchronously;
// nil when none came.
func fetchOne(t *testing.T, ctx context.Context, c jetstream.Consumer, wait time.Duration) jetstream.Msg {
	t.Helper()
	b, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	m := <-b.Messages()
	if m == nil {
		return nil
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

func deliveries(t *testing.T, m jetstream.Msg) uint64 {
	t.Helper()
	md, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return md.NumDelivered
}

// TestPullDeliversOnlyAgainstPulls: a pull consumer's member gets messages
// only while it has a pull outstanding. Worker A pulls one, acks and stops
// pulling; worker B, pulling, gets the next message of the same device as
// its first delivery, not after ack_wait (an hour here) as a redelivery,
// and num_ack_pending counts only what is held.
func TestPullDeliversOnlyAgainstPulls(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	pubJS, _ := jetstream.New(r.connect(t))
	if _, err := pubJS.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "w", AckWait: time.Hour,
		DeliverPolicy: jetstream.DeliverAllPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := pubJS.Publish(ctx, "telemetry.dev-1", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	consumer := func() jetstream.Consumer {
		js, _ := jetstream.New(r.connect(t))
		c, err := js.Consumer(ctx, "TELEMETRY", "w")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := consumer(), consumer()
	m := fetchOne(t, ctx, a, 60*time.Second)
	if m == nil || string(m.Data()) != "m1" {
		t.Fatalf("A's pull: %v", m)
	}
	for _, want := range []string{"m2", "m3"} {
		m := fetchOne(t, ctx, b, 60*time.Second) // bounds a hang; ack_wait is an hour
		if m == nil {
			t.Fatalf("B's pull for %s: nothing (held by A, which no longer pulls?)", want)
		}
		if string(m.Data()) != want || deliveries(t, m) != 1 {
			t.Fatalf("B's pull: %q delivery %d, want %s delivery 1", m.Data(), deliveries(t, m), want)
		}
	}
	info, err := a.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 {
		t.Fatalf("num_ack_pending %d with everything acked", info.NumAckPending)
	}
}

// TestPullOneAtATimeThenLeave: `nats consumer next --count 5` pulls and
// acks one message at a time, then disconnects. The sixth message is not
// taken by it: the next worker gets it as its first delivery.
func TestPullOneAtATimeThenLeave(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	pubJS, _ := jetstream.New(r.connect(t))
	if _, err := pubJS.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "next", AckWait: time.Hour,
		DeliverPolicy: jetstream.DeliverAllPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 8; i++ {
		if _, err := pubJS.Publish(ctx, fmt.Sprintf("telemetry.dev-%d", i%2), fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	c, err := js.Consumer(ctx, "TELEMETRY", "next")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if m := fetchOne(t, ctx, c, 60*time.Second); m == nil || deliveries(t, m) != 1 {
			t.Fatalf("pull: %v", m)
		}
	}
	nc.Close()
	js2, _ := jetstream.New(r.connect(t))
	c2, err := js2.Consumer(ctx, "TELEMETRY", "next")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m := fetchOne(t, ctx, c2, 60*time.Second)
		if m == nil {
			t.Fatal("the rest did not come")
		}
		if n := deliveries(t, m); n != 1 {
			t.Fatalf("%s came as delivery %d: the first worker had taken it without a pull", m.Data(), n)
		}
	}
}

// TestConsumerSequenceAcrossConnections: a consumer's sequence numbers its
// deliveries across all its workers' connections: a worker that reconnects
// (natscli `consumer next` connects anew each time) goes on from where the
// consumer was, not from 1, and every delivery has its own number.
func TestConsumerSequenceAcrossConnections(t *testing.T) {
	r := newJSRig(t)
	ctx := jsCtx(t)
	pubJS, _ := jetstream.New(r.connect(t))
	if _, err := pubJS.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "cseq", AckWait: time.Hour,
		DeliverPolicy: jetstream.DeliverAllPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 4; i++ {
		if _, err := pubJS.Publish(ctx, fmt.Sprintf("telemetry.dev-%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	for range 2 { // two connections, one after the other
		nc := r.connect(t)
		js, _ := jetstream.New(nc)
		c, err := js.Consumer(ctx, "TELEMETRY", "cseq")
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			m := fetchOne(t, ctx, c, 60*time.Second)
			if m == nil {
				t.Fatal("no message")
			}
			md, _ := m.Metadata()
			seqs = append(seqs, md.Sequence.Consumer)
		}
		nc.Close()
	}
	if fmt.Sprint(seqs) != "[1 2 3 4]" {
		t.Fatalf("consumer sequences %v, want [1 2 3 4]", seqs)
	}
}
