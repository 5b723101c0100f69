// Package bridge holds what the ingest bridges (bridge/mqtt, bridge/serial)
// share: the one thing they need from the node.
package bridge

import "edgeq/wal"

// Appender stores records durably. done is called exactly once, after the
// record is durable (or with the reason it is not), from a goroutine that must
// not be blocked: acknowledge upstream and return. rec must stay untouched
// until done is called. *wal.Log implements it; the node wraps it to route hot
// devices and count ingest.
type Appender interface {
	AppendAsync(rec *wal.Record, done func(wal.Position, error))
}

var _ Appender = (*wal.Log)(nil)
