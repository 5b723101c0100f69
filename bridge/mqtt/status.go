package mqtt

import (
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/apiv1"
)

// Status is one bridge's state for /v1/status and metrics: the API's
// document.
type Status = apiv1.MQTTStatus

// Counters are monotonic counts since New (suitable as Prometheus counters),
// except Queued and Pending, which are gauges.
type Counters = apiv1.MQTTCounters

// counters is the live form of Counters.
type counters struct {
	received, redelivered, stored, acked             atomic.Uint64
	deferred, storageErrors                          atomic.Uint64
	connects, reconnects, lost, forced, subscribeErr atomic.Uint64
	throttled                                        atomic.Uint64
	unmappable, rejected, dropped                    reasonCounts
}

// reasonCounts counts by reason. Reasons are a small fixed set, so the map
// cannot grow without bound.
type reasonCounts struct {
	mu sync.Mutex
	m  map[Reason]uint64
}

func (r *reasonCounts) add(reason Reason) {
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[Reason]uint64)
	}
	r.m[reason]++
	r.mu.Unlock()
}

func (r *reasonCounts) snapshot() map[Reason]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[Reason]uint64, len(r.m))
	for k, v := range r.m {
		out[k] = v
	}
	return out
}

func (c *counters) snapshot() Counters {
	return Counters{
		Received:         c.received.Load(),
		Redelivered:      c.redelivered.Load(),
		Stored:           c.stored.Load(),
		Acked:            c.acked.Load(),
		Unmappable:       c.unmappable.snapshot(),
		Rejected:         c.rejected.snapshot(),
		Dropped:          c.dropped.snapshot(),
		Deferred:         c.deferred.Load(),
		StorageErrors:    c.storageErrors.Load(),
		Connects:         c.connects.Load(),
		Reconnects:       c.reconnects.Load(),
		ConnectionsLost:  c.lost.Load(),
		ForcedReconnects: c.forced.Load(),
		SubscribeErrors:  c.subscribeErr.Load(),
		ReadPauses:       c.throttled.Load(),
	}
}

// lastError keeps the most recent error and its time.
type lastError struct {
	mu   sync.Mutex
	err  string
	when time.Time
}

func (l *lastError) set(err error, now time.Time) {
	l.mu.Lock()
	l.err, l.when = err.Error(), now
	l.mu.Unlock()
}

func (l *lastError) get() (string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err, l.when
}
