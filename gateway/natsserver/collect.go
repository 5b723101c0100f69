package natsserver

import "edgeq/gateway/metrics"

// StatsSnapshot is a copy of the server's counters at one moment.
type StatsSnapshot struct {
	Connections                         int64 // open now
	TotalConnections, Refused           uint64
	AuthFailures, ProtocolErrors        uint64
	InMsgs, InBytes, OutMsgs, OutBytes  uint64
	IngestErrors, BadDevice, BadAcks    uint64
	BadPulls                            uint64 // JetStream pull requests refused
	SlowConsumers, WriteTimeouts, Stale uint64 // connections closed, by reason (also in Closed)
	ForeignAcks                         uint64 // acks from a connection that did not hold the message
	TLSFailures                         uint64 // closed: TLS handshake failed (also in Closed)
	GroupsRefused                       uint64 // queue subscribes over max_groups_per_connection
	PermViolations                      uint64 // publishes and subscribes a user may not make
	Closed                              []metrics.ReasonCount
}

// Snapshot copies the counters.
func (cs *Stats) Snapshot() StatsSnapshot {
	s := StatsSnapshot{
		Connections: cs.Connections.Load(), TotalConnections: cs.TotalConnections.Load(), Refused: cs.Refused.Load(),
		AuthFailures: cs.AuthFailures.Load(), ProtocolErrors: cs.ProtocolErrors.Load(),
		InMsgs: cs.InMsgs.Load(), InBytes: cs.InBytes.Load(), OutMsgs: cs.OutMsgs.Load(), OutBytes: cs.OutBytes.Load(),
		IngestErrors: cs.IngestErrors.Load(), BadDevice: cs.BadDevice.Load(), BadAcks: cs.BadAcks.Load(), BadPulls: cs.BadPulls.Load(),
		SlowConsumers: cs.Closed(ClosedSlowConsumer), WriteTimeouts: cs.Closed(ClosedWriteTimeout),
		Stale: cs.Closed(ClosedStale), ForeignAcks: cs.ForeignAcks.Load(),
		TLSFailures: cs.Closed(ClosedTLSHandshake), GroupsRefused: cs.GroupsRefused.Load(),
		PermViolations: cs.PermViolations.Load(),
		Closed:         make([]metrics.ReasonCount, 0, len(CloseReasons())),
	}
	for _, r := range CloseReasons() {
		s.Closed = append(s.Closed, metrics.ReasonCount{Reason: r.String(), N: cs.Closed(r)})
	}
	return s
}

// WriteMetrics writes the NATS server's families. A publish refused for
// its device ID counts in edgeq_ingest_rejected_total{stage="nats"}, which
// the node's ingest writes.
func WriteMetrics(w *metrics.Writer, n *StatsSnapshot) {
	e := w.With(MetricsHelp)
	e.Gauge("edgeq_nats_connections", uint64(max(n.Connections, 0)))
	e.Counter("edgeq_nats_accepted_connections_total", n.TotalConnections)
	e.Counter("edgeq_nats_refused_connections_total", n.Refused)
	e.Family("edgeq_nats_closed_connections_total", metrics.Counter)
	for _, c := range n.Closed {
		e.Uint("edgeq_nats_closed_connections_total", c.N, "reason", c.Reason)
	}
	e.Counter("edgeq_nats_auth_failures_total", n.AuthFailures)
	e.Counter("edgeq_nats_refused_group_creations_total", n.GroupsRefused)
	e.Counter("edgeq_nats_permission_violations_total", n.PermViolations)
	e.Counter("edgeq_nats_protocol_errors_total", n.ProtocolErrors)
	e.Counter("edgeq_nats_in_messages_total", n.InMsgs)
	e.Counter("edgeq_nats_in_bytes_total", n.InBytes)
	e.Counter("edgeq_nats_out_messages_total", n.OutMsgs)
	e.Counter("edgeq_nats_out_bytes_total", n.OutBytes)
	e.Counter("edgeq_nats_ingest_errors_total", n.IngestErrors)
	e.Counter("edgeq_nats_bad_acks_total", n.BadAcks)
	e.Counter("edgeq_nats_foreign_acks_total", n.ForeignAcks)
}

// Collector is the NATS server's metrics collector.
func (s *Server) Collector() metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		st := s.stats.Snapshot()
		WriteMetrics(w, &st)
	})
}

// MetricsHelp is the HELP text of the NATS server's families.
var MetricsHelp = metrics.Help{
	"edgeq_nats_connections":                   "NATS client connections open now.",
	"edgeq_nats_accepted_connections_total":    "NATS client connections accepted.",
	"edgeq_nats_refused_connections_total":     "NATS client connections refused at max_connections.",
	"edgeq_nats_closed_connections_total":      "NATS client connections closed, by reason.",
	"edgeq_nats_auth_failures_total":           "NATS clients refused authentication: bad credentials, no CONNECT in time, or an operation before CONNECT.",
	"edgeq_nats_protocol_errors_total":         "NATS protocol errors sent to clients (-ERR).",
	"edgeq_nats_in_messages_total":             "Messages received from NATS clients.",
	"edgeq_nats_in_bytes_total":                "Payload bytes received from NATS clients.",
	"edgeq_nats_out_messages_total":            "Messages sent to NATS clients.",
	"edgeq_nats_out_bytes_total":               "Payload bytes sent to NATS clients.",
	"edgeq_nats_ingest_errors_total":           "NATS publishes on the telemetry prefix that could not be stored.",
	"edgeq_nats_bad_acks_total":                "Acknowledgements on $EQ.ACK refused (unparsable, unknown, or from a foreign connection).",
	"edgeq_nats_foreign_acks_total":            "Acknowledgements refused because they came from a connection that does not hold the message.",
	"edgeq_nats_permission_violations_total":   "Publishes and subscribes refused by the user's permissions.",
	"edgeq_nats_refused_group_creations_total": "Queue subscribes refused because the connection created nats.max_groups_per_connection groups already.",
}
