package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Delivery across nodes on the LAN harness: the queue group's leader reads
// every node's log and delivers to workers on every node.

// lanTraffic publishes on each node for the given devices until stopped.
type lanTraffic struct {
	pubs map[string]*publisher
	stop map[string]chan struct{}
	wg   sync.WaitGroup
}

// startLANTraffic publishes on every node: devices "<node>-dNN" only there
// and, with shared, devices "shared-N" on every node; rounds of one message
// per device (0: until halted), pace apart.
func startLANTraffic(t *testing.T, nodes []*lanNode, devices, shared, rounds int, pace time.Duration) *lanTraffic {
	lt := &lanTraffic{pubs: map[string]*publisher{}, stop: map[string]chan struct{}{}}
	for _, n := range nodes {
		p := newPublisherOn(t, n.nats(publisherOptions()...), 100)
		stop := make(chan struct{})
		lt.pubs[n.id], lt.stop[n.id] = p, stop
		lt.wg.Add(1)
		go func(id string) {
			defer lt.wg.Done()
			for i := 1; rounds == 0 || i <= rounds; i++ {
				for d := 0; d < devices+shared; d++ {
					select {
					case <-stop:
						return
					default:
					}
					dev := fmt.Sprintf("%s-d%02d", id, d)
					if d >= devices {
						dev = fmt.Sprintf("shared-%d", d-devices)
					}
					p.publish(dev, fmt.Sprintf("%s|%s|%d", id, dev, i))
				}
				time.Sleep(pace)
			}
		}(n.id)
	}
	return lt
}

func (lt *lanTraffic) halt() {
	for _, s := range lt.stop {
		close(s)
	}
	lt.wg.Wait()
}

// acked is every payload a node acknowledged.
func (lt *lanTraffic) acked() map[string]bool {
	out := map[string]bool{}
	for _, p := range lt.pubs {
		for payload := range p.ackedPayloads() {
			out[payload] = true
		}
	}
	return out
}

// TestLANDeliveryAcrossNodes: three nodes in their own namespaces find each
// other by mDNS; telemetry is published on all three (some devices on every
// node) and workers of one queue group are connected to different nodes.
// Every message is delivered at least once, each device's first deliveries
// keep their order per ingesting node, and no device ever has two messages
// in workers' hands.
func TestLANDeliveryAcrossNodes(t *testing.T) {
	l := newLAN(t, 3)
	nodes := l.startNodes(lanTrio()...)
	lanFormed(t, nodes, "gw-c", 30*time.Second)
	tr := newTracker(t)
	for i, n := range []*lanNode{nodes[0], nodes[0], nodes[1]} {
		startWorkerOn(t, n.nats(), "up", fmt.Sprintf("w%d-%s", i, n.id), tr, randomDelay(500))
	}
	waitNodes(t, "the workers known on every node", 10*time.Second, nodes, func(sts []lanStatus) bool {
		for _, s := range sts {
			if s.members(lanGroup) != 3 {
				return false
			}
		}
		return true
	})
	lt := startLANTraffic(t, nodes, 20, 4, 40, 0)
	lt.wg.Wait()
	const total = 3 * 24 * 40
	waitFor(t, "every publish acknowledged", 30*time.Second, func() bool { return len(lt.acked()) == total })
	want := lt.acked()
	waitAllDelivered(t, tr, want, 60*time.Second)
	tr.mu.Lock()
	problems, byWorker := tr.problems, fmt.Sprint(tr.byWorker)
	tr.mu.Unlock()
	if problems > 0 {
		t.Fatalf("%d order or in-flight violations", problems)
	}
	t.Logf("%d messages from three nodes delivered; by worker %s", len(want), byWorker)
	// Nothing goes to gw-c's NATS clients, and yet it delivered everything.
	_, sts := waitNodes(t, "the leader's status to count its forwards", 10*time.Second, nodes, func(sts []lanStatus) bool {
		for _, g := range sts[2].Groups {
			if g.Filter+" "+g.Queue == lanGroup && g.Leading && g.Forwards >= uint64(len(want)) {
				return true
			}
		}
		return false
	})
	for _, s := range sts {
		for _, g := range s.Groups {
			if g.Filter+" "+g.Queue == lanGroup && (g.MembersByNode["gw-a"] != 2 || g.MembersByNode["gw-b"] != 1) {
				t.Errorf("%s: members by node %v", s.Node, g.MembersByNode)
			}
		}
	}
}

// TestLANPartitionDelivery: one node's cable is pulled while telemetry
// flows. Each side keeps serving what it can reach: the isolated node
// elects itself and delivers its own log to its own worker, the other two
// deliver theirs. After the cable is back exactly one leader remains, every
// acknowledged message is delivered and each device's order holds.
func TestLANPartitionDelivery(t *testing.T) {
	l := newLAN(t, 3)
	nodes := l.startNodes(lanTrio()...)
	lanFormed(t, nodes, "gw-c", 30*time.Second)
	tr := newTracker(t)
	for _, n := range nodes {
		startWorkerOn(t, n.nats(), "up", "w-"+n.id, tr, randomDelay(300))
	}
	lt := startLANTraffic(t, nodes, 10, 0, 0, 5*time.Millisecond)
	waitFor(t, "traffic before the cut", 30*time.Second, func() bool { return tr.distinct() > 1000 })

	// Messages in workers' hands when the cable goes may be delivered again
	// by gw-a, which elects itself and starts from the last commits it got:
	// like a crash, the cut starts a new epoch for the in-flight check.
	tr.crashed()
	l.setLink(0, false) // gw-a alone
	cut := time.Now()
	waitNodes(t, "gw-a to lead alone and gw-c to lead the others", 15*time.Second, nodes, func(sts []lanStatus) bool {
		return sts[0].leader(lanGroup).Leader == "gw-a" && sts[0].leader(lanGroup).Self &&
			sts[1].leader(lanGroup).Leader == "gw-c" && sts[2].leader(lanGroup).Self
	})
	// Both sides deliver what they can reach.
	tr.mu.Lock()
	before := map[string]int{}
	for w, n := range tr.byWorker {
		before[w] = n
	}
	tr.mu.Unlock()
	waitFor(t, "every worker served during the partition", 30*time.Second, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, n := range nodes {
			if tr.byWorker["w-"+n.id] < before["w-"+n.id]+200 {
				return false
			}
		}
		return true
	})
	t.Logf("partition: both sides delivering %v after the cut", time.Since(cut).Round(time.Millisecond))

	l.setLink(0, true)
	healed := time.Now()
	waitNodes(t, "one leader (gw-c) on all three", 20*time.Second, nodes, func(sts []lanStatus) bool {
		leader, ok := agreedLeader(sts, lanGroup)
		return ok && leader == "gw-c" && !sts[0].leader(lanGroup).Self && !sts[1].leader(lanGroup).Self
	})
	t.Logf("heal: one leader %v after the cable came back", time.Since(healed).Round(time.Millisecond))
	mark := tr.distinct()
	waitFor(t, "traffic after the heal", 30*time.Second, func() bool { return tr.distinct() > mark+1000 })
	lt.halt()
	waitAllDelivered(t, tr, lt.acked(), 60*time.Second)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.problems > 0 {
		t.Fatalf("%d order or in-flight violations", tr.problems)
	}
	dupes := 0
	for _, n := range tr.seen {
		if n > 1 {
			dupes++
		}
	}
	t.Logf("%d messages delivered, %d more than once; by worker %v", len(tr.seen), dupes, tr.byWorker)
}
