package gateway

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"edgeq/gateway/config"
	"edgeq/gateway/metrics/lint"
)

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startClusterPair runs gw-a (priority 1) and gw-b (priority 2) of cluster
// "plant" on loopback with static peers and the given declared groups, and
// waits until both agree that gw-b leads every group.
func startClusterPair(t testing.TB, groups int) (a, b *Node, aAddr string) {
	t.Helper()
	aAddr, bAddr := freeAddr(t), freeAddr(t)
	off := false
	conf := func(id string, prio int, listen, peer string) func(*config.Config) {
		return func(c *config.Config) {
			c.NodeID = id
			c.Cluster = config.Cluster{Name: "plant", Secret: "0123456789abcdef-plant", Priority: prio, Listen: listen,
				Peers: []string{peer}, MDNS: &off, HeartbeatInterval: 50 * time.Millisecond, FailureTimeout: 500 * time.Millisecond}
			for i := range groups {
				c.Groups = append(c.Groups, config.Group{Subject: "telemetry.>", Queue: fmt.Sprintf("g%02d", i)})
			}
		}
	}
	a = startMetricsNode(t, conf("gw-a", 1, aAddr, bAddr))
	b = startMetricsNode(t, conf("gw-b", 2, bAddr, aAddr))
	agreed := func() bool {
		for _, n := range []*Node{a, b} {
			st := n.api.Status()
			if st.Cluster == nil || len(st.Cluster.Leaders) != groups {
				return false
			}
			for _, l := range st.Cluster.Leaders {
				if l.Leader != "gw-b" || l.Self != (n == b) {
					return false
				}
			}
			for _, g := range st.Groups {
				if g.Leading != (n == b) {
					return false
				}
			}
		}
		return true
	}
	for deadline := time.Now().Add(20 * time.Second); !agreed(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for gw-b to lead every group on both nodes")
		}
	}
	return a, b, aAddr
}

// TestClusterStatusAndMetrics: on a pair of nodes, /v1/status has the
// cluster's peers, leaders and counters under stable snake_case names, and
// /metrics the cluster families with the same leaders and epochs. When a
// peer stops, the other shows its address unreachable and the peer down.
func TestClusterStatusAndMetrics(t *testing.T) {
	a, b, aAddr := startClusterPair(t, 2)
	st := b.api.Status()
	c := st.Cluster
	if c.Name != "plant" || c.Listen == "" || len(c.Peers) != 1 || c.Peers[0].Node != "gw-a" || len(c.Unreachable) != 0 {
		t.Fatalf("cluster of gw-b: %+v", c)
	}
	if c.Election.Elections == 0 || c.Election.Leaderships < 2 || c.PeerEvents.Ups != 1 {
		t.Errorf("counters of gw-b: election %+v, peers %+v", c.Election, c.PeerEvents)
	}
	// The JSON names.
	body, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cluster map[string]json.RawMessage `json:"cluster"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "listen", "peers", "unreachable", "leaders", "refused_peers", "peer_events", "election", "data_path"} {
		if _, ok := doc.Cluster[k]; !ok {
			t.Errorf("cluster.%s missing in %s", k, body)
		}
	}
	var parts struct {
		PeerEvents map[string]uint64 `json:"peer_events"`
		Election   map[string]uint64 `json:"election"`
		DataPath   map[string]uint64 `json:"data_path"`
	}
	if err := json.Unmarshal(body, &struct {
		Cluster any `json:"cluster"`
	}{&parts}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"peer_events": {"refused_handshakes", "send_queue_overflows", "ups", "downs", "refused_frames", "busy_handshakes", "failed_handshakes"},
		"election":    {"elections", "leaderships", "take_overs", "hand_over_timeouts", "hand_overs", "drain_timeouts", "deposed", "stale_coordinators", "fenced"},
		"data_path":   {"forwards_in", "forwards_refused", "acks_relayed", "remote_commits", "remote_commit_failures", "fenced_requests"},
	}
	got := map[string]map[string]uint64{"peer_events": parts.PeerEvents, "election": parts.Election, "data_path": parts.DataPath}
	for part, keys := range want {
		if len(got[part]) != len(keys) {
			t.Errorf("cluster.%s has %d fields, want %d: %v", part, len(got[part]), len(keys), got[part])
		}
		for _, k := range keys {
			if _, ok := got[part][k]; !ok {
				t.Errorf("cluster.%s.%s missing", part, k)
			}
		}
	}

	// /metrics agrees with the status.
	k := lint.Key
	vb := values(t, b)
	for _, g := range st.Groups {
		gl := []string{"filter", g.Filter, "queue", g.Queue}
		l := c.Leaders[g.Filter+" "+g.Queue]
		for key, want := range map[string]float64{
			k("edgeq_group_leading", gl...):                          1,
			k("edgeq_group_leader", append(gl, "leader", "gw-b")...): 1,
		} {
			if vb[key] != want {
				t.Errorf("gw-b %s = %v, want %v", key, vb[key], want)
			}
		}
		if ep := fmt.Sprintf("%v:gw-b", vb[k("edgeq_group_epoch", gl...)]); ep != l.Epoch {
			t.Errorf("gw-b epoch of %s: metrics %s, status %s", g.Queue, ep, l.Epoch)
		}
	}
	for key, want := range map[string]float64{
		k("edgeq_cluster_info", "cluster", "plant"):        1,
		k("edgeq_cluster_peers"):                           1,
		k("edgeq_cluster_peer_up", "peer", "gw-a"):         1,
		k("edgeq_cluster_peer_partitions", "peer", "gw-a"): float64(a.log.NumPartitions()),
		k("edgeq_cluster_peer_ups_total"):                  1,
	} {
		if vb[key] != want {
			t.Errorf("gw-b %s = %v, want %v", key, vb[key], want)
		}
	}
	va := values(t, a)
	if va[k("edgeq_group_leading", "filter", "telemetry.>", "queue", "g00")] != 0 ||
		va[k("edgeq_group_leader", "filter", "telemetry.>", "queue", "g00", "leader", "gw-b")] != 1 {
		t.Errorf("gw-a does not show gw-b leading g00")
	}

	// gw-a stops.
	if err := a.Shutdown(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "gw-a down at gw-b", 10*time.Second, func() bool {
		c := b.api.Status().Cluster
		return len(c.Peers) == 0 && len(c.Unreachable) == 1 && c.Unreachable[0].Node == "gw-a" &&
			c.Unreachable[0].Addr == aAddr && c.PeerEvents.Downs == 1
	})
	vb = values(t, b)
	if vb[k("edgeq_cluster_peer_up", "peer", "gw-a")] != 0 || vb[k("edgeq_cluster_peers")] != 0 ||
		vb[k("edgeq_cluster_unreachable_addresses")] != 1 || vb[k("edgeq_cluster_peer_downs_total")] != 1 {
		t.Errorf("gw-a's departure not in gw-b's metrics")
	}
}

// BenchmarkScrapeCluster is BenchmarkScrape's "full" and "snapshot" on the
// leader of a two-node cluster with 10 groups: what the cluster part adds.
func BenchmarkScrapeCluster(b *testing.B) {
	_, n, _ := startClusterPair(b, 10)
	w := &discardWriter{h: http.Header{}}
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.handleMetrics(w, req)
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.snapshot(10, false)
		}
	})
	b.Run("cluster-snapshot", func(b *testing.B) {
		groups := n.queues.Stats()
		b.ReportAllocs()
		for b.Loop() {
			n.cluster.Snapshot(groups)
		}
	})
}
