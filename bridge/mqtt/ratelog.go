package mqtt

import (
	"sync"
	"time"
)

// logLimiter lets one log line per key through per interval and counts the
// rest, so that a flood of bad messages cannot flood the log. The key set is
// the fixed set of reasons, so the map stays small.
type logLimiter struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[Reason]*limiterState
}

type limiterState struct {
	last       time.Time
	suppressed uint64
}

// maxLimiterKeys bounds the map should a caller ever pass unbounded keys.
const maxLimiterKeys = 64

func newLogLimiter(interval time.Duration, now func() time.Time) *logLimiter {
	return &logLimiter{interval: interval, now: now, keys: make(map[Reason]*limiterState)}
}

// allow reports whether a line for key may be logged now and how many lines
// for key were suppressed since the last one that was.
func (l *logLimiter) allow(key Reason) (ok bool, suppressed uint64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.keys[key]
	if st == nil {
		if len(l.keys) >= maxLimiterKeys {
			return false, 0
		}
		st = &limiterState{}
		l.keys[key] = st
	} else if now.Sub(st.last) < l.interval {
		st.suppressed++
		return false, 0
	}
	suppressed, st.suppressed, st.last = st.suppressed, 0, now
	return true, suppressed
}
