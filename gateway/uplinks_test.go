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
	uc.RateMsgs = 10 // 100 records queued behind 10/s: 10s, twice
	if w := uplinkQueueConfig(config.Default(), uc).AckWait; w != 160*time.Second {
		t.Errorf("ack_wait with rate_msgs %v, want 160s", w)
	}
	uc.RateMsgs, uc.RateBytes = 0, 1<<20 // 100 × 1MiB at 1MiB/s: 100s, twice
	if w := uplinkQueueConfig(config.Default(), uc).AckWait; w != 340*time.Second {
		t.Errorf("ack_wait with rate_bytes %v, want 340s", w)
	}
}
