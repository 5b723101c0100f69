package connset

import (
	"context"
	"testing"
	"time"
)

func TestSetBoundsServesAndWaits(t *testing.T) {
	s := New[uint64](2)
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
}
