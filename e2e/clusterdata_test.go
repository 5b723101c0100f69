package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const clusterSecret = "0123456789abcdef-plant-secret"

// clusterConf is a node's config in a loopback cluster with static peers.
func clusterConf(listen, prio int, extra string, peers ...int) string {
	s := fmt.Sprintf("groups:\n  - {subject: telemetry.>, queue: workers}\n%scluster:\n  name: plant\n  secret: %s\n  priority: %d\n  listen: 127.0.0.1:%d\n  mdns: false\n  heartbeat_interval: 200ms\n  failure_timeout: 3s\n  peers:\n",
		extra, clusterSecret, prio, listen)
	for _, p := range peers {
		s += fmt.Sprintf("    - 127.0.0.1:%d\n", p)
	}
	return s
}

type clusterStatus struct {
	Node    string `json:"node"`
	Cluster struct {
		Peers []struct {
			Node string `json:"node"`
		} `json:"peers"`
		Leaders map[string]struct {
			Leader string `json:"leader"`
			Epoch  string `json:"epoch"`
			Self   bool   `json:"self"`
		} `json:"leaders"`
		Refused uint64 `json:"refused_peers"`
	} `json:"cluster"`
	Groups []struct {
		Queue     string         `json:"queue"`
		Leading   bool           `json:"leading"`
		Members   int            `json:"members"`
		ByNode    map[string]int `json:"members_by_node"`
		Delivered uint64         `json:"delivered"`
		Forwards  uint64         `json:"forwards"`
	} `json:"groups"`
}

func statusOf(n *node) clusterStatus {
	out, err := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
	var st clusterStatus
	if err != nil || json.Unmarshal([]byte(out), &st) != nil {
		return clusterStatus{}
	}
	return st
}

// leaderOf reports the leader all nodes agree on for group ("" if they do not).
func leaderOf(group string, nodes ...*node) string {
	leader := ""
	for _, n := range nodes {
		l := statusOf(n).Cluster.Leaders[group]
		if l.Leader == "" || (leader != "" && l.Leader != leader) {
			return ""
		}
		leader = l.Leader
	}
	return leader
}

// TestClusterDeliveryAcrossNodes: three nodes with static peers on loopback;
// telemetry is published on all three, some devices on two nodes; workers
// of one queue group are connected to the two nodes that do not lead it.
// Every message is delivered, first deliveries keep each device's order per
// ingesting node, and no device ever has two messages in a worker's hands.
func TestClusterDeliveryAcrossNodes(t *testing.T) {
	ids := []string{"gw-a", "gw-b", "gw-c"}
	nodes := clusterOf(t, "")
	a, b, c := nodes[0], nodes[1], nodes[2]
	waitFor(t, "gw-c leads the group on every node", 30*time.Second, func() bool {
		return leaderOf("telemetry.> workers", a, b, c) == "gw-c"
	})
	tr := newTracker(t)
	for i, n := range []*node{a, a, b} {
		startWorker(t, n.url(), fmt.Sprintf("w%d-%s", i, n.nodeID), tr, randomDelay(500))
	}
	const devices, per = 30, 40
	var wg sync.WaitGroup
	pubs := map[string]*publisher{}
	for i, n := range nodes {
		p := newPublisher(t, n.url(), 200)
		pubs[n.nodeID] = p
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for k := 1; k <= per; k++ {
				for d := 0; d < devices; d++ {
					dev := fmt.Sprintf("s%d-%02d", i, d)
					if d < 5 {
						dev = fmt.Sprintf("shared-%d", d) // ingested on every node
					}
					p.publish(dev, fmt.Sprintf("%s|%s|%d", ids[i], dev, k))
				}
			}
		}(i)
	}
	wg.Wait()
	total := devices * per * len(nodes)
	waitFor(t, "every publish acknowledged", 60*time.Second, func() bool {
		n := 0
		for _, p := range pubs {
			n += p.acked()
		}
		return n == total
	})
	waitFor(t, "every message delivered", 90*time.Second, func() bool { return tr.distinct() == total })
	tr.mu.Lock()
	problems, byWorker := tr.problems, fmt.Sprint(tr.byWorker)
	tr.mu.Unlock()
	if problems > 0 {
		t.Fatalf("%d order or in-flight violations", problems)
	}
	waitFor(t, "the leader's status to show the forwards", 10*time.Second, func() bool {
		for _, g := range statusOf(c).Groups {
			if g.Queue == "workers" && g.Leading && g.Forwards > 0 && g.Delivered >= uint64(total) {
				return true
			}
		}
		return false
	})
	t.Logf("deliveries by worker: %s", byWorker)
	// Every node agrees on the members, by node.
	for _, n := range nodes {
		for _, g := range statusOf(n).Groups {
			if g.Queue == "workers" && (g.ByNode["gw-a"] != 2 || g.ByNode["gw-b"] != 1) {
				t.Errorf("%s: members by node %v", n.nodeID, g.ByNode)
			}
		}
	}
}

// clusterOf starts nodes gw-a, gw-b, gw-c (priorities 1, 2, 3) with static
// peers on loopback; extra is added to every config.
func clusterOf(t testing.TB, extra string) []*node {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var nodes []*node
	for i, id := range []string{"gw-a", "gw-b", "gw-c"} {
		var peers []int
		for j := range ports {
			if j != i {
				peers = append(peers, ports[j])
			}
		}
		n := newNode(t, clusterConf(ports[i], i+1, extra, peers...))
		n.nodeID = id
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.start()
	}
	return nodes
}

// gidOf reads the group instance of a delivery's ack subject: each leader's
// runner has its own, so it tells which leader delivered. Both forms:
// $EQ.ACK.<gid>.… and $JS.ACK._.edgeq.<stream>.<queue>.<delivered>.<sseq>.
// <offset>.<ts>.0.<gid>.<member>.<partition> (jetstream.queue_ack_subjects).
func gidOf(reply string) string {
	if rest, ok := strings.CutPrefix(reply, "$JS.ACK._.edgeq."); ok {
		if tok := strings.Split(rest, "."); len(tok) >= 9 {
			return tok[7]
		}
		return reply
	}
	rest := strings.TrimPrefix(reply, "$EQ.ACK.")
	gid, _, _ := strings.Cut(rest, ".")
	return gid
}

// TestClusterLeaderKill: under load, kill -9 the leader of the group. The
// next-ranked node takes over (how fast is logged, not asserted) and
// resumes from the committed offsets; nothing pub-acked by the survivors is
// lost. When the killed node returns it takes the group back through the
// hand-over (no two messages of a device in flight, order kept), and what it
// had stored before it died is delivered. Every message delivered again
// with Edgeq-Deliveries: 1 carries Edgeq-Redelivered: maybe.
func TestClusterLeaderKill(t *testing.T) {
	nodes := clusterOf(t, "queue:\n  ack_wait: 3s\n")
	a, b, c := nodes[0], nodes[1], nodes[2]
	waitFor(t, "gw-c leads", 30*time.Second, func() bool { return leaderOf("telemetry.> workers", a, b, c) == "gw-c" })
	tr := newTracker(t).withAckWait(3 * time.Second)
	lc := &leaderClock{first: map[string]time.Time{}}
	for i, n := range []*node{a, a, b} {
		lc.worker(t, n, fmt.Sprintf("w%d-%s", i, n.nodeID), tr)
	}
	pubs := map[string]*publisher{}
	stops := map[string]chan struct{}{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		p := newPublisher(t, n.url(), 100)
		pubs[n.nodeID], stops[n.nodeID] = p, make(chan struct{})
		wg.Add(1)
		go func(id string, stop chan struct{}) {
			defer wg.Done()
			for i := 1; ; i++ {
				for d := 0; d < 20; d++ {
					select {
					case <-stop:
						return
					default:
					}
					dev := fmt.Sprintf("%s-d%02d", id, d)
					p.publish(dev, fmt.Sprintf("%s|%d", dev, i))
				}
			}
		}(n.nodeID, stops[n.nodeID])
	}
	waitFor(t, "traffic before the kill", 30*time.Second, func() bool { return tr.distinct() > 2000 })
	close(stops["gw-c"])
	tr.crashed()
	killedAt := time.Now()
	before := lc.leaders()
	c.kill()
	waitFor(t, "gw-b leads", 10*time.Second, func() bool { return leaderOf("telemetry.> workers", a, b) == "gw-b" })
	// The bound only catches a failover that never happens: a loaded
	// machine may take seconds.
	failover := lc.waitNew(t, before, killedAt, 60*time.Second)
	t.Logf("failover: first delivery by the new leader %v after kill -9", failover.Round(time.Millisecond))
	mark := tr.distinct()
	waitFor(t, "traffic while gw-c is down", 30*time.Second, func() bool { return tr.distinct() > mark+1000 })

	dupesAtKill := tr.twice()
	// gw-c returns and takes the group back through the hand-over.
	c.start()
	waitFor(t, "gw-c leads again", 30*time.Second, func() bool { return leaderOf("telemetry.> workers", a, b, c) == "gw-c" })
	dupesAtHandOver := tr.twice()
	mark = tr.distinct()
	waitFor(t, "traffic after the hand-over", 30*time.Second, func() bool { return tr.distinct() > mark+1000 })
	close(stops["gw-a"])
	close(stops["gw-b"])
	go func() { // free the window slots of publishes whose ack died with gw-c
		for {
			select {
			case <-pubs["gw-c"].window:
			case <-time.After(5 * time.Second):
				return
			}
		}
	}()
	wg.Wait()
	want := map[string]bool{}
	for _, p := range pubs {
		for payload := range p.ackedPayloads() {
			want[payload] = true
		}
	}
	waitAllDelivered(t, tr, want, 60*time.Second)
	dupes := tr.twice()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.problems > 0 {
		t.Fatalf("%d order or in-flight violations", tr.problems)
	}
	t.Logf("%d pub-acked messages, all delivered; delivered more than once: %d in all, %d by the failover, %d after gw-c returned, %d after the hand-over; "+
		"first deliveries of messages seen before: %d flagged Edgeq-Redelivered: maybe, %d not",
		len(want), dupes, dupesAtKill, dupesAtHandOver-dupesAtKill, dupes-dupesAtHandOver, tr.flagged, tr.unflagged)
	// Every message a worker sees again as a first delivery of a new run
	// (the new leader after the kill, gw-c after the hand-over) says it may
	// have been delivered before: the new leader flags what is past the
	// commits in its own partitions too, which the old leader was reading.
	if tr.unflagged > 0 {
		t.Fatalf("%d of %d messages delivered again with Edgeq-Deliveries: 1 lack Edgeq-Redelivered: maybe", tr.unflagged, tr.flagged+tr.unflagged)
	}
}

// waitAllDelivered waits until every message of want is delivered, failing
// only when deliveries stop making progress for stall: on a loaded machine
// a backlog takes long, a lost message forever.
func waitAllDelivered(t *testing.T, tr *tracker, want map[string]bool, stall time.Duration) {
	t.Helper()
	missing := func() (n int, example string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for p := range want {
			if tr.seen[p] == 0 {
				n++
				example = p
			}
		}
		return n, example
	}
	last, progressAt := -1, time.Now()
	for {
		n, ex := missing()
		if n == 0 {
			return
		}
		if n != last {
			last, progressAt = n, time.Now()
		}
		if time.Since(progressAt) > stall {
			t.Fatalf("%d of %d acknowledged publishes not delivered, none for %v, e.g. %s", n, len(want), stall, ex)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderClock notes when each leader instance (the group ID in the ack
// subject) made its first delivery to the workers it runs.
type leaderClock struct {
	mu    sync.Mutex
	first map[string]time.Time // leader instance -> its first delivery
}

func (lc *leaderClock) leaders() int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return len(lc.first)
}

// worker joins the queue group on n: each message is noted, tracked, worked
// on for 200 µs and acked (a reconnecting connection buffers the ack).
func (lc *leaderClock) worker(t *testing.T, n *node, name string, tr *tracker) {
	nc := connect(t, n.url(), name)
	_, err := nc.QueueSubscribe("telemetry.>", "workers", func(m *nats.Msg) {
		lc.mu.Lock()
		if _, ok := lc.first[gidOf(m.Reply)]; !ok {
			lc.first[gidOf(m.Reply)] = time.Now()
		}
		lc.mu.Unlock()
		device, _ := tr.enter(name, m)
		time.Sleep(200 * time.Microsecond)
		tr.exit(device)
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// waitNew waits for a leader instance beyond the first before ones and
// returns how long after since its first delivery came.
func (lc *leaderClock) waitNew(t *testing.T, before int, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	var gap time.Duration
	waitFor(t, "deliveries by the new leader", within, func() bool {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		if len(lc.first) <= before {
			return false
		}
		for _, at := range lc.first {
			if at.After(since) {
				gap = max(gap, at.Sub(since))
			}
		}
		return true
	})
	return gap
}

// twice counts the messages delivered more than once so far.
func (tr *tracker) twice() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, k := range tr.seen {
		if k > 1 {
			n++
		}
	}
	return n
}

func connect(t testing.TB, url, name string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// pubLoop publishes round after round to devices "<tag>-dNN" on one node
// until stopped.
type pubLoop struct {
	p    *publisher
	stop chan struct{}
	done chan struct{}
}

func startPubLoop(t *testing.T, n *node, tag string, devices int) *pubLoop {
	l := &pubLoop{p: newPublisher(t, n.url(), 100), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		// At most one round per 10 ms (2,000 msg/s with 20 devices), so a
		// loaded machine's backlog stays bounded by the test's length.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			for d := 0; d < devices; d++ {
				select {
				case <-l.stop:
					return
				default:
				}
				dev := fmt.Sprintf("%s-d%02d", tag, d)
				l.p.publish(dev, fmt.Sprintf("%s|%d", dev, i))
			}
		}
	}()
	return l
}

// finish stops publishing and waits until the node acknowledged everything
// sent (its node is up).
func (l *pubLoop) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	<-l.done
	waitFor(t, "every publish acknowledged", 60*time.Second, func() bool { return uint64(l.p.acked()) == l.p.n.Load() })
}

// TestClusterLeaderPlannedRestart: planned restarts deliver nothing twice.
// Three nodes with publishers and workers on all of them. The leader gw-c
// is stopped with SIGTERM (it hands over: delivers what it skipped below
// what it delivered, waits for the acks, commits at every owner); gw-b
// takes over from the commits. gw-c returns and takes the group back
// through the hand-over. Then gw-a, which does not lead but has workers,
// is restarted (its members take nothing more, answer what they hold, and
// only then disconnect). Every pub-acked message is delivered, exactly
// once; per-device order and one-in-flight hold throughout.
func TestClusterLeaderPlannedRestart(t *testing.T) {
	nodes := clusterOf(t, "")
	a, b, c := nodes[0], nodes[1], nodes[2]
	waitFor(t, "gw-c leads", 30*time.Second, func() bool { return leaderOf("telemetry.> workers", a, b, c) == "gw-c" })
	tr := newTracker(t)
	lc := &leaderClock{first: map[string]time.Time{}}
	for _, n := range nodes {
		lc.worker(t, n, "w-"+n.nodeID, tr)
	}
	var loops []*pubLoop
	pubOn := map[string]*pubLoop{}
	startPub := func(n *node, tag string) {
		l := startPubLoop(t, n, tag, 20)
		loops = append(loops, l)
		pubOn[n.nodeID] = l
	}
	for _, n := range nodes {
		startPub(n, n.nodeID)
	}
	traffic := func(what string, more int) {
		t.Helper()
		mark := tr.distinct()
		waitFor(t, what, 60*time.Second, func() bool { return tr.distinct() > mark+more })
	}
	traffic("traffic before the leader stops", 1500)

	// The leader stops: SIGTERM.
	pubOn["gw-c"].finish(t)
	before := lc.leaders()
	termAt := time.Now()
	if code := c.stop(); code != 0 {
		t.Fatalf("gw-c exited with %d on SIGTERM", code)
	}
	stopped := time.Since(termAt)
	waitFor(t, "gw-b leads", 30*time.Second, func() bool { return leaderOf("telemetry.> workers", a, b) == "gw-b" })
	gap := lc.waitNew(t, before, termAt, 30*time.Second)
	t.Logf("gw-c stopped %v after SIGTERM; the new leader's first delivery came %v after it", stopped.Round(time.Millisecond), gap.Round(time.Millisecond))
	traffic("traffic while gw-c is down", 1000)
	dupesStop := tr.twice()

	// gw-c returns and takes the group back through the hand-over.
	c.start()
	waitFor(t, "gw-c leads again", 30*time.Second, func() bool { return leaderOf("telemetry.> workers", a, b, c) == "gw-c" })
	startPub(c, "gw-c2")
	traffic("traffic after the hand-over", 1000)
	dupesHandOver := tr.twice()

	// A node that does not lead, with workers and a publisher, restarts.
	pubOn["gw-a"].finish(t)
	if code := a.stop(); code != 0 {
		t.Fatalf("gw-a exited with %d on SIGTERM", code)
	}
	a.start()
	startPub(a, "gw-a2")
	traffic("traffic after gw-a's restart", 1000)

	want := map[string]bool{}
	for _, l := range loops {
		select {
		case <-l.stop:
		default:
			l.finish(t)
		}
		for payload := range l.p.ackedPayloads() {
			want[payload] = true
		}
	}
	waitAllDelivered(t, tr, want, 60*time.Second)
	time.Sleep(500 * time.Millisecond) // a late duplicate would show now
	tr.mu.Lock()
	defer tr.mu.Unlock()
	twice := 0
	var example string
	for payload := range want {
		if tr.seen[payload] > 1 {
			twice++
			example = payload
		}
	}
	t.Logf("%d pub-acked messages, all delivered; delivered more than once: %d (%d after the leader's stop, %d after the hand-over back, %d after gw-a's restart); deliveries by worker %v",
		len(want), twice, dupesStop, dupesHandOver-dupesStop, twice-dupesHandOver, tr.byWorker)
	if tr.problems > 0 {
		t.Errorf("%d order or in-flight violations", tr.problems)
	}
	if twice > 0 {
		t.Errorf("%d pub-acked messages delivered more than once in planned restarts (e.g. %s)", twice, example)
	}
}
