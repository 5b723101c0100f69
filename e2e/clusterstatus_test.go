package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"edgeq/gateway/metrics/lint"
)

// TestClusterStatusAndMetrics: a three-node loopback cluster (gw-c leads),
// a worker on gw-a and telemetry published on gw-b. /metrics of every node
// lints and shows the peers, who leads, the members by node and the
// forwards and relayed acks; `edgeq status` shows the cluster section. When
// gw-b is killed, gw-c shows it down in both.
func TestClusterStatusAndMetrics(t *testing.T) {
	nodes := clusterOf(t, "")
	a, b, c := nodes[0], nodes[1], nodes[2]
	const group = "telemetry.> workers"
	waitFor(t, "gw-c leads", 30*time.Second, func() bool { return leaderOf(group, a, b, c) == "gw-c" })
	tr := newTracker(t)
	startWorker(t, a.url(), "w-a", tr, func() {})
	p := newPublisher(t, b.url(), 50)
	const n = 100
	for i := range n {
		p.publish(fmt.Sprintf("d%02d", i%10), fmt.Sprintf("m%d", i))
	}
	waitFor(t, "every message delivered", 30*time.Second, func() bool { return tr.distinct() == n })

	k := lint.Key
	wl := []string{"filter", "telemetry.>", "queue", "workers"}
	// Acks, relays and commits settle after the deliveries.
	waitFor(t, "the cluster families of gw-c and gw-a", 15*time.Second, func() bool {
		vc, va := scrapeMetrics(t, c, ""), scrapeMetrics(t, a, "")
		return vc[k("edgeq_cluster_peers")] == 2 &&
			vc[k("edgeq_cluster_peer_up", "peer", "gw-a")] == 1 && vc[k("edgeq_cluster_peer_up", "peer", "gw-b")] == 1 &&
			vc[k("edgeq_group_leading", wl...)] == 1 && va[k("edgeq_group_leading", wl...)] == 0 &&
			va[k("edgeq_group_leader", append(wl, "leader", "gw-c")...)] == 1 &&
			vc[k("edgeq_group_epoch", wl...)] > 0 && vc[k("edgeq_group_epoch", wl...)] == va[k("edgeq_group_epoch", wl...)] &&
			vc[k("edgeq_group_members_by_node", append(wl, "node", "gw-a")...)] == 1 &&
			vc[k("edgeq_group_forwards_total", wl...)] >= n &&
			va[k("edgeq_cluster_forwards_received_total")] >= n && va[k("edgeq_cluster_acks_relayed_total")] >= n &&
			vc[k("edgeq_cluster_remote_commits_total", "result", "ok")] > 0 &&
			vc[k("edgeq_cluster_elections_total")] > 0 && vc[k("edgeq_cluster_leadership_changes_total", "change", "won")] > 0
	})

	// The human view of the leader and of the member's node.
	outC, err := runCmd(edgeqBin, "status", "--http", c.httpURL())
	if err != nil {
		t.Fatalf("edgeq status: %v\n%s", err, outC)
	}
	outA, err := runCmd(edgeqBin, "status", "--http", a.httpURL())
	if err != nil {
		t.Fatalf("edgeq status: %v\n%s", err, outA)
	}
	for _, check := range []struct {
		out, node string
		re        []string
	}{
		{outC, "gw-c", []string{
			`^cluster plant  peer listener 127\.0\.0\.1:\d+  peers 2 up, 0 down$`,
			`^telemetry\.>\s+workers\s+this node\s+1\s+\d+\s+\d+\s+\d+\s`,
			`^gw-a\s+127\.0\.0\.1:\d+( \(in\))?\s+1\s+\d+\s+up \S+\s+\d+\.\ds ago\s`,
			`^gw-b\s+127\.0\.0\.1:\d+( \(in\))?\s+2\s+\d+\s+up \S+\s+\d+\.\ds ago\s`,
			`^gw-c \(this node\)\s+\d+:gw-c\s+telemetry\.>\s+workers\s+gw-a:1\s+\d+$`,
			`^elections \d+, leaderships won [1-9]`,
		}},
		{outA, "gw-a", []string{
			`^telemetry\.>\s+workers\s+gw-c\s+1(\s+-){11}\s*$`,
			`^gw-c\s+\d+:gw-c\s+telemetry\.>\s+workers\s+gw-a:1\s+-$`,
			`^forwards received [1-9]\d* \(refused 0\), acks relayed [1-9]`,
		}},
	} {
		for _, re := range check.re {
			if !regexp.MustCompile(`(?m)` + re).MatchString(check.out) {
				t.Errorf("%s: no line matches %s in:\n%s", check.node, re, check.out)
			}
		}
	}

	b.kill()
	waitFor(t, "gw-b down at gw-c", 15*time.Second, func() bool {
		v := scrapeMetrics(t, c, "")
		return v[k("edgeq_cluster_peers")] == 1 && v[k("edgeq_cluster_peer_up", "peer", "gw-b")] == 0 &&
			v[k("edgeq_cluster_unreachable_addresses")] == 1 && v[k("edgeq_cluster_peer_downs_total")] >= 1
	})
	out, _ := runCmd(edgeqBin, "status", "--http", c.httpURL())
	for _, re := range []string{`^cluster plant  peer listener \S+  peers 1 up, 1 down$`, `^gw-b\s+127\.0\.0\.1:\d+\s+-\s+-\s+down(\s+-){6}$`} {
		if !regexp.MustCompile(`(?m)` + re).MatchString(out) {
			t.Errorf("gw-c after gw-b died: no line matches %s in:\n%s", re, out)
		}
	}
}
