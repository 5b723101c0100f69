package cluster

import (
	"testing"

	"edgeq/discovery/election"
)

func sampleElection() election.Message {
	return election.Message{Type: election.MsgCoordinator, Group: "telemetry.> uploader", From: "gw-a", To: "gw-b",
		Epoch: election.Epoch{N: 7, Leader: "gw-a"}, Rank: election.Rank{Priority: -3, Hash: 0xdeadbeefcafef00d, Node: "gw-a"}}
}

func TestElectionWireRoundTrip(t *testing.T) {
	msg := sampleElection()
	b := AppendElection(nil, msg)
	got, err := DecodeElection(b)
	if err != nil || got != msg {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := DecodeElection(b[:n]); err == nil {
			t.Fatalf("truncation to %d bytes decoded", n)
		}
	}
	if _, err := DecodeElection(append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func FuzzDecodeElection(f *testing.F) {
	f.Add(AppendElection(nil, sampleElection()))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := DecodeElection(b)
		if err != nil {
			return
		}
		// Varints may be non-minimal on input, so compare decoded values.
		again, err := DecodeElection(AppendElection(nil, msg))
		if err != nil || again != msg {
			t.Fatalf("re-encoded message decodes as %+v, %v; want %+v", again, err, msg)
		}
	})
}
