package dispatch

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/queue"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// Errors of the registry.
var (
	ErrTooManyGroups = errors.New("dispatch: too many queue groups")
	ErrGroupStopped  = errors.New("dispatch: queue group stopped")
	ErrUnknownGroup  = errors.New("dispatch: unknown queue group")
)

// GroupKey names a queue group: a subject filter and a queue name.
type GroupKey struct {
	Filter string
	Queue  string
}

func (k GroupKey) String() string { return k.Filter + " " + k.Queue }

// consumerName is the group's name in the offset store.
func (k GroupKey) consumerName() string { return "queue:" + k.Filter + "|" + k.Queue }

// GroupConfig is a group's settings; Declared groups exist without members.
type GroupConfig struct {
	Key      GroupKey
	Core     queue.Config
	Declared bool
}

// Config configures the registry.
type Config struct {
	Node            string // node ID, carried in Edgeq-Node
	TelemetryPrefix string
	// Defaults is the core configuration of groups created by a subscribe.
	Defaults queue.Config
	// GroupTTL: an undeclared group without members keeps its committed
	// offsets this long, then is removed (default 24h).
	GroupTTL  time.Duration
	MaxGroups int
	// OnGroup, when set, learns of every group started (declared or created
	// by a subscribe); it runs on its own goroutine.
	OnGroup func(GroupKey)
}

// LatencyBounds are the upper bounds of the ingest→delivery histogram.
var LatencyBounds = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second,
}

// GroupStats is a snapshot of one group for status and metrics.
type GroupStats struct {
	Key      GroupKey
	Declared bool
	Core     queue.Stats
	Latency  hist.Snapshot // ingest→delivery of first deliveries
}

// Registry owns the node's queue groups.
type Registry struct {
	cfg     Config
	log     *wal.Log
	logger  *slog.Logger
	publish func(subject string, header, payload []byte)

	mu     sync.Mutex
	groups map[GroupKey]*runner // bound: cfg.MaxGroups
	byID   map[int]*runner
	nextID int
	closed bool

	counters struct {
		refusedDeliveries atomic.Uint64
		badAcks           atomic.Uint64
		staleAcks         atomic.Uint64
		removedGroups     atomic.Uint64
	}
}

// NewRegistry returns a registry; publish sends dead letters on core subjects
// (it may be nil).
func NewRegistry(cfg Config, l *wal.Log, publish func(subject string, header, payload []byte), logger *slog.Logger) *Registry {
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = 64
	}
	return &Registry{
		cfg: cfg, log: l, publish: publish, logger: logger.With("component", "dispatch"),
		groups: map[GroupKey]*runner{}, byID: map[int]*runner{},
	}
}

// Declare creates a declared group (from the configuration).
func (r *Registry) Declare(gc GroupConfig) error {
	gc.Declared = true
	_, err := r.group(gc)
	return err
}

// group returns the running group of gc.Key, starting it if needed.
func (r *Registry) group(gc GroupConfig) (*runner, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrGroupStopped
	}
	if g, ok := r.groups[gc.Key]; ok {
		return g, nil
	}
	if len(r.groups) >= r.cfg.MaxGroups {
		return nil, fmt.Errorf("%w (max %d)", ErrTooManyGroups, r.cfg.MaxGroups)
	}
	match, err := newDeviceMatcher(gc.Key.Filter, r.cfg.TelemetryPrefix)
	if err != nil {
		return nil, err
	}
	cc := gc.Core
	cc.Filter = func(m *queue.Msg) bool { return match.match(m.Device) }
	consumer := gc.Key.consumerName()
	// Resume from committed offsets where the group has them. A new group
	// records where it starts before it delivers anything, so that a crash
	// right after its creation resumes there instead of starting anew
	// (which, for deliver: new, would skip what arrived meanwhile).
	start := make(map[int]uint64, r.log.NumPartitions())
	known := r.log.Offsets().Has(consumer)
	for p := 0; p < r.log.NumPartitions(); p++ {
		off, ok := r.log.Offsets().Get(consumer, p)
		if !ok {
			off = r.log.First(p) - 1 // deliver: all, or a partition the group never committed
			if !known && gc.Core.Deliver == queue.DeliverNew {
				off = r.log.Durable(p)
			}
			if err := r.log.Offsets().Commit(consumer, p, off); err != nil {
				return nil, err
			}
		}
		start[p] = off + 1
	}
	if !known {
		if err := r.log.Offsets().Flush(); err != nil {
			return nil, fmt.Errorf("dispatch: record start of group %s: %w", gc.Key, err)
		}
	}
	core, err := queue.New(cc, start, newRand())
	if err != nil {
		return nil, err
	}
	r.nextID++
	g := &runner{
		key: gc.Key, gid: r.nextID, consumer: consumer, core: core, log: r.log, reg: r,
		logger:   r.logger.With("group", gc.Key.String()),
		events:   make(chan event, eventQueue),
		results:  make(chan fetchResult, 2*r.log.NumPartitions()+1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		members:  map[queue.MemberID]Member{},
		fetchers: map[int]*fetcher{},
		declared: gc.Declared,
		latency:  hist.New(LatencyBounds),
		builder:  deliveryBuilder{node: r.cfg.Node, prefix: r.cfg.TelemetryPrefix},
	}
	g.lastEmpty.Store(time.Now().UnixNano())
	g.snapshotStats()
	r.groups[gc.Key] = g
	r.byID[g.gid] = g
	go g.run()
	if r.cfg.OnGroup != nil {
		go r.cfg.OnGroup(gc.Key)
	}
	r.logger.Info("queue group started", "group", gc.Key.String(), "declared", gc.Declared, "resumed", known)
	return g, nil
}

// Join adds member id to the group (filter, queue), creating the group with
// the defaults if it does not exist. credit < 0 takes the group's max_in_flight.
func (r *Registry) Join(key GroupKey, id queue.MemberID, m Member, credit int) error {
	g, err := r.group(GroupConfig{Key: key, Core: r.cfg.Defaults})
	if err != nil {
		return err
	}
	if credit < 0 {
		credit = queue.DefaultCredit
	}
	return g.send(event{kind: evJoin, member: id, m: m, credit: credit, done: make(chan error, 1)})
}

// Leave removes member id; its in-flight messages go to other members.
func (r *Registry) Leave(key GroupKey, id queue.MemberID) {
	if g := r.lookup(key); g != nil {
		_ = g.send(event{kind: evLeave, member: id, done: make(chan error, 1)})
	}
}

// SetCredit changes a member's credit ($EQ.RDY).
func (r *Registry) SetCredit(key GroupKey, id queue.MemberID, credit int) error {
	g := r.lookup(key)
	if g == nil {
		return ErrUnknownGroup
	}
	return g.send(event{kind: evCredit, member: id, credit: credit, done: make(chan error, 1)})
}

// Ack handles a publish on an ack subject. It does not wait for the group:
// an acknowledgement that turns out stale is counted there.
func (r *Registry) Ack(subject string, payload []byte) error {
	tok, err := parseAckSubject(subject)
	if err != nil {
		r.counters.badAcks.Add(1)
		return err
	}
	kind, delay, err := ParseAckPayload(payload)
	if err != nil {
		r.counters.badAcks.Add(1)
		return err
	}
	r.mu.Lock()
	g := r.byID[tok.gid]
	r.mu.Unlock()
	if g == nil {
		r.counters.staleAcks.Add(1)
		return fmt.Errorf("%w: group %d", ErrUnknownGroup, tok.gid)
	}
	return g.send(event{kind: evAck, tok: tok, ack: kind, delay: delay})
}

func (r *Registry) lookup(key GroupKey) *runner {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.groups[key]
}

// Expire removes undeclared groups that have had no members for GroupTTL:
// they stop, and their offsets no longer hold back retention. The node calls
// it periodically.
func (r *Registry) Expire(now time.Time) {
	r.mu.Lock()
	var expired []*runner
	for key, g := range r.groups {
		empty := g.lastEmpty.Load()
		if g.declared || empty == 0 || now.Sub(time.Unix(0, empty)) < r.cfg.GroupTTL {
			continue
		}
		expired = append(expired, g)
		delete(r.groups, key)
		delete(r.byID, g.gid)
	}
	r.mu.Unlock()
	for _, g := range expired {
		close(g.stop)
		<-g.done
		r.log.Offsets().Remove(g.consumer)
		if err := r.log.Offsets().Flush(); err != nil {
			r.logger.Error("flush offsets", "err", err)
		}
		r.counters.removedGroups.Add(1)
		r.logger.Info("queue group removed after group_ttl without members", "group", g.key.String())
	}
}

// Drain hands every group over: stop reading, wait for in-flight messages
// until deadline, commit and stop. Used on shutdown (and, later, on leader
// change). No group accepts members afterwards.
func (r *Registry) Drain(deadline time.Time) {
	r.mu.Lock()
	r.closed = true
	groups := make([]*runner, 0, len(r.groups))
	for _, g := range r.groups {
		groups = append(groups, g)
	}
	r.mu.Unlock()
	for _, g := range groups {
		if err := g.send(event{kind: evDrain, drainUntil: deadline, done: make(chan error, 1)}); err != nil {
			r.logger.Warn("drain", "group", g.key.String(), "err", err)
		}
	}
	for _, g := range groups {
		select {
		case <-g.done:
		case <-time.After(time.Until(deadline) + time.Second):
			// The core emits Drained at its deadline; this only guards a
			// group stuck on a full event queue.
			close(g.stop)
			<-g.done
		}
	}
}

// Stats returns a snapshot of every group, sorted by key (refreshed about once
// a second by each group's goroutine).
func (r *Registry) Stats() []GroupStats {
	r.mu.Lock()
	groups := make([]*runner, 0, len(r.groups))
	for _, g := range r.groups {
		groups = append(groups, g)
	}
	r.mu.Unlock()
	out := make([]GroupStats, 0, len(groups))
	for _, g := range groups {
		g.statsMu.Lock()
		out = append(out, g.stats)
		g.statsMu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// Counters are registry-wide counts.
type Counters struct {
	RefusedDeliveries, BadAcks, StaleAcks, RemovedGroups uint64
}

// Counters returns registry-wide counts.
func (r *Registry) Counters() Counters {
	return Counters{
		RefusedDeliveries: r.counters.refusedDeliveries.Load(),
		BadAcks:           r.counters.badAcks.Load(),
		StaleAcks:         r.counters.staleAcks.Load(),
		RemovedGroups:     r.counters.removedGroups.Load(),
	}
}
