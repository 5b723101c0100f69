package wal

import "time"

// roundBurst is how many commit rounds may run back to back at once for
// waiters after a quiet spell (the round budget's bucket size).
const roundBurst = 4

// pacer decides when the next commit round runs under DurabilityInterval. It
// is pure: times are durations since an arbitrary origin, passed in.
//
// Rounds run on demand:
//   - Something waits for durability (a pub-ack, a PUBACK, an HTTP 200, an
//     offset commit): a round runs at once if the round budget allows, else
//     as soon as it does. The budget is a token bucket filled at one round
//     per fsync_interval, holding at most roundBurst: a lone synchronous
//     publisher on an idle disk is fsynced at once (not held a whole
//     interval), a steady stream of waiters is group-committed at one round
//     per fsync_interval.
//   - Only data nobody waits for is unsynced (serial, Modbus,
//     fire-and-forget publishes): it rides on the rounds waiters start, and
//     otherwise a round runs once the oldest of it is lazy_sync old (the
//     worst-case loss window on a power cut for such data).
//   - Under load (commit_bytes written at commit_bytes per loadPeriod or
//     faster, see loaded) rounds for waiters run back to back past the
//     budget: a windowed publisher is not held to window / fsync_interval.
//     Data nobody waits for starts a round once commit_bytes of it are
//     unsynced.
type pacer struct {
	interval    time.Duration // fsync_interval: one round's worth of budget
	lazy        time.Duration // lazy_sync
	commitBytes int64

	tokens    float64       // round budget, 0..roundBurst
	filled    time.Duration // when tokens were last brought up to date
	lastStart time.Duration // when the last round started
}

func newPacer(interval, lazy time.Duration, commitBytes int) *pacer {
	return &pacer{interval: interval, lazy: lazy, commitBytes: int64(commitBytes), tokens: roundBurst}
}

// unsynced is what the pacer decides on.
type unsynced struct {
	dirty   bool          // anything unsynced at all
	waiting bool          // some unsynced append or commit has a waiter
	oldest  time.Duration // when the oldest unsynced data was written
	arrived int64         // bytes written since the last round started
}

// next says whether a round is due at now; if not, wait is how long until
// it may be (0: nothing to do until something changes).
func (pc *pacer) next(now time.Duration, p unsynced) (due bool, wait time.Duration) {
	if !p.dirty {
		return false, 0
	}
	pc.fill(now)
	if p.waiting {
		if pc.tokens >= 1 || loaded(p.arrived, now-pc.lastStart, pc.interval, pc.commitBytes) {
			return true, 0
		}
		return false, max(time.Duration((1-pc.tokens)*float64(pc.interval)), time.Microsecond)
	}
	// Nobody waits: only commit_bytes or age start a round (no load rule:
	// nobody's throughput depends on it).
	if age := now - p.oldest; age < pc.lazy && p.arrived < pc.commitBytes {
		return false, pc.lazy - age
	}
	return true, 0
}

// started records that a round started at now: it takes one round of budget.
func (pc *pacer) started(now time.Duration) {
	pc.fill(now)
	pc.tokens = max(pc.tokens-1, 0)
	pc.lastStart = now
}

func (pc *pacer) fill(now time.Duration) {
	if now > pc.filled {
		pc.tokens = min(pc.tokens+float64(now-pc.filled)/float64(pc.interval), roundBurst)
		pc.filled = now
	}
}

// loadPeriod caps the period of the load rule.
const loadPeriod = 10 * time.Millisecond

// loaded says whether the bytes written since the last round started
// (arrived, over since) start the next round at once:
//   - commit_bytes have arrived, whatever the time; or
//   - they come at a rate of at least commit_bytes per period, where period
//     is fsync_interval capped at loadPeriod: then rounds run back to back,
//     and a publisher with a window of W records is not held to
//     W / fsync_interval. The elapsed time counts as at least a quarter
//     period, so that a few records right after a round (a fast disk) do not
//     start another one: it takes a burst of commit_bytes / 4.
//
// Together: arrived >= commit_bytes * clamp(since / period, 1/4, 1).
func loaded(arrived int64, since, interval time.Duration, commitBytes int64) bool {
	if arrived >= commitBytes {
		return true
	}
	period := min(interval, loadPeriod)
	since = max(since, period/4)
	return float64(arrived)*float64(period) >= float64(commitBytes)*float64(since)
}
