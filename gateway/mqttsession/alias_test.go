package mqttsession

import (
	"errors"
	"testing"
)

func TestInboundAliases(t *testing.T) {
	a := NewInboundAliases(2)
	buf := []byte("telemetry/dev-1")
	for _, tc := range []struct {
		topic string
		alias uint16
		want  string
		err   bool
	}{
		{"a/b", 0, "a/b", false},
		{"", 1, "", true}, // never set
		{"telemetry/dev-1", 1, "telemetry/dev-1", false},
		{"", 1, "telemetry/dev-1", false},
		{"telemetry/dev-2", 1, "telemetry/dev-2", false}, // reset to another topic
		{"", 1, "telemetry/dev-2", false},
		{"x", 2, "x", false},
		{"x", 3, "", true}, // above the maximum
		{"", 3, "", true},
	} {
		topic := []byte(tc.topic)
		if tc.topic == "telemetry/dev-1" {
			topic = buf
		}
		got, err := a.Resolve(topic, tc.alias)
		if (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrTopicAlias)) || string(got) != tc.want {
			t.Fatalf("Resolve(%q, %d) = %q, %v", tc.topic, tc.alias, got, err)
		}
		if tc.topic == "telemetry/dev-1" {
			copy(buf, "XXXXXXXXXXXXXXX") // the read buffer is reused
		}
	}
	if a.Len() != 2 {
		t.Fatalf("%d aliases", a.Len())
	}
	none := NewInboundAliases(0)
	if _, err := none.Resolve([]byte("a"), 1); !errors.Is(err, ErrTopicAlias) {
		t.Fatalf("alias with a maximum of 0: %v", err)
	}
}
