package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// recorder is a Handler that keeps what it was told.
type recorder struct {
	mu     sync.Mutex
	up     map[string]int // node -> priority, while up
	downs  map[string]int
	frames []string
}

func newRecorder() *recorder { return &recorder{up: map[string]int{}, downs: map[string]int{}} }

func (r *recorder) PeerUp(node string, info PeerInfo) {
	r.mu.Lock()
	r.up[node] = info.Priority
	r.mu.Unlock()
}
func (r *recorder) PeerDown(node string) {
	r.mu.Lock()
	delete(r.up, node)
	r.downs[node]++
	r.mu.Unlock()
}
func (r *recorder) Frame(node string, f Frame) {
	r.mu.Lock()
	r.frames = append(r.frames, fmt.Sprintf("%s:%d:%s", node, f.Type, f.Body))
	r.mu.Unlock()
}
func (r *recorder) isUp(node string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.up[node]
	return p, ok
}

type testNode struct {
	m      *Manager
	rec    *recorder
	cancel context.CancelFunc
}

func startNode(t *testing.T, id, cluster, secret string, prio int, peers ...string) *testNode {
	t.Helper()
	return startNodeAt(t, "127.0.0.1:0", id, cluster, secret, prio, peers...)
}

func startNodeAt(t *testing.T, listen, id, cluster, secret string, prio int, peers ...string) *testNode {
	t.Helper()
	rec := newRecorder()
	m, err := NewManager(ManagerConfig{
		Identity: Identity{Cluster: cluster, Node: id, Secret: []byte(secret)}, Priority: prio,
		Listen: listen, Peers: peers,
		HeartbeatInterval: 50 * time.Millisecond, FailureTimeout: testFailureTimeout, DialInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n := &testNode{m: m, rec: rec, cancel: cancel}
	t.Cleanup(func() { cancel(); m.Wait() })
	return n
}

// testFailureTimeout is the tests' failure timeout (and so their handshake
// timeout). 300ms let a loaded machine's scheduling pause declare a live
// peer dead, or time out handshakes a test was still counting; no test
// here waits for it to pass on a silent peer that has not closed.
const testFailureTimeout = 2 * time.Second

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // bounds a hang only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const secret = "a cluster secret of some length"

func TestPeersMeshHeartbeatAndFailure(t *testing.T) {
	a := startNode(t, "a", "plant", secret, 1)
	b := startNode(t, "b", "plant", secret, 2, a.m.Addr())
	// c dials both, and a dials c back: a pair connected twice keeps one.
	c := startNode(t, "c", "plant", secret, 3, a.m.Addr(), b.m.Addr())
	a.m.AddAddr(c.m.Addr())
	nodes := map[string]*testNode{"a": a, "b": b, "c": c}
	prio := map[string]int{"a": 1, "b": 2, "c": 3}
	for id, n := range nodes {
		for other := range nodes {
			if other == id {
				continue
			}
			eventually(t, id+" sees "+other, func() bool { p, ok := n.rec.isUp(other); return ok && p == prio[other] })
		}
	}
	time.Sleep(200 * time.Millisecond) // duplicate connections settle
	for id, n := range nodes {
		if ps := n.m.Peers(); len(ps) != 2 {
			t.Fatalf("%s has %d connections: %+v", id, len(ps), ps)
		}
		n.rec.mu.Lock()
		downs := len(n.rec.downs)
		n.rec.mu.Unlock()
		if downs != 0 {
			t.Fatalf("%s saw a peer go down while replacing a duplicate connection", id)
		}
	}
	// Frames flow.
	if err := a.m.Send("b", TypeMembers, []byte("hello b")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "frame at b", func() bool {
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		return len(b.rec.frames) == 1 && b.rec.frames[0] == fmt.Sprintf("a:%d:hello b", TypeMembers)
	})
	// c stops: the others notice within the failure timeout.
	c.cancel()
	c.m.Wait()
	eventually(t, "a sees c down", func() bool { _, ok := a.rec.isUp("c"); return !ok })
	eventually(t, "b sees c down", func() bool { _, ok := b.rec.isUp("c"); return !ok })
	if err := a.m.Send("c", TypeMembers, nil); err == nil {
		t.Fatal("send to a dead peer succeeded")
	}
}

func TestPeersRefuseWrongSecretAndOtherCluster(t *testing.T) {
	a := startNode(t, "a", "plant", secret, 1)
	bad := startNode(t, "x", "plant", "another secret of some length", 1, a.m.Addr())
	other := startNode(t, "y", "office", secret, 1, a.m.Addr())
	eventually(t, "refusals counted", func() bool { return a.m.Refused() >= 2 && bad.m.Refused() >= 1 && other.m.Refused() >= 1 })
	time.Sleep(100 * time.Millisecond)
	if ps := a.m.Peers(); len(ps) != 0 {
		t.Fatalf("refused nodes connected: %+v", ps)
	}
	if _, ok := a.rec.isUp("x"); ok {
		t.Fatal("wrong-secret node came up")
	}
}

func TestManagerConfigValidation(t *testing.T) {
	for _, c := range []ManagerConfig{
		{Identity: Identity{Cluster: "c", Node: "", Secret: []byte(secret)}},
		{Identity: Identity{Cluster: "", Node: "n", Secret: []byte(secret)}},
		{Identity: Identity{Cluster: "c", Node: "n", Secret: []byte("short")}},
		{Identity: Identity{Cluster: "c", Node: "n", Secret: []byte(secret)}, HeartbeatInterval: time.Second, FailureTimeout: time.Second},
	} {
		if _, err := NewManager(c, newRecorder()); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}

func freePortString(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestPeersNoRedialOfAConnectedPeer: a peer that dialed this node first is
// not dialed again (its first heartbeat says where it listens): a second
// dial would replace the connection in use, and frames on their way on the
// old one would be lost. Frames sent all along arrive, and the connection
// stays the same.
func TestPeersNoRedialOfAConnectedPeer(t *testing.T) {
	// The scenario needs b's dial to reach a before a's next dial round
	// reaches b's new listener; on a loaded machine a can win that race
	// (and, as the smaller ID, keep its own connection): then start over.
	var a, b *testNode
	for attempt := 1; ; attempt++ {
		bAddr := "127.0.0.1:" + freePortString(t)
		a = startNode(t, "a", "plant", secret, 1, bAddr) // b is not there yet: a's first dials fail
		time.Sleep(80 * time.Millisecond)
		b = startNodeAt(t, bAddr, "b", "plant", secret, 2, a.m.Addr())
		eventually(t, "a and b connected", func() bool { _, ok := a.rec.isUp("b"); return ok })
		if !a.m.Peers()[0].Dialed {
			break
		}
		if attempt == 5 {
			t.Fatalf("a's connection to b was a's own dial in 5 attempts: %+v", a.m.Peers())
		}
		t.Logf("attempt %d: a's dial reached b first; again", attempt)
		a.cancel()
		a.m.Wait()
		b.cancel()
		b.m.Wait()
	}
	since := a.m.Peers()[0].Since
	const n = 500
	for i := 0; i < n; i++ {
		if err := a.m.Send("b", TypeMembers, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // over several dial intervals (50ms)
	}
	eventually(t, "every frame at b", func() bool {
		b.rec.mu.Lock()
		defer b.rec.mu.Unlock()
		return len(b.rec.frames) == n
	})
	if ps := a.m.Peers(); len(ps) != 1 || !ps[0].Since.Equal(since) || ps[0].Dialed {
		t.Fatalf("a's connection to b was replaced: %+v (up since %v)", ps, since)
	}
	if !a.m.AllDialed() {
		t.Fatal("a does not count b's address as connected")
	}
}

// TestUnreachable: a static address that does not answer is listed without
// a node; once its node connects it is not listed; when the node goes away
// it is listed again, with the node it led to.
func TestUnreachable(t *testing.T) {
	bAddr := "127.0.0.1:" + freePortString(t)
	a := startNode(t, "a", "plant", secret, 1, bAddr)
	if got := a.m.Unreachable(); len(got) != 1 || got[0] != (AddrStatus{Addr: bAddr, Static: true}) {
		t.Fatalf("before b: %+v", got)
	}
	rec := newRecorder()
	b, err := NewManager(ManagerConfig{
		Identity: Identity{Cluster: "plant", Node: "b", Secret: []byte(secret)}, Priority: 2, Listen: bAddr,
		HeartbeatInterval: 50 * time.Millisecond, FailureTimeout: testFailureTimeout, DialInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a connects to b", func() bool { _, ok := a.rec.isUp("b"); return ok && len(a.m.Unreachable()) == 0 })
	cancel()
	b.Wait()
	eventually(t, "b unreachable again", func() bool {
		got := a.m.Unreachable()
		return len(got) == 1 && got[0] == AddrStatus{Addr: bAddr, Node: "b", Static: true}
	})
}
