package wal

import (
	"sync/atomic"
	"time"
)

// HistogramBounds are the upper bounds of the fsync latency buckets.
var HistogramBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// Histogram is a fixed-bucket latency histogram, safe for concurrent use and
// allocation-free.
type Histogram struct {
	counts [len(HistogramBounds) + 1]atomic.Uint64
	sumNs  atomic.Uint64
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	i := 0
	for i < len(HistogramBounds) && d > HistogramBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(d))
}

// HistogramSnapshot is a copy of a Histogram: per-bucket (not cumulative) counts,
// the last bucket being +Inf.
type HistogramSnapshot struct {
	Counts [len(HistogramBounds) + 1]uint64
	Sum    time.Duration
}

// Snapshot copies the histogram.
func (h *Histogram) Snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = time.Duration(h.sumNs.Load())
	return s
}

// Count is the number of observations.
func (s HistogramSnapshot) Count() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}
