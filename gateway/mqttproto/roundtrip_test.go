package mqttproto

import (
	"bytes"
	"testing"
)

// decodeAll parses a whole stream and returns its complete packets (valid until the
// parser is fed again, which it is not).
func decodeAll(t testing.TB, lim Limits, how stream, s []byte) ([]Packet, error) {
	t.Helper()
	p, err := NewParser(lim, how.side)
	if err != nil {
		t.Fatal(err)
	}
	if how.side == ClientSide {
		p.SetVersion(how.version)
	}
	if err := p.Feed(s); err != nil {
		t.Fatal(err)
	}
	var out []Packet
	for {
		pkt, ok, err := p.Next()
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil // an incomplete packet at the end is left out
		}
		out = append(out, pkt)
	}
}

// TestRoundTrip: every packet of the corpus decodes, and the decoded packet
// (user properties and subscriptions read from the input, not rebuilt)
// encodes to the same bytes.
func TestRoundTrip(t *testing.T) {
	for _, sc := range streamCases(t) {
		s := bytes.Join(sc.pkts, nil)
		pkts, err := decodeAll(t, splitLimits, sc.how, s)
		if err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
		if len(pkts) != len(sc.pkts) {
			t.Fatalf("%s: %d packets, want %d", sc.name, len(pkts), len(sc.pkts))
		}
		for i := range pkts {
			again, err := Append(nil, &pkts[i])
			if err != nil {
				t.Fatalf("%s packet %d (%s): %v", sc.name, i, pktText(pkts[i]), err)
			}
			if !bytes.Equal(again, sc.pkts[i]) {
				t.Errorf("%s packet %d (%s):\n re-encoded % x\n  original % x", sc.name, i, pkts[i].Type, again, sc.pkts[i])
			}
		}
	}
}

func TestAppendRefusesWhatWouldNotDecode(t *testing.T) {
	long := make([]byte, 65536)
	for _, tc := range []struct {
		name string
		p    Packet
		want error
	}{
		{"no version", Packet{Type: PINGRESP}, ErrUnsupportedVersion},
		{"QoS 1 without packet ID", Packet{Type: PUBLISH, Version: Version5, QoS: 1, Topic: []byte("a")}, ErrProtocol},
		{"QoS 3", Packet{Type: PUBLISH, Version: Version311, QoS: 3, PacketID: 1, Topic: []byte("a")}, ErrMalformed},
		{"DUP at QoS 0", Packet{Type: PUBLISH, Version: Version311, Dup: true, Topic: []byte("a")}, ErrMalformed},
		{"topic over 65535 bytes", Packet{Type: PUBLISH, Version: Version311, Topic: long}, ErrMalformed},
		{"topic with U+0000", Packet{Type: PUBLISH, Version: Version311, Topic: []byte("a\x00")}, ErrMalformed},
		{"3.1.1 ack with a reason", Packet{Type: PUBACK, Version: Version311, PacketID: 1, Reason: QuotaExceeded}, ErrProtocol},
		{"PUBREL with a PUBACK reason", Packet{Type: PUBREL, Version: Version5, PacketID: 1, Reason: QuotaExceeded}, ErrProtocol},
		{"property not allowed", Packet{Type: PUBACK, Version: Version5, PacketID: 1, Props: pr(PropTopicAlias, 1)}, ErrProtocol},
		{"SUBACK without codes", Packet{Type: SUBACK, Version: Version5, PacketID: 1}, ErrProtocol},
		{"SUBSCRIBE without filters", Packet{Type: SUBSCRIBE, Version: Version5, PacketID: 1}, ErrProtocol},
		{"AUTH in 3.1.1", Packet{Type: AUTH, Version: Version311}, ErrProtocol},
		{"CONNECT without fields", Packet{Type: CONNECT, Version: Version5}, ErrProtocol},
		{"3.1.1 CONNACK code 6", Packet{Type: CONNACK, Version: Version311, Reason: 6}, ErrProtocol},
	} {
		dst := []byte("keep")
		got, err := Append(dst, &tc.p)
		if sentinelOf(err) != tc.want {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if string(got) != "keep" {
			t.Errorf("%s: dst changed to %q", tc.name, got)
		}
	}
}

func TestAppendAck(t *testing.T) {
	for _, tc := range []struct {
		v      Version
		t      Type
		reason ReasonCode
		want   []byte
	}{
		{Version311, PUBACK, Success, []byte{0x40, 2, 0x12, 0x34}},
		{Version311, PUBREL, Success, []byte{0x62, 2, 0x12, 0x34}},
		{Version5, PUBREC, Success, []byte{0x50, 2, 0x12, 0x34}},
		{Version5, PUBACK, TopicNameInvalid, []byte{0x40, 3, 0x12, 0x34, 0x90}},
		{Version5, PUBCOMP, PacketIdentifierNotFound, []byte{0x70, 3, 0x12, 0x34, 0x92}},
	} {
		got, err := AppendAck(nil, tc.v, tc.t, 0x1234, tc.reason)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s %s 0x%02x: % x, %v; want % x", tc.v, tc.t, byte(tc.reason), got, err, tc.want)
		}
	}
	if _, err := AppendAck(nil, Version5, SUBACK, 1, 0); err == nil {
		t.Error("AppendAck took SUBACK")
	}
}
