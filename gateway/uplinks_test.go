package gateway

import (
	"testing"
	"time"

	"edgeq/bridge/uplink"
	"edgeq/gateway/config"
)

func TestUplinkQueueConfig(t *testing.T) {
	uc := uplink.DefaultConfig()
	uc.Name, uc.Window = "cloud", 100
	qc := uplinkQueueConfig(config.Default(), uc)
	// 2 × (retry_max 30s + timeout 10s) + 1m
	if qc.AckWait != 140*time.Second || qc.MaxInFlight != 100 || qc.MaxDeliver < 1<<20 || qc.MaxNakDelay < uc.RetryMax {
		t.Errorf("queue config %+v", qc)
	}
	// A nats uplink's group hands it one record of a device at a time by
	// default: a record the stream refuses is never overtaken by the next
	// (per_device_order.txt in gateway/queue); device_window raises it.
	uc.Type = uplink.TypeNATS
	if dw := uplinkQueueConfig(config.Default(), uc).DeviceWindow; dw != 1 {
		t.Errorf("nats uplink: device window %d by default, want 1", dw)
	}
	uc.DeviceWindow = 16
	if dw := uplinkQueueConfig(config.Default(), uc).DeviceWindow; dw != 16 {
		t.Errorf("nats uplink with device_window 16: device window %d", dw)
	}
	uc.DeviceWindow, uc.Type = 0, ""
	uc.RateMsgs = 10 // 100 records queued behind 10/s: 10s, twice
	if w := uplinkQueueConfig(config.Default(), uc).AckWait; w != 160*time.Second {
		t.Errorf("ack_wait with rate_msgs %v, want 160s", w)
	}
	uc.RateMsgs, uc.RateBytes = 0, 1<<20 // 100 × 1MiB at 1MiB/s: 100s, twice
	if w := uplinkQueueConfig(config.Default(), uc).AckWait; w != 340*time.Second {
		t.Errorf("ack_wait with rate_bytes %v, want 340s", w)
	}
	uc.RateBytes, uc.Type = 0, uplink.TypeHTTP // an HTTP retry may wait retry_after_max (5m) in place
	if qc := uplinkQueueConfig(config.Default(), uc); qc.AckWait != 2*(5*time.Minute+10*time.Second)+time.Minute || qc.MaxNakDelay < 5*time.Minute {
		t.Errorf("http: ack_wait %v, max nak delay %v", qc.AckWait, qc.MaxNakDelay)
	}
}
