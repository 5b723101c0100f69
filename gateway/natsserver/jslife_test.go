package natsserver

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// memberLoops counts the goroutines running a JetStream member's
// housekeeping loop.
func memberLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "(*jsMember).loop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestPushMemberGoroutineEndsWithServer: each push consumer's member runs
// one housekeeping goroutine; it ends when its consumer is deleted and when
// the server shuts down, not at process exit.
func TestPushMemberGoroutineEndsWithServer(t *testing.T) {
	base := memberLoops()
	r := newJSRig(t)
	ctx := jsCtx(t)
	nc := r.connect(t)
	js, _ := jetstream.New(nc)
	for i := range 3 {
		if _, err := js.CreateOrUpdatePushConsumer(ctx, "TELEMETRY", jetstream.ConsumerConfig{Durable: fmt.Sprintf("push%d", i),
			DeliverSubject: fmt.Sprintf("deliver.%d", i), AckWait: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three member loops", 30*time.Second, func() bool { return memberLoops() == base+3 })
	if err := js.DeleteConsumer(ctx, "TELEMETRY", "push0"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted consumer's loop to end", 30*time.Second, func() bool { return memberLoops() == base+2 })
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.s.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the loops to end with the server", 30*time.Second, func() bool { return memberLoops() == base })
}
