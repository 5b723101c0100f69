package hist

import (
	"testing"
	"time"
)

func TestObserveAndQuantile(t *testing.T) {
	h := New([]time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond})
	for i := 0; i < 90; i++ {
		h.Observe(500 * time.Microsecond)
	}
	for i := 0; i < 9; i++ {
		h.Observe(50 * time.Millisecond)
	}
	h.Observe(time.Second)
	h.Observe(-time.Second)
	s := h.Snapshot()
	if s.Count() != 101 || s.Counts[0] != 91 || s.Counts[2] != 9 || s.Counts[3] != 1 {
		t.Fatalf("counts %v", s.Counts)
	}
	if q := s.Quantile(0.5); q != time.Millisecond {
		t.Fatalf("p50 %v", q)
	}
	if q := s.Quantile(0.95); q != 100*time.Millisecond {
		t.Fatalf("p95 %v", q)
	}
	if q := s.Quantile(1); q != 200*time.Millisecond {
		t.Fatalf("p100 %v (the +Inf bucket)", q)
	}
	if s.Sum != 45*time.Millisecond+450*time.Millisecond+time.Second {
		t.Fatalf("sum %v", s.Sum)
	}
	if n := testing.AllocsPerRun(100, func() { h.Observe(time.Millisecond) }); n != 0 {
		t.Fatalf("observe allocates %v", n)
	}
	if (Snapshot{}).Quantile(0.5) != 0 {
		t.Fatal("empty quantile")
	}
}

// TestWindowForgetsBacklog: a backlog's 30 s queueing shows in the window's
// p99 while it is recent and is gone n pushes later; with nothing
// observed the window is empty (p99 0), while the histogram keeps it all.
func TestWindowForgetsBacklog(t *testing.T) {
	h := New([]time.Duration{time.Millisecond, time.Second, 30 * time.Second})
	w := NewWindow(5)
	for i := 0; i < 100; i++ {
		h.Observe(20 * time.Second) // a backlog drains
	}
	if p := w.Push(h.Snapshot()).Quantile(0.99); p != 30*time.Second {
		t.Fatalf("p99 with the backlog %v, want 30s", p)
	}
	for i := 0; i < 5; i++ {
		h.Observe(500 * time.Microsecond) // a trickle, delivered at once
		w.Push(h.Snapshot())
	}
	recent := w.Push(h.Snapshot())
	if p := recent.Quantile(0.99); p != time.Millisecond || recent.Count() != 4 {
		t.Fatalf("p99 %v over %d observations after the backlog left the window, want 1ms over 4", p, recent.Count())
	}
	for i := 0; i < 5; i++ {
		recent = w.Push(h.Snapshot())
	}
	if recent.Count() != 0 || recent.Quantile(0.99) != 0 {
		t.Fatalf("idle window: %d observations, p99 %v; want none", recent.Count(), recent.Quantile(0.99))
	}
	if all := h.Snapshot(); all.Quantile(0.99) != 30*time.Second || all.Count() != 105 {
		t.Fatalf("the histogram itself: %v over %d", all.Quantile(0.99), all.Count())
	}
}
