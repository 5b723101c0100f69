package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestClusterPeersAndLeaders: two nodes with static peers authenticate each
// other and elect one leader (the higher priority) for a declared group; a
// node with the wrong secret never becomes a peer.
func TestClusterPeersAndLeaders(t *testing.T) {
	pa, pb, pc := freePort(t), freePort(t), freePort(t)
	conf := func(listen, prio int, secret string, peers ...int) string {
		s := fmt.Sprintf("groups:\n  - {subject: telemetry.>, queue: up}\ncluster:\n  name: plant\n  secret: %s\n  priority: %d\n  listen: 127.0.0.1:%d\n  mdns: false\n  heartbeat_interval: 200ms\n  failure_timeout: 3s\n  peers:\n", secret, prio, listen)
		for _, p := range peers {
			s += fmt.Sprintf("    - 127.0.0.1:%d\n", p)
		}
		return s
	}
	const secret = "0123456789abcdef-plant-secret"
	a := newNode(t, conf(pa, 1, secret, pb))
	b := newNode(t, conf(pb, 5, secret, pa))
	intruder := newNode(t, conf(pc, 9, "a-wrong-secret-of-length", pa, pb))
	a.nodeID, b.nodeID, intruder.nodeID = "gw-a", "gw-b", "gw-x"
	a.start()
	b.start()
	intruder.start()
	type status struct {
		Node    string `json:"node"`
		Cluster struct {
			Peers []struct {
				Node string `json:"Node"`
			} `json:"peers"`
			Leaders map[string]struct {
				Leader string `json:"leader"`
				Self   bool   `json:"self"`
			} `json:"leaders"`
			Refused uint64 `json:"refused_peers"`
		} `json:"cluster"`
	}
	get := func(n *node) status {
		out, err := runCmd(edgeqBin, "status", "--json", "--http", n.httpURL())
		var st status
		if err != nil || json.Unmarshal([]byte(out), &st) != nil {
			return status{}
		}
		return st
	}
	waitFor(t, "one leader for the group on both nodes", 30*time.Second, func() bool {
		sa, sb := get(a), get(b)
		la, lb := sa.Cluster.Leaders["telemetry.> up"], sb.Cluster.Leaders["telemetry.> up"]
		return len(sa.Cluster.Peers) == 1 && len(sb.Cluster.Peers) == 1 &&
			la.Leader == "gw-b" && lb.Leader == "gw-b" && lb.Self && !la.Self
	})
	waitFor(t, "the intruder refused", 30*time.Second, func() bool {
		return get(a).Cluster.Refused > 0 && len(get(intruder).Cluster.Peers) == 0
	})
	if st := get(a); len(st.Cluster.Peers) != 1 || st.Cluster.Peers[0].Node != "gw-b" {
		t.Fatalf("peers of a: %+v", st.Cluster.Peers)
	}
}
