package cluster

import (
	"edgeq/gateway/groups"
	"edgeq/gateway/metrics"
)

// WriteMetrics writes the cluster families: peers, the election, the data
// path between nodes, and per queue group its leader and members by node.
// Nothing of it on a standalone node (c nil). gs and d are the queue
// groups' stats and counters of the same scrape.
//
// Cardinality: a peer label for each connected peer and each down node an
// address to dial led to (each bounded by cluster's MaxPeers, 64); group
// labels for each queue group (queue.max_groups), with members by node for
// each node that has members of the group.
func WriteMetrics(w *metrics.Writer, c *Stats, gs []groups.GroupStats, d *groups.Counters) {
	if c == nil {
		return
	}
	e := w.With(MetricsHelp)
	e.Family("edgeq_cluster_info", metrics.Gauge)
	e.Uint("edgeq_cluster_info", 1, "cluster", c.Name)
	e.Gauge("edgeq_cluster_peers", uint64(len(c.Peers)))
	e.Gauge("edgeq_cluster_unreachable_addresses", uint64(len(c.Unreachable)))

	down := c.DownPeers()
	if len(c.Peers)+len(down) > 0 {
		// 1 while connected; 0 for a node an address to dial led to, now
		// without a connection. A peer that only ever dialed this node has
		// no series once it is gone.
		e.Family("edgeq_cluster_peer_up", metrics.Gauge)
		for _, p := range c.Peers {
			e.Uint("edgeq_cluster_peer_up", 1, "peer", p.Node)
		}
		for _, n := range down {
			e.Uint("edgeq_cluster_peer_up", 0, "peer", n)
		}
	}
	if len(c.Peers) > 0 {
		type ps = PeerStatus
		per := []struct {
			name string
			v    func(*ps) uint64
		}{
			{"edgeq_cluster_peer_priority", func(p *ps) uint64 { return uint64(max(p.Priority, 0)) }},
			{"edgeq_cluster_peer_partitions", func(p *ps) uint64 { return uint64(max(p.Partitions, 0)) }},
			{"edgeq_cluster_peer_send_queue_bytes", func(p *ps) uint64 { return uint64(max(p.QueuedBytes, 0)) }},
		}
		for _, f := range per {
			e.Family(f.name, metrics.Gauge)
			for i := range c.Peers {
				e.Uint(f.name, f.v(&c.Peers[i]), "peer", c.Peers[i].Node)
			}
		}
		// A timestamp, so that changes() counts reconnections.
		e.Family("edgeq_cluster_peer_connection_start_time_seconds", metrics.Gauge)
		for _, p := range c.Peers {
			e.Float("edgeq_cluster_peer_connection_start_time_seconds", metrics.UnixSeconds(p.Since), "peer", p.Node)
		}
		// An age at the snapshot's time: heartbeats keep it below the
		// heartbeat interval on a healthy link.
		e.Family("edgeq_cluster_peer_last_frame_age_seconds", metrics.Gauge)
		for _, p := range c.Peers {
			e.Float("edgeq_cluster_peer_last_frame_age_seconds", max(w.Time().Sub(p.LastSeen).Seconds(), 0), "peer", p.Node)
		}
		// Per connection: a reconnection starts them again from 0.
		e.Family("edgeq_cluster_peer_frames_total", metrics.Counter)
		for _, p := range c.Peers {
			e.Uint("edgeq_cluster_peer_frames_total", p.FramesIn, "peer", p.Node, "direction", "in")
			e.Uint("edgeq_cluster_peer_frames_total", p.FramesOut, "peer", p.Node, "direction", "out")
		}
		e.Family("edgeq_cluster_peer_bytes_total", metrics.Counter)
		for _, p := range c.Peers {
			e.Uint("edgeq_cluster_peer_bytes_total", p.BytesIn, "peer", p.Node, "direction", "in")
			e.Uint("edgeq_cluster_peer_bytes_total", p.BytesOut, "peer", p.Node, "direction", "out")
		}
	}
	m := c.Manager
	e.Counter("edgeq_cluster_peer_ups_total", m.Ups)
	e.Counter("edgeq_cluster_peer_downs_total", m.Downs)
	e.Counter("edgeq_cluster_refused_handshakes_total", m.Refused)
	e.Counter("edgeq_cluster_send_queue_overflows_total", m.Overflows)
	// Peer-link security: sealed frames that failed authentication (each
	// closed its connection), accepted connections closed unread because
	// max handshakes were in progress, handshakes that failed otherwise
	// (deadline, malformed or oversized frame), and those in progress now.
	e.Counter("edgeq_cluster_refused_frames_total", m.FramesRefused)
	e.Counter("edgeq_cluster_busy_handshakes_total", m.HandshakesBusy)
	e.Counter("edgeq_cluster_failed_handshakes_total", m.HandshakeFailures)
	e.Gauge("edgeq_cluster_handshakes_in_progress", uint64(max(m.Handshaking, 0)))

	el := c.Election
	e.Counter("edgeq_cluster_elections_total", el.Elections)
	// This node's leaderships: won, and ended by a hand-over to a
	// higher-ranked node or by a newer epoch (deposed).
	e.Family("edgeq_cluster_leadership_changes_total", metrics.Counter)
	e.Uint("edgeq_cluster_leadership_changes_total", el.Leaderships, "change", "won")
	e.Uint("edgeq_cluster_leadership_changes_total", el.HandOvers, "change", "handed_over")
	e.Uint("edgeq_cluster_leadership_changes_total", el.Deposed, "change", "deposed")
	e.Counter("edgeq_cluster_take_overs_total", el.TakeOvers)
	// successor: a take-over completed without the old leader's DRAINED;
	// leader: a hand-over given up waiting for this node's drain.
	e.Family("edgeq_cluster_hand_over_timeouts_total", metrics.Counter)
	e.Uint("edgeq_cluster_hand_over_timeouts_total", el.HandOverTimeouts, "side", "successor")
	e.Uint("edgeq_cluster_hand_over_timeouts_total", el.DrainTimeouts, "side", "leader")
	e.Counter("edgeq_cluster_stale_coordinators_total", el.Stale)
	e.Counter("edgeq_cluster_fenced_requests_total", c.FencedRequests)

	e.Counter("edgeq_cluster_forwards_received_total", d.ForwardsIn)
	e.Counter("edgeq_cluster_forwards_refused_total", d.ForwardsRefused)
	e.Counter("edgeq_cluster_acks_relayed_total", d.AcksRelayed)
	e.Gauge("edgeq_cluster_forwards_held", d.ForwardsHeld)
	e.Counter("edgeq_cluster_forwards_untracked_total", d.ForwardsUntracked)
	e.Family("edgeq_cluster_remote_commits_total", metrics.Counter)
	e.Uint("edgeq_cluster_remote_commits_total", d.RemoteCommits, "result", "ok")
	e.Uint("edgeq_cluster_remote_commits_total", d.RemoteCommitFailures, "result", "failed")

	if len(gs) == 0 {
		return
	}
	e.Family("edgeq_group_leading", metrics.Gauge)
	for i := range gs {
		g := &gs[i]
		e.Uint("edgeq_group_leading", metrics.Bool(g.Leading), "filter", g.Key.Filter, "queue", g.Key.Queue)
	}
	// Counted by the group's runner while this node leads it: it starts
	// from 0 with each leadership.
	e.Family("edgeq_group_forwards_total", metrics.Counter)
	for i := range gs {
		g := &gs[i]
		e.Uint("edgeq_group_forwards_total", g.Forwards, "filter", g.Key.Filter, "queue", g.Key.Queue)
	}
	first := true
	for i := range gs {
		g := &gs[i]
		l, ok := c.Leaders[g.Key]
		if !ok {
			continue
		}
		if first {
			e.Family("edgeq_group_leader", metrics.Gauge)
			first = false
		}
		e.Uint("edgeq_group_leader", 1, "filter", g.Key.Filter, "queue", g.Key.Queue, "leader", l.Node)
	}
	if !first {
		e.Family("edgeq_group_epoch", metrics.Gauge)
		for i := range gs {
			g := &gs[i]
			if l, ok := c.Leaders[g.Key]; ok {
				e.Uint("edgeq_group_epoch", l.Epoch.N, "filter", g.Key.Filter, "queue", g.Key.Queue)
			}
		}
	}
	first = true
	for i := range gs {
		g := &gs[i]
		for _, n := range metrics.SortedKeys(g.Members) {
			if first {
				e.Family("edgeq_group_members_by_node", metrics.Gauge)
				first = false
			}
			e.Uint("edgeq_group_members_by_node", uint64(max(g.Members[n], 0)), "filter", g.Key.Filter, "queue", g.Key.Queue, "node", n)
		}
	}
}

// Collector is the cluster's metrics collector (nil on a standalone
// node); groups reads the scrape's queue-group stats, shared with their own
// collector, and counters the registry's.
func Collector(n *Node, gs func(*metrics.Writer) []groups.GroupStats, counters func() groups.Counters) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		if n == nil {
			return
		}
		all := gs(w)
		d := counters()
		WriteMetrics(w, n.Snapshot(all), all, &d)
	})
}

// MetricsHelp is the HELP text of the cluster's families, the queue
// groups' leadership among them.
var MetricsHelp = metrics.Help{
	"edgeq_cluster_info":                               "Always 1; the label names this node's cluster.",
	"edgeq_cluster_peers":                              "Peers with an authenticated connection now.",
	"edgeq_cluster_unreachable_addresses":              "Peer addresses to dial (static or discovered) without a connection now.",
	"edgeq_cluster_peer_up":                            "1 while the peer is connected; 0 for a peer an address to dial led to, now without a connection.",
	"edgeq_cluster_peer_priority":                      "The peer's election priority.",
	"edgeq_cluster_peer_partitions":                    "Partitions the peer stores.",
	"edgeq_cluster_peer_send_queue_bytes":              "Bytes queued to send to the peer.",
	"edgeq_cluster_peer_connection_start_time_seconds": "Unix time the connection to the peer was established, in seconds.",
	"edgeq_cluster_peer_last_frame_age_seconds":        "Seconds since the last frame from the peer (heartbeats keep it below the heartbeat interval).",
	"edgeq_cluster_peer_frames_total":                  "Frames exchanged with the peer on the current connection, by direction.",
	"edgeq_cluster_peer_bytes_total":                   "Bytes exchanged with the peer on the current connection, by direction.",
	"edgeq_cluster_peer_ups_total":                     "Peer connections that came up.",
	"edgeq_cluster_peer_downs_total":                   "Peer connections that went down.",
	"edgeq_cluster_refused_handshakes_total":           "Peer handshakes refused (another cluster, a wrong secret).",
	"edgeq_cluster_send_queue_overflows_total":         "Peer connections closed because their send queue was full.",
	"edgeq_cluster_elections_total":                    "Leader elections this node started.",
	"edgeq_cluster_leadership_changes_total":           "This node's queue-group leaderships: won, handed over to a higher-ranked node, or deposed by a newer epoch.",
	"edgeq_cluster_take_overs_total":                   "Hand-overs this node requested as the higher-ranked node.",
	"edgeq_cluster_hand_over_timeouts_total":           "Hand-overs that timed out: as successor (taken over without DRAINED) or as leader (gave up waiting for its drain).",
	"edgeq_cluster_stale_coordinators_total":           "COORDINATOR messages refused for a stale epoch.",
	"edgeq_cluster_fenced_requests_total":              "Fetches and commits of other nodes' leaders this node refused as partition owner (stale epoch).",
	"edgeq_cluster_forwards_received_total":            "Deliveries other nodes' leaders forwarded to this node's members.",
	"edgeq_cluster_forwards_refused_total":             "Forwarded deliveries this node's members could not take.",
	"edgeq_cluster_acks_relayed_total":                 "Acknowledgements relayed to the node that made the delivery.",
	"edgeq_cluster_forwards_held":                      "Deliveries other nodes' leaders forwarded to this node's members that they have not answered yet (a stop waits for them).",
	"edgeq_cluster_forwards_untracked_total":           "Forwarded deliveries not tracked as held because the table (65,536) was full; a stop does not wait for them.",
	"edgeq_cluster_remote_commits_total":               "Committed offsets sent to the partitions' owner nodes, by result.",
	"edgeq_group_leading":                              "Whether this node leads the queue group (1).",
	"edgeq_group_forwards_total":                       "Deliveries this node, as leader, forwarded to members on other nodes; from 0 with each leadership.",
	"edgeq_group_leader":                               "Always 1; the leader label names the queue group's elected leader.",
	"edgeq_group_epoch":                                "Election epoch of the queue group's current leader.",
	"edgeq_group_members_by_node":                      "Members of the queue group by the node they are connected to.",
	"edgeq_cluster_busy_handshakes_total":              "Peer connections closed unread because the most handshakes allowed at once were in progress.",
	"edgeq_cluster_failed_handshakes_total":            "Peer handshakes that failed: deadline passed, malformed or oversized frames.",
	"edgeq_cluster_handshakes_in_progress":             "Peer connections in their handshake now (bounded).",
	"edgeq_cluster_refused_frames_total":               "Sealed peer frames that failed authentication (altered, injected, dropped, reordered or replayed); each closes its connection.",
}
