package wal

import (
	"testing"
	"time"
)

// The pacer's decisions, step by step on a fake clock.
func TestPacer(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		at      time.Duration
		u       unsynced
		due     bool
		wait    time.Duration
		started bool // the runner starts the round it was told is due
	}
	waiter := func(oldest time.Duration) unsynced {
		return unsynced{dirty: true, waiting: true, oldest: oldest, arrived: 200}
	}
	lazy := func(oldest time.Duration) unsynced { return unsynced{dirty: true, oldest: oldest, arrived: 200} }
	for _, tt := range []struct {
		name  string
		steps []step
	}{
		{"nothing unsynced: nothing to do", []step{{at: 0, u: unsynced{}, due: false, wait: 0}}},
		{"a lone waiter on an idle disk: at once", []step{
			{at: 5 * ms, u: waiter(5 * ms), due: true, started: true},
		}},
		{"a synchronous publisher: the burst, then one round per interval", []step{
			{at: 100 * ms, u: waiter(100 * ms), due: true, started: true},
			{at: 101 * ms, u: waiter(101 * ms), due: true, started: true},
			{at: 102 * ms, u: waiter(102 * ms), due: true, started: true},
			{at: 103 * ms, u: waiter(103 * ms), due: true, started: true},
			// 4 rounds in 3ms took the burst: 0.3 tokens are back.
			{at: 104 * ms, u: waiter(104 * ms), due: false, wait: 6 * ms},
			{at: 110 * ms, u: waiter(104 * ms), due: true, started: true},
			{at: 111 * ms, u: waiter(111 * ms), due: false, wait: 9 * ms},
		}},
		{"data nobody waits for: after lazy_sync", []step{
			{at: 0, u: lazy(0), due: false, wait: time.Second},
			{at: 400 * ms, u: lazy(0), due: false, wait: 600 * ms},
			{at: time.Second, u: lazy(0), due: true, started: true},
		}},
		{"lazy data rides on a waiter's round", []step{
			{at: 0, u: lazy(0), due: false, wait: time.Second},
			{at: 300 * ms, u: waiter(0), due: true, started: true},
		}},
		{"under load: back to back, past the budget", []step{
			{at: 0, u: waiter(0), due: true, started: true},
			{at: ms, u: waiter(0), due: true, started: true},
			{at: 2 * ms, u: waiter(0), due: true, started: true},
			{at: 3 * ms, u: waiter(0), due: true, started: true},
			{at: 4 * ms, u: unsynced{dirty: true, waiting: true, arrived: 16 << 10}, due: true, started: true},
			{at: 5 * ms, u: unsynced{dirty: true, arrived: 16 << 10}, due: true, started: true},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pc := newPacer(10*ms, time.Second, 16<<10)
			for i, s := range tt.steps {
				due, wait := pc.next(s.at, s.u)
				if due != s.due || (!due && (wait-s.wait > time.Microsecond || s.wait-wait > time.Microsecond)) {
					t.Fatalf("step %d at %v: next = %v, %v; want %v, %v", i, s.at, due, wait, s.due, s.wait)
				}
				if s.started {
					pc.started(s.at)
				}
			}
		})
	}
}

// Over a long steady stream of waiters the budget holds: at most one round
// per interval plus the burst, whatever the arrival pattern.
func TestPacerBudget(t *testing.T) {
	const interval = 10 * time.Millisecond
	for _, gap := range []time.Duration{50 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 9 * time.Millisecond, 25 * time.Millisecond} {
		pc := newPacer(interval, time.Second, 16<<10)
		rounds := 0
		var now time.Duration
		for now = 0; now < 10*time.Second; now += gap {
			if due, _ := pc.next(now, unsynced{dirty: true, waiting: true, oldest: now, arrived: 200}); due {
				pc.started(now)
				rounds++
			}
		}
		if limit := int(now/interval) + roundBurst; rounds > limit {
			t.Errorf("arrivals every %v: %d rounds in %v, budget %d", gap, rounds, now, limit)
		}
		if gap <= interval && rounds < int(now/interval)/2 {
			t.Errorf("arrivals every %v: only %d rounds in %v", gap, rounds, now)
		}
	}
}
