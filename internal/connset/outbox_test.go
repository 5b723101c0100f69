package connset

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"
)

// pipeConn is one end of a net.Pipe with the other end read into a buffer.
func pipeConn(t *testing.T) (net.Conn, <-chan []byte) {
	t.Helper()
	a, b := net.Pipe()
	got := make(chan []byte, 1)
	go func() {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(b)
		got <- buf.Bytes()
	}()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, got
}

func TestOutboxFlushWritesInOrderAndEndsWhenClosed(t *testing.T) {
	var o Outbox
	o.Init()
	nc, got := pipeConn(t)
	o.Append([]byte("one "))
	o.Append([]byte("two "))
	select {
	case <-o.Wake():
	default:
		t.Fatal("Append did not wake the writer")
	}
	closed, err := o.Flush(nc, time.Second, nil)
	if err != nil || closed {
		t.Fatalf("Flush: closed %v err %v", closed, err)
	}
	o.Append([]byte("three"))
	if !o.Close() || o.Close() {
		t.Fatal("Close: want true once, then false")
	}
	o.Append([]byte(" after close")) // dropped
	closed, err = o.Flush(nc, time.Second, nil)
	if err != nil || !closed {
		t.Fatalf("Flush after Close: closed %v err %v", closed, err)
	}
	nc.Close()
	if b := <-got; string(b) != "one two three" {
		t.Fatalf("written %q", b)
	}
}

func TestOutboxAtSwapTakesStateWithExactlyThatOutput(t *testing.T) {
	var o Outbox
	o.Init()
	nc, got := pipeConn(t)
	upgrade := false
	o.Lock()
	o.Out = append(o.Out, "response"...)
	upgrade = true
	o.Unlock()
	var took bool
	if _, err := o.Flush(nc, time.Second, func() { took, upgrade = upgrade, false }); err != nil {
		t.Fatal(err)
	}
	if !took || upgrade {
		t.Fatal("atSwap did not run under the swap")
	}
	nc.Close()
	if b := <-got; string(b) != "response" {
		t.Fatalf("written %q", b)
	}
}

func TestOutboxKeepsSmallBuffersOnly(t *testing.T) {
	for _, size := range []int{100, spareMax + 1} {
		var o Outbox
		o.Init()
		nc, _ := pipeConn(t)
		o.Append(make([]byte, size))
		if _, err := o.Flush(nc, time.Second, nil); err != nil {
			t.Fatal(err)
		}
		o.Lock()
		kept := cap(o.Out) > 0 || cap(o.spare) > 0
		o.Unlock()
		if want := size <= spareMax; kept != want {
			t.Errorf("%d bytes written: buffer kept %v, want %v", size, kept, want)
		}
	}
}

func TestOutboxFlushTimeout(t *testing.T) {
	var o Outbox
	o.Init()
	a, b := net.Pipe() // nobody reads b: the write hits its deadline
	defer a.Close()
	defer b.Close()
	o.Append([]byte("stuck"))
	_, err := o.Flush(a, 10*time.Millisecond, nil)
	if err == nil || !TimedOut(err) {
		t.Fatalf("Flush to a reader that never reads: %v, want a timeout", err)
	}
	if TimedOut(errors.New("broken pipe")) {
		t.Fatal("TimedOut of a plain error")
	}
}

func TestCloseCounts(t *testing.T) {
	var c CloseCounts
	c.Add(ClosedSlowConsumer)
	c.Add(ClosedSlowConsumer)
	c.Add(CloseReason(200)) // out of range: ignored
	if c.Closed(ClosedSlowConsumer) != 2 || c.Closed(ClosedByClient) != 0 || c.Closed(CloseReason(200)) != 0 {
		t.Fatal("counts")
	}
	names := map[string]bool{}
	for _, r := range CloseReasons() {
		names[r.String()] = true
	}
	if len(names) != int(numCloseReasons) || names["unknown"] {
		t.Fatalf("reason names %v", names)
	}
}
