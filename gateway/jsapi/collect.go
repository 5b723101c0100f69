package jsapi

import "edgeq/gateway/metrics"

// StatsSnapshot describes the JetStream API at one moment (all zero when
// it is off).
type StatsSnapshot struct {
	Enabled             bool
	APICalls, APIErrors uint64
	Consumers           int
	// ConsumersDeleted by CONSUMER.DELETE, ConsumersExpired after their
	// inactive_threshold (ephemeral ones).
	ConsumersDeleted, ConsumersExpired uint64
	BadPulls                           uint64 // pull requests refused
	MsgIDs, MaxMsgIDs                  int    // Nats-Msg-Id values held for deduplication, and their bound
	Duplicates, MsgIDsEvicted          uint64
	// Ordered consumers (ack none: reads of the log): active, their bound,
	// created, expired, refused at the bound, messages delivered.
	Ordered, MaxOrdered                                              int
	OrderedCreated, OrderedExpired, OrderedRefused, OrderedDelivered uint64
	// The last-value index: devices held, devices left out at its bound.
	LastIndexDevices int
	LastIndexDropped uint64
	OrderedReadBytes int64 // what ordered consumers' reads hold now
}

// Snapshot describes s and its deduplication table d (nil without a
// duplicate window); badPulls is the count of pull requests the NATS server
// refused. A nil s is JetStream off.
func Snapshot(s *Service, d *Dedup, badPulls uint64) StatsSnapshot {
	if s == nil {
		return StatsSnapshot{}
	}
	st := StatsSnapshot{Enabled: true, APICalls: s.Total.Load(), APIErrors: s.Errors.Load(),
		Consumers: s.Consumers(), BadPulls: badPulls,
		ConsumersDeleted: s.Deleted.Load(), ConsumersExpired: s.Expired.Load()}
	os := s.OrderedStats()
	st.Ordered, st.MaxOrdered = os.Active, os.Max
	st.OrderedCreated, st.OrderedExpired, st.OrderedRefused = os.Created, os.Expired, os.Refused
	st.OrderedDelivered, st.LastIndexDevices, st.LastIndexDropped = os.Delivered, os.LastIndexDevices, os.LastIndexDropped
	st.OrderedReadBytes = os.ReadBytes
	if d != nil {
		st.MsgIDs, st.MaxMsgIDs = d.Len(), d.max
		st.Duplicates, st.MsgIDsEvicted = d.Duplicates.Load(), d.Evicted.Load()
	}
	return st
}

// WriteMetrics writes the JetStream API's families, only when it is on.
func WriteMetrics(w *metrics.Writer, j *StatsSnapshot) {
	if !j.Enabled {
		return
	}
	e := w.With(MetricsHelp)
	e.Counter("edgeq_jetstream_api_requests_total", j.APICalls)
	e.Counter("edgeq_jetstream_api_errors_total", j.APIErrors)
	e.Gauge("edgeq_jetstream_consumers", uint64(max(j.Consumers, 0)))
	e.Counter("edgeq_jetstream_consumers_deleted_total", j.ConsumersDeleted)
	e.Counter("edgeq_jetstream_consumers_expired_total", j.ConsumersExpired)
	e.Counter("edgeq_jetstream_bad_pulls_total", j.BadPulls)
	e.Gauge("edgeq_jetstream_msg_ids", uint64(max(j.MsgIDs, 0)))
	e.Gauge("edgeq_jetstream_max_msg_ids", uint64(max(j.MaxMsgIDs, 0)))
	e.Counter("edgeq_jetstream_duplicates_total", j.Duplicates)
	e.Counter("edgeq_jetstream_msg_ids_evicted_total", j.MsgIDsEvicted)
	e.Gauge("edgeq_jetstream_ordered_consumers", uint64(max(j.Ordered, 0)))
	e.Gauge("edgeq_jetstream_max_ordered_consumers", uint64(max(j.MaxOrdered, 0)))
	e.Counter("edgeq_jetstream_ordered_created_total", j.OrderedCreated)
	e.Counter("edgeq_jetstream_ordered_expired_total", j.OrderedExpired)
	e.Counter("edgeq_jetstream_ordered_refused_total", j.OrderedRefused)
	e.Counter("edgeq_jetstream_ordered_delivered_total", j.OrderedDelivered)
	e.Gauge("edgeq_jetstream_ordered_read_bytes", uint64(max(j.OrderedReadBytes, 0)))
	e.Gauge("edgeq_jetstream_last_index_devices", uint64(max(j.LastIndexDevices, 0)))
	e.Counter("edgeq_jetstream_last_index_dropped_total", j.LastIndexDropped)
}

// Collector is the JetStream API's metrics collector (nothing when s is
// nil: JetStream off); badPulls reads the NATS server's count of refused
// pull requests.
func Collector(s *Service, d *Dedup, badPulls func() uint64) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		if s == nil {
			return
		}
		st := Snapshot(s, d, badPulls())
		WriteMetrics(w, &st)
	})
}

// MetricsHelp is the HELP text of the JetStream API's families.
var MetricsHelp = metrics.Help{
	"edgeq_jetstream_api_errors_total":         "JetStream API requests answered with a JetStream error.",
	"edgeq_jetstream_api_requests_total":       "JetStream API requests answered ($JS.API.*, pull requests aside).",
	"edgeq_jetstream_bad_pulls_total":          "Pull requests refused with a 409 (bad JSON, batch over the limit).",
	"edgeq_jetstream_consumers":                "JetStream consumers defined (each is a queue group).",
	"edgeq_jetstream_consumers_deleted_total":  "JetStream consumers deleted by CONSUMER.DELETE.",
	"edgeq_jetstream_consumers_expired_total":  "JetStream consumers (ephemeral, or with an inactive_threshold) removed after that long without use.",
	"edgeq_jetstream_duplicates_total":         "Publishes not stored because their Nats-Msg-Id was in the duplicate window.",
	"edgeq_jetstream_ordered_consumers":        "Ordered JetStream consumers (ack_policy none: reads of the log without a queue group).",
	"edgeq_jetstream_max_ordered_consumers":    "Bound of the ordered consumers (jetstream.max_ordered).",
	"edgeq_jetstream_ordered_created_total":    "Ordered consumers created.",
	"edgeq_jetstream_ordered_expired_total":    "Ordered consumers removed after their inactive_threshold without use.",
	"edgeq_jetstream_ordered_refused_total":    "Ordered consumer creations refused at jetstream.max_ordered or max_ordered_per_conn.",
	"edgeq_jetstream_ordered_delivered_total":  "Messages read by ordered consumers.",
	"edgeq_jetstream_ordered_read_bytes":       "Bytes of the log ordered consumers' reads hold now (at most 4 readers x partitions x 16 KiB).",
	"edgeq_jetstream_last_index_devices":       "Devices in the last-value index (message get by subject, KV view, last_per_subject); built on first use.",
	"edgeq_jetstream_last_index_dropped_total": "Devices left out of the last-value index at its bound (wal.max_devices).",
	"edgeq_jetstream_max_msg_ids":              "Bound of the Nats-Msg-Id table (jetstream.max_msg_ids).",
	"edgeq_jetstream_msg_ids":                  "Nats-Msg-Id values held in the duplicate window.",
	"edgeq_jetstream_msg_ids_evicted_total":    "Nats-Msg-Id values forgotten before their window ended (table full).",
}
