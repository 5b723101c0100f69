package gateway

import (
	"testing"
	"time"

	"edgeq/bridge/uplink"
	"edgeq/gateway/config"
	"edgeq/gateway/groups"
	"edgeq/gateway/nodestats"
	"edgeq/gateway/queue"
	"edgeq/wal"
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

// TestGroupLagBytes: the lag in bytes is each partition's lag times its
// mean stored record size; a peer's partition counts at this node's mean; a
// node that does not lead the group reports nothing.
func TestGroupLagBytes(t *testing.T) {
	key := groups.GroupKey{Filter: "telemetry.>", Queue: "uplink:cloud"}
	s := &nodestats.Snapshot{Node: "gw-a", Log: wal.Stats{Partitions: []wal.PartitionStats{
		{Partition: 0, First: 1, Last: 100, Durable: 100, Bytes: 100 * 50}, // 50 bytes a record
		{Partition: 1, First: 11, Last: 20, Durable: 20, Bytes: 10 * 200},  // 200 bytes a record
		{Partition: 2}, // empty
	}}}
	s.Groups = []groups.GroupStats{{Key: key, Leading: true,
		Core: queue.Stats{Partitions: []queue.PartitionStats{{Partition: 0, Committed: 90}, {Partition: 1, Committed: 15},
			{Partition: 2}, {Partition: 3, Committed: 4}}},
		Partitions: map[int]groups.PartitionRef{0: {Node: "gw-a", Partition: 0}, 1: {Node: "gw-a", Partition: 1},
			2: {Node: "gw-a", Partition: 2}, 3: {Node: "gw-b", Partition: 0, Durable: 6}}}}
	means := partitionMeans(s)
	// Local: 10 × 50 + 5 × 200; gw-b/0: 2 records at this node's mean,
	// (5000 + 2000) / 110 bytes: 500 + 1000 + 127.3.
	recs, b, leading := groupLag(s, means, key)
	if want := uint64(1627); recs != 17 || b != want || !leading {
		t.Errorf("lag %d records, %d bytes, leading %v; want 17, %d, true", recs, b, leading, want)
	}
	s.Groups[0].Leading, s.Groups[0].Core = false, queue.Stats{}
	if recs, b, leading := groupLag(s, means, key); recs != 0 || b != 0 || leading {
		t.Errorf("not leading: %d records, %d bytes, leading %v", recs, b, leading)
	}
	if recs, b, leading := groupLag(s, means, groups.GroupKey{Filter: "x", Queue: "y"}); recs != 0 || b != 0 || leading {
		t.Errorf("unknown group: %d, %d, %v", recs, b, leading)
	}
}
