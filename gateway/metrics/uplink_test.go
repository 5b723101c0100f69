package metrics_test

import (
	"bytes"
	"testing"
	"time"

	"edgeq/bridge/uplink"
	"edgeq/gateway/apiv1"
	"edgeq/gateway/groups"
	"edgeq/internal/hist"
)

func TestRenderUplinks(t *testing.T) {
	h := hist.New(groups.LatencyBounds)
	h.Observe(3 * time.Millisecond)
	s := richSnapshot(t, 2, 1)
	s.Uplinks = []uplink.Stats{
		{UplinkStatus: apiv1.UplinkStatus{Name: "cloud", Type: "nats", State: "up", Connected: true, LagRecords: 12, LagBytes: 4096, Leading: true, RetryAfter: 2, Held: 3, Window: 256,
			OldestUnsentSeconds: 1.5, Sent: 100, Acked: 97, AckedBytes: 9700, Failed: 3, Retried: 3}, Latency: h.Snapshot()},
		{UplinkStatus: apiv1.UplinkStatus{Name: `we"b`, Type: "http", State: "down"}},
	}
	got := render(s)
	mustLint(t, got)
	for _, want := range []string{
		`edgeq_uplink_lag_records{uplink="cloud",type="nats"} 12`,
		`edgeq_uplink_lag_bytes{uplink="cloud",type="nats"} 4096`,
		`edgeq_uplink_leading{uplink="cloud",type="nats"} 1`,
		`edgeq_uplink_leading{uplink="we\"b",type="http"} 0`,
		`edgeq_uplink_retry_after_total{uplink="cloud",type="nats"} 2`,
		`edgeq_uplink_state{uplink="cloud",type="nats",state="up"} 1`,
		`edgeq_uplink_state{uplink="we\"b",type="http",state="down"} 1`,
		`edgeq_uplink_acked_total{uplink="cloud",type="nats"} 97`,
		`edgeq_uplink_oldest_unsent_seconds{uplink="cloud",type="nats"} 1.5`,
		`edgeq_uplink_upstream_latency_seconds_count{uplink="cloud",type="nats"} 1`,
	} {
		if !bytes.Contains(got, []byte(want+"\n")) {
			t.Errorf("missing %s", want)
		}
	}
}
