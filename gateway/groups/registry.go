package groups

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/gateway/queue"
	"edgeq/gateway/readahead"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// Errors of the registry.
var (
	ErrTooManyGroups  = errors.New("groups: too many queue groups")
	ErrGroupStopped   = errors.New("groups: queue group stopped")
	ErrUnknownGroup   = errors.New("groups: unknown queue group")
	ErrTooManyMembers = errors.New("groups: too many members")
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
	Core     CoreConfig
	Declared bool
	// Start, when set, places a new group (no positions stored) in local
	// partition p instead of Core.Deliver: the offset it has finished, so
	// delivery starts after it (see startAt).
	Start func(partition int) uint64
}

// Config configures the registry.
type Config struct {
	Node            string // node ID, carried in Edgeq-Node
	TelemetryPrefix string
	// Defaults is the core configuration of groups created by a subscribe.
	Defaults CoreConfig
	// GroupTTL: an undeclared group without members keeps its committed
	// offsets this long, then is removed (the node's default: 5 minutes).
	GroupTTL  time.Duration
	MaxGroups int
	// EvictIdle: with MaxGroups reached, a new group takes the place of the
	// undeclared group that has been without members longest, if that is at
	// least this long (default 1 minute, at most GroupTTL), so abandoned
	// groups never lock new subscribers out until a restart.
	EvictIdle time.Duration
	// ExpireLed, when set (a cluster), deletes on every node an undeclared
	// group this node leads that has had no members anywhere for GroupTTL
	// (Expire calls it; see cluster.Node.RemoveGroup). Without it such a
	// group stays.
	ExpireLed func(GroupKey) error
	// OnGroup, when set, learns of every group started (declared, created
	// by a subscribe, or learnt from a peer); it runs on its own goroutine.
	OnGroup func(GroupKey)
	// Peers makes the registry a node of a cluster (see cluster.go): a
	// group is delivered only where Lead was called, from every node's
	// partitions. Nil: a standalone node that delivers every group itself.
	Peers Peers
	// MaxPeers bounds the other nodes whose partitions and members are
	// tracked (default 64).
	MaxPeers int
	// DeadLetters, when set, gets every message a group of this node
	// dead-letters, and every one that other nodes' leaders dead-letter
	// (the operator's subscriber may be anywhere). It must not block.
	DeadLetters func(queue string, d *Delivery, reason string)
	// ReadAheadBudget bounds, in bytes, what all the node's groups hold of
	// read-ahead together (gateway/readahead shares it; each record counts
	// its size plus RecordCost). 0: no node-wide bound, only each group's
	// windows.
	ReadAheadBudget int64
}

// RecordCost is what a held record costs the read-ahead budget besides its
// encoded bytes: the core's entry, the decoded record and the slices that
// point at it (about 560 B measured on amd64 with 150 B payloads).
const RecordCost = 512

// ReleasedCost is what a delivered record costs once the core dropped its
// bytes (queue.Group.ReleaseDelivered): its entry in the core.
const ReleasedCost = 192

// budgetFloor is the least grant of a group (see readahead.New): about
// five small records per partition of an 8-partition node.
const budgetFloor = 32 << 10

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
	// Leading: this node runs the group's delivery (always on a standalone
	// node); Core and Latency are only filled while it does.
	Leading bool
	Core    CoreStats
	Latency hist.Snapshot // ingest→delivery of first deliveries, since the group started
	// RecentLatency is Latency over the last RecentWindow only: what the
	// status page shows, so that a backlog's queueing time fades once it
	// is gone.
	RecentLatency hist.Snapshot
	// Durable is each partition's durable offset (by Core.Partitions'
	// IDs) read just before Core, so that durable - committed is the lag
	// at one moment (a live durable offset against a committed one up to a
	// second old showed lag with nothing pending).
	Durable map[int]uint64
	// Partitions names the partitions of Core.Partitions by node.
	Partitions map[int]PartitionRef
	// Members counts the group's members by node, this node's included.
	Members map[string]int
	// Forwards counts deliveries forwarded to members on other nodes.
	Forwards uint64
	// DeclaredByPeer: another node declares the group (it does not expire).
	DeclaredByPeer bool
	// EmptySince is when the group last lost its last member anywhere;
	// zero while it has members. An undeclared group goes GroupTTL after.
	EmptySince time.Time
}

// PartitionRef names a partition of some node's log.
type PartitionRef struct {
	Node      string
	Partition int
	// Durable is the owner's durable offset as last heard (remote partitions).
	Durable uint64
}

// group is one queue group as this node knows it: its members here and on
// other nodes, and the runner while this node delivers it.
type group struct {
	cfg       GroupConfig
	consumer  string
	local     map[queue.MemberID]*localMember   // bound: queue.Config.MaxMembers
	remote    map[string]map[queue.MemberID]int // node -> member -> credit; bound: MaxPeers × MaxMembers
	fwd       [2]forwarder                      // the latest leaders that forwarded here
	run       *runner                           // nil unless delivering here
	leading   bool                              // Lead without StepDown (cluster) or always (standalone)
	lastEmpty time.Time                         // when the group last had no member anywhere; zero while it has
	// fresh: created by this process with no position stored before, and
	// no other node's leader has read this node's partitions for it
	// (ServePosition clears it), so its first run has nothing that may
	// have been delivered before.
	fresh bool
	// declaredBy lists the peers that declare the group in their
	// configuration: it does not expire here either. Bound: MaxPeers.
	declaredBy map[string]bool
}

type localMember struct {
	m      Member
	credit int
}

// forwarder is a leader that forwarded deliveries to this node's members:
// acknowledgements with its group instance ID go back to it.
type forwarder struct {
	gid  int
	node string
}

func (g *group) members() int {
	n := len(g.local)
	for _, ms := range g.remote {
		n += len(ms)
	}
	return n
}

// Registry owns the node's queue groups.
type Registry struct {
	cfg    Config
	log    *wal.Log
	logger *slog.Logger
	// memberTag prefixes this node's member IDs in a cluster, so they are
	// unique cluster-wide and across restarts: "<node>/<boot>/".
	memberTag string

	mu      sync.Mutex
	groups  map[GroupKey]*group       // bound: cfg.MaxGroups
	byID    map[int]*runner           // running groups by instance ID
	members map[queue.MemberID]*group // this node's members; bound: groups × MaxMembers
	nextID  int
	closed  bool
	nodes   nodeTable
	// quiescing: this node stops (Quiesce); its members are reported to
	// the other nodes with credit 0.
	quiescing  bool
	quiescedAt time.Time
	held       heldForwards      // forwarded deliveries this node's members hold (held.go)
	budget     *readahead.Shared // nil: no node-wide read-ahead budget
	expiring   map[GroupKey]bool // led groups Expire hands to ExpireLed now; bound: groups

	counters struct {
		refusedDeliveries atomic.Uint64
		maybeDelivered    atomic.Uint64
		badAcks           atomic.Uint64
		staleAcks         atomic.Uint64
		removedGroups     atomic.Uint64
		deletedGroups     atomic.Uint64
		forwardsIn        atomic.Uint64
		forwardsRefused   atomic.Uint64
		acksRelayed       atomic.Uint64
		remoteCommits     atomic.Uint64
		remoteCommitFails atomic.Uint64
		rereads           atomic.Uint64
	}
}

// NewRegistry returns a registry.
func NewRegistry(cfg Config, l *wal.Log, logger *slog.Logger) *Registry {
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = 64
	}
	if cfg.MaxPeers <= 0 {
		cfg.MaxPeers = 64
	}
	r := &Registry{
		cfg: cfg, log: l, logger: logger.With("component", "dispatch"),
		groups: map[GroupKey]*group{}, byID: map[int]*runner{}, members: map[queue.MemberID]*group{}, expiring: map[GroupKey]bool{},
		// Instance IDs start at random, so an acknowledgement meant for an
		// earlier leader (another node, or this one before a restart) does
		// not name a running group here.
		nextID: rand.IntN(1 << 30),
	}
	r.nodes.init(cfg.Node, l.NumPartitions())
	if cfg.ReadAheadBudget > 0 {
		b, err := readahead.NewShared(cfg.ReadAheadBudget, min(cfg.ReadAheadBudget, budgetFloor))
		if err != nil {
			r.logger.Error("read-ahead budget not applied", "err", err) // not reached: the total is >= 1
		} else {
			r.budget = b
		}
	}
	if cfg.Peers != nil {
		r.memberTag = fmt.Sprintf("%s/%04x/", cfg.Node, rand.Uint32()&0xffff)
	}
	return r
}

func (r *Registry) clustered() bool { return r.cfg.Peers != nil }

// Declare creates a declared group (from the configuration).
func (r *Registry) Declare(gc GroupConfig) error {
	gc.Declared = true
	r.mu.Lock()
	_, created, err := r.ensureGroup(gc)
	r.mu.Unlock()
	if created {
		r.groupCreated(gc.Key)
	}
	return err
}

// ensureGroup returns the group of gc.Key, creating it if needed: its start
// in every local partition is recorded, and on a standalone node its runner
// starts. The caller holds mu and, when created is true, calls groupCreated
// after releasing it.
func (r *Registry) ensureGroup(gc GroupConfig) (*group, bool, error) {
	if r.closed {
		return nil, false, ErrGroupStopped
	}
	if g, ok := r.groups[gc.Key]; ok {
		if gc.Declared && !g.cfg.Declared {
			g.cfg.Declared = true
		}
		return g, false, nil
	}
	if len(r.groups) >= r.cfg.MaxGroups && !r.evictIdleLocked(time.Now()) {
		return nil, false, fmt.Errorf("%w (max %d; none has been without members for %v)", ErrTooManyGroups, r.cfg.MaxGroups, r.evictIdle())
	}
	match, err := newDeviceMatcher(gc.Key.Filter, r.cfg.TelemetryPrefix)
	if err != nil {
		return nil, false, err
	}
	gc.Core.Filter = func(m *queue.Msg) bool { return match.match(m.Device) }
	if err := gc.Core.Validate(); err != nil {
		return nil, false, err
	}
	g := &group{cfg: gc, consumer: gc.Key.consumerName(), local: map[queue.MemberID]*localMember{},
		remote: map[string]map[queue.MemberID]int{}, lastEmpty: time.Now()}
	known, err := r.recordStart(g)
	if err != nil {
		return nil, false, err
	}
	g.fresh = !known
	r.groups[gc.Key] = g
	r.logger.Info("queue group started", "group", gc.Key.String(), "declared", gc.Declared, "resumed", known)
	if !r.clustered() {
		g.leading = true
		r.startRunner(g)
	}
	return g, true, nil
}

// recordStart makes sure the group has a committed position in every local
// partition, and records a new group's start durably before anything is
// delivered, so that a crash right after its creation resumes there instead
// of starting anew (which, for deliver: new, would skip what arrived
// meanwhile). It reports whether the group had positions already.
func (r *Registry) recordStart(g *group) (bool, error) {
	known := r.log.Offsets().Has(g.consumer)
	for p := 0; p < r.log.NumPartitions(); p++ {
		if _, ok := r.log.Offsets().Get(g.consumer, p); ok {
			continue
		}
		off := r.log.First(p) - 1 // deliver: all, or a partition the group never committed
		if !known && g.cfg.Core.Deliver == queue.DeliverNew {
			off = r.log.Durable(p)
		}
		if !known && g.cfg.Start != nil {
			off = r.startAt(p, g.cfg.Start(p))
		}
		if err := r.log.Offsets().Commit(g.consumer, p, off); err != nil {
			return known, err
		}
	}
	if !known {
		if err := r.log.Offsets().Flush(); err != nil {
			return known, fmt.Errorf("groups: record start of group %s: %w", g.cfg.Key, err)
		}
	}
	return known, nil
}

// groupCreated tells the node and the cluster of a new group.
func (r *Registry) groupCreated(key GroupKey) {
	if r.cfg.OnGroup != nil {
		go r.cfg.OnGroup(key)
	}
	if r.clustered() {
		r.cfg.Peers.MembersChanged(key)
	}
}

// startRunner starts delivering g from this node. Called with mu held.
func (r *Registry) startRunner(g *group) {
	start := make(map[int]uint64, r.log.NumPartitions())
	for p := 0; p < r.log.NumPartitions(); p++ {
		off, _ := r.log.Offsets().Get(g.consumer, p)
		start[p] = off + 1
	}
	core, err := queue.New(g.cfg.Core, start, newRand())
	if err != nil {
		r.logger.Error("queue group cannot start", "group", g.cfg.Key.String(), "err", err)
		return
	}
	r.nextID++
	run := &runner{
		key: g.cfg.Key, gid: r.nextID, consumer: g.consumer, core: core, log: r.log, reg: r, grp: g,
		logger:     r.logger.With("group", g.cfg.Key.String()),
		events:     make(chan event, eventQueue),
		results:    make(chan fetchResult, 2*r.log.NumPartitions()+1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		members:    map[queue.MemberID]Member{},
		fetchers:   map[int]*fetcher{},
		want:       newDemand(),
		remotes:    map[int]*remoteFetcher{},
		attached:   map[string]bool{},
		peerParts:  map[string]int{},
		down:       map[string]bool{},
		confirming: map[string]bool{},
		pending:    map[int]uint64{},
		committing: map[string]bool{},
		durable:    map[int]uint64{},
		latency:    hist.New(LatencyBounds),
		recent:     hist.NewWindow(int(RecentWindow / time.Second)),
		suspect:    map[int]uint64{},
		high:       map[int]uint64{},
	}
	// What is past the commits may have been delivered by the previous run
	// (a crash) or leader, unless that run recorded that it drained fully.
	// The record is cleared, durably, before anything is delivered.
	drained := r.log.Offsets().Drained(g.consumer)
	if drained {
		r.log.Offsets().SetDrained(g.consumer, false)
		if err := r.log.Offsets().Flush(); err != nil {
			r.logger.Error("flush offsets", "err", err)
			drained = false
		}
	}
	fresh := g.fresh
	g.fresh = false
	for p, next := range start {
		if d := r.log.Durable(p); d >= next && !fresh && (!drained || r.clustered()) {
			run.suspectUpTo(p, d)
		}
	}
	// The members known now; later changes come as events.
	for id, lm := range g.local {
		if core.AddMember(id, lm.credit, time.Now()) == nil {
			run.members[id] = lm.m
		}
	}
	for node, ms := range g.remote {
		for id, credit := range ms {
			if core.AddMember(id, credit, time.Now()) == nil {
				run.members[id] = r.remoteMember(node, g.cfg.Key, id)
			}
		}
	}
	run.snapshotStats(true)
	g.run = run
	r.byID[run.gid] = run
	var peers []string
	if r.clustered() {
		peers = r.nodes.upNodes()
	}
	go run.run(peers)
	r.logger.Info("delivering queue group", "group", g.cfg.Key.String(), "instance", run.gid, "members", len(run.members))
}

// runnerStopped is called by a runner's goroutine when it ends.
func (r *Registry) runnerStopped(run *runner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byID, run.gid)
	g := run.grp
	if g.run != run {
		return
	}
	g.run = nil
	if g.leading && !r.closed && r.groups[g.cfg.Key] == g {
		// Led again while the previous runner stopped.
		r.startRunner(g)
	}
}

// memberID is the ID a member of this node has in its groups.
func (r *Registry) memberID(id queue.MemberID) queue.MemberID {
	if r.memberTag == "" {
		return id
	}
	return queue.MemberID(r.memberTag + string(id))
}

// Join adds member id to the group (filter, queue), creating the group with
// the defaults if it does not exist. credit < 0 takes the group's
// max_in_flight. It returns the member's ID in the group, which its
// deliveries' AckHandle carries (in a cluster, id tagged with this node).
func (r *Registry) Join(key GroupKey, id MemberID, m Member, credit int) (MemberID, error) {
	gid := r.memberID(id)
	err := r.join(key, gid, m, credit)
	return gid, err
}

func (r *Registry) join(key GroupKey, gid queue.MemberID, m Member, credit int) error {
	r.mu.Lock()
	g, created, err := r.ensureGroup(GroupConfig{Key: key, Core: r.cfg.Defaults})
	if err != nil {
		r.mu.Unlock()
		return err
	}
	if credit < 0 {
		credit = g.cfg.Core.MaxInFlight
	}
	if _, dup := g.local[gid]; !dup && len(g.local) >= g.cfg.Core.MaxMembers {
		r.mu.Unlock()
		return fmt.Errorf("groups: join %s: %w (max %d)", key, ErrTooManyMembers, g.cfg.Core.MaxMembers)
	}
	g.local[gid] = &localMember{m: m, credit: credit}
	g.lastEmpty = time.Time{}
	r.members[gid] = g
	run := g.run
	r.mu.Unlock()
	if created {
		r.groupCreated(key)
	}
	if r.clustered() {
		r.cfg.Peers.MembersChanged(key)
	}
	if run == nil {
		return nil
	}
	err = run.send(event{kind: evJoin, member: gid, eventExtra: &eventExtra{m: m}, credit: credit, done: make(chan error, 1)})
	if errors.Is(err, ErrGroupStopped) {
		return nil // a new runner takes the member from the table
	}
	return err
}

// Leave removes member id; its in-flight messages go to other members.
func (r *Registry) Leave(key GroupKey, id MemberID) {
	gid := r.memberID(id)
	r.mu.Lock()
	g := r.groups[key]
	if g == nil || g.local[gid] == nil {
		r.mu.Unlock()
		return
	}
	delete(g.local, gid)
	delete(r.members, gid)
	if g.members() == 0 {
		g.lastEmpty = time.Now()
	}
	run := g.run
	r.mu.Unlock()
	if r.clustered() {
		r.held.left(gid)
		r.cfg.Peers.MembersChanged(key)
	}
	if run != nil {
		_ = run.send(event{kind: evLeave, member: gid, done: make(chan error, 1)})
	}
}

// SetCredit changes a member's credit ($EQ.RDY).
func (r *Registry) SetCredit(key GroupKey, id MemberID, credit int) error {
	if credit < 0 {
		return fmt.Errorf("groups: set credit: %w, got %d", queue.ErrBadCredit, credit)
	}
	gid := r.memberID(id)
	r.mu.Lock()
	g := r.groups[key]
	if g == nil || g.local[gid] == nil {
		r.mu.Unlock()
		return ErrUnknownGroup
	}
	g.local[gid].credit = credit
	run := g.run
	r.mu.Unlock()
	if r.clustered() {
		r.cfg.Peers.MembersChanged(key)
	}
	if run == nil {
		return nil
	}
	err := run.send(event{kind: evCredit, member: gid, credit: credit, done: make(chan error, 1)})
	if errors.Is(err, ErrGroupStopped) {
		return nil
	}
	return err
}

// Ack takes a worker's answer about a delivery. It does not wait for the
// group: an acknowledgement that turns out stale is counted there. In a
// cluster, an acknowledgement of a delivery another node made is relayed to
// it. The front end has checked that the answer comes from the member that
// holds the message (its connection).
func (r *Registry) Ack(a Ack) error {
	if a.Kind < AckDone || a.Kind > AckTerm {
		r.counters.badAcks.Add(1)
		return fmt.Errorf("%w: kind %d", ErrBadAck, a.Kind)
	}
	if a.Kind != AckInProgress && r.clustered() {
		r.held.answered(a.Handle)
	}
	return r.ack(a, true)
}

func (r *Registry) ack(a Ack, relay bool) error {
	if a.Handle.Offset == 0 || a.Handle.Deliveries < 1 || a.Handle.Member == "" {
		r.counters.badAcks.Add(1)
		return fmt.Errorf("%w: handle %+v", ErrBadAck, a.Handle)
	}
	r.mu.Lock()
	run := r.byID[a.Handle.Group]
	to := ""
	if run == nil && relay && r.clustered() {
		if g := r.members[a.Handle.Member]; g != nil {
			for _, f := range g.fwd {
				if f.gid == a.Handle.Group && f.node != "" {
					to = f.node
				}
			}
		}
	}
	r.mu.Unlock()
	if run != nil && a.Kind == ackGone {
		return run.send(event{kind: evLeave, member: a.Handle.Member})
	}
	if run != nil {
		return run.send(event{kind: evAck, ack: a})
	}
	if to != "" && r.cfg.Peers.RelayAck(to, a) {
		r.counters.acksRelayed.Add(1)
		return nil
	}
	r.counters.staleAcks.Add(1)
	return fmt.Errorf("%w: group %d", ErrUnknownGroup, a.Handle.Group)
}

// Expire removes undeclared groups that have had no members for GroupTTL:
// they stop, and their offsets no longer hold back retention. In a cluster,
// members on other nodes count, and a group this node leads goes on every
// node through ExpireLed (or stays without it). The node calls it
// periodically.
func (r *Registry) Expire(now time.Time) {
	r.mu.Lock()
	var expired []*group
	var led []GroupKey
	for key, g := range r.groups {
		if r.clustered() && g.leading && r.cfg.ExpireLed != nil && r.idleLocked(g, now, r.cfg.GroupTTL) {
			led = append(led, key)
			continue
		}
		if !r.idleUndeclaredLocked(g, now, r.cfg.GroupTTL) {
			continue
		}
		expired = append(expired, g)
		delete(r.groups, key)
		g.leading = false
	}
	r.mu.Unlock()
	for _, g := range expired {
		if run := g.run; run != nil {
			run.halt()
			<-run.done
		}
		r.log.Offsets().Remove(g.consumer)
		if err := r.log.Offsets().Flush(); err != nil {
			r.logger.Error("flush offsets", "err", err)
		}
		r.counters.removedGroups.Add(1)
		r.logger.Info("queue group removed after group_ttl without members", "group", g.cfg.Key.String())
	}
	for _, key := range led {
		r.mu.Lock()
		r.expiring[key] = true // its Forget counts it as removed, not deleted on demand
		r.mu.Unlock()
		err := r.cfg.ExpireLed(key)
		r.mu.Lock()
		delete(r.expiring, key)
		r.mu.Unlock()
		if err != nil {
			r.logger.Debug("queue group past group_ttl not deleted yet", "group", key.String(), "err", err)
			continue
		}
		r.logger.Info("queue group deleted on every node after group_ttl without members", "group", key.String())
	}
}

// Drain hands every running group over: stop reading, wait for in-flight
// messages until deadline, commit and stop. Used on shutdown. No group
// accepts members afterwards.
func (r *Registry) Drain(deadline time.Time) {
	r.mu.Lock()
	r.closed = true
	runs := make([]*runner, 0, len(r.byID))
	for _, g := range r.groups {
		g.leading = false
		if g.run != nil {
			runs = append(runs, g.run)
		}
	}
	r.mu.Unlock()
	for _, run := range runs {
		if err := run.send(event{kind: evDrain, eventExtra: &eventExtra{drainUntil: deadline}, done: make(chan error, 1)}); err != nil && !errors.Is(err, ErrGroupStopped) {
			r.logger.Warn("drain", "group", run.key.String(), "err", err)
		}
	}
	for _, run := range runs {
		run.waitStopped(deadline)
	}
}

// statsRefreshWait bounds how long Stats waits for a busy group's fresh
// snapshot before it takes the last one.
const statsRefreshWait = 250 * time.Millisecond

// Stats returns a snapshot of every group, sorted by key: each running
// group's goroutine takes it on request (within statsRefreshWait, else its
// last one, at most a second old).
func (r *Registry) Stats() []GroupStats {
	r.mu.Lock()
	out := make([]GroupStats, 0, len(r.groups))
	var runs []*runner
	var idx []int
	for _, g := range r.groups {
		gs := GroupStats{Key: g.cfg.Key, Declared: g.cfg.Declared, DeclaredByPeer: len(g.declaredBy) > 0, Members: map[string]int{}, EmptySince: g.lastEmpty}
		if len(g.local) > 0 || !r.clustered() {
			gs.Members[r.cfg.Node] = len(g.local)
		}
		for node, ms := range g.remote {
			if len(ms) > 0 {
				gs.Members[node] = len(ms)
			}
		}
		if g.run != nil {
			runs = append(runs, g.run)
			idx = append(idx, len(out))
		}
		out = append(out, gs)
	}
	r.mu.Unlock()
	// A snapshot of now, so that a status read right after a publish sees
	// it (the periodic one can be a second old).
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.refreshStats(statsRefreshWait)
		}()
	}
	wg.Wait()
	for i, run := range runs {
		gs := &out[idx[i]]
		run.statsMu.Lock()
		gs.Leading = true
		gs.Core = run.stats.Core
		gs.Latency = run.stats.Latency
		gs.RecentLatency = run.stats.RecentLatency
		gs.Durable = run.stats.Durable
		gs.Partitions = run.stats.Partitions
		gs.Forwards = run.stats.Forwards
		run.statsMu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// Counters are registry-wide counts.
type Counters struct {
	RefusedDeliveries, BadAcks, StaleAcks, RemovedGroups uint64
	// DeletedGroups counts groups removed on demand (Remove: the API,
	// CONSUMER.DELETE, an #ephemeral NSQ channel's last consumer).
	DeletedGroups uint64
	// MaybeDelivered counts first deliveries of this run flagged as
	// possibly delivered before (past the commits at a restart or failover).
	MaybeDelivered uint64
	// Cluster: deliveries forwarded here by other nodes' leaders (and those
	// this node's members could not take), acknowledgements relayed to
	// leaders, commits stored at other nodes (and those that failed).
	ForwardsIn, ForwardsRefused, AcksRelayed, RemoteCommits, RemoteCommitFailures uint64
	// ForwardsHeld: forwarded deliveries this node's members hold
	// unanswered (a gauge); ForwardsUntracked: those not tracked because
	// the table was full (a stop does not wait for them).
	ForwardsHeld, ForwardsUntracked uint64
	// The node-wide read-ahead budget (zero without one): its size, what
	// the running groups hold of it, one group's equal share, the groups
	// sharing it and those above their share; Rereads counts records read
	// from the log again (set aside beyond a device's share of a window,
	// read when it has room).
	ReadAheadBudget, ReadAheadUsed, ReadAheadShare uint64
	ReadAheadGroups, ReadAheadOver                 uint64
	Rereads                                        uint64
}

// Counters returns registry-wide counts.
func (r *Registry) Counters() Counters {
	c := Counters{
		RefusedDeliveries:    r.counters.refusedDeliveries.Load(),
		MaybeDelivered:       r.counters.maybeDelivered.Load(),
		BadAcks:              r.counters.badAcks.Load(),
		StaleAcks:            r.counters.staleAcks.Load(),
		RemovedGroups:        r.counters.removedGroups.Load(),
		DeletedGroups:        r.counters.deletedGroups.Load(),
		ForwardsIn:           r.counters.forwardsIn.Load(),
		ForwardsRefused:      r.counters.forwardsRefused.Load(),
		AcksRelayed:          r.counters.acksRelayed.Load(),
		RemoteCommits:        r.counters.remoteCommits.Load(),
		RemoteCommitFailures: r.counters.remoteCommitFails.Load(),
		ForwardsHeld:         uint64(r.held.count()),
		ForwardsUntracked:    r.held.untracked.Load(),
		Rereads:              r.counters.rereads.Load(),
	}
	if r.budget != nil {
		s := r.budget.Stats()
		c.ReadAheadBudget, c.ReadAheadUsed, c.ReadAheadShare = uint64(s.Total), uint64(s.Used), uint64(s.Share)
		c.ReadAheadGroups, c.ReadAheadOver = uint64(s.Groups), uint64(s.Over)
	}
	return c
}
