package groups

import (
	"strconv"

	"edgeq/gateway/metrics"
	"edgeq/gateway/queue"
	"edgeq/wal"
)

// Scrape is what the queue groups' families are written from: one
// scrape's stats of the registry, the live tail and the node's log.
type Scrape struct {
	Node     string // this node's ID: its partitions are named by number only
	Log      *wal.Stats
	Groups   []GroupStats // sorted by key (Registry.Stats)
	Counters Counters
	Tail     TailStats
}

// LagOf names partition p of g ("3" for this node's, "gw-b/3" for a
// peer's in a cluster) and tells its lag: the records durable past
// committed. The group's own durable offsets (read with its committed
// ones) come first; for a peer's partition without one, the owner's
// durable offset as the leader last heard it; else this node's log.
func LagOf(node string, log *wal.Stats, g *GroupStats, p int, committed uint64) (name string, lag uint64) {
	ref, remote := g.Partitions[p]
	if d, ok := g.Durable[p]; ok {
		// The durable offset read with committed: the lag at one moment.
		name = strconv.Itoa(p)
		if remote {
			name = ref.Node + "/" + strconv.Itoa(ref.Partition)
			if ref.Node == node {
				name = strconv.Itoa(ref.Partition)
			}
		}
		if d > committed {
			lag = d - committed
		}
		return name, lag
	}
	if !remote || ref.Node == node {
		local := p
		if remote {
			local = ref.Partition
		}
		if log != nil {
			if d := log.DurableOf(local); d > committed {
				lag = d - committed
			}
		}
		return strconv.Itoa(local), lag
	}
	if ref.Durable > committed {
		lag = ref.Durable - committed
	}
	return ref.Node + "/" + strconv.Itoa(ref.Partition), lag
}

// WriteMetrics writes the dispatch counters, the read-ahead budget, each
// group's families (by filter and queue; per partition their lag, offsets
// and window) and the live tail's.
func WriteMetrics(w *metrics.Writer, s *Scrape) {
	e := w.With(MetricsHelp)
	d := &s.Counters
	e.Counter("edgeq_dispatch_refused_deliveries_total", d.RefusedDeliveries)
	e.Counter("edgeq_dispatch_bad_acks_total", d.BadAcks)
	e.Counter("edgeq_dispatch_stale_acks_total", d.StaleAcks)
	e.Counter("edgeq_dispatch_removed_groups_total", d.RemovedGroups)
	e.Counter("edgeq_dispatch_deleted_groups_total", d.DeletedGroups)
	e.Counter("edgeq_dispatch_maybe_delivered_total", d.MaybeDelivered)
	writeReadAhead(&e, s)
	e.Gauge("edgeq_groups", uint64(len(s.Groups)))
	if len(s.Groups) > 0 {
		writeGroups(&e, s)
	}
	e.Gauge("edgeq_tail_subscribers", uint64(max(s.Tail.Subscribers, 0)))
	e.Counter("edgeq_tail_delivered_total", s.Tail.Delivered)
	e.Counter("edgeq_tail_dropped_total", s.Tail.Dropped)
}

// writeReadAhead writes the node-wide read-ahead budget and what the
// groups hold.
func writeReadAhead(e *metrics.Writer, s *Scrape) {
	d := &s.Counters
	e.Gauge("edgeq_readahead_budget_bytes", d.ReadAheadBudget)
	e.Gauge("edgeq_readahead_used_bytes", d.ReadAheadUsed)
	e.Gauge("edgeq_readahead_share_bytes", d.ReadAheadShare)
	e.Gauge("edgeq_readahead_groups", d.ReadAheadGroups)
	e.Gauge("edgeq_readahead_groups_over_share", d.ReadAheadOver)
	var held uint64
	for i := range s.Groups {
		held += uint64(max(s.Groups[i].Core.InFlight+s.Groups[i].Core.Pending, 0))
	}
	e.Gauge("edgeq_readahead_records", held)
	e.Counter("edgeq_readahead_rereads_total", d.Rereads)
}

// groupFamilies are the per-group families, in the order written.
var groupFamilies = []struct {
	name string
	typ  metrics.Type
	v    func(*GroupStats) uint64
}{
	{"edgeq_group_declared", metrics.Gauge, func(g *GroupStats) uint64 { return metrics.Bool(g.Declared) }},
	{"edgeq_group_members", metrics.Gauge, func(g *GroupStats) uint64 { return uint64(max(g.Core.Members, 0)) }},
	{"edgeq_group_active_members", metrics.Gauge, func(g *GroupStats) uint64 { return uint64(max(g.Core.ActiveMembers, 0)) }},
	{"edgeq_group_in_flight", metrics.Gauge, func(g *GroupStats) uint64 { return uint64(max(g.Core.InFlight, 0)) }},
	{"edgeq_group_pending", metrics.Gauge, func(g *GroupStats) uint64 { return uint64(max(g.Core.Pending, 0)) }},
	{"edgeq_group_active_devices", metrics.Gauge, func(g *GroupStats) uint64 { return uint64(max(g.Core.ActiveDevices, 0)) }},
	{"edgeq_group_fetched_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Fetched }},
	{"edgeq_group_lost_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Lost }},
	{"edgeq_group_filtered_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Filtered }},
	{"edgeq_group_delivered_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Delivered }},
	{"edgeq_group_redeliveries_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Redeliveries }},
	{"edgeq_group_acked_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Acked }},
	{"edgeq_group_naks_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Naks }},
	{"edgeq_group_terms_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Terms }},
	{"edgeq_group_in_progress_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.InProgress }},
	{"edgeq_group_ack_timeouts_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.Timeouts }},
	{"edgeq_group_leave_requeues_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.LeaveRequeue }},
	{"edgeq_group_dead_letters_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.DeadLetters }},
	{"edgeq_group_stale_acks_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.StaleAcks }},
	// A device reached its share of a partition's window and the reader
	// went on with the others: alert on its rate.
	{"edgeq_group_neighbour_stalls_avoided_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.StallsAvoided }},
	{"edgeq_group_set_aside_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.SetAside }},
	{"edgeq_group_aside_blocked_total", metrics.Counter, func(g *GroupStats) uint64 { return g.Core.AsideBlocked }},
}

// partitionFamilies are per group and partition: what is durable and not
// yet committed (lag), and the offset window (fetched and not committed:
// delivered max − committed, bounded by read-ahead). In a cluster the
// leader reads every node's partitions: a peer's is labelled
// "<node>/<partition>".
var partitionFamilies = []struct {
	name string
	v    func(committed, lag uint64, span int) uint64
}{
	{"edgeq_group_lag", func(_, lag uint64, _ int) uint64 { return lag }},
	{"edgeq_group_committed_offset", func(c, _ uint64, _ int) uint64 { return c }},
	{"edgeq_group_window_span", func(_, _ uint64, span int) uint64 { return uint64(max(span, 0)) }},
}

// windowFamilies are the window's occupancy, what its busiest device holds
// of it (its share is the bound) and the records set aside to be read
// again.
var windowFamilies = []struct {
	name string
	v    func(p *queue.PartitionStats) int
}{
	{"edgeq_group_window_messages", func(p *queue.PartitionStats) int { return p.Held }},
	{"edgeq_group_window_busiest_device_messages", func(p *queue.PartitionStats) int { return p.Busiest }},
	{"edgeq_group_window_set_aside", func(p *queue.PartitionStats) int { return p.SetAside }},
}

func writeGroups(e *metrics.Writer, s *Scrape) {
	for _, f := range groupFamilies {
		e.Family(f.name, f.typ)
		for i := range s.Groups {
			g := &s.Groups[i]
			e.Uint(f.name, f.v(g), "filter", g.Key.Filter, "queue", g.Key.Queue)
		}
	}
	for _, f := range partitionFamilies {
		e.Family(f.name, metrics.Gauge)
		for i := range s.Groups {
			g := &s.Groups[i]
			for _, p := range g.Core.Partitions {
				name, lag := LagOf(s.Node, s.Log, g, p.Partition, p.Committed)
				e.Uint(f.name, f.v(p.Committed, lag, p.Span), "filter", g.Key.Filter, "queue", g.Key.Queue, "partition", name)
			}
		}
	}
	for _, f := range windowFamilies {
		e.Family(f.name, metrics.Gauge)
		for i := range s.Groups {
			g := &s.Groups[i]
			for j := range g.Core.Partitions {
				p := &g.Core.Partitions[j]
				name, _ := LagOf(s.Node, s.Log, g, p.Partition, p.Committed)
				e.Uint(f.name, uint64(max(f.v(p), 0)), "filter", g.Key.Filter, "queue", g.Key.Queue, "partition", name)
			}
		}
	}
	e.Family("edgeq_group_delivery_latency_seconds", metrics.Histogram)
	for i := range s.Groups {
		g := &s.Groups[i]
		e.Hist("edgeq_group_delivery_latency_seconds", g.Latency, "filter", g.Key.Filter, "queue", g.Key.Queue)
	}
}

// Collector is the queue groups' metrics collector. log and groups read
// the scrape's log and group stats (shared with the collectors that read
// them too: the cluster's, the uplinks' lag).
func Collector(node string, log func(*metrics.Writer) wal.Stats, groups func(*metrics.Writer) []GroupStats, r *Registry, tail *Tail) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		st := log(w)
		s := Scrape{Node: node, Log: &st, Groups: groups(w), Counters: r.Counters()}
		if tail != nil {
			s.Tail = tail.Stats()
		}
		WriteMetrics(w, &s)
	})
}

// MetricsHelp is the HELP text of the queue groups' families (the cluster
// writes the groups' leadership families: cluster.MetricsHelp).
var MetricsHelp = metrics.Help{
	"edgeq_dispatch_refused_deliveries_total":    "Deliveries a member's connection could not take; the member was removed and its messages went to others.",
	"edgeq_dispatch_bad_acks_total":              "Acknowledgements refused as malformed (unknown kind or an invalid handle).",
	"edgeq_dispatch_stale_acks_total":            "Acknowledgements for a queue group that no longer runs here.",
	"edgeq_dispatch_removed_groups_total":        "Undeclared queue groups removed for want of members: after group_ttl, or to make room at max_groups.",
	"edgeq_dispatch_deleted_groups_total":        "Queue groups deleted on demand: DELETE /v1/groups, edgeq groups rm, CONSUMER.DELETE, an #ephemeral NSQ channel's last consumer.",
	"edgeq_groups":                               "Queue groups on this node (queue.max_groups bounds them).",
	"edgeq_group_declared":                       "Whether the queue group is declared in the configuration (1) or exists from a subscription (0).",
	"edgeq_group_members":                        "Members of the queue group connected to the node that leads it.",
	"edgeq_group_active_members":                 "Members of the queue group with credit left.",
	"edgeq_group_in_flight":                      "Messages delivered to the group's members and not yet acknowledged.",
	"edgeq_group_pending":                        "Messages read for the group and not in flight: waiting for their device's previous message, for credit, or nak-delayed.",
	"edgeq_group_active_devices":                 "Devices with unfinished messages in the queue group.",
	"edgeq_group_fetched_total":                  "Records the queue group read from storage, move markers included.",
	"edgeq_group_lost_total":                     "Offsets the queue group never got because storage no longer had them (retention, corrupt records).",
	"edgeq_group_filtered_total":                 "Records read by the queue group that its subject filter did not match.",
	"edgeq_group_delivered_total":                "Deliveries to the group's members, redeliveries included.",
	"edgeq_group_redeliveries_total":             "Deliveries of a message delivered before (after a nak, an ack timeout or a member leaving).",
	"edgeq_group_acked_total":                    "Messages acknowledged as done by a member.",
	"edgeq_group_naks_total":                     "Negative acknowledgements: the message is delivered again, after its delay.",
	"edgeq_group_terms_total":                    "Messages a member terminated (+TERM): dead-lettered without further delivery.",
	"edgeq_group_in_progress_total":              "Work-in-progress acknowledgements (+WPI) that reset a message's ack_wait.",
	"edgeq_group_ack_timeouts_total":             "Deliveries not acknowledged within ack_wait, to be redelivered.",
	"edgeq_group_leave_requeues_total":           "In-flight messages put back for other members because their member left.",
	"edgeq_group_dead_letters_total":             "Messages dead-lettered (max_deliver reached, or terminated), published on $EQ.DLQ.<queue>.",
	"edgeq_group_stale_acks_total":               "Acknowledgements that matched no current delivery of the queue group (late, or a repeat).",
	"edgeq_group_lag":                            "Durable records of the partition the queue group has not committed.",
	"edgeq_group_committed_offset":               "Offset of the partition up to which the queue group has finished every message.",
	"edgeq_group_window_span":                    "Offsets of the partition read by the queue group and not yet committed (bounded by read_ahead).",
	"edgeq_group_delivery_latency_seconds":       "Time from ingest to the first delivery of a message to a member of the queue group.",
	"edgeq_tail_subscribers":                     "Plain (non-queue) subscriptions on the telemetry prefix receiving the live tail.",
	"edgeq_tail_delivered_total":                 "Messages delivered to live-tail subscribers.",
	"edgeq_tail_dropped_total":                   "Messages a slow live-tail subscriber missed (the tail is at-most-once).",
	"edgeq_readahead_budget_bytes":               "The node-wide read-ahead budget (queue.read_ahead_budget) the queue groups share; 0: none.",
	"edgeq_readahead_used_bytes":                 "What the running queue groups hold of the read-ahead budget (record bytes plus a per-record charge).",
	"edgeq_readahead_share_bytes":                "One queue group's equal share of the read-ahead budget: a lagging group holds no more.",
	"edgeq_readahead_groups":                     "Queue groups sharing the read-ahead budget (running on this node).",
	"edgeq_readahead_groups_over_share":          "Queue groups holding more than their share of the read-ahead budget (it shrank as groups were added); they read nothing until acks bring them under.",
	"edgeq_readahead_records":                    "Records the queue groups hold in memory: delivered and unacknowledged, or read and waiting.",
	"edgeq_readahead_rereads_total":              "Records read from the log again: set aside beyond a device's share of a read-ahead window, read when it has room.",
	"edgeq_dispatch_maybe_delivered_total":       "First deliveries flagged Edgeq-Redelivered: maybe: past the commits when the group's run started (a crash, a drain that timed out, a new leader).",
	"edgeq_group_aside_blocked_total":            "Times a partition stopped reading because its table of set-aside device ranges was full.",
	"edgeq_group_neighbour_stalls_avoided_total": "Times a device reached its share of a partition's read-ahead window and reading went on with the other devices: alert on its rate.",
	"edgeq_group_set_aside_total":                "Records set aside because their device was over its share of the window (read again later).",
	"edgeq_group_window_busiest_device_messages": "Records of the partition's busiest device held in the group's window.",
	"edgeq_group_window_messages":                "Records held in the group's read-ahead window of the partition.",
	"edgeq_group_window_set_aside":               "Records of the partition set aside now, to be read again when their device's share frees.",
}
