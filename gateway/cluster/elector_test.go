package cluster

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"edgeq/discovery/election"
)

// leaderLog is a Leadership that drains at once (from another goroutine, as
// the contract asks) and remembers what this node leads.
type leaderLog struct {
	mu      sync.Mutex
	leading map[string]election.Epoch
	e       *Elector
}

func (l *leaderLog) Lead(g string, ep election.Epoch) {
	l.mu.Lock()
	l.leading[g] = ep
	l.mu.Unlock()
}

func (l *leaderLog) StepDown(g string, ep election.Epoch, handOver bool) {
	l.mu.Lock()
	delete(l.leading, g)
	l.mu.Unlock()
	if handOver {
		go l.e.Drained(g, ep)
	}
}

type clusterNode struct {
	id     string
	mgr    *Manager
	el     *Elector
	lead   *leaderLog
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// handlers fans peer events out to the elector.
type handlers struct{ el *Elector }

func (h handlers) PeerUp(n string, p PeerInfo) { h.el.PeerUp(n, p.Priority) }
func (h handlers) PeerDown(n string)           { h.el.PeerDown(n) }
func (h handlers) Frame(n string, f Frame)     { h.el.Frame(n, f) }

var testGroups = []string{"telemetry.> a", "telemetry.> b", "telemetry.> c", "telemetry.> d"}

func startClusterNode(t *testing.T, id string, prio int, dir, listen string, peers ...string) *clusterNode {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	n := &clusterNode{id: id, lead: &leaderLog{leading: map[string]election.Epoch{}}}
	h := &handlers{}
	mgr, err := NewManager(ManagerConfig{
		Identity: Identity{Cluster: "plant", Node: id, Secret: []byte(secret)}, Priority: prio,
		Listen: listen, Peers: peers, HeartbeatInterval: 50 * time.Millisecond,
		FailureTimeout: testFailureTimeout, DialInterval: 50 * time.Millisecond, Logger: quiet,
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	ec := election.DefaultConfig(election.NodeID(id))
	ec.Priority = prio
	el, err := NewElector(ElectorConfig{Election: ec, DataDir: dir, Tick: 20 * time.Millisecond, Logger: quiet}, mgr, n.lead)
	if err != nil {
		t.Fatal(err)
	}
	h.el, n.lead.e, n.mgr, n.el = el, el, mgr, el
	for _, g := range testGroups {
		if err := el.AddGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n.wg.Add(1)
	go func() { defer n.wg.Done(); el.Run(ctx) }()
	t.Cleanup(n.stop)
	return n
}

func (n *clusterNode) stop() {
	n.cancel()
	n.mgr.Wait()
	n.wg.Wait()
}

// agreed reports the leader of g if every node names the same one and that
// node leads it.
func agreed(nodes []*clusterNode, g string) (string, bool) {
	var leader string
	for i, n := range nodes {
		l, _, ok := n.el.Leader(g)
		if !ok || (i > 0 && l != leader) {
			return "", false
		}
		leader = l
	}
	for _, n := range nodes {
		if n.id == leader {
			n.lead.mu.Lock()
			_, leads := n.lead.leading[g]
			n.lead.mu.Unlock()
			return leader, leads
		}
	}
	return "", false
}

func TestElectionOverRealConnections(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	a := startClusterNode(t, "a", 1, dirs[0], "127.0.0.1:0")
	b := startClusterNode(t, "b", 1, dirs[1], "127.0.0.1:0", a.mgr.Addr())
	cAddr := "127.0.0.1:" + freePortString(t)
	c := startClusterNode(t, "c", 9, dirs[2], cAddr, a.mgr.Addr(), b.mgr.Addr())
	all := []*clusterNode{a, b, c}
	for _, g := range testGroups {
		eventually(t, "one leader for "+g, func() bool { l, ok := agreed(all, g); return ok && l == "c" })
	}
	// The highest-priority node dies: a and b elect among themselves.
	c.stop()
	survivors := []*clusterNode{a, b}
	leaders := map[string]bool{}
	for _, g := range testGroups {
		eventually(t, "a new leader for "+g, func() bool { l, ok := agreed(survivors, g); return ok && l != "c" })
		l, _ := agreed(survivors, g)
		leaders[l] = true
	}
	if len(leaders) != 2 {
		t.Logf("leadership of %d groups among equal priorities landed on %v", len(testGroups), leaders)
	}
	_, before, _ := a.el.Leader(testGroups[0])
	// c comes back with its persisted epochs and takes over through the
	// hand-over (the old leaders drain first).
	c = startClusterNode(t, "c", 9, dirs[2], cAddr, a.mgr.Addr(), b.mgr.Addr())
	all = []*clusterNode{a, b, c}
	for _, g := range testGroups {
		eventually(t, "c leads "+g+" again", func() bool { l, ok := agreed(all, g); return ok && l == "c" })
	}
	_, after, _ := a.el.Leader(testGroups[0])
	if after.Compare(before) <= 0 {
		t.Fatalf("epoch did not grow across the take-over: %v then %v", before, after)
	}
	// Fencing: an owner refuses the old leader's epoch.
	fencedBefore := a.el.Stats().Fenced
	if err := a.el.Fence(testGroups[0], before); err == nil {
		t.Fatalf("stale epoch %v accepted after %v", before, after)
	}
	// The read-only view: every group's leader in one call, and counters
	// that saw the elections, c's take-overs and the refusal above.
	ls, st := a.el.Leaders(append([]string{"not a group"}, testGroups...))
	if len(ls) != len(testGroups) {
		t.Fatalf("leaders of %d testGroups, want %d: %+v", len(ls), len(testGroups), ls)
	}
	for i, l := range ls {
		if l.Group != testGroups[i] || l.Leader != "c" || l.Epoch.Leader != "c" {
			t.Errorf("leader %d: %+v", i, l)
		}
	}
	if st.Fenced != fencedBefore+1 || st.Elections == 0 {
		t.Errorf("stats of a: %+v (fenced before the stale epoch %d)", st, fencedBefore)
	}
	if cs := c.el.Stats(); cs.Leaderships < uint64(len(testGroups)) || cs.TakeOvers == 0 {
		t.Errorf("stats of c after taking over: %+v", cs)
	}
}
