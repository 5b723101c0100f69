package natsserver

import "edgeq/internal/connset"

// CloseReason says why a client connection ended (shared by the TCP front
// ends: see connset).
type CloseReason = connset.CloseReason

const (
	ClosedByClient       = connset.ClosedByClient
	ClosedWriteError     = connset.ClosedWriteError
	ClosedAuthViolation  = connset.ClosedAuthViolation
	ClosedAuthTimeout    = connset.ClosedAuthTimeout
	ClosedProtocolError  = connset.ClosedProtocolError
	ClosedSlowConsumer   = connset.ClosedSlowConsumer
	ClosedWriteTimeout   = connset.ClosedWriteTimeout
	ClosedStale          = connset.ClosedStale
	ClosedServerShutdown = connset.ClosedServerShutdown
	ClosedTLSHandshake   = connset.ClosedTLSHandshake
)

// CloseReasons lists every reason in order, for metrics.
func CloseReasons() []CloseReason { return connset.CloseReasons() }

// Closed returns how many connections closed for reason r.
func (s *Stats) Closed(r CloseReason) uint64 { return s.closes.Closed(r) }
