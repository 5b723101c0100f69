package metrics

import (
	"edgeq/bridge/uplink"
)

// uplinkStates are the values of edgeq_uplink_state's state label.
var uplinkStates = []string{"starting", "up", "retrying", "down"}

func renderUplinks(e *enc, s *Snapshot) {
	type us = uplink.Stats
	per := []struct {
		name, typ, help string
		v               func(*us) uint64
	}{
		{"edgeq_uplink_connected", gauge, "1 while the uplink's upstream connection is up (http: the last request got an answer).",
			func(u *us) uint64 { return boolValue(u.Connected) }},
		{"edgeq_uplink_lag_records", gauge, "Durable records of the uplink's group not yet acknowledged by the upstream (all partitions).",
			func(u *us) uint64 { return u.LagRecords }},
		{"edgeq_uplink_held", gauge, "Records the uplink holds: queued or awaiting the upstream's acknowledgement (at most the window).",
			func(u *us) uint64 { return uint64(max(u.Held, 0)) }},
		{"edgeq_uplink_window", gauge, "The uplink's window: its credit in its queue group.",
			func(u *us) uint64 { return uint64(max(u.Window, 0)) }},
		{"edgeq_uplink_sent_total", counter, "Records sent upstream, retries included.",
			func(u *us) uint64 { return u.Sent }},
		{"edgeq_uplink_acked_total", counter, "Records the upstream acknowledged (then acked to the log).",
			func(u *us) uint64 { return u.Acked }},
		{"edgeq_uplink_acked_bytes_total", counter, "Payload bytes of the records the upstream acknowledged.",
			func(u *us) uint64 { return u.AckedBytes }},
		{"edgeq_uplink_failed_total", counter, "Record sends that failed (retryable or refused).",
			func(u *us) uint64 { return u.Failed }},
		{"edgeq_uplink_retried_total", counter, "Record sends that failed and will be retried after a backoff.",
			func(u *us) uint64 { return u.Retried }},
		{"edgeq_uplink_dead_letters_total", counter, "Records the upstream refused for good, dead-lettered to $EQ.DLQ.uplink:<name>.",
			func(u *us) uint64 { return u.DeadLetters }},
	}
	for _, f := range per {
		e.familyHelp(f.name, f.typ, f.help)
		for i := range s.Uplinks {
			e.u(f.name, f.v(&s.Uplinks[i]), "uplink", s.Uplinks[i].Name, "type", s.Uplinks[i].Type)
		}
	}
	e.familyHelp("edgeq_uplink_state", gauge, "1 for the uplink's current state (starting, up, retrying, down).")
	for i := range s.Uplinks {
		u := &s.Uplinks[i]
		for _, st := range uplinkStates {
			e.u("edgeq_uplink_state", boolValue(u.State == st), "uplink", u.Name, "type", u.Type, "state", st)
		}
	}
	e.familyHelp("edgeq_uplink_oldest_unsent_seconds", gauge, "Age of the oldest record the uplink holds or failed to send and has not sent since.")
	for i := range s.Uplinks {
		e.f("edgeq_uplink_oldest_unsent_seconds", s.Uplinks[i].OldestUnsentSeconds, "uplink", s.Uplinks[i].Name, "type", s.Uplinks[i].Type)
	}
	e.familyHelp("edgeq_uplink_upstream_latency_seconds", histogram, "Time from sending a batch upstream to its acknowledgement, per acknowledged record.")
	for i := range s.Uplinks {
		e.hist("edgeq_uplink_upstream_latency_seconds", s.Uplinks[i].Latency, "uplink", s.Uplinks[i].Name, "type", s.Uplinks[i].Type)
	}
}
