package mqtt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

func TestCoalescingConnKeepsOrderAndFlushesOnClose(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	w := newCoalescingConn(client)
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(server)
		got <- b
	}()
	var want bytes.Buffer
	for i := 0; i < 2000; i++ {
		p := []byte(fmt.Sprintf("packet-%d;", i))
		want.Write(p)
		if n, err := w.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write %d = %d, %v", i, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("peer read %d bytes, want %d in order", len(b), want.Len())
	}
	if _, err := w.Write([]byte("late")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

func TestCoalescingConnReportsSendErrors(t *testing.T) {
	client, server := net.Pipe()
	w := newCoalescingConn(client)
	_ = server.Close() // the peer is gone: the flusher's send fails
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = w.Write([]byte("x"))
		time.Sleep(time.Millisecond)
	}
	if err == nil {
		t.Fatal("Write never reported the broken connection")
	}
	if cerr := w.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		t.Logf("close: %v", cerr)
	}
}

func TestCoalescingConnCloseDoesNotWaitForADeadPeer(t *testing.T) {
	client, server := net.Pipe() // nobody reads server: every send blocks
	defer server.Close()
	w := newCoalescingConn(client)
	if _, err := w.Write(make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Close() }()
	select {
	case <-done:
	case <-time.After(20 * closeFlushTimeout):
		t.Fatal("Close waited for a peer that reads nothing")
	}
}

func TestBreakableConnFailsPendingRead(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	c := newBreakableConn(client, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 10))
		errc <- err
	}()
	c.breakNow()
	if err := <-errc; !errors.Is(err, errForcedReconnect) {
		t.Fatalf("Read after breakNow = %v, want errForcedReconnect", err)
	}
}
