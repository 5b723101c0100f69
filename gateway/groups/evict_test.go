package groups

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"edgeq/gateway/queue"
)

type idleMember struct{}

func (idleMember) Deliver(*Delivery) bool { return true }

// TestFullRegistryEvictsIdleGroup: with max_groups reached, a new group
// takes the place of the undeclared group without members for longest
// (at least EvictIdle); declared groups and groups with members stay, and
// with none to evict the new one is refused.
func TestFullRegistryEvictsIdleGroup(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	reg := NewRegistry(Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: queue.DefaultConfig(), GroupTTL: time.Hour,
		MaxGroups: 3, EvictIdle: time.Nanosecond}, l, quiet())
	defer reg.Drain(time.Now().Add(time.Second))
	key := func(i int) GroupKey { return GroupKey{Filter: "telemetry.>", Queue: fmt.Sprintf("q%d", i)} }
	if err := reg.Declare(GroupConfig{Key: key(0), Core: queue.DefaultConfig(), Declared: true}); err != nil {
		t.Fatal(err)
	}
	join(t, reg, key(1), "busy", idleMember{}, 1)
	join(t, reg, key(2), "gone", idleMember{}, 1)
	reg.Leave(key(2), "gone") // q2: no members, undeclared
	join(t, reg, key(3), "new", idleMember{}, 1)
	have := map[string]bool{}
	for _, g := range reg.Stats() {
		have[g.Key.Queue] = true
	}
	if !have["q0"] || !have["q1"] || have["q2"] || !have["q3"] || len(have) != 3 {
		t.Fatalf("groups after the eviction: %v, want q0 q1 q3", have)
	}
	// Now every group is declared or has members: a new one is refused.
	if _, err := reg.Join(key(4), "late", idleMember{}, 1); !errors.Is(err, ErrTooManyGroups) {
		t.Fatalf("join with no group to evict: %v", err)
	}
}
