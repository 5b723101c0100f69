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

// TestForgetAndExpireLed: in a cluster, Forget drops a group here (refused
// while it has a member here), and Expire hands a led group idle past
// GroupTTL to ExpireLed, counted as removed, not deleted on demand; a
// group with a member anywhere, or declared, stays.
func TestForgetAndExpireLed(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	net := &memNet{regs: map[string]*Registry{}, down: map[string]bool{}, fenced: map[string]map[string]bool{}}
	var reg *Registry
	var expired []GroupKey
	reg = NewRegistry(Config{Node: "n1", TelemetryPrefix: "telemetry", Defaults: queue.DefaultConfig(), GroupTTL: time.Minute, MaxGroups: 8,
		Peers: &memPeers{net: net, self: "n1"}, ExpireLed: func(k GroupKey) error {
			expired = append(expired, k)
			return reg.Forget(k)
		}}, l, quiet())
	net.regs["n1"] = reg
	defer reg.Drain(time.Now().Add(time.Second))
	key := func(q string) GroupKey { return GroupKey{Filter: "telemetry.>", Queue: q} }
	for _, q := range []string{"idle", "busy", "remote", "decl"} {
		if q == "decl" {
			if err := reg.Declare(GroupConfig{Key: key(q), Core: queue.DefaultConfig()}); err != nil {
				t.Fatal(err)
			}
		}
		if err := reg.Lead(key(q)); err != nil {
			t.Fatal(err)
		}
	}
	join(t, reg, key("idle"), "m", idleMember{}, 1)
	if err := reg.Forget(key("idle")); !errors.Is(err, ErrGroupShared) {
		t.Fatalf("Forget with a member here: %v", err)
	}
	reg.Leave(key("idle"), "m")
	join(t, reg, key("busy"), "b", idleMember{}, 1)
	if err := reg.RemoteMembers("n2", key("remote"), false, false, []RemoteMember{{ID: "x", Credit: 1}}); err != nil {
		t.Fatal(err)
	}
	reg.Expire(time.Now().Add(30 * time.Second)) // before group_ttl
	if len(expired) != 0 {
		t.Fatalf("expired before group_ttl: %v", expired)
	}
	reg.Expire(time.Now().Add(2 * time.Minute))
	if len(expired) != 1 || expired[0] != key("idle") {
		t.Fatalf("handed to ExpireLed: %v, want only idle", expired)
	}
	have := map[string]bool{}
	for _, g := range reg.Stats() {
		have[g.Key.Queue] = true
	}
	if have["idle"] || !have["busy"] || !have["remote"] || !have["decl"] || l.Offsets().Has(key("idle").consumerName()) {
		t.Fatalf("groups after expiry: %v (offsets of idle kept: %v)", have, l.Offsets().Has(key("idle").consumerName()))
	}
	if c := reg.Counters(); c.RemovedGroups != 1 || c.DeletedGroups != 0 {
		t.Fatalf("counters: removed %d deleted %d, want 1 and 0", c.RemovedGroups, c.DeletedGroups)
	}
	reg.Leave(key("busy"), "b")
	if err := reg.Forget(key("busy")); err != nil {
		t.Fatal(err)
	}
	if c := reg.Counters(); c.DeletedGroups != 1 {
		t.Fatalf("a Forget on demand: deleted %d, want 1", c.DeletedGroups)
	}
}
