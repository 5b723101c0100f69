package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"edgeq/discovery/election"
	"edgeq/gateway/groups"
	"edgeq/wal"
)

// peerLink carries the queue groups' data path over the peer connections:
// it is the registry's groups.Peers (requests to other nodes, with this
// node's epoch as their leader) and serves the same requests from other
// nodes (fenced by the elector) — positions, fetches, commits, forwarded
// deliveries, relayed acknowledgements and member lists.
type peerLink struct {
	mgr     *Manager
	elector *Elector
	reg     *groups.Registry
	logger  *slog.Logger
	// fetchWait is how long an owner holds a fetch with nothing new.
	fetchWait time.Duration
	// requestSlack is added to a request's own time for the round trip.
	requestSlack time.Duration

	mu      sync.Mutex
	leading map[string]election.Epoch // groups delivered here, until their runner stopped; bound: groups
	pending map[uint64]*request       // requests waiting for an answer; bound: runners × partitions + commits
	serving map[string]*peerServing   // per peer: its requests being served here; bound: MaxPeers
	nextID  atomic.Uint64

	// Member lists to send: dirty groups go to every peer, new peers get
	// every group. One goroutine sends, so a Join never waits for the network.
	syncMu     sync.Mutex
	dirty      map[groups.GroupKey]bool // bound: groups
	newPeers   map[string]bool          // bound: MaxPeers
	syncWake   chan struct{}
	bufs       sync.Pool
	fencedReqs atomic.Uint64
	removed    tombstones // groups deleted lately (remove.go)
}

type request struct {
	node   string
	answer chan []byte // cap 1: the body, copied
}

// peerServing bounds and cancels what a peer asked of this node.
type peerServing struct {
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{} // fetches served at once for this peer
}

// maxServedFetches bounds the fetches (and positions) one peer may have
// held here at once (one per group and partition it reads).
const maxServedFetches = 4096

// maxFetchAnswer caps the records of one FETCHED answer, so the send queue
// to a leader that reads many partitions stays small.
const maxFetchAnswer = 256 << 10

func newPeerLink(mgr *Manager, logger *slog.Logger) *peerLink {
	return &peerLink{mgr: mgr, logger: logger, fetchWait: 5 * time.Second, requestSlack: 10 * time.Second,
		leading: map[string]election.Epoch{}, pending: map[uint64]*request{}, serving: map[string]*peerServing{},
		dirty: map[groups.GroupKey]bool{}, newPeers: map[string]bool{}, syncWake: make(chan struct{}, 1),
		bufs: sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}}
}

var _ groups.Peers = (*peerLink)(nil)

// groupKey parses an election group name (GroupKey.String: filter, space, queue).
func groupKey(name string) groups.GroupKey {
	f, q, _ := strings.Cut(name, " ")
	return groups.GroupKey{Filter: f, Queue: q}
}

func wireGroup(k groups.GroupKey) GroupName {
	return GroupName{Filter: k.Filter, Queue: k.Queue}
}

func keyOf(g GroupName) groups.GroupKey {
	return groups.GroupKey{Filter: g.Filter, Queue: g.Queue}
}

// errNotLeading: a request for a group this node no longer delivers.
var errNotLeading = errors.New("cluster: this node does not lead the group")

func (p *peerLink) epoch(key groups.GroupKey) (election.Epoch, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.leading[key.String()]
	if !ok {
		return election.Epoch{}, errNotLeading
	}
	return e, nil
}

// request sends a frame whose answer carries id and waits for it.
func (p *peerLink) request(ctx context.Context, node string, id uint64, t Type, body []byte, timeout time.Duration) ([]byte, error) {
	req := &request{node: node, answer: make(chan []byte, 1)}
	p.mu.Lock()
	p.pending[id] = req
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}()
	if err := p.mgr.Send(node, t, body); err != nil {
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case b, ok := <-req.answer:
		if !ok {
			return nil, fmt.Errorf("cluster: peer %s went down", node)
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("cluster: no answer from %s within %v", node, timeout)
	}
}

// Position implements groups.Peers.
func (p *peerLink) Position(ctx context.Context, node string, key groups.GroupKey, deliverAll bool) ([]uint64, error) {
	ep, err := p.epoch(key)
	if err != nil {
		return nil, err
	}
	id := p.nextID.Add(1)
	body := AppendPositionReq(nil, &PositionReq{ID: id, Group: wireGroup(key), Epoch: ep, DeliverAll: deliverAll})
	ans, err := p.request(ctx, node, id, TypePosition, body, p.requestSlack)
	if err != nil {
		return nil, err
	}
	resp, err := DecodePositionResp(ans)
	if err != nil {
		return nil, err
	}
	if resp.Err != "" {
		return nil, fmt.Errorf("cluster: position at %s: %s", node, resp.Err)
	}
	return resp.Next, nil
}

// Fetch implements groups.Peers.
func (p *peerLink) Fetch(ctx context.Context, node string, key groups.GroupKey, f groups.RemoteFetch) (groups.RemoteBatch, error) {
	ep, err := p.epoch(key)
	if err != nil {
		return groups.RemoteBatch{}, err
	}
	id := p.nextID.Add(1)
	body := AppendFetchReq(nil, &FetchReq{ID: id, Group: wireGroup(key), Epoch: ep, Partition: f.Partition,
		From: f.From, MaxMsgs: f.MaxMsgs, MaxBytes: f.MaxBytes, WaitMillis: int(p.fetchWait / time.Millisecond)})
	ans, err := p.request(ctx, node, id, TypeFetch, body, p.fetchWait+p.requestSlack)
	if err != nil {
		return groups.RemoteBatch{}, err
	}
	resp, err := DecodeFetchResp(ans) // ans is a copy: the records may alias it
	if err != nil {
		return groups.RemoteBatch{}, err
	}
	if resp.Err != "" {
		return groups.RemoteBatch{}, fmt.Errorf("cluster: fetch at %s: %s", node, resp.Err)
	}
	return groups.RemoteBatch{Next: resp.Next, Durable: resp.Durable, Records: resp.Records}, nil
}

// Commit implements groups.Peers.
func (p *peerLink) Commit(ctx context.Context, node string, key groups.GroupKey, offsets []groups.PartitionOffset, sync bool) error {
	ep, err := p.epoch(key)
	if err != nil {
		return err
	}
	id := p.nextID.Add(1)
	req := CommitReq{ID: id, Group: wireGroup(key), Epoch: ep, Sync: sync, Offsets: make([]PartitionOffset, len(offsets))}
	for i, o := range offsets {
		req.Offsets[i] = PartitionOffset{Partition: o.Partition, Offset: o.Offset}
	}
	ans, err := p.request(ctx, node, id, TypeCommit, AppendCommitReq(nil, &req), p.requestSlack)
	if err != nil {
		return err
	}
	resp, err := DecodeCommitResp(ans)
	if err != nil {
		return err
	}
	if resp.Err != "" {
		return fmt.Errorf("cluster: commit at %s: %s", node, resp.Err)
	}
	return nil
}

// Forward implements groups.Peers: queued on the peer connection, never
// waiting (a full queue closes the connection, see Manager.Send).
func (p *peerLink) Forward(node string, key groups.GroupKey, member groups.MemberID, d *groups.Delivery) bool {
	m := forwardOf(key, d)
	m.Member = string(member)
	return p.sendPooled(node, &m)
}

// forwardOf is the FORWARD message of d (without member or reason).
func forwardOf(key groups.GroupKey, d *groups.Delivery) Forward {
	return Forward{Group: wireGroup(key), Instance: uint64(d.Ack.Group), CorePartition: uint64(d.Ack.Partition),
		Node: d.Node, Partition: uint64(d.Partition), Offset: d.Offset, Deliveries: uint64(d.Deliveries), Maybe: d.MaybeDelivered,
		Record: d.Raw}
}

func (p *peerLink) sendPooled(node string, m *Forward) bool {
	bp := p.bufs.Get().(*[]byte)
	*bp = AppendForward((*bp)[:0], m)
	err := p.mgr.Send(node, TypeForward, *bp)
	if cap(*bp) <= 64<<10 {
		p.bufs.Put(bp)
	}
	return err == nil
}

// RelayAck implements groups.Peers.
func (p *peerLink) RelayAck(node string, a groups.Ack) bool {
	h := a.Handle
	body := AppendAckRelay(nil, &AckRelay{Instance: uint64(h.Group), Member: string(h.Member),
		CorePartition: uint64(h.Partition), Offset: h.Offset, Deliveries: uint64(h.Deliveries),
		Kind: uint64(a.Kind), Delay: uint64(max(a.Delay, 0))})
	return p.mgr.Send(node, TypeAck, body) == nil
}

// DeadLetterAll implements groups.Peers: a dead letter for every peer's
// subscribers.
func (p *peerLink) DeadLetterAll(key groups.GroupKey, d *groups.Delivery, reason string) {
	m := forwardOf(key, d)
	m.Reason = reason
	body := AppendForward(nil, &m)
	for _, ps := range p.mgr.Peers() {
		_ = p.mgr.Send(ps.Node, TypeForward, body)
	}
}

// MembersChanged implements groups.Peers.
func (p *peerLink) MembersChanged(key groups.GroupKey) {
	p.syncMu.Lock()
	p.dirty[key] = true // keys are groups the registry holds: bound by max_groups
	p.syncMu.Unlock()
	p.wakeSync()
}

func (p *peerLink) wakeSync() {
	select {
	case p.syncWake <- struct{}{}:
	default:
	}
}

// runSync sends member lists: each dirty group's to every peer, every
// group's to a peer that came up.
func (p *peerLink) runSync(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.syncWake:
		}
		p.syncMu.Lock()
		dirty, fresh := p.dirty, p.newPeers
		p.dirty, p.newPeers = map[groups.GroupKey]bool{}, map[string]bool{}
		p.syncMu.Unlock()
		peers := p.mgr.Peers()
		if len(fresh) > 0 {
			for _, key := range p.reg.Groups() {
				dirty[key] = true
			}
		}
		for key := range dirty {
			ms, all, declared, ok := p.reg.LocalMembers(key)
			if !ok {
				continue
			}
			msg := Members{Group: wireGroup(key), DeliverAll: all, Declared: declared, Members: make([]MemberInfo, len(ms))}
			for i, m := range ms {
				msg.Members[i] = MemberInfo{ID: string(m.ID), Credit: m.Credit}
			}
			body := AppendMembers(nil, &msg)
			for _, ps := range peers {
				_ = p.mgr.Send(ps.Node, TypeMembers, body)
			}
		}
	}
}

// Lead is called by the elector: this node delivers the group at epoch.
func (p *peerLink) Lead(group string, epoch election.Epoch) {
	p.mu.Lock()
	p.leading[group] = epoch
	p.mu.Unlock()
	p.logger.Info("leading queue group", "group", group, "epoch", epoch.String())
	if err := p.reg.Lead(groupKey(group)); err != nil {
		p.logger.Error("lead queue group", "group", group, "err", err)
	}
}

// handOverDrain bounds the drain of a hand-over; the election's
// HandOverTimeout (5s by default) must exceed it.
const handOverDrain = 3 * time.Second

// StepDown is called by the elector: stop delivering group. A hand-over
// drains and commits at every owner before the elector hears Drained.
func (p *peerLink) StepDown(group string, epoch election.Epoch, handOver bool) {
	p.logger.Info("stepping down", "group", group, "epoch", epoch.String(), "hand_over", handOver)
	done := p.reg.StepDown(groupKey(group), handOver, time.Now().Add(handOverDrain))
	go func() {
		<-done
		p.mu.Lock()
		if p.leading[group] == epoch {
			delete(p.leading, group)
		}
		p.mu.Unlock()
		if handOver {
			p.elector.Drained(group, epoch) // outside the elector's lock
		}
	}()
}

// Leading reports whether this node delivers group.
func (p *peerLink) Leading(group string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.leading[group]
	return ok
}

// PeerUp and PeerDown come from the peer manager (after the elector). A
// peer also comes up again on a new connection that replaced another one:
// requests sent on the old one fail now (and are retried) rather than at
// their timeout.
func (p *peerLink) PeerUp(node string, info PeerInfo) {
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.failPending(node)
	if old := p.serving[node]; old != nil {
		old.cancel()
	}
	p.serving[node] = &peerServing{ctx: ctx, cancel: cancel, slots: make(chan struct{}, maxServedFetches)}
	p.mu.Unlock()
	p.reg.PeerUp(node, info.Partitions)
	p.syncMu.Lock()
	p.newPeers[node] = true
	p.syncMu.Unlock()
	p.wakeSync()
}

// PeerDown fails the requests waiting on node and ends what it asked here.
func (p *peerLink) PeerDown(node string) {
	p.mu.Lock()
	p.failPending(node)
	if s := p.serving[node]; s != nil {
		s.cancel()
		delete(p.serving, node)
	}
	p.mu.Unlock()
	p.reg.PeerDown(node)
}

// Frame handles a data-path frame from node; it runs on the connection's
// reader, so anything that may wait runs on its own goroutine.
func (p *peerLink) Frame(node string, f Frame) {
	switch f.Type {
	case TypePositioned, TypeFetched, TypeCommitted:
		p.answer(f.Body)
	case TypePosition:
		m, err := DecodePositionReq(f.Body)
		if err != nil {
			p.bad(node, f.Type, err)
			return
		}
		p.servePosition(node, m)
	case TypeFetch:
		m, err := DecodeFetchReq(f.Body)
		if err != nil {
			p.bad(node, f.Type, err)
			return
		}
		p.serveFetch(node, m)
	case TypeCommit:
		m, err := DecodeCommitReq(f.Body)
		if err != nil {
			p.bad(node, f.Type, err)
			return
		}
		// In order on the connection: a leader's final commits are stored
		// before its hand-over's DRAINED, sent after them, is read.
		p.serveCommit(node, m)
	case TypeForward:
		m, err := DecodeForward(f.Body)
		if err != nil {
			p.bad(node, f.Type, err)
			return
		}
		p.forwardIn(node, &m)
	case TypeAck:
		m, err := DecodeAckRelay(f.Body)
		if err != nil {
			p.bad(node, f.Type, err)
			return
		}
		_ = p.reg.RelayedAck(groups.Ack{Kind: groups.AckKind(m.Kind), Delay: time.Duration(m.Delay),
			Handle: groups.AckHandle{Group: int(m.Instance), Member: groups.MemberID(m.Member),
				Partition: int(m.CorePartition), Offset: m.Offset, Deliveries: int(m.Deliveries)}})
	case TypeRemoved:
		g, err := DecodeRemoved(f.Body)
		if err != nil {
			p.bad(node, f.Type, err)
			return
		}
		p.serveRemoved(node, g)
	case TypeMembers:
		m, err := DecodeMembers(f.Body)
		if err != nil {
			p.bad(node, f.Type, err)
			return
		}
		ms := make([]groups.RemoteMember, len(m.Members))
		for i, x := range m.Members {
			ms[i] = groups.RemoteMember{ID: groups.MemberID(x.ID), Credit: x.Credit}
		}
		key := keyOf(m.Group)
		if p.removed.has(key.String(), time.Now()) {
			if len(ms) == 0 {
				return // sent before the peer heard of the delete
			}
			p.removed.clear(key.String()) // a new member: the group is made anew
		}
		if err := p.reg.RemoteMembers(node, key, m.DeliverAll, m.Declared, ms); err != nil {
			p.logger.Warn("members of a peer refused", "peer", node, "group", key.String(), "err", err)
		}
	}
}

// inbound is the scratch a forwarded delivery is decoded into: the
// Delivery, like the frame it is decoded from, is valid only during the
// member's Deliver, so it is reused (pooled: frames of several peers are
// handled at once), and so is the capacity of its record's headers.
type inbound struct {
	rec wal.Record
	d   groups.Delivery
}

var inbounds = sync.Pool{New: func() any { return new(inbound) }}

// forwardIn decodes the record of a FORWARD (once on this node) and hands
// it to the member it names, or to the dead-letter subscribers.
func (p *peerLink) forwardIn(node string, m *Forward) {
	in := inbounds.Get().(*inbound)
	defer func() {
		clear(in.rec.Headers) // they alias the frame
		*in = inbound{rec: wal.Record{Headers: in.rec.Headers[:0]}}
		inbounds.Put(in)
	}()
	if err := wal.DecodeRecord(m.Record, &in.rec); err != nil {
		p.bad(node, TypeForward, err)
		return
	}
	in.d = groups.Delivery{Record: &in.rec, Raw: m.Record, Node: m.Node, Partition: int(m.Partition), Offset: m.Offset,
		Deliveries: int(m.Deliveries), MaybeDelivered: m.Maybe, Ack: groups.AckHandle{Group: int(m.Instance), Member: groups.MemberID(m.Member),
			Partition: int(m.CorePartition), Offset: m.Offset, Deliveries: int(m.Deliveries)}}
	if m.Member == "" {
		in.d.Ack = groups.AckHandle{}
		p.reg.DeadLettered(keyOf(m.Group), &in.d, m.Reason)
		return
	}
	p.reg.Forwarded(node, keyOf(m.Group), &in.d)
}

// failPending fails the requests waiting on node. Called with mu held.
func (p *peerLink) failPending(node string) {
	for id, req := range p.pending {
		if req.node == node {
			close(req.answer)
			delete(p.pending, id)
		}
	}
}

func (p *peerLink) bad(node string, t Type, err error) {
	p.logger.Warn("bad frame from peer", "peer", node, "type", t, "err", err)
}

func (p *peerLink) answer(body []byte) {
	id, ok := ResponseID(body)
	if !ok {
		return
	}
	p.mu.Lock()
	req := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if req != nil {
		req.answer <- bytes.Clone(body) // the frame's buffer is reused by the reader
	}
}

// fence checks a leader's epoch for group before its request is served; a
// group new here joins the election first.
func (p *peerLink) fence(g GroupName, epoch election.Epoch) error {
	name := keyOf(g).String()
	if p.removed.has(name, time.Now()) {
		p.fencedReqs.Add(1)
		return fmt.Errorf("cluster: queue group %s was deleted", name)
	}
	err := p.elector.Fence(name, epoch)
	if errors.Is(err, election.ErrUnknownGroup) {
		if aerr := p.elector.AddGroup(name); aerr != nil && !errors.Is(aerr, election.ErrGroupExists) {
			return aerr
		}
		err = p.elector.Fence(name, epoch)
	}
	if err != nil {
		p.fencedReqs.Add(1)
	}
	return err
}

// servePosition answers on its own goroutine (recording a new group's
// start fsyncs), within the peer's bound of requests served at once.
func (p *peerLink) servePosition(node string, m PositionReq) {
	reply := func(resp *PositionResp) {
		_ = p.mgr.Send(node, TypePositioned, AppendPositionResp(nil, resp))
	}
	p.goServe(node, func(why string) { reply(&PositionResp{ID: m.ID, Err: why}) }, func(*peerServing) {
		resp := PositionResp{ID: m.ID}
		if err := p.fence(m.Group, m.Epoch); err != nil {
			resp.Err = err.Error()
		} else if next, err := p.reg.ServePosition(keyOf(m.Group), m.DeliverAll); err != nil {
			resp.Err = err.Error()
		} else {
			resp.Next = next
		}
		reply(&resp)
	})
}

// goServe runs serve on its own goroutine within node's bound of requests
// held here at once; refuse answers a request that cannot be taken.
func (p *peerLink) goServe(node string, refuse func(why string), serve func(*peerServing)) {
	p.mu.Lock()
	s := p.serving[node]
	p.mu.Unlock()
	if s == nil {
		refuse("peer not up")
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		refuse("too many requests held")
		return
	}
	go func() {
		defer func() { <-s.slots }()
		serve(s)
	}()
}

func (p *peerLink) serveFetch(node string, m FetchReq) {
	fail := func(why string) {
		_ = p.mgr.Send(node, TypeFetched, AppendFetchResp(nil, &FetchResp{ID: m.ID, Err: why}))
	}
	p.goServe(node, fail, func(s *peerServing) {
		if err := p.fence(m.Group, m.Epoch); err != nil {
			fail(err.Error())
			return
		}
		wait := min(time.Duration(m.WaitMillis)*time.Millisecond, time.Minute)
		b, err := p.reg.ReadPartition(s.ctx, m.Partition, m.From, m.MaxMsgs, min(m.MaxBytes, maxFetchAnswer), wait)
		if err != nil {
			fail(err.Error())
			return
		}
		resp := FetchResp{ID: m.ID, Next: b.Next, Durable: p.reg.Durable(m.Partition), Records: make([]RawRecord, len(b.Entries))}
		for i, e := range b.Entries {
			resp.Records[i] = RawRecord{Offset: e.Offset, Raw: e.Raw}
		}
		_ = p.mgr.SendWait(s.ctx, node, TypeFetched, AppendFetchResp(nil, &resp))
	})
}

func (p *peerLink) serveCommit(node string, m CommitReq) {
	resp := CommitResp{ID: m.ID}
	if err := p.fence(m.Group, m.Epoch); err != nil {
		resp.Err = err.Error()
	} else {
		offs := make([]groups.PartitionOffset, len(m.Offsets))
		for i, o := range m.Offsets {
			offs[i] = groups.PartitionOffset{Partition: o.Partition, Offset: o.Offset}
		}
		if err := p.reg.ServeCommit(keyOf(m.Group), offs, m.Sync); err != nil {
			resp.Err = err.Error()
		}
	}
	_ = p.mgr.Send(node, TypeCommitted, AppendCommitResp(nil, &resp))
}
