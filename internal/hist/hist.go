// Package hist is a fixed-bucket latency histogram: safe for concurrent use,
// allocation-free to observe, with snapshots for metrics and status. The log
// (fsync latency) and the queue groups (ingest→delivery latency) share it.
package hist

import (
	"sync/atomic"
	"time"
)

// Histogram counts durations into buckets with fixed upper bounds; the last
// bucket is +Inf.
type Histogram struct {
	bounds []time.Duration
	counts []atomic.Uint64 // len(bounds)+1
	sumNs  atomic.Int64
}

// New returns a histogram with the given ascending upper bounds.
func New(bounds []time.Duration) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records one duration (negative ones count as 0).
func (h *Histogram) Observe(d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < len(h.bounds) && d > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// Snapshot is a copy: per-bucket (not cumulative) counts, the last one +Inf.
type Snapshot struct {
	Bounds []time.Duration
	Counts []uint64
	Sum    time.Duration
}

// Snapshot copies the histogram.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bounds: h.bounds, Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sumNs.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// Count is the number of observations.
func (s Snapshot) Count() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Quantile estimates the q-quantile (0..1) as the upper bound of the bucket
// that holds it (twice the largest bound for the +Inf bucket); 0 when empty.
func (s Snapshot) Quantile(q float64) time.Duration {
	total := s.Count()
	if total == 0 || len(s.Bounds) == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var acc uint64
	for i, c := range s.Counts {
		acc += c
		if acc > rank {
			if i < len(s.Bounds) {
				return s.Bounds[i]
			}
			break
		}
	}
	return 2 * s.Bounds[len(s.Bounds)-1]
}

// Sub returns what was observed between old and s, two snapshots of one
// histogram (old taken first): the histogram of a time window.
func (s Snapshot) Sub(old Snapshot) Snapshot {
	out := Snapshot{Bounds: s.Bounds, Counts: make([]uint64, len(s.Counts)), Sum: s.Sum - old.Sum}
	for i := range s.Counts {
		if i < len(old.Counts) && old.Counts[i] <= s.Counts[i] {
			out.Counts[i] = s.Counts[i] - old.Counts[i]
		} else {
			out.Counts[i] = s.Counts[i]
		}
	}
	return out
}

// Window turns snapshots of one histogram, taken at a steady pace, into
// the histogram of the last n of them: a p99 that forgets a backlog once
// it is gone. Not safe for concurrent use.
type Window struct {
	ring []Snapshot // bound: n
	at   int
	full bool
}

// NewWindow keeps n snapshots (n >= 1).
func NewWindow(n int) *Window { return &Window{ring: make([]Snapshot, max(n, 1))} }

// Push takes the histogram's snapshot now and returns what was observed
// since the snapshot pushed n calls ago (everything, until n were pushed).
func (w *Window) Push(s Snapshot) Snapshot {
	recent := s
	if w.full {
		recent = s.Sub(w.ring[w.at])
	}
	w.ring[w.at] = s
	w.at = (w.at + 1) % len(w.ring)
	w.full = w.full || w.at == 0
	return recent
}
