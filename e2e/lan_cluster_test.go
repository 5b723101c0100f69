package e2e

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster tests on the LAN harness (lan_test.go): real edgeq nodes, each in
// its own network namespace, finding each other by mDNS multicast alone.
// They check membership, leadership and delivery across nodes.

// lanTrio is the usual three nodes: gw-c has the highest priority, so it
// leads every group while it is up.
func lanTrio() []lanSpec {
	return []lanSpec{{ID: "gw-a", Priority: 1}, {ID: "gw-b", Priority: 2}, {ID: "gw-c", Priority: 3}}
}

// lanFormed waits until every node lists all the others as peers and all
// agree on leader for lanGroup, and returns the time it took.
func lanFormed(t *testing.T, nodes []*lanNode, leader string, within time.Duration) time.Duration {
	t.Helper()
	took, _ := waitNodes(t, "every node to list all others and agree on "+leader+" for "+lanGroup, within, nodes,
		func(sts []lanStatus) bool {
			l, ok := agreedLeader(sts, lanGroup)
			return ok && l == leader && peersAre(sts, nodes)
		})
	return took
}

// compareEpochs orders two epochs as status prints them ("7:gw-c"): by
// number, then leader ID, as the election does.
func compareEpochs(a, b string) int {
	na, la, _ := strings.Cut(a, ":")
	nb, lb, _ := strings.Cut(b, ":")
	x, _ := strconv.ParseUint(na, 10, 64)
	y, _ := strconv.ParseUint(nb, 10, 64)
	if c := cmp.Compare(x, y); c != 0 {
		return c
	}
	return strings.Compare(la, lb)
}

// TestLANDiscoveryAndElection: three nodes find each other by mDNS alone,
// each lists the two others (at their LAN addresses), all three agree that
// the highest priority leads the declared group, and each node takes
// publishes and queue members over NATS.
func TestLANDiscoveryAndElection(t *testing.T) {
	l := newLAN(t, 3)
	nodes := l.startNodes(lanTrio()...)
	took := lanFormed(t, nodes, "gw-c", 30*time.Second)
	t.Logf("discovery and election: %v after the last node was ready", took)

	for i, n := range nodes {
		st, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st.Cluster.Peers {
			// A peer's address is the one mDNS gave (dialed) or the peer's
			// own source address (accepted): a LAN address either way.
			j := slices.Index(ids(nodes...), p.Node)
			if host, _, _ := strings.Cut(p.Addr, ":"); j < 0 || host != nodes[j].addr() {
				t.Errorf("%s lists peer %s at %s, want %s", nodes[i].id, p.Node, p.Addr, nodes[j].addr())
			}
			if want := nodes[j].spec.Priority; p.Priority != want {
				t.Errorf("%s sees %s with priority %d, want %d", nodes[i].id, p.Node, p.Priority, want)
			}
		}
	}

	for _, n := range nodes {
		nc := n.nats()
		reply, err := nc.Request("telemetry.dev-"+n.id, []byte(`{"t":21.5}`), 5*time.Second)
		if err != nil {
			t.Fatalf("publish to %s: %v", n.id, err)
		}
		var ack struct {
			Node   string `json:"node"`
			Offset uint64 `json:"offset"`
			Seq    uint64 `json:"seq"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal(reply.Data, &ack); err != nil || ack.Error != "" || ack.Node != n.id || ack.Offset == 0 || ack.Seq != 1 {
			t.Fatalf("publish ack from %s: %s (%v)", n.id, reply.Data, err)
		}
		sub, err := nc.QueueSubscribeSync("telemetry.>", "up")
		if err != nil {
			t.Fatalf("join the group on %s: %v", n.id, err)
		}
		if err := nc.Flush(); err != nil || nc.LastError() != nil {
			t.Fatalf("join the group on %s: flush %v, last error %v", n.id, err, nc.LastError())
		}
		defer sub.Unsubscribe()
	}
	// Every node knows every node's member.
	waitNodes(t, "one member of "+lanGroup+" per node, known on every node", 10*time.Second, nodes, func(sts []lanStatus) bool {
		for _, s := range sts {
			if s.members(lanGroup) != 3 {
				return false
			}
		}
		return true
	})
}

// TestLANWrongSecret: a node of the same cluster name with the wrong secret,
// and the highest priority, is on the LAN from the start. The others find it
// by mDNS and refuse it (refused_peers), it never appears among their peers
// and never leads their group.
func TestLANWrongSecret(t *testing.T) {
	l := newLAN(t, 4)
	intruder := l.newNode(3, lanSpec{ID: "gw-x", Priority: 9, Secret: "not-the-plant-secret-0123456789"})
	intruder.start()
	nodes := make([]*lanNode, 0, 3)
	for i, s := range lanTrio() {
		n := l.newNode(i, s)
		n.start()
		nodes = append(nodes, n)
	}
	seen := func(sts []lanStatus) {
		for _, s := range sts {
			if slices.Contains(s.peers(), "gw-x") || s.leader(lanGroup).Leader == "gw-x" {
				t.Errorf("the intruder got in: %s", s)
			}
		}
	}
	waitNodes(t, "the trio formed and every node refused the intruder", 30*time.Second, nodes, func(sts []lanStatus) bool {
		seen(sts)
		l, ok := agreedLeader(sts, lanGroup)
		refused := true
		for _, s := range sts {
			refused = refused && s.Cluster.Refused > 0
		}
		return ok && l == "gw-c" && peersAre(sts, nodes) && refused
	})
	// Several dial rounds (1 s) and heartbeats more: still out.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		_, sts := waitNodes(t, "statuses", 5*time.Second, nodes, func([]lanStatus) bool { return true })
		seen(sts)
		time.Sleep(200 * time.Millisecond)
	}
	if st, err := intruder.status(); err != nil || len(st.peers()) != 0 || st.Cluster.Refused == 0 {
		t.Errorf("the intruder's own view: %v %v; want no peers and refusals", st, err)
	}
}

// TestLANPartitionElection pulls one node's cable: after the failure
// timeout each side elects its own leader (the isolated node leads alone,
// the two others agree on one). With the cable back, within a bound,
// exactly one leader remains on all three: the highest-ranked node.
func TestLANPartitionElection(t *testing.T) {
	for _, tc := range []struct {
		name       string
		isolate    int    // slot of the node cut off
		pairLeader string // the other side's leader while cut
	}{
		{"leader cut off", 2, "gw-b"},
		{"follower cut off", 0, "gw-c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLAN(t, 3)
			nodes := l.startNodes(lanTrio()...)
			lanFormed(t, nodes, "gw-c", 30*time.Second)
			_, sts := waitNodes(t, "statuses", 5*time.Second, nodes, func([]lanStatus) bool { return true })
			before := sts[0].leader(lanGroup).Epoch

			iso := nodes[tc.isolate]
			rest := others(nodes, iso)
			fail := iso.spec.FailureTimeout
			cut := time.Now()
			l.setLink(tc.isolate, false)
			took, _ := waitNodes(t, "two sides with a leader each", fail+10*time.Second, nodes, func(sts []lanStatus) bool {
				var pair []lanStatus
				for i, s := range sts {
					if i == tc.isolate {
						if len(s.peers()) != 0 || s.leader(lanGroup).Leader != iso.id || !s.leader(lanGroup).Self {
							return false
						}
					} else {
						pair = append(pair, s)
					}
				}
				l, ok := agreedLeader(pair, lanGroup)
				return ok && l == tc.pairLeader && peersAre(pair, rest)
			})
			t.Logf("partition: both sides led %v after the cut (failure timeout %v)", took, fail)

			healed := time.Now()
			l.setLink(tc.isolate, true)
			took, sts = waitNodes(t, "one leader, gw-c, on all three after the heal", 20*time.Second, nodes, func(sts []lanStatus) bool {
				l, ok := agreedLeader(sts, lanGroup)
				return ok && l == "gw-c" && peersAre(sts, nodes)
			})
			t.Logf("heal: one leader on all three %v after the link came back (%v since the cut)", took, time.Since(cut))
			if after := sts[0].leader(lanGroup).Epoch; compareEpochs(after, before) <= 0 {
				t.Errorf("epoch %s after the heal, %s before: a new leadership has a newer epoch", after, before)
			}
			// It stays that way over an announce interval (2 s) and more.
			deadline := healed.Add(took + 3*time.Second)
			for time.Now().Before(deadline) {
				_, sts := waitNodes(t, "statuses", 5*time.Second, nodes, func([]lanStatus) bool { return true })
				if l, ok := agreedLeader(sts, lanGroup); !ok || l != "gw-c" {
					t.Fatalf("leadership moved after the heal: %v", sts)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// TestLANLeaderKill: the leader dies; the two others elect a new one
// within 5 s of the failure timeout. Killed with SIGKILL, its kernel closes
// its connections, so the survivors notice at once; frozen (SIGSTOP, as a
// hung or powered-off gateway whose sockets stay open) only the failure
// timeout reveals it. Then the node restarts on its data directory, with
// its node ID, and takes the group back.
func TestLANLeaderKill(t *testing.T) {
	for _, tc := range []struct {
		name   string
		freeze bool
	}{
		{"kill -9", false},
		{"frozen", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLAN(t, 3)
			nodes := l.startNodes(lanTrio()...)
			lanFormed(t, nodes, "gw-c", 30*time.Second)
			_, sts := waitNodes(t, "statuses", 5*time.Second, nodes, func([]lanStatus) bool { return true })
			first := sts[0].leader(lanGroup).Epoch

			c := nodes[2]
			rest := nodes[:2]
			fail := c.spec.FailureTimeout
			if tc.freeze {
				c.freeze()
			} else {
				c.kill()
			}
			const bound = 5 * time.Second // the failover bound, after the failure timeout
			took, sts := waitNodes(t, "gw-a and gw-b to elect gw-b", fail+bound, rest, func(sts []lanStatus) bool {
				l, ok := agreedLeader(sts, lanGroup)
				return ok && l == "gw-b" && peersAre(sts, rest)
			})
			t.Logf("failover (%s): gw-b leads on both survivors %v after gw-c died (failure timeout %v, bound %v after it)",
				tc.name, took, fail, bound)
			second := sts[0].leader(lanGroup).Epoch
			if compareEpochs(second, first) <= 0 {
				t.Errorf("epoch %s after the failover, %s before: epochs only grow", second, first)
			}

			if tc.freeze {
				c.kill()
			}
			c.restart()
			took, sts = waitNodes(t, "the restarted gw-c to lead on all three", 30*time.Second, nodes, func(sts []lanStatus) bool {
				l, ok := agreedLeader(sts, lanGroup)
				return ok && l == "gw-c" && peersAre(sts, nodes)
			})
			t.Logf("the restarted gw-c leads on all three %v after it was ready", took)
			if third := sts[0].leader(lanGroup).Epoch; compareEpochs(third, second) <= 0 {
				t.Errorf("epoch %s after gw-c took the group back, %s before", third, second)
			}
			// It took it back through the safe hand-over: gw-c waited for its
			// peers before electing, asked gw-b, and gw-b drained; nobody was
			// deposed by a newer epoch.
			if e := sts[1].Cluster.Election; e.HandOvers < 1 || e.Deposed != 0 {
				t.Errorf("gw-b's election counters %+v: want a hand-over and no deposition", e)
			}
			if e := sts[2].Cluster.Election; e.TakeOvers < 1 {
				t.Errorf("gw-c's election counters %+v: want a take-over", e)
			}
		})
	}
}
