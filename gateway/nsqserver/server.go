// Package nsqserver serves the NSQ TCP protocol V2, so go-nsq consumers and
// producers and the NSQ tools (nsq_tail, nsq_to_file, ...) are edgeq workers
// and publishers. A channel of the telemetry topic is a queue group
// (<prefix>.>, channel): RDY is the member's credit, FIN acks, REQ naks with
// a delay, TOUCH resets the deadline; PUB and MPUB store telemetry durably
// and answer OK only once it is. Framing and the command parser are in
// proto.go; delivery logic stays in gateway/groups.
package nsqserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/tlsconf"
	"edgeq/internal/connset"
	"edgeq/internal/secret"
	"edgeq/wal"
)

// Config configures the server; see config.NSQ for meanings and defaults.
type Config struct {
	Listen            string
	AuthToken         secret.String
	TelemetryPrefix   string
	DeviceField       string // JSON path of the device ID in a PUB body to the bare topic
	MaxRdyCount       int
	MaxMsgSize        int
	MaxBodySize       int
	MaxConnections    int
	MaxPending        int // output bytes a connection may have queued
	MaxPendingPubs    int // publishes awaiting durability per connection
	HeartbeatInterval time.Duration
	MaxReqTimeout     time.Duration
	WriteDeadline     time.Duration
	AckWait           time.Duration // the groups' ack_wait, reported as msg_timeout
	NodeID            string
	Version           string
	// TLS, when set, is required of every client: IDENTIFY must ask for
	// tls_v1 and nothing else is taken before the upgrade (nsqd's
	// --tls-required). Client certificates as the store says (ca_file,
	// verify: nsqd's --tls-client-auth-policy require-verify).
	TLS *tlsconf.Store
}

// Ingester stores one telemetry message; done runs once, after the record is
// durable or with the reason it is not, and must not block.
type Ingester interface {
	AppendAsync(rec *wal.Record, done func(wal.Position, error))
}

// Server is the NSQ protocol listener.
type Server struct {
	cfg    Config
	ingest Ingester
	queues *groups.Registry
	logger *slog.Logger

	ln    net.Listener
	conns *connset.Set[*conn] // bound: cfg.MaxConnections

	stats Stats
}

// Stats are the server's counters.
type Stats struct {
	connset.Counts
	Refused         atomic.Uint64 // max connections
	AuthFailures    atomic.Uint64
	Published       atomic.Uint64 // messages stored (PUB, MPUB)
	PubErrors       atomic.Uint64 // messages not stored (bad device, storage errors)
	Delivered       atomic.Uint64
	Fin, Req, Touch atomic.Uint64
	FinFailed       atomic.Uint64 // FIN, REQ or TOUCH of an ID not in flight on that connection
	RdyExceeded     atomic.Uint64 // deliveries beyond a connection's RDY (must stay 0)
	SlowConsumers   atomic.Uint64 // closed: output over max_pending or write deadline
	TLSFailures     atomic.Uint64 // closed: TLS required and not asked for, or the handshake failed
	closes          connset.CloseCounts
	errors          sync.Map // code -> *atomic.Uint64; bound: the codes this package sends
}

func (s *Stats) countError(code string) {
	v, ok := s.errors.Load(code)
	if !ok {
		v, _ = s.errors.LoadOrStore(code, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

// Closed returns how many connections closed for reason r.
func (s *Stats) Closed(r connset.CloseReason) uint64 { return s.closes.Closed(r) }

// Errors returns the error frames sent, by code.
func (s *Stats) Errors() map[string]uint64 {
	out := map[string]uint64{}
	s.errors.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}

// New returns a server; Start listens.
func New(cfg Config, ingest Ingester, queues *groups.Registry, logger *slog.Logger) *Server {
	s := &Server{cfg: cfg, ingest: ingest, queues: queues, logger: logger.With("component", "nsq")}
	s.conns = connset.New[*conn](cfg.MaxConnections, &s.stats.Counts)
	return s
}

// Start listens on cfg.Listen and serves until Shutdown.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("nsq: listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	s.conns.Accept(ln, s.logger, func(id uint64, nc net.Conn) *conn { return newConn(s, id, nc) }, (*conn).serve, s.refuse)
	s.logger.Info("listening for NSQ clients", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Counters returns the server's counters.
func (s *Server) Counters() *Stats { return &s.stats }

// Flow is the sum over subscribed connections of their RDY and of their
// messages in flight.
func (s *Server) Flow() (rdy, inFlight int64) {
	for _, c := range s.conns.All() {
		c.Lock()
		rdy += c.rdy
		inFlight += int64(len(c.inflight))
		c.Unlock()
	}
	return rdy, inFlight
}

// refuse answers a connection over max_connections.
func (s *Server) refuse(nc net.Conn) {
	s.stats.Refused.Add(1)
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(AppendFrame(nil, FrameError, []byte("E_INVALID too many connections")))
	_ = nc.Close()
}

// StopAccepting closes the listener: no new clients.
func (s *Server) StopAccepting() {
	s.conns.StopAccepting()
}

// Shutdown stops accepting, closes every connection (their members leave
// their groups, so what they held is delivered again) and waits for the
// connection goroutines until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.conns.CloseAll(func(c *conn) {
		c.closeFor(connset.ClosedServerShutdown)
		c.shut()
	})
	return s.conns.Wait(ctx)
}

// errClosed: a delivery to a connection that is closing.
var errClosed = errors.New("nsq: connection closed")
