package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// rawClient is a bare TCP client speaking (or mangling) the protocol.
type rawClient struct {
	t  testing.TB
	c  net.Conn
	rd *bufio.Reader
}

func dialRaw(t testing.TB, port int) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawClient{t: t, c: c, rd: bufio.NewReader(c)}
	if line := r.line(); !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("first line %q, want INFO", line)
	}
	return r
}

func (r *rawClient) send(s string) {
	r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	r.c.Write([]byte(s))
}

// line reads one line; "" on EOF or timeout.
func (r *rawClient) line() string {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := r.rd.ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimRight(l, "\r\n")
}

// closed reports whether the server closed the connection (EOF).
func (r *rawClient) closed() bool {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, err := r.rd.ReadByte(); err != nil {
			return !isTimeout(err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestBadInputIsolated(t *testing.T) {
	n := newNode(t, "nats:\n  max_payload: 64KiB\n  max_pending: 256KiB\n  write_deadline: 2s\n")
	n.start()
	// A good producer and worker run the whole time; they must not notice.
	tr := newTracker(t)
	startWorker(t, n.url(), "good-worker", tr, func() {})
	pub := newPublisher(t, n.url(), 50)
	var published atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pub.publish("good", fmt.Sprintf("good|%d", i))
			published.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()

	cases := []struct {
		name, send, wantErr string
		closes              bool
	}{
		{"garbage", "HELLO WORLD\r\n", "-ERR 'Unknown Protocol Operation'", true},
		{"http request", "GET / HTTP/1.1\r\n\r\n", "-ERR 'Unknown Protocol Operation'", true},
		{"oversize payload", "PUB telemetry.x 100000\r\n", "-ERR 'Maximum Payload Violation'", true},
		{"control line too long", "SUB " + strings.Repeat("a", 5000) + " 1\r\n", "-ERR 'Maximum Control Line Exceeded'", true},
		{"bad args", "PUB\r\n", "-ERR", true},
		{"bad payload terminator", "PUB telemetry.y 3\r\nabcdef\r\n", "-ERR", true},
		{"invalid subject", "SUB a..b 1\r\nPING\r\n", "-ERR 'Invalid Subject'", false},
		{"bad device", "PUB telemetry.a.b 2\r\nhi\r\nPING\r\n", "-ERR 'Permissions Violation", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, n.natsPort)
			r.send(`CONNECT {"verbose":false}` + "\r\n")
			r.send(c.send)
			if got := r.line(); !strings.HasPrefix(got, c.wantErr) {
				t.Fatalf("got %q, want %q", got, c.wantErr)
			}
			if c.closes {
				if !r.closed() {
					t.Fatal("connection left open")
				}
			} else if got := r.line(); got != "PONG" {
				t.Fatalf("after a non-fatal error got %q, want PONG", got)
			}
		})
	}
	t.Run("truncated publish stores nothing", func(t *testing.T) {
		r := dialRaw(t, n.natsPort)
		r.send("CONNECT {}\r\nPUB telemetry.truncated 10\r\nabc")
		r.c.Close()
		time.Sleep(100 * time.Millisecond)
		out, _ := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
		if strings.Contains(out, "truncated") {
			t.Fatal("a truncated publish was stored")
		}
	})
	t.Run("client that never reads", func(t *testing.T) {
		// A plain subscriber on everything that never reads its socket: the
		// node must close it as a slow consumer, not block.
		r := dialRaw(t, n.natsPort)
		r.send("CONNECT {}\r\nSUB telemetry.> 1\r\nSUB flood 2\r\nPING\r\n")
		if got := r.line(); got != "PONG" {
			t.Fatalf("got %q", got)
		}
		flood, err := nats.Connect(n.url())
		if err != nil {
			t.Fatal(err)
		}
		defer flood.Close()
		big := make([]byte, 32<<10)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			for i := 0; i < 64; i++ {
				flood.Publish("flood", big)
			}
			flood.Flush()
			st, _ := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
			if strings.Contains(st, `"slow_consumer_closes": 1`) || strings.Contains(st, `"write_timeout_closes": 1`) {
				return
			}
		}
		t.Fatal("the non-reading client was never closed")
	})
	close(stop)
	<-done
	// The good clients kept working through all of it.
	waitFor(t, "good traffic acked and delivered", 30*time.Second, func() bool {
		return int64(pub.acked()) == published.Load() && int64(tr.distinct()) == published.Load()
	})
	if pub.failed.Load() > 0 {
		t.Fatalf("%d good publishes failed", pub.failed.Load())
	}
}

func TestAuth(t *testing.T) {
	n := newNode(t, "nats:\n  auth_token: s3cret\n")
	n.start()
	if _, err := nats.Connect(n.url(), nats.Token("wrong")); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := nats.Connect(n.url()); err == nil {
		t.Fatal("no token accepted")
	}
	nc, err := nats.Connect(n.url(), nats.Token("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Request("telemetry.ok", []byte("x"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	st, _ := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
	if !strings.Contains(st, `"auth_failures": 2`) {
		t.Fatalf("auth failures not counted: %s", st)
	}
	// Listening beyond loopback without auth is refused at start.
	out, err := runCmd(edgeqBin, "run", "--data", t.TempDir(), "--nats", "0.0.0.0:0")
	if err == nil || !strings.Contains(out, "nats.listen") {
		t.Fatalf("open listener without auth: %v %s", err, out)
	}
}

// TestSlowQueueMemberRedelivered: a queue member that never reads is closed
// as a slow consumer and what it held goes to the other member.
func TestSlowQueueMemberRedelivered(t *testing.T) {
	// max_pending must hold a member's credit worth of messages (64 × 4 KiB
	// here); the slow member raises its own credit to 5000 so that what the
	// group pushes at it overflows the kernel's socket buffers and then its
	// pending bytes.
	n := newNode(t, "nats:\n  max_pending: 512KiB\n  max_payload: 16KiB\nqueue:\n  ack_wait: 30s\n  max_in_flight: 64\n")
	n.start()
	slow := dialRaw(t, n.natsPort)
	slow.send("CONNECT {\"headers\":true}\r\nSUB telemetry.> workers 1\r\nPUB $EQ.RDY.1 4\r\n5000\r\nPING\r\n")
	if got := slow.line(); got != "PONG" {
		t.Fatalf("got %q", got)
	}
	// The slow member never reads from here on.
	pub := newPublisher(t, n.url(), 100)
	payload := strings.Repeat("x", 4<<10)
	const total = 3000
	for i := 1; i <= total; i++ {
		pub.publish(fmt.Sprintf("d%d", i), fmt.Sprintf("%d|%s", i, payload)) // one in flight per device: many devices
	}
	waitFor(t, "pub-acks", 30*time.Second, func() bool { return pub.acked() == total })
	waitFor(t, "slow member closed", 30*time.Second, func() bool {
		st, _ := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
		return strings.Contains(st, `"slow_consumer_closes": 1`) || strings.Contains(st, `"write_timeout_closes": 1`)
	})
	tr := newTracker(t)
	startWorker(t, n.url(), "good", tr, func() {})
	// Everything, including what the slow member held when it was closed,
	// reaches the good worker (ack_wait is 30s: only the close frees them).
	waitFor(t, "all delivered to the good worker", 20*time.Second, func() bool { return tr.distinct() == total })
}
