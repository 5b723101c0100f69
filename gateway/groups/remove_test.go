package groups

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"edgeq/gateway/queue"
)

func TestRemoveGroup(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	cfg := queue.DefaultConfig()
	cfg.Deliver = queue.DeliverAll
	reg := newRegistry(l, cfg, nil)
	defer reg.Drain(time.Now().Add(time.Second))
	publish(t, l, 4, 5)
	key := GroupKey{Filter: "telemetry.>", Queue: "rm"}
	own := &counting{} // takes everything, never acks
	other := memberFunc(func(*Delivery) bool { return false })
	join(t, reg, key, "own", own, 10)
	waitFor(t, "deliveries", 30*time.Second, func() bool { return own.n.Load() > 0 })
	isOwn := func(m Member) bool { _, ok := m.(*counting); return ok }
	join(t, reg, key, "other", other, 0)
	if err := reg.Remove(key, isOwn); !errors.Is(err, ErrGroupShared) {
		t.Fatalf("shared group removed: %v", err)
	}
	if len(reg.Stats()) != 1 {
		t.Fatal("a refused remove changed the groups")
	}
	reg.Leave(key, "other")
	if err := reg.Remove(key, isOwn); err != nil {
		t.Fatal(err)
	}
	if len(reg.Stats()) != 0 || l.Offsets().Has(key.consumerName()) {
		t.Fatalf("after remove: %+v, offsets kept %v", reg.Stats(), l.Offsets().Has(key.consumerName()))
	}
	if err := reg.Remove(key, isOwn); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("second remove: %v", err)
	}
	// An ack of a removed group's delivery is stale, not an error that
	// reaches anything.
	if err := reg.Ack(Ack{Handle: AckHandle{Group: 1, Member: "own", Offset: 1, Deliveries: 1}, Kind: AckDone}); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("stale ack: %v", err)
	}
	// The same key again is a new group, started by its policy.
	join(t, reg, key, "own", own, 10)
	if st := reg.Stats(); len(st) != 1 || !l.Offsets().Has(key.consumerName()) {
		t.Fatalf("recreated: %+v", st)
	}
}

// counting takes every delivery and never answers.
type counting struct{ n atomic.Int64 }

func (c *counting) Deliver(*Delivery) bool { c.n.Add(1); return true }
