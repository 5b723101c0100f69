package groups

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"edgeq/gateway/queue"
	"edgeq/wal"
)

// TestRetentionDropsHandedOutRecord: a member (an uplink whose upstream is
// down) keeps naking a device's oldest record while the log fills;
// full_policy drop_oldest removes it. The group must take the record as
// finished when it is due again, not nak it forever, and go on with what
// is left, in order.
func TestRetentionDropsHandedOutRecord(t *testing.T) {
	o := wal.DefaultOptions()
	o.Partitions, o.HotPartitions = 1, 1
	o.FsyncInterval = 2 * time.Millisecond
	o.SegmentSize, o.MaxBytes, o.FullPolicy = 64<<10, 128<<10, wal.DropOldest
	o.RetentionInterval = time.Hour // the test enforces it
	l, err := wal.Open(t.TempDir(), o, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	cfg.MaxDeliver = 1 << 30 // as an uplink's group: an outage never dead-letters
	// Under the node's read-ahead budget (as a node runs) a record handed
	// out keeps no copy in the group: a redelivery reads it from the log.
	reg := NewRegistry(Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: cfg, GroupTTL: time.Hour, MaxGroups: 8,
		ReadAheadBudget: 256 << 10}, l, quiet())
	key := GroupKey{"telemetry.>", "uplink:x"}
	var (
		down     atomic.Bool
		naks     atomic.Int64
		mu       sync.Mutex
		acked    []uint64
		lastSeen atomic.Uint64
	)
	down.Store(true)
	m := memberFunc(func(d *Delivery) bool {
		seq, h := d.Record.Seq, d.Ack
		go func() {
			if down.Load() {
				naks.Add(1)
				_ = reg.Ack(Ack{Handle: h, Kind: AckNak, Delay: 5 * time.Millisecond})
				return
			}
			mu.Lock()
			acked = append(acked, seq)
			mu.Unlock()
			lastSeen.Store(seq)
			_ = reg.Ack(Ack{Handle: h, Kind: AckDone})
		}()
		return true
	})
	join(t, reg, key, "up", m, 16)
	const total = 400
	pad := strings.Repeat("x", 1000)
	for i := 1; i <= total; i++ {
		if _, err := l.Append(context.Background(), &wal.Record{Device: "d", Payload: []byte(fmt.Sprintf("%d|%s", i, pad))}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the oldest record naked a few times", 30*time.Second, func() bool { return naks.Load() >= 5 })
	res, err := l.EnforceRetention()
	if err != nil || res.Dropped == 0 {
		t.Fatalf("retention: %+v, %v: want records dropped", res, err)
	}
	first := l.First(0)
	down.Store(false)
	waitFor(t, "the rest delivered", 30*time.Second, func() bool { return lastSeen.Load() == total })
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(acked); i++ {
		if acked[i] <= acked[i-1] {
			t.Fatalf("acked %d after %d: order broken", acked[i], acked[i-1])
		}
	}
	// Nothing left in the log is lost (records read ahead before the drop
	// may still go out from memory).
	got := map[uint64]bool{}
	for _, s := range acked {
		got[s] = true
	}
	for s := first; s <= total; s++ {
		if !got[s] {
			t.Fatalf("record %d, still in the log (first %d), never acked", s, first)
		}
	}
}
