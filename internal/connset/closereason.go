package connset

import "sync/atomic"

// CloseReason says why a client connection ended, as nats-server's
// ClosedState does; every front end counts its closes by reason.
type CloseReason uint8

const (
	ClosedByClient       CloseReason = iota // the client closed it, or the connection broke while reading
	ClosedWriteError                        // a write failed (not a timeout)
	ClosedAuthViolation                     // bad credentials, or an operation before the handshake
	ClosedAuthTimeout                       // no handshake within the auth timeout
	ClosedProtocolError                     // the client broke the protocol (parser error, max payload, ...)
	ClosedSlowConsumer                      // pending output over max_pending
	ClosedWriteTimeout                      // a write did not finish within write_deadline
	ClosedStale                             // pings or heartbeats unanswered
	ClosedServerShutdown                    // the node stops
	ClosedTLSHandshake                      // the TLS handshake failed (plaintext client, bad or missing certificate)
	numCloseReasons
)

var closeReasonNames = [numCloseReasons]string{
	"client", "write_error", "auth_violation", "auth_timeout", "protocol_error",
	"slow_consumer", "write_timeout", "stale", "server_shutdown", "tls_handshake",
}

func (r CloseReason) String() string {
	if r < numCloseReasons {
		return closeReasonNames[r]
	}
	return "unknown"
}

// CloseReasons lists every reason in order, for metrics.
func CloseReasons() []CloseReason {
	out := make([]CloseReason, numCloseReasons)
	for i := range out {
		out[i] = CloseReason(i)
	}
	return out
}

// CloseCounts counts closes by reason.
type CloseCounts struct {
	n [numCloseReasons]atomic.Uint64
}

// Add counts one close for r.
func (c *CloseCounts) Add(r CloseReason) {
	if r < numCloseReasons {
		c.n[r].Add(1)
	}
}

// Closed returns how many connections closed for r.
func (c *CloseCounts) Closed(r CloseReason) uint64 {
	if r >= numCloseReasons {
		return 0
	}
	return c.n[r].Load()
}
