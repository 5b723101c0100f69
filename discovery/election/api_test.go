package election

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		ok     bool
	}{
		{"default", func(*Config) {}, true},
		{"empty id", func(c *Config) { c.ID = "" }, false},
		{"id with NUL", func(c *Config) { c.ID = "a\x00b" }, false},
		{"id too long", func(c *Config) { c.ID = NodeID(strings.Repeat("x", MaxNameLen+1)) }, false},
		{"negative priority is fine", func(c *Config) { c.Priority = -3 }, true},
		{"answer timeout 0", func(c *Config) { c.AnswerTimeout = 0 }, false},
		{"coordinator timeout equal to answer timeout", func(c *Config) { c.CoordinatorTimeout = c.AnswerTimeout }, false},
		{"coordinator timeout one above", func(c *Config) { c.CoordinatorTimeout = c.AnswerTimeout + 1 }, true},
		{"hand-over timeout 0", func(c *Config) { c.HandOverTimeout = 0 }, false},
		{"announce interval 0", func(c *Config) { c.AnnounceInterval = 0 }, false},
		{"max groups 0", func(c *Config) { c.MaxGroups = 0 }, false},
		{"max peers 0", func(c *Config) { c.MaxPeers = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig("n1")
			tt.modify(&cfg)
			err := cfg.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if _, err := New(cfg); (err == nil) != tt.ok {
				t.Fatalf("New() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestRendezvousHashIsPinned(t *testing.T) {
	// The hash is part of the wire protocol: every node must rank alike, on
	// every architecture and in every version.
	tests := []struct {
		node  NodeID
		group string
		want  uint64
	}{
		{"a", "g1", 0xf038826595e5df75},
		{"b", "g1", 0xbf17b4c49df8b37b},
		{"a", "g2", 0xa42eae99f6bbbf5b},
	}
	for _, tt := range tests {
		if got := RendezvousHash(tt.node, tt.group); got != tt.want {
			t.Errorf("RendezvousHash(%q, %q) = %#x, want %#x", tt.node, tt.group, got, tt.want)
		}
	}
	// node + NUL + group: moving a byte across the separator changes the hash.
	if RendezvousHash("ab", "c") == RendezvousHash("a", "bc") {
		t.Error("the separator does not separate")
	}
}

func TestRankCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b Rank
		want int
	}{
		{"priority wins over hash", Rank{2, 0, "a"}, Rank{1, math.MaxUint64, "b"}, 1},
		{"hash breaks a priority tie", Rank{1, 5, "a"}, Rank{1, 6, "b"}, -1},
		{"node ID breaks a full tie", Rank{1, 5, "b"}, Rank{1, 5, "a"}, 1},
		{"equal", Rank{1, 5, "a"}, Rank{1, 5, "a"}, 0},
		{"negative priority", Rank{-1, 9, "a"}, Rank{0, 0, "b"}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Compare(tt.b); got != tt.want {
				t.Fatalf("Compare = %d, want %d", got, tt.want)
			}
			if got := tt.b.Compare(tt.a); got != -tt.want {
				t.Fatalf("reverse Compare = %d, want %d", got, -tt.want)
			}
			if tt.a.Above(tt.b) != (tt.want > 0) {
				t.Fatalf("Above disagrees with Compare")
			}
		})
	}
}

func TestEpoch(t *testing.T) {
	tests := []struct {
		in      string
		want    Epoch
		wantErr bool
	}{
		{"0", Epoch{}, false},
		{"1:a", Epoch{1, "a"}, false},
		{"18446744073709551614:n9", Epoch{math.MaxUint64 - 1, "n9"}, false},
		{"18446744073709551615:n9", Epoch{}, true}, // could not be followed
		{"0:a", Epoch{}, true},
		{"3:", Epoch{}, true},
		{"3", Epoch{}, true},
		{"3x:a", Epoch{}, true},
		{"-1:a", Epoch{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseEpoch(tt.in)
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrBadEpoch)) {
				t.Fatalf("ParseEpoch = %v, %v", got, err)
			}
			if err == nil && (got != tt.want || got.String() != tt.in) {
				t.Fatalf("ParseEpoch = %v (%q), want %v", got, got.String(), tt.want)
			}
		})
	}
	order := []Epoch{{}, {1, "b"}, {2, "a"}, {2, "b"}, {10, "a"}}
	for i := range order {
		for j := range order {
			if got, want := order[i].Compare(order[j]), cmpInt(i, j); got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// machine builds node id (priority prio) with group g1 and the given live
// peers, and empties its Ready.
func machine(t *testing.T, id NodeID, prio int, peers map[NodeID]int) *Machine {
	t.Helper()
	cfg := DefaultConfig(id)
	cfg.Priority = prio
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddGroup("g1", Epoch{}); err != nil {
		t.Fatal(err)
	}
	ids := make([]NodeID, 0, len(peers))
	for p := range peers {
		ids = append(ids, p)
	}
	slices.Sort(ids)
	for _, p := range ids {
		if err := m.PeerUp(p, peers[p]); err != nil {
			t.Fatal(err)
		}
	}
	m.Ready()
	return m
}

// msgFrom builds a well-formed message from node (priority prio) to m.
func msgFrom(m *Machine, node NodeID, prio int, typ MsgType, epoch Epoch) Message {
	return Message{Type: typ, Group: "g1", From: node, To: m.ID(), Epoch: epoch, Rank: RankOf(node, prio, "g1")}
}

func sent(rd Ready) []string {
	var out []string
	for _, msg := range rd.Messages {
		out = append(out, msg.Type.String()+">"+string(msg.To)+" "+msg.Epoch.String())
	}
	for _, ch := range rd.Changes {
		s := ch.Kind.String() + " " + ch.Epoch.String()
		if ch.HandOver {
			s += " hand-over"
		}
		out = append(out, s)
	}
	return out
}

// Node b (priority 2) with peers a (3, above) and c (1, below).
var bPeers = map[NodeID]int{"a": 3, "c": 1}

// bFollowsA: b follows a at 1:a.
func bFollowsA(t *testing.T) *Machine {
	m := machine(t, "b", 2, bPeers)
	if err := m.Step(msgFrom(m, "a", 3, MsgCoordinator, Epoch{1, "a"})); err != nil {
		t.Fatal(err)
	}
	m.Ready()
	return m
}

// bLeads: b leads at 1:b (no higher node answered its election).
func bLeads(t *testing.T) *Machine {
	m := machine(t, "b", 2, bPeers)
	for range DefaultConfig("b").AnswerTimeout {
		m.Tick()
	}
	rd := m.Ready()
	if st, _ := m.Status("g1"); st.Role != RoleLeader {
		t.Fatalf("setup: b is %v, ready %v", st.Role, sent(rd))
	}
	return m
}

func TestStepReactions(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(*testing.T) *Machine
		from     NodeID
		prio     int
		typ      MsgType
		epoch    Epoch
		wantErr  error
		wantSent []string
		wantRole Role
		leader   NodeID
	}{
		{"leader answers an election with its coordinator", bLeads, "c", 1, MsgElection, Epoch{}, nil,
			[]string{"coordinator>c 1:b"}, RoleLeader, "b"},
		{"follower answers a lower candidate", bFollowsA, "c", 1, MsgElection, Epoch{}, nil,
			[]string{"answer>c 1:a"}, RoleFollower, "a"},
		{"an election from our own leader means it does not lead: elect", bFollowsA, "a", 3, MsgElection, Epoch{1, "a"}, nil,
			[]string{"election>a 1:a", "election>c 1:a"}, RoleCandidate, ""},
		{"a stale coordinator is refused; a leader replies with its own", bLeads, "a", 3, MsgCoordinator, Epoch{1, "a"}, ErrStaleEpoch,
			[]string{"coordinator>a 1:b"}, RoleLeader, "b"},
		{"newer coordinator deposes the leader", bLeads, "c", 1, MsgCoordinator, Epoch{5, "c"}, nil,
			[]string{"step-down 1:b"}, RoleFollower, "c"},
		{"a lower leader's coordinator is followed, but not by the best", bFollowsA, "c", 1, MsgCoordinator, Epoch{2, "c"}, nil,
			nil, RoleFollower, "c"},
		{"coordinator from a peer not up is not followed", bFollowsA, "x", 9, MsgCoordinator, Epoch{2, "x"}, nil,
			[]string{"election>a 2:x", "election>c 2:x"}, RoleCandidate, ""},
		{"hand-over request from a lower node is refused", bLeads, "c", 1, MsgHandOver, Epoch{1, "b"}, nil,
			[]string{"coordinator>c 1:b"}, RoleLeader, "b"},
		{"hand-over request at a stale epoch is refused", bLeads, "a", 3, MsgHandOver, Epoch{}, nil,
			[]string{"coordinator>a 1:b"}, RoleLeader, "b"},
		{"hand-over request from a higher node: drain", bLeads, "a", 3, MsgHandOver, Epoch{1, "b"}, nil,
			[]string{"step-down 1:b hand-over"}, RoleHandingOver, "b"},
		{"a node that does not lead answers a hand-over request at once", bFollowsA, "c", 1, MsgHandOver, Epoch{1, "a"}, nil,
			[]string{"drained>c 1:a"}, RoleFollower, "a"},
		{"answer from a lower node is ignored", func(t *testing.T) *Machine { return machine(t, "b", 2, bPeers) }, "c", 1, MsgAnswer, Epoch{}, nil,
			nil, RoleCandidate, ""},
		{"a newer epoch in any message is observed", bFollowsA, "c", 1, MsgAnswer, Epoch{7, "a"}, nil,
			nil, RoleFollower, "a"},
		{"drained from a node we do not take over from is ignored", bFollowsA, "c", 1, MsgDrained, Epoch{1, "a"}, nil,
			nil, RoleFollower, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.setup(t)
			msg := msgFrom(m, tt.from, tt.prio, tt.typ, tt.epoch)
			if err := m.Step(msg); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Step = %v, want %v", err, tt.wantErr)
			}
			rd := m.Ready()
			if got := sent(rd); !slices.Equal(got, tt.wantSent) {
				t.Errorf("sent %q, want %q", got, tt.wantSent)
			}
			st, _ := m.Status("g1")
			if st.Role != tt.wantRole || st.Leader != tt.leader {
				t.Errorf("status %+v, want role %v leader %q", st, tt.wantRole, tt.leader)
			}
		})
	}
}

func TestStepRejectsMalformed(t *testing.T) {
	good := func(m *Machine) Message { return msgFrom(m, "a", 3, MsgCoordinator, Epoch{1, "a"}) }
	tests := []struct {
		name   string
		modify func(*Message)
		want   error
	}{
		{"well formed", func(*Message) {}, nil},
		{"unknown group", func(msg *Message) { msg.Group = "g9" }, ErrUnknownGroup},
		{"addressed to another node", func(msg *Message) { msg.To = "c" }, ErrBadMessage},
		{"from this node", func(msg *Message) { msg.From, msg.Rank = "b", RankOf("b", 3, "g1") }, ErrBadMessage},
		{"rank of another node", func(msg *Message) { msg.Rank = RankOf("c", 3, "g1") }, ErrBadMessage},
		{"rank hashed for another group", func(msg *Message) { msg.Rank = RankOf("a", 3, "g2") }, ErrBadMessage},
		{"coordinator naming another leader", func(msg *Message) { msg.Epoch = Epoch{1, "c"} }, ErrBadMessage},
		{"coordinator without epoch", func(msg *Message) { msg.Epoch = Epoch{} }, ErrBadMessage},
		{"epoch that cannot be followed", func(msg *Message) { msg.Epoch = Epoch{math.MaxUint64, "a"} }, ErrBadMessage},
		{"unknown type", func(msg *Message) { msg.Type = 0 }, ErrBadMessage},
		{"type beyond the last", func(msg *Message) { msg.Type = MsgDrained + 1 }, ErrBadMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := machine(t, "b", 2, bPeers)
			msg := good(m)
			tt.modify(&msg)
			err := m.Step(msg)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Step = %v, want %v", err, tt.want)
			}
			if st, _ := m.Status("g1"); err != nil && st.Epoch != (Epoch{}) {
				t.Fatalf("a rejected message changed the epoch to %v", st.Epoch)
			}
		})
	}
}

func TestInputErrors(t *testing.T) {
	small := func(t *testing.T) *Machine {
		cfg := DefaultConfig("b")
		cfg.MaxGroups, cfg.MaxPeers = 2, 2
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.AddGroup("g1", Epoch{}); err != nil {
			t.Fatal(err)
		}
		if err := m.PeerUp("a", 1); err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name string
		do   func(*Machine) error
		want error
	}{
		{"add group", func(m *Machine) error { return m.AddGroup("g2", Epoch{3, "a"}) }, nil},
		{"add group twice", func(m *Machine) error { return m.AddGroup("g1", Epoch{}) }, ErrGroupExists},
		{"too many groups", func(m *Machine) error {
			_ = m.AddGroup("g2", Epoch{})
			return m.AddGroup("g3", Epoch{})
		}, ErrTooManyGroups},
		{"group without name", func(m *Machine) error { return m.AddGroup("", Epoch{}) }, ErrBadName},
		{"group with NUL", func(m *Machine) error { return m.AddGroup("g\x00", Epoch{}) }, ErrBadName},
		{"group name too long", func(m *Machine) error { return m.AddGroup(strings.Repeat("g", MaxNameLen+1), Epoch{}) }, ErrBadName},
		{"persisted epoch invalid", func(m *Machine) error { return m.AddGroup("g2", Epoch{0, "a"}) }, ErrBadEpoch},
		{"remove unknown group", func(m *Machine) error { return m.RemoveGroup("g9") }, ErrUnknownGroup},
		{"peer up again (priority change)", func(m *Machine) error { return m.PeerUp("a", 7) }, nil},
		{"peer up self", func(m *Machine) error { return m.PeerUp("b", 1) }, ErrBadName},
		{"peer up bad name", func(m *Machine) error { return m.PeerUp("", 1) }, ErrBadName},
		{"too many peers", func(m *Machine) error {
			_ = m.PeerUp("c", 1)
			return m.PeerUp("d", 1)
		}, ErrTooManyPeers},
		{"peer down unknown", func(m *Machine) error { return m.PeerDown("z") }, ErrUnknownPeer},
		{"drained unknown group", func(m *Machine) error { return m.Drained("g9", Epoch{1, "b"}) }, ErrUnknownGroup},
		{"drained while not handing over", func(m *Machine) error { return m.Drained("g1", Epoch{1, "b"}) }, ErrNotHandingOver},
		{"fence unknown group", func(m *Machine) error { return m.Fence("g9", Epoch{1, "a"}) }, ErrUnknownGroup},
		{"fence invalid epoch", func(m *Machine) error { return m.Fence("g1", Epoch{}) }, ErrBadEpoch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(small(t))
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFenceAndAccept(t *testing.T) {
	tests := []struct {
		name        string
		epoch       Epoch
		accept      bool
		wantErr     error
		wantHighest Epoch
		wantChanges []string
	}{
		{"older number", Epoch{4, "z"}, false, ErrStaleEpoch, Epoch{5, "b"}, nil},
		{"same number, lower leader ID", Epoch{5, "a"}, false, ErrStaleEpoch, Epoch{5, "b"}, nil},
		{"the current epoch", Epoch{5, "b"}, true, nil, Epoch{5, "b"}, nil},
		{"same number, higher leader ID: newer, the leader steps down", Epoch{5, "c"}, true, nil, Epoch{5, "c"}, []string{"step-down 5:b"}},
		{"newer number", Epoch{9, "a"}, true, nil, Epoch{9, "a"}, []string{"step-down 5:b"}},
		{"no epoch", Epoch{}, false, ErrBadEpoch, Epoch{5, "b"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// b restarted with 4:b persisted and leads alone at 5:b.
			m, err := New(DefaultConfig("b"))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.AddGroup("g1", Epoch{4, "b"}); err != nil {
				t.Fatal(err)
			}
			for range DefaultConfig("b").AnswerTimeout {
				m.Tick()
			}
			if l, e, ok := m.Leader("g1"); !ok || l != "b" || e != (Epoch{5, "b"}) {
				t.Fatalf("setup: leader %v %v %v", l, e, ok)
			}
			m.Ready()
			if got := m.Accept("g1", tt.epoch); got != tt.accept {
				t.Fatalf("Accept = %v, want %v", got, tt.accept)
			}
			if st, _ := m.Status("g1"); st.Epoch != (Epoch{5, "b"}) {
				t.Fatalf("Accept changed the epoch to %v", st.Epoch)
			}
			if err := m.Fence("g1", tt.epoch); !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Fence = %v, want %v", err, tt.wantErr)
			}
			rd := m.Ready()
			if st, _ := m.Status("g1"); st.Epoch != tt.wantHighest {
				t.Fatalf("highest %v, want %v", st.Epoch, tt.wantHighest)
			}
			if got := sent(Ready{Changes: rd.Changes}); !slices.Equal(got, tt.wantChanges) {
				t.Fatalf("changes %q, want %q", got, tt.wantChanges)
			}
			raised := tt.wantHighest != (Epoch{5, "b"})
			if persisted := len(rd.Persist) == 1 && rd.Persist[0].Epoch == tt.wantHighest; persisted != raised {
				t.Fatalf("persist %v, want one of %v: %v", rd.Persist, tt.wantHighest, raised)
			}
		})
	}
}

// The Ready that makes a node leader persists the new epoch in the same
// Ready as the BecomeLeader and the COORDINATOR messages (the runner
// persists first); a removed group's leader steps down and its epoch stays
// for the runner to keep; re-adding it with that epoch continues above it.
func TestLeadPersistRemoveReAdd(t *testing.T) {
	m := machine(t, "a", 3, map[NodeID]int{"b": 1})
	for range DefaultConfig("a").AnswerTimeout {
		m.Tick()
	}
	if !m.HasReady() {
		t.Fatal("HasReady = false after winning")
	}
	rd := m.Ready()
	if len(rd.Persist) != 1 || rd.Persist[0] != (Persist{"g1", Epoch{1, "a"}}) {
		t.Fatalf("persist %v", rd.Persist)
	}
	if got, want := sent(rd), []string{"coordinator>b 1:a", "lead 1:a"}; !slices.Equal(got, want) {
		t.Fatalf("sent %q, want %q", got, want)
	}
	if rd := m.Ready(); m.HasReady() || !rd.Empty() {
		t.Fatal("work left after Ready")
	}
	if err := m.RemoveGroup("g1"); err != nil {
		t.Fatal(err)
	}
	rd = m.Ready()
	if got, want := sent(rd), []string{"step-down 1:a"}; !slices.Equal(got, want) {
		t.Fatalf("remove: %q, want %q", got, want)
	}
	if _, _, ok := m.Leader("g1"); ok || m.Accept("g1", Epoch{1, "a"}) || len(m.Groups()) != 0 {
		t.Fatal("group still known after RemoveGroup")
	}
	if err := m.AddGroup("g1", Epoch{1, "a"}); err != nil {
		t.Fatal(err)
	}
	for range DefaultConfig("a").AnswerTimeout {
		m.Tick()
	}
	if l, e, ok := m.Leader("g1"); !ok || l != "a" || e != (Epoch{2, "a"}) {
		t.Fatalf("re-added: leader %v at %v (%v), want a at 2:a", l, e, ok)
	}
}

// A removed group's epoch that was raised but not yet handed out in a
// Ready is emitted by RemoveGroup, so the runner can keep it.
func TestRemoveGroupFlushesPersist(t *testing.T) {
	m := machine(t, "b", 2, bPeers)
	if err := m.Fence("g1", Epoch{4, "a"}); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveGroup("g1"); err != nil {
		t.Fatal(err)
	}
	rd := m.Ready()
	if len(rd.Persist) != 1 || rd.Persist[0] != (Persist{"g1", Epoch{4, "a"}}) {
		t.Fatalf("persist %v, want g1=4:a", rd.Persist)
	}
}

// The end of a take-over, from the side of the higher-ranked node a: it
// leads at the next epoch once the old leader b confirms, dies, or the
// hand-over timeout passes, and not before.
func TestTakeOverEnds(t *testing.T) {
	cfg := DefaultConfig("a")
	tests := []struct {
		name  string
		end   func(*Machine) error
		ticks int // ticks before the end, all without leading
	}{
		{"drained", func(m *Machine) error { return m.Step(msgFrom(m, "b", 1, MsgDrained, Epoch{1, "b"})) }, cfg.HandOverTimeout - 1},
		{"old leader down", func(m *Machine) error { return m.PeerDown("b") }, cfg.HandOverTimeout - 1},
		{"timeout", func(m *Machine) error { m.Tick(); return nil }, cfg.HandOverTimeout - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := machine(t, "a", 3, map[NodeID]int{"b": 1, "c": 1})
			if err := m.Step(msgFrom(m, "b", 1, MsgCoordinator, Epoch{1, "b"})); err != nil {
				t.Fatal(err)
			}
			if got, want := sent(m.Ready()), []string{"handover>b 1:b"}; !slices.Equal(got, want) {
				t.Fatalf("sent %q, want %q", got, want)
			}
			// b still leads: its announcement makes a repeat the request.
			if err := m.Step(msgFrom(m, "b", 1, MsgCoordinator, Epoch{1, "b"})); err != nil {
				t.Fatal(err)
			}
			if got, want := sent(m.Ready()), []string{"handover>b 1:b"}; !slices.Equal(got, want) {
				t.Fatalf("sent %q, want %q", got, want)
			}
			// A DRAINED from another node does not count.
			if err := m.Step(msgFrom(m, "c", 1, MsgDrained, Epoch{1, "b"})); err != nil {
				t.Fatal(err)
			}
			for range tt.ticks {
				m.Tick()
			}
			rd := m.Ready()
			if st, _ := m.Status("g1"); st.Role != RoleTakingOver || st.Leader != "b" || st.Target != "b" || !rd.Empty() {
				t.Fatalf("before the end: %+v, ready %q", st, sent(rd))
			}
			if err := tt.end(m); err != nil {
				t.Fatal(err)
			}
			rd = m.Ready()
			if l, e, ok := m.Leader("g1"); !ok || l != "a" || e != (Epoch{2, "a"}) || len(rd.Persist) != 1 {
				t.Fatalf("after the end: leader %v at %v (%v), ready %v", l, e, ok, sent(rd))
			}
		})
	}
}

// The old leader's side: it drains, confirms to its successor and waits for
// its COORDINATOR; or stops waiting for a drain that outlasts the hand-over
// timeout.
func TestHandOverEnds(t *testing.T) {
	cfg := DefaultConfig("b")
	t.Run("drained", func(t *testing.T) {
		m := bLeads(t)
		if err := m.Step(msgFrom(m, "a", 3, MsgHandOver, Epoch{1, "b"})); err != nil {
			t.Fatal(err)
		}
		m.Ready()
		if err := m.Drained("g1", Epoch{1, "b"}); err != nil {
			t.Fatal(err)
		}
		if got, want := sent(m.Ready()), []string{"drained>a 1:b"}; !slices.Equal(got, want) {
			t.Fatalf("sent %q, want %q", got, want)
		}
		if st, _ := m.Status("g1"); st.Role != RoleCandidate || !st.Answered {
			t.Fatalf("after drained: %+v", st)
		}
		if err := m.Drained("g1", Epoch{1, "b"}); !errors.Is(err, ErrNotHandingOver) {
			t.Fatalf("second Drained = %v", err)
		}
		if err := m.Step(msgFrom(m, "a", 3, MsgCoordinator, Epoch{2, "a"})); err != nil {
			t.Fatal(err)
		}
		if l, e, _ := m.Leader("g1"); l != "a" || e != (Epoch{2, "a"}) {
			t.Fatalf("leader %v %v", l, e)
		}
	})
	t.Run("successor died", func(t *testing.T) {
		m := bLeads(t)
		if err := m.Step(msgFrom(m, "a", 3, MsgHandOver, Epoch{1, "b"})); err != nil {
			t.Fatal(err)
		}
		if err := m.PeerDown("a"); err != nil {
			t.Fatal(err)
		}
		m.Ready()
		if err := m.Drained("g1", Epoch{1, "b"}); err != nil {
			t.Fatal(err)
		}
		if got, want := sent(m.Ready()), []string{"election>c 1:b"}; !slices.Equal(got, want) {
			t.Fatalf("sent %q, want %q", got, want)
		}
	})
	t.Run("drain outlasts the timeout", func(t *testing.T) {
		m := bLeads(t)
		if err := m.Step(msgFrom(m, "a", 3, MsgHandOver, Epoch{1, "b"})); err != nil {
			t.Fatal(err)
		}
		for range cfg.HandOverTimeout - 1 {
			m.Tick()
		}
		if st, _ := m.Status("g1"); st.Role != RoleHandingOver || st.Target != "a" {
			t.Fatalf("before the timeout: %+v", st)
		}
		m.Tick()
		if st, _ := m.Status("g1"); st.Role != RoleCandidate || !st.Answered || m.Stats().DrainTimeouts != 1 {
			t.Fatalf("after the timeout: %+v", st)
		}
		if err := m.Drained("g1", Epoch{1, "b"}); !errors.Is(err, ErrNotHandingOver) {
			t.Fatalf("late Drained = %v", err)
		}
	})
}
