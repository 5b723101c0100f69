package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStoppedPullConsumerDoesNotDelaySIGTERM: a worker that stopped its
// pull consumer (Consume then Stop, messages unacked, its connection still
// open) does not hold the node's drain: what it was handed goes back to
// the group, and SIGTERM stops the node well before shutdown_timeout.
func TestStoppedPullConsumerDoesNotDelaySIGTERM(t *testing.T) {
	n := newNode(t, "shutdown_timeout: 5m\n")
	n.start()
	nc, js := jsConnect(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := 0; i < 200; i++ {
		pubSeq(t, nc, fmt.Sprintf("telemetry.dev-%d", i%20), fmt.Sprintf("m%d", i))
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: "slow", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 1000)
	cc, err := cons.Consume(func(m jetstream.Msg) { got <- struct{}{} }, jetstream.PullMaxMessages(50)) // never acks
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal("no messages")
		}
	}
	cc.Stop()
	<-cc.Closed()
	// The connection stays open: the worker's process lives on.
	start := time.Now()
	if code := n.stop(); code != 0 { // fails the test after 30s
		t.Fatalf("exit code %d: %s", code, n.logs())
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	// Nothing was acked: after a restart every message comes again.
	n.start()
	_, js = jsConnect(t, n)
	cons, err = js.Consumer(ctx, "TELEMETRY", "slow")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 200 {
		b, err := cons.Fetch(100, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			seen[string(m.Data())] = true
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of 200 came again after the restart", len(seen))
		}
	}
}
