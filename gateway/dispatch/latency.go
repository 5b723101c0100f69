package dispatch

import (
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds of the ingest→delivery histogram.
var LatencyBounds = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second,
}

// latencyHistogram counts first deliveries by ingest→delivery latency.
type latencyHistogram struct {
	counts [len(LatencyBounds) + 1]atomic.Uint64
	sumNs  atomic.Int64
}

func (h *latencyHistogram) observe(d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// LatencySnapshot holds per-bucket (not cumulative) counts; the last is +Inf.
type LatencySnapshot struct {
	Counts [len(LatencyBounds) + 1]uint64
	Sum    time.Duration
}

func (h *latencyHistogram) snapshot() LatencySnapshot {
	var s LatencySnapshot
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = time.Duration(h.sumNs.Load())
	return s
}

// Quantile estimates the q-quantile (0..1) as the upper bound of the bucket
// that holds it; 0 when empty.
func (s LatencySnapshot) Quantile(q float64) time.Duration {
	var total uint64
	for _, c := range s.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var acc uint64
	for i, c := range s.Counts {
		acc += c
		if acc > rank {
			if i < len(LatencyBounds) {
				return LatencyBounds[i]
			}
			return LatencyBounds[len(LatencyBounds)-1] * 2
		}
	}
	return LatencyBounds[len(LatencyBounds)-1]
}
