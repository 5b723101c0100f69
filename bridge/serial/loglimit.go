package serial

import (
	"sync/atomic"
	"time"
)

// logLimiter lets one log line through per interval and counts the rest,
// so a storage outage (ENOSPC) at hundreds of frames per second logs a line
// every few seconds, not one per frame. Safe for concurrent use.
type logLimiter struct {
	every      time.Duration
	last       atomic.Int64 // unix ns of the last line let through
	suppressed atomic.Uint64
}

// allow reports whether to log now and how many lines were suppressed since
// the last one let through.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed uint64) {
	last := l.last.Load()
	if now.UnixNano()-last < int64(l.every) || !l.last.CompareAndSwap(last, now.UnixNano()) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
