package loglimit

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestKeyed: one line per key per interval, each key on its own, the count
// of held-back lines reported with the next line let through, and the key
// table bounded.
func TestKeyed(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewKeyed[string](10*time.Second, 4)
	steps := []struct {
		advance    time.Duration
		key        string
		ok         bool
		suppressed uint64
	}{
		{0, "no_match", true, 0},
		{time.Second, "no_match", false, 0},
		{time.Second, "no_match", false, 0},
		{0, "bad_json", true, 0}, // keys are independent
		{8 * time.Second, "no_match", true, 2},
		{0, "no_match", false, 0},
		{10 * time.Second, "no_match", true, 1},
		{-time.Hour, "no_match", false, 0}, // a clock that steps back lets nothing through early
		{time.Hour + 10*time.Second, "no_match", true, 1},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		ok, n := l.Allow(s.key, now)
		if ok != s.ok || n != s.suppressed {
			t.Fatalf("step %d: Allow(%s) = %v, %d; want %v, %d", i, s.key, ok, n, s.ok, s.suppressed)
		}
	}
	for i := range 20 {
		l.Allow("k"+strconv.Itoa(i), now)
	}
	if l.Len() != 4 {
		t.Fatalf("limiter holds %d keys, want its bound 4", l.Len())
	}
	if ok, _ := l.Allow("k-new", now.Add(time.Hour)); ok {
		t.Fatal("a key beyond the bound was let through")
	}
}

// TestConcurrent: from many goroutines at one instant exactly one line goes
// through, and the next one reports all the others.
func TestConcurrent(t *testing.T) {
	l := New(time.Minute)
	now := time.Unix(1000, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	through := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if ok, _ := l.Allow(now); ok {
					mu.Lock()
					through++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if through != 1 {
		t.Fatalf("%d lines through, want 1", through)
	}
	if ok, n := l.Allow(now.Add(time.Minute)); !ok || n != 799 {
		t.Fatalf("after the interval: %v, %d held back; want true, 799", ok, n)
	}
}
