package groups

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"time"

	"edgeq/gateway/queue"
	"edgeq/internal/backoff"
)

// The leader's side of the cluster data path: other nodes' partitions are
// positioned (attach), read (remoteFetcher) and committed through Peers;
// their members receive through remoteMember.

// remoteMember is a member on another node: a delivery is forwarded there.
type remoteMember struct {
	peers Peers
	node  string
	key   GroupKey
	id    queue.MemberID
}

func (m *remoteMember) Deliver(d *Delivery) bool { return m.peers.Forward(m.node, m.key, m.id, d) }

var _ Member = (*remoteMember)(nil)

func (r *Registry) remoteMember(node string, key GroupKey, id queue.MemberID) Member {
	return &remoteMember{peers: r.cfg.Peers, node: node, key: key, id: id}
}

// attachSettle is how long a running group waits before it reads a peer
// that came up (see attach).
const attachSettle = 500 * time.Millisecond

// peerRetry paces retries against an unreachable peer; readRetry those of
// a local read that failed.
var (
	peerRetry = backoff.Policy{Min: 100 * time.Millisecond, Max: time.Second}
	readRetry = backoff.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}
)

// retryBackoff counts the attempts of one retry loop (the zero value uses
// peerRetry; a new value starts over).
type retryBackoff struct {
	policy   *backoff.Policy
	attempts int
}

// wait sleeps before the next attempt; false when ctx ended first.
func (b *retryBackoff) wait(ctx context.Context) bool {
	p := b.policy
	if p == nil {
		p = &peerRetry
	}
	d := p.Delay(b.attempts, rand.Float64())
	b.attempts++
	return backoff.Sleep(ctx.Done(), d)
}

// attach starts reading node's partitions: it asks node for the group's
// positions (retrying while node is unreachable) and hands them to the
// runner (evAttach). Once a peer's partitions are in the core they stay:
// while the peer is away they pause, and resume when it is back.
//
// A peer that comes up while this runner delivers is positioned after
// attachSettle: the election settles first. When a network partition
// heals, the node that led alone on one side has the newer epoch; were it to
// take the other side's partitions at once, the other side's leader (not
// yet deposed) would still be delivering what it read ahead of them.
func (r *runner) attach(ctx context.Context, node string, settle time.Duration) {
	if r.attached[node] {
		return
	}
	r.attached[node] = true // being positioned
	r.positionAt(ctx, node, settle, func(starts []uint64) event {
		return event{kind: evAttach, eventExtra: &eventExtra{node: node, starts: starts}}
	})
}

// positionAt asks node for the group's positions after settle, retrying
// (paced) until it answers or the runner ends, and posts the event made of
// the answer. Both attaching a peer and confirming one that is back use it:
// the request is fenced, so it also says the peer accepts this leader.
func (r *runner) positionAt(ctx context.Context, node string, settle time.Duration, answered func([]uint64) event) {
	deliverAll := r.grp.cfg.Core.Deliver == queue.DeliverAll
	go func() {
		select {
		case <-time.After(settle):
		case <-ctx.Done():
			return
		}
		var b retryBackoff
		for {
			starts, err := r.reg.cfg.Peers.Position(ctx, node, r.key, deliverAll)
			if err == nil {
				_ = r.post(ctx, answered(starts))
				return
			}
			r.logger.Debug("position at peer", "node", node, "err", err)
			if !b.wait(ctx) {
				return
			}
		}
	}()
}

func (r *runner) addPeerPartitions(node string, starts []uint64) {
	base := r.reg.partitionBase(node)
	if base <= 0 || len(starts) > partitionStride {
		r.logger.Warn("peer partitions not read", "node", node, "partitions", len(starts))
		return
	}
	for p, next := range starts {
		if next == 0 {
			next = 1
		}
		err := r.core.AddPartition(base+p, next)
		if err != nil && !errors.Is(err, queue.ErrPartitionExists) {
			r.logger.Warn("peer partition not read", "node", node, "partition", p, "err", err)
		}
	}
	r.peerParts[node] = len(starts)
	if r.down[node] { // went away while its positions were on their way
		r.pausePeer(node, true, time.Now())
	}
	r.logger.Info("reading peer partitions", "node", node, "partitions", len(starts))
}

// confirmPeer resumes the partitions of a peer that is back once it accepts
// this leader: a fenced round trip (a position request) must succeed first.
// A peer that led the group on the other side of a network partition has a
// newer epoch and refuses, so the messages read ahead from it stay parked
// until this runner steps down.
func (r *runner) confirmPeer(ctx context.Context, node string) {
	if !r.down[node] || r.peerParts[node] == 0 || r.confirming[node] {
		return // never paused, not read yet (attach positions it), or being checked
	}
	r.confirming[node] = true
	r.positionAt(ctx, node, 0, func([]uint64) event { return event{kind: evResume, eventExtra: &eventExtra{node: node}} })
}

// pausePeer stops (or restarts) delivering the messages of node's
// partitions that are not in flight. A peer that cannot be reached may have
// elected itself on the other side of a network partition and deliver its
// own log there: the messages this runner read ahead from it must not go out
// here too (two deliveries at once, and first deliveries out of order). If
// it crashed instead, they are in its log and go out when it is back.
func (r *runner) pausePeer(node string, paused bool, now time.Time) {
	if paused {
		r.down[node] = true
	} else {
		delete(r.down, node)
	}
	n := r.peerParts[node]
	if n == 0 {
		return
	}
	base := r.reg.partitionBase(node)
	for p := 0; p < n; p++ {
		if err := r.core.Pause(base+p, paused, now); err != nil {
			r.logger.Warn("pause peer partition", "node", node, "partition", p, "err", err)
		}
	}
	if paused {
		r.logger.Info("peer unreachable: its partitions paused", "node", node)
	}
}

// remoteFetcher serves one remote partition's fetches for a group.
type remoteFetcher struct {
	r         *runner
	node      string
	base      int // partition ID of the node's partition 0
	local     int
	requests  chan queue.Fetch
	partition int
}

func (r *runner) fetchRemote(ctx context.Context, f queue.Fetch) {
	fe, ok := r.remotes[f.Partition]
	if !ok {
		node, local := r.owner(f.Partition)
		fe = &remoteFetcher{r: r, node: node, base: f.Partition - local, local: local, partition: f.Partition,
			requests: make(chan queue.Fetch, 1)}
		r.remotes[f.Partition] = fe
		go fe.run(ctx)
	}
	fe.requests <- f
}

func (f *remoteFetcher) run(ctx context.Context) {
	for {
		select {
		case req := <-f.requests:
			res, ok := f.serve(ctx, req)
			if !ok {
				return
			}
			select {
			case f.r.results <- res:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// serve asks the owner until it answers with something new (it holds each
// request until records are durable or its wait ends, so an idle group
// sends one request per wait, not a stream).
func (f *remoteFetcher) serve(ctx context.Context, req queue.Fetch) (fetchResult, bool) {
	var b retryBackoff
	from := req.From
	if req.End {
		from = 0 // not used in a cluster: positions come from the owner
	}
	for {
		batch, err := f.r.reg.cfg.Peers.Fetch(ctx, f.node, f.r.key, RemoteFetch{Partition: f.local, From: from, MaxMsgs: req.MaxMsgs, MaxBytes: req.MaxBytes})
		if err != nil {
			if ctx.Err() != nil {
				return fetchResult{}, false
			}
			f.r.logger.Debug("fetch from peer", "node", f.node, "partition", f.local, "err", err)
			if !b.wait(ctx) {
				return fetchResult{}, false
			}
			continue
		}
		b = retryBackoff{}
		if len(batch.Records) == 0 && batch.Next <= from {
			continue // the long poll ended with nothing new
		}
		msgs := remoteMsgs(f.partition, f.base, batch, func(offset uint64) { f.r.badRemote(f.node, f.local, offset) })
		return fetchResult{partition: f.partition, msgs: msgs, next: batch.Next, durable: batch.Durable}, true
	}
}

// badRemote logs a record of node's partition that does not decode.
func (r *runner) badRemote(node string, partition int, offset uint64) {
	r.logger.Warn("bad record from peer", "node", node, "partition", partition, "offset", offset)
}

// commitRemote sends the pending commits of each peer that has none on its
// way, without waiting (the answer comes back as evCommitDone).
func (r *runner) commitRemote(ctx context.Context) {
	for node, offsets := range r.takePending(true) {
		r.committing[node] = true
		go func() {
			cctx, cancel := context.WithTimeout(ctx, remoteCommitTimeout)
			err := r.reg.cfg.Peers.Commit(cctx, node, r.key, offsets, false)
			cancel()
			_ = r.post(ctx, event{kind: evCommitDone, eventExtra: &eventExtra{node: node, offsets: offsets, err: err}})
		}()
	}
}

// takePending removes the pending commits and groups them by owner (with
// skipBusy, leaving those of peers with a commit on its way).
func (r *runner) takePending(skipBusy bool) map[string][]PartitionOffset {
	if len(r.pending) == 0 {
		return nil
	}
	out := map[string][]PartitionOffset{}
	ids := make([]int, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		node, local := r.owner(id)
		if skipBusy && r.committing[node] {
			continue
		}
		out[node] = append(out[node], PartitionOffset{Partition: local, Offset: r.pending[id]})
		delete(r.pending, id)
	}
	return out
}

func (r *runner) commitDone(ev event) {
	delete(r.committing, ev.node)
	if ev.err == nil {
		r.reg.counters.remoteCommits.Add(1)
		return
	}
	r.reg.counters.remoteCommitFails.Add(1)
	r.logger.Debug("commit at peer failed", "node", ev.node, "err", ev.err)
	base := r.reg.partitionBase(ev.node)
	for _, o := range ev.offsets {
		if _, newer := r.pending[base+o.Partition]; !newer {
			r.pending[base+o.Partition] = o.Offset // again with the next flush
		}
	}
}

// finalRemoteCommits sends every pending commit and waits for the owners'
// confirmations (bounded): the next leader starts from these offsets.
func (r *runner) finalRemoteCommits() {
	byNode := r.takePending(false)
	if len(byNode) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteCommitTimeout)
	defer cancel()
	errs := make(chan error, len(byNode))
	for node, offsets := range byNode {
		go func() {
			err := r.reg.cfg.Peers.Commit(ctx, node, r.key, offsets, true)
			if err != nil {
				r.logger.Warn("final commit at peer failed", "node", node, "err", err)
			}
			errs <- err
		}()
	}
	for range byNode {
		if <-errs == nil {
			r.reg.counters.remoteCommits.Add(1)
		} else {
			r.reg.counters.remoteCommitFails.Add(1)
		}
	}
}
