package connset

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

func TestSetBoundsServesAndWaits(t *testing.T) {
	var counts Counts
	s := New[uint64](2, &counts)
	release := make(chan struct{})
	serve := func(id uint64) {
		<-release
		s.Remove(id)
	}
	id := func(id uint64) uint64 { return id }
	if !s.Serve(id, serve) || !s.Serve(id, serve) {
		t.Fatal("refused below the bound")
	}
	if s.Serve(id, serve) {
		t.Fatal("a third connection over max 2 was accepted")
	}
	if got := s.All(); len(got) != 2 || got[0] == got[1] {
		t.Fatalf("live connections %v", got)
	}
	if n, total := counts.Connections.Load(), counts.TotalConnections.Load(); n != 2 || total != 2 {
		t.Fatalf("counts: %d open, %d total; want 2, 2", n, total)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Wait(ctx); err == nil {
		t.Fatal("Wait returned while connections were serving")
	}
	close(release)
	if err := s.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(s.All()) != 0 {
		t.Fatal("connections not removed")
	}
	s.Remove(1) // twice: counted once
	if n, total := counts.Connections.Load(), counts.TotalConnections.Load(); n != 0 || total != 2 {
		t.Fatalf("counts after close: %d open, %d total; want 0, 2", n, total)
	}
}

func TestAcceptServesRefusesAndStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New[net.Conn](1, new(Counts))
	refused := make(chan struct{}, 1)
	s.Accept(ln, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(_ uint64, nc net.Conn) net.Conn { return nc },
		func(nc net.Conn) { _, _ = io.Copy(io.Discard, nc); nc.Close() },
		func(nc net.Conn) { nc.Close(); refused <- struct{}{} })
	first, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for len(s.All()) == 0 {
		time.Sleep(time.Millisecond)
	}
	second, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	select {
	case <-refused:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection over max 1 was not refused")
	}
	s.StopAccepting()
	s.StopAccepting() // twice is fine
	first.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("accept loop or connection still running after StopAccepting: %v", err)
	}
}
