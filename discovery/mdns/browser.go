package mdns

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	hmdns "github.com/hashicorp/mdns"
	"github.com/miekg/dns"
)

// Browser finds the peers of one cluster: hashicorp's mdns.Query every
// BrowseInterval, a passive listener for announcements and goodbyes, and the
// static peers. Peers and Updates may be called from any goroutine.
type Browser struct {
	cfg    Config
	self   Node
	log    *slog.Logger
	hlog   *log.Logger // hashicorp's logger: its lines at debug level
	svcFQN string

	// passive enables the listener on 5353; query runs one browse round.
	// Tests change them.
	passive bool
	query   func(context.Context, *hmdns.QueryParam) error

	mu         sync.Mutex
	table      *peerTable
	updates    chan struct{}
	running    bool
	firstRound chan struct{} // closed when the first browse round has ended
	roundOnce  sync.Once
}

// NewBrowser checks cfg; self.ID (left out of the results) and self.Cluster
// (the only cluster reported) are required, the other fields of self are not
// used. It does no I/O.
func NewBrowser(cfg Config, self Node) (*Browser, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	probe := self
	probe.Priority, probe.Version, probe.PeerPort, probe.Addrs = 0, "x", 1, nil
	if err := probe.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.logger().With("component", "mdns-browser")
	return &Browser{
		cfg: cfg, self: self, log: lg, hlog: slog.NewLogLogger(lg.Handler(), slog.LevelDebug),
		svcFQN:     cfg.serviceName(),
		passive:    true,
		query:      hmdns.QueryContext,
		table:      newPeerTable(cfg, self),
		updates:    make(chan struct{}, 1),
		firstRound: make(chan struct{}),
	}, nil
}

// FirstRound is closed once the first browse round has ended: the peers
// that answer queries are in Peers by then.
func (b *Browser) FirstRound() <-chan struct{} { return b.firstRound }

// Peers returns the current peers (discovered and static), sorted by ID.
func (b *Browser) Peers() []Peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.table.list()
}

// Updates returns a channel that receives a value (coalesced) whenever the
// peer list changes: a peer appears, changes, expires or says goodbye.
func (b *Browser) Updates() <-chan struct{} { return b.updates }

// Run browses until ctx is done; it returns nil then, at most BrowseTimeout
// later (hashicorp's Query does not return before its timeout). It returns
// an error at once if the interface does not exist. Without a passive
// listener (port 5353 busy without SO_REUSEPORT, for example) it browses
// by queries alone and logs a warning.
func (b *Browser) Run(ctx context.Context) error {
	b.mu.Lock()
	if b.running {
		b.mu.Unlock()
		return errors.New("mdns: browser already running")
	}
	b.running = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.running = false
		b.mu.Unlock()
	}()

	ifi, err := net.InterfaceByName(b.cfg.Interface)
	if err != nil {
		return fmt.Errorf("mdns: interface %q: %w", b.cfg.Interface, err)
	}
	var heardCh chan *dns.Msg
	if b.passive {
		conn, err := listenGroup(ifi)
		if err != nil {
			b.log.Warn("mdns: no passive listener; announcements and goodbyes are not heard", "err", err)
		} else {
			heardCh = make(chan *dns.Msg, 32)
			done := make(chan struct{})
			go b.listen(conn, heardCh, done)
			defer func() { conn.close(); <-done }()
		}
	}

	ticker := time.NewTicker(b.cfg.BrowseInterval)
	defer ticker.Stop()
	// A round's entries are read only after Query has returned: hashicorp
	// keeps writing to an entry it has already sent when more records for
	// the same name arrive (a data race the race detector reports), and its
	// Query blocks for the whole timeout anyway.
	var entries chan *hmdns.ServiceEntry // the round in flight, or nil
	var finished chan error              // its Query's result
	startRound := func() {
		b.mu.Lock()
		b.table.beginRound()
		b.mu.Unlock()
		ch := make(chan *hmdns.ServiceEntry, maxPeers)
		fin := make(chan error, 1)
		entries, finished = ch, fin
		p := &hmdns.QueryParam{
			Service:     b.cfg.Service,
			Domain:      strings.TrimSuffix(b.cfg.Domain, "."),
			Timeout:     b.cfg.BrowseTimeout,
			Interface:   ifi,
			Entries:     ch,
			DisableIPv6: true,
			Logger:      b.hlog,
		}
		go func() {
			err := b.query(ctx, p)
			close(ch) // hashicorp never closes Entries
			fin <- err
		}()
	}
	startRound()
	for {
		select {
		case <-ctx.Done():
			if finished != nil {
				<-finished
			}
			return nil
		case <-ticker.C:
			if finished == nil {
				startRound()
			}
		case err := <-finished:
			for e := range entries {
				b.fromQuery(e)
			}
			entries, finished = nil, nil
			b.endRound(err)
		case m := <-heardCh:
			b.fromMulticast(m)
		}
	}
}

func (b *Browser) listen(conn *mconn, out chan<- *dns.Msg, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, maxPacket)
	for {
		p, err := conn.read(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				b.log.Warn("mdns: passive listener stopped", "err", err)
			}
			return
		}
		m := new(dns.Msg)
		if m.Unpack(p.data) != nil || !m.Response {
			continue
		}
		select {
		case out <- m:
		default:
			b.log.Debug("mdns: passive listener behind; response dropped", "src", p.src)
		}
	}
}

func (b *Browser) endRound(queryErr error) {
	if queryErr != nil {
		b.log.Warn("mdns browse failed", "err", queryErr)
	}
	b.mu.Lock()
	expired := b.table.endRound()
	b.mu.Unlock()
	if len(expired) > 0 {
		b.log.Info("mdns peers expired", "ids", expired)
		b.notify()
	}
	b.roundOnce.Do(func() { close(b.firstRound) })
}

// fromQuery takes an entry of hashicorp's Query.
func (b *Browser) fromQuery(e *hmdns.ServiceEntry) {
	if !hasSuffixFold(e.Name, "."+b.svcFQN) {
		return // hashicorp reports every service it hears
	}
	n, err := parseTXT(e.InfoFields)
	if err == nil && n.PeerPort != e.Port {
		err = errPortMismatch
	}
	if e.AddrV4 != nil {
		n.Addrs = append(n.Addrs, e.AddrV4)
	}
	if e.AddrV6 != nil && !e.AddrV6.IsLinkLocalUnicast() {
		n.Addrs = append(n.Addrs, e.AddrV6)
	}
	b.observe(e.Name, n, err, viaQuery)
}

// fromMulticast takes a response heard by the passive listener.
func (b *Browser) fromMulticast(m *dns.Msg) {
	h := parseResponse(m, b.svcFQN)
	for _, inst := range h.gone {
		b.mu.Lock()
		id, ok := b.table.goodbye(inst)
		b.mu.Unlock()
		if ok {
			b.log.Info("mdns peer said goodbye", "id", id)
			b.notify()
		}
	}
	for _, s := range h.alive {
		b.observe(s.instance, s.node, s.err, viaMulticast)
	}
}

func (b *Browser) observe(instance string, n Node, err error, how via) {
	changed := false
	if err == nil {
		b.mu.Lock()
		changed, err = b.table.observe(instance, n, how, time.Now())
		b.mu.Unlock()
	}
	switch {
	case errors.Is(err, errSelf):
	case err != nil:
		b.log.Debug("mdns: entry ignored", "instance", instance, "reason", err)
	case changed:
		b.log.Info("mdns peer", "id", n.ID, "addrs", fmt.Sprint(n.Addrs), "port", n.PeerPort, "priority", n.Priority, "version", n.Version)
		b.notify()
	}
}

func (b *Browser) notify() {
	select {
	case b.updates <- struct{}{}:
	default:
	}
}
