package serial

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const lo, hi = 100 * time.Millisecond, 5 * time.Second
	tests := []struct {
		n        int
		rnd      float64
		min, max time.Duration
	}{
		{0, 0, 50 * time.Millisecond, 50 * time.Millisecond},
		{0, 0.999, 50 * time.Millisecond, 100 * time.Millisecond},
		{3, 0, 400 * time.Millisecond, 400 * time.Millisecond},
		{3, 0.5, 600 * time.Millisecond, 600 * time.Millisecond},
		{6, 0.999, 2500 * time.Millisecond, 5 * time.Second},
		{60, 0.999, 2500 * time.Millisecond, 5 * time.Second},
		{1 << 30, 1, 5 * time.Second, 5 * time.Second},
		{2, -3, 200 * time.Millisecond, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		got := Backoff(tt.n, lo, hi, tt.rnd)
		if got < tt.min || got > tt.max {
			t.Errorf("Backoff(%d, rnd %v) = %v, want %v..%v", tt.n, tt.rnd, got, tt.min, tt.max)
		}
	}
}
