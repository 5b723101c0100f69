// Package natsserver serves the NATS client protocol: any NATS client is an
// edgeq producer or worker. PUB on <prefix>.<device> stores telemetry durably
// (with a pub-ack on the reply subject once durable); SUB with a queue on a
// telemetry filter joins a queue group; a plain SUB there follows the live
// tail; everything else behaves as core NATS (fan-out and random queue
// groups, not stored). Framing lives in gateway/natsproto; delivery logic in
// gateway/groups.
package natsserver

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/groups"
	"edgeq/gateway/jsapi"
	"edgeq/gateway/natsproto"
	"edgeq/gateway/tlsconf"
	"edgeq/internal/connset"
	"edgeq/wal"

	"golang.org/x/crypto/bcrypt"
)

// Config configures the server; see config.NATS for meanings and defaults.
type Config struct {
	Listen           string
	AuthToken        string
	Users            map[string]string       // user -> password
	Perms            map[string]*Permissions // user -> permissions; none: all
	TelemetryPrefix  string
	MaxPayload       int
	MaxControlLine   int
	MaxConnections   int
	MaxSubscriptions int
	MaxGroupsPerConn int
	MaxPending       int
	WriteDeadline    time.Duration
	PingInterval     time.Duration
	MaxPingsOut      int
	AuthTimeout      time.Duration
	NodeID           string
	// Version is the INFO version NATS clients compare (InfoVersion of
	// EdgeqVersion, or jetstream.info_version); EdgeqVersion, edgeq's own
	// semver, is announced beside it as edgeq_version.
	Version      string
	EdgeqVersion string
	// TLS, when set, is required of every client (upgrade after INFO, or
	// handshake first; see upgradeTLS).
	TLS               *tlsconf.Store
	TLSHandshakeFirst bool
	TLSFallback       time.Duration
	// JetStream, when set, answers the JetStream API and pull consumers
	// (gateway/jsapi); Dedup, when set, deduplicates Nats-Msg-Id.
	JetStream *jsapi.Service
	Dedup     *jsapi.Dedup
	// QueueJSAcks gives core queue-group deliveries JetStream-form ack
	// subjects (jsapi.QueueAck) instead of $EQ.ACK ones.
	QueueJSAcks bool
}

// Ingester stores one telemetry message; done runs once, after the record is
// durable or with the reason it is not, and must not block. rec stays
// untouched until done.
type Ingester interface {
	AppendAsync(rec *wal.Record, done func(wal.Position, error))
}

// maxRefusing bounds the refused connections waited on at once.
const maxRefusing = 64

// Server is the NATS protocol listener.
type Server struct {
	cfg    Config
	ingest Ingester
	queues *groups.Registry
	tail   *groups.Tail
	logger *slog.Logger

	ln     net.Listener
	auth   atomic.Pointer[auth] // swapped by SetAuth
	subs   *sublist
	subsMu sync.Mutex          // guards every conn's subs map
	conns  *connset.Set[*conn] // bound: cfg.MaxConnections
	// pushMembers: the server's members of push consumers, by name;
	// guarded by subsMu; bound: jetstream max_consumers.
	pushMembers map[string]*jsMember
	// orderedRunners serve ordered consumers, by name; guarded by subsMu;
	// bound: jetstream max_ordered.
	orderedRunners map[string]*orderedRunner
	// draining: StopAccepting was called (the node drains for shutdown).
	draining atomic.Bool

	refusing chan struct{} // refused connections being closed politely; bound: maxRefusing

	stats Stats
}

// Stats are the server's counters.
type Stats struct {
	connset.Counts
	Refused         atomic.Uint64 // max connections
	AuthFailures    atomic.Uint64
	ProtocolErrors  atomic.Uint64
	InMsgs, InBytes atomic.Uint64
	OutMsgs         atomic.Uint64
	OutBytes        atomic.Uint64
	Ingested        atomic.Uint64
	IngestErrors    atomic.Uint64
	BadDevice       atomic.Uint64
	BadAcks         atomic.Uint64
	BadPulls        atomic.Uint64 // JetStream pull requests refused (bad JSON, over-limit batch)
	ForeignAcks     atomic.Uint64 // acks for another connection's member (refused; also in BadAcks)
	GroupsRefused   atomic.Uint64 // queue subscribes refused: the connection created max_groups_per_connection
	PermViolations  atomic.Uint64 // publishes and subscribes refused by the user's permissions
	closes          connset.CloseCounts
}

// New returns a server; Start listens.
func New(cfg Config, ingest Ingester, queues *groups.Registry, tail *groups.Tail, logger *slog.Logger) *Server {
	s := &Server{
		cfg: cfg, ingest: ingest, queues: queues, tail: tail,
		logger:      logger.With("component", "nats"),
		subs:        newSublist(),
		refusing:    make(chan struct{}, maxRefusing),
		pushMembers: map[string]*jsMember{},

		orderedRunners: map[string]*orderedRunner{},
	}
	s.conns = connset.New[*conn](cfg.MaxConnections, &s.stats.Counts)
	if cfg.JetStream != nil {
		cfg.JetStream.SetHooks(s.jsHooks())
	}
	s.SetAuth(cfg.AuthToken, cfg.Users, cfg.Perms)
	return s
}

// auth is what CONNECT is checked against.
type auth struct {
	token string
	users map[string]string
	perms map[string]*Permissions
}

// SetAuth replaces the token or users (and their permissions) new
// connections authenticate with (a reload); connected clients keep theirs.
func (s *Server) SetAuth(token string, users map[string]string, perms map[string]*Permissions) {
	s.auth.Store(&auth{token: token, users: users, perms: perms})
}

// Start listens on cfg.Listen and serves until Shutdown.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("nats: listen %s: %w", s.cfg.Listen, err)
	}
	s.ln = ln
	s.conns.Accept(ln, s.logger, func(id uint64, nc net.Conn) *conn { return newConn(s, id, nc) }, (*conn).serve, s.refuse)
	s.logger.Info("listening for NATS clients", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Counters returns the server's counters.
func (s *Server) Counters() *Stats { return &s.stats }

// refuse answers a connection over max_connections.
func (s *Server) refuse(nc net.Conn) {
	s.stats.Refused.Add(1)
	// INFO first, as nats-server does: clients read it before the error.
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	msg := s.info(&conn{})
	msg = natsproto.AppendErr(msg, "maximum connections exceeded")
	_, _ = nc.Write(msg)
	// Let the client's CONNECT arrive before closing, so it reads the
	// error instead of failing its write: at most 500 ms each and
	// maxRefusing at once; beyond that, close at once.
	select {
	case s.refusing <- struct{}{}:
		go func() {
			defer func() { <-s.refusing }()
			_ = nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
			_ = nc.Close()
		}()
	default:
		_ = nc.Close()
	}
}

// StopAccepting closes the listener: no new clients. It starts the drain:
// a JetStream pull member that its worker stopped gives back what it holds
// (see drainIdle).
func (s *Server) StopAccepting() {
	s.draining.Store(true)
	s.conns.StopAccepting()
}

// Shutdown stops accepting, closes every connection (their queue members
// leave, so in-flight messages go back to their groups), stops the push
// consumers' members and waits for the connection goroutines until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.StopAccepting()
	s.conns.CloseAll(func(c *conn) { c.close(ClosedServerShutdown, "", nil) })
	s.subsMu.Lock()
	push := make([]*jsMember, 0, len(s.pushMembers))
	for name, m := range s.pushMembers {
		push = append(push, m)
		delete(s.pushMembers, name)
	}
	s.subsMu.Unlock()
	for _, m := range push {
		s.stopPush(m)
	}
	return s.conns.Wait(ctx)
}

func (s *Server) info(c *conn) []byte {
	host, port := "", 0
	if a, ok := s.ln.Addr().(*net.TCPAddr); ok {
		host, port = a.IP.String(), a.Port
	}
	info := natsproto.Info{
		ServerID:     s.cfg.NodeID,
		ServerName:   s.cfg.NodeID,
		Version:      s.cfg.Version,
		EdgeqVersion: s.cfg.EdgeqVersion,
		Go:           runtime.Version(),
		Host:         host,
		Port:         port,
		Headers:      true,
		MaxPayload:   int64(s.cfg.MaxPayload),
		Proto:        1,
		AuthRequired: s.authRequired(),
		TLSRequired:  s.cfg.TLS != nil,
		ClientID:     c.id,
		JetStream:    s.cfg.JetStream != nil,
	}
	return natsproto.AppendInfo(nil, &info)
}

// NATSCompatVersion is the nats-server release whose client protocol and
// JetStream API subset edgeq answers like. Clients gate features on the INFO
// version (nats.js 2.x turns its consumers API off below 2.9.4, nats.go's
// legacy API picks its consumer-create subjects by it), so INFO announces
// this release, with edgeq's own version as build metadata.
const NATSCompatVersion = "2.10.0"

// InfoVersion is the INFO version for edgeq version v:
// NATSCompatVersion+edgeq.<v>, with v's own '+' turned into '.' since build
// metadata is dot-separated [0-9A-Za-z-] identifiers (0.3.0-dev+9616b3d
// becomes 2.10.0+edgeq.0.3.0-dev.9616b3d). Other bytes become '-', empty
// identifiers are dropped, so the result is always valid semver.
func InfoVersion(v string) string {
	out := make([]byte, 0, len(NATSCompatVersion)+len("+edgeq.")+len(v))
	out = append(out, NATSCompatVersion+"+edgeq"...)
	ident := false // inside a non-empty identifier
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '.' || c == '+':
			ident = false
			continue
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
		default:
			c = '-'
		}
		if !ident {
			out = append(out, '.')
			ident = true
		}
		out = append(out, c)
	}
	return string(out)
}

func (s *Server) authRequired() bool {
	a := s.auth.Load()
	return a.token != "" || len(a.users) > 0
}

// authenticate checks CONNECT credentials in constant time; a configured
// token or password that is a bcrypt hash is checked with bcrypt. It
// returns the user's permissions (nil: everything).
func (s *Server) authenticate(o *natsproto.ConnectOptions) (*Permissions, bool) {
	a := s.auth.Load()
	switch {
	case a.token != "":
		return nil, secretMatches(o.AuthToken, a.token)
	case len(a.users) > 0:
		want, ok := a.users[o.User]
		return a.perms[o.User], ok && secretMatches(o.Pass, want)
	}
	return nil, true
}

func secretMatches(given, want string) bool {
	if IsBcrypt(want) {
		return bcrypt.CompareHashAndPassword([]byte(want), []byte(given)) == nil
	}
	return subtle.ConstantTimeCompare([]byte(given), []byte(want)) == 1
}

// IsBcrypt reports whether a configured secret is a bcrypt hash, by its
// prefix as nats-server decides it ($2a$, $2b$, $2x$, $2y$).
func IsBcrypt(s string) bool {
	for _, p := range []string{"$2a$", "$2b$", "$2x$", "$2y$"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// publishCore delivers a message on a non-telemetry subject to matching core
// subscriptions: all plain ones, one member per core queue group. from is the
// publishing connection (for echo), or nil. It returns how many
// subscriptions and queue groups matched.
func (s *Server) publishCore(from *conn, subject, reply string, header, payload []byte) int {
	return s.subs.match(subject, func(sb *sub) bool {
		if from != nil && sb.c == from && !from.opts.Echo {
			return false
		}
		return sb.c.sendMsg(sb, subject, reply, header, payload)
	})
}

// noResponders is the status message a request without subscribers gets.
var noResponders = func() []byte {
	h, _ := natsproto.AppendHeaderStart(nil, 503, "")
	return natsproto.AppendHeaderEnd(h)
}()
