package groups

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"edgeq/gateway/queue"
	"edgeq/wal"
)

// TestBudgetRereadsReleasedRecords: under a node read-ahead budget a
// delivered record no longer holds its bytes in the group; when it must go
// out again (here: ack_wait expired) the runner reads it from the log, and
// the member gets the same record (decoded and raw) in the same order.
func TestBudgetRereadsReleasedRecords(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	// Only bounds the test: first deliveries are never answered, the
	// second ones at once; a slow machine only delays the redeliveries.
	cfg.AckWait = 300 * time.Millisecond
	cfg.MaxDeliver = 100
	reg := NewRegistry(Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: cfg, GroupTTL: time.Hour, MaxGroups: 8,
		ReadAheadBudget: 256 << 10}, l, quiet())
	const devices, per = 3, 5
	publish(t, l, devices, per)

	var mu sync.Mutex
	second := map[string][]uint64{} // device -> seqs acked on a later delivery, in delivery order
	var bad []string
	m := memberFunc(func(d *Delivery) bool {
		var rec wal.Record
		want := fmt.Sprintf("%s#%d", d.Record.Device, d.Record.Seq)
		err := wal.DecodeRecord(d.Raw, &rec)
		mu.Lock()
		defer mu.Unlock()
		if string(d.Record.Payload) != want || err != nil || string(rec.Payload) != want || rec.Seq != d.Record.Seq {
			bad = append(bad, fmt.Sprintf("delivery %d of %s: payload %q, raw %q (%v)", d.Deliveries, want, d.Record.Payload, rec.Payload, err))
		}
		if d.Deliveries == 1 {
			return true // never answered: comes again after ack_wait
		}
		dev := d.Record.Device
		second[dev] = append(second[dev], d.Record.Seq)
		h := d.Ack
		go func() { _ = reg.Ack(Ack{Handle: h, Kind: AckDone}) }()
		return true
	})
	key := GroupKey{"telemetry.>", "q"}
	join(t, reg, key, "m1", m, 64)
	waitFor(t, "every record acked on its second delivery", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range second {
			n += len(s)
		}
		return n >= devices*per
	})
	reg.Drain(time.Now().Add(5 * time.Second))
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d deliveries wrong, first: %s", len(bad), bad[0])
	}
	for dev, seqs := range second {
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("%s acked in the order %v, want 1..%d", dev, seqs, per)
			}
		}
	}
	c := reg.Counters()
	if c.Rereads < devices*per || c.ReadAheadBudget != 256<<10 {
		t.Fatalf("counters %+v: want at least %d records read again and the budget 256 KiB", c, devices*per)
	}
}
