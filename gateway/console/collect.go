package console

import "edgeq/gateway/metrics"

// WriteMetrics writes the console's families: its event streams.
func WriteMetrics(w *metrics.Writer, c *Stats) {
	e := w.With(MetricsHelp)
	e.Gauge("edgeq_console_streams", uint64(max(c.Streams, 0)))
	e.Gauge("edgeq_console_max_streams", uint64(max(c.MaxStreams, 0)))
	e.Counter("edgeq_console_streams_opened_total", c.Opened)
	e.Counter("edgeq_console_streams_refused_total", c.Refused)
	e.Counter("edgeq_console_snapshots_total", c.Snapshots)
	e.Counter("edgeq_console_frames_skipped_total", c.Skipped)
}

// Collector is the console's metrics collector; a node without HTTP has no
// hub (h nil) and shows its families at zero.
func Collector(h *Hub) metrics.Collector {
	return metrics.CollectorFunc(func(w *metrics.Writer) {
		var st Stats
		if h != nil {
			st = h.Stats()
		}
		WriteMetrics(w, &st)
	})
}

// MetricsHelp is the HELP text of the console's families.
var MetricsHelp = metrics.Help{
	"edgeq_console_frames_skipped_total":  "Console snapshots a slow stream missed (it only ever holds the newest).",
	"edgeq_console_max_streams":           "The most /v1/events streams open at once (http.max_event_streams).",
	"edgeq_console_snapshots_total":       "Status snapshots taken for the console's event streams (one serves every open stream).",
	"edgeq_console_streams":               "Open /v1/events streams.",
	"edgeq_console_streams_opened_total":  "/v1/events streams opened.",
	"edgeq_console_streams_refused_total": "/v1/events streams refused because max_event_streams were open.",
}
