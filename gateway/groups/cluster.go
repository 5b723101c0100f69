package groups

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"edgeq/gateway/queue"
	"edgeq/wal"
)

// Delivery across nodes. In a cluster each queue group is delivered by one
// node, its leader, chosen outside this package (the node's elector calls
// Lead and StepDown). The leader's runner reads every node's partitions —
// its own directly, the others' through Peers.Fetch — and delivers to every
// node's members — its own directly, the others' through Peers.Forward. The
// member's node relays the worker's acknowledgement back (Peers.RelayAck),
// and commits go to each partition's owner (Peers.Commit). Each node keeps
// the members of every node (MEMBERS messages, RemoteMembers), so a new
// leader knows them all at once.
//
// In a group's core, the partition of node slot s and local partition p
// has the ID s*partitionStride + p; slot 0 is this node. Ack subjects carry
// these IDs, headers carry the owner's node and partition.

// Peers is what the registry needs of the cluster. The node's cluster layer
// implements it; every method is safe for concurrent use.
type Peers interface {
	// Position asks node where group key starts in each of its partitions:
	// the next offset to read per partition, the owner recording a start
	// for a group new to it (deliverAll: its first record, else after its
	// last). It waits for the answer or ctx.
	Position(ctx context.Context, node string, key GroupKey, deliverAll bool) ([]uint64, error)
	// Fetch reads one of node's partitions (long poll: the owner may hold
	// the request until records are durable, and answer with none). It
	// waits for the answer or ctx. The batch's Raw slices belong to the
	// caller.
	Fetch(ctx context.Context, node string, key GroupKey, req RemoteFetch) (RemoteBatch, error)
	// Commit stores committed offsets of node's partitions at node. It waits
	// for node's confirmation or ctx; with sync the owner confirms only once
	// they are durable (otherwise it makes them durable within CommitInterval).
	Commit(ctx context.Context, node string, key GroupKey, offsets []PartitionOffset, sync bool) error
	// Forward queues a delivery for member on node without waiting; false
	// when it cannot (node unreachable or too far behind). d is only valid
	// during the call; its Raw record is what travels, with where it is
	// stored and its AckHandle.
	Forward(node string, key GroupKey, member MemberID, d *Delivery) bool
	// RelayAck queues an acknowledgement for the leader on node; false when
	// it cannot.
	RelayAck(node string, a Ack) bool
	// MembersChanged says that this node's members of key changed, or that
	// key is new here: the cluster layer tells every peer.
	MembersChanged(key GroupKey)
	// DeadLetterAll hands a dead letter to every peer (whose
	// Registry.DeadLettered passes it to its DeadLetters), since the
	// operator's subscriber may be on any node.
	DeadLetterAll(key GroupKey, d *Delivery, reason string)
}

// RemoteFetch asks for records of a remote partition (see queue.Fetch).
type RemoteFetch struct {
	Partition int
	From      uint64
	MaxMsgs   int
	MaxBytes  int
}

// RemoteBatch answers a RemoteFetch: records in offset order, the next
// offset to read, and the owner's durable offset.
type RemoteBatch struct {
	Next    uint64
	Durable uint64
	Records []RemoteRecord
}

// RemoteRecord is one stored record, raw as the owner keeps it.
type RemoteRecord struct {
	Offset uint64
	Raw    []byte
}

// PartitionOffset is a committed offset of one partition.
type PartitionOffset struct {
	Partition int
	Offset    uint64
}

// RemoteMember is a member of another node, as that node reports it.
type RemoteMember struct {
	ID     MemberID
	Credit int
}

// partitionStride separates the partition IDs of node slots; a log has at
// most 1024 + 64 partitions.
const partitionStride = 2048

// nodeTable gives each node a slot for the process's lifetime; slot 0 is
// this node. It is guarded by Registry.mu, except names, which runners read
// without the lock.
type nodeTable struct {
	slot  map[string]int
	names atomic.Pointer[[]string] // copy on write
	parts map[string]int           // partitions of the peers that are up; bound: MaxPeers
}

func (t *nodeTable) init(self string, partitions int) {
	t.slot = map[string]int{self: 0}
	t.names.Store(&[]string{self})
	t.parts = map[string]int{self: partitions}
}

// slotOf returns node's slot, giving it one if it has none; -1 when the
// table is full.
func (t *nodeTable) slotOf(node string, limit int) int {
	if s, ok := t.slot[node]; ok {
		return s
	}
	old := *t.names.Load()
	if len(old) > limit {
		return -1
	}
	names := append(append([]string(nil), old...), node)
	t.slot[node] = len(old)
	t.names.Store(&names)
	return len(old)
}

// name returns the node of a slot ("" if unknown).
func (t *nodeTable) name(slot int) string {
	names := *t.names.Load()
	if slot < 0 || slot >= len(names) {
		return ""
	}
	return names[slot]
}

func (t *nodeTable) upNodes() []string {
	out := make([]string, 0, len(t.parts))
	for n := range t.parts {
		if t.slot[n] != 0 {
			out = append(out, n)
		}
	}
	return out
}

// Lead makes this node deliver group key (cluster mode): its runner starts
// from the committed offsets of every node.
func (r *Registry) Lead(key GroupKey) error {
	r.mu.Lock()
	g, created, err := r.ensureGroup(GroupConfig{Key: key, Core: r.cfg.Defaults})
	if err != nil {
		r.mu.Unlock()
		return err
	}
	g.leading = true
	if g.run == nil {
		r.startRunner(g)
	}
	// A runner still stopping from an earlier StepDown: runnerStopped
	// starts the new one.
	r.mu.Unlock()
	if created {
		r.groupCreated(key)
	}
	return nil
}

// StepDown stops delivering group key here: the runner drains until
// deadline, then stops. handOver says why: a safe hand-over (the next
// leader waits for it), where the runner stops reading, delivers what is
// unfinished below what it has delivered so the final commits cover every
// delivery (queue.Group.Drain), waits for in-flight acknowledgements and
// commits at every owner; or a newer leader that already exists, where it
// delivers nothing more (queue.Group.Withdraw: owners that have seen the
// newer leader refuse the commits; waiting still keeps a device from being
// in two workers' hands where it can, and a new runner on this node starts
// only after it). The returned channel is closed once the runner has
// stopped.
func (r *Registry) StepDown(key GroupKey, handOver bool, deadline time.Time) <-chan struct{} {
	r.mu.Lock()
	g := r.groups[key]
	var run *runner
	if g != nil {
		g.leading = false
		run = g.run
	}
	r.mu.Unlock()
	if run == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	go func() {
		ev := event{kind: evDrain, eventExtra: &eventExtra{drainUntil: deadline, withdraw: !handOver}, done: make(chan error, 1)}
		if err := run.send(ev); err != nil && !errors.Is(err, ErrGroupStopped) {
			r.logger.Warn("drain on stepping down", "group", key.String(), "hand_over", handOver, "err", err)
		}
		run.waitStopped(deadline)
	}()
	return run.done
}

// PeerUp tells the registry that node is reachable with partitions
// partitions: groups delivered here start reading them.
func (r *Registry) PeerUp(node string, partitions int) {
	r.mu.Lock()
	if len(r.nodes.parts) > r.cfg.MaxPeers || r.nodes.slotOf(node, r.cfg.MaxPeers) < 0 {
		r.mu.Unlock()
		r.logger.Warn("too many peers: partitions not read", "node", node)
		return
	}
	r.nodes.parts[node] = partitions
	runs := r.runners()
	r.mu.Unlock()
	for _, run := range runs {
		_ = run.send(event{kind: evPeerUp, eventExtra: &eventExtra{node: node}})
	}
}

// PeerDown tells the registry that node is gone: its members leave every
// group (their messages go to others); its partitions pause until it is back.
func (r *Registry) PeerDown(node string) {
	r.mu.Lock()
	delete(r.nodes.parts, node)
	type leave struct {
		run *runner
		ids []queue.MemberID
	}
	var leaves []leave
	for _, g := range r.groups {
		ms := g.remote[node]
		if len(ms) == 0 {
			continue
		}
		delete(g.remote, node)
		if g.members() == 0 {
			g.lastEmpty = time.Now()
		}
		if g.run != nil {
			l := leave{run: g.run}
			for id := range ms {
				l.ids = append(l.ids, id)
			}
			leaves = append(leaves, l)
		}
	}
	runs := r.runners()
	r.mu.Unlock()
	for _, run := range runs {
		_ = run.send(event{kind: evPeerDown, eventExtra: &eventExtra{node: node}})
	}
	for _, l := range leaves {
		for _, id := range l.ids {
			_ = l.run.send(event{kind: evLeave, member: id})
		}
	}
}

// partitionBase is the core partition ID of node's partition 0 (its slot
// times partitionStride), giving node a slot if it has none; -1 when the
// node table is full.
func (r *Registry) partitionBase(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot := r.nodes.slotOf(node, r.cfg.MaxPeers)
	if slot < 0 {
		return -1
	}
	return slot * partitionStride
}

// peerIsUp reports whether node is reachable now.
func (r *Registry) peerIsUp(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, up := r.nodes.parts[node]
	return up
}

func (r *Registry) runners() []*runner {
	runs := make([]*runner, 0, len(r.byID))
	for _, run := range r.byID {
		runs = append(runs, run)
	}
	return runs
}

// RemoteMembers replaces node's members of group key with members (a MEMBERS
// message). A group this node did not know is created, starting by
// deliverAll; declared marks it as declared on that node.
func (r *Registry) RemoteMembers(node string, key GroupKey, deliverAll, declared bool, members []RemoteMember) error {
	cc := r.cfg.Defaults
	if deliverAll {
		cc.Deliver = queue.DeliverAll
	}
	r.mu.Lock()
	g, created, err := r.ensureGroup(GroupConfig{Key: key, Core: cc})
	if err != nil {
		r.mu.Unlock()
		return err
	}
	if declared {
		if g.declaredBy == nil {
			g.declaredBy = map[string]bool{}
		}
		g.declaredBy[node] = true
	} else {
		delete(g.declaredBy, node)
	}
	if len(members) > g.cfg.Core.MaxMembers {
		r.logger.Warn("peer lists more members than a group takes: the rest are left out", "node", node,
			"group", key.String(), "members", len(members), "max", g.cfg.Core.MaxMembers)
		members = members[:g.cfg.Core.MaxMembers]
	}
	old := g.remote[node]
	next := make(map[queue.MemberID]int, len(members))
	var evs []event
	for _, m := range members {
		next[m.ID] = m.Credit
		// Every listed member, not only new ones: the runner may have
		// dropped one whose forward failed (a join of a present member only
		// sets its credit).
		evs = append(evs, event{kind: evJoin, member: m.ID, eventExtra: &eventExtra{m: r.remoteMember(node, key, m.ID)}, credit: m.Credit})
	}
	for id := range old {
		if _, ok := next[id]; !ok {
			evs = append(evs, event{kind: evLeave, member: id})
		}
	}
	if len(next) == 0 {
		delete(g.remote, node)
	} else {
		g.remote[node] = next
	}
	if g.members() == 0 {
		if g.lastEmpty.IsZero() {
			g.lastEmpty = time.Now()
		}
	} else {
		g.lastEmpty = time.Time{}
	}
	run := g.run
	r.mu.Unlock()
	if created {
		r.groupCreated(key)
	}
	if run != nil {
		for _, ev := range evs {
			_ = run.send(ev) // not waiting: this runs on a peer connection's reader
		}
	}
	return nil
}

// LocalMembers lists this node's members of key, for a MEMBERS message;
// ok is false when the group is unknown.
func (r *Registry) LocalMembers(key GroupKey) (members []RemoteMember, deliverAll, declared, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[key]
	if g == nil {
		return nil, false, false, false
	}
	for id, lm := range g.local {
		credit := lm.credit
		if r.quiescing {
			credit = 0 // stopping: the leaders forward nothing more (held.go)
		}
		members = append(members, RemoteMember{ID: id, Credit: credit})
	}
	return members, g.cfg.Core.Deliver == queue.DeliverAll, g.cfg.Declared, true
}

// Groups lists the groups this node knows.
func (r *Registry) Groups() []GroupKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]GroupKey, 0, len(r.groups))
	for k := range r.groups {
		out = append(out, k)
	}
	return out
}

// Forwarded hands a delivery that node's leader forwarded to one of this
// node's members; d.Record is decoded from d.Raw by the caller. When the
// member is gone or cannot take it, the leader is told (a "gone"
// acknowledgement), so the member's messages go to another member.
func (r *Registry) Forwarded(from string, key GroupKey, d *Delivery) {
	r.counters.forwardsIn.Add(1)
	gid := d.Ack.Group
	r.mu.Lock()
	var m Member
	if g := r.groups[key]; g != nil {
		if lm := g.local[d.Ack.Member]; lm != nil {
			m = lm.m
		}
		if g.fwd[0].gid != gid {
			g.fwd[1], g.fwd[0] = g.fwd[0], forwarder{gid: gid, node: from}
		}
	}
	r.mu.Unlock()
	if m != nil {
		r.held.add(d.Ack) // before the member can answer
		if m.Deliver(d) {
			return
		}
		r.held.answered(d.Ack)
	}
	r.counters.forwardsRefused.Add(1)
	r.cfg.Peers.RelayAck(from, Ack{Handle: d.Ack, Kind: ackGone})
}

// RelayedAck handles an acknowledgement another node relayed for a delivery
// this node made. It is never relayed further; "gone" is accepted only here.
func (r *Registry) RelayedAck(a Ack) error {
	if (a.Kind < AckDone || a.Kind > AckTerm) && a.Kind != ackGone {
		r.counters.badAcks.Add(1)
		return fmt.Errorf("%w: kind %d", ErrBadAck, a.Kind)
	}
	return r.ack(a, false)
}

// DeadLettered passes a dead letter another node's leader made to this
// node's DeadLetters.
func (r *Registry) DeadLettered(key GroupKey, d *Delivery, reason string) {
	if r.cfg.DeadLetters != nil {
		r.cfg.DeadLetters(key.Queue, d, reason)
	}
}

// ServePosition answers a leader's POSITION for key: the next offset per
// local partition, after recording a start if the group is new here.
//
// Another node's leader reads this node's partitions from now on, so the
// group is no longer fresh here: should this node lead it later (a
// failover), what is past the commits may have been delivered by that
// leader, and its first deliveries say so.
func (r *Registry) ServePosition(key GroupKey, deliverAll bool) ([]uint64, error) {
	cc := r.cfg.Defaults
	if deliverAll {
		cc.Deliver = queue.DeliverAll
	}
	r.mu.Lock()
	g, created, err := r.ensureGroup(GroupConfig{Key: key, Core: cc})
	if err == nil {
		g.fresh = false
		_, err = r.recordStart(g)
	}
	r.mu.Unlock()
	if created {
		r.groupCreated(key)
	}
	if err != nil {
		return nil, err
	}
	next := make([]uint64, r.log.NumPartitions())
	for p := range next {
		off, _ := r.log.Offsets().Get(g.consumer, p)
		next[p] = off + 1
	}
	return next, nil
}

// ServeCommit stores a remote leader's commits of local partitions: durable
// at once with sync, else with the next FlushOffsets.
func (r *Registry) ServeCommit(key GroupKey, offsets []PartitionOffset, sync bool) error {
	consumer := key.consumerName()
	for _, o := range offsets {
		if o.Partition < 0 || o.Partition >= r.log.NumPartitions() {
			return fmt.Errorf("groups: commit for group %s: no partition %d", key, o.Partition)
		}
		if err := r.log.Offsets().Commit(consumer, o.Partition, o.Offset); err != nil {
			return err
		}
	}
	if !sync {
		return nil
	}
	return r.log.Offsets().Flush()
}

// FlushOffsets makes the committed offsets durable (a no-op when nothing
// changed); the node calls it every second for the commits of other nodes'
// leaders.
func (r *Registry) FlushOffsets() error { return r.log.Offsets().Flush() }

// ReadPartition serves a remote leader's FETCH of a local partition: records
// from offset from on, waiting up to wait for durable ones.
func (r *Registry) ReadPartition(ctx context.Context, partition int, from uint64, maxMsgs, maxBytes int, wait time.Duration) (wal.Batch, error) {
	if partition < 0 || partition >= r.log.NumPartitions() {
		return wal.Batch{}, fmt.Errorf("groups: fetch: no partition %d", partition)
	}
	if from == 0 || maxMsgs < 1 {
		return wal.Batch{}, fmt.Errorf("groups: fetch: bad request (from %d, max %d)", from, maxMsgs)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// A peer leader's fetch: its members' credit is not known here, so it
	// counts as wanted.
	return readWhenDurable(ctx, r.log, partition, from, maxMsgs, maxBytes, nil)
}

// Durable is the durable offset of a local partition.
func (r *Registry) Durable(partition int) uint64 {
	if partition < 0 || partition >= r.log.NumPartitions() {
		return 0
	}
	return r.log.Durable(partition)
}
