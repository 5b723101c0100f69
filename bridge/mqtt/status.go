package mqtt

import (
	"sync"
	"sync/atomic"
	"time"
)

// Status is one bridge's state for /v1/status and metrics.
type Status struct {
	Name          string    `json:"name"`
	Broker        string    `json:"broker"`
	ClientID      string    `json:"client_id"`
	Connected     bool      `json:"connected"`
	Subscribed    bool      `json:"subscribed"` // the current connection's subscriptions were granted
	LastError     string    `json:"last_error,omitempty"`
	LastErrorTime time.Time `json:"last_error_time,omitzero"`
	Counters      Counters  `json:"counters"`
}

// Counters are monotonic counts since New (suitable as Prometheus counters),
// except Queued and Pending, which are gauges.
type Counters struct {
	Received    uint64 `json:"received"`    // messages delivered by the broker
	Redelivered uint64 `json:"redelivered"` // of them, with the DUP flag set
	Stored      uint64 `json:"stored"`      // records made durable
	Acked       uint64 `json:"acked"`       // QoS 1/2 acks handed to paho
	// Unmappable counts messages without a valid device ID by reason; they are acked.
	Unmappable map[Reason]uint64 `json:"unmappable"`
	// Rejected counts records the log refused for good by reason; they are acked.
	Rejected map[Reason]uint64 `json:"rejected"`
	// Dropped counts QoS 0 messages lost by reason (QoS 0 is never redelivered).
	Dropped map[Reason]uint64 `json:"dropped"`
	// Deferred counts QoS 1/2 messages left unacked so that the broker
	// redelivers them: after a storage error, while stopping, on a full queue.
	Deferred         uint64 `json:"deferred"`
	StorageErrors    uint64 `json:"storage_errors"`    // failed appends (disk full, budget, I/O)
	Connects         uint64 `json:"connects"`          // successful connections, the first included
	Reconnects       uint64 `json:"reconnects"`        // successful connections after the first
	ConnectionsLost  uint64 `json:"connections_lost"`  // connections that dropped
	ForcedReconnects uint64 `json:"forced_reconnects"` // connections closed by the bridge to get redelivery
	SubscribeErrors  uint64 `json:"subscribe_errors"`  // failed or refused subscriptions
	ReadPauses       uint64 `json:"read_pauses"`       // socket reads held back while the queue filled
	Queued           int    `json:"queued"`            // gauge: messages waiting for the appender
	Pending          int    `json:"pending"`           // gauge: appends waiting for durability or their ack
}

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
