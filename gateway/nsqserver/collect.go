package nsqserver

import (
	"sort"

	"edgeq/gateway/metrics"
)

// StatsSnapshot is a copy of the server's counters and flow gauges at one
// moment.
type StatsSnapshot struct {
	Connections               int64 // open now
	TotalConnections, Refused uint64
	AuthFailures              uint64
	Published, PublishErrors  uint64
	Delivered                 uint64
	Fin, Req, Touch           uint64
	UnknownIDs                uint64 // FIN, REQ or TOUCH of an ID the connection does not hold
	RdyExceeded               uint64 // deliveries beyond a connection's RDY (stays 0)
	SlowConsumers             uint64
	TLSFailures               uint64                // closed: TLS required and not asked for, or the handshake failed
	RDY, InFlight             int64                 // summed over connections
	Errors                    []metrics.ReasonCount // error frames by code, sorted
}

// Snapshot copies the server's counters and sums its connections' flow.
func (s *Server) Snapshot() *StatsSnapshot {
	c := &s.stats
	st := &StatsSnapshot{
		Connections: c.Connections.Load(), TotalConnections: c.TotalConnections.Load(), Refused: c.Refused.Load(),
		AuthFailures: c.AuthFailures.Load(), Published: c.Published.Load(), PublishErrors: c.PubErrors.Load(),
		Delivered: c.Delivered.Load(), Fin: c.Fin.Load(), Req: c.Req.Load(), Touch: c.Touch.Load(),
		UnknownIDs: c.FinFailed.Load(), RdyExceeded: c.RdyExceeded.Load(), SlowConsumers: c.SlowConsumers.Load(),
		TLSFailures: c.TLSFailures.Load(),
	}
	st.RDY, st.InFlight = s.Flow()
	for code, v := range c.Errors() {
		st.Errors = append(st.Errors, metrics.ReasonCount{Reason: code, N: v})
	}
	sort.Slice(st.Errors, func(i, j int) bool { return st.Errors[i].Reason < st.Errors[j].Reason })
	return st
}

// WriteMetrics writes the NSQ listener's families; nothing when it is off
// (n nil).
func WriteMetrics(w *metrics.Writer, n *StatsSnapshot) {
	if n == nil {
		return
	}
	e := w.With(MetricsHelp)
	e.Gauge("edgeq_nsq_connections", uint64(max(n.Connections, 0)))
	e.Counter("edgeq_nsq_accepted_connections_total", n.TotalConnections)
	e.Counter("edgeq_nsq_refused_connections_total", n.Refused)
	e.Counter("edgeq_nsq_auth_failures_total", n.AuthFailures)
	e.Counter("edgeq_nsq_published_total", n.Published)
	e.Counter("edgeq_nsq_publish_errors_total", n.PublishErrors)
	e.Counter("edgeq_nsq_delivered_total", n.Delivered)
	e.Family("edgeq_nsq_acks_total", metrics.Counter)
	e.Uint("edgeq_nsq_acks_total", n.Fin, "command", "FIN")
	e.Uint("edgeq_nsq_acks_total", n.Req, "command", "REQ")
	e.Uint("edgeq_nsq_acks_total", n.Touch, "command", "TOUCH")
	e.Counter("edgeq_nsq_unknown_ids_total", n.UnknownIDs)
	e.Gauge("edgeq_nsq_rdy", uint64(max(n.RDY, 0)))
	e.Gauge("edgeq_nsq_in_flight", uint64(max(n.InFlight, 0)))
	e.Counter("edgeq_nsq_rdy_exceeded_total", n.RdyExceeded)
	e.Counter("edgeq_nsq_slow_consumers_total", n.SlowConsumers)
	e.Counter("edgeq_nsq_tls_failures_total", n.TLSFailures)
	e.Family("edgeq_nsq_errors_total", metrics.Counter)
	for _, c := range n.Errors {
		e.Uint("edgeq_nsq_errors_total", c.N, "code", c.Reason)
	}
}

// Collector is the NSQ listener's metrics collector; nothing when it is off
// (s nil).
func Collector(s *Server) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		if s != nil {
			WriteMetrics(w, s.Snapshot())
		}
	})
}

// MetricsHelp is the HELP text of the NSQ listener's families.
var MetricsHelp = metrics.Help{
	"edgeq_nsq_accepted_connections_total": "NSQ client connections accepted.",
	"edgeq_nsq_acks_total":                 "NSQ consumers' answers, by command: FIN (ack), REQ (nak with delay), TOUCH (in progress).",
	"edgeq_nsq_auth_failures_total":        "NSQ clients that failed AUTH or sent commands before it.",
	"edgeq_nsq_connections":                "Open NSQ client connections.",
	"edgeq_nsq_delivered_total":            "Messages delivered to NSQ consumers (redeliveries included).",
	"edgeq_nsq_errors_total":               "Error frames sent to NSQ clients, by code.",
	"edgeq_nsq_in_flight":                  "Messages NSQ consumers hold unanswered.",
	"edgeq_nsq_publish_errors_total":       "NSQ publishes refused (bad device, log error).",
	"edgeq_nsq_published_total":            "Messages stored durably from NSQ PUB and MPUB.",
	"edgeq_nsq_rdy":                        "RDY (credit) of all NSQ connections together.",
	"edgeq_nsq_rdy_exceeded_total":         "Deliveries beyond a connection's RDY (should stay 0).",
	"edgeq_nsq_refused_connections_total":  "NSQ client connections refused (nsq.max_connections).",
	"edgeq_nsq_slow_consumers_total":       "NSQ connections closed because their pending output passed nsq.max_pending.",
	"edgeq_nsq_tls_failures_total":         "NSQ connections closed because TLS was required and not asked for, or the handshake failed.",
	"edgeq_nsq_unknown_ids_total":          "FIN, REQ or TOUCH of a message ID the connection does not hold.",
}
