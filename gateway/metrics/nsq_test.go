package metrics_test

import (
	"bytes"
	"testing"

	"edgeq/gateway/metrics/lint"
)

// TestRenderNSQ: the NSQ families appear only when the listener is on, lint
// clean, and say what the snapshot holds.
func TestRenderNSQ(t *testing.T) {
	if off := render(&Snapshot{}); bytes.Contains(off, []byte("edgeq_nsq_")) {
		t.Fatal("NSQ families rendered with NSQ off")
	}
	s := &Snapshot{NSQ: &NSQStats{
		Connections: 4, TotalConnections: 9, Refused: 1, AuthFailures: 2, Published: 20000, PublishErrors: 3,
		Delivered: 20100, Fin: 20000, Req: 90, Touch: 7, UnknownIDs: 5, SlowConsumers: 1, TLSFailures: 6, RDY: 128, InFlight: 100,
		Errors: []ReasonCount{{Reason: "E_FIN_FAILED", N: 5}, {Reason: "E_INVALID", N: 2}},
	}}
	got := render(s)
	mustLint(t, got)
	v := mustValues(t, got)
	k := lint.Key
	for key, want := range map[string]float64{
		k("edgeq_nsq_connections"):                          4,
		k("edgeq_nsq_accepted_connections_total"):           9,
		k("edgeq_nsq_published_total"):                      20000,
		k("edgeq_nsq_acks_total", "command", "FIN"):         20000,
		k("edgeq_nsq_acks_total", "command", "REQ"):         90,
		k("edgeq_nsq_acks_total", "command", "TOUCH"):       7,
		k("edgeq_nsq_rdy"):                                  128,
		k("edgeq_nsq_in_flight"):                            100,
		k("edgeq_nsq_rdy_exceeded_total"):                   0,
		k("edgeq_nsq_errors_total", "code", "E_FIN_FAILED"): 5,
		k("edgeq_nsq_unknown_ids_total"):                    5,
		k("edgeq_nsq_slow_consumers_total"):                 1,
		k("edgeq_nsq_tls_failures_total"):                   6,
	} {
		if v[key] != want {
			t.Errorf("%s = %v, want %v", key, v[key], want)
		}
	}
}
