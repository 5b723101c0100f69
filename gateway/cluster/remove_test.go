package cluster

import (
	"fmt"
	"testing"
	"time"
)

// TestTombstones: a deleted group's tombstone holds for tombstoneFor, a
// new member clears it, and the table keeps at most maxTombstones (the
// oldest goes).
func TestTombstones(t *testing.T) {
	var ts tombstones
	t0 := time.Unix(1000, 0)
	ts.add("g", t0)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {tombstoneFor - time.Nanosecond, true}, {tombstoneFor, false}} {
		if got := ts.has("g", t0.Add(tc.at)); got != tc.want {
			t.Fatalf("has after %v: %v, want %v", tc.at, got, tc.want)
		}
	}
	ts.clear("g")
	if ts.has("g", t0) {
		t.Fatal("cleared tombstone still there")
	}
	for i := range maxTombstones + 1 {
		ts.add(fmt.Sprintf("g%d", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(ts.at) != maxTombstones || ts.has("g0", t0) || !ts.has(fmt.Sprintf("g%d", maxTombstones), t0.Add(time.Second)) {
		t.Fatalf("bound: %d tombstones, oldest kept %v", len(ts.at), ts.has("g0", t0))
	}
}

func TestRemovedWire(t *testing.T) {
	g := GroupName{Filter: "telemetry.>", Queue: "q"}
	got, err := DecodeRemoved(AppendRemoved(nil, g))
	if err != nil || got != g {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := DecodeRemoved(append(AppendRemoved(nil, g), 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}
