package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDelay: exponential from Min, capped at Max, half fixed and half
// jittered, with no overflow however many attempts failed. The cases are
// those the MQTT bridge (1s..30s) and the serial bridge (100ms..5s) had.
func TestDelay(t *testing.T) {
	mqtt := Policy{Min: time.Second, Max: 30 * time.Second}
	serial := Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	ms := time.Millisecond
	tests := []struct {
		p       Policy
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{mqtt, 0, 0, 500 * ms},
		{mqtt, 0, 0.5, 750 * ms},
		{mqtt, 1, 0, time.Second},
		{mqtt, 3, 0.5, 6 * time.Second},
		{mqtt, 4, 0, 8 * time.Second},
		{mqtt, 5, 0, 15 * time.Second}, // 32s capped to 30s
		{mqtt, 5, 0.5, 22500 * ms},
		{mqtt, 1000, 0, 15 * time.Second}, // no overflow
		{serial, 0, 0, 50 * ms},
		{serial, 3, 0, 400 * ms},
		{serial, 3, 0.5, 600 * ms},
		{serial, 1 << 30, 1, 5 * time.Second},
		{serial, 2, -3, 200 * ms}, // rnd clamped
		{serial, 2, 7, 400 * ms},
		{Policy{Max: time.Second}, 3, 0, 500 * ms},                         // no Min: as for the cap
		{Policy{Min: time.Hour, Max: time.Minute}, 0, 0, 30 * time.Second}, // Min above Max
		{Policy{Min: 1 << 62, Max: 1<<63 - 1}, 3, 0, (1<<63 - 1) / 2},      // doubling overflows
	}
	for _, tt := range tests {
		if got := tt.p.Delay(tt.attempt, tt.rnd); got != tt.want {
			t.Errorf("%+v.Delay(%d, %v) = %v, want %v", tt.p, tt.attempt, tt.rnd, got, tt.want)
		}
	}
	// With real randomness every delay stays within [Min/2, Max].
	r := rand.New(rand.NewPCG(1, 2))
	for attempt := range 70 {
		if d := mqtt.Delay(attempt, r.Float64()); d < 500*ms || d > mqtt.Max {
			t.Fatalf("attempt %d: %v outside [0.5s, 30s]", attempt, d)
		}
	}
}

// TestSleep: Sleep waits out its delay, and returns false at once when done
// is closed.
func TestSleep(t *testing.T) {
	done := make(chan struct{})
	start := time.Now()
	if !Sleep(done, 20*time.Millisecond) {
		t.Fatal("Sleep reported done with done open")
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("Sleep returned after %v", el)
	}
	close(done)
	start = time.Now()
	if Sleep(done, time.Hour) {
		t.Fatal("Sleep reported a full wait with done closed")
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Sleep took %v with done closed", el)
	}
}
