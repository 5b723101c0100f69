package groups

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"edgeq/gateway/queue"
	"edgeq/internal/hist"
	"edgeq/wal"
)

// event is an input for a group's goroutine. It is kept small (acks are
// most of them) since every group has a queue of eventQueue of them: the
// fields of the rare kinds are in eventExtra.
type event struct {
	kind   eventKind
	member queue.MemberID
	credit int
	ack    Ack
	done   chan error // answer for the sender; nil: nobody waits
	*eventExtra
}

// eventExtra holds the fields of the rare kinds of event.
type eventExtra struct {
	m          Member // evJoin
	drainUntil time.Time
	withdraw   bool              // evDrain: a newer leader exists; deliver nothing more
	node       string            // evPeerUp, evAttach, evCommitDone
	starts     []uint64          // evAttach: next offset per partition of node
	offsets    []PartitionOffset // evCommitDone
	err        error             // evCommitDone
}

type eventKind uint8

const (
	evJoin eventKind = iota + 1
	evLeave
	evCredit
	evAck
	evDrain
	evPeerUp     // a peer is reachable: read (or resume) its partitions
	evPeerDown   // a peer is unreachable: pause its partitions
	evResume     // a peer that was back accepted this leader: resume its partitions
	evAttach     // a peer's start positions arrived
	evCommitDone // a commit at a peer finished
	evStats      // refresh the stats snapshot now (a status request)
)

// fetchResult answers one queue.Fetch.
type fetchResult struct {
	partition int
	msgs      []queue.Msg
	next      uint64
	durable   uint64 // remote partitions: the owner's durable offset
	refetch   bool   // answers a queue.Fetch with Refetch set
}

// runner owns one queue group's core while this node delivers the group, and
// is its only goroutine.
type runner struct {
	key      GroupKey
	gid      int
	consumer string // offset-store name
	core     *queue.Group
	log      *wal.Log
	logger   *slog.Logger
	reg      *Registry
	grp      *group

	events   chan event // bounded; senders block when full (backpressure on acks)
	results  chan fetchResult
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	members  map[queue.MemberID]Member // bound: queue.Config.MaxMembers
	fetchers map[int]*fetcher
	want     *demand                // a member has credit left: fetchers' waits start commit rounds
	remotes  map[int]*remoteFetcher // by partition ID; bound: queue.Config.MaxPartitions

	// Cluster: peers whose partitions are in the core or being positioned,
	// commits of remote partitions not yet sent (by partition ID), peers
	// with a commit on its way, owners' durable offsets as last heard.
	attached   map[string]bool // bound: MaxPeers
	peerParts  map[string]int  // partitions of each peer in the core; bound: MaxPeers
	down       map[string]bool // peers gone since their partitions were added; bound: MaxPeers
	confirming map[string]bool // peers back whose acceptance of this leader is being checked; bound: MaxPeers
	pending    map[int]uint64
	committing map[string]bool
	durable    map[int]uint64

	// suspect: per partition, the records up to here may have been
	// delivered by an earlier run or leader (past the committed offset at
	// start); their first delivery in this run says so. high: the highest
	// offset that may have been delivered by anyone. Bound: partitions.
	suspect map[int]uint64
	high    map[int]uint64

	dv       Delivery   // reused for every delivery
	rec      wal.Record // scratch for records without a decoded Body
	forwards uint64

	statsMu sync.Mutex
	stats   runnerStats

	latency *hist.Histogram
	// recent: the latency snapshots of the last RecentWindow, one per
	// stats refresh (about a second).
	recent *hist.Window
	dirty  bool // local commits since the last offset flush
	grant  int  // the read-ahead budget's grant last given to the core; 0: none
}

type runnerStats struct {
	Core          queue.Stats
	Latency       hist.Snapshot
	RecentLatency hist.Snapshot
	Durable       map[int]uint64
	Partitions    map[int]PartitionRef
	Forwards      uint64
}

// RecentWindow is the span of GroupStats.RecentLatency.
const RecentWindow = time.Minute

// eventQueue bounds a group's queued events: acks wait (backpressure) when
// it is full; the runner takes up to 256 at a time. 512 events of 112 B
// cost each group 56 KiB (4,096 of 232 B cost 32 MiB with 32 groups).
const eventQueue = 512

// remoteCommitTimeout bounds one commit round trip to a peer.
const remoteCommitTimeout = 5 * time.Second

// CommitInterval is how often a running group makes its commits durable
// and sends those of other nodes' partitions to them (only when there are
// new ones). A crash redelivers at most what was finished since.
const CommitInterval = 200 * time.Millisecond

func (r *runner) run(peers []string) {
	defer r.reg.runnerStopped(r)
	defer close(r.done)
	if b := r.reg.budget; b != nil {
		b.Join(r.gid)
		defer b.Leave(r.gid)
		// A record in flight costs only its entry: its bytes are read again
		// from the local log if it must go out again (rare).
		r.core.ReleaseDelivered(func(p int) bool { return p < partitionStride }, ReleasedCost)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Commits are made durable (here) and sent to the owners (other
	// nodes) every CommitInterval: a crash redelivers what was finished
	// since. Stats are refreshed every second.
	flush := time.NewTicker(CommitInterval)
	defer flush.Stop()
	stats := time.NewTicker(time.Second)
	defer stats.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for _, node := range peers {
		r.attach(ctx, node, 0)
	}
	r.syncBudget()
	r.apply(ctx)
	for {
		if at, ok := r.core.NextDeadline(); ok {
			timer.Reset(max(time.Until(at), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case ev := <-r.events:
			r.handle(ctx, ev, time.Now())
			// Take what else is queued before acting: one Ready per batch.
			for i := 0; i < 256; i++ {
				select {
				case ev := <-r.events:
					r.handle(ctx, ev, time.Now())
					continue
				default:
				}
				break
			}
		case res := <-r.results:
			if res.durable > 0 {
				if _, seen := r.durable[res.partition]; !seen && res.partition >= partitionStride {
					// A peer's partition: its durable offset when first
					// read bounds what an earlier leader can have delivered.
					r.suspectUpTo(res.partition, res.durable)
				}
				r.durable[res.partition] = res.durable
			}
			answer := r.core.Fetched
			if res.refetch {
				answer = r.core.Refetched
				r.reg.counters.rereads.Add(uint64(len(res.msgs)))
			}
			if err := answer(res.partition, res.msgs, res.next, time.Now()); err != nil {
				r.logger.Error("fetch answer refused", "partition", res.partition, "err", err)
			}
		case <-timer.C:
			_ = r.core.Tick(time.Now())
		case <-flush.C:
			r.flushOffsetsLazy()
			r.commitRemote(ctx)
		case <-stats.C:
			r.snapshotStats(true)
		case <-r.stop:
			r.flushOffsets()
			return
		}
		r.syncBudget()
		if r.apply(ctx) {
			r.recordDrained()
			r.flushOffsets()
			r.finalRemoteCommits()
			r.snapshotStats(false)
			return
		}
	}
}

func (r *runner) handle(ctx context.Context, ev event, now time.Time) {
	var err error
	switch ev.kind {
	case evJoin:
		if _, ok := r.members[ev.member]; ok {
			err = r.core.SetCredit(ev.member, ev.credit, now) // joined again (e.g. a repeated snapshot)
		} else if err = r.core.AddMember(ev.member, ev.credit, now); err == nil {
			r.members[ev.member] = ev.m
		}
	case evLeave:
		if _, ok := r.members[ev.member]; ok {
			delete(r.members, ev.member)
			err = r.core.RemoveMember(ev.member, now)
			r.logger.Debug("member left", "member", string(ev.member))
		}
	case evCredit:
		err = r.core.SetCredit(ev.member, ev.credit, now)
	case evAck:
		h := ev.ack.Handle
		ref := queue.Ref{Partition: h.Partition, Offset: h.Offset}
		switch ev.ack.Kind {
		case AckDone:
			err = r.core.Ack(h.Member, ref, h.Deliveries, now)
		case AckNak:
			err = r.core.Nak(h.Member, ref, h.Deliveries, ev.ack.Delay, now)
		case AckInProgress:
			err = r.core.InProgress(h.Member, ref, h.Deliveries, now)
		case AckTerm:
			err = r.core.Term(h.Member, ref, h.Deliveries, now)
		}
	case evDrain:
		if ev.withdraw {
			err = r.core.Withdraw(ev.drainUntil, now)
		} else {
			err = r.core.Drain(ev.drainUntil, now)
		}
	case evPeerUp:
		r.attach(ctx, ev.node, attachSettle)
		r.confirmPeer(ctx, ev.node)
	case evResume:
		delete(r.confirming, ev.node)
		if r.reg.peerIsUp(ev.node) { // not gone again meanwhile
			r.pausePeer(ev.node, false, now)
		}
	case evPeerDown:
		r.pausePeer(ev.node, true, now)
	case evAttach:
		r.addPeerPartitions(ev.node, ev.starts)
	case evCommitDone:
		r.commitDone(ev)
	case evStats:
		r.snapshotStats(false)
	}
	if ev.done != nil {
		ev.done <- err
	}
}

// apply carries out the core's actions in the order its contract asks:
// dead letters, deliveries, fetches, commits, drained. It reports whether the
// group has drained.
func (r *runner) apply(ctx context.Context) bool {
	defer func() { r.want.set(r.core.HasCredit()) }()
	for r.core.HasReady() {
		rd := r.core.Ready()
		for i := range rd.DeadLetter {
			r.deadLetter(&rd.DeadLetter[i])
		}
		for i := range rd.Deliver {
			r.deliver(&rd.Deliver[i])
		}
		for _, f := range rd.Fetch {
			r.fetch(ctx, f)
		}
		for _, c := range rd.Commit {
			if c.Partition >= partitionStride {
				r.pending[c.Partition] = c.Offset // sent to the owner with the next flush
				continue
			}
			if err := r.log.Offsets().Commit(r.consumer, c.Partition, c.Offset); err != nil {
				r.logger.Error("commit offset", "partition", c.Partition, "err", err)
			}
			r.dirty = true
		}
		if rd.Drained {
			return true
		}
	}
	return false
}

// syncBudget tells the node's read-ahead budget what the group holds and
// gives the core its grant. Called before each apply, so a fetch is sized
// by the latest grant; a group waiting for budget that others free is
// woken by its next event at the latest (the stats tick, every second).
func (r *runner) syncBudget() {
	b := r.reg.budget
	if b == nil {
		return
	}
	grant := int(b.Report(r.gid, int64(r.core.Cost(RecordCost, ReleasedCost))))
	if grant != r.grant {
		r.grant = grant
		r.core.SetBudget(grant, RecordCost)
	}
}

// owner returns the node and local partition of a core partition ID.
func (r *runner) owner(partition int) (string, int) {
	return r.reg.nodes.name(partition / partitionStride), partition % partitionStride
}

func (r *runner) deliver(d *queue.Delivery) {
	now := time.Now()
	m, ok := r.members[d.Member]
	if ok && r.dropped(&d.Msg) {
		// Retention removed it (full_policy drop_oldest) after it was read
		// and before it was finished (an upstream down, a slow member): it
		// is gone, counted in the partition's dropped records, and
		// delivering it again can never succeed: it is finished.
		_ = r.core.Ack(d.Member, d.Msg.Ref(), d.Deliveries, now)
		return
	}
	rec, raw := r.record(&d.Msg)
	if !ok || rec == nil {
		// A member that left between the decision and now, or a record that
		// no longer decodes (checked at read, so not expected): hand it back.
		_ = r.core.Nak(d.Member, d.Msg.Ref(), d.Deliveries, 0, now)
		return
	}
	node, part := r.owner(d.Msg.Partition)
	maybe := d.Deliveries == 1 && d.Msg.Offset <= r.suspect[d.Msg.Partition]
	r.dv = Delivery{Record: rec, Raw: raw, Node: node, Partition: part, Offset: d.Msg.Offset, Deliveries: d.Deliveries,
		MaybeDelivered: maybe,
		Ack:            AckHandle{Group: r.gid, Member: d.Member, Partition: d.Msg.Partition, Offset: d.Msg.Offset, Deliveries: d.Deliveries}}
	r.high[d.Msg.Partition] = max(r.high[d.Msg.Partition], d.Msg.Offset)
	if maybe {
		r.reg.counters.maybeDelivered.Add(1)
	}
	if !m.Deliver(&r.dv) {
		// The connection cannot take it (slow or closing): the member is
		// treated as failed, so everything it holds goes to others.
		r.logger.Debug("member refused a delivery: removed", "member", string(d.Member))
		delete(r.members, d.Member)
		_ = r.core.RemoveMember(d.Member, now)
		r.reg.counters.refusedDeliveries.Add(1)
		return
	}
	if _, remote := m.(*remoteMember); remote {
		r.forwards++
	}
	if d.Deliveries == 1 {
		r.latency.Observe(time.Duration(now.UnixNano() - rec.Time))
	}
}

// suspectUpTo flags partition's records up to offset as possibly delivered
// before this run.
func (r *runner) suspectUpTo(partition int, offset uint64) {
	if offset > r.suspect[partition] {
		r.suspect[partition] = offset
		r.high[partition] = max(r.high[partition], offset)
	}
}

// recordDrained notes in the offset store, on a standalone node, that the
// group stopped with everything that may have been delivered committed, so
// the next run flags nothing as possibly delivered before. In a cluster
// another node's leader may deliver this node's partitions, so every run
// flags what is past the commits.
func (r *runner) recordDrained() {
	if r.reg.clustered() {
		return
	}
	committed := map[int]uint64{}
	for _, p := range r.core.Stats().Partitions {
		committed[p.Partition] = p.Committed
	}
	for p, h := range r.high {
		if committed[p] < h {
			return
		}
	}
	r.log.Offsets().SetDrained(r.consumer, true)
	r.dirty = true
}

// dropped reports whether m is to be read again from the local log and
// retention has removed it.
func (r *runner) dropped(m *queue.Msg) bool {
	if m.Body != nil || m.Data != nil || m.Partition >= partitionStride {
		return false
	}
	return m.Offset < r.log.First(m.Partition)
}

// record returns the decoded record of m and its encoding: the one decoded
// when it was read (Body), or, for a message without one, decoded now into
// a scratch record; a message the core released after its first delivery
// (no Data) is read again from the local log. Nil when it does not decode
// or is no longer stored.
func (r *runner) record(m *queue.Msg) (*wal.Record, []byte) {
	if rec, ok := m.Body.(*wal.Record); ok {
		return rec, m.Data
	}
	raw := m.Data
	if raw == nil && m.Partition < partitionStride {
		b, err := r.log.Read(m.Partition, m.Offset, 1, 1)
		if err != nil || len(b.Entries) == 0 || b.Entries[0].Offset != m.Offset {
			r.logger.Warn("record to deliver again not found in the log", "partition", m.Partition, "offset", m.Offset, "err", err)
			return nil, nil
		}
		r.reg.counters.rereads.Add(1)
		r.rec = b.Entries[0].Record
		return &r.rec, b.Entries[0].Raw
	}
	if wal.DecodeRecord(raw, &r.rec) != nil {
		return nil, nil
	}
	return &r.rec, raw
}

func (r *runner) deadLetter(dl *queue.DeadLetter) {
	rec, raw := r.record(&dl.Msg)
	if rec == nil {
		return
	}
	node, part := r.owner(dl.Msg.Partition)
	d := Delivery{Record: rec, Raw: raw, Node: node, Partition: part, Offset: dl.Msg.Offset, Deliveries: dl.Deliveries}
	if r.reg.cfg.DeadLetters != nil {
		r.reg.cfg.DeadLetters(r.key.Queue, &d, dl.Reason.String())
	}
	if r.reg.clustered() {
		// The operator's dead-letter subscriber may be on any node.
		r.reg.cfg.Peers.DeadLetterAll(r.key, &d, dl.Reason.String())
	}
	r.logger.Warn("message dead-lettered", "device", rec.Device, "seq", rec.Seq, "node", node,
		"partition", part, "offset", dl.Msg.Offset, "reason", dl.Reason.String(), "deliveries", dl.Deliveries)
}

func (r *runner) fetch(ctx context.Context, f queue.Fetch) {
	if f.Refetch {
		node, local := r.owner(f.Partition)
		go r.refetch(ctx, f, node, local)
		return
	}
	if f.Partition >= partitionStride {
		r.fetchRemote(ctx, f)
		return
	}
	if f.End {
		// deliver: new — start after what is stored now.
		r.results <- fetchResult{partition: f.Partition, next: r.log.Durable(f.Partition) + 1}
		return
	}
	fe, ok := r.fetchers[f.Partition]
	if !ok {
		fe = newFetcher(r.log, f.Partition, r.results, r.want, r.logger)
		r.fetchers[f.Partition] = fe
		go fe.run(ctx)
	}
	fe.requests <- f
}

// flushOffsetsLazy writes the commits without waiting for their fsync (the
// offset store syncs them within lazy_sync): nobody waits on a periodic
// flush, and a lost commit only means a redelivery.
func (r *runner) flushOffsetsLazy() {
	if !r.dirty {
		return
	}
	if err := r.log.Offsets().FlushLazy(); err != nil {
		r.logger.Error("flush offsets", "err", err)
		return
	}
	r.dirty = false
}

func (r *runner) flushOffsets() {
	if !r.dirty {
		return
	}
	if err := r.log.Offsets().Flush(); err != nil {
		r.logger.Error("flush offsets", "err", err)
		return
	}
	r.dirty = false
}

// snapshotStats refreshes the stats; tick: the once-a-second refresh, which
// also moves the recent-latency window on.
func (r *runner) snapshotStats(tick bool) {
	// Durable offsets first: a record that becomes durable after this
	// read and is committed before Stats reads the core counts as no lag.
	local := make([]uint64, r.log.NumPartitions())
	for i := range local {
		local[i] = r.log.Durable(i)
	}
	s := r.core.Stats()
	durable := make(map[int]uint64, len(s.Partitions))
	for _, p := range s.Partitions {
		node, part := r.owner(p.Partition)
		if r.reg.clustered() && node != r.reg.cfg.Node {
			durable[p.Partition] = r.durable[p.Partition] // the owner's, as last heard
		} else if part < len(local) {
			durable[p.Partition] = local[part]
		}
	}
	lat := r.latency.Snapshot()
	r.statsMu.Lock()
	recent := r.stats.RecentLatency
	r.statsMu.Unlock()
	if tick || recent.Counts == nil {
		recent = r.recent.Push(lat)
	}
	var parts map[int]PartitionRef
	if r.reg.clustered() {
		parts = make(map[int]PartitionRef, len(s.Partitions))
		for _, p := range s.Partitions {
			node, local := r.owner(p.Partition)
			parts[p.Partition] = PartitionRef{Node: node, Partition: local, Durable: r.durable[p.Partition]}
		}
	}
	r.statsMu.Lock()
	r.stats.Core = s
	r.stats.Latency = lat
	r.stats.RecentLatency = recent
	r.stats.Durable = durable
	r.stats.Partitions = parts
	r.stats.Forwards = r.forwards
	r.statsMu.Unlock()
}

// refreshStats asks the runner for a snapshot of now and waits for it, at
// most wait (a busy or stopped group keeps its last one).
func (r *runner) refreshStats(wait time.Duration) {
	ev := event{kind: evStats, done: make(chan error, 1)}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r.events <- ev:
	case <-r.done:
		return
	case <-t.C:
		return
	}
	select {
	case <-ev.done:
	case <-r.done:
	case <-t.C:
	}
}

// send queues an event, waiting while the group is busy; it gives up when
// the group has stopped.
func (r *runner) send(ev event) error {
	select {
	case r.events <- ev:
	case <-r.done:
		return ErrGroupStopped
	}
	if ev.done == nil {
		return nil
	}
	select {
	case err := <-ev.done:
		return err
	case <-r.done:
		return ErrGroupStopped
	}
}

// halt stops the runner at once (no drain).
func (r *runner) halt() { r.stopOnce.Do(func() { close(r.stop) }) }

// waitStopped waits for a draining runner; the core emits Drained at its
// deadline, this only guards a runner stuck on a full event queue.
func (r *runner) waitStopped(deadline time.Time) {
	select {
	case <-r.done:
	case <-time.After(time.Until(deadline) + remoteCommitTimeout + time.Second):
		r.halt()
		<-r.done
	}
}

// errStopped is returned to goroutines of a runner that has ended.
var errStopped = errors.New("groups: runner stopped")

// post hands an event from one of the runner's goroutines to the runner.
func (r *runner) post(ctx context.Context, ev event) error {
	select {
	case r.events <- ev:
		return nil
	case <-ctx.Done():
		return errStopped
	case <-r.done:
		return errStopped
	}
}

func newRand() *rand.PCG {
	return rand.NewPCG(rand.Uint64(), rand.Uint64())
}
