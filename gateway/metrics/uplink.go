package metrics

import (
	"edgeq/bridge/uplink"
)

// uplinkStates are the values of edgeq_uplink_state's state label.
var uplinkStates = []string{"starting", "up", "retrying", "down"}

func renderUplinks(e *enc, s *Snapshot) {
	type us = uplink.Stats
	per := []struct {
		name, typ string
		v         func(*us) uint64
	}{
		{"edgeq_uplink_connected", gauge,
			func(u *us) uint64 { return boolValue(u.Connected) }},
		{"edgeq_uplink_lag_records", gauge,
			func(u *us) uint64 { return u.LagRecords }},
		{"edgeq_uplink_lag_bytes", gauge,
			func(u *us) uint64 { return u.LagBytes }},
		{"edgeq_uplink_leading", gauge,
			func(u *us) uint64 { return boolValue(u.Leading) }},
		{"edgeq_uplink_retry_after_total", counter,
			func(u *us) uint64 { return u.RetryAfter }},
		{"edgeq_uplink_held", gauge,
			func(u *us) uint64 { return uint64(max(u.Held, 0)) }},
		{"edgeq_uplink_window", gauge,
			func(u *us) uint64 { return uint64(max(u.Window, 0)) }},
		{"edgeq_uplink_sent_total", counter,
			func(u *us) uint64 { return u.Sent }},
		{"edgeq_uplink_acked_total", counter,
			func(u *us) uint64 { return u.Acked }},
		{"edgeq_uplink_acked_bytes_total", counter,
			func(u *us) uint64 { return u.AckedBytes }},
		{"edgeq_uplink_failed_total", counter,
			func(u *us) uint64 { return u.Failed }},
		{"edgeq_uplink_retried_total", counter,
			func(u *us) uint64 { return u.Retried }},
		{"edgeq_uplink_dead_letters_total", counter,
			func(u *us) uint64 { return u.DeadLetters }},
		{"edgeq_uplink_upstream_checks_total", counter,
			func(u *us) uint64 { return u.UpstreamChecks }},
		{"edgeq_uplink_already_upstream_total", counter,
			func(u *us) uint64 { return u.AlreadyUpstream }},
		{"edgeq_uplink_unverified_total", counter,
			func(u *us) uint64 { return u.Unverified }},
	}
	for _, f := range per {
		e.family(f.name, f.typ)
		for i := range s.Uplinks {
			e.u(f.name, f.v(&s.Uplinks[i]), "uplink", s.Uplinks[i].Name, "type", s.Uplinks[i].Type)
		}
	}
	e.family("edgeq_uplink_state", gauge)
	for i := range s.Uplinks {
		u := &s.Uplinks[i]
		for _, st := range uplinkStates {
			e.u("edgeq_uplink_state", boolValue(u.State == st), "uplink", u.Name, "type", u.Type, "state", st)
		}
	}
	e.family("edgeq_uplink_oldest_unsent_seconds", gauge)
	for i := range s.Uplinks {
		e.f("edgeq_uplink_oldest_unsent_seconds", s.Uplinks[i].OldestUnsentSeconds, "uplink", s.Uplinks[i].Name, "type", s.Uplinks[i].Type)
	}
	e.family("edgeq_uplink_upstream_latency_seconds", histogram)
	for i := range s.Uplinks {
		e.hist("edgeq_uplink_upstream_latency_seconds", s.Uplinks[i].Latency, "uplink", s.Uplinks[i].Name, "type", s.Uplinks[i].Type)
	}
}
