package uplink

import "testing"

func TestJudgeLast(t *testing.T) {
	tests := []struct {
		name string
		m    *lastMsg
		want seenVerdict
		hw   uint64
	}{
		{"nothing on the subject (new or purged stream)", nil, seenKnown, 0},
		{"the device's own last record", &lastMsg{"n1", "d1", "42"}, seenKnown, 42},
		{"another device on a shared subject", &lastMsg{"n1", "d2", "42"}, seenUnknown, 0},
		{"the device through another node", &lastMsg{"n2", "d1", "42"}, seenUnknown, 0},
		{"a message not from edgeq", &lastMsg{}, seenUnknown, 0},
		{"a bad sequence", &lastMsg{"n1", "d1", "x"}, seenUnknown, 0},
	}
	for _, tt := range tests {
		v, hw := judgeLast(tt.m, "n1", "d1")
		if v != tt.want || hw != tt.hw {
			t.Errorf("%s: %v %d, want %v %d", tt.name, v, hw, tt.want, tt.hw)
		}
	}
}

func TestSubjectMatch(t *testing.T) {
	tests := []struct {
		f, s string
		want bool
	}{
		{"plant3.>", "plant3.d1", true},
		{"plant3.>", "plant3.a.b", true},
		{"plant3.>", "plant3", false},
		{"plant3.*", "plant3.d1", true},
		{"plant3.*", "plant3.d1.x", false},
		{"plant3.*.data", "plant3.d1.data", true},
		{"plant3.*.data", "plant3.d1.raw", false},
		{"plant3", "plant3", true},
		{"plant3", "plant3.d1", false},
		{"plant4.>", "plant3.d1", false},
		{">", "a", true},
	}
	for _, tt := range tests {
		if got := subjectMatch(tt.f, tt.s); got != tt.want {
			t.Errorf("subjectMatch(%q, %q) = %v, want %v", tt.f, tt.s, got, tt.want)
		}
	}
}

// TestNATSSeen: what is known of a device holds for one connection, rises
// with each acknowledged record and is dropped by an unknown outcome.
func TestNATSSeen(t *testing.T) {
	s := newNATSSeen()
	a := &Item{Node: "n", Device: "a", Seq: 5}
	k := devKey(a)
	if _, ok := s.known(k, 0); ok {
		t.Fatal("known before any read")
	}
	s.learn(k, 0, 4)
	if hw, ok := s.known(k, 0); !ok || hw != 4 {
		t.Fatalf("known %d %v, want 4", hw, ok)
	}
	s.answered(a, 0, true)
	if hw, _ := s.known(k, 0); hw != 5 {
		t.Fatalf("after an ack of 5: %d", hw)
	}
	s.answered(&Item{Node: "n", Device: "a", Seq: 6}, 0, false)
	if _, ok := s.known(k, 0); ok {
		t.Fatal("still known after a record of unknown outcome")
	}
	s.learn(k, 0, 9)
	s.answered(&Item{Node: "n", Device: "a", Seq: 10}, 1, false) // an answer from an older connection...
	if _, ok := s.known(k, 1); ok {
		t.Fatal("a new connection keeps what was read on the old one")
	}
	s.learn(k, 1, 3)
	s.answered(&Item{Node: "n", Device: "a", Seq: 4}, 0, false) // ... after the switch changes nothing
	if hw, ok := s.known(k, 1); !ok || hw != 3 {
		t.Fatalf("known %d %v on connection 1, want 3", hw, ok)
	}
}
