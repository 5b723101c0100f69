package mqtt

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"edgeq/wal"
)

// runChild opens the log in dir and runs a bridge on it until SIGTERM. It
// prints "connected" once, then every 50ms "distinct N": how many different
// test messages the log holds, read back from the log itself.
func runChild(dir, broker, clientID string) int {
	log, err := wal.Open(dir, wal.DefaultOptions(), testLogger())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open log:", err)
		return 1
	}
	cfg := testConfig("crash", broker)
	cfg.ClientID = clientID
	b, err := New(cfg, "", log, testLogger())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: new bridge:", err)
		return 1
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if err := b.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "child: start:", err)
		return 1
	}
	scan := newLogScanner(log)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	said := false
	for {
		select {
		case <-term:
			stopErr := b.Stop(5 * time.Second)
			if err := log.Close(); err != nil || stopErr != nil {
				fmt.Fprintln(os.Stderr, "child: stop:", stopErr, "close:", err)
				return 1
			}
			return 0
		case <-tick.C:
			if !said && b.Status().Connected {
				fmt.Println("connected")
				said = true
			}
			n, err := scan.distinct()
			if err != nil {
				fmt.Fprintln(os.Stderr, "child: scan:", err)
				return 1
			}
			fmt.Println("distinct", n)
		}
	}
}

// logScanner counts the distinct test messages in a log, reading on from
// where it stopped.
type logScanner struct {
	log  *wal.Log
	next []uint64
	seen map[msgKey]bool
}

func newLogScanner(l *wal.Log) *logScanner {
	s := &logScanner{log: l, next: make([]uint64, l.NumPartitions()), seen: make(map[msgKey]bool)}
	for p := range s.next {
		s.next[p] = 1
	}
	return s
}

func (s *logScanner) distinct() (int, error) {
	for p := range s.next {
		for {
			b, err := s.log.Read(p, s.next[p], 1024, 1<<20)
			if err != nil {
				return 0, err
			}
			if len(b.Entries) == 0 {
				break
			}
			for _, e := range b.Entries {
				k, err := parsePayload(e.Record.Payload)
				if err != nil {
					return 0, fmt.Errorf("partition %d offset %d: %w", p, e.Offset, err)
				}
				s.seen[k] = true
			}
			s.next[p] = b.Next
		}
	}
	return len(s.seen), nil
}

// child is a running child process and what it last reported.
type child struct {
	cmd       *exec.Cmd
	exited    chan struct{} // closed once the process is reaped; then err is set
	err       error
	connected chan struct{}
	distinct  atomic.Int64
}

// wait waits for the child to exit and returns its exit error.
func (c *child) wait() error {
	<-c.exited
	return c.err
}

func startChild(t *testing.T, dir, broker, clientID string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childBrokerEnv+"="+broker, childIDEnv+"="+clientID)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{}), connected: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "connected":
				close(c.connected)
			case strings.HasPrefix(line, "distinct "):
				n, _ := strconv.Atoi(strings.TrimPrefix(line, "distinct "))
				c.distinct.Store(int64(n))
			}
		}
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.exited
	})
	select {
	case <-c.connected:
	case <-c.exited:
		t.Fatalf("child exited before connecting: %v", c.err)
	case <-time.After(20 * time.Second):
		t.Fatal("child did not connect within 20s")
	}
	return c
}

// Test 4: edgeq (bridge and log, in a child process) is killed with SIGKILL
// mid-stream and restarted on the same data directory with the same client
// ID: every message the publisher got a PUBACK for is in the log; duplicates
// are allowed and counted.
func TestBridgeKilledAndRestartedLosesNothing(t *testing.T) {
	mq := startMosquitto(t, brokerOptions{})
	dir := t.TempDir()
	const clientID = "edgeq-crash-test"
	first := startChild(t, dir, mq.url(), clientID)

	msgs := makeMessages(100, 50)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pub := newRawPublisher(mq.addr(), "pub-crash", 100, msgs)
	pubErr := make(chan error, 1)
	go func() { pubErr <- pub.run(ctx) }()

	waitFor(t, 30*time.Second, "the first child to store a quarter", func() bool {
		return first.distinct.Load() >= int64(len(msgs)/4)
	})
	_ = first.cmd.Process.Signal(syscall.SIGKILL)
	_ = first.wait()
	killedAt := first.distinct.Load()
	if killedAt >= int64(len(msgs)) {
		t.Fatalf("the first child had stored everything (%d) before the kill: not mid-stream", killedAt)
	}

	second := startChild(t, dir, mq.url(), clientID)
	if err := <-pubErr; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the second child to hold every message", func() bool {
		return second.distinct.Load() >= int64(len(msgs))
	})
	_ = second.cmd.Process.Signal(syscall.SIGTERM)
	if err := second.wait(); err != nil {
		t.Fatalf("second child: %v", err)
	}

	log := openLog(t, dir)
	defer log.Close()
	c := readLog(t, log)
	if m := c.missing(msgs, pub.ackedBy(0)); len(m) > 0 {
		t.Fatalf("%d PUBACKed messages missing from the log, e.g. %v", len(m), m[0])
	}
	t.Logf("killed after %d of %d stored; %d records, %d duplicates, %d per-device reorders",
		killedAt, len(msgs), c.records, c.duplicates(), c.reorders())
}
