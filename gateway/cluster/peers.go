package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/apiv1"
	"edgeq/internal/backoff"
)

// Handler receives what the peer manager learns. Calls come from the
// manager's goroutines and must not block for long.
type Handler interface {
	// PeerUp: an authenticated connection to node is established and its
	// first heartbeat told what it is.
	PeerUp(node string, info PeerInfo)
	// PeerDown: the connection is gone (closed, or silent for the failure timeout).
	PeerDown(node string)
	// Frame: a frame other than handshake and heartbeat arrived from node.
	// The body is only valid during the call.
	Frame(node string, f Frame)
}

// PeerInfo is what a peer says of itself in its first heartbeat.
type PeerInfo struct {
	Priority int
	// Partitions is the number of partitions of its log (normal and hot).
	Partitions int
	// Addr is the peer address it listens on or advertises (its host may be
	// unspecified, 0.0.0.0: then the connection's remote address counts).
	Addr string
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	Identity Identity
	Priority int
	// Partitions is the number of partitions of this node's log, told to peers.
	Partitions int
	// Advertise is the peer address told to peers (default: the listener's),
	// so that a peer that was dialed by this node does not dial it again.
	Advertise string
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
	// MaxQueued bounds the bytes of frames waiting to be written to one peer
	// (default 32 MiB). A frame that does not fit closes the connection (a
	// peer that cannot keep up is treated like a slow consumer); SendWait
	// waits while more than half of it is used.
	MaxQueued int
	// WriteTimeout closes a connection whose writes stall this long (default
	// the failure timeout, at least 5s).
	WriteTimeout time.Duration
	// MaxHandshakes bounds the accepted connections still in the handshake
	// (default 16), MaxHandshakesPerSource those from one source address
	// (an IPv4 address or an IPv6 /64; default half of MaxHandshakes), so
	// that one host trickling handshakes cannot hold every slot and keep
	// real peers out. More are closed at once and counted.
	// HandshakeTimeout is the deadline of each (default the failure
	// timeout).
	MaxHandshakes          int
	MaxHandshakesPerSource int
	HandshakeTimeout       time.Duration
	Logger                 *slog.Logger
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
	if c.MaxQueued <= 0 {
		c.MaxQueued = 32 << 20
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = max(c.FailureTimeout, 5*time.Second)
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = 16
	}
	if c.MaxHandshakesPerSource <= 0 {
		c.MaxHandshakesPerSource = max(1, c.MaxHandshakes/2)
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = c.FailureTimeout
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

// PeerStatus describes one connected peer (the API's document).
type PeerStatus = apiv1.PeerStatus

// Counters are the manager's totals since start.
type Counters struct {
	Refused   uint64 // handshakes refused (other cluster, wrong secret)
	Overflows uint64 // connections closed because their send queue was full
	Ups       uint64 // peers that came up
	Downs     uint64 // peers that went down
	// FramesRefused: sealed frames that failed authentication (altered,
	// injected, dropped, reordered or replayed); each closed its connection.
	FramesRefused uint64
	// HandshakesBusy: connections closed unread because MaxHandshakes were
	// in progress, or MaxHandshakesPerSource from their source;
	// HandshakeFailures: handshakes that failed for another reason than a
	// refusal (deadline, malformed or oversized frame, EOF).
	HandshakesBusy    uint64
	HandshakeFailures uint64
	// Handshaking is the number of accepted connections in the handshake now.
	Handshaking int
}

// Manager keeps one authenticated connection per peer pair, with heartbeats
// and failure detection. When two nodes dial each other at once, the
// connection dialed by the node with the smaller ID is kept.
type Manager struct {
	cfg     ManagerConfig
	handler Handler
	ln      net.Listener

	mu       sync.Mutex
	conns    map[string]*peerConn // by node; bound: MaxPeers
	addrs    map[string]bool      // addresses to dial: static, or discovered (false); bound: MaxPeers
	addrNode map[string]string    // the node an address led to; bound: MaxPeers
	dialWake chan struct{}        // cap 1: a new address to dial now

	refused   atomic.Uint64
	overflows atomic.Uint64
	badFrames atomic.Uint64
	hsBusy    atomic.Uint64
	hsFailed  atomic.Uint64
	hsMu      sync.Mutex
	hsTotal   int            // accepted connections in the handshake; bound: MaxHandshakes
	hsSources map[string]int // of them, by source (sourceOf); bound: MaxHandshakes entries
	ups       atomic.Uint64
	downs     atomic.Uint64
	wg        sync.WaitGroup
}

// peerConn is one authenticated connection. Frames to send go into a
// bounded queue that one writer goroutine empties, so no sender blocks on
// the network.
type peerConn struct {
	node       string
	addr       string
	dialed     bool
	since      time.Time
	priority   atomic.Int64
	partitions atomic.Int64
	c          net.Conn
	keys       linkKeys
	lastSeen   atomic.Int64
	closed     atomic.Bool
	up         atomic.Bool // its first heartbeat arrived

	qmu     sync.Mutex
	queued  []byte        // encoded frames waiting for the writer; bound: MaxQueued
	nqueued int           // how many frames queued holds
	room    chan struct{} // closed (and replaced) whenever the writer takes the queue
	wake    chan struct{} // cap 1: the queue has frames
	done    chan struct{} // closed when the connection ends

	framesOut, framesIn, bytesOut, bytesIn atomic.Uint64
}

func newPeerConn(p Peer, addr string, dialed bool, c net.Conn) *peerConn {
	return &peerConn{node: p.Node, keys: p.keys, addr: addr, dialed: dialed, c: c, since: time.Now(),
		room: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// NewManager validates cfg.
func NewManager(cfg ManagerConfig, h Handler) (*Manager, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, handler: h, conns: map[string]*peerConn{}, addrs: map[string]bool{}, addrNode: map[string]string{}, dialWake: make(chan struct{}, 1),
		hsSources: map[string]int{}}
	for _, a := range cfg.Peers {
		m.AddAddr(a)
	}
	return m, nil
}

// Refused counts handshakes refused for cluster or authentication reasons.
func (m *Manager) Refused() uint64 { return m.refused.Load() }

// Counters returns the manager's totals.
func (m *Manager) Counters() Counters {
	return Counters{Refused: m.refused.Load(), Overflows: m.overflows.Load(), Ups: m.ups.Load(), Downs: m.downs.Load(),
		FramesRefused: m.badFrames.Load(), HandshakesBusy: m.hsBusy.Load(), HandshakeFailures: m.hsFailed.Load(),
		Handshaking: m.handshaking()}
}

func (m *Manager) handshaking() int {
	m.hsMu.Lock()
	defer m.hsMu.Unlock()
	return m.hsTotal
}

// takeSlot reserves a handshake slot for a connection from src: false when
// MaxHandshakes are in progress, or MaxHandshakesPerSource from src.
func (m *Manager) takeSlot(src string) bool {
	m.hsMu.Lock()
	defer m.hsMu.Unlock()
	if m.hsTotal >= m.cfg.MaxHandshakes || m.hsSources[src] >= m.cfg.MaxHandshakesPerSource {
		return false
	}
	m.hsTotal++
	m.hsSources[src]++
	return true
}

func (m *Manager) releaseSlot(src string) {
	m.hsMu.Lock()
	defer m.hsMu.Unlock()
	m.hsTotal--
	if m.hsSources[src]--; m.hsSources[src] <= 0 {
		delete(m.hsSources, src)
	}
}

// sourceOf is what the per-source handshake limit counts by: the IPv4
// address, or the /64 of an IPv6 one (a host can take many addresses of
// its prefix).
func sourceOf(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return ta.IP.Mask(net.CIDRMask(64, 128)).String()
}

// Addr is the listener's address.
func (m *Manager) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// AddAddr adds an address to dial (a static peer or a discovered one).
// A new address is dialed at once.
func (m *Manager) AddAddr(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addAddr(addr, true)
}

// addAddr adds an address to dial. Called with mu held.
func (m *Manager) addAddr(addr string, static bool) {
	if old, ok := m.addrs[addr]; ok {
		m.addrs[addr] = old || static
		return
	}
	if len(m.addrs) >= m.cfg.MaxPeers {
		return
	}
	m.addrs[addr] = static
	select {
	case m.dialWake <- struct{}{}:
	default:
	}
}

// SetDiscovered replaces the discovered addresses to dial (static ones
// stay): an address a peer no longer announces is not dialed again, and the
// table never fills with addresses of the past.
func (m *Manager) SetDiscovered(addrs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		keep[a] = true
	}
	for a, static := range m.addrs {
		if !static && !keep[a] {
			delete(m.addrs, a)
			delete(m.addrNode, a)
		}
	}
	for _, a := range addrs {
		m.addAddr(a, false)
	}
}

// AllDialed reports whether every address to dial has a connection.
func (m *Manager) AllDialed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for a := range m.addrs {
		if !m.connectedToAddr(a) {
			return false
		}
	}
	return true
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

// acceptRetry paces accepts after an error (out of file descriptors, say),
// as net/http's server does: 5 ms doubling up to 1 s, reset by a success.
var acceptRetry = backoff.Policy{Min: 5 * time.Millisecond, Max: time.Second}

func (m *Manager) acceptLoop(ctx context.Context) {
	defer m.wg.Done()
	failures := 0
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if failures == 0 {
				m.cfg.Logger.Warn("peer accept failed; retrying", "err", err)
			}
			if !backoff.Sleep(ctx.Done(), acceptRetry.Delay(failures, rand.Float64())) {
				return
			}
			failures++
			continue
		}
		failures = 0
		// Before authentication a connection costs a goroutine and at most
		// MaxHandshakeFrame bytes, for at most HandshakeTimeout, and only
		// MaxHandshakes of them at once (MaxHandshakesPerSource from one
		// source): the rest are closed unread.
		src := sourceOf(c.RemoteAddr())
		if !m.takeSlot(src) {
			m.hsBusy.Add(1)
			c.Close()
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			_ = c.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
			p, err := Accept(c, m.cfg.Identity)
			m.releaseSlot(src)
			if err != nil {
				m.handshakeFailed(c.RemoteAddr().String(), err)
				c.Close()
				return
			}
			_ = c.SetDeadline(time.Time{})
			m.serve(ctx, newPeerConn(p, c.RemoteAddr().String(), false, c))
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
		case <-m.dialWake:
		}
	}
}

// connectedToAddr: the node an address led to has a connection (dialed by
// either side: of two connections between a pair only one is kept, so the
// one this node dialed may be gone). Called with mu held.
func (m *Manager) connectedToAddr(addr string) bool {
	node, ok := m.addrNode[addr]
	return ok && m.conns[node] != nil
}

func (m *Manager) dial(ctx context.Context, addr string) {
	d := net.Dialer{Timeout: m.cfg.FailureTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return // not reachable now; the next round tries again
	}
	_ = c.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	p, err := Dial(c, m.cfg.Identity)
	if err != nil {
		m.handshakeFailed(addr, err)
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	m.mu.Lock()
	if _, known := m.addrs[addr]; known {
		m.addrNode[addr] = p.Node
	}
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.serve(ctx, newPeerConn(p, addr, true, c))
	}()
}

func (m *Manager) handshakeFailed(addr string, err error) {
	if IsRefusal(err) {
		m.refused.Add(1)
		m.cfg.Logger.Warn("peer refused", "addr", addr, "err", err)
		return
	}
	m.hsFailed.Add(1)
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
	defer pc.shut()
	var carried []byte
	var ncarried int
	m.mu.Lock()
	if old, ok := m.conns[pc.node]; ok {
		// A connection in use (both sides confirmed it) is kept: replacing
		// it would lose the frames on their way. Between two new ones, the
		// one dialed by the smaller ID wins, so both sides choose the same.
		if old.up.Load() || !m.keep(pc) {
			m.mu.Unlock()
			return
		}
		// What the old connection had not written yet goes on the new one
		// (after its first heartbeat), so a replacement loses as little as
		// it can.
		carried, ncarried = old.takeQueued()
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
	seal, err := newSealer(pc.keys.send)
	if err != nil {
		_ = m.drop(pc)
		return
	}
	r, err := newOpener(pc.c, pc.keys.recv)
	if err != nil {
		_ = m.drop(pc)
		return
	}
	go m.writeLoop(pc, seal)
	// The first heartbeat says who we are: priority, partitions.
	first := binary.AppendVarint(nil, int64(m.cfg.Priority))
	first = binary.AppendUvarint(first, uint64(m.cfg.Partitions))
	first = appendField(first, []byte(m.advertised()))
	if err := m.enqueue(context.Background(), pc, TypeHeartbeat, first, false); err != nil {
		_ = m.drop(pc)
		return
	}
	if len(carried) > 0 {
		pc.qmu.Lock()
		pc.queued = append(pc.queued, carried...)
		pc.nqueued += ncarried
		pc.qmu.Unlock()
		select {
		case pc.wake <- struct{}{}:
		default:
		}
	}
	go m.heartbeat(ctx, pc)
	up := false
	for {
		_ = pc.c.SetReadDeadline(time.Now().Add(m.cfg.FailureTimeout))
		f, size, err := r.Read()
		if err != nil {
			if isTampering(err) {
				m.badFrames.Add(1)
				m.cfg.Logger.Warn("peer frame refused: closing the connection", "node", pc.node, "addr", pc.addr, "err", err)
			}
			break
		}
		pc.lastSeen.Store(time.Now().UnixNano())
		pc.framesIn.Add(1)
		pc.bytesIn.Add(uint64(size))
		switch f.Type {
		case TypeHeartbeat:
			if !up {
				info := parsePeerInfo(f.Body)
				pc.priority.Store(int64(info.Priority))
				pc.partitions.Store(int64(info.Partitions))
				m.learnAddr(pc, info.Addr)
				up = true
				pc.up.Store(true)
				m.ups.Add(1)
				m.handler.PeerUp(pc.node, info)
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
			m.downs.Add(1)
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

func parsePeerInfo(b []byte) PeerInfo {
	var info PeerInfo
	p, n := binary.Varint(b)
	if n <= 0 {
		return info
	}
	info.Priority = int(p)
	parts, k := binary.Uvarint(b[n:])
	if k <= 0 {
		return info
	}
	if parts <= maxPartitions {
		info.Partitions = int(parts)
	}
	f := fields{b: b[n+k:]}
	if addr := f.next(maxSubject); f.err == nil {
		info.Addr = string(addr)
	}
	return info
}

// advertised is the peer address this node tells its peers.
func (m *Manager) advertised() string {
	if m.cfg.Advertise != "" {
		return m.cfg.Advertise
	}
	return m.Addr()
}

// learnAddr records which node a peer address leads to, from what the peer
// advertised (an unspecified host taken from the connection's remote
// address), so that the dial loop leaves an address alone while its node is
// connected: dialing it again would replace the connection in use.
func (m *Manager) learnAddr(pc *peerConn, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if rh, _, err := net.SplitHostPort(pc.c.RemoteAddr().String()); err == nil {
			host = rh
		}
	}
	addr = net.JoinHostPort(host, port)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, known := m.addrs[addr]; known {
		m.addrNode[addr] = pc.node
	}
}

// takeQueued removes and returns the frames pc has not written yet, and
// how many they are.
func (pc *peerConn) takeQueued() ([]byte, int) {
	pc.qmu.Lock()
	defer pc.qmu.Unlock()
	q, n := pc.queued, pc.nqueued
	pc.queued, pc.nqueued = nil, 0
	return q, n
}

func (m *Manager) heartbeat(ctx context.Context, pc *peerConn) {
	t := time.NewTicker(m.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-pc.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			if m.enqueue(ctx, pc, TypeHeartbeat, nil, false) != nil {
				return
			}
		}
	}
}

// shut ends the connection's writer and wakes waiting senders.
func (pc *peerConn) shut() {
	pc.qmu.Lock()
	defer pc.qmu.Unlock()
	if !pc.closed.Swap(true) {
		close(pc.done)
	}
}

// errPeerGone: the connection ended while a frame waited to be queued.
var errPeerGone = errors.New("cluster: peer connection closed")

// enqueue appends a frame to pc's send queue. Without wait, a full queue
// closes the connection (the peer cannot keep up); with wait, the caller
// waits while the queue is more than half full, leaving the rest to
// heartbeats, election messages and deliveries.
func (m *Manager) enqueue(ctx context.Context, pc *peerConn, t Type, body []byte, wait bool) error {
	n := queuedLen(body)
	limit := m.cfg.MaxQueued
	if wait {
		limit /= 2
	}
	for {
		pc.qmu.Lock()
		if pc.closed.Load() {
			pc.qmu.Unlock()
			return errPeerGone
		}
		if len(pc.queued)+n <= limit || len(pc.queued) == 0 {
			pc.queued = appendQueued(pc.queued, t, body)
			pc.nqueued++
			pc.qmu.Unlock()
			select {
			case pc.wake <- struct{}{}:
			default:
			}
			return nil
		}
		room := pc.room
		pc.qmu.Unlock()
		if !wait {
			m.overflows.Add(1)
			m.cfg.Logger.Warn("peer send queue full: closing the connection", "node", pc.node, "queued_limit", m.cfg.MaxQueued)
			pc.c.Close()
			return fmt.Errorf("cluster: send queue of peer %s full", pc.node)
		}
		select {
		case <-room:
		case <-pc.done:
			return errPeerGone
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// writeLoop seals and writes queued frames until the connection ends. The
// queue holds frames unsealed, so a replacement connection can take over
// what an old one had not written and seal it with its own keys.
func (m *Manager) writeLoop(pc *peerConn, seal *sealer) {
	var spare []byte
	for {
		select {
		case <-pc.wake:
		case <-pc.done:
			return
		}
		pc.qmu.Lock()
		buf := pc.queued
		frames := pc.nqueued
		pc.queued, pc.nqueued = spare[:0], 0
		close(pc.room)
		pc.room = make(chan struct{})
		pc.qmu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		if err := seal.sealAll(buf); err != nil {
			m.cfg.Logger.Error("peer frames not sealed: closing the connection", "node", pc.node, "err", err)
			pc.c.Close()
			return
		}
		_ = pc.c.SetWriteDeadline(time.Now().Add(m.cfg.WriteTimeout))
		if _, err := pc.c.Write(buf); err != nil {
			pc.c.Close() // the reader ends and reports the peer down
			return
		}
		pc.bytesOut.Add(uint64(len(buf)))
		pc.framesOut.Add(uint64(frames))
		spare = buf[:0]
		if cap(spare) > 1<<20 {
			spare = nil // a burst grew the buffer: let it go
		}
	}
}

// Send queues a frame for node without waiting: an error when the node is
// not connected, or when its send queue is full (the connection is then
// closed, so the peer goes down and comes back with a clean state).
func (m *Manager) Send(node string, t Type, body []byte) error {
	pc, err := m.conn(node, t)
	if err != nil {
		return err
	}
	return m.enqueue(context.Background(), pc, t, body, false)
}

// SendWait queues a frame for node, waiting while its send queue is more
// than half full (for bulk answers such as FETCHED, so they slow down
// rather than overflow).
func (m *Manager) SendWait(ctx context.Context, node string, t Type, body []byte) error {
	pc, err := m.conn(node, t)
	if err != nil {
		return err
	}
	return m.enqueue(ctx, pc, t, body, true)
}

func (m *Manager) conn(node string, t Type) (*peerConn, error) {
	if t == TypeHeartbeat || t <= TypeRefused {
		return nil, fmt.Errorf("cluster: frame type %d is the manager's own", t)
	}
	m.mu.Lock()
	pc := m.conns[node]
	m.mu.Unlock()
	// Only a connection the peer has confirmed (its first heartbeat came on
	// it) carries frames: when both sides dial at once, each may register
	// the one the other drops, and what went out on that one would be lost.
	if pc == nil || !pc.up.Load() {
		return nil, fmt.Errorf("cluster: peer %s not connected", node)
	}
	return pc, nil
}

// AddrStatus is an address to dial (static, or found by discovery) that has
// no connection now (the API's document).
type AddrStatus = apiv1.AddrStatus

// Unreachable lists the addresses to dial whose node has no connection (a
// peer that is down, or an address that never answered), sorted by
// address; at most MaxPeers.
func (m *Manager) Unreachable() []AddrStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []AddrStatus
	for a, static := range m.addrs {
		if !m.connectedToAddr(a) {
			out = append(out, AddrStatus{Addr: a, Node: m.addrNode[a], Static: static})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// Connected reports whether node has an established connection (the peer
// confirmed it with its first heartbeat).
func (m *Manager) Connected(node string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pc := m.conns[node]
	return pc != nil && pc.up.Load()
}

// Peers lists the connected peers (whose first heartbeat arrived), sorted by node ID.
func (m *Manager) Peers() []PeerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PeerStatus, 0, len(m.conns))
	for _, pc := range m.conns {
		if !pc.up.Load() {
			continue // not yet said who it is
		}
		pc.qmu.Lock()
		queued := len(pc.queued)
		pc.qmu.Unlock()
		out = append(out, PeerStatus{Node: pc.node, Addr: pc.addr, Priority: int(pc.priority.Load()),
			Partitions: int(pc.partitions.Load()), LastSeen: time.Unix(0, pc.lastSeen.Load()), Since: pc.since,
			Dialed: pc.dialed, QueuedBytes: queued, FramesOut: pc.framesOut.Load(), FramesIn: pc.framesIn.Load(),
			BytesOut: pc.bytesOut.Load(), BytesIn: pc.bytesIn.Load()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}
