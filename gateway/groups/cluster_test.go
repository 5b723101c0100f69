package groups

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"edgeq/gateway/queue"
	"edgeq/wal"
)

// memNet connects registries in one process: each node's Peers calls the
// other registries' serving side directly. It stands in for the peer
// connections (tested with real sockets in e2e) so that the data path —
// positions, long-poll fetches, forwards, relayed acks, commits at owners,
// hand-over — is tested on real logs, deterministically and fast.
type memNet struct {
	mu    sync.Mutex
	regs  map[string]*Registry
	down  map[string]bool // nodes cut off
	dead  []string        // dead letters published to peers
	fails int             // calls refused because a node was cut off
	// fenced[owner][leader]: owner refuses leader's positions, fetches and
	// commits (it has seen a newer epoch), as the elector's fence would.
	fenced map[string]map[string]bool
}

func (n *memNet) fence(owner, leader string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fenced[owner][leader] {
		return fmt.Errorf("memnet: %s refuses %s: stale epoch", owner, leader)
	}
	return nil
}

type memPeers struct {
	net  *memNet
	self string
}

func (n *memNet) peer(from, to string) (*Registry, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down[from] || n.down[to] || n.regs[to] == nil {
		n.fails++
		return nil, fmt.Errorf("memnet: %s unreachable from %s", to, from)
	}
	return n.regs[to], nil
}

func (p *memPeers) Position(ctx context.Context, node string, key GroupKey, deliverAll bool) ([]uint64, error) {
	r, err := p.net.peer(p.self, node)
	if err != nil {
		return nil, err
	}
	if err := p.net.fence(node, p.self); err != nil {
		return nil, err
	}
	return r.ServePosition(key, deliverAll)
}

func (p *memPeers) Fetch(ctx context.Context, node string, key GroupKey, req RemoteFetch) (RemoteBatch, error) {
	r, err := p.net.peer(p.self, node)
	if err != nil {
		return RemoteBatch{}, err
	}
	if err := p.net.fence(node, p.self); err != nil {
		return RemoteBatch{}, err
	}
	b, err := r.ReadPartition(ctx, req.Partition, req.From, req.MaxMsgs, req.MaxBytes, 50*time.Millisecond)
	if err != nil {
		return RemoteBatch{}, err
	}
	if _, err := p.net.peer(p.self, node); err != nil {
		return RemoteBatch{}, err // the link went down while the owner held the request
	}
	out := RemoteBatch{Next: b.Next, Durable: r.Durable(req.Partition)}
	for _, e := range b.Entries {
		out.Records = append(out.Records, RemoteRecord{Offset: e.Offset, Raw: bytes.Clone(e.Raw)})
	}
	return out, nil
}

func (p *memPeers) Commit(ctx context.Context, node string, key GroupKey, offsets []PartitionOffset, sync bool) error {
	r, err := p.net.peer(p.self, node)
	if err != nil {
		return err
	}
	return r.ServeCommit(key, offsets, sync)
}

func (p *memPeers) Forward(node string, key GroupKey, member queue.MemberID, d *Delivery) bool {
	r, err := p.net.peer(p.self, node)
	if err != nil {
		return false
	}
	// What the wire carries: the raw record, decoded again on the member's node.
	c := *d
	c.Raw = bytes.Clone(d.Raw)
	c.Record = new(wal.Record)
	if err := wal.DecodeRecord(c.Raw, c.Record); err != nil {
		panic(err)
	}
	if c.Ack.Member != member {
		panic("forward: handle names another member")
	}
	go r.Forwarded(p.self, key, &c) // the peer handles it on its own connection reader
	return true
}

func (p *memPeers) RelayAck(node string, a Ack) bool {
	r, err := p.net.peer(p.self, node)
	if err != nil {
		return false
	}
	go r.RelayedAck(a)
	return true
}

func (p *memPeers) MembersChanged(key GroupKey) {
	self := p.net.regs[p.self]
	ms, all, declared, ok := self.LocalMembers(key)
	if !ok {
		return
	}
	for node := range p.net.regs {
		if node == p.self {
			continue
		}
		if r, err := p.net.peer(p.self, node); err == nil {
			_ = r.RemoteMembers(p.self, key, all, declared, ms)
		}
	}
}

func (p *memPeers) DeadLetterAll(key GroupKey, d *Delivery, reason string) {
	p.net.mu.Lock()
	p.net.dead = append(p.net.dead, key.Queue+"/"+reason)
	p.net.mu.Unlock()
}

// clusterWorld checks what members observe across nodes: a device's
// first deliveries in order per ingesting node, never two of one device in
// flight, every message delivered.
type clusterWorld struct {
	t        testing.TB
	mu       sync.Mutex
	inFlight map[string]string // device -> member holding it
	firstSeq map[string]uint64 // node/device -> last first-delivered seq
	seen     map[string]int    // node/device/seq -> deliveries seen
	byMember map[string]int
	dupes    int
}

func newClusterWorld(t testing.TB) *clusterWorld {
	return &clusterWorld{t: t, inFlight: map[string]string{}, firstSeq: map[string]uint64{}, seen: map[string]int{}, byMember: map[string]int{}}
}

type clusterMember struct {
	id   string
	w    *clusterWorld
	reg  *Registry // the member's own node: acks go there
	wg   sync.WaitGroup
	hold time.Duration
}

func (m *clusterMember) Deliver(d *Delivery) bool {
	seq, dev, node, h := d.Record.Seq, strings.Clone(d.Record.Device), strings.Clone(d.Node), d.Ack
	m.w.enter(m.id, node, dev, seq)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		time.Sleep(m.hold)
		m.w.exit(dev)
		_ = m.reg.Ack(Ack{Handle: h, Kind: AckDone})
	}()
	return true
}

func (w *clusterWorld) enter(member, node, dev string, seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if holder, busy := w.inFlight[dev]; busy {
		w.t.Errorf("device %s: seq %d of %s delivered to %s while %s holds one", dev, seq, node, member, holder)
	}
	w.inFlight[dev] = member
	w.byMember[member]++
	nd := node + "/" + dev
	key := fmt.Sprintf("%s/%d", nd, seq)
	w.seen[key]++
	if w.seen[key] > 1 {
		w.dupes++
		return
	}
	if seq != w.firstSeq[nd]+1 {
		w.t.Errorf("%s: first delivery of seq %d after seq %d", nd, seq, w.firstSeq[nd])
	}
	w.firstSeq[nd] = seq
}

func (w *clusterWorld) exit(dev string) {
	w.mu.Lock()
	delete(w.inFlight, dev)
	w.mu.Unlock()
}

func (w *clusterWorld) delivered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

type memNode struct {
	id  string
	log *wal.Log
	reg *Registry
}

func newMemCluster(t *testing.T, cfg queue.Config, ids ...string) (*memNet, map[string]*memNode) {
	t.Helper()
	net := &memNet{regs: map[string]*Registry{}, down: map[string]bool{}, fenced: map[string]map[string]bool{}}
	nodes := map[string]*memNode{}
	for _, id := range ids {
		l := openLog(t, t.TempDir())
		reg := NewRegistry(Config{Node: id, TelemetryPrefix: "telemetry", Defaults: cfg, GroupTTL: time.Hour, MaxGroups: 8,
			Peers: &memPeers{net: net, self: id}}, l, quiet())
		net.regs[id] = reg
		nodes[id] = &memNode{id: id, log: l, reg: reg}
		t.Cleanup(func() { l.Close() })
	}
	for _, a := range ids {
		for _, b := range ids {
			if a != b {
				nodes[a].reg.PeerUp(b, nodes[b].log.NumPartitions())
			}
		}
	}
	// Before the logs close (cleanups run last first): no runner of this
	// test outlives it, delivering to its members.
	t.Cleanup(func() {
		for _, n := range nodes {
			n.reg.Drain(time.Now())
		}
	})
	return net, nodes
}

func publishOn(t testing.TB, l *wal.Log, prefix string, devices, perDevice int) {
	t.Helper()
	for i := 0; i < perDevice; i++ {
		for d := 0; d < devices; d++ {
			if _, err := l.Append(context.Background(), &wal.Record{Device: fmt.Sprintf("%s%d", prefix, d), Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestClusterDeliveryAndHandOver: a group led by node a reads the logs of a
// and b and delivers to members on both; one device is ingested on both
// nodes. Then a hands over to b (drain, commits at the owners) and b goes
// on from the committed offsets: nothing acked is delivered again, nothing
// is lost, order per node and device holds, never two in flight.
func TestClusterDeliveryAndHandOver(t *testing.T) {
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	_, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	w := newClusterWorld(t)
	ma := &clusterMember{id: "ma", w: w, reg: a.reg, hold: time.Millisecond}
	mb := &clusterMember{id: "mb", w: w, reg: b.reg, hold: time.Millisecond}
	join(t, a.reg, key, "ma", ma, 8)
	join(t, b.reg, key, "mb", mb, 8)
	publishOn(t, a.log, "a-dev-", 10, 20)
	publishOn(t, b.log, "b-dev-", 10, 20)
	publishOn(t, a.log, "shared-", 1, 20)
	publishOn(t, b.log, "shared-", 1, 20)
	if err := a.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	const first = 10*20*2 + 40
	waitFor(t, "first round delivered", 20*time.Second, func() bool { return w.delivered() == first })
	w.mu.Lock()
	if w.byMember["ma"] == 0 || w.byMember["mb"] == 0 {
		t.Errorf("deliveries by member: %v (both nodes' members should get work)", w.byMember)
	}
	w.mu.Unlock()
	waitFor(t, "leader stats with forwards", 5*time.Second, func() bool {
		st := a.reg.Stats()
		return len(st) == 1 && st[0].Leading && st[0].Members["a"] == 1 && st[0].Members["b"] == 1 && st[0].Forwards > 0
	})
	// Hand over: a drains and commits everywhere, then b leads.
	<-a.reg.StepDown(key, true, time.Now().Add(2*time.Second))
	ma.wg.Wait()
	mb.wg.Wait()
	if err := b.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	publishOn(t, a.log, "a-dev-", 10, 5)
	publishOn(t, b.log, "shared-", 1, 5)
	waitFor(t, "second round delivered", 20*time.Second, func() bool { return w.delivered() == first+50+5 })
	time.Sleep(100 * time.Millisecond)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dupes != 0 {
		t.Errorf("%d messages delivered again after a clean hand-over", w.dupes)
	}
}

// TestClusterPeerDownPausesItsPartitions: while the owner of some partitions
// is unreachable the leader delivers the rest, the unreachable node's
// members leave, and once it is back its records are delivered.
func TestClusterPeerDownPausesItsPartitions(t *testing.T) {
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	net, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	w := newClusterWorld(t)
	ma := &clusterMember{id: "ma", w: w, reg: a.reg}
	join(t, a.reg, key, "ma", ma, 8)
	mb := &clusterMember{id: "mb", w: w, reg: b.reg}
	join(t, b.reg, key, "mb", mb, 8)
	if err := a.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	publishOn(t, a.log, "a-dev-", 3, 3)
	publishOn(t, b.log, "b-dev-", 3, 3)
	waitFor(t, "both logs delivered", 10*time.Second, func() bool { return w.delivered() == 18 })

	net.mu.Lock()
	net.down["b"] = true
	net.mu.Unlock()
	a.reg.PeerDown("b")
	publishOn(t, b.log, "b-dev-", 3, 2) // stored on b, unreachable for now
	publishOn(t, a.log, "a-dev-", 3, 2)
	waitFor(t, "a's records delivered while b is away", 10*time.Second, func() bool { return w.delivered() == 24 })
	time.Sleep(100 * time.Millisecond)
	if n := w.delivered(); n != 24 {
		t.Fatalf("%d delivered while b was away, want 24", n)
	}
	if st := a.reg.Stats(); st[0].Members["b"] != 0 {
		t.Errorf("b's member still listed while b is down: %+v", st[0].Members)
	}
	net.mu.Lock()
	net.down["b"] = false
	net.mu.Unlock()
	a.reg.PeerUp("b", b.log.NumPartitions())
	waitFor(t, "b's records delivered after it returned", 10*time.Second, func() bool { return w.delivered() == 30 })
	<-a.reg.StepDown(key, true, time.Now().Add(time.Second))
}

// TestClusterForwardRefusedIsRedelivered: a member that cannot take a
// forwarded delivery (gone, or over its limit) is removed at the leader, as
// a local one would be, and its message goes to another member.
func TestClusterForwardRefusedIsRedelivered(t *testing.T) {
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	_, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	w := newClusterWorld(t)
	refusing := &refusingMember{}
	join(t, b.reg, key, "mb", refusing, 4)
	if err := a.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	publishOn(t, a.log, "d", 1, 3)
	waitFor(t, "a refusal", 10*time.Second, func() bool { return refusing.count() >= 1 })
	waitFor(t, "the refusing member removed at the leader", 10*time.Second, func() bool {
		st := a.reg.Stats()
		return len(st) == 1 && st[0].Core.Members == 0
	})
	ma := &clusterMember{id: "ma", w: w, reg: a.reg}
	join(t, a.reg, key, "ma", ma, 4)
	b.reg.Leave(key, "mb")
	waitFor(t, "all delivered to the member that takes them", 10*time.Second, func() bool { return w.delivered() == 3 })
	if c := b.reg.Counters(); c.ForwardsRefused != 1 {
		t.Errorf("counters: %+v, want one refused forward", c)
	}
	if st := a.reg.Stats(); st[0].Core.DeadLetters != 0 {
		t.Errorf("dead letters: %d", st[0].Core.DeadLetters)
	}
	<-a.reg.StepDown(key, false, time.Now())
}

type refusingMember struct {
	mu sync.Mutex
	n  int
}

func (m *refusingMember) Deliver(*Delivery) bool {
	m.mu.Lock()
	m.n++
	m.mu.Unlock()
	return false
}

func (m *refusingMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// TestClusterGroupDeclaredByAPeerDoesNotExpire: a group a peer declares in
// its configuration stays here without members, like a declared one; once
// no peer declares it, it expires after the group TTL.
func TestClusterGroupDeclaredByAPeerDoesNotExpire(t *testing.T) {
	cfg := queue.DefaultConfig()
	_, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	if err := a.reg.Declare(GroupConfig{Key: key, Core: cfg}); err != nil { // a tells b
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Hour) // past the one-hour TTL of newMemCluster
	b.reg.Expire(later)
	if len(b.reg.Groups()) != 1 {
		t.Fatal("a group a peer declares expired")
	}
	// a restarted without the declaration.
	if err := b.reg.RemoteMembers("a", key, true, false, nil); err != nil {
		t.Fatal(err)
	}
	b.reg.Expire(later)
	if len(b.reg.Groups()) != 0 {
		t.Fatal("a group nobody declares and without members did not expire")
	}
}

// TestClusterSplitBrainHealKeepsParkedMessages: the leader a has read ahead
// of b's log when b is cut off; b leads the group alone on its side (a
// newer epoch) and delivers its own log there. When the link returns, b
// refuses a's requests (fenced), so a must not deliver what it had read
// ahead of b: those messages went out on b's side already.
func TestClusterSplitBrainHealKeepsParkedMessages(t *testing.T) {
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	net, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	// a's worker holds everything it gets: a has all of b's messages read
	// ahead, one per device in flight, the rest waiting.
	wa := &holdingMember{}
	join(t, a.reg, key, "wa", wa, 1000)
	if err := a.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	publishOn(t, b.log, "b-dev-", 2, 5)
	waitFor(t, "a's worker holding b's first messages", 10*time.Second, func() bool { return wa.count() == 2 })

	net.mu.Lock()
	net.down["b"] = true
	net.fenced["b"] = map[string]bool{"a": true} // b elects itself: a's epoch is stale there
	net.mu.Unlock()
	a.reg.PeerDown("b")
	b.reg.PeerDown("a")
	w := newClusterWorld(t)
	wb := &clusterMember{id: "wb", w: w, reg: b.reg}
	join(t, b.reg, key, "wb", wb, 8)
	if err := b.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b delivering its own log", 10*time.Second, func() bool { return w.delivered() == 10 })

	net.mu.Lock()
	net.down["b"] = false
	net.mu.Unlock()
	a.reg.PeerUp("b", b.log.NumPartitions())
	wa.release(a.reg) // a's worker acks what it held: those devices move on at a, if anything
	time.Sleep(500 * time.Millisecond)
	if n := wa.count(); n != 2 {
		t.Fatalf("a delivered %d messages of b after the heal, want only the 2 in flight at the cut", n)
	}
	<-a.reg.StepDown(key, false, time.Now().Add(time.Second))
	<-b.reg.StepDown(key, true, time.Now().Add(time.Second))
}

// holdingMember keeps every delivery unanswered until release.
type holdingMember struct {
	mu      sync.Mutex
	replies []AckHandle
}

func (m *holdingMember) Deliver(d *Delivery) bool {
	m.mu.Lock()
	m.replies = append(m.replies, d.Ack)
	m.mu.Unlock()
	return true
}

func (m *holdingMember) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.replies)
}

func (m *holdingMember) release(reg *Registry) {
	m.mu.Lock()
	rs := append([]AckHandle(nil), m.replies...)
	m.mu.Unlock()
	for _, h := range rs {
		_ = reg.Ack(Ack{Handle: h, Kind: AckDone})
	}
}

// TestClusterDeviceShareOnPeerPartition: a device beyond its share of a
// window of another node's partition has its records set aside and read
// again from the owner (a Refetch over the peer link); everything arrives,
// in order per device, never two in flight.
func TestClusterDeviceShareOnPeerPartition(t *testing.T) {
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	cfg.ReadAheadMsgs, cfg.DeviceShareMsgs = 16, 2
	_, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	w := newClusterWorld(t)
	ma := &clusterMember{id: "ma", w: w, reg: a.reg, hold: time.Millisecond}
	join(t, a.reg, key, "ma", ma, 8)
	publishOn(t, b.log, "hot-", 1, 60)
	publishOn(t, b.log, "b-dev-", 5, 4)
	if err := a.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "everything delivered", 20*time.Second, func() bool { return w.delivered() == 60+20 })
	// Stats are a snapshot taken every second.
	waitFor(t, "records set aside in the stats", 5*time.Second, func() bool {
		st := a.reg.Stats()
		return len(st) == 1 && st[0].Core.SetAside > 0 && st[0].Core.StallsAvoided > 0
	})
	// Stop delivering before waiting for the member's acks: a WaitGroup
	// must not be added to while it is waited on.
	<-a.reg.StepDown(key, false, time.Now().Add(time.Second))
	ma.wg.Wait()
}

// recordingMember notes every delivery (by device#seq: the leader's group
// instance, the delivery count, the flag); it holds them unanswered until
// answering is set.
type recordingMember struct {
	mu        sync.Mutex
	reg       *Registry
	answering bool
	got       map[string][]Delivery // device#seq -> deliveries (Record and Raw cleared)
}

func (m *recordingMember) Deliver(d *Delivery) bool {
	key := fmt.Sprintf("%s#%d", d.Record.Device, d.Record.Seq)
	c := *d
	c.Record, c.Raw = nil, nil
	m.mu.Lock()
	m.got[key] = append(m.got[key], c)
	answering := m.answering
	m.mu.Unlock()
	if answering {
		go m.reg.Ack(Ack{Handle: c.Ack, Kind: AckDone})
	}
	return true
}

// byGroup returns, per device#seq, the deliveries made by group instance gid.
func (m *recordingMember) byGroup(gid int) map[string][]Delivery {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]Delivery{}
	for k, ds := range m.got {
		for _, d := range ds {
			if d.Ack.Group == gid {
				out[k] = append(out[k], d)
			}
		}
	}
	return out
}

// TestClusterNewLeaderFlagsWhatTheOldOneHeld: the group's only member is on
// b, where the group was created by that member's subscribe (so it has no
// earlier position there); a leads it and delivers b's records, which the
// member holds. a dies with nothing committed; b leads and delivers its own
// partitions again from the commits. Those first deliveries of b's run must
// say Edgeq-Redelivered: maybe, although b itself never ran the group: an
// earlier leader read b's partitions.
func TestClusterNewLeaderFlagsWhatTheOldOneHeld(t *testing.T) {
	cfg := queue.DefaultConfig()
	net, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	m := &recordingMember{reg: b.reg, got: map[string][]Delivery{}}
	join(t, b.reg, key, "m", m, 64)
	if err := a.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	// a positions b's partitions before anything is published (deliver: new).
	waitFor(t, "a reading b's partitions", 30*time.Second, func() bool {
		st := a.reg.Stats()
		return len(st) == 1 && len(st[0].Core.Partitions) > a.log.NumPartitions()
	})
	const devices = 3
	publishOn(t, b.log, "b-dev-", devices, 2)
	waitFor(t, "a's deliveries of b's records held by the member", 30*time.Second, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.got) == devices
	})
	held := map[string]bool{}
	var oldGID int
	m.mu.Lock()
	for k, ds := range m.got {
		held[k] = true
		oldGID = ds[0].Ack.Group
	}
	m.answering = true
	m.mu.Unlock()

	// a dies: nothing it delivered was acked, so nothing past b's start is committed.
	net.mu.Lock()
	net.down["a"] = true
	net.mu.Unlock()
	b.reg.PeerDown("a")
	<-a.reg.StepDown(key, false, time.Now())
	if err := b.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	var newGID int
	waitFor(t, "b delivering its records", 30*time.Second, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		for _, ds := range m.got {
			for _, d := range ds {
				if d.Ack.Group != oldGID {
					newGID = d.Ack.Group
					n++
				}
			}
		}
		return n >= 2*devices
	})
	again := m.byGroup(newGID)
	for k := range held {
		ds := again[k]
		if len(ds) == 0 {
			t.Errorf("%s: held at a's crash but not delivered by b", k)
			continue
		}
		if ds[0].Deliveries == 1 && !ds[0].MaybeDelivered {
			t.Errorf("%s: delivered by a, then by b with Edgeq-Deliveries 1 and without the possibly-delivered flag", k)
		}
	}
	<-b.reg.StepDown(key, true, time.Now().Add(time.Second))
}

// TestClusterQuiesceWaitsForHeldForwards: a node that stops reports its
// members with credit 0 (the leader forwards them nothing more) and waits
// until they have answered what the leader forwarded them.
func TestClusterQuiesceWaitsForHeldForwards(t *testing.T) {
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	_, nodes := newMemCluster(t, cfg, "a", "b")
	a, b := nodes["a"], nodes["b"]
	key := GroupKey{Filter: "telemetry.>", Queue: "q"}
	wb := &holdingMember{}
	join(t, b.reg, key, "wb", wb, 100)
	publishOn(t, b.log, "b-dev-", 4, 3)
	if err := a.reg.Lead(key); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's member holding one message per device", 30*time.Second, func() bool { return wb.count() == 4 })
	if got := b.reg.Counters().ForwardsHeld; got != 4 {
		t.Fatalf("forwards held %d, want 4", got)
	}
	b.reg.Quiesce()
	ms, _, _, _ := b.reg.LocalMembers(key)
	if len(ms) != 1 || ms[0].Credit != 0 {
		t.Fatalf("quiescing node reports members %+v, want one with credit 0", ms)
	}
	if b.reg.WaitForwards(time.Now().Add(300 * time.Millisecond)) {
		t.Fatal("WaitForwards returned true with 4 forwards unanswered")
	}
	wb.release(b.reg)
	if !b.reg.WaitForwards(time.Now().Add(10 * time.Second)) {
		t.Fatalf("WaitForwards still waiting after every forward was answered (held %d)", b.reg.Counters().ForwardsHeld)
	}
	time.Sleep(300 * time.Millisecond)
	if n := wb.count(); n != 4 {
		t.Fatalf("leader forwarded %d messages to a member reported with credit 0, want the 4 it held", n)
	}
}
