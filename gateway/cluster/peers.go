package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Handler receives what the peer manager learns. Calls come from the
// manager's goroutines and must not block for long.
type Handler interface {
	// PeerUp: an authenticated connection to node is established.
	PeerUp(node string, priority int)
	// PeerDown: the connection is gone (closed, or silent for the failure timeout).
	PeerDown(node string)
	// Frame: a frame other than handshake and heartbeat arrived from node.
	// The body is only valid during the call.
	Frame(node string, f Frame)
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	Identity Identity
	Priority int
	// Listen is the peer listener address ("" disables listening).
	Listen string
	// Peers are addresses to dial (static peers); discovery adds more with AddAddr.
	Peers []string
	// HeartbeatInterval is how often an idle connection sends a heartbeat
	// (default 500ms); FailureTimeout declares a silent peer dead (default 3s).
	HeartbeatInterval time.Duration
	FailureTimeout    time.Duration
	// DialInterval is how often unconnected addresses are dialed (default 1s).
	DialInterval time.Duration
	// MaxPeers bounds connections and known addresses (default 64).
	MaxPeers int
	Logger   *slog.Logger
}

func (c *ManagerConfig) defaults() error {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 500 * time.Millisecond
	}
	if c.FailureTimeout <= 0 {
		c.FailureTimeout = 3 * time.Second
	}
	if c.DialInterval <= 0 {
		c.DialInterval = time.Second
	}
	if c.MaxPeers <= 0 {
		c.MaxPeers = 64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Identity.Node == "" || c.Identity.Cluster == "":
		return errors.New("cluster: node id and cluster name are required")
	case len(c.Identity.Secret) < 16:
		return errors.New("cluster: the cluster secret must be at least 16 bytes")
	case c.FailureTimeout <= c.HeartbeatInterval:
		return errors.New("cluster: failure timeout must exceed the heartbeat interval")
	}
	return nil
}

// PeerStatus describes one connected peer.
type PeerStatus struct {
	Node     string
	Addr     string
	Priority int
	LastSeen time.Time
	Dialed   bool
}

// Manager keeps one authenticated connection per peer pair, with heartbeats
// and failure detection. When two nodes dial each other at once, the
// connection dialed by the node with the smaller ID is kept.
type Manager struct {
	cfg     ManagerConfig
	handler Handler
	ln      net.Listener

	mu    sync.Mutex
	conns map[string]*peerConn // by node; bound: MaxPeers
	addrs map[string]bool      // addresses to dial; bound: MaxPeers

	refused atomic.Uint64 // handshakes refused (other cluster, wrong secret)
	wg      sync.WaitGroup
}

type peerConn struct {
	node     string
	addr     string
	dialed   bool
	priority atomic.Int64
	c        net.Conn
	wmu      sync.Mutex
	lastSeen atomic.Int64
	closed   atomic.Bool
}

// NewManager validates cfg.
func NewManager(cfg ManagerConfig, h Handler) (*Manager, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, handler: h, conns: map[string]*peerConn{}, addrs: map[string]bool{}}
	for _, a := range cfg.Peers {
		m.AddAddr(a)
	}
	return m, nil
}

// Refused counts handshakes refused for cluster or authentication reasons.
func (m *Manager) Refused() uint64 { return m.refused.Load() }

// Addr is the listener's address.
func (m *Manager) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// AddAddr adds an address to dial (a static peer or a discovered one).
func (m *Manager) AddAddr(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.addrs) < m.cfg.MaxPeers {
		m.addrs[addr] = true
	}
}

// Start listens and dials until ctx ends; then every connection is closed.
func (m *Manager) Start(ctx context.Context) error {
	if m.cfg.Listen != "" {
		ln, err := net.Listen("tcp", m.cfg.Listen)
		if err != nil {
			return fmt.Errorf("cluster: listen %s: %w", m.cfg.Listen, err)
		}
		m.ln = ln
		m.wg.Add(1)
		go m.acceptLoop(ctx)
	}
	m.wg.Add(1)
	go m.dialLoop(ctx)
	go func() {
		<-ctx.Done()
		if m.ln != nil {
			m.ln.Close()
		}
		m.mu.Lock()
		for _, pc := range m.conns {
			pc.c.Close()
		}
		m.mu.Unlock()
	}()
	return nil
}

// Wait blocks until the manager's goroutines have ended (after ctx ended).
func (m *Manager) Wait() { m.wg.Wait() }

func (m *Manager) acceptLoop(ctx context.Context) {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			_ = c.SetDeadline(time.Now().Add(m.cfg.FailureTimeout))
			p, err := Accept(c, m.cfg.Identity)
			if err != nil {
				m.handshakeFailed(c.RemoteAddr().String(), err)
				c.Close()
				return
			}
			_ = c.SetDeadline(time.Time{})
			m.serve(ctx, &peerConn{node: p.Node, addr: c.RemoteAddr().String(), c: c})
		}()
	}
}

func (m *Manager) dialLoop(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.DialInterval)
	defer t.Stop()
	for {
		m.mu.Lock()
		var todo []string
		for a := range m.addrs {
			if !m.connectedToAddr(a) {
				todo = append(todo, a)
			}
		}
		m.mu.Unlock()
		sort.Strings(todo)
		for _, a := range todo {
			m.dial(ctx, a)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// connectedToAddr: an address we dialed and still hold. Guarded by mu.
func (m *Manager) connectedToAddr(addr string) bool {
	for _, pc := range m.conns {
		if pc.dialed && pc.addr == addr {
			return true
		}
	}
	return false
}

func (m *Manager) dial(ctx context.Context, addr string) {
	d := net.Dialer{Timeout: m.cfg.FailureTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return // not reachable now; the next round tries again
	}
	_ = c.SetDeadline(time.Now().Add(m.cfg.FailureTimeout))
	p, err := Dial(c, m.cfg.Identity)
	if err != nil {
		m.handshakeFailed(addr, err)
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.serve(ctx, &peerConn{node: p.Node, addr: addr, dialed: true, c: c})
	}()
}

func (m *Manager) handshakeFailed(addr string, err error) {
	if IsRefusal(err) {
		m.refused.Add(1)
		m.cfg.Logger.Warn("peer refused", "addr", addr, "err", err)
		return
	}
	m.cfg.Logger.Debug("peer handshake failed", "addr", addr, "err", err)
}

// keep decides which of two connections between the same pair survives: the
// one dialed by the smaller node ID, so both sides choose the same.
func (m *Manager) keep(pc *peerConn) bool {
	dialerIsMe := pc.dialed
	smallerIsMe := m.cfg.Identity.Node < pc.node
	return dialerIsMe == smallerIsMe
}

// serve registers an authenticated connection, exchanges priorities, reads
// frames and sends heartbeats until it fails.
func (m *Manager) serve(ctx context.Context, pc *peerConn) {
	defer pc.c.Close()
	m.mu.Lock()
	if old, ok := m.conns[pc.node]; ok {
		if !m.keep(pc) {
			m.mu.Unlock()
			return // the other connection of this pair wins
		}
		old.closed.Store(true)
		old.c.Close()
	}
	if len(m.conns) >= m.cfg.MaxPeers {
		m.mu.Unlock()
		m.cfg.Logger.Warn("too many peers: connection dropped", "node", pc.node)
		return
	}
	m.conns[pc.node] = pc
	m.mu.Unlock()
	pc.lastSeen.Store(time.Now().UnixNano())
	// The first heartbeat carries our priority.
	if err := pc.send(TypeHeartbeat, binary.AppendVarint(nil, int64(m.cfg.Priority))); err != nil {
		_ = m.drop(pc)
		return
	}
	hbDone := make(chan struct{})
	go m.heartbeat(ctx, pc, hbDone)
	defer close(hbDone)
	r := NewReader(pc.c)
	up := false
	for {
		_ = pc.c.SetReadDeadline(time.Now().Add(m.cfg.FailureTimeout))
		f, err := r.Read()
		if err != nil {
			break
		}
		pc.lastSeen.Store(time.Now().UnixNano())
		switch f.Type {
		case TypeHeartbeat:
			if !up {
				if p, n := binary.Varint(f.Body); n > 0 {
					pc.priority.Store(p)
				}
				up = true
				m.handler.PeerUp(pc.node, int(pc.priority.Load()))
			}
		default:
			if up {
				m.handler.Frame(pc.node, f)
			}
		}
	}
	// A connection replaced by a newer one of the same pair does not take
	// the peer down; nor does one that loses the race between two dials of
	// the same pair, if the other connection registers within a heartbeat.
	if m.drop(pc) && up {
		select {
		case <-ctx.Done():
		case <-time.After(m.cfg.HeartbeatInterval):
		}
		m.mu.Lock()
		_, back := m.conns[pc.node]
		m.mu.Unlock()
		if !back {
			m.handler.PeerDown(pc.node)
		}
	}
}

// drop unregisters pc and reports whether it was the registered connection.
func (m *Manager) drop(pc *peerConn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns[pc.node] == pc {
		delete(m.conns, pc.node)
		return true
	}
	return false
}

func (m *Manager) heartbeat(ctx context.Context, pc *peerConn, done <-chan struct{}) {
	t := time.NewTicker(m.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			if pc.send(TypeHeartbeat, nil) != nil {
				pc.c.Close()
				return
			}
		}
	}
}

func (pc *peerConn) send(t Type, body []byte) error {
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	_ = pc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := pc.c.Write(AppendFrame(nil, t, body))
	return err
}

// Send sends a frame to node; an error when it is not connected.
func (m *Manager) Send(node string, t Type, body []byte) error {
	if t == TypeHeartbeat || t <= TypeRefused {
		return fmt.Errorf("cluster: frame type %d is the manager's own", t)
	}
	m.mu.Lock()
	pc := m.conns[node]
	m.mu.Unlock()
	if pc == nil {
		return fmt.Errorf("cluster: peer %s not connected", node)
	}
	return pc.send(t, body)
}

// Peers lists the connected peers, sorted by node ID.
func (m *Manager) Peers() []PeerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PeerStatus, 0, len(m.conns))
	for _, pc := range m.conns {
		out = append(out, PeerStatus{Node: pc.node, Addr: pc.addr, Priority: int(pc.priority.Load()),
			LastSeen: time.Unix(0, pc.lastSeen.Load()), Dialed: pc.dialed})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}
