package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const clusterSecret = "0123456789abcdef-plant-secret"

// clusterConf is a node's config in a loopback cluster with static peers.
func clusterConf(listen, prio int, extra string, peers ...int) string {
	s := fmt.Sprintf("groups:\n  - {subject: telemetry.>, queue: workers}\n%scluster:\n  name: plant\n  secret: %s\n  priority: %d\n  listen: 127.0.0.1:%d\n  mdns: false\n  heartbeat_interval: 100ms\n  failure_timeout: 1s\n  peers:\n",
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
	ports := []int{freePort(t), freePort(t), freePort(t)}
	ids := []string{"gw-a", "gw-b", "gw-c"}
	var nodes []*node
	for i := range ids {
		var peers []int
		for j := range ports {
			if j != i {
				peers = append(peers, ports[j])
			}
		}
		n := newNode(t, clusterConf(ports[i], i+1, "", peers...))
		n.nodeID = ids[i]
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.start()
	}
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

// sortedKeys is for stable failure messages.
func sortedKeys[M ~map[string]V, V any](m M) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}
