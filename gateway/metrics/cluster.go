package metrics

import (
	"time"

	"edgeq/gateway/cluster"
)

// renderCluster writes the cluster families: peers, the election, the data
// path between nodes, and per queue group its leader and members by node.
// Nothing of it on a standalone node.
//
// Cardinality: a peer label for each connected peer and each down node an
// address to dial led to (each bounded by cluster's MaxPeers, 64); group
// labels for each queue group (queue.max_groups), with members by node for
// each node that has members of the group.
func renderCluster(e *enc, s *Snapshot) {
	c := s.Cluster
	if c == nil {
		return
	}
	e.family("edgeq_cluster_info", gauge)
	e.u("edgeq_cluster_info", 1, "cluster", c.Name)
	e.gauge1("edgeq_cluster_peers", uint64(len(c.Peers)))
	e.gauge1("edgeq_cluster_unreachable_addresses", uint64(len(c.Unreachable)))

	down := c.DownPeers()
	if len(c.Peers)+len(down) > 0 {
		// 1 while connected; 0 for a node an address to dial led to, now
		// without a connection. A peer that only ever dialed this node has
		// no series once it is gone.
		e.family("edgeq_cluster_peer_up", gauge)
		for _, p := range c.Peers {
			e.u("edgeq_cluster_peer_up", 1, "peer", p.Node)
		}
		for _, n := range down {
			e.u("edgeq_cluster_peer_up", 0, "peer", n)
		}
	}
	if len(c.Peers) > 0 {
		type ps = cluster.PeerStatus
		per := []struct {
			name string
			v    func(*ps) uint64
		}{
			{"edgeq_cluster_peer_priority", func(p *ps) uint64 { return uint64(max(p.Priority, 0)) }},
			{"edgeq_cluster_peer_partitions", func(p *ps) uint64 { return uint64(max(p.Partitions, 0)) }},
			{"edgeq_cluster_peer_send_queue_bytes", func(p *ps) uint64 { return uint64(max(p.QueuedBytes, 0)) }},
		}
		for _, f := range per {
			e.family(f.name, gauge)
			for i := range c.Peers {
				e.u(f.name, f.v(&c.Peers[i]), "peer", c.Peers[i].Node)
			}
		}
		// A timestamp, so that changes() counts reconnections.
		e.family("edgeq_cluster_peer_connection_start_time_seconds", gauge)
		for _, p := range c.Peers {
			e.f("edgeq_cluster_peer_connection_start_time_seconds", unixSeconds(p.Since), "peer", p.Node)
		}
		// An age at the snapshot's time: heartbeats keep it below the
		// heartbeat interval on a healthy link.
		e.family("edgeq_cluster_peer_last_frame_age_seconds", gauge)
		for _, p := range c.Peers {
			e.f("edgeq_cluster_peer_last_frame_age_seconds", max(s.Time.Sub(p.LastSeen).Seconds(), 0), "peer", p.Node)
		}
		// Per connection: a reconnection starts them again from 0.
		e.family("edgeq_cluster_peer_frames_total", counter)
		for _, p := range c.Peers {
			e.u("edgeq_cluster_peer_frames_total", p.FramesIn, "peer", p.Node, "direction", "in")
			e.u("edgeq_cluster_peer_frames_total", p.FramesOut, "peer", p.Node, "direction", "out")
		}
		e.family("edgeq_cluster_peer_bytes_total", counter)
		for _, p := range c.Peers {
			e.u("edgeq_cluster_peer_bytes_total", p.BytesIn, "peer", p.Node, "direction", "in")
			e.u("edgeq_cluster_peer_bytes_total", p.BytesOut, "peer", p.Node, "direction", "out")
		}
	}
	m := c.Manager
	e.counter1("edgeq_cluster_peer_ups_total", m.Ups)
	e.counter1("edgeq_cluster_peer_downs_total", m.Downs)
	e.counter1("edgeq_cluster_refused_handshakes_total", m.Refused)
	e.counter1("edgeq_cluster_send_queue_overflows_total", m.Overflows)
	// Peer-link security: sealed frames that failed authentication (each
	// closed its connection), accepted connections closed unread because
	// max handshakes were in progress, handshakes that failed otherwise
	// (deadline, malformed or oversized frame), and those in progress now.
	e.counter1("edgeq_cluster_refused_frames_total", m.FramesRefused)
	e.counter1("edgeq_cluster_busy_handshakes_total", m.HandshakesBusy)
	e.counter1("edgeq_cluster_failed_handshakes_total", m.HandshakeFailures)
	e.gauge1("edgeq_cluster_handshakes_in_progress", uint64(max(m.Handshaking, 0)))

	el := c.Election
	e.counter1("edgeq_cluster_elections_total", el.Elections)
	// This node's leaderships: won, and ended by a hand-over to a
	// higher-ranked node or by a newer epoch (deposed).
	e.family("edgeq_cluster_leadership_changes_total", counter)
	e.u("edgeq_cluster_leadership_changes_total", el.Leaderships, "change", "won")
	e.u("edgeq_cluster_leadership_changes_total", el.HandOvers, "change", "handed_over")
	e.u("edgeq_cluster_leadership_changes_total", el.Deposed, "change", "deposed")
	e.counter1("edgeq_cluster_take_overs_total", el.TakeOvers)
	// successor: a take-over completed without the old leader's DRAINED;
	// leader: a hand-over given up waiting for this node's drain.
	e.family("edgeq_cluster_hand_over_timeouts_total", counter)
	e.u("edgeq_cluster_hand_over_timeouts_total", el.HandOverTimeouts, "side", "successor")
	e.u("edgeq_cluster_hand_over_timeouts_total", el.DrainTimeouts, "side", "leader")
	e.counter1("edgeq_cluster_stale_coordinators_total", el.Stale)
	e.counter1("edgeq_cluster_fenced_requests_total", c.FencedRequests)

	d := s.Dispatch
	e.counter1("edgeq_cluster_forwards_received_total", d.ForwardsIn)
	e.counter1("edgeq_cluster_forwards_refused_total", d.ForwardsRefused)
	e.counter1("edgeq_cluster_acks_relayed_total", d.AcksRelayed)
	e.gauge1("edgeq_cluster_forwards_held", d.ForwardsHeld)
	e.counter1("edgeq_cluster_forwards_untracked_total", d.ForwardsUntracked)
	e.family("edgeq_cluster_remote_commits_total", counter)
	e.u("edgeq_cluster_remote_commits_total", d.RemoteCommits, "result", "ok")
	e.u("edgeq_cluster_remote_commits_total", d.RemoteCommitFailures, "result", "failed")

	if len(s.Groups) == 0 {
		return
	}
	e.family("edgeq_group_leading", gauge)
	for i := range s.Groups {
		g := &s.Groups[i]
		e.u("edgeq_group_leading", boolValue(g.Leading), "filter", g.Key.Filter, "queue", g.Key.Queue)
	}
	// Counted by the group's runner while this node leads it: it starts
	// from 0 with each leadership.
	e.family("edgeq_group_forwards_total", counter)
	for i := range s.Groups {
		g := &s.Groups[i]
		e.u("edgeq_group_forwards_total", g.Forwards, "filter", g.Key.Filter, "queue", g.Key.Queue)
	}
	first := true
	for i := range s.Groups {
		g := &s.Groups[i]
		l, ok := c.Leaders[g.Key]
		if !ok {
			continue
		}
		if first {
			e.family("edgeq_group_leader", gauge)
			first = false
		}
		e.u("edgeq_group_leader", 1, "filter", g.Key.Filter, "queue", g.Key.Queue, "leader", l.Node)
	}
	if !first {
		e.family("edgeq_group_epoch", gauge)
		for i := range s.Groups {
			g := &s.Groups[i]
			if l, ok := c.Leaders[g.Key]; ok {
				e.u("edgeq_group_epoch", l.Epoch.N, "filter", g.Key.Filter, "queue", g.Key.Queue)
			}
		}
	}
	first = true
	for i := range s.Groups {
		g := &s.Groups[i]
		for _, n := range sortedKeys(g.Members) {
			if first {
				e.family("edgeq_group_members_by_node", gauge)
				first = false
			}
			e.u("edgeq_group_members_by_node", uint64(max(g.Members[n], 0)), "filter", g.Key.Filter, "queue", g.Key.Queue, "node", n)
		}
	}
}

// unixSeconds is t as Unix time in seconds.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
