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
