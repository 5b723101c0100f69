package dispatch

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

// event is an input for a group's goroutine.
type event struct {
	kind       eventKind
	member     queue.MemberID
	m          Member
	credit     int
	tok        ackToken
	ack        AckKind
	delay      time.Duration
	done       chan error // answer for the sender; nil: nobody waits
	drainUntil time.Time
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

	builder  deliveryBuilder
	rec      wal.Record
	forwards uint64

	statsMu sync.Mutex
	stats   runnerStats

	latency *hist.Histogram
	dirty   bool // local commits since the last offset flush
}

type runnerStats struct {
	Core       queue.Stats
	Latency    hist.Snapshot
	Partitions map[int]PartitionRef
	Forwards   uint64
}

const eventQueue = 4096

// remoteCommitTimeout bounds one commit round trip to a peer.
const remoteCommitTimeout = 5 * time.Second

// CommitInterval is how often a running group makes its commits durable
// and sends those of other nodes' partitions to them (only when there are
// new ones). A crash redelivers at most what was finished since.
const CommitInterval = 200 * time.Millisecond

func (r *runner) run(peers []string) {
	defer r.reg.runnerStopped(r)
	defer close(r.done)
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
				r.durable[res.partition] = res.durable
			}
			answer := r.core.Fetched
			if res.refetch {
				answer = r.core.Refetched
			}
			if err := answer(res.partition, res.msgs, res.next, time.Now()); err != nil {
				r.logger.Error("fetch answer refused", "partition", res.partition, "err", err)
			}
		case <-timer.C:
			_ = r.core.Tick(time.Now())
		case <-flush.C:
			r.flushOffsets()
			r.commitRemote(ctx)
		case <-stats.C:
			r.snapshotStats()
		case <-r.stop:
			r.flushOffsets()
			return
		}
		if r.apply(ctx) {
			r.flushOffsets()
			r.finalRemoteCommits()
			r.snapshotStats()
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
		ref := queue.Ref{Partition: ev.tok.partition, Offset: ev.tok.offset}
		id := queue.MemberID(ev.tok.member)
		switch ev.ack {
		case AckDone:
			err = r.core.Ack(id, ref, ev.tok.deliveries, now)
		case AckNak:
			err = r.core.Nak(id, ref, ev.tok.deliveries, ev.delay, now)
		case AckInProgress:
			err = r.core.InProgress(id, ref, ev.tok.deliveries, now)
		case AckTerm:
			err = r.core.Term(id, ref, ev.tok.deliveries, now)
		}
	case evDrain:
		err = r.core.Drain(ev.drainUntil, now)
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
	}
	if ev.done != nil {
		ev.done <- err
	}
}

// apply carries out the core's actions in the order its contract asks:
// dead letters, deliveries, fetches, commits, drained. It reports whether the
// group has drained.
func (r *runner) apply(ctx context.Context) bool {
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

// owner returns the node and local partition of a core partition ID.
func (r *runner) owner(partition int) (string, int) {
	return r.reg.nodes.name(partition / partitionStride), partition % partitionStride
}

func (r *runner) deliver(d *queue.Delivery) {
	now := time.Now()
	m, ok := r.members[d.Member]
	if !ok || wal.DecodeRecord(d.Msg.Data, &r.rec) != nil {
		// A member that left between the decision and now, or a record that
		// no longer decodes (checked at read, so not expected): hand it back.
		_ = r.core.Nak(d.Member, d.Msg.Ref(), d.Deliveries, 0, now)
		return
	}
	node, part := r.owner(d.Msg.Partition)
	r.builder.reply = appendAckSubject(r.builder.reply[:0], r.gid, string(d.Member), d.Msg.Partition, d.Msg.Offset, d.Deliveries)
	dv := r.builder.build(&r.rec, node, part, d.Msg.Offset, d.Deliveries, nil)
	if !m.Deliver(dv) {
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
		r.latency.Observe(time.Duration(now.UnixNano() - r.rec.Time))
	}
}

func (r *runner) deadLetter(dl *queue.DeadLetter) {
	if wal.DecodeRecord(dl.Msg.Data, &r.rec) != nil {
		return
	}
	node, part := r.owner(dl.Msg.Partition)
	r.builder.reply = r.builder.reply[:0]
	extra := []wal.Header{{Key: HeaderReason, Value: dl.Reason.String()}, {Key: HeaderGroup, Value: r.key.Queue}}
	dv := r.builder.build(&r.rec, node, part, dl.Msg.Offset, dl.Deliveries, extra)
	if r.reg.publish != nil {
		r.reg.publish(DLQPrefix+r.key.Queue, dv.Header, dv.Payload)
	}
	if r.reg.clustered() {
		// The operator's dead-letter subscriber may be on any node.
		r.reg.cfg.Peers.PublishAll(DLQPrefix+r.key.Queue, dv.Header, dv.Payload)
	}
	r.logger.Warn("message dead-lettered", "device", r.rec.Device, "seq", r.rec.Seq, "node", node,
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
		fe = newFetcher(r.log, f.Partition, r.results, r.logger)
		r.fetchers[f.Partition] = fe
		go fe.run(ctx)
	}
	fe.requests <- f
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

func (r *runner) snapshotStats() {
	s := r.core.Stats()
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
	r.stats.Latency = r.latency.Snapshot()
	r.stats.Partitions = parts
	r.stats.Forwards = r.forwards
	r.statsMu.Unlock()
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
var errStopped = errors.New("dispatch: runner stopped")

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
