package e2e

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestKill9UnderLoad kills the node with SIGKILL while producers and workers
// are busy, restarts it, and checks that every pub-acked message is delivered
// at least once with per-device order of first deliveries intact.
func TestKill9UnderLoad(t *testing.T) {
	// ack_wait bounds nothing here (a restart forgets what was in flight);
	// 2s made a worker that stalled that long under load look like an
	// overlap. The tracker excuses holds beyond it.
	const ackWait = 10 * time.Second
	n := newNode(t, fmt.Sprintf("queue:\n  ack_wait: %s\n", ackWait))
	n.start()
	tr := newTracker(t).withAckWait(ackWait)
	for i := 0; i < 3; i++ {
		startWorker(t, n.url(), fmt.Sprintf("w%d", i), tr, randomDelay(500))
	}
	pub := newPublisher(t, n.url(), 200)
	const devices = 50
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			for d := 0; d < devices; d++ {
				select {
				case <-stop:
					return
				default:
				}
				dev := fmt.Sprintf("dev-%02d", d)
				pub.publish(dev, fmt.Sprintf("%s|%d", dev, i))
			}
		}
	}()
	waitFor(t, "traffic before the kill", 30*time.Second, func() bool { return pub.acked() > 3000 })
	tr.crashed()
	n.kill()
	beforeRestart := pub.acked()
	time.Sleep(200 * time.Millisecond)
	n.start()
	// Publishes whose pub-ack died with the node hold window slots: free them.
	for len(pub.window) > 0 {
		select {
		case <-pub.window:
		default:
		}
	}
	waitFor(t, "traffic after the restart", 30*time.Second, func() bool { return pub.acked() > beforeRestart+3000 })
	close(stop)
	// Drain what is in the publisher's window.
	go func() {
		for {
			select {
			case pub.window <- struct{}{}:
			case <-time.After(5 * time.Second):
				return
			}
		}
	}()
	wg.Wait()
	acked := pub.ackedPayloads()
	missing := func() []string {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		var out []string
		for payload, a := range acked {
			if tr.seen[payload] == 0 {
				out = append(out, fmt.Sprintf("%s@p%d/%d", payload, a.Partition, a.Offset))
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		sort.Strings(m)
		status, _ := runCmd(edgeqBin, "status", "--http", n.httpURL())
		t.Fatalf("%d of %d pub-acked messages never delivered, e.g. %v\n%s", len(m), len(acked), m[:min(10, len(m))], status)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	dupes := 0
	for _, c := range tr.seen {
		if c > 1 {
			dupes++
		}
	}
	t.Logf("%d pub-acked messages (%d before the kill), all delivered; %d delivered more than once", len(acked), beforeRestart, dupes)
}

// TestSigtermDrainNoRedelivery: after a clean stop, nothing a worker acked
// comes again.
func TestSigtermDrainNoRedelivery(t *testing.T) {
	n := newNode(t, "")
	n.start()
	tr := newTracker(t)
	w := startWorker(t, n.url(), "w", tr, func() {})
	pub := newPublisher(t, n.url(), 100)
	for i := 1; i <= 500; i++ {
		dev := fmt.Sprintf("d%d", i%10)
		pub.publish(dev, fmt.Sprintf("first|%d", i))
	}
	waitFor(t, "first batch delivered", 30*time.Second, func() bool { return tr.distinct() == 500 })
	// Acks are in flight from the worker; the drain waits for them.
	time.Sleep(100 * time.Millisecond)
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM: %s", code, n.logs())
	}
	w.Close()
	n.start()
	tr2 := newTracker(t)
	startWorker(t, n.url(), "w2", tr2, func() {})
	pub2 := newPublisher(t, n.url(), 100)
	for i := 1; i <= 100; i++ {
		pub2.publish(fmt.Sprintf("d%d", i%10), fmt.Sprintf("second|%d", i))
	}
	waitFor(t, "second batch delivered", 30*time.Second, func() bool { return tr2.distinct() == 100 })
	time.Sleep(300 * time.Millisecond)
	tr2.mu.Lock()
	defer tr2.mu.Unlock()
	for payload := range tr2.seen {
		if strings.HasPrefix(payload, "first|") {
			t.Fatalf("acked message %q delivered again after a clean restart", payload)
		}
	}
}

// TestNatsCLI uses the nats CLI as a second, independent client.
func TestNatsCLI(t *testing.T) {
	natsBin := requireTool(t, "nats", goBin("nats"))
	n := newNode(t, "")
	n.start()
	run := natsCLI(t, natsBin, n)
	// A request on a telemetry subject is a durable publish; the reply is the pub-ack.
	out := run("request", "telemetry.cli-1", "hello from the nats CLI")
	if !strings.Contains(out, `"seq":1`) || !strings.Contains(out, `"node":"e2e-node"`) {
		t.Fatalf("pub-ack from nats request: %s", out)
	}
	// A queue subscriber in the CLI receives stored telemetry with edgeq headers.
	subOut := make(chan string, 1)
	go func() {
		out, _ := runCmd(natsBin, "--server", n.url(), "sub", "telemetry.>", "--queue", "cli", "--count", "1")
		subOut <- out
	}()
	waitMembers(t, n, "cli", 1) // the group starts at deliver: new
	run("pub", "telemetry.cli-2", "second message")
	select {
	case out := <-subOut:
		if !strings.Contains(out, "second message") || !strings.Contains(out, "Edgeq-Device: cli-2") {
			t.Fatalf("nats sub output: %s", out)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("nats sub got nothing")
	}
	// Core NATS subjects work as plain NATS.
	coreOut := make(chan string, 1)
	go func() {
		out, _ := runCmd(natsBin, "--server", n.url(), "sub", "chat.room", "--count", "1")
		coreOut <- out
	}()
	// Not stored: published again until the subscriber, once it is there, gets one.
	out = publishUntil(t, "the core message at the CLI subscriber", func() { run("pub", "chat.room", "not stored") }, coreOut)
	if !strings.Contains(out, "not stored") {
		t.Fatalf("core sub output: %s", out)
	}
}

// TestRdyCredit: a member that lowers its credit to 0 gets nothing until it
// raises it again.
func TestRdyCredit(t *testing.T) {
	n := newNode(t, "")
	n.start()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	var got []string
	_, err = nc.QueueSubscribe("telemetry.>", "rdy", func(m *nats.Msg) {
		mu.Lock()
		got = append(got, string(m.Data))
		mu.Unlock()
		m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	// nats.go numbers a connection's subscriptions 1, 2, ... in the order
	// they are made; this is the first.
	sid := strconv.Itoa(1)
	if err := nc.Publish("$EQ.RDY."+sid, []byte("0")); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 5; i++ {
		if _, err := nc.Request("telemetry.r1", []byte(fmt.Sprint(i)), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	if len(got) != 0 {
		t.Fatalf("member with credit 0 got %v", got)
	}
	mu.Unlock()
	nc.Publish("$EQ.RDY."+sid, []byte("10"))
	waitFor(t, "deliveries after credit returns", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 5 })
}
