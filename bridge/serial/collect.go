package serial

import "edgeq/gateway/metrics"

// WriteMetrics writes the serial ports' families, labelled by port;
// nothing without a port.
func WriteMetrics(w *metrics.Writer, ports []Status) {
	if len(ports) == 0 {
		return
	}
	e := w.With(MetricsHelp)
	type st = Status
	per := []struct {
		name string
		typ  metrics.Type
		v    func(*st) uint64
	}{
		{"edgeq_serial_open", metrics.Gauge, func(p *st) uint64 { return metrics.Bool(p.Open) }},
		{"edgeq_serial_pending", metrics.Gauge, func(p *st) uint64 { return uint64(max(p.Pending, 0)) }},
		{"edgeq_serial_read_bytes_total", metrics.Counter, func(p *st) uint64 { return p.BytesIn }},
		{"edgeq_serial_frames_total", metrics.Counter, func(p *st) uint64 { return p.FramesIn }},
		{"edgeq_serial_stored_total", metrics.Counter, func(p *st) uint64 { return p.Stored }},
		{"edgeq_serial_storage_errors_total", metrics.Counter, func(p *st) uint64 { return p.StorageErrors }},
		{"edgeq_serial_storage_waits_total", metrics.Counter, func(p *st) uint64 { return p.StorageWaits }},
		{"edgeq_serial_opens_total", metrics.Counter, func(p *st) uint64 { return p.Opens }},
		{"edgeq_serial_open_failures_total", metrics.Counter, func(p *st) uint64 { return p.OpenFailures }},
		{"edgeq_serial_fd_refusals_total", metrics.Counter, func(p *st) uint64 { return p.FDRefusals }},
	}
	for _, f := range per {
		e.Family(f.name, f.typ)
		for i := range ports {
			e.Uint(f.name, f.v(&ports[i]), "port", ports[i].Name)
		}
	}
	first := true
	for _, p := range ports {
		for _, r := range metrics.SortedKeys(p.Dropped) {
			if first {
				e.Family("edgeq_serial_dropped_total", metrics.Counter)
				first = false
			}
			e.Uint("edgeq_serial_dropped_total", p.Dropped[r], "port", p.Name, "reason", r)
		}
	}
}

// MetricsHelp is the HELP text of the serial ports' families.
var MetricsHelp = metrics.Help{
	"edgeq_serial_open":                 "Whether the serial port is open (1).",
	"edgeq_serial_pending":              "Serial frames appended and waiting for durability.",
	"edgeq_serial_read_bytes_total":     "Bytes read from the serial port.",
	"edgeq_serial_frames_total":         "Frames cut from the serial stream (stored, dropped, failed or pending).",
	"edgeq_serial_stored_total":         "Serial frames made durable in the log.",
	"edgeq_serial_storage_errors_total": "Serial frames whose append failed.",
	"edgeq_serial_storage_waits_total":  "Serial frames that waited for a free append slot.",
	"edgeq_serial_opens_total":          "Times the serial port was opened, reopens after an unplug included.",
	"edgeq_serial_open_failures_total":  "Failed attempts to open the serial port.",
	"edgeq_serial_fd_refusals_total":    "Serial opens refused because the port's file descriptor was 1024 or above.",
	"edgeq_serial_dropped_total":        "Serial frames dropped, by reason (malformed, oversize, ...).",
}
