package metrics_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"edgeq/discovery/election"
	"edgeq/gateway/cluster"
	"edgeq/gateway/groups"
	"edgeq/gateway/metrics"
	"edgeq/gateway/metrics/lint"
)

// TestClusterExpositionGolden pins the cluster families on the cluster
// fixture: peers up and down, election and data-path counters, and per
// group the leader, epoch and members by node. Run with -update after an
// intended change and review the diff.
func TestClusterExpositionGolden(t *testing.T) {
	const golden = "testdata/cluster.golden"
	var b bytes.Buffer
	s := clusterSnapshot(t, 2)
	cluster.WriteMetrics(metrics.NewWriter(&b, s.Time), s.Cluster, s.Groups, &s.Dispatch)
	got := b.Bytes()
	mustLint(t, got)
	compareGolden(t, golden, got)
}

// TestRenderClusterValues: what the cluster series say on the whole page,
// the partitions of a peer included; a standalone node has none of them.
func TestRenderClusterValues(t *testing.T) {
	s := clusterSnapshot(t, 4)
	text := render(s)
	mustLint(t, text)
	v := mustValues(t, text)
	k := lint.Key
	g0 := []string{"filter", "telemetry.>", "queue", "workers-00"}
	g1 := []string{"filter", "telemetry.>", "queue", "workers-01"}
	g2 := []string{"filter", "telemetry.>", "queue", "workers-02"}
	tests := []struct {
		key  string
		want float64
	}{
		{k("edgeq_cluster_info", "cluster", "plant"), 1},
		{k("edgeq_cluster_peers"), 2},
		{k("edgeq_cluster_unreachable_addresses"), 3},
		{k("edgeq_cluster_peer_up", "peer", "gw-a"), 1},
		{k("edgeq_cluster_peer_up", "peer", "gw-c"), 1},
		{k("edgeq_cluster_peer_up", "peer", "gw-d"), 0},
		{k("edgeq_cluster_peer_priority", "peer", "gw-c"), 3},
		{k("edgeq_cluster_peer_partitions", "peer", "gw-a"), 10},
		{k("edgeq_cluster_peer_send_queue_bytes", "peer", "gw-a"), 512},
		{k("edgeq_cluster_peer_connection_start_time_seconds", "peer", "gw-a"), 1_700_000_000},
		{k("edgeq_cluster_peer_last_frame_age_seconds", "peer", "gw-a"), 0.25},
		{k("edgeq_cluster_peer_frames_total", "peer", "gw-a", "direction", "in"), 1000},
		{k("edgeq_cluster_peer_frames_total", "peer", "gw-a", "direction", "out"), 900},
		{k("edgeq_cluster_peer_bytes_total", "peer", "gw-c", "direction", "out"), 6000},
		{k("edgeq_cluster_peer_ups_total"), 5},
		{k("edgeq_cluster_peer_downs_total"), 3},
		{k("edgeq_cluster_refused_handshakes_total"), 4},
		{k("edgeq_cluster_send_queue_overflows_total"), 1},
		{k("edgeq_cluster_refused_frames_total"), 7},
		{k("edgeq_cluster_busy_handshakes_total"), 11},
		{k("edgeq_cluster_failed_handshakes_total"), 12},
		{k("edgeq_cluster_handshakes_in_progress"), 2},
		{k("edgeq_cluster_elections_total"), 9},
		{k("edgeq_cluster_leadership_changes_total", "change", "won"), 6},
		{k("edgeq_cluster_leadership_changes_total", "change", "handed_over"), 3},
		{k("edgeq_cluster_leadership_changes_total", "change", "deposed"), 2},
		{k("edgeq_cluster_take_overs_total"), 2},
		{k("edgeq_cluster_hand_over_timeouts_total", "side", "successor"), 1},
		{k("edgeq_cluster_hand_over_timeouts_total", "side", "leader"), 0},
		{k("edgeq_cluster_stale_coordinators_total"), 8},
		{k("edgeq_cluster_fenced_requests_total"), 6},
		{k("edgeq_cluster_forwards_received_total"), 300},
		{k("edgeq_cluster_forwards_refused_total"), 3},
		{k("edgeq_cluster_acks_relayed_total"), 290},
		{k("edgeq_cluster_remote_commits_total", "result", "ok"), 77},
		{k("edgeq_cluster_remote_commits_total", "result", "failed"), 1},
		{k("edgeq_group_leading", g0...), 1},
		{k("edgeq_group_leading", g1...), 0},
		{k("edgeq_group_leading", g2...), 0},
		{k("edgeq_group_forwards_total", g0...), 1200},
		{k("edgeq_group_forwards_total", g1...), 0},
		{k("edgeq_group_leader", append(g0, "leader", "gw-b")...), 1},
		{k("edgeq_group_leader", append(g1, "leader", "gw-c")...), 1},
		{k("edgeq_group_epoch", g0...), 7},
		{k("edgeq_group_epoch", g1...), 4},
		{k("edgeq_group_members_by_node", append(g0, "node", "gw-a")...), 2},
		{k("edgeq_group_members_by_node", append(g0, "node", "gw-b")...), 1},
		{k("edgeq_group_members_by_node", append(g1, "node", "gw-c")...), 1},
		// gw-a's partition 1 as the leader last heard its durable offset
		// (501), committed to 490.
		{k("edgeq_group_lag", append(g0, "partition", "gw-a/1")...), 11},
		{k("edgeq_group_window_span", append(g0, "partition", "gw-a/0")...), 5},
		{k("edgeq_group_lag", append(g0, "partition", "3")...), 45},
	}
	for _, tt := range tests {
		got, ok := v[tt.key]
		if !ok {
			t.Errorf("%s: missing", tt.key)
			continue
		}
		if got != tt.want {
			t.Errorf("%s = %v, want %v", tt.key, got, tt.want)
		}
	}
	// A group being elected has no leader or epoch series; a node with no
	// members of a group has no members_by_node series for it.
	for key := range v {
		for _, bad := range []string{
			k("edgeq_group_epoch", g2...),
			k("edgeq_group_members_by_node", append(g1, "node", "gw-b")...),
		} {
			if key == bad {
				t.Errorf("unexpected series %s", key)
			}
		}
		if strings.HasPrefix(key, "edgeq_group_leader{") && strings.Contains(key, `queue="workers-02"`) {
			t.Errorf("unexpected series %s", key)
		}
	}

	s.Cluster = nil
	standalone := render(s)
	for _, f := range []string{"edgeq_cluster_", "edgeq_group_leading", "edgeq_group_leader", "edgeq_group_epoch", "edgeq_group_members_by_node", "edgeq_group_forwards_total"} {
		if bytes.Contains(standalone, []byte("\n# TYPE "+f)) {
			t.Errorf("standalone page has %s families", f)
		}
	}
}

// TestRenderClusterBounded: at the limits (64 peers connected, 64 more
// down, 64 groups with members on every node) the page lints, every series
// is unique, and the cluster adds exactly 10 series per connected peer, one
// per down node, and 4 plus one per node with members for each group.
func TestRenderClusterBounded(t *testing.T) {
	const peers, ngroups = 64, 64
	series := func(s *Snapshot) (int, int) { b := render(s); return mustLint(t, b).Series, len(b) }
	empty, _ := series(&Snapshot{})
	fixed, _ := series(&Snapshot{Cluster: &cluster.Stats{Name: "plant"}})
	fixed -= empty
	s := clusterLimits(peers, ngroups)
	all, size := series(s)
	standalone := *s
	standalone.Cluster = nil
	without, _ := series(&standalone)
	want := fixed + 10*peers + peers + ngroups*(4+peers+1)
	if added := all - without; added != want {
		t.Errorf("the cluster adds %d series at the limits, want %d", added, want)
	}
	t.Logf("cluster series at %d peers (+%d down) and %d groups: %d of the page's %d (%d bytes); %d with nothing in the cluster",
		peers, peers, ngroups, all-without, all, size, fixed)
}

// clusterLimits is node gw-000 with peers connected peers, as many down,
// and groups groups with a member on every node.
func clusterLimits(peers, ngroups int) *Snapshot {
	s := &Snapshot{Node: "gw-000", Time: time.Unix(1_700_003_600, 0), Cluster: &cluster.Stats{
		Name: "plant", Leaders: map[groups.GroupKey]cluster.Leader{}}}
	for i := range peers {
		node := fmt.Sprintf("gw-%03d", i+1)
		s.Cluster.Peers = append(s.Cluster.Peers, cluster.PeerStatus{Node: node, Since: s.Time, LastSeen: s.Time})
		s.Cluster.Unreachable = append(s.Cluster.Unreachable, cluster.AddrStatus{Addr: fmt.Sprintf("10.1.0.%d:7420", i), Node: fmt.Sprintf("gone-%03d", i)})
	}
	for g := range ngroups {
		gs := groups.GroupStats{Key: groups.GroupKey{Filter: "telemetry.>", Queue: fmt.Sprintf("q%02d", g)}, Members: map[string]int{"gw-000": 1}}
		for _, p := range s.Cluster.Peers {
			gs.Members[p.Node] = 1
		}
		s.Groups = append(s.Groups, gs)
		l := s.Cluster.Peers[g%peers].Node
		s.Cluster.Leaders[gs.Key] = cluster.Leader{Node: l, Epoch: election.Epoch{N: uint64(g + 1), Leader: election.NodeID(l)}}
	}
	return s
}
