package mdns

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"edgeq/internal/backoff"
)

// ErrState is returned by Start on a started or stopped Responder.
var ErrState = errors.New("mdns: responder already started or stopped")

// Responder publishes one Node on one interface as an RFC 6762 responder
// (see the package doc). Start and Stop may be called from any goroutine.
type Responder struct {
	cfg  Config
	node Node
	log  *slog.Logger

	// announcements and announceGap shape the start-up announcements
	// (RFC 6762 §8.3: at least two, one second apart). Tests change them.
	announcements int
	announceGap   time.Duration

	mu      sync.Mutex
	started bool
	stopped bool
	conn    *mconn
	ans     *answerer
	timers  map[*time.Timer]struct{}
	wg      sync.WaitGroup
}

// NewResponder checks cfg and node; it does no I/O.
func NewResponder(cfg Config, node Node) (*Responder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := node.Validate(); err != nil {
		return nil, err
	}
	node = cloneNode(node)
	return &Responder{
		cfg: cfg, node: node, log: cfg.logger().With("component", "mdns-responder"),
		announcements: 2, announceGap: time.Second,
		timers: map[*time.Timer]struct{}{},
	}, nil
}

// Start opens the socket on the configured interface, publishes the node
// (with the interface's IPv4 addresses when Node.Addrs is empty) and
// announces it: now and once more a second later.
func (r *Responder) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return ErrState
	}
	ifi, addrs, links, err := interfaceInfo(r.cfg.Interface)
	if err != nil {
		return err
	}
	if len(r.node.Addrs) == 0 {
		r.node.Addrs = addrs
	}
	rs, err := newRecordSet(r.cfg, r.node)
	if err != nil {
		return fmt.Errorf("%w (interface %s)", err, ifi.Name)
	}
	conn, err := listenMDNS(ifi)
	if err != nil {
		return err
	}
	r.conn, r.started = conn, true
	r.ans = newAnswerer(rs, links, rand.Int64N)
	r.wg.Add(1)
	go r.readLoop()
	r.announceLocked(r.announcements)
	r.log.Info("mdns responder started", "interface", ifi.Name, "instance", rs.instance,
		"host", rs.host, "addrs", fmt.Sprint(r.node.Addrs), "port", r.node.PeerPort)
	return nil
}

// Node returns the published node; its Addrs are filled in by Start.
func (r *Responder) Node() Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return cloneNode(r.node)
}

// Stop sends the goodbye (every record with TTL 0), after which nothing more
// is sent, closes the socket and waits for the goroutines. Stop is
// idempotent; it returns the error of sending the goodbye.
func (r *Responder) Stop() error {
	r.mu.Lock()
	if r.stopped || !r.started {
		r.stopped = true
		r.mu.Unlock()
		return nil
	}
	r.stopped = true
	for t := range r.timers {
		if t.Stop() {
			r.wg.Done()
		}
	}
	clear(r.timers)
	err := r.sendLocked(r.ans.rs.goodbye(), mdnsGroup)
	r.conn.close()
	r.mu.Unlock()
	r.wg.Wait()
	r.log.Info("mdns responder stopped", "goodbye_error", err)
	return err
}

// announceLocked multicasts the announcement and schedules the remaining
// ones announceGap apart.
func (r *Responder) announceLocked(left int) {
	if left <= 0 {
		return
	}
	if err := r.sendLocked(r.ans.announce(time.Now()), mdnsGroup); err != nil {
		r.log.Warn("mdns announcement not sent", "err", err)
	}
	if left > 1 {
		r.laterLocked(r.announceGap, func() { r.announceLocked(left - 1) })
	}
}

// laterLocked runs fn with r.mu held after d, unless Stop comes first.
func (r *Responder) laterLocked(d time.Duration, fn func()) {
	r.wg.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		defer r.wg.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.timers, t)
		if !r.stopped {
			fn()
		}
	})
	r.timers[t] = struct{}{}
}

// readRetry paces reads after a socket error: 10 ms doubling up to 250 ms
// (Stop waits for the loop, so at most that), reset by a packet.
var readRetry = backoff.Policy{Min: 10 * time.Millisecond, Max: 250 * time.Millisecond}

func (r *Responder) readLoop() {
	defer r.wg.Done()
	buf := make([]byte, maxPacket)
	failures := 0
	for {
		p, err := r.conn.read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if failures == 0 {
				r.log.Warn("mdns read failed; retrying", "err", err)
			}
			// Stop closes the socket, which ends the wait's next read.
			time.Sleep(readRetry.Delay(failures, rand.Float64()))
			failures++
			continue
		}
		failures = 0
		msg := new(dns.Msg)
		if err := msg.Unpack(p.data); err != nil {
			r.log.Debug("mdns: malformed packet ignored", "src", p.src, "err", err)
			continue
		}
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		for _, rep := range r.ans.handle(query{msg: msg, src: p.src, toGroup: p.toGroup}, time.Now()) {
			if rep.delay == 0 {
				r.sendReply(rep)
				continue
			}
			rep := rep
			r.laterLocked(rep.delay, func() { r.sendReply(rep) })
		}
		r.mu.Unlock()
	}
}

func (r *Responder) sendReply(rep reply) {
	if err := r.sendLocked(rep.msg, rep.to); err != nil {
		r.log.Warn("mdns reply not sent", "to", rep.to, "err", err)
	}
}

func (r *Responder) sendLocked(m *dns.Msg, to netip.AddrPort) error {
	b, err := m.Pack()
	if err != nil {
		return fmt.Errorf("mdns: pack: %w", err)
	}
	return r.conn.send(b, to)
}
