package modbus

import (
	"strconv"

	"edgeq/gateway/metrics"
)

// WriteMetrics writes the Modbus buses' families, labelled by bus and, per
// configured device, unit and device; nothing without a bus.
func WriteMetrics(w *metrics.Writer, buses []Status) {
	if len(buses) == 0 {
		return
	}
	e := w.With(MetricsHelp)
	type bs = Status
	per := []struct {
		name string
		typ  metrics.Type
		v    func(*bs) uint64
	}{
		{"edgeq_modbus_open", metrics.Gauge, func(b *bs) uint64 { return metrics.Bool(b.Open) }},
		{"edgeq_modbus_pending", metrics.Gauge, func(b *bs) uint64 { return uint64(max(b.Pending, 0)) }},
		{"edgeq_modbus_stored_total", metrics.Counter, func(b *bs) uint64 { return b.Stored }},
		{"edgeq_modbus_storage_errors_total", metrics.Counter, func(b *bs) uint64 { return b.StorageErrors }},
		{"edgeq_modbus_storage_waits_total", metrics.Counter, func(b *bs) uint64 { return b.StorageWaits }},
		{"edgeq_modbus_opens_total", metrics.Counter, func(b *bs) uint64 { return b.Opens }},
		{"edgeq_modbus_open_failures_total", metrics.Counter, func(b *bs) uint64 { return b.OpenFailures }},
	}
	for _, f := range per {
		e.Family(f.name, f.typ)
		for i := range buses {
			e.Uint(f.name, f.v(&buses[i]), "bus", buses[i].Name)
		}
	}
	e.Family("edgeq_modbus_request_duration_seconds", metrics.Histogram)
	for _, b := range buses {
		e.Hist("edgeq_modbus_request_duration_seconds", b.Latency, "bus", b.Name)
	}
	type ds = DeviceStatus
	dev := []struct {
		name string
		typ  metrics.Type
		v    func(*ds) uint64
	}{
		{"edgeq_modbus_device_polls_total", metrics.Counter, func(d *ds) uint64 { return d.Polls }},
		{"edgeq_modbus_device_failed_polls_total", metrics.Counter, func(d *ds) uint64 { return d.FailedPolls }},
		{"edgeq_modbus_device_requests_total", metrics.Counter, func(d *ds) uint64 { return d.Requests }},
		{"edgeq_modbus_device_retries_total", metrics.Counter, func(d *ds) uint64 { return d.Retries }},
		{"edgeq_modbus_device_unchanged_total", metrics.Counter, func(d *ds) uint64 { return d.Unchanged }},
	}
	for _, f := range dev {
		e.Family(f.name, f.typ)
		for _, b := range buses {
			for i := range b.Devices {
				d := &b.Devices[i]
				e.Uint(f.name, f.v(d), "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device)
			}
		}
	}
	e.Family("edgeq_modbus_device_errors_total", metrics.Counter)
	for _, b := range buses {
		for _, d := range b.Devices {
			for _, k := range ErrorKinds() {
				e.Uint("edgeq_modbus_device_errors_total", d.Errors[k], "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device, "kind", k)
			}
		}
	}
	first := true
	for _, b := range buses {
		for _, d := range b.Devices {
			for _, c := range metrics.SortedKeys(d.Exceptions) {
				if first {
					e.Family("edgeq_modbus_device_exceptions_total", metrics.Counter)
					first = false
				}
				e.Uint("edgeq_modbus_device_exceptions_total", d.Exceptions[c], "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device, "code", c)
			}
		}
	}
	e.Family("edgeq_modbus_device_last_good_timestamp_seconds", metrics.Gauge)
	for _, b := range buses {
		for _, d := range b.Devices {
			var ts float64
			if !d.LastGood.IsZero() {
				ts = float64(d.LastGood.UnixNano()) / 1e9
			}
			e.Float("edgeq_modbus_device_last_good_timestamp_seconds", ts, "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device)
		}
	}
	e.Family("edgeq_modbus_device_last_latency_seconds", metrics.Gauge)
	for _, b := range buses {
		for _, d := range b.Devices {
			e.Float("edgeq_modbus_device_last_latency_seconds", d.LastLatency.Seconds(), "bus", b.Name, "unit", strconv.Itoa(d.Unit), "device", d.Device)
		}
	}
}

// MetricsHelp is the HELP text of the Modbus buses' families.
var MetricsHelp = metrics.Help{
	"edgeq_modbus_device_errors_total":                "Failed Modbus requests of the device, by kind (timeout, crc, exception, garbled, unavailable, ...).",
	"edgeq_modbus_device_exceptions_total":            "Modbus exception responses of the device, by exception code.",
	"edgeq_modbus_device_failed_polls_total":          "Polls of the device that stored a record with a quality other than good.",
	"edgeq_modbus_device_last_good_timestamp_seconds": "Unix time of the device's last poll with every register read.",
	"edgeq_modbus_device_last_latency_seconds":        "Round-trip time of the device's last Modbus request.",
	"edgeq_modbus_device_polls_total":                 "Polls of the device (each one telemetry record unless on_change left it out).",
	"edgeq_modbus_device_requests_total":              "Modbus requests sent to the device (merged reads count once).",
	"edgeq_modbus_device_retries_total":               "Modbus requests to the device sent again after a failure.",
	"edgeq_modbus_device_unchanged_total":             "Polls of the device not stored because no value moved past its deadband (on_change).",
	"edgeq_modbus_open":                               "1 while the Modbus bus (serial port or TCP connection) is open.",
	"edgeq_modbus_open_failures_total":                "Failed attempts to open the Modbus bus.",
	"edgeq_modbus_opens_total":                        "Times the Modbus bus was opened.",
	"edgeq_modbus_pending":                            "Modbus records waiting to become durable (bounded).",
	"edgeq_modbus_request_duration_seconds":           "Round-trip time of Modbus requests on the bus.",
	"edgeq_modbus_storage_errors_total":               "Modbus records the log refused (disk full, rejected).",
	"edgeq_modbus_storage_waits_total":                "Polls that waited because the bus's bound of records not yet durable was reached.",
	"edgeq_modbus_stored_total":                       "Modbus records stored durably.",
}
