package mqttsession

import (
	"errors"
	"testing"
)

// TestOutboundIDsWrapAndSkipInUse fills all 65,535 packet IDs, frees two,
// and checks that allocation continues after the last one given, wraps
// from 65,535 to 1, and never hands out an ID in use.
func TestOutboundIDsWrapAndSkipInUse(t *testing.T) {
	o := NewOutbound[int](65535)
	for i := 1; i <= 65535; i++ {
		id, err := o.Send(1, i)
		if err != nil || int(id) != i {
			t.Fatalf("send %d: id %d, %v", i, id, err)
		}
	}
	if _, err := o.Send(1, 0); !errors.Is(err, ErrWindowFull) {
		t.Fatalf("send to a full window: %v", err)
	}
	for _, id := range []uint16{65535, 3} {
		if h, ok := o.Puback(id); !ok || h != int(id) {
			t.Fatalf("puback %d: %d %v", id, h, ok)
		}
	}
	for _, want := range []uint16{3, 65535} {
		if id, err := o.Send(2, 0); err != nil || id != want {
			t.Fatalf("send after freeing: id %d, %v; want %d", id, err, want)
		}
	}
	if got := len(o.Drop()); got != 65535 {
		t.Fatalf("drop returned %d handles", got)
	}
	if id, err := o.Send(1, 0); err != nil || id != 1 {
		t.Fatalf("after drop: id %d, %v", id, err)
	}
}

// TestInboundExactlyOnce: however a QoS 2 PUBLISH is resent (before its
// store completes, after PUBREC, after a restart), it is stored once, and
// its ID is free again after PUBCOMP.
func TestInboundExactlyOnce(t *testing.T) {
	in := NewInbound(10)
	stores := 0
	do := func(a InAction, err error) InAction {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if a == InStore {
			stores++
		}
		return a
	}
	do(in.Publish(2, 7))
	do(in.Publish(2, 7))
	if a := in.Stored(7); a != InPubrec {
		t.Fatalf("stored: %s", a)
	}
	do(in.Publish(2, 7))
	saved := in.Recorded()
	in = NewInbound(10)
	in.Restore(saved)
	if a := do(in.Publish(2, 7)); a != InPubrec {
		t.Fatalf("resent after restart: %s", a)
	}
	if a := do(in.Pubrel(7)); a != InPubcomp {
		t.Fatalf("pubrel: %s", a)
	}
	if stores != 1 {
		t.Fatalf("stored %d times", stores)
	}
	if a := do(in.Publish(2, 7)); a != InStore || in.InFlight() != 1 {
		t.Fatalf("a new message under the freed ID: %s", a)
	}
}
