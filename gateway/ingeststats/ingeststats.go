// Package ingeststats is the node's ingest as /metrics and /v1/status see
// it: appends by source, refusals before a record is stored, hot-device
// isolation and the busiest devices. The ingest router (the root package's
// Ingest) fills these; this package writes their families.
package ingeststats

import (
	"slices"

	"edgeq/gateway/hot"
	"edgeq/gateway/metrics"
)

// Source counts one ingest source's appends.
type Source struct {
	Name                string
	Msgs, Bytes, Errors uint64
}

// HotStats describe hot-device isolation.
type HotStats struct {
	Enabled           bool
	Tracked, Isolated int
	Untracked         uint64 // devices beyond the tracking bound
	Moves, MoveErrors uint64
	// HeldBack counts evaluations that kept a cooled device isolated
	// because of its backlog in the hot partition.
	HeldBack uint64
}

// Scrape is what the ingest families are written from.
type Scrape struct {
	Sources []Source // sorted by name
	// LogRejected are the log's refusals by reason (wal.Stats.Rejected);
	// NATSBadDevice the publishes the NATS server refused for their
	// subject's device ID, which never reach the log.
	LogRejected   map[string]uint64
	NATSBadDevice uint64
	Hot           HotStats
	// TopDevices are the busiest devices, highest rate first.
	TopDevices []hot.DeviceRate
}

// rejectedReasons are the log's refusal reasons (wal.Stats.Rejected), in a
// fixed order so that the series do not move between scrapes.
var rejectedReasons = []string{"bad_device_id", "too_large", "too_many_devices", "full", "disk_low", "closed"}

// WriteMetrics writes the ingest families.
func WriteMetrics(w *metrics.Writer, s *Scrape) {
	e := w.With(MetricsHelp)
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
		e.Family(f.name, metrics.Counter)
		for _, c := range s.Sources {
			e.Uint(f.name, f.v(c), "source", c.Name)
		}
	}
	// Refusals before a record is stored. A publish refused by the NATS
	// server (bad device ID in the subject) never reaches the log, so the
	// family sums to every refusal without counting one twice.
	e.Family("edgeq_ingest_rejected_total", metrics.Counter)
	for _, r := range rejectedReasons {
		e.Uint("edgeq_ingest_rejected_total", s.LogRejected[r], "stage", "log", "reason", r)
	}
	for _, r := range metrics.SortedKeys(s.LogRejected) {
		if !slices.Contains(rejectedReasons, r) {
			e.Uint("edgeq_ingest_rejected_total", s.LogRejected[r], "stage", "log", "reason", r)
		}
	}
	e.Uint("edgeq_ingest_rejected_total", s.NATSBadDevice, "stage", "nats", "reason", "bad_device_id")

	if s.Hot.Enabled {
		e.Gauge("edgeq_hot_devices_tracked", uint64(s.Hot.Tracked))
		e.Gauge("edgeq_hot_devices_isolated", uint64(s.Hot.Isolated))
		e.Counter("edgeq_hot_devices_untracked_total", s.Hot.Untracked)
		e.Counter("edgeq_hot_moves_total", s.Hot.Moves)
		e.Counter("edgeq_hot_move_errors_total", s.Hot.MoveErrors)
		e.Counter("edgeq_hot_move_back_held_total", s.Hot.HeldBack)
	}
	if len(s.TopDevices) > 0 {
		const name = "edgeq_top_device_messages_per_second"
		e.Family(name, metrics.Gauge)
		for _, d := range s.TopDevices {
			e.Float(name, d.Rate, "device", d.Device, "isolated", metrics.BoolLabel(d.Hot))
		}
	}
}

// MetricsHelp is the HELP text of the ingest families.
var MetricsHelp = metrics.Help{
	"edgeq_ingest_messages_total":          "Messages appended to the log, by ingest source (nats, http, mqtt:<bridge>, serial:<port>).",
	"edgeq_ingest_bytes_total":             "Payload bytes appended to the log, by ingest source.",
	"edgeq_ingest_errors_total":            "Appends that failed, by ingest source.",
	"edgeq_ingest_rejected_total":          "Messages refused before they were stored, by stage (log, nats) and reason; each refusal counted once.",
	"edgeq_hot_devices_tracked":            "Devices whose rate the hot-device detector tracks.",
	"edgeq_hot_devices_isolated":           "Devices isolated in a hot partition now.",
	"edgeq_hot_devices_untracked_total":    "Devices left untracked because the detector's device table was full.",
	"edgeq_hot_moves_total":                "Devices moved to or back from a hot partition (a move marker appended).",
	"edgeq_hot_move_errors_total":          "Device moves that failed; the device stays where it was.",
	"edgeq_top_device_messages_per_second": "Message rate of the busiest devices over the hot window (at most metrics.top_devices); isolated: in a hot partition.",
	"edgeq_hot_move_back_held_total":       "Moves of a cooled device back home held off because it still had a backlog in its hot partition.",
}
