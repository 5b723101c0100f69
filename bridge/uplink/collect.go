package uplink

import "edgeq/gateway/metrics"

// uplinkStates are the values of edgeq_uplink_state's state label.
var uplinkStates = []string{"starting", "up", "retrying", "down"}

// WriteMetrics writes the uplinks' families, labelled by uplink and type;
// nothing without an uplink. Their lag (LagRecords, LagBytes, Leading)
// is the node's to fill in from its groups.
func WriteMetrics(w *metrics.Writer, ups []Stats) {
	if len(ups) == 0 {
		return
	}
	e := w.With(MetricsHelp)
	type us = Stats
	per := []struct {
		name string
		typ  metrics.Type
		v    func(*us) uint64
	}{
		{"edgeq_uplink_connected", metrics.Gauge,
			func(u *us) uint64 { return metrics.Bool(u.Connected) }},
		{"edgeq_uplink_lag_records", metrics.Gauge,
			func(u *us) uint64 { return u.LagRecords }},
		{"edgeq_uplink_lag_bytes", metrics.Gauge,
			func(u *us) uint64 { return u.LagBytes }},
		{"edgeq_uplink_leading", metrics.Gauge,
			func(u *us) uint64 { return metrics.Bool(u.Leading) }},
		{"edgeq_uplink_retry_after_total", metrics.Counter,
			func(u *us) uint64 { return u.RetryAfter }},
		{"edgeq_uplink_held", metrics.Gauge,
			func(u *us) uint64 { return uint64(max(u.Held, 0)) }},
		{"edgeq_uplink_window", metrics.Gauge,
			func(u *us) uint64 { return uint64(max(u.Window, 0)) }},
		{"edgeq_uplink_sent_total", metrics.Counter,
			func(u *us) uint64 { return u.Sent }},
		{"edgeq_uplink_acked_total", metrics.Counter,
			func(u *us) uint64 { return u.Acked }},
		{"edgeq_uplink_acked_bytes_total", metrics.Counter,
			func(u *us) uint64 { return u.AckedBytes }},
		{"edgeq_uplink_failed_total", metrics.Counter,
			func(u *us) uint64 { return u.Failed }},
		{"edgeq_uplink_retried_total", metrics.Counter,
			func(u *us) uint64 { return u.Retried }},
		{"edgeq_uplink_dead_letters_total", metrics.Counter,
			func(u *us) uint64 { return u.DeadLetters }},
		{"edgeq_uplink_upstream_checks_total", metrics.Counter,
			func(u *us) uint64 { return u.UpstreamChecks }},
		{"edgeq_uplink_already_upstream_total", metrics.Counter,
			func(u *us) uint64 { return u.AlreadyUpstream }},
		{"edgeq_uplink_unverified_total", metrics.Counter,
			func(u *us) uint64 { return u.Unverified }},
	}
	for _, f := range per {
		e.Family(f.name, f.typ)
		for i := range ups {
			e.Uint(f.name, f.v(&ups[i]), "uplink", ups[i].Name, "type", ups[i].Type)
		}
	}
	e.Family("edgeq_uplink_state", metrics.Gauge)
	for i := range ups {
		u := &ups[i]
		for _, st := range uplinkStates {
			e.Uint("edgeq_uplink_state", metrics.Bool(u.State == st), "uplink", u.Name, "type", u.Type, "state", st)
		}
	}
	e.Family("edgeq_uplink_oldest_unsent_seconds", metrics.Gauge)
	for i := range ups {
		e.Float("edgeq_uplink_oldest_unsent_seconds", ups[i].OldestUnsentSeconds, "uplink", ups[i].Name, "type", ups[i].Type)
	}
	e.Family("edgeq_uplink_upstream_latency_seconds", metrics.Histogram)
	for i := range ups {
		e.Hist("edgeq_uplink_upstream_latency_seconds", ups[i].Latency, "uplink", ups[i].Name, "type", ups[i].Type)
	}
}

// MetricsHelp is the HELP text of the uplinks' families.
var MetricsHelp = metrics.Help{
	"edgeq_uplink_already_upstream_total":   "Records that may have gone out before found in the upstream stream on a look-up, acked without being sent again (nats).",
	"edgeq_uplink_acked_bytes_total":        "Payload bytes of the records the upstream acknowledged.",
	"edgeq_uplink_acked_total":              "Records the upstream acknowledged (then acked to the log).",
	"edgeq_uplink_connected":                "1 while the uplink's upstream connection is up (http: the last request got an answer).",
	"edgeq_uplink_dead_letters_total":       "Records the upstream refused for good, dead-lettered to $EQ.DLQ.uplink:<name>.",
	"edgeq_uplink_failed_total":             "Record sends that failed (retryable or refused).",
	"edgeq_uplink_held":                     "Records the uplink holds: queued or awaiting the upstream's acknowledgement (at most the window).",
	"edgeq_uplink_lag_bytes":                "Estimated bytes of edgeq_uplink_lag_records: each partition's lag times its mean stored record size (0 where edgeq_uplink_leading is 0).",
	"edgeq_uplink_lag_records":              "Durable records of the uplink's group not yet acknowledged by the upstream (all partitions).",
	"edgeq_uplink_leading":                  "1 while this node leads the uplink's group (always on a standalone node); only the leader reports the lag.",
	"edgeq_uplink_oldest_unsent_seconds":    "Age of the oldest record the uplink holds or failed to send and has not sent since.",
	"edgeq_uplink_retried_total":            "Record sends that failed and will be retried after a backoff.",
	"edgeq_uplink_retry_after_total":        "Failures after which the uplink waited as the upstream asked (HTTP Retry-After on 429 or 503, capped at retry_after_max).",
	"edgeq_uplink_sent_total":               "Records sent upstream, retries included.",
	"edgeq_uplink_state":                    "1 for the uplink's current state (starting, up, retrying, down).",
	"edgeq_uplink_unverified_total":         "Records sent again that the upstream stream could not be asked about (a subject shared by devices, no read permission): its duplicate_window is their only dedup (nats).",
	"edgeq_uplink_upstream_checks_total":    "Reads of the upstream stream's last message of a device before a record that may have gone out before is sent again (nats; at most one per device and connection).",
	"edgeq_uplink_upstream_latency_seconds": "Time from sending a batch upstream to its acknowledgement, per acknowledged record.",
	"edgeq_uplink_window":                   "The uplink's window: its credit in its queue group.",
}
