package metrics

import (
	"io"
	"slices"
	"strconv"

	"edgeq/bridge/modbus"
	"edgeq/bridge/mqtt"
	"edgeq/bridge/serial"
	"edgeq/gateway/devicemetrics"
	"edgeq/gateway/groups"
	"edgeq/gateway/queue"
	"edgeq/wal"
)

// mqttView is one bridge's counters with its connection state.
type mqttView struct {
	mqtt.Counters
	connected, subscribed bool
}

// sortedKeys returns a map's keys in order, for a stable series order.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Render writes the snapshot in the Prometheus text format: node, ingest,
// log, queue groups, live tail, cluster (when there is one), NATS, bridges,
// device metrics. Families
// appear once each, with HELP (the help table's text) and TYPE; the order is
// fixed, and so is the series order within a family (partitions by number,
// groups by key, the rest as the snapshot lists them), so two renders of one
// snapshot are byte-identical.
//
// It writes many small pieces: give it a buffer, not a network connection.
func Render(w io.Writer, s *Snapshot) {
	e := &enc{w: w, line: make([]byte, 0, 256)}
	renderNode(e, s)
	renderIngest(e, s)
	renderLog(e, s)
	renderGroups(e, s)
	renderCluster(e, s)
	renderNATS(e, s)
	renderConsole(e, s)
	renderNSQ(e, s)
	renderJetStream(e, s)
	renderBridges(e, s)
	RenderDevice(w, s.Device)
}

func renderNode(e *enc, s *Snapshot) {
	e.family("edgeq_node_info", gauge)
	e.u("edgeq_node_info", 1, "node", s.Node, "version", s.Version)
	e.gauge1("edgeq_node_ready", boolValue(s.Ready))
	e.gaugeF1("edgeq_node_start_time_seconds", float64(s.StartTime.UnixNano())/1e9)
}

// rejectedReasons are the log's refusal reasons (wal.Stats.Rejected), in a
// fixed order so that the series do not move between scrapes.
var rejectedReasons = []string{"bad_device_id", "too_large", "too_many_devices", "full", "disk_low", "closed"}

func renderIngest(e *enc, s *Snapshot) {
	srcs := []struct {
		name string
		v    func(Source) uint64
	}{
		{"edgeq_ingest_messages_total", func(c Source) uint64 { return c.Msgs }},
		{"edgeq_ingest_bytes_total", func(c Source) uint64 { return c.Bytes }},
		{"edgeq_ingest_errors_total", func(c Source) uint64 { return c.Errors }},
	}
	for _, f := range srcs {
		if len(s.Sources) == 0 {
			break
		}
		e.family(f.name, counter)
		for _, c := range s.Sources {
			e.u(f.name, f.v(c), "source", c.Name)
		}
	}
	// Refusals before a record is stored. A publish refused by the NATS
	// server (bad device ID in the subject) never reaches the log, so the
	// family sums to every refusal without counting one twice.
	e.family("edgeq_ingest_rejected_total", counter)
	for _, r := range rejectedReasons {
		e.u("edgeq_ingest_rejected_total", s.Log.Rejected[r], "stage", "log", "reason", r)
	}
	for _, r := range sortedKeys(s.Log.Rejected) {
		if !slices.Contains(rejectedReasons, r) {
			e.u("edgeq_ingest_rejected_total", s.Log.Rejected[r], "stage", "log", "reason", r)
		}
	}
	e.u("edgeq_ingest_rejected_total", s.NATS.BadDevice, "stage", "nats", "reason", "bad_device_id")

	if s.Hot.Enabled {
		e.gauge1("edgeq_hot_devices_tracked", uint64(s.Hot.Tracked))
		e.gauge1("edgeq_hot_devices_isolated", uint64(s.Hot.Isolated))
		e.counter1("edgeq_hot_devices_untracked_total", s.Hot.Untracked)
		e.counter1("edgeq_hot_moves_total", s.Hot.Moves)
		e.counter1("edgeq_hot_move_errors_total", s.Hot.MoveErrors)
		e.counter1("edgeq_hot_move_back_held_total", s.Hot.HeldBack)
	}
	if len(s.TopDevices) > 0 {
		const name = "edgeq_top_device_messages_per_second"
		e.family(name, gauge)
		for _, d := range s.TopDevices {
			e.f(name, d.Rate, "device", d.Device, "isolated", boolLabel(d.Hot))
		}
	}
}

func renderLog(e *enc, s *Snapshot) {
	l := &s.Log
	e.gauge1("edgeq_log_bytes", uint64(max(l.Bytes, 0)))
	e.gauge1("edgeq_log_max_bytes", uint64(max(l.MaxBytes, 0)))
	e.gauge1("edgeq_log_full", boolValue(l.Full))
	e.gauge1("edgeq_log_disk_free_bytes", uint64(max(l.DiskFree, 0)))
	e.gauge1("edgeq_log_disk_min_free_bytes", uint64(max(l.MinFree, 0)))
	e.gauge1("edgeq_log_disk_low", boolValue(l.DiskLow))
	e.gauge1("edgeq_log_disk_failing", boolValue(l.DiskFault != ""))
	e.gauge1("edgeq_log_devices", uint64(max(l.Devices, 0)))
	e.gauge1("edgeq_log_max_devices", uint64(max(l.MaxDevices, 0)))
	if len(l.Partitions) == 0 {
		return
	}
	parts := make([]string, len(l.Partitions))
	for i, p := range l.Partitions {
		parts[i] = strconv.Itoa(p.Partition)
	}
	per := []struct {
		name, typ string
		v         func(*wal.PartitionStats) uint64
	}{
		{"edgeq_log_partition_hot", gauge, func(p *wal.PartitionStats) uint64 { return boolValue(p.Hot) }},
		{"edgeq_log_partition_bytes", gauge, func(p *wal.PartitionStats) uint64 { return uint64(max(p.Bytes, 0)) }},
		{"edgeq_log_partition_first_offset", gauge, func(p *wal.PartitionStats) uint64 { return p.First }},
		{"edgeq_log_partition_last_offset", gauge, func(p *wal.PartitionStats) uint64 { return p.Last }},
		{"edgeq_log_partition_durable_offset", gauge, func(p *wal.PartitionStats) uint64 { return p.Durable }},
		{"edgeq_log_partition_queued_appends", gauge, func(p *wal.PartitionStats) uint64 { return uint64(max(p.QueuedAppends, 0)) }},
		{"edgeq_log_appends_total", counter, func(p *wal.PartitionStats) uint64 { return p.Appends }},
		{"edgeq_log_append_bytes_total", counter, func(p *wal.PartitionStats) uint64 { return p.AppendBytes }},
		{"edgeq_log_batches_total", counter, func(p *wal.PartitionStats) uint64 { return p.Batches }},
		{"edgeq_log_fsyncs_total", counter, func(p *wal.PartitionStats) uint64 { return p.Fsyncs }},
		{"edgeq_log_write_errors_total", counter, func(p *wal.PartitionStats) uint64 { return p.WriteErrors }},
		{"edgeq_log_repairs_total", counter, func(p *wal.PartitionStats) uint64 { return p.Repairs }},
		{"edgeq_log_corrupt_records_total", counter, func(p *wal.PartitionStats) uint64 { return p.Corrupt }},
		{"edgeq_log_retention_dropped_records_total", counter, func(p *wal.PartitionStats) uint64 { return p.Dropped }},
		{"edgeq_log_retention_dropped_bytes_total", counter, func(p *wal.PartitionStats) uint64 { return p.DroppedBytes }},
	}
	for _, f := range per {
		e.family(f.name, f.typ)
		for i := range l.Partitions {
			e.u(f.name, f.v(&l.Partitions[i]), "partition", parts[i])
		}
	}
	e.family("edgeq_log_fsync_duration_seconds", histogram)
	for i := range l.Partitions {
		e.hist("edgeq_log_fsync_duration_seconds", l.Partitions[i].FsyncLatency, "partition", parts[i])
	}
	renderCommit(e, &l.Commit)
}

// renderCommit writes the node-wide commit schedule (wal.CommitStats).
func renderCommit(e *enc, c *wal.CommitStats) {
	e.counter1("edgeq_wal_fsyncs_total", c.Fsyncs)
	e.counter1("edgeq_wal_written_bytes_total", c.WrittenBytes)
	e.counter1("edgeq_wal_commit_rounds_total", c.Rounds)
	e.counter1("edgeq_wal_commit_round_records_total", c.RoundRecords)
	e.counter1("edgeq_wal_commit_round_bytes_total", c.RoundBytes)
	const round = "edgeq_wal_commit_round_duration_seconds"
	e.family(round, histogram)
	e.hist(round, c.RoundLatency)
}

// renderReadAhead writes the node-wide read-ahead budget and what the
// groups hold.
func renderReadAhead(e *enc, s *Snapshot) {
	d := &s.Dispatch
	e.gauge1("edgeq_readahead_budget_bytes", d.ReadAheadBudget)
	e.gauge1("edgeq_readahead_used_bytes", d.ReadAheadUsed)
	e.gauge1("edgeq_readahead_share_bytes", d.ReadAheadShare)
	e.gauge1("edgeq_readahead_groups", d.ReadAheadGroups)
	e.gauge1("edgeq_readahead_groups_over_share", d.ReadAheadOver)
	var held uint64
	for i := range s.Groups {
		held += uint64(max(s.Groups[i].Core.InFlight+s.Groups[i].Core.Pending, 0))
	}
	e.gauge1("edgeq_readahead_records", held)
	e.counter1("edgeq_readahead_rereads_total", d.Rereads)
}

func renderGroups(e *enc, s *Snapshot) {
	d := s.Dispatch
	e.counter1("edgeq_dispatch_refused_deliveries_total", d.RefusedDeliveries)
	e.counter1("edgeq_dispatch_bad_acks_total", d.BadAcks)
	e.counter1("edgeq_dispatch_stale_acks_total", d.StaleAcks)
	e.counter1("edgeq_dispatch_removed_groups_total", d.RemovedGroups)
	e.counter1("edgeq_dispatch_deleted_groups_total", d.DeletedGroups)
	e.counter1("edgeq_dispatch_maybe_delivered_total", d.MaybeDelivered)
	renderReadAhead(e, s)
	e.gauge1("edgeq_groups", uint64(len(s.Groups)))
	if len(s.Groups) > 0 {
		per := []struct {
			name, typ string
			v         func(*groups.GroupStats) uint64
		}{
			{"edgeq_group_declared", gauge, func(g *groups.GroupStats) uint64 { return boolValue(g.Declared) }},
			{"edgeq_group_members", gauge, func(g *groups.GroupStats) uint64 { return uint64(max(g.Core.Members, 0)) }},
			{"edgeq_group_active_members", gauge, func(g *groups.GroupStats) uint64 { return uint64(max(g.Core.ActiveMembers, 0)) }},
			{"edgeq_group_in_flight", gauge, func(g *groups.GroupStats) uint64 { return uint64(max(g.Core.InFlight, 0)) }},
			{"edgeq_group_pending", gauge, func(g *groups.GroupStats) uint64 { return uint64(max(g.Core.Pending, 0)) }},
			{"edgeq_group_active_devices", gauge, func(g *groups.GroupStats) uint64 { return uint64(max(g.Core.ActiveDevices, 0)) }},
			{"edgeq_group_fetched_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Fetched }},
			{"edgeq_group_lost_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Lost }},
			{"edgeq_group_filtered_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Filtered }},
			{"edgeq_group_delivered_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Delivered }},
			{"edgeq_group_redeliveries_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Redeliveries }},
			{"edgeq_group_acked_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Acked }},
			{"edgeq_group_naks_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Naks }},
			{"edgeq_group_terms_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Terms }},
			{"edgeq_group_in_progress_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.InProgress }},
			{"edgeq_group_ack_timeouts_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.Timeouts }},
			{"edgeq_group_leave_requeues_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.LeaveRequeue }},
			{"edgeq_group_dead_letters_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.DeadLetters }},
			{"edgeq_group_stale_acks_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.StaleAcks }},
			// A device reached its share of a partition's window and the
			// reader went on with the others: alert on its rate.
			{"edgeq_group_neighbour_stalls_avoided_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.StallsAvoided }},
			{"edgeq_group_set_aside_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.SetAside }},
			{"edgeq_group_aside_blocked_total", counter, func(g *groups.GroupStats) uint64 { return g.Core.AsideBlocked }},
		}
		for _, f := range per {
			e.family(f.name, f.typ)
			for i := range s.Groups {
				g := &s.Groups[i]
				e.u(f.name, f.v(g), "filter", g.Key.Filter, "queue", g.Key.Queue)
			}
		}
		// Per partition: what is durable and not yet committed (lag), and
		// the offset window (fetched and not committed: delivered max −
		// committed, bounded by read-ahead).
		// In a cluster the leader reads every node's partitions: a peer's
		// is labelled "<node>/<partition>".
		perPart := []struct {
			name string
			v    func(committed, lag uint64, span int) uint64
		}{
			{"edgeq_group_lag", func(_, lag uint64, _ int) uint64 { return lag }},
			{"edgeq_group_committed_offset", func(c, _ uint64, _ int) uint64 { return c }},
			{"edgeq_group_window_span", func(_, _ uint64, span int) uint64 { return uint64(max(span, 0)) }},
		}
		for _, f := range perPart {
			e.family(f.name, gauge)
			for i := range s.Groups {
				g := &s.Groups[i]
				for _, p := range g.Core.Partitions {
					name, lag := s.GroupPartition(g, p.Partition, p.Committed)
					e.u(f.name, f.v(p.Committed, lag, p.Span), "filter", g.Key.Filter, "queue", g.Key.Queue, "partition", name)
				}
			}
		}
		// The window's occupancy, what its busiest device holds of it (its
		// share is the bound) and the records set aside to be read again.
		window := []struct {
			name string
			v    func(p *queue.PartitionStats) int
		}{
			{"edgeq_group_window_messages", func(p *queue.PartitionStats) int { return p.Held }},
			{"edgeq_group_window_busiest_device_messages", func(p *queue.PartitionStats) int { return p.Busiest }},
			{"edgeq_group_window_set_aside", func(p *queue.PartitionStats) int { return p.SetAside }},
		}
		for _, f := range window {
			e.family(f.name, gauge)
			for i := range s.Groups {
				g := &s.Groups[i]
				for j := range g.Core.Partitions {
					p := &g.Core.Partitions[j]
					name, _ := s.GroupPartition(g, p.Partition, p.Committed)
					e.u(f.name, uint64(max(f.v(p), 0)), "filter", g.Key.Filter, "queue", g.Key.Queue, "partition", name)
				}
			}
		}
		e.family("edgeq_group_delivery_latency_seconds", histogram)
		for i := range s.Groups {
			g := &s.Groups[i]
			e.hist("edgeq_group_delivery_latency_seconds", g.Latency, "filter", g.Key.Filter, "queue", g.Key.Queue)
		}
	}
	e.gauge1("edgeq_tail_subscribers", uint64(max(s.Tail.Subscribers, 0)))
	e.counter1("edgeq_tail_delivered_total", s.Tail.Delivered)
	e.counter1("edgeq_tail_dropped_total", s.Tail.Dropped)
}

func renderNATS(e *enc, s *Snapshot) {
	n := s.NATS
	e.gauge1("edgeq_nats_connections", uint64(max(n.Connections, 0)))
	e.counter1("edgeq_nats_accepted_connections_total", n.TotalConnections)
	e.counter1("edgeq_nats_refused_connections_total", n.Refused)
	e.family("edgeq_nats_closed_connections_total", counter)
	for _, c := range n.Closed {
		e.u("edgeq_nats_closed_connections_total", c.N, "reason", c.Reason)
	}
	e.counter1("edgeq_nats_auth_failures_total", n.AuthFailures)
	e.counter1("edgeq_nats_refused_group_creations_total", n.GroupsRefused)
	e.counter1("edgeq_nats_permission_violations_total", n.PermViolations)
	e.counter1("edgeq_nats_protocol_errors_total", n.ProtocolErrors)
	e.counter1("edgeq_nats_in_messages_total", n.InMsgs)
	e.counter1("edgeq_nats_in_bytes_total", n.InBytes)
	e.counter1("edgeq_nats_out_messages_total", n.OutMsgs)
	e.counter1("edgeq_nats_out_bytes_total", n.OutBytes)
	e.counter1("edgeq_nats_ingest_errors_total", n.IngestErrors)
	e.counter1("edgeq_nats_bad_acks_total", n.BadAcks)
	e.counter1("edgeq_nats_foreign_acks_total", n.ForeignAcks)
}

func renderJetStream(e *enc, s *Snapshot) {
	j := s.JetStream
	if !j.Enabled {
		return
	}
	e.counter1("edgeq_jetstream_api_requests_total", j.APICalls)
	e.counter1("edgeq_jetstream_api_errors_total", j.APIErrors)
	e.gauge1("edgeq_jetstream_consumers", uint64(max(j.Consumers, 0)))
	e.counter1("edgeq_jetstream_consumers_deleted_total", j.ConsumersDeleted)
	e.counter1("edgeq_jetstream_consumers_expired_total", j.ConsumersExpired)
	e.counter1("edgeq_jetstream_bad_pulls_total", j.BadPulls)
	e.gauge1("edgeq_jetstream_msg_ids", uint64(max(j.MsgIDs, 0)))
	e.gauge1("edgeq_jetstream_max_msg_ids", uint64(max(j.MaxMsgIDs, 0)))
	e.counter1("edgeq_jetstream_duplicates_total", j.Duplicates)
	e.counter1("edgeq_jetstream_msg_ids_evicted_total", j.MsgIDsEvicted)
	e.gauge1("edgeq_jetstream_ordered_consumers", uint64(max(j.Ordered, 0)))
	e.gauge1("edgeq_jetstream_max_ordered_consumers", uint64(max(j.MaxOrdered, 0)))
	e.counter1("edgeq_jetstream_ordered_created_total", j.OrderedCreated)
	e.counter1("edgeq_jetstream_ordered_expired_total", j.OrderedExpired)
	e.counter1("edgeq_jetstream_ordered_refused_total", j.OrderedRefused)
	e.counter1("edgeq_jetstream_ordered_delivered_total", j.OrderedDelivered)
	e.gauge1("edgeq_jetstream_ordered_read_bytes", uint64(max(j.OrderedReadBytes, 0)))
	e.gauge1("edgeq_jetstream_last_index_devices", uint64(max(j.LastIndexDevices, 0)))
	e.counter1("edgeq_jetstream_last_index_dropped_total", j.LastIndexDropped)
}

func renderConsole(e *enc, s *Snapshot) {
	c := s.Console
	e.gauge1("edgeq_console_streams", uint64(max(c.Streams, 0)))
	e.gauge1("edgeq_console_max_streams", uint64(max(c.MaxStreams, 0)))
	e.counter1("edgeq_console_streams_opened_total", c.Opened)
	e.counter1("edgeq_console_streams_refused_total", c.Refused)
	e.counter1("edgeq_console_snapshots_total", c.Snapshots)
	e.counter1("edgeq_console_frames_skipped_total", c.Skipped)
}

// renderNSQ writes the NSQ listener's families, only when it is on.
func renderNSQ(e *enc, s *Snapshot) {
	n := s.NSQ
	if n == nil {
		return
	}
	e.gauge1("edgeq_nsq_connections", uint64(max(n.Connections, 0)))
	e.counter1("edgeq_nsq_accepted_connections_total", n.TotalConnections)
	e.counter1("edgeq_nsq_refused_connections_total", n.Refused)
	e.counter1("edgeq_nsq_auth_failures_total", n.AuthFailures)
	e.counter1("edgeq_nsq_published_total", n.Published)
	e.counter1("edgeq_nsq_publish_errors_total", n.PublishErrors)
	e.counter1("edgeq_nsq_delivered_total", n.Delivered)
	e.family("edgeq_nsq_acks_total", counter)
	e.u("edgeq_nsq_acks_total", n.Fin, "command", "FIN")
	e.u("edgeq_nsq_acks_total", n.Req, "command", "REQ")
	e.u("edgeq_nsq_acks_total", n.Touch, "command", "TOUCH")
	e.counter1("edgeq_nsq_unknown_ids_total", n.UnknownIDs)
	e.gauge1("edgeq_nsq_rdy", uint64(max(n.RDY, 0)))
	e.gauge1("edgeq_nsq_in_flight", uint64(max(n.InFlight, 0)))
	e.counter1("edgeq_nsq_rdy_exceeded_total", n.RdyExceeded)
	e.counter1("edgeq_nsq_slow_consumers_total", n.SlowConsumers)
	e.counter1("edgeq_nsq_tls_failures_total", n.TLSFailures)
	e.family("edgeq_nsq_errors_total", counter)
	for _, c := range n.Errors {
		e.u("edgeq_nsq_errors_total", c.N, "code", c.Reason)
	}
}

func renderBridges(e *enc, s *Snapshot) {
	if len(s.MQTT) > 0 {
		renderMQTT(e, s)
	}
	if len(s.Serial) > 0 {
		renderSerial(e, s)
	}
	if len(s.Modbus) > 0 {
		renderModbus(e, s)
	}
	if len(s.Uplinks) > 0 {
		renderUplinks(e, s)
	}
}

func renderMQTT(e *enc, s *Snapshot) {
	type cs = mqttView
	per := []struct {
		name, typ string
		v         func(*cs) uint64
	}{
		{"edgeq_mqtt_connected", gauge, func(c *cs) uint64 { return boolValue(c.connected) }},
		{"edgeq_mqtt_subscribed", gauge, func(c *cs) uint64 { return boolValue(c.subscribed) }},
		{"edgeq_mqtt_queued", gauge, func(c *cs) uint64 { return uint64(max(c.Queued, 0)) }},
		{"edgeq_mqtt_pending", gauge, func(c *cs) uint64 { return uint64(max(c.Pending, 0)) }},
		{"edgeq_mqtt_received_total", counter, func(c *cs) uint64 { return c.Received }},
		{"edgeq_mqtt_redelivered_total", counter, func(c *cs) uint64 { return c.Redelivered }},
		{"edgeq_mqtt_stored_total", counter, func(c *cs) uint64 { return c.Stored }},
		{"edgeq_mqtt_acked_total", counter, func(c *cs) uint64 { return c.Acked }},
		{"edgeq_mqtt_deferred_total", counter, func(c *cs) uint64 { return c.Deferred }},
		{"edgeq_mqtt_storage_errors_total", counter, func(c *cs) uint64 { return c.StorageErrors }},
		{"edgeq_mqtt_connects_total", counter, func(c *cs) uint64 { return c.Connects }},
		{"edgeq_mqtt_reconnects_total", counter, func(c *cs) uint64 { return c.Reconnects }},
		{"edgeq_mqtt_connections_lost_total", counter, func(c *cs) uint64 { return c.ConnectionsLost }},
		{"edgeq_mqtt_forced_reconnects_total", counter, func(c *cs) uint64 { return c.ForcedReconnects }},
		{"edgeq_mqtt_subscribe_errors_total", counter, func(c *cs) uint64 { return c.SubscribeErrors }},
		{"edgeq_mqtt_read_pauses_total", counter, func(c *cs) uint64 { return c.ReadPauses }},
	}
	all := make([]cs, len(s.MQTT))
	for i, b := range s.MQTT {
		all[i] = cs{Counters: b.Counters, connected: b.Connected, subscribed: b.Subscribed}
	}
	for _, f := range per {
		e.family(f.name, f.typ)
		for i, b := range s.MQTT {
			e.u(f.name, f.v(&all[i]), "bridge", b.Name)
		}
	}
	byReason := []struct {
		name string
		m    func(*cs) map[mqtt.Reason]uint64
	}{
		{"edgeq_mqtt_unmappable_total", func(c *cs) map[mqtt.Reason]uint64 { return c.Unmappable }},
		{"edgeq_mqtt_rejected_total", func(c *cs) map[mqtt.Reason]uint64 { return c.Rejected }},
		{"edgeq_mqtt_dropped_total", func(c *cs) map[mqtt.Reason]uint64 { return c.Dropped }},
	}
	for _, f := range byReason {
		first := true
		for i, b := range s.MQTT {
			m := f.m(&all[i])
			for _, r := range sortedKeys(m) {
				if first {
					e.family(f.name, counter)
					first = false
				}
				e.u(f.name, m[r], "bridge", b.Name, "reason", string(r))
			}
		}
	}
}

func renderSerial(e *enc, s *Snapshot) {
	type st = serial.Status
	per := []struct {
		name, typ string
		v         func(*st) uint64
	}{
		{"edgeq_serial_open", gauge, func(p *st) uint64 { return boolValue(p.Open) }},
		{"edgeq_serial_pending", gauge, func(p *st) uint64 { return uint64(max(p.Pending, 0)) }},
		{"edgeq_serial_read_bytes_total", counter, func(p *st) uint64 { return p.BytesIn }},
		{"edgeq_serial_frames_total", counter, func(p *st) uint64 { return p.FramesIn }},
		{"edgeq_serial_stored_total", counter, func(p *st) uint64 { return p.Stored }},
		{"edgeq_serial_storage_errors_total", counter, func(p *st) uint64 { return p.StorageErrors }},
		{"edgeq_serial_storage_waits_total", counter, func(p *st) uint64 { return p.StorageWaits }},
		{"edgeq_serial_opens_total", counter, func(p *st) uint64 { return p.Opens }},
		{"edgeq_serial_open_failures_total", counter, func(p *st) uint64 { return p.OpenFailures }},
		{"edgeq_serial_fd_refusals_total", counter, func(p *st) uint64 { return p.FDRefusals }},
	}
	for _, f := range per {
		e.family(f.name, f.typ)
		for i := range s.Serial {
			e.u(f.name, f.v(&s.Serial[i]), "port", s.Serial[i].Name)
		}
	}
	first := true
	for _, p := range s.Serial {
		for _, r := range sortedKeys(p.Dropped) {
			if first {
				e.family("edgeq_serial_dropped_total", counter)
				first = false
			}
			e.u("edgeq_serial_dropped_total", p.Dropped[r], "port", p.Name, "reason", r)
		}
	}
}

func renderModbus(e *enc, s *Snapshot) {
	type bs = modbus.Status
	per := []struct {
		name, typ string
		v         func(*bs) uint64
	}{
		{"edgeq_modbus_open", gauge, func(b *bs) uint64 { return boolValue(b.Open) }},
		{"edgeq_modbus_pending", gauge, func(b *bs) uint64 { return uint64(max(b.Pending, 0)) }},
		{"edgeq_modbus_stored_total", counter, func(b *bs) uint64 { return b.Stored }},
		{"edgeq_modbus_storage_errors_total", counter, func(b *bs) uint64 { return b.StorageErrors }},
		{"edgeq_modbus_storage_waits_total", counter, func(b *bs) uint64 { return b.StorageWaits }},
		{"edgeq_modbus_opens_total", counter, func(b *bs) uint64 { return b.Opens }},
		{"edgeq_modbus_open_failures_total", counter, func(b *bs) uint64 { return b.OpenFailures }},
	}
	for _, f := range per {
		e.family(f.name, f.typ)
		for i := range s.Modbus {
			e.u(f.name, f.v(&s.Modbus[i]), "bus", s.Modbus[i].Name)
		}
	}
	e.family("edgeq_modbus_request_duration_seconds", histogram)
	for _, b := range s.Modbus {
		e.hist("edgeq_modbus_request_duration_seconds", b.Latency, "bus", b.Name)
	}
	type ds = modbus.DeviceStatus
	dev := []struct {
		name, typ string
		v         func(*ds) uint64
	}{
		{"edgeq_modbus_device_polls_total", counter, func(d *ds) uint64 { return d.Polls }},
		{"edgeq_modbus_device_failed_polls_total", counter, func(d *ds) uint64 { return d.FailedPolls }},
		{"edgeq_modbus_device_requests_total", counter, func(d *ds) uint64 { return d.Requests }},
		{"edgeq_modbus_device_retries_total", counter, func(d *ds) uint64 { return d.Retries }},
		{"edgeq_modbus_device_unchanged_total", counter, func(d *ds) uint64 { return d.Unchanged }},
	}
	for _, f := range dev {
		e.family(f.name, f.typ)
		for _, b := range s.Modbus {
			for i := range b.Devices {
				d := &b.Devices[i]
				e.u(f.name, f.v(d), "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device)
			}
		}
	}
	e.family("edgeq_modbus_device_errors_total", counter)
	for _, b := range s.Modbus {
		for _, d := range b.Devices {
			for _, k := range modbus.ErrorKinds() {
				e.u("edgeq_modbus_device_errors_total", d.Errors[k], "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device, "kind", k)
			}
		}
	}
	first := true
	for _, b := range s.Modbus {
		for _, d := range b.Devices {
			for _, c := range sortedKeys(d.Exceptions) {
				if first {
					e.family("edgeq_modbus_device_exceptions_total", counter)
					first = false
				}
				e.u("edgeq_modbus_device_exceptions_total", d.Exceptions[c], "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device, "code", c)
			}
		}
	}
	e.family("edgeq_modbus_device_last_good_timestamp_seconds", gauge)
	for _, b := range s.Modbus {
		for _, d := range b.Devices {
			var ts float64
			if !d.LastGood.IsZero() {
				ts = float64(d.LastGood.UnixNano()) / 1e9
			}
			e.f("edgeq_modbus_device_last_good_timestamp_seconds", ts, "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device)
		}
	}
	e.family("edgeq_modbus_device_last_latency_seconds", gauge)
	for _, b := range s.Modbus {
		for _, d := range b.Devices {
			e.f("edgeq_modbus_device_last_latency_seconds", d.LastLatency.Seconds(), "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device)
		}
	}
}

// RenderDevice writes device samples (devicemetrics.CollectAll), one
// family per metric name with the samples' own HELP text and TYPE. CollectAll
// keeps the samples of one name together; should a name come back later
// anyway, its samples are moved up to its first run rather than written as a
// second family.
func RenderDevice(w io.Writer, samples []devicemetrics.Sample) {
	if !contiguous(samples) {
		samples = groupByName(samples)
	}
	e := &enc{w: w, line: make([]byte, 0, 256)}
	prev := ""
	for i, s := range samples {
		if i == 0 || s.Name != prev {
			e.meta(s.Name, s.Help, s.Type.String())
			prev = s.Name
		}
		e.sample(s)
	}
}

func contiguous(samples []devicemetrics.Sample) bool {
	seen := map[string]bool{}
	for i, s := range samples {
		if i > 0 && samples[i-1].Name == s.Name {
			continue
		}
		if seen[s.Name] {
			return false
		}
		seen[s.Name] = true
	}
	return true
}

// groupByName orders samples by the first appearance of their name, keeping
// the order within a name.
func groupByName(samples []devicemetrics.Sample) []devicemetrics.Sample {
	first := map[string]int{}
	for i, s := range samples {
		if _, ok := first[s.Name]; !ok {
			first[s.Name] = i
		}
	}
	out := slices.Clone(samples)
	slices.SortStableFunc(out, func(a, b devicemetrics.Sample) int { return first[a.Name] - first[b.Name] })
	return out
}
