// Package loglimit keeps a flood of one kind of event (malformed frames, a
// storage outage at hundreds of messages per second) from flooding the log:
// one line per interval goes through, and the next line that does says how
// many were held back. The pacing is golang.org/x/time/rate's token bucket
// (burst 1); the time is an argument, so tests drive it with a fake clock.
package loglimit

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limiter lets one line through per interval. Safe for concurrent use.
type Limiter struct {
	lim        *rate.Limiter
	suppressed atomic.Uint64
}

// New returns a limiter that lets the first line through, then one per
// every (an interval of 0 or less lets every line through).
func New(every time.Duration) *Limiter {
	return &Limiter{lim: rate.NewLimiter(rate.Every(every), 1)}
}

// Allow reports whether to log a line at now, and how many lines were held
// back since the last one let through.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed uint64) {
	if !l.lim.AllowN(now, 1) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}

// Keyed is one Limiter per key (a reason), at most maxKeys of them: a line
// for a key beyond them is held back and not counted. Safe for concurrent
// use.
type Keyed[K comparable] struct {
	every   time.Duration
	maxKeys int

	mu   sync.Mutex
	keys map[K]*Limiter // bound: maxKeys
}

// NewKeyed returns a keyed limiter with one line per key per every.
func NewKeyed[K comparable](every time.Duration, maxKeys int) *Keyed[K] {
	return &Keyed[K]{every: every, maxKeys: maxKeys, keys: make(map[K]*Limiter)}
}

// Allow is Limiter.Allow for key's limiter.
func (k *Keyed[K]) Allow(key K, now time.Time) (ok bool, suppressed uint64) {
	k.mu.Lock()
	l := k.keys[key]
	if l == nil {
		if len(k.keys) >= k.maxKeys {
			k.mu.Unlock()
			return false, 0
		}
		l = New(k.every)
		k.keys[key] = l
	}
	k.mu.Unlock()
	return l.Allow(now)
}

// Len is the number of keys held.
func (k *Keyed[K]) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}
